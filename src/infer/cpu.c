/* SPDX-License-Identifier: MIT */
/*
 * The CPU backend: the fallback where no GPU exists, on the stream's infer
 * thread and the worker team it starts (model.threads; auto: half the CPUs,
 * 1..4).
 * In: a slot holding an NV12 frame of the opened geometry. Out: the slot's
 * result block (motion and top-k), complete when submit returns, so wait has
 * nothing to wait for. Frame memory comes from the plain host allocator.
 *
 * Per frame, the fast kernels (cpu_fast.h): the model input (equal to the
 * reference's), the motion grid (equal), the plan's ops; then the head as the
 * reference computes it (softmax and top-k; or the CenterNet decode and
 * infer/detect.c's threshold, class filter, NMS and top N) and the motion update
 * (reference.c), which writes the moving mask into the slot's (frame.h)
 * when the ring has one of this grid. All per-stream buffers (fast plan and its
 * arena, probabilities or candidates, motion grid and background) and the team
 * are made once in open; nothing per frame.
 *
 * Threads: probe/allocator/open/close on the main thread; submit/wait on the
 * stream's infer thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/workers.h"
#include "infer/backend.h"
#include "infer/cpu_fast.h"
#include "infer/detect.h"
#include "infer/reference.h"

struct zcp_backend_ctx {
        const struct zcp_plan *model;           /* NULL: motion only */
        bool motion;
        bool first;                             /* next motion frame sets the background */
        uint32_t width, height, top_k;
        const char *stream;
        struct zcp_preprocess_params pp;
        struct zcp_det_params det;
        struct zcp_motion_params mp;
        struct zcp_fast_plan *plan;             /* NULL: motion only */
        struct zcp_fast_pre *pre;               /* NULL: motion only */
        struct zcp_workers *team;               /* NULL: the infer thread alone */
        float *probs;                           /* CLASSIFY: [classes] */
        struct zcp_detection *cand;             /* CENTERNET: [candidates] */
        uint32_t *grid;                         /* [grid_h][grid_w] */
        float *bg;                              /* [grid_h][grid_w] */
        uint32_t mask_words;                    /* of the moving mask (frame.h) */
};

static int cpu_probe(uint32_t device, char *why, size_t whylen)
{
        return 0;
}

static int cpu_allocator(uint32_t device, struct zcp_allocator *ret_alloc)
{
        *ret_alloc = zcp_host_allocator;
        return 0;
}

static void cpu_close(struct zcp_backend_ctx *ctx)
{
        if (!ctx)
                return;
        zcp_fast_plan_free(ctx->plan);
        zcp_fast_pre_free(ctx->pre);
        free(ctx->cand);
        zcp_workers_free(ctx->team);
        free(ctx->probs);
        free(ctx->grid);
        free(ctx->bg);
        free(ctx);
}

static int alloc_or_log(struct zcp_backend_ctx *ctx, void **ret, size_t elems, size_t elem_size, const char *what)
{
        size_t bytes = elems * elem_size;

        *ret = malloc(bytes ? bytes : 1);
        if (!*ret) {
                zcp_err("cpu backend: stream %s: cannot allocate %zu bytes for the %s (frame %ux%u, input %ux%u)",
                        ctx->stream, bytes, what, ctx->width, ctx->height, ctx->pp.in_w, ctx->pp.in_h);
                return -ENOMEM;
        }
        return 0;
}

static int cpu_open(const struct zcp_backend_params *p, struct zcp_ring *ring, struct zcp_backend_ctx **ret_ctx)
{
        const struct zcp_stream_config *cfg = p->cfg;
        struct zcp_backend_ctx *ctx;
        size_t cells;
        uint32_t threads;
        int r;

        if (p->width == 0 || p->height == 0 || p->width % 2 || p->height % 2) {
                zcp_err("cpu backend: stream %s: NV12 needs an even, non-zero geometry, got %ux%u",
                        p->stream_name, p->width, p->height);
                return -EINVAL;
        }
        /* ring may be NULL when a caller (a test) drives slots of its own. */
        if (ring && ring->slot_size < zcp_nv12_size(p->width, p->height)) {
                zcp_err("cpu backend: stream %s: slots of %zu bytes cannot hold %ux%u NV12 (%zu bytes)",
                        p->stream_name, ring->slot_size, p->width, p->height, zcp_nv12_size(p->width, p->height));
                return -EINVAL;
        }
        if (ring && cfg->motion.enabled && ring->mask_cells &&
            ring->mask_cells != zcp_grid_w(p->width, cfg->motion.cell) * zcp_grid_h(p->height, cfg->motion.cell)) {
                zcp_err("cpu backend: stream %s: the ring's masks are of %u cells, the motion grid of %ux%u at cell "
                        "%u has %u",
                        p->stream_name, ring->mask_cells, p->width, p->height, cfg->motion.cell,
                        zcp_grid_w(p->width, cfg->motion.cell) * zcp_grid_h(p->height, cfg->motion.cell));
                return -EINVAL;
        }
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx) {
                zcp_err("cpu backend: stream %s: cannot allocate %zu bytes of state", p->stream_name, sizeof(*ctx));
                return -ENOMEM;
        }
        ctx->stream = p->stream_name ? p->stream_name : "?";
        ctx->width = p->width;
        ctx->height = p->height;
        ctx->model = p->model;
        ctx->motion = cfg->motion.enabled;
        ctx->first = true;
        ctx->pp = p->pre;
        ctx->det = p->det;
        ctx->top_k = p->top_k;
        ctx->mp = (struct zcp_motion_params){
                .width = p->width,
                .height = p->height,
                .cell = cfg->motion.cell,
                .threshold = cfg->motion.threshold,
                .alpha = cfg->motion.alpha,
        };
        if (ctx->model) {
                const struct zcp_plan *m = ctx->model;

                r = zcp_fast_plan_new(m, &ctx->plan);
                if (r == 0)
                        r = zcp_fast_pre_new(&ctx->pp, &ctx->pre);
                if (r < 0) {
                        zcp_err("cpu backend: stream %s: cannot set up the model for %ux%u input (%zu bytes of "
                                "activations): %s",
                                ctx->stream, ctx->pp.in_w, ctx->pp.in_h, m->arena_floats * sizeof(float),
                                strerror(-r));
                        goto fail;
                }
                if (m->head.kind == ZCP_HEAD_CLASSIFY)
                        r = alloc_or_log(ctx, (void **)&ctx->probs, m->head.classes, sizeof(float),
                                         "class probabilities");
                else
                        r = alloc_or_log(ctx, (void **)&ctx->cand, m->head.candidates, sizeof(struct zcp_detection),
                                         "detection candidates");
                if (r < 0)
                        goto fail;
        }
        if (ctx->motion) {
                cells = (size_t)zcp_grid_w(p->width, ctx->mp.cell) * zcp_grid_h(p->height, ctx->mp.cell);
                r = alloc_or_log(ctx, (void **)&ctx->grid, cells, sizeof(uint32_t), "motion grid");
                if (r < 0)
                        goto fail;
                r = alloc_or_log(ctx, (void **)&ctx->bg, cells, sizeof(float), "motion background");
                if (r < 0)
                        goto fail;
                ctx->mask_words = zcp_mask_words(cells);
        }
        threads = cfg->model.threads;
        if (!threads) { /* auto: half the CPUs (the stream's other stages run meanwhile), 1..4 */
                threads = zcp_workers_cpus() / 2;
                threads = threads < 1 ? 1 : threads > 4 ? 4 : threads;
        }
        if (threads > 1 && (ctx->model || ctx->motion)) {
                r = zcp_workers_new(threads, "zcp-cpw-", &ctx->team);
                if (r < 0) {
                        zcp_err("cpu backend: stream %s: cannot start %u threads: %s", ctx->stream, threads,
                                strerror(-r));
                        goto fail;
                }
        }
        zcp_info("cpu backend: stream %s: %u thread%s", ctx->stream, zcp_workers_count(ctx->team),
                 zcp_workers_count(ctx->team) == 1 ? "" : "s");
        *ret_ctx = ctx;
        return 0;
fail:
        cpu_close(ctx);
        return r;
}

static int cpu_submit(struct zcp_backend_ctx *ctx, struct zcp_slot *slot)
{
        const struct zcp_frame *f = &slot->frame;
        struct zcp_result res;

        if (f->width != ctx->width || f->height != ctx->height || f->fmt != ZCP_PIX_NV12) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 5 * ZCP_NSEC_PER_SEC,
                                    "cpu backend: stream %s: frame %llu is %ux%u %s, expected %ux%u nv12",
                                    ctx->stream, (unsigned long long)f->seq, f->width, f->height,
                                    zcp_pixfmt_name(f->fmt), ctx->width, ctx->height);
                return -EINVAL;
        }

        memset(&res, 0, sizeof(res));
        for (int i = 0; i < 4; i++)
                res.bbox[i] = -1;
        if (ctx->model) {
                float *arena = zcp_fast_plan_arena(ctx->plan);
                const struct zcp_plan *m = ctx->model;

                zcp_fast_preprocess(ctx->pre, ctx->team, slot->data, arena + m->tensors[m->input.t].off);
                zcp_fast_plan_run(ctx->plan, ctx->team);
                if (m->head.kind == ZCP_HEAD_CLASSIFY) {
                        zcp_ref_classify(m, arena, ctx->probs);
                        zcp_ref_topk(ctx->probs, m->head.classes, ctx->top_k, res.topk_class, res.topk_prob);
                        res.topk_count = ctx->top_k;
                } else {
                        uint32_t n = zcp_ref_centernet(m, arena, ctx->cand);
                        res.det_count = zcp_detect_post(ctx->cand, n, &ctx->det, res.det);
                }
        }
        if (ctx->motion)
                zcp_fast_grid(ctx->team, slot->data, ctx->width, ctx->height, ctx->mp.cell, ctx->grid);
        if (ctx->motion) {
                /* The moving mask into the slot's, when the ring made room for this grid's. */
                zcp_ref_motion(ctx->grid, ctx->bg, ctx->first, &ctx->mp, &res,
                               slot->mask && slot->mask_words == ctx->mask_words ? slot->mask : NULL);
                ctx->first = false;
        }
        res.valid = 1;
        *slot->result = res;
        return 0;
}

static int cpu_wait(struct zcp_backend_ctx *ctx, struct zcp_slot *slot)
{
        return 0;   /* submit finished the work */
}

static const char *cpu_transfer_mode(const struct zcp_backend_ctx *ctx)
{
        return "host";
}

const struct zcp_backend_ops zcp_backend_cpu = {
        .name = "cpu",
        .probe = cpu_probe,
        .allocator = cpu_allocator,
        .open = cpu_open,
        .submit = cpu_submit,
        .wait = cpu_wait,
        .transfer_mode = cpu_transfer_mode,
        .close = cpu_close,
};
