/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend's graphs (cuda_internal.h): per slot and transfer mode, the whole per-frame
 * sequence captured once into a CUDA graph and replayed by submit:
 *
 *   copy mode: the frame's cudaMemcpyAsync into device memory first;
 *   the preprocess's scan of the frame (the frame node), then, with a model and motion, a fork:
 *     side stream: the grid's other luma rows and cell means, motion (into the stage block);
 *     main stream: the resize into the plan's input, every op of the plan, then the head,
 *     which waits for the side stream and publishes the stage block (motion's fields and its
 *     own) into the slot's mapped result block, `valid` last;
 *   copy mode with a device-resident frame: the resize and the grid's scan read the frame
 *   directly, side by side (zcp_k_pre_tensor_direct / zcp_k_pre_grid_direct);
 *   without a model motion publishes; without motion the head does.
 *
 * Frames that move: a slot may be lent a capture driver's buffer (ring.h), so its frame pointer
 * can change from frame to frame. Each exec remembers the memory it reads; zcp_cuda_use_frame
 * points the one node that reads the frame (the scan, or the copy) at new memory in the exec
 * without capturing again (cudaGraphExec*NodeSetParams; the captured graph lives as long as
 * its exec for that), after checking that the GPU can read it.
 *
 * transfer auto at open: both modes' graphs on the first slots, timed on a pseudo-random frame
 * (submit to results visible, median), the faster kept; the motion background and the stage
 * block reset after.
 *
 * Threads: open/close on the main thread; zcp_cuda_use_frame on the stream's infer thread.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "infer/cuda_internal.h"

#define AUTO_SLOTS   4     /* slots rotated through while timing the transfer modes */
#define AUTO_WARMUP  10
#define AUTO_TIMED   60

void zcp_cuda_destroy_execs(struct zcp_backend_ctx *ctx)
{
        for (uint32_t i = 0; i < ctx->nslots; i++) {
                for (uint32_t m = 0; m < 2; m++) {
                        struct cgraph *g = &ctx->slots[i].g[m];
                        if (g->exec)
                                cudaGraphExecDestroy(g->exec);
                        if (g->graph)
                                cudaGraphDestroy(g->graph);
                        *g = (struct cgraph){ 0 };
                }
        }
}

/* Logs a failed allocation/setup step with the ring geometry. */
int zcp_cuda_open_fail(const struct zcp_backend_ctx *ctx, cudaError_t e, const char *what, const char *detail)
{
        zcp_err("cuda backend: stream %s: %s: %s (ring %u slots of %zu bytes, frame %ux%u NV12)", ctx->name, what,
                detail && detail[0] ? detail : cudaGetErrorString(e), ctx->ring->count, ctx->ring->slot_size,
                ctx->width, ctx->height);
        (void)cudaGetLastError();
        return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

int zcp_cuda_dev_alloc(struct zcp_backend_ctx *ctx, void **ret, size_t bytes, const char *what)
{
        cudaError_t e = cudaMalloc(ret, bytes);
        char msg[160];

        if (e != cudaSuccess) {
                *ret = NULL;
                snprintf(msg, sizeof(msg), "cudaMalloc(%zu bytes) failed: %s", bytes, cudaGetErrorString(e));
                return zcp_cuda_open_fail(ctx, e, what, msg);
        }
        ctx->dev_bytes += bytes;
        return 0;
}

/* The copy-mode graph's node that copies the frame into frame_dev: its only memcpy node. */
static cudaError_t find_copy_node(cudaGraph_t graph, void **ret_node)
{
        cudaGraphNode_t *nodes = NULL, found = NULL;
        size_t n = 0, hits = 0;
        cudaError_t e;

        if ((e = cudaGraphGetNodes(graph, NULL, &n)) != cudaSuccess)
                return e;
        if (n == 0)
                return cudaErrorInvalidValue;
        nodes = malloc(sizeof(*nodes) * n);
        if (!nodes)
                return cudaErrorMemoryAllocation;
        if ((e = cudaGraphGetNodes(graph, nodes, &n)) != cudaSuccess)
                goto out;
        for (size_t i = 0; i < n; i++) {
                enum cudaGraphNodeType type;

                if ((e = cudaGraphNodeGetType(nodes[i], &type)) != cudaSuccess)
                        goto out;
                if (type == cudaGraphNodeTypeMemcpy) {
                        found = nodes[i];
                        hits++;
                }
        }
        e = hits == 1 ? cudaSuccess : cudaErrorInvalidValue;
        if (e == cudaSuccess)
                *ret_node = (void *)found;
out:
        free(nodes);
        return e;
}

/*
 * The grid's part of the preprocess on the side stream, the tensor's on the main one: after the
 * scan (frame NULL) or straight from a device frame (the plan's direct parts, copy mode).
 */
static cudaError_t pre_grid(struct zcp_backend_ctx *ctx, const uint8_t *frame)
{
        return (cudaError_t)(frame ? zcp_k_pre_grid_direct(ctx->pre, frame, ctx->grid, ctx->side)
                                   : zcp_k_pre_grid(ctx->pre, ctx->grid, ctx->side));
}

static cudaError_t pre_tensor(struct zcp_backend_ctx *ctx, const uint8_t *frame)
{
        float *in = zcp_k_net_input(ctx->net);

        return (cudaError_t)(frame ? zcp_k_pre_tensor_direct(ctx->pre, frame, in, ctx->stream)
                                   : zcp_k_pre_tensor(ctx->pre, in, ctx->stream));
}

/* The plan's ops and its head, publishing (after the side stream's join when `join`). */
static cudaError_t network(struct zcp_backend_ctx *ctx, struct zcp_result *publish, bool join)
{
        cudaError_t e;

        if ((e = (cudaError_t)zcp_k_net_forward(ctx->net, ctx->stream)) != cudaSuccess)
                return e;
        if (join && (e = cudaStreamWaitEvent(ctx->stream, ctx->join, 0)) != cudaSuccess)
                return e;
        return (cudaError_t)zcp_k_net_head(ctx->net, ctx->top_k, &ctx->det, ctx->stage, publish, ctx->stream);
}

/* The per-frame sequence of `mode` for a slot whose frame is at src (device-readable). */
static cudaError_t sequence(struct zcp_backend_ctx *ctx, enum zcp_transfer mode, const uint8_t *src,
                            struct zcp_result *publish, uint32_t *mask)
{
        /* Copy mode with both outputs: the frame is in device memory, so no scan first (direct). */
        const bool both = ctx->mo && ctx->net;
        const bool direct = mode == ZCP_TRANSFER_COPY && both && zcp_k_pre_direct(ctx->pre);
        cudaStream_t st = ctx->stream;
        cudaError_t e = cudaSuccess;

        if (ctx->pre && !direct)
                e = both ? (cudaError_t)zcp_k_pre_scan(ctx->pre, src, st)
                         : (cudaError_t)zcp_k_preprocess(ctx->pre, src, ctx->net ? zcp_k_net_input(ctx->net) : NULL,
                                                         ctx->grid, st);
        if (e != cudaSuccess)
                return e;
        if (both) {
                /* Motion beside the resize and the network; the head publishes after both. */
                if ((e = cudaEventRecord(ctx->fork, st)) != cudaSuccess ||
                    (e = cudaStreamWaitEvent(ctx->side, ctx->fork, 0)) != cudaSuccess ||
                    (e = pre_grid(ctx, direct ? src : NULL)) != cudaSuccess ||
                    (e = (cudaError_t)zcp_k_motion(ctx->mo, ctx->grid, ctx->stage, NULL, mask, ctx->side)) !=
                            cudaSuccess ||
                    (e = cudaEventRecord(ctx->join, ctx->side)) != cudaSuccess ||
                    (e = pre_tensor(ctx, direct ? src : NULL)) != cudaSuccess)
                        return e;
                return network(ctx, publish, true);
        }
        if (ctx->mo)
                return (cudaError_t)zcp_k_motion(ctx->mo, ctx->grid, ctx->stage, publish, mask, st);
        if (ctx->net)
                return network(ctx, publish, false);
        return (cudaError_t)zcp_k_publish(ctx->stage, publish, st);
}

/*
 * Records the per-frame sequence for `slot` in `mode` into a graph, instantiates it into cg
 * (graph kept, frame-reading node found). On failure cg is left as it was.
 */
static cudaError_t capture(struct zcp_backend_ctx *ctx, const struct zcp_slot *slot, enum zcp_transfer mode,
                           struct cgraph *cg)
{
        struct zcp_result *publish = (struct zcp_result *)slot->result_dev;
        uint32_t *mask = ctx->mask ? (uint32_t *)slot->mask_dev : NULL;
        const uint8_t *src = (const uint8_t *)slot->dev;
        cudaStream_t st = ctx->stream;
        cudaGraph_t graph = NULL;
        cudaGraphExec_t exec = NULL;
        void *node = NULL;
        cudaError_t e, e2;

        e = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
        if (e != cudaSuccess)
                return e;
        if (mode == ZCP_TRANSFER_COPY) {
                e = cudaMemcpyAsync(ctx->frame_dev, slot->data, ctx->frame_bytes, cudaMemcpyHostToDevice, st);
                src = ctx->frame_dev;
        }
        if (e == cudaSuccess)
                e = sequence(ctx, mode, src, publish, mask);
        e2 = cudaStreamEndCapture(st, &graph);
        if (e == cudaSuccess)
                e = e2;
        if (e == cudaSuccess && ctx->pre)
                e = mode == ZCP_TRANSFER_COPY ? find_copy_node(graph, &node)
                                              : (cudaError_t)zcp_k_pre_frame_node(ctx->pre, graph, &node);
        if (e == cudaSuccess)
                e = cudaGraphInstantiate(&exec, graph, 0);
        /* Upload now, so that the slot's first frame does not pay for it. */
        if (e == cudaSuccess)
                e = cudaGraphUpload(exec, st);
        if (e != cudaSuccess) {
                if (exec)
                        cudaGraphExecDestroy(exec);
                if (graph)
                        cudaGraphDestroy(graph);
                return e;
        }
        cg->exec = exec;
        cg->graph = graph;
        cg->node = node;
        cg->reads = !ctx->pre ? NULL : mode == ZCP_TRANSFER_COPY ? (const void *)slot->data : slot->dev;
        return cudaSuccess;
}

int zcp_cuda_capture_all(struct zcp_backend_ctx *ctx, enum zcp_transfer mode, uint32_t count)
{
        for (uint32_t i = 0; i < count; i++) {
                cudaError_t e = capture(ctx, zcp_ring_slot(ctx->ring, i), mode,
                                        &ctx->slots[i].g[zcp_cuda_gset(mode)]);
                if (e != cudaSuccess) {
                        char msg[160];
                        snprintf(msg, sizeof(msg), "capturing the graph of slot %u (%s): %s", i,
                                 zcp_transfer_names[mode], cudaGetErrorString(e));
                        zcp_cuda_destroy_execs(ctx);
                        return zcp_cuda_open_fail(ctx, e, "graph capture", msg);
                }
        }
        return 0;
}

static int cmp_u64(const void *a, const void *b)
{
        const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

/* Median submit -> results visible of `mode` on the first slots (graphs captured here). */
static int time_mode(struct zcp_backend_ctx *ctx, enum zcp_transfer mode, uint32_t count, double *ret_us)
{
        uint64_t ns[AUTO_TIMED];
        cudaError_t e = cudaSuccess;
        int r;

        r = zcp_cuda_capture_all(ctx, mode, count);
        if (r < 0)
                return r;
        for (uint32_t i = 0; i < AUTO_WARMUP + AUTO_TIMED && e == cudaSuccess; i++) {
                struct cslot *cs = &ctx->slots[i % count];
                uint64_t t0 = zcp_now_ns();

                if ((e = cudaGraphLaunch(cs->g[zcp_cuda_gset(mode)].exec, ctx->stream)) !=
                            cudaSuccess ||
                    (e = cudaEventRecord(cs->done, ctx->stream)) != cudaSuccess)
                        break;
                while ((e = cudaEventQuery(cs->done)) == cudaErrorNotReady)
                        ;
                if (i >= AUTO_WARMUP)
                        ns[i - AUTO_WARMUP] = zcp_now_ns() - t0;
        }
        zcp_cuda_destroy_execs(ctx);
        if (e != cudaSuccess)
                return zcp_cuda_open_fail(ctx, e, "timing the transfer modes", NULL);
        qsort(ns, AUTO_TIMED, sizeof(ns[0]), cmp_u64);
        *ret_us = (double)ns[AUTO_TIMED / 2] / 1e3;
        return 0;
}

/* Fills the timing slots with pseudo-random pixels (the source has not started). */
static void fill_pattern(struct zcp_backend_ctx *ctx, uint32_t count)
{
        uint64_t x = 0x9e3779b97f4a7c15ULL;

        for (uint32_t s = 0; s < count; s++) {
                uint8_t *d = zcp_ring_slot(ctx->ring, s)->data;
                for (size_t i = 0; i + 8 <= ctx->frame_bytes; i += 8) {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        memcpy(d + i, &x, 8);
                }
        }
}

int zcp_cuda_choose_transfer(struct zcp_backend_ctx *ctx)
{
        const uint32_t count = ctx->nslots < AUTO_SLOTS ? ctx->nslots : AUTO_SLOTS;
        cudaError_t e;
        int r;

        fill_pattern(ctx, count);
        r = time_mode(ctx, ZCP_TRANSFER_ZERO_COPY, count, &ctx->median_us[ZCP_TRANSFER_ZERO_COPY]);
        if (r < 0)
                return r;
        r = time_mode(ctx, ZCP_TRANSFER_COPY, count, &ctx->median_us[ZCP_TRANSFER_COPY]);
        if (r < 0)
                return r;
        ctx->transfer = ctx->median_us[ZCP_TRANSFER_ZERO_COPY] <= ctx->median_us[ZCP_TRANSFER_COPY]
                                ? ZCP_TRANSFER_ZERO_COPY
                                : ZCP_TRANSFER_COPY;
        zcp_info("cuda backend: stream %s: transfer auto -> %s (median frame latency: zero-copy %.1f us, "
                 "copy %.1f us, %ux%u)",
                 ctx->name, zcp_transfer_names[ctx->transfer], ctx->median_us[ZCP_TRANSFER_ZERO_COPY],
                 ctx->median_us[ZCP_TRANSFER_COPY], ctx->width, ctx->height);
        /* The timing frames must not leave a background behind. */
        if (ctx->mo && (e = (cudaError_t)zcp_k_motion_reset(ctx->mo, ctx->stream)) != cudaSuccess)
                return zcp_cuda_open_fail(ctx, e, "resetting motion after timing", NULL);
        if ((e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess ||
            (e = (cudaError_t)zcp_k_stage_init(ctx->stage)) != cudaSuccess)
                return zcp_cuda_open_fail(ctx, e, "resetting state after timing", NULL);
        for (uint32_t s = 0; s < count; s++)
                memset(zcp_ring_slot(ctx->ring, s)->result, 0, sizeof(struct zcp_result));
        return 0;
}

/*
 * Checks that the GPU can read the frame memory `slot` holds now (a lent
 * buffer, or its own memory again) and points cg's exec (the slot's graph of
 * the mode this frame runs in: `copy` or zero-copy) at it when it reads other
 * memory: the pass-1 kernel's frame in zero-copy mode, the copy's source in
 * copy mode. `want` is what the exec must read. Under transfer auto each of
 * the slot's two execs remembers what it reads: the one that runs is the one
 * pointed.
 */
int zcp_cuda_use_frame(struct zcp_backend_ctx *ctx, struct cgraph *cg, bool copy, const struct zcp_slot *slot,
                     const void *want)
{
        const size_t need = zcp_k_frame_bytes_padded(ctx->width, ctx->height);
        cudaError_t e;

        if (!slot->data || slot->cap < need || (!copy && (!slot->dev || ((uintptr_t)slot->dev & 15)))) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC,
                                    "cuda backend: stream %s: frame %" PRIu64 " of slot %u (%s buffer %u) is %zu "
                                    "bytes at %p, device alias %p: the GPU needs %zu bytes%s",
                                    ctx->name, slot->frame.seq, slot->index, slot->lent ? "lent" : "own",
                                    slot->lent, slot->cap, (void *)slot->data, slot->dev, need,
                                    copy ? "" : " and a 16-byte aligned device alias");
                return -EINVAL;
        }
        if (want == cg->reads)
                return 0;
        if (copy)
                e = cudaGraphExecMemcpyNodeSetParams1D(cg->exec, (cudaGraphNode_t)cg->node, ctx->frame_dev, want,
                                                       ctx->frame_bytes, cudaMemcpyHostToDevice);
        else
                e = (cudaError_t)zcp_k_pre_set_frame(ctx->pre, cg->exec, cg->node, want);
        if (e != cudaSuccess)
                return zcp_cuda_gpu_error(ctx, e, copy ? "pointing the frame copy at the slot's memory"
                                              : "pointing the preprocess at the slot's memory",
                                 slot->frame.seq);
        cg->reads = want;
        return 0;
}
