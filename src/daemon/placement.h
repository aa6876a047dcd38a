/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Which GPU a stream runs on. `gpu.device: N` pins a stream to GPU N;
 * `auto` (the default) puts it on the usable GPU that runs the fewest
 * streams when it opens, the lowest index among equals. Fewest streams, not
 * most free memory: a stream's GPU memory is small next to what it asks of
 * the GPU's time and its copy engines (its ring is host memory), and a count
 * gives the same placement for the same config on every start, where free
 * memory moves with everything else the GPUs run.
 *
 * On a host with one GPU, auto is GPU 0, as a config without the key always
 * was; with none (or a build without CUDA) it is 0 too and the stream's
 * backend choice decides as before (auto -> cpu). A number the host has no
 * GPU for is a configuration error (78) at start, on reload and at --check,
 * where the host has at least one GPU.
 *
 * zcp_place and zcp_place_check are pure (unit-tested without a GPU);
 * zcp_gpu_host_probe asks the backend. Main thread.
 */
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

#define ZCP_GPU_MAX 64                      /* gpu.device's range: 0..63 */

/* The host's GPUs as placement sees them. */
struct zcp_gpu_host {
        uint32_t count;                     /* CUDA devices present; 0 without (or without CUDA in the build) */
        uint64_t usable;                    /* bit d: GPU d may take auto streams */
};

/*
 * The GPU for a stream whose config says `want` (a number or
 * ZCP_GPU_DEVICE_AUTO), given `streams[d]`, how many streams run on GPU d
 * now (ZCP_GPU_MAX entries; the stream itself not counted). Auto: the usable
 * GPU with the fewest, ties to the lowest index; GPU 0 when none is usable
 * or there is none. A number: itself. Returns 0 and *ret_device, or -ENXIO
 * (a number at or past host->count > 0) with the reason in `why`.
 */
int zcp_place(uint32_t want, const struct zcp_gpu_host *host, const uint32_t *streams, uint32_t *ret_device,
              char *why, size_t whylen);

/*
 * Every stream of `cfg` that may use a GPU (backend auto or cuda) and pins
 * one against `host`: 0, or ZCP_ERR_CONFIG with "FILE: stream NAME:
 * gpu.device N, but this host has ...; fix: ..." in msg (the first one).
 */
int zcp_place_check(const struct zcp_config *cfg, const struct zcp_gpu_host *host, char *msg, size_t size);

/*
 * zcp_place_check against this host's GPUs, counted (not probed) only where
 * a stream that may use a GPU pins a number. Start, reload and --check.
 */
int zcp_place_check_host(const struct zcp_config *cfg, char *msg, size_t size);

/*
 * The host's GPUs: how many, and, when `probe` is set and there are several,
 * which are usable (each probed once through the backend: a GPU it cannot
 * use gets no auto stream). Without `probe`, or with one GPU, every GPU
 * counts as usable, as the stream's own backend choice probes it anyway.
 */
void zcp_gpu_host_probe(bool probe, struct zcp_gpu_host *ret);

/* True when some stream of `cfg` is placed by auto on a GPU (backend auto or cuda, gpu.device auto). */
bool zcp_place_needs_probe(const struct zcp_config *cfg);
