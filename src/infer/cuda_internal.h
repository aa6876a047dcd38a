/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Internal to the CUDA backend (not a public interface): the per-stream state and the functions
 * its files share. cuda.c: the backend ops (open, close, submit, wait) and transfer auto's
 * per-GPU plan; cuda_graph.c: the per-slot CUDA graphs (capture, frames that move, timing the
 * transfer modes); cuda_device.c: the device (probe and why a GPU cannot be used, the current
 * device per thread, sticky errors); cuda_alloc.c: the ring allocator (mapped pinned memory).
 *
 * Threads: as backend.h says of the ops that call these.
 */
#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "infer/backend.h"
#include "infer/waitplan.h"
#include "zcp_kernels.h"

/* A slot's per-frame sequence in one transfer mode. */
struct cgraph {
        cudaGraphExec_t exec;
        cudaGraph_t graph;       /* what exec was instantiated from (its nodes are changed through it) */
        void *node;              /* cudaGraphNode_t reading the frame: pass 1 (zero-copy) or the copy; NULL: none */
        const void *reads;       /* the frame memory exec reads now (device alias, or host memory in copy mode) */
};

/* Graph sets by transfer mode: [ZCP_CUDA_XZC] zero-copy, [ZCP_CUDA_XCOPY] copy (also the modes of xferplan.h). */
#define ZCP_CUDA_XZC   0u
#define ZCP_CUDA_XCOPY 1u

/* The graph set of a resolved transfer mode. */
static inline uint32_t zcp_cuda_gset(enum zcp_transfer t)
{
        return t == ZCP_TRANSFER_COPY ? ZCP_CUDA_XCOPY : ZCP_CUDA_XZC;
}

struct cslot {
        struct cgraph g[2];      /* a fixed mode captures its own; auto both */
        cudaEvent_t done;
        uint32_t mode;           /* the graph set of the frame in flight */
        uint64_t seq;            /* frame in flight */
        uint64_t submitted;      /* when it was launched (CLOCK_MONOTONIC ns), for the hybrid wait */
        bool busy;
};

struct xshare;

struct zcp_backend_ctx {
        char name[ZCP_NAME_MAX];
        uint32_t device;
        enum zcp_sync sync;
        struct zcp_waitplan plan;            /* sync hybrid: when to wake (waitplan.h) */
        bool slack_set;                      /* sync hybrid: the waiting thread's timer slack is 1 ns */
        enum zcp_transfer transfer;          /* resolved: ZERO_COPY or COPY (auto: the start-up choice) */
        bool adaptive;                       /* transfer auto: re-decided per frame by the GPU's plan */
        struct xshare *xs;                   /* transfer auto: the plan of this GPU's auto streams */
        uint64_t xs_switches0;               /* its switches when this stream joined */
        uint64_t xframes[2];                 /* transfer auto: this stream's frames per mode */
        atomic_uint mode_now;                /* ZCP_CUDA_XZC or XCOPY, for transfer_mode() on other threads */
        _Atomic uint64_t switches_now;       /* switches since this stream joined, for transfer_switches() */
        uint32_t width, height, top_k;
        struct zcp_det_params det;           /* CENTERNET heads' post-processing */
        size_t frame_bytes;                  /* NV12 bytes (copy mode copies these) */
        bool motion;
        bool mask;                           /* the ring's slots have masks of this grid */
        struct zcp_ring *ring;
        cudaStream_t stream, side;
        cudaEvent_t fork, join;
        struct zcp_k_pre *pre;
        struct zcp_k_model *model;           /* the plan's weights, shared; NULL: motion only */
        struct zcp_k_net *net;               /* this stream's arena and launches; NULL: motion only */
        struct zcp_k_motion *mo;             /* NULL: motion disabled */
        uint32_t *grid;
        struct zcp_result *stage;            /* device memory */
        uint8_t *frame_dev;                  /* copy mode */
        size_t dev_bytes;
        struct cslot *slots;
        uint32_t nslots;
        double median_us[ZCP_TRANSFER_COUNT];
        bool sticky;
};

/* cuda_device.c */
/* The runtime's current device is per thread: sets it once per thread. */
cudaError_t zcp_cuda_use_device(uint32_t device);
/* Mapped host memory on (before the context exists), then zcp_cuda_use_device. */
cudaError_t zcp_cuda_init_device(uint32_t device);
int zcp_cuda_probe(uint32_t device, char *why, size_t whylen);
/* cudaGetDeviceCount, 0 on any error; ZCP_FAULT_GPU_COUNT=N (tests) says N instead. */
uint32_t zcp_cuda_device_count(void);
/*
 * Classifies a failed call at `stage` of frame `seq`: clears a non-sticky error (-EIO, logged
 * rate-limited); a sticky one (by code, or because cudaGetLastError keeps returning it) marks
 * the context lost, logged once (ZCP_ERR_GPU_STICKY).
 */
int zcp_cuda_gpu_error(struct zcp_backend_ctx *ctx, cudaError_t e, const char *stage, uint64_t seq);

/* cuda_alloc.c */
int zcp_cuda_allocator(uint32_t device, struct zcp_allocator *ret_alloc);
/*
 * A ring of the cuda allocator made for another GPU than `device`: its slots' device aliases
 * become those `device` dereferences (portable memory is mapped for every GPU; under unified
 * addressing the aliases do not change). A ring made for `device`, or by another allocator, is
 * left as it is. Returns 0, -ENODEV, or -EINVAL for memory `device` cannot reach. Main thread.
 */
int zcp_cuda_ring_adopt(struct zcp_ring *ring, uint32_t device);

/* cuda_graph.c */
/* Logs a failed setup step with the ring geometry; -ENOMEM or -EIO. */
int zcp_cuda_open_fail(const struct zcp_backend_ctx *ctx, cudaError_t e, const char *what, const char *detail);
/* cudaMalloc counted in ctx->dev_bytes, logged on failure. */
int zcp_cuda_dev_alloc(struct zcp_backend_ctx *ctx, void **ret, size_t bytes, const char *what);
/* Captures the first `count` slots' graphs of `mode` (ZERO_COPY or COPY); on failure none is left. */
int zcp_cuda_capture_all(struct zcp_backend_ctx *ctx, enum zcp_transfer mode, uint32_t count);
void zcp_cuda_destroy_execs(struct zcp_backend_ctx *ctx);
/* transfer auto at open: times both modes on the stream's geometry, sets ctx->transfer. */
int zcp_cuda_choose_transfer(struct zcp_backend_ctx *ctx);
/* Points cg's exec at the frame memory `want` the slot holds now (frames that move). */
int zcp_cuda_use_frame(struct zcp_backend_ctx *ctx, struct cgraph *cg, bool copy, const struct zcp_slot *slot,
                       const void *want);
