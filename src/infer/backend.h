/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Backend ops: where the model runs. `cuda` (GPU reads the mapped slot) and
 * `cpu` (the C reference of every kernel). One backend instance per stream.
 *
 * Threads: probe/allocator/open/close on the main thread; submit/wait on the
 * stream's infer thread only.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/err.h"
#include "core/kparams.h"
#include "core/ring.h"
#include "model/plan.h"

/* A sticky device error is ZCP_ERR_GPU_STICKY (core/err.h): the process must exit. */

struct zcp_backend_ctx;   /* each implementation defines its own */

/*
 * What a backend is opened with: the stream's config, the plan it runs and what every backend
 * computes from them in the same way (zcp_backend_params_init): the model input made from each
 * frame, the classifier's k, the detector's post-processing with the boxes mapped back to the
 * frame.
 */
struct zcp_backend_params {
        const struct zcp_stream_config *cfg;
        const struct zcp_plan *model;      /* NULL when cfg->model.enabled is false */
        uint32_t width, height;            /* NV12 frame geometry */
        const char *stream_name;
        struct zcp_preprocess_params pre;  /* frame -> the plan's input tensor (NHWC); and the motion cell */
        uint32_t top_k;                    /* CLASSIFY heads: min(model.top_k, classes, ZCP_TOPK_MAX) */
        struct zcp_det_params det;         /* detector heads: threshold, classes, NMS, top N, frame mapping */
};

/*
 * Fills p from the config, the plan (NULL: motion only) and the frame geometry. Returns 0, or
 * -EINVAL with the reason in err (a model.classes entry the model does not have). Any thread.
 */
int zcp_backend_params_init(struct zcp_backend_params *p, const struct zcp_stream_config *cfg,
                            const struct zcp_plan *model, uint32_t width, uint32_t height, const char *stream_name,
                            char *err, size_t errlen);

struct zcp_backend_ops {
        const char *name;   /* matches zcp_backend_kind_names */
        /* 0 when usable on `device`; else negative errno and a reason in why. */
        int (*probe)(uint32_t device, char *why, size_t whylen);
        /* How many devices of this kind the host has (0 when none, or no driver); NULL: none. Main thread. */
        uint32_t (*devices)(void);
        /* The allocator ring memory must come from for this backend. */
        int (*allocator)(uint32_t device, struct zcp_allocator *ret_alloc);
        /*
         * Prepares per-stream state for frames of the given geometry in `ring`
         * (device buffers, graphs, transfer-mode choice). Logs and returns
         * negative errno on failure (allocation failures name bytes and geometry).
         */
        int (*open)(const struct zcp_backend_params *p, struct zcp_ring *ring,
                    struct zcp_backend_ctx **ret_ctx);
        /* Starts work on the NV12 frame in `slot`. */
        int (*submit)(struct zcp_backend_ctx *ctx, struct zcp_slot *slot);
        /*
         * Waits until slot->result is complete and visible to the CPU.
         * Returns 0, a negative errno for a failed frame, or ZCP_ERR_GPU_STICKY.
         */
        int (*wait)(struct zcp_backend_ctx *ctx, struct zcp_slot *slot);
        /* e.g. "zero-copy", "copy", "host" for the info label: the mode in use now. Any thread. */
        const char *(*transfer_mode)(const struct zcp_backend_ctx *ctx);
        /* How often `transfer: auto` changed the mode while running; NULL where it never does. Any thread. */
        uint64_t (*transfer_switches)(const struct zcp_backend_ctx *ctx);
        void (*close)(struct zcp_backend_ctx *ctx);
};

extern const struct zcp_backend_ops zcp_backend_cpu;
#if HAVE_CUDA
extern const struct zcp_backend_ops zcp_backend_cuda;
#endif

/* The backend a stream got, and why (logged, shown in STATUS= and /stats). */
struct zcp_backend_choice {
        const struct zcp_backend_ops *ops;
        /*
         * "configured", "GPU usable", "no CUDA device", "no NVIDIA driver ...",
         * "this build has no CUDA support", or for a GPU that exists but cannot
         * be used, "GPU 0 cannot be used: CAUSE; fix: WHAT TO DO".
         */
        char why[384];
        bool degraded;   /* auto fell back to cpu although a GPU is there (warned) */
};

/*
 * Resolves `kind`: auto -> cuda when the device probes usable, else cpu,
 * logging why (info without a GPU; a warning naming cause and fix when a GPU
 * is there but unusable: no code for it, driver too old, out of memory).
 * Returns 0 and *ret, or -ENODEV with that reason logged as an error when
 * `cuda` was asked for and cannot be used (main exits ZCP_EXIT_NO_DEVICE).
 * Main thread. The probe's fault injection for tests: ZCP_FAULT_GPU=
 * no-driver|no-device|driver-too-old|no-kernel-image|out-of-memory.
 */
int zcp_backend_choose(enum zcp_backend_kind kind, uint32_t device, struct zcp_backend_choice *ret);

/*
 * Resolves `kind` (auto -> cuda when probe succeeds, else cpu, logging why).
 * Returns 0 and *ret_ops, or -ENODEV with a logged error when `cuda` was
 * asked for and is unusable (main exits ZCP_EXIT_NO_DEVICE).
 */
int zcp_backend_select(enum zcp_backend_kind kind, uint32_t device, const struct zcp_backend_ops **ret_ops);

/* CUDA devices on this host: 0 without a driver or a device, or in a build without CUDA. Main thread. */
uint32_t zcp_backend_gpu_count(void);
/* True when the CUDA backend probes usable on `device`; else false with a warning naming cause and fix. */
bool zcp_backend_gpu_usable(uint32_t device);
