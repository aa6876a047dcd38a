/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * What the GPU backend found on each device it opened: name, compute
 * capability, driver and runtime versions, and whether the kernels run as
 * machine code built for this GPU ("native") or as PTX the driver compiled
 * at start ("ptx-jit"), and whether a sticky error lost its context. The
 * CUDA backend records it (zcp_gpu_info_set) when a device probes usable;
 * exporters read it (/metrics zcpipe_gpu_info, zcpipe_gpu_sticky_error).
 *
 * Any thread: a small table under a mutex, copied out by value.
 */
#include <stdbool.h>
#include <stdint.h>

#define ZCP_GPU_INFO_MAX 16

struct zcp_gpu_info {
        uint32_t device;
        char name[96];
        int cc_major, cc_minor;      /* compute capability */
        char driver[32];             /* kernel driver version ("580.159.04"), "" when unknown */
        int driver_cuda;             /* CUDA version the driver supports, e.g. 13000 */
        int runtime;                 /* CUDA runtime linked in, e.g. 13000 */
        int ptx_version;             /* cudaFuncGetAttributes of a kernel: PTX it came from (75, 90) */
        int binary_version;          /* ... and the machine code it runs (90) */
        bool ptx_jit;                /* compiled from PTX by the driver at start */
        bool sticky;                 /* a sticky error lost this GPU's context (the process exits 86) */
};

/* "13.0" from 13000. Returns buf. */
const char *zcp_cuda_version_str(int v, char *buf, unsigned size);

/* Records (or replaces) the entry of info->device. */
void zcp_gpu_info_set(const struct zcp_gpu_info *info);
/* Marks the entry of `device` lost to a sticky error (its other fields stay). */
void zcp_gpu_info_mark_sticky(uint32_t device);
/* Copies up to `max` entries, in device order; returns how many. */
uint32_t zcp_gpu_info_list(struct zcp_gpu_info *ret, uint32_t max);
/* For tests: forgets every entry. */
void zcp_gpu_info_reset(void);
