/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend (DESIGN.md §3, §4, §7): the GPU reads each NV12 frame where the source put
 * it, through the slot's mapped device pointer (zero copy), or from a device copy made by
 * cudaMemcpyAsync (copy mode: a copy engine moves it, so the kernels do not stall the SMs on
 * PCIe reads). `auto` times both at open on the stream's real geometry and starts with the
 * faster, then re-decides while it runs (below). The stream's model is a plan (model/plan.h):
 * its weights are uploaded once per process and GPU and shared by the streams of that plan
 * (zcp_k_model_acquire), its arena is this stream's device memory, allocated at open with
 * everything else; nothing is allocated per frame. Results land in the slot's mapped result
 * block, written by the last kernel with `valid` last; the motion kernel writes the moving mask
 * (frame.h) into the slot's mapped mask, complete before that (a ring made without masks gets
 * none).
 *
 * Per stream: one CUDA stream (plus a side stream used only while capturing, so that the grid's
 * luma rows, the cell means and motion run beside the resize and the network), and per slot a
 * CUDA graph of the whole per-frame sequence (cuda_graph.c), captured once and replayed by
 * submit, and an event that wait() waits on by `gpu.sync`: hybrid (the default: sleep until
 * just before the predicted completion, then spin; waitplan.h), spin (cudaEventQuery in a loop),
 * yield (the same with sched_yield) or block (a blocking-sync event).
 *
 * transfer auto at run time: the idle GPU of the start-up test cannot know the load to come
 * (with many streams of 1080p at full rate copy can give more throughput than zero-copy, which
 * wins alone). So auto captures both graph sets per slot (copy's device frame stays allocated),
 * and submit takes the exec of the mode the plan names (xferplan.h: stay; probe the other mode
 * for 18 frames once the first 32 are in, then every 300+ frames; switch when its median time is
 * more than 3 % lower).
 * Each frame's time is submit to completion as wait() sees it (no timing events, whose
 * recording costs the real-time path). The plan is the GPU's, shared by its auto streams
 * (struct xshare): a probe moves them all, so it measures the other mode as it is when they all
 * use it. A switch is logged once for the GPU, each stream's counts at close; transfer_mode()
 * tells the mode in use now.
 *
 * Errors: every CUDA call is checked. A sticky error (cuda_device.c) is logged once with the
 * stage and frame and returned as ZCP_ERR_GPU_STICKY: the process must exit (main:
 * ZCP_EXIT_GPU_FATAL). Other errors fail the frame (-EIO), rate-limited in the log.
 *
 * The ring must come from this backend's allocator (mapped pinned memory): open refuses slots
 * without device aliases, and a NULL ring.
 *
 * Threads: probe/allocator/open/close on the main thread; submit/wait on the stream's infer
 * thread only; the allocator's functions on any thread.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "infer/cuda_internal.h"
#include "infer/xferplan.h"

/*
 * transfer auto: one plan per GPU (xferplan.h, "One plan per GPU"), shared by
 * the GPU's auto streams under its mutex: submit asks it for the mode, wait
 * feeds it each frame's time. Made by the first auto stream opened on the
 * GPU (with that stream's start-up choice), freed with the last.
 */
struct xshare {
        struct xshare *next;
        uint32_t device;
        uint32_t users;
        pthread_mutex_t lock;
        struct zcp_xferplan plan;
};

static pthread_mutex_t xshares_lock = PTHREAD_MUTEX_INITIALIZER;
static struct xshare *xshares;

/* The GPU's plan with this stream counted in; NULL: out of memory. */
static struct xshare *xshare_join(uint32_t device, uint32_t initial)
{
        struct xshare *s;

        pthread_mutex_lock(&xshares_lock);
        for (s = xshares; s && s->device != device; s = s->next)
                ;
        if (!s && (s = calloc(1, sizeof(*s)))) {
                s->device = device;
                pthread_mutex_init(&s->lock, NULL);
                zcp_xferplan_init(&s->plan, initial);
                s->next = xshares;
                xshares = s;
        }
        if (s) {
                pthread_mutex_lock(&s->lock);
                zcp_xferplan_set_users(&s->plan, ++s->users);
                pthread_mutex_unlock(&s->lock);
        }
        pthread_mutex_unlock(&xshares_lock);
        return s;
}

static void xshare_leave(struct xshare *s)
{
        bool last;

        pthread_mutex_lock(&xshares_lock);
        pthread_mutex_lock(&s->lock);
        last = --s->users == 0;
        if (!last)
                zcp_xferplan_set_users(&s->plan, s->users);
        pthread_mutex_unlock(&s->lock);
        if (last) {
                struct xshare **pp = &xshares;

                while (*pp != s)
                        pp = &(*pp)->next;
                *pp = s->next;
                pthread_mutex_destroy(&s->lock);
                free(s);
        }
        pthread_mutex_unlock(&xshares_lock);
}

static void cuda_close(struct zcp_backend_ctx *ctx)
{
        if (!ctx)
                return;
        cudaError_t e;

        if (ctx->sync == ZCP_SYNC_HYBRID && ctx->plan.frames)
                zcp_info("cuda backend: stream %s: hybrid wait over %" PRIu64 " frames: slept %" PRIu64
                         ", overslept %" PRIu64 ", blocked %" PRIu64 ", last guard %" PRIu64 " us",
                         ctx->name, ctx->plan.frames, ctx->plan.slept, ctx->plan.overslept, ctx->plan.blocked,
                         zcp_waitplan_guard(&ctx->plan) / 1000);
        if (ctx->xs) {
                if (ctx->xframes[ZCP_CUDA_XZC] + ctx->xframes[ZCP_CUDA_XCOPY])
                        zcp_info("cuda backend: stream %s: transfer auto over %" PRIu64 " frames: zero-copy %" PRIu64
                                 ", copy %" PRIu64 ", %" PRIu64 " switches of GPU %u's plan, ending in %s",
                                 ctx->name, ctx->xframes[ZCP_CUDA_XZC] + ctx->xframes[ZCP_CUDA_XCOPY], ctx->xframes[ZCP_CUDA_XZC],
                                 ctx->xframes[ZCP_CUDA_XCOPY], atomic_load_explicit(&ctx->switches_now, memory_order_relaxed),
                                 ctx->device,
                                 atomic_load_explicit(&ctx->mode_now, memory_order_relaxed) == ZCP_CUDA_XCOPY ? "copy"
                                                                                                      : "zero-copy");
                xshare_leave(ctx->xs);
                ctx->xs = NULL;
        }

        if (ctx->stream && !ctx->sticky && (e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess)
                zcp_warn("cuda backend: stream %s: finishing the GPU work at close: %s", ctx->name,
                         cudaGetErrorString(e));
        if (ctx->slots) {
                zcp_cuda_destroy_execs(ctx);
                for (uint32_t i = 0; i < ctx->nslots; i++)
                        if (ctx->slots[i].done)
                                cudaEventDestroy(ctx->slots[i].done);
                free(ctx->slots);
        }
        if (ctx->fork)
                cudaEventDestroy(ctx->fork);
        if (ctx->join)
                cudaEventDestroy(ctx->join);
        if (ctx->side)
                cudaStreamDestroy(ctx->side);
        if (ctx->stream)
                cudaStreamDestroy(ctx->stream);
        zcp_k_pre_free(ctx->pre);
        zcp_k_net_free(ctx->net);
        zcp_k_model_release(ctx->model);
        zcp_k_motion_free(ctx->mo);
        cudaFree(ctx->grid);
        cudaFree(ctx->stage);
        cudaFree(ctx->frame_dev);
        free(ctx);
}

/* The plan's weights (shared) and this stream's net on the current device. */
static int open_model(struct zcp_backend_ctx *ctx, const struct zcp_plan *plan)
{
        char msg[256] = "";
        cudaError_t e;

        if ((e = (cudaError_t)zcp_k_model_acquire(plan, &ctx->model, msg, sizeof(msg))) != cudaSuccess)
                return zcp_cuda_open_fail(ctx, e, "the model's weights", msg);
        if ((e = (cudaError_t)zcp_k_net_new(ctx->model, ZCP_K_GEMM_AUTO, &ctx->net, msg, sizeof(msg))) != cudaSuccess)
                return zcp_cuda_open_fail(ctx, e, "the model", msg);
        ctx->dev_bytes += zcp_k_net_device_bytes(ctx->net);
        zcp_info("cuda backend: stream %s: model of %u ops (%.2f G multiply-adds), %zu bytes of activations, "
                 "%zu bytes of weights shared by the streams of this model on GPU %u",
                 ctx->name, plan->op_count, (double)plan->macs / 1e9, plan->arena_floats * sizeof(float),
                 zcp_k_model_device_bytes(ctx->model), ctx->device);
        return 0;
}

static int cuda_open(const struct zcp_backend_params *p, struct zcp_ring *ring, struct zcp_backend_ctx **ret_ctx)
{
        const struct zcp_stream_config *cfg = p->cfg;
        struct zcp_backend_ctx *ctx;
        struct zcp_preprocess_params pp;
        struct zcp_motion_params mp;
        char msg[256] = "";
        bool mask = false;
        cudaError_t e;
        int r;
        /* The daemon places every stream (pipeline.c); a caller that did not (a test, a benchmark) gets GPU 0. */
        const uint32_t device = cfg->gpu.device == ZCP_GPU_DEVICE_AUTO ? 0 : cfg->gpu.device;

        if (p->width < 16 || p->height == 0 || p->width % 2 || p->height % 2) {
                zcp_err("cuda backend: stream %s: NV12 needs an even geometry at least 16 wide, got %ux%u",
                        p->stream_name, p->width, p->height);
                return -EINVAL;
        }
        if (!ring || ring->count == 0) {
                zcp_err("cuda backend: stream %s: needs the stream's ring (graphs are captured per slot)",
                        p->stream_name);
                return -EINVAL;
        }
        if (ring->slot_size < zcp_k_frame_bytes_padded(p->width, p->height)) {
                zcp_err("cuda backend: stream %s: slots of %zu bytes cannot hold %ux%u NV12 (%zu bytes)",
                        p->stream_name, ring->slot_size, p->width, p->height, zcp_k_frame_bytes_padded(p->width, p->height));
                return -EINVAL;
        }
        /* A stream placed on another GPU than its ring was made for reads it through this GPU's aliases. */
        if ((r = zcp_cuda_ring_adopt(ring, device)) < 0)
                return r;
        for (uint32_t i = 0; i < ring->count; i++) {
                const struct zcp_slot *s = zcp_ring_slot(ring, i);
                /* The frame is read in 16-byte vectors; the result block is written in 32-bit words. */
                if (!s->dev || !s->result_dev || ((uintptr_t)s->dev & 15) || ((uintptr_t)s->result_dev & 3)) {
                        zcp_err("cuda backend: stream %s: slot %u has no aligned device alias (frame 16 bytes, "
                                "result 4; ring allocator '%s'): the ring must come from the cuda allocator",
                                p->stream_name, i, ring->alloc.name ? ring->alloc.name : "?");
                        return -EINVAL;
                }
        }
        /* The moving masks (frame.h), when the ring has them: of this grid, readable by the GPU. */
        if (cfg->motion.enabled && ring->mask_cells) {
                const uint32_t cells = zcp_grid_w(p->width, cfg->motion.cell) * zcp_grid_h(p->height, cfg->motion.cell);
                if (ring->mask_cells != cells) {
                        zcp_err("cuda backend: stream %s: the ring's masks are of %u cells, the motion grid of %ux%u "
                                "at cell %u has %u",
                                p->stream_name, ring->mask_cells, p->width, p->height, cfg->motion.cell, cells);
                        return -EINVAL;
                }
                for (uint32_t i = 0; i < ring->count; i++) {
                        if (!zcp_ring_slot(ring, i)->mask_dev) {
                                zcp_err("cuda backend: stream %s: slot %u's moving mask has no device alias",
                                        p->stream_name, i);
                                return -EINVAL;
                        }
                }
                mask = true;
        }
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx) {
                zcp_err("cuda backend: stream %s: cannot allocate %zu bytes of state", p->stream_name, sizeof(*ctx));
                return -ENOMEM;
        }
        snprintf(ctx->name, sizeof(ctx->name), "%s", p->stream_name ? p->stream_name : "?");
        ctx->device = device;
        ctx->sync = cfg->gpu.sync;
        zcp_waitplan_init(&ctx->plan);
        ctx->width = p->width;
        ctx->height = p->height;
        ctx->frame_bytes = zcp_nv12_size(p->width, p->height);
        ctx->motion = cfg->motion.enabled;
        ctx->mask = mask;
        ctx->ring = ring;
        ctx->nslots = ring->count;

        e = zcp_cuda_init_device(ctx->device);
        if (e != cudaSuccess) {
                r = zcp_cuda_open_fail(ctx, e, "selecting the GPU", NULL);
                goto fail;
        }
        ctx->slots = calloc(ctx->nslots, sizeof(*ctx->slots));
        if (!ctx->slots) {
                zcp_err("cuda backend: stream %s: cannot allocate state for %u slots", ctx->name, ctx->nslots);
                r = -ENOMEM;
                goto fail;
        }
        if ((e = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking)) != cudaSuccess ||
            (e = cudaStreamCreateWithFlags(&ctx->side, cudaStreamNonBlocking)) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&ctx->fork, cudaEventDisableTiming)) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&ctx->join, cudaEventDisableTiming)) != cudaSuccess) {
                r = zcp_cuda_open_fail(ctx, e, "creating streams and events", NULL);
                goto fail;
        }
        for (uint32_t i = 0; i < ctx->nslots; i++) {
                unsigned flags = cudaEventDisableTiming |
                                 (ctx->sync == ZCP_SYNC_BLOCK || ctx->sync == ZCP_SYNC_HYBRID ? cudaEventBlockingSync : 0);
                if ((e = cudaEventCreateWithFlags(&ctx->slots[i].done, flags)) != cudaSuccess) {
                        r = zcp_cuda_open_fail(ctx, e, "creating slot events", NULL);
                        goto fail;
                }
        }

        pp = p->pre;   /* the plan's input (NHWC, pixels, mean/std, stretch or letterbox) and the motion cell */
        mp = (struct zcp_motion_params){
                .width = p->width,
                .height = p->height,
                .cell = cfg->motion.cell,
                .threshold = cfg->motion.threshold,
                .alpha = cfg->motion.alpha,
        };
        ctx->top_k = p->top_k;
        ctx->det = p->det;
        if (p->model || ctx->motion) {
                if ((e = (cudaError_t)zcp_k_pre_new(&pp, p->model != NULL, ctx->motion, &ctx->pre, msg, sizeof(msg)))) {
                        r = zcp_cuda_open_fail(ctx, e, "preprocess", msg);
                        goto fail;
                }
                ctx->dev_bytes += zcp_k_pre_device_bytes(ctx->pre);
        }
        if (p->model && (r = open_model(ctx, p->model)) < 0)
                goto fail;
        if (ctx->motion) {
                if ((e = (cudaError_t)zcp_k_motion_new(&mp, &ctx->mo, msg, sizeof(msg)))) {
                        r = zcp_cuda_open_fail(ctx, e, "motion", msg);
                        goto fail;
                }
                ctx->dev_bytes += zcp_k_motion_device_bytes(ctx->mo);
                r = zcp_cuda_dev_alloc(ctx, (void **)&ctx->grid,
                                       sizeof(uint32_t) * zcp_grid_w(p->width, mp.cell) * zcp_grid_h(p->height, mp.cell),
                                       "motion grid");
                if (r < 0)
                        goto fail;
        }
        r = zcp_cuda_dev_alloc(ctx, (void **)&ctx->stage, sizeof(struct zcp_result), "result stage");
        if (r < 0)
                goto fail;
        if ((e = (cudaError_t)zcp_k_stage_init(ctx->stage)) != cudaSuccess) {
                r = zcp_cuda_open_fail(ctx, e, "initializing the result stage", NULL);
                goto fail;
        }

        ctx->transfer = cfg->gpu.transfer;
        if (ctx->transfer != ZCP_TRANSFER_ZERO_COPY && ctx->pre) {
                r = zcp_cuda_dev_alloc(ctx, (void **)&ctx->frame_dev, zcp_k_frame_bytes_padded(p->width, p->height),
                              "device frame (copy mode)");
                if (r < 0)
                        goto fail;
        }
        if (!ctx->pre) {
                ctx->transfer = ZCP_TRANSFER_ZERO_COPY;   /* nothing reads the frame */
        } else if (ctx->transfer == ZCP_TRANSFER_AUTO) {
                r = zcp_cuda_choose_transfer(ctx);
                if (r < 0)
                        goto fail;
                /* Both graph sets (and copy's device frame) stay: the mode is re-decided per frame, by the
                 * GPU's plan (its first auto stream's choice, or what its streams use now). */
                ctx->adaptive = true;
                if (!(ctx->xs = xshare_join(ctx->device, zcp_cuda_gset(ctx->transfer)))) {
                        r = -ENOMEM;
                        goto fail;
                }
                pthread_mutex_lock(&ctx->xs->lock);
                ctx->xs_switches0 = ctx->xs->plan.switches;
                if (ctx->xs->plan.cur != zcp_cuda_gset(ctx->transfer)) {
                        zcp_info("cuda backend: stream %s: transfer auto follows GPU %u's %u streams: %s", ctx->name,
                                 ctx->device, ctx->xs->users - 1, ctx->xs->plan.cur == ZCP_CUDA_XCOPY ? "copy" : "zero-copy");
                        ctx->transfer = ctx->xs->plan.cur == ZCP_CUDA_XCOPY ? ZCP_TRANSFER_COPY : ZCP_TRANSFER_ZERO_COPY;
                }
                pthread_mutex_unlock(&ctx->xs->lock);
        }
        if (ctx->transfer == ZCP_TRANSFER_ZERO_COPY && ctx->frame_dev && !ctx->adaptive) {
                cudaFree(ctx->frame_dev);
                ctx->dev_bytes -= zcp_k_frame_bytes_padded(p->width, p->height);
                ctx->frame_dev = NULL;
        }
        r = zcp_cuda_capture_all(ctx, ctx->adaptive ? ZCP_TRANSFER_ZERO_COPY : ctx->transfer, ctx->nslots);
        if (r == 0 && ctx->adaptive)
                r = zcp_cuda_capture_all(ctx, ZCP_TRANSFER_COPY, ctx->nslots);
        if (r < 0)
                goto fail;
        atomic_store_explicit(&ctx->mode_now, zcp_cuda_gset(ctx->transfer), memory_order_relaxed);
        if ((e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess) {
                r = zcp_cuda_open_fail(ctx, e, "uploading the graphs", NULL);
                goto fail;
        }
        zcp_info("cuda backend: stream %s: GPU %u, %ux%u NV12, %u slots, transfer %s%s, sync %s, model %s, "
                 "motion %s, %zu bytes of device memory",
                 ctx->name, ctx->device, ctx->width, ctx->height, ctx->nslots, zcp_transfer_names[ctx->transfer],
                 ctx->adaptive ? " (auto: re-decided while running)" : "", zcp_sync_names[ctx->sync],
                 ctx->net ? "on" : "off", ctx->mo ? "on" : "off", ctx->dev_bytes);
        *ret_ctx = ctx;
        return 0;
fail:
        cuda_close(ctx);
        return r;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#endif
}

static int cuda_submit(struct zcp_backend_ctx *ctx, struct zcp_slot *slot)
{
        const struct zcp_frame *f = &slot->frame;
        struct cslot *cs;
        struct cgraph *cg;
        uint32_t mode;
        cudaError_t e;
        int r;

        if (ctx->sticky)
                return ZCP_ERR_GPU_STICKY;
        if (slot->index >= ctx->nslots || zcp_ring_slot(ctx->ring, slot->index) != slot) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC,
                                    "cuda backend: stream %s: slot %u is not one of this stream's ring",
                                    ctx->name, slot->index);
                return -EINVAL;
        }
        if (f->width != ctx->width || f->height != ctx->height || f->fmt != ZCP_PIX_NV12) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 5 * ZCP_NSEC_PER_SEC,
                                    "cuda backend: stream %s: frame %" PRIu64 " is %ux%u %s, expected %ux%u nv12",
                                    ctx->name, f->seq, f->width, f->height, zcp_pixfmt_name(f->fmt), ctx->width,
                                    ctx->height);
                return -EINVAL;
        }
        cs = &ctx->slots[slot->index];
        if (zcp_cuda_use_device(ctx->device) != cudaSuccess)
                return zcp_cuda_gpu_error(ctx, cudaGetLastError(), "cudaSetDevice", f->seq);
        /* transfer auto: the plan's mode (xferplan.h); a fixed mode: its own. A pointer choice either way. */
        if (ctx->adaptive) {
                pthread_mutex_lock(&ctx->xs->lock);
                mode = zcp_xferplan_next(&ctx->xs->plan);
                atomic_store_explicit(&ctx->mode_now, ctx->xs->plan.cur, memory_order_relaxed);
                atomic_store_explicit(&ctx->switches_now, ctx->xs->plan.switches - ctx->xs_switches0,
                                      memory_order_relaxed);
                pthread_mutex_unlock(&ctx->xs->lock);
        } else {
                mode = zcp_cuda_gset(ctx->transfer);
        }
        /* auto: a lent frame without a 16-byte aligned device alias is copied (zero-copy would refuse it). */
        if (mode == ZCP_CUDA_XZC && ctx->adaptive && (!slot->dev || ((uintptr_t)slot->dev & 15)))
                mode = ZCP_CUDA_XCOPY;
        cg = &cs->g[mode];
        /* A lent buffer, or the slot's own memory after one: checked, and read where it is. */
        if (ctx->pre) {
                const void *want = mode == ZCP_CUDA_XCOPY ? (const void *)slot->data : slot->dev;
                if ((want != cg->reads || slot->lent) && (r = zcp_cuda_use_frame(ctx, cg, mode == ZCP_CUDA_XCOPY, slot, want)) < 0)
                        return r;
        }
        slot->result->valid = 0;
        cs->submitted = zcp_now_ns();
        if ((e = cudaGraphLaunch(cg->exec, ctx->stream)) != cudaSuccess)
                return zcp_cuda_gpu_error(ctx, e, "graph launch", f->seq);
        if ((e = cudaEventRecord(cs->done, ctx->stream)) != cudaSuccess)
                return zcp_cuda_gpu_error(ctx, e, "event record", f->seq);
        cs->mode = mode;
        cs->seq = f->seq;
        cs->busy = true;
        return 0;
}

/*
 * transfer auto, after a frame completed: its time from submit to completion
 * seen here (what the stream waits for; no timing events, whose recording
 * cost the real-time path 5-10% on the H200) to the GPU's plan; the
 * stream that completes a probe logs its decision, once for all of them.
 */
static void feed_plan(struct zcp_backend_ctx *ctx, const struct cslot *cs, uint64_t done_ns)
{
        struct xshare *s = ctx->xs;
        const struct zcp_xferplan *xp = &s->plan;
        enum zcp_xferplan_event ev;
        uint64_t med_cur, med_other, frames, switches;
        uint32_t cur, users, window;

        ctx->xframes[cs->mode]++;
        pthread_mutex_lock(&s->lock);
        ev = zcp_xferplan_record(&s->plan, cs->mode, done_ns > cs->submitted ? done_ns - cs->submitted : 0);
        cur = xp->cur;
        med_cur = xp->med_cur;
        med_other = xp->med_other;
        frames = xp->frames;
        switches = xp->switches;
        users = xp->users;
        window = xp->window;
        pthread_mutex_unlock(&s->lock);
        switch (ev) {
        case ZCP_XFERPLAN_SWITCHED:
                atomic_store_explicit(&ctx->mode_now, cur, memory_order_relaxed);
                zcp_info("cuda backend: GPU %u: transfer auto (%u streams): %s -> %s (median GPU time per frame "
                         "%.1f us -> %.1f us over %u frames each) after %" PRIu64 " frames, switch %" PRIu64,
                         ctx->device, users, cur == ZCP_CUDA_XCOPY ? "zero-copy" : "copy", cur == ZCP_CUDA_XCOPY ? "copy" : "zero-copy",
                         (double)med_cur / 1e3, (double)med_other / 1e3, window, frames, switches);
                break;
        case ZCP_XFERPLAN_KEPT:
                zcp_debug("cuda backend: GPU %u: transfer auto (%u streams): %s kept (median GPU time per frame "
                          "%.1f us, %s %.1f us) after %" PRIu64 " frames",
                          ctx->device, users, cur == ZCP_CUDA_XCOPY ? "copy" : "zero-copy", (double)med_cur / 1e3,
                          cur == ZCP_CUDA_XCOPY ? "zero-copy" : "copy", (double)med_other / 1e3, frames);
                break;
        default:
                break;
        }
}

/*
 * sync hybrid (waitplan.h): sleep until just before the predicted completion,
 * then spin on the event; block on it if the GPU is much later than predicted.
 */
static cudaError_t wait_hybrid(struct zcp_backend_ctx *ctx, const struct cslot *cs)
{
        struct zcp_waitplan *p = &ctx->plan;
        const uint64_t asked = zcp_waitplan_wake_at(p, cs->submitted);
        uint64_t now = zcp_now_ns(), woke = 0, until;
        bool busy = false, blocked = false;
        cudaError_t e;

        if (!ctx->slack_set) {
                /* This thread's sleeps end when asked, not up to 50 us later (the default slack). */
                (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
                ctx->slack_set = true;
        }
        if (asked > now + 2000 && cudaEventQuery(cs->done) == cudaErrorNotReady) {
                const struct timespec ts = { .tv_sec = (time_t)(asked / ZCP_NSEC_PER_SEC),
                                             .tv_nsec = (long)(asked % ZCP_NSEC_PER_SEC) };

                while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                        ;
                now = woke = zcp_now_ns();
        }
        until = zcp_waitplan_spin_until(p, cs->submitted, now);
        while ((e = cudaEventQuery(cs->done)) == cudaErrorNotReady) {
                busy = true;
                if (zcp_now_ns() >= until) {
                        blocked = true;
                        e = cudaEventSynchronize(cs->done);
                        break;
                }
                cpu_relax();
        }
        if (e == cudaSuccess)
                zcp_waitplan_record(p, cs->submitted, asked, woke, zcp_now_ns(), busy, blocked);
        return e;
}

static int cuda_wait(struct zcp_backend_ctx *ctx, struct zcp_slot *slot)
{
        struct cslot *cs;
        uint64_t done_ns;
        cudaError_t e;

        if (ctx->sticky)
                return ZCP_ERR_GPU_STICKY;
        if (slot->index >= ctx->nslots || !ctx->slots[slot->index].busy)
                return -EINVAL;
        cs = &ctx->slots[slot->index];
        /* A thread that serves streams of several GPUs waits on this one's events with it current. */
        if (zcp_cuda_use_device(ctx->device) != cudaSuccess)
                return zcp_cuda_gpu_error(ctx, cudaGetLastError(), "cudaSetDevice", slot->frame.seq);
        switch (ctx->sync) {
        case ZCP_SYNC_SPIN:
                while ((e = cudaEventQuery(cs->done)) == cudaErrorNotReady)
                        cpu_relax();
                break;
        case ZCP_SYNC_YIELD:
                while ((e = cudaEventQuery(cs->done)) == cudaErrorNotReady)
                        sched_yield();
                break;
        case ZCP_SYNC_BLOCK:
                e = cudaEventSynchronize(cs->done);
                break;
        case ZCP_SYNC_HYBRID:
        default:
                e = wait_hybrid(ctx, cs);
                break;
        }
        done_ns = ctx->adaptive ? zcp_now_ns() : 0;
        cs->busy = false;
        if (e != cudaSuccess)
                return zcp_cuda_gpu_error(ctx, e, "wait", cs->seq);
        if (*(volatile uint32_t *)&slot->result->valid != 1) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC,
                                    "cuda backend: stream %s: frame %" PRIu64 " completed without a result",
                                    ctx->name, cs->seq);
                return -EIO;
        }
        if (ctx->adaptive)
                feed_plan(ctx, cs, done_ns);
        return 0;
}

/* The mode frames run in now (transfer auto: changes while running); any thread. */
static const char *cuda_transfer_mode(const struct zcp_backend_ctx *ctx)
{
        return zcp_transfer_names[atomic_load_explicit(&ctx->mode_now, memory_order_relaxed) == ZCP_CUDA_XCOPY
                                          ? ZCP_TRANSFER_COPY
                                          : ZCP_TRANSFER_ZERO_COPY];
}

static uint64_t cuda_transfer_switches(const struct zcp_backend_ctx *ctx)
{
        return atomic_load_explicit(&ctx->switches_now, memory_order_relaxed);
}

const struct zcp_backend_ops zcp_backend_cuda = {
        .name = "cuda",
        .probe = zcp_cuda_probe,
        .devices = zcp_cuda_device_count,
        .allocator = zcp_cuda_allocator,
        .open = cuda_open,
        .submit = cuda_submit,
        .wait = cuda_wait,
        .transfer_mode = cuda_transfer_mode,
        .transfer_switches = cuda_transfer_switches,
        .close = cuda_close,
};
