/* SPDX-License-Identifier: MIT */
/*
 * cpu_fast.h against the C reference (reference.c, the oracle):
 * - plans: every op's output within 1e-4 relative of the reference's, for
 *   random plans of every op kind (planutil.h), zcnet plans (the default
 *   weights, random shapes) and the shipped CenterNet, with teams of 1 to 4
 *   (and a random plan with 10, past the members with scratch of their own);
 *   each 1x1 convolution and the depthwise one after it run together too
 *   (the fast path may make the first's output row by row inside the second;
 *   ZCP_FAST_FUSE=all makes it do so for every such pair, for the random
 *   plans and CenterNet);
 *   the random plans and default zcnet again with the kernels of each lower
 *   instruction set this CPU runs (ZCP_FAST_ISA);
 * - the motion grid: equal to the reference's for random and real frames,
 *   sizes with partial edge cells, cells 2..256, widths past one pass of
 *   column sums, teams of 1 to 4; then motion results and moving masks equal
 *   frame by frame;
 * - the moving mask of two frames: the CPU backend (fast grid) and the
 *   reference (reference grid, zcp_ref_motion) equal an obvious per-pixel
 *   computation from the two frames, popcount == moving_cells, set cells
 *   inside the bbox (cells 2..31, edge cells, 1..3 threads);
 * - the input tensor: equal to zcp_ref_preprocess's bit for bit (downscale,
 *   upscale, odd sizes, random and real frames, teams of 1 to 4; NCHW and
 *   NHWC, pixels 0..1 and 0..255, stretch and letterbox);
 * - the CPU backend ops: model.threads 1, 2 and 3 give the same result block
 *   and mask.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/workers.h"
#include "hostutil.h"
#include "planutil.h"
#include "infer/backend.h"
#include "infer/cpu_fast.h"
#include "infer/reference.h"

static const float MEAN[3] = { 0.485f, 0.456f, 0.406f };
static const float STD[3] = { 0.229f, 0.224f, 0.225f };

static struct zcp_workers *teams[4]; /* 1..4 members; [0] is NULL (the caller alone) */
static double worst_rel;
static uint32_t pairs; /* 1x1 + depthwise pairs run together */

static struct zcp_preprocess_params pp_for(uint32_t w, uint32_t h, uint32_t iw, uint32_t ih, uint32_t cell)
{
        struct zcp_preprocess_params p = { .width = w, .height = h, .in_w = iw, .in_h = ih, .cell = cell };

        memcpy(p.mean, MEAN, sizeof(MEAN));
        memcpy(p.std, STD, sizeof(STD));
        return p;
}

/*
 * A plan on the input in `in` (NHWC, the plan's input size) through the fast path with every
 * team, op by op: each op's output view against the reference's op run on the same arena
 * (copied before it, so that differences do not pile up), relative, floor 1e-3. Then the whole
 * plan at once and its head's views against the reference's whole run.
 */
static void check_plan_teams(const struct zcp_plan *m, const char *what, const float *in, struct zcp_workers **tm,
                             int nt)
{
        const struct zcp_plan_tensor *ti = &m->tensors[m->input.t];
        const size_t bytes = sizeof(float) * m->arena_floats;
        float *want = kt_malloc(bytes), *whole = kt_malloc(bytes);
        struct zcp_fast_plan *fp = NULL;

        memset(whole, 0, bytes);
        memcpy(whole + ti->off, in, sizeof(float) * 3 * ti->w * ti->h);
        zcp_ref_plan(m, whole);
        CHECK(zcp_fast_plan_new(m, &fp) == 0);
        for (int t = 0; t < nt; t++) {
                float *got = zcp_fast_plan_arena(fp);
                const uint32_t members = zcp_workers_count(tm[t]);
                double d;

                memcpy(got + ti->off, in, sizeof(float) * 3 * ti->w * ti->h);
                for (uint32_t i = 0; i < m->op_count; i++) {
                        memcpy(want, got, bytes);
                        zcp_ref_op(m, i, want);
                        zcp_fast_plan_run_ops(fp, tm[t], i, 1);
                        d = kt_view_diff(m, got, want, m->ops[i].out, 1e-3);
                        worst_rel = d > worst_rel ? d : worst_rel;
                        CHECK_MSG(d <= 1e-4, "%s, %u threads: op %u (%s %s) differs by %.3g", what, members, i,
                                  zcp_op_kind_names[m->ops[i].kind], m->ops[i].name, d);
                }
                /*
                 * Pairs the fast path may run as one (a 1x1 convolution inside the depthwise one
                 * after it): the second op's output against the reference's two ops.
                 */
                for (uint32_t i = 0; i + 1 < m->op_count; i++) {
                        const struct zcp_plan_op *a = &m->ops[i], *b = &m->ops[i + 1];

                        if (a->kind != ZCP_OP_CONV || b->kind != ZCP_OP_CONV || a->u.conv.kh * a->u.conv.kw != 1 ||
                            a->u.conv.groups != 1 || b->u.conv.groups == 1 || b->in.t != a->out.t)
                                continue;
                        memcpy(want, got, bytes);
                        zcp_ref_op(m, i, want);
                        zcp_ref_op(m, i + 1, want);
                        zcp_fast_plan_run_ops(fp, tm[t], i, 2);
                        d = kt_view_diff(m, got, want, b->out, 1e-3);
                        worst_rel = d > worst_rel ? d : worst_rel;
                        CHECK_MSG(d <= 1e-4, "%s, %u threads: ops %u and %u (%s, %s) together differ by %.3g", what,
                                  members, i, i + 1, a->name, b->name, d);
                        pairs++;
                }
                memcpy(got + ti->off, in, sizeof(float) * 3 * ti->w * ti->h);
                zcp_fast_plan_run(fp, tm[t]);
                d = kt_view_diff(m, got, whole, m->head.scores, 1e-3);
                if (m->head.kind == ZCP_HEAD_CENTERNET)
                        d = fmax(d, kt_view_diff(m, got, whole, m->head.sizes, 1e-3));
                CHECK_MSG(d <= 1e-3, "%s, %u threads: the head's maps differ by %.3g", what, members, d);
        }
        zcp_fast_plan_free(fp);
        free(want);
        free(whole);
}

static void check_plan(const struct zcp_plan *m, const char *what, const float *in)
{
        check_plan_teams(m, what, in, teams, 4);
}

static void test_plans(void)
{
        static const struct {
                uint32_t convs, chans[6], strides[5], classes, iw, ih;
        } shapes[] = {
                { 3, { 3, 5, 7, 4 }, { 1, 3, 2 }, 10, 37, 23 },
                { 2, { 3, 24, 40 }, { 1, 2 }, 17, 31, 45 },
                { 1, { 3, 1 }, { 2 }, 3, 9, 8 },
                { 5, { 3, 8, 16, 33, 64, 100 }, { 2, 1, 2, 2, 3 }, 50, 128, 96 },
        };
        static const uint32_t random_sizes[][2] = { { 64, 48 }, { 67, 45 }, { 16, 16 }, { 130, 98 } };
        static const char *const levels[] = { "x86-64-v3", "baseline" };
        struct zcp_plan *def = kt_default_zcnet(224, 224), *cn = kt_load_model("centernet/model.json");
        struct zcp_fast_plan *best = NULL;
        int tested = 0;
        float *in = kt_malloc(sizeof(float) * 3 * 512 * 512);

        CHECK(def && cn);
        kt_seed(16);
        for (size_t i = 0; i < (size_t)3 * 512 * 512; i++)
                in[i] = (kt_unit() + 1.0f) * 127.5f;
        check_plan(def, "default zcnet", in);
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
                struct zcp_plan *m = kt_zcnet_plan(shapes[s].chans, shapes[s].strides, shapes[s].convs,
                                                   shapes[s].classes, shapes[s].iw, shapes[s].ih);
                check_plan(m, "random zcnet", in);
                zcp_plan_free(m);
        }
        for (size_t s = 0; s < sizeof(random_sizes) / sizeof(random_sizes[0]); s++) {
                struct zcp_plan *m = kt_random_plan(random_sizes[s][0], random_sizes[s][1], 7);
                check_plan(m, "random plan", in);
                zcp_plan_free(m);
        }
        check_plan(cn, "centernet", in);
        /* Every 1x1 convolution made inside the depthwise one after it, whatever its size. */
        CHECK(setenv("ZCP_FAST_FUSE", "all", 1) == 0);
        for (size_t s = 0; s < sizeof(random_sizes) / sizeof(random_sizes[0]); s++) {
                struct zcp_plan *m = kt_random_plan(random_sizes[s][0], random_sizes[s][1], 7);
                check_plan(m, "random plan, every pair fused", in);
                zcp_plan_free(m);
        }
        check_plan(cn, "centernet, every pair fused", in);
        CHECK(unsetenv("ZCP_FAST_FUSE") == 0);
        /* A team past the members with scratch of their own (8): the others take no scaled GEMM's units. */
        {
                struct zcp_workers *big = NULL;
                struct zcp_plan *m = kt_random_plan(67, 45, 7);

                CHECK(zcp_workers_new(10, "test-fast10", &big) == 0);
                check_plan_teams(m, "random plan, 10 threads", in, &big, 1);
                zcp_workers_free(big);
                zcp_plan_free(m);
        }
        /* The kernels of the lower instruction sets, where this CPU runs them. */
        for (size_t l = 0; l < sizeof(levels) / sizeof(levels[0]); l++) {
                char what[64];
                struct zcp_fast_plan *fp = NULL;

                CHECK(setenv("ZCP_FAST_ISA", levels[l], 1) == 0);
                CHECK(zcp_fast_plan_new(def, &fp) == 0);
                if (strcmp(zcp_fast_plan_isa(fp), levels[l]) != 0) {
                        printf("plans: %s kernels not run (the CPU lacks them)\n", levels[l]);
                        zcp_fast_plan_free(fp);
                        continue;
                }
                zcp_fast_plan_free(fp);
                snprintf(what, sizeof(what), "default zcnet, %s", levels[l]);
                check_plan(def, what, in);
                for (size_t s = 0; s < sizeof(random_sizes) / sizeof(random_sizes[0]); s++) {
                        struct zcp_plan *m = kt_random_plan(random_sizes[s][0], random_sizes[s][1], 7);
                        snprintf(what, sizeof(what), "random plan, %s", levels[l]);
                        check_plan(m, what, in);
                        zcp_plan_free(m);
                }
                tested++;
        }
        CHECK(unsetenv("ZCP_FAST_ISA") == 0);
        CHECK(zcp_fast_plan_new(cn, &best) == 0);
        printf("plans: fast (%s kernels; %d lower levels too) against reference, worst relative difference of an "
               "output %.3g; %u runs of a 1x1 and a depthwise convolution together\n", zcp_fast_plan_isa(best), tested,
               worst_rel, pairs);
        zcp_fast_plan_free(best);
        zcp_plan_free(def);
        zcp_plan_free(cn);
        free(in);
}

static void check_grid(const uint8_t *frame, uint32_t w, uint32_t h, uint32_t cell)
{
        const size_t cells = (size_t)zcp_grid_w(w, cell) * zcp_grid_h(h, cell);
        struct zcp_preprocess_params p = pp_for(w, h, 8, 8, cell);
        uint32_t *want = kt_malloc(cells * sizeof(uint32_t)), *got = kt_malloc(cells * sizeof(uint32_t));

        zcp_ref_preprocess(frame, &p, NULL, want);
        for (int ti = 0; ti < 4; ti++) {
                memset(got, 0xff, cells * sizeof(uint32_t));
                zcp_fast_grid(teams[ti], frame, w, h, cell, got);
                CHECK_MSG(memcmp(got, want, cells * sizeof(uint32_t)) == 0, "grid %ux%u cell %u, %d threads", w, h,
                          cell, ti + 1);
        }
        free(want);
        free(got);
}

static void test_grids(void)
{
        static const uint32_t sizes[][2] = { { 1920, 1080 }, { 642, 482 }, { 16, 16 }, { 2, 2 }, { 8200, 34 },
                                             { 8192, 20 }, { 100, 2 } };
        static const uint32_t cells[] = { 2, 3, 7, 16, 17, 64, 256 };
        size_t n = 0;

        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
                uint32_t w = sizes[s][0], h = sizes[s][1];
                uint8_t *f = kt_malloc(zcp_nv12_size(w, h));
                for (int noise = 0; noise < 2; noise++) {
                        kt_frame(f, w, h, noise);
                        if (noise == 0)
                                memset(f, 255, (size_t)w * (h < 4 ? h : 4)); /* saturated rows: sums at the top */
                        for (size_t c = 0; c < sizeof(cells) / sizeof(cells[0]); c++, n++)
                                check_grid(f, w, h, cells[c]);
                }
                free(f);
        }
        printf("grid: %zu cases equal to the reference\n", n);
}

/* Motion results frame by frame from the fast grid equal those from the reference grid. */
static void test_motion(void)
{
        uint8_t *real[8];
        uint32_t w = 0, h = 0, n = kt_sample_frames(real, 8, &w, &h);
        struct zcp_motion_params mp = { .cell = 16, .threshold = 12.0f, .alpha = 0.05f };
        uint32_t *g1, *g2, *m1, *m2;
        float *b1, *b2;
        size_t cells;

        if (n == 0) {
                w = 320;
                h = 240;
                n = 4;
                for (uint32_t i = 0; i < n; i++) {
                        real[i] = kt_malloc(zcp_nv12_size(w, h));
                        kt_frame(real[i], w, h, false);
                }
        }
        mp.width = w;
        mp.height = h;
        cells = (size_t)zcp_grid_w(w, 16) * zcp_grid_h(h, 16);
        g1 = kt_malloc(cells * 4);
        g2 = kt_malloc(cells * 4);
        b1 = kt_malloc(cells * 4);
        b2 = kt_malloc(cells * 4);
        m1 = kt_malloc(zcp_mask_words(cells) * 4);
        m2 = kt_malloc(zcp_mask_words(cells) * 4);
        for (uint32_t i = 0; i < n; i++) {
                struct zcp_preprocess_params p = pp_for(w, h, 8, 8, 16);
                struct zcp_result r1, r2;

                memset(&r1, 0, sizeof(r1));
                memset(&r2, 0, sizeof(r2));
                zcp_ref_preprocess(real[i], &p, NULL, g1);
                zcp_fast_grid(teams[i % 4], real[i], w, h, 16, g2);
                memset(m2, 0xA5, zcp_mask_words(cells) * 4);
                zcp_ref_motion(g1, b1, i == 0, &mp, &r1, m1);
                zcp_ref_motion(g2, b2, i == 0, &mp, &r2, m2);
                CHECK(memcmp(&r1, &r2, sizeof(r1)) == 0 && memcmp(b1, b2, cells * 4) == 0);
                CHECK(memcmp(m1, m2, zcp_mask_words(cells) * 4) == 0);
                kt_mask_check(&r2, m2, w, h, 16, "motion");
                free(real[i]);
        }
        printf("motion: %u frames of %ux%u, equal results and masks\n", n, w, h);
        free(m1);
        free(m2);
        free(g1);
        free(g2);
        free(b1);
        free(b2);
}

static void check_tensor(const uint8_t *frame, uint32_t w, uint32_t h, uint32_t iw, uint32_t ih)
{
        const size_t n = (size_t)3 * iw * ih;
        float *want = kt_malloc(n * sizeof(float)), *got = kt_malloc(n * sizeof(float));

        /* the plans' layout (NHWC) with each pixel scale and fit, and the CHW layout */
        for (int variant = 0; variant < 4; variant++) {
                struct zcp_preprocess_params p = pp_for(w, h, iw, ih, 16);
                struct zcp_fast_pre *pre = NULL;

                p.nhwc = variant > 0;
                p.byte_pixels = variant >= 2;
                p.letterbox = variant == 3;
                zcp_ref_preprocess(frame, &p, want, NULL);
                CHECK(zcp_fast_pre_new(&p, &pre) == 0);
                for (int ti = 0; ti < 4; ti++) {
                        memset(got, 0xff, n * sizeof(float));
                        zcp_fast_preprocess(pre, teams[ti], frame, got);
                        for (size_t i = 0; i < n; i++)
                                CHECK_MSG(memcmp(&got[i], &want[i], sizeof(float)) == 0,
                                          "tensor %ux%u -> %ux%u variant %d, %d threads: [%zu] %.9g, reference %.9g",
                                          w, h, iw, ih, variant, ti + 1, i, (double)got[i], (double)want[i]);
                }
                zcp_fast_pre_free(pre);
        }
        free(want);
        free(got);
}

static void test_tensors(void)
{
        static const uint32_t cases[][4] = {
                { 642, 482, 224, 224 }, { 1920, 1080, 224, 224 }, { 720, 528, 96, 64 }, { 64, 48, 96, 64 },
                { 2, 2, 8, 8 },         { 642, 482, 37, 23 },     { 1280, 720, 300, 513 },
        };
        uint8_t *real[2];
        uint32_t rw = 0, rh = 0, nreal = kt_sample_frames(real, 2, &rw, &rh);

        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
                uint8_t *f = kt_malloc(zcp_nv12_size(cases[c][0], cases[c][1]));
                for (int noise = 0; noise < 2; noise++) {
                        kt_frame(f, cases[c][0], cases[c][1], noise);
                        check_tensor(f, cases[c][0], cases[c][1], cases[c][2], cases[c][3]);
                }
                free(f);
        }
        for (uint32_t i = 0; i < nreal; i++) {
                check_tensor(real[i], rw, rh, 224, 224);
                free(real[i]);
        }
        printf("tensor: equal to the reference bit for bit (%zu sizes, %u real frames)\n",
               sizeof(cases) / sizeof(cases[0]), nreal);
}

/* The production ops with 1, 2 and 3 threads: the same result, byte for byte. */
static void test_backend_threads(void)
{
        const uint32_t w = 642, h = 482;
        struct zcp_plan *m = kt_default_zcnet(224, 224);
        struct zcp_stream_config cfg = kt_stream_config();
        struct zcp_backend_params bp;
        char err[256];
        struct zcp_result res[3][3];
        const uint32_t words =
                zcp_mask_words((uint64_t)zcp_grid_w(w, cfg.motion.cell) * zcp_grid_h(h, cfg.motion.cell));
        uint32_t *masks = kt_malloc((size_t)9 * words * 4);
        struct zcp_slot slot = { 0 };

        CHECK(m);
        slot.data = kt_malloc(zcp_nv12_size(w, h));
        slot.cap = zcp_nv12_size(w, h);
        slot.frame = (struct zcp_frame){ .width = w, .height = h, .fmt = ZCP_PIX_NV12, .stride = w,
                                         .bytes = slot.cap };
        memset(res, 0, sizeof(res));
        for (uint32_t t = 0; t < 3; t++) {
                struct zcp_backend_ctx *ctx = NULL;

                cfg.model.threads = t + 1;
                CHECK_MSG(zcp_backend_params_init(&bp, &cfg, m, w, h, "t", err, sizeof(err)) == 0, "%s", err);
                CHECK(zcp_backend_cpu.open(&bp, NULL, &ctx) == 0);
                kt_seed(77);
                for (int f = 0; f < 3; f++) {
                        kt_frame(slot.data, w, h, false);
                        slot.result = &res[t][f];
                        slot.mask = masks + (size_t)(t * 3 + f) * words;
                        slot.mask_words = words;
                        memset(slot.mask, 0xA5, (size_t)words * 4);
                        CHECK(zcp_backend_cpu.submit(ctx, &slot) == 0 && zcp_backend_cpu.wait(ctx, &slot) == 0);
                        CHECK(res[t][f].valid == 1 && res[t][f].topk_count == 5);
                        CHECK(memcmp(&res[t][f], &res[0][f], sizeof(res[0][f])) == 0);
                        CHECK(memcmp(slot.mask, masks + (size_t)f * words, (size_t)words * 4) == 0);
                        kt_mask_check(&res[t][f], slot.mask, w, h, cfg.motion.cell, "backend threads");
                }
                CHECK(res[t][2].moving_cells > 0);
                zcp_backend_cpu.close(ctx);
        }
        printf("backend: 1, 2 and 3 threads give equal results and masks\n");
        free(masks);
        zcp_plan_free(m);
        free(slot.data);
}

/*
 * Two frames, a scene then the same scene with patches changed: the moving
 * mask of the second from the CPU backend (fast grid, any team), from the
 * reference path and from kt_mask_two_frames (pixels, plain loops) agree.
 */
static void test_mask_two_frames(void)
{
        static const struct {
                uint32_t w, h, cell, threads;
                float threshold;
        } cases[] = {
                { 320, 240, 16, 1, 12.0f }, { 642, 482, 16, 3, 12.0f }, { 100, 66, 7, 2, 6.0f },
                { 64, 48, 2, 1, 20.0f },    { 258, 130, 31, 2, 4.0f },  { 1280, 720, 5, 3, 12.0f },
        };
        uint32_t total = 0;

        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
                const uint32_t w = cases[c].w, h = cases[c].h, cell = cases[c].cell;
                const uint32_t gw = zcp_grid_w(w, cell), gh = zcp_grid_h(h, cell), n = gw * gh;
                const uint32_t words = zcp_mask_words(n);
                struct zcp_stream_config cfg = kt_stream_config();
                struct zcp_backend_params bp = { .cfg = &cfg, .width = w, .height = h, .stream_name = "mask" };
                struct zcp_motion_params mp = { .width = w, .height = h, .cell = cell,
                                                .threshold = cases[c].threshold, .alpha = 0.05f };
                struct zcp_preprocess_params pp = pp_for(w, h, 8, 8, cell);
                uint8_t *a = kt_malloc(zcp_nv12_size(w, h)), *b = kt_malloc(zcp_nv12_size(w, h));
                uint32_t *grid = kt_malloc((size_t)n * 4), *want = kt_malloc((size_t)words * 4);
                uint32_t *ref = kt_malloc((size_t)words * 4), *got = kt_malloc((size_t)words * 4);
                float *bg = kt_malloc((size_t)n * 4);
                struct zcp_result rr, br;
                struct zcp_slot slot = { 0 };
                struct zcp_backend_ctx *ctx = NULL;
                uint32_t count;

                cfg.model.enabled = false;
                cfg.motion.enabled = true;
                cfg.motion.cell = cell;
                cfg.motion.threshold = cases[c].threshold;
                cfg.motion.alpha = 0.05f;
                cfg.model.threads = cases[c].threads;
                kt_seed(1000 + c);
                kt_frame(a, w, h, false);
                memcpy(b, a, zcp_nv12_size(w, h));
                /* Patches of new luma at random places and sizes, and small noise everywhere. */
                for (int k = 0; k < 5; k++) {
                        const uint32_t pw = 1 + (uint32_t)(kt_rnd() % (w / 3)), ph = 1 + (uint32_t)(kt_rnd() % (h / 3));
                        const uint32_t px = (uint32_t)(kt_rnd() % (w - pw)), py = (uint32_t)(kt_rnd() % (h - ph));
                        const uint8_t v = (uint8_t)(kt_rnd() % 256);
                        for (uint32_t y = py; y < py + ph; y++)
                                memset(b + (size_t)y * w + px, v, pw);
                }
                for (size_t i = 0; i < (size_t)w * h; i++) {
                        int v = b[i] + (int)(kt_rnd() % 5) - 2;
                        b[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
                count = kt_mask_two_frames(a, b, w, h, cell, cases[c].threshold, want);
                CHECK_MSG(count > 0 && count < n, "case %zu: %u of %u cells move: pick another scene", c, count, n);

                /* The reference path. */
                memset(&rr, 0, sizeof(rr));
                zcp_ref_preprocess(a, &pp, NULL, grid);
                zcp_ref_motion(grid, bg, true, &mp, &rr, ref);
                CHECK(rr.moving_cells == 0 && rr.mask_words == words);
                for (uint32_t i = 0; i < words; i++)
                        CHECK(ref[i] == 0);
                zcp_ref_preprocess(b, &pp, NULL, grid);
                zcp_ref_motion(grid, bg, false, &mp, &rr, ref);

                /* The CPU backend, as the pipeline drives it. */
                CHECK(zcp_backend_cpu.open(&bp, NULL, &ctx) == 0);
                slot.cap = zcp_nv12_size(w, h);
                slot.frame = (struct zcp_frame){ .width = w, .height = h, .fmt = ZCP_PIX_NV12, .stride = w,
                                                 .bytes = slot.cap };
                slot.result = &br;
                slot.mask = got;
                slot.mask_words = words;
                slot.data = a;
                memset(got, 0xA5, (size_t)words * 4);
                CHECK(zcp_backend_cpu.submit(ctx, &slot) == 0 && zcp_backend_cpu.wait(ctx, &slot) == 0);
                CHECK(br.valid == 1 && br.moving_cells == 0 && br.mask_words == words);
                for (uint32_t i = 0; i < words; i++)
                        CHECK(got[i] == 0);
                slot.data = b;
                memset(got, 0xA5, (size_t)words * 4);
                CHECK(zcp_backend_cpu.submit(ctx, &slot) == 0 && zcp_backend_cpu.wait(ctx, &slot) == 0);
                zcp_backend_cpu.close(ctx);

                for (uint32_t i = 0; i < n; i++)
                        CHECK_MSG(kt_mask_bit(ref, i) == kt_mask_bit(want, i) &&
                                          kt_mask_bit(got, i) == kt_mask_bit(want, i),
                                  "case %zu (%ux%u cell %u): cell %u (%u, %u): obvious %d, reference %d, backend %d", c,
                                  w, h, cell, i, i % gw, i / gw, kt_mask_bit(want, i), kt_mask_bit(ref, i),
                                  kt_mask_bit(got, i));
                CHECK(rr.moving_cells == count && br.moving_cells == count);
                kt_mask_check(&rr, ref, w, h, cell, "reference two frames");
                kt_mask_check(&br, got, w, h, cell, "backend two frames");
                CHECK(memcmp(rr.bbox, br.bbox, sizeof(rr.bbox)) == 0 && rr.total_cells == br.total_cells &&
                      rr.moving_fraction == br.moving_fraction);
                total += n;
                free(a);
                free(b);
                free(grid);
                free(want);
                free(ref);
                free(got);
                free(bg);
        }
        printf("mask of two frames: %zu geometries (%u cells), backend = reference = per-pixel computation\n",
               sizeof(cases) / sizeof(cases[0]), total);
}

int main(void)
{
        setvbuf(stdout, NULL, _IOLBF, 0);
        teams[0] = NULL;
        for (uint32_t i = 1; i < 4; i++)
                CHECK(zcp_workers_new(i + 1, "test-fast", &teams[i]) == 0);
        test_grids();
        test_tensors();
        test_motion();
        test_plans();
        test_backend_threads();
        test_mask_two_frames();
        for (uint32_t i = 1; i < 4; i++)
                zcp_workers_free(teams[i]);
        return 0;
}
