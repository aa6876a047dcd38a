/* SPDX-License-Identifier: MIT */
/*
 * The C reference (reference.c, reference_plan.c) against an independent naive
 * computation in double precision written here (full-resolution RGB materialized,
 * PyTorch bilinear resize, normalize, naive zcnet conv/pool/fc/softmax over the
 * plan's weights), on random NV12 frames; the motion grid against a per-pixel count; motion results on
 * a synthetic sequence whose moving cells are known by construction (and
 * the moving mask: popcount, cells inside the bbox, the bbox the cells'
 * span); top-k order and ties; and the CPU backend ops end to end on one
 * slot, its mask equal to the reference's.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/ring.h"
#include "hostutil.h"
#include "planutil.h"
#include "infer/backend.h"
#include "infer/reference.h"
#include "model/model.h"

static const float MEAN[3] = { 0.485f, 0.456f, 0.406f };
static const float STD[3] = { 0.229f, 0.224f, 0.225f };

static uint64_t rng = 0x1234567887654321ull;

static uint64_t rnd(void)
{
        uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}


static void *xmalloc(size_t n)
{
        void *p = malloc(n ? n : 1);
        CHECK(p);
        return p;
}

/* Random NV12, luma with some large-scale structure plus noise so that the
 * classifier does not see pure noise; chroma uniform. */
static void random_nv12(uint8_t *f, uint32_t w, uint32_t h)
{
        uint32_t phase = (uint32_t)(rnd() % 97);

        for (uint32_t y = 0; y < h; y++)
                for (uint32_t x = 0; x < w; x++)
                        f[(size_t)y * w + x] = (uint8_t)(((x + phase) * 3 + y * 2) % 200 + (rnd() >> 58));
        for (size_t i = (size_t)w * h; i < zcp_nv12_size(w, h); i++)
                f[i] = (uint8_t)(rnd() >> 56);
}

/* ------------------------------------------------------- naive, in double */

static void naive_tensor(const uint8_t *nv12, uint32_t W, uint32_t H, uint32_t iw, uint32_t ih, double *out)
{
        double *rgb = xmalloc(sizeof(double) * 3 * W * H);
        const uint8_t *uv = nv12 + (size_t)W * H;
        const size_t plane = (size_t)W * H;

        for (uint32_t y = 0; y < H; y++) {
                for (uint32_t x = 0; x < W; x++) {
                        double c = nv12[(size_t)y * W + x] - 16.0;
                        double d = uv[(size_t)(y / 2) * W + (x / 2) * 2] - 128.0;
                        double e = uv[(size_t)(y / 2) * W + (x / 2) * 2 + 1] - 128.0;
                        double v[3] = { 1.164 * c + 1.596 * e, 1.164 * c - 0.392 * d - 0.813 * e,
                                        1.164 * c + 2.017 * d };
                        for (int k = 0; k < 3; k++)
                                rgb[k * plane + (size_t)y * W + x] = v[k] < 0 ? 0 : v[k] > 255 ? 255 : v[k];
                }
        }
        for (uint32_t oy = 0; oy < ih; oy++) {
                double sy = (oy + 0.5) * ((double)H / ih) - 0.5;
                if (sy < 0)
                        sy = 0;
                uint32_t y0 = (uint32_t)floor(sy), y1 = y0 + 1 < H ? y0 + 1 : H - 1;
                double ly1 = sy - y0, ly0 = 1 - ly1;
                for (uint32_t ox = 0; ox < iw; ox++) {
                        double sx = (ox + 0.5) * ((double)W / iw) - 0.5;
                        if (sx < 0)
                                sx = 0;
                        uint32_t x0 = (uint32_t)floor(sx), x1 = x0 + 1 < W ? x0 + 1 : W - 1;
                        double lx1 = sx - x0, lx0 = 1 - lx1;
                        for (int k = 0; k < 3; k++) {
                                const double *p = rgb + k * plane;
                                double v = ly0 * (lx0 * p[(size_t)y0 * W + x0] + lx1 * p[(size_t)y0 * W + x1]) +
                                           ly1 * (lx0 * p[(size_t)y1 * W + x0] + lx1 * p[(size_t)y1 * W + x1]);
                                out[(size_t)k * iw * ih + (size_t)oy * iw + ox] =
                                        (v / 255.0 - (double)MEAN[k]) / (double)STD[k];
                        }
                }
        }
        free(rgb);
}

/* A zcnet plan's layers: conv i is op i (3x3, padding 1, ReLU), then the mean, then fc. */
static void naive_zcnet(const struct zcp_plan *m, const double *tensor, uint32_t w, uint32_t h, double *probs)
{
        const uint32_t convs = m->op_count - 2, classes = m->head.classes;
        const struct zcp_plan_op *fc = &m->ops[m->op_count - 1];
        double *cur = xmalloc(sizeof(double) * 3 * w * h), *logit;
        uint32_t C = 3;

        memcpy(cur, tensor, sizeof(double) * 3 * w * h);
        for (uint32_t l = 0; l < convs; l++) {
                const struct zcp_plan_op *op = &m->ops[l];
                const float *wt = m->weights + op->u.conv.weight, *bias = m->weights + op->u.conv.bias;
                const uint32_t O = op->out.c;
                int s = (int)op->u.conv.sh;
                uint32_t ow = (uint32_t)((w + 2 * 1 - 3) / (uint32_t)s + 1);
                uint32_t oh = (uint32_t)((h + 2 * 1 - 3) / (uint32_t)s + 1);
                double *out = xmalloc(sizeof(double) * O * ow * oh);

                CHECK(op->kind == ZCP_OP_CONV && op->in.c == C && op->u.conv.kh == 3 && op->act.kind == ZCP_ACT_RELU);
                for (uint32_t o = 0; o < O; o++)
                        for (uint32_t oy = 0; oy < oh; oy++)
                                for (uint32_t ox = 0; ox < ow; ox++) {
                                        double acc = bias[o];
                                        for (uint32_t ci = 0; ci < C; ci++)
                                                for (int ky = 0; ky < 3; ky++)
                                                        for (int kx = 0; kx < 3; kx++) {
                                                                int iy = (int)oy * s + ky - 1, ix = (int)ox * s + kx - 1;
                                                                if (iy < 0 || ix < 0 || iy >= (int)h || ix >= (int)w)
                                                                        continue;
                                                                acc += (double)wt[(((size_t)ky * 3 + (size_t)kx) * C + ci) * O + o] *
                                                                       cur[((size_t)ci * h + (uint32_t)iy) * w + (uint32_t)ix];
                                                        }
                                        out[((size_t)o * oh + oy) * ow + ox] = acc > 0 ? acc : 0;
                                }
                free(cur);
                cur = out;
                w = ow;
                h = oh;
                C = O;
        }
        CHECK(m->ops[convs].kind == ZCP_OP_MEAN && fc->in.c == C);
        double *pooled = xmalloc(sizeof(double) * C);
        for (uint32_t c = 0; c < C; c++) {
                double s = 0;
                for (size_t i = 0; i < (size_t)w * h; i++)
                        s += cur[(size_t)c * w * h + i];
                pooled[c] = s / ((double)w * h);
        }
        logit = xmalloc(sizeof(double) * classes);
        double mx = -INFINITY, sum = 0;
        for (uint32_t k = 0; k < classes; k++) {
                double a = m->weights[fc->u.conv.bias + k];
                for (uint32_t j = 0; j < C; j++)
                        a += (double)m->weights[fc->u.conv.weight + (size_t)j * classes + k] * pooled[j];
                logit[k] = a;
                mx = a > mx ? a : mx;
        }
        for (uint32_t k = 0; k < classes; k++)
                sum += exp(logit[k] - mx);
        for (uint32_t k = 0; k < classes; k++)
                probs[k] = exp(logit[k] - mx) / sum;
        free(logit);
        free(pooled);
        free(cur);
}

/* The reference's probabilities for an NHWC input tensor. */
static void ref_probs(const struct zcp_plan *m, const float *nhwc, float *probs)
{
        float *arena = xmalloc(sizeof(float) * m->arena_floats);
        const struct zcp_plan_tensor *ti = &m->tensors[m->input.t];

        memcpy(arena + ti->off, nhwc, sizeof(float) * 3 * ti->w * ti->h);
        zcp_ref_plan(m, arena);
        zcp_ref_classify(m, arena, probs);
        free(arena);
}

/* ------------------------------------------------------------------ tests */

/* A small zcnet plan with odd channel counts and strides 1, 3, 2 for an iw x ih input. */
static struct zcp_plan *small_model(uint32_t iw, uint32_t ih)
{
        static const uint32_t ch[] = { 3, 5, 7, 4 }, strides[] = { 1, 3, 2 };

        kt_seed(7);
        return kt_zcnet_plan(ch, strides, 3, 10, iw, ih);
}

static struct zcp_plan *default_model(uint32_t iw, uint32_t ih)
{
        struct zcp_plan *m = kt_default_zcnet(iw, ih);

        CHECK(m && m->op_count == 6 && m->head.classes == 1000);
        return m;
}

static void check_reference(const struct zcp_plan *m, uint32_t W, uint32_t H)
{
        const uint32_t iw = m->tensors[m->input.t].w, ih = m->tensors[m->input.t].h, classes = m->head.classes;
        struct zcp_preprocess_params p = { .width = W, .height = H, .in_w = iw, .in_h = ih, .cell = 16 };
        uint8_t *frame = xmalloc(zcp_nv12_size(W, H));
        float *t = xmalloc(sizeof(float) * 3 * iw * ih), *th = xmalloc(sizeof(float) * 3 * iw * ih);
        double *dt = xmalloc(sizeof(double) * 3 * iw * ih);
        float *probs = xmalloc(sizeof(float) * classes);
        double *dprobs = xmalloc(sizeof(double) * classes);
        double worst_t = 0, worst_p = 0;

        memcpy(p.mean, MEAN, sizeof(MEAN));
        memcpy(p.std, STD, sizeof(STD));
        random_nv12(frame, W, H);
        zcp_ref_preprocess(frame, &p, t, NULL);
        naive_tensor(frame, W, H, iw, ih, dt);
        for (size_t i = 0; i < (size_t)3 * iw * ih; i++) {
                double e = fabs(t[i] - dt[i]);
                worst_t = e > worst_t ? e : worst_t;
                CHECK_MSG(e <= 1e-3, "%ux%u->%ux%u tensor[%zu] %.9g vs %.9g", W, H, iw, ih, i,
                          t[i], dt[i]);
        }
        /* the same values in the plans' layout */
        p.nhwc = true;
        zcp_ref_preprocess(frame, &p, th, NULL);
        for (size_t i = 0; i < (size_t)iw * ih; i++)
                for (int k = 0; k < 3; k++)
                        CHECK(th[i * 3 + (size_t)k] == t[(size_t)k * iw * ih + i]);
        ref_probs(m, th, probs);
        naive_zcnet(m, dt, iw, ih, dprobs);
        double sum = 0;
        for (uint32_t k = 0; k < classes; k++) {
                double e = fabs(probs[k] - dprobs[k]) / dprobs[k];
                worst_p = e > worst_p ? e : worst_p;
                sum += probs[k];
                CHECK_MSG(e <= 1e-4, "%ux%u->%ux%u prob[%u] %.9g vs %.9g", W, H, iw, ih, k, probs[k], dprobs[k]);
        }
        CHECK(fabs(sum - 1) < 1e-4);
        printf("reference %ux%u -> %ux%u (%u ops, %u classes): tensor max abs err %.3g, prob max rel err %.3g\n",
               W, H, iw, ih, m->op_count, classes, worst_t, worst_p);
        free(frame);
        free(t);
        free(th);
        free(dt);
        free(probs);
        free(dprobs);
}

static void check_grid(uint32_t W, uint32_t H, uint32_t cell)
{
        struct zcp_preprocess_params p = { .width = W, .height = H, .in_w = 8, .in_h = 8, .cell = cell };
        uint32_t gw = (W + cell - 1) / cell, gh = (H + cell - 1) / cell;
        uint8_t *frame = xmalloc(zcp_nv12_size(W, H));
        uint32_t *grid = xmalloc(sizeof(uint32_t) * gw * gh);
        uint64_t *sum = calloc((size_t)gw * gh, sizeof(uint64_t)), *cnt = calloc((size_t)gw * gh, sizeof(uint64_t));

        CHECK(sum && cnt);
        CHECK(zcp_grid_w(W, cell) == gw && zcp_grid_h(H, cell) == gh);
        random_nv12(frame, W, H);
        zcp_ref_preprocess(frame, &p, NULL, grid);
        for (uint32_t y = 0; y < H; y++)
                for (uint32_t x = 0; x < W; x++) {
                        sum[(y / cell) * gw + x / cell] += frame[(size_t)y * W + x];
                        cnt[(y / cell) * gw + x / cell]++;
                }
        for (size_t i = 0; i < (size_t)gw * gh; i++)
                CHECK_MSG(grid[i] == sum[i] / cnt[i], "%ux%u cell %u: grid[%zu] = %u, expected %llu", W, H, cell, i,
                          grid[i], (unsigned long long)(sum[i] / cnt[i]));
        free(frame);
        free(grid);
        free(sum);
        free(cnt);
}

/* ------------------------------------------------------- motion sequence */

#define MW 200
#define MH 120
#define MCELL 16

struct motion_step {
        int sq_x, sq_y;            /* 40x40 square of luma 200, or -1 for none */
        int cell_x, cell_y, cell_v;/* one cell filled with cell_v, or -1 */
        uint32_t moving;
        int32_t bbox[4];
};

/*
 * Background 50, cell 16, threshold 12, alpha 0.05. A square covering a cell
 * by >= 8x8 pixels raises its mean to >= 87; the square never covers a cell
 * in two consecutive frames, so the background of a covered cell rises to at
 * most 57.5 and an uncovered cell differs from it by <= 7.5 (never moving).
 */
static const struct motion_step motion_seq[] = {
        { -1, -1, -1, -1, -1, 0, { -1, -1, -1, -1 } },             /* first frame: background */
        { 40, 24, -1, -1, -1, 9, { 32, 16, 80, 64 } },             /* cells x 2..4, y 1..3 */
        { 104, 24, -1, -1, -1, 9, { 96, 16, 144, 64 } },           /* x 6..8, y 1..3 */
        { 160, 80, -1, -1, -1, 9, { 160, 80, 200, 120 } },         /* x 10..12, y 5..7: clipped to the frame */
        { 8, 72, -1, -1, -1, 9, { 0, 64, 48, 112 } },              /* x 0..2, y 4..6 */
        { -1, -1, -1, -1, -1, 0, { -1, -1, -1, -1 } },             /* gone: the trails stay below threshold */
        { -1, -1, 5, 2, 62, 0, { -1, -1, -1, -1 } },               /* |62 - 50| == threshold: not moving */
        { -1, -1, 5, 2, 63, 1, { 80, 32, 96, 48 } },               /* |63 - 50.6| > threshold */
};

static void motion_frame(uint8_t *f, const struct motion_step *s)
{
        memset(f, 50, (size_t)MW * MH);
        memset(f + (size_t)MW * MH, 128, (size_t)MW * MH / 2);
        if (s->sq_x >= 0)
                for (int y = s->sq_y; y < s->sq_y + 40; y++)
                        memset(f + (size_t)y * MW + s->sq_x, 200, 40);
        if (s->cell_x >= 0)
                for (int y = s->cell_y * MCELL; y < (s->cell_y + 1) * MCELL; y++)
                        memset(f + (size_t)y * MW + s->cell_x * MCELL, s->cell_v, MCELL);
}

static void check_motion_result(const struct zcp_result *r, const uint32_t *mask, const struct motion_step *s,
                                size_t i)
{
        uint32_t total = zcp_grid_w(MW, MCELL) * zcp_grid_h(MH, MCELL);

        CHECK(total == 13 * 8);
        CHECK_MSG(r->moving_cells == s->moving, "frame %zu: %u moving, expected %u", i, r->moving_cells, s->moving);
        CHECK(r->total_cells == total);
        CHECK(r->moving_fraction == (float)s->moving / (float)total);
        for (int k = 0; k < 4; k++)
                CHECK_MSG(r->bbox[k] == s->bbox[k], "frame %zu: bbox[%d] = %d, expected %d", i, k, r->bbox[k],
                          s->bbox[k]);
        kt_mask_check(r, mask, MW, MH, MCELL, "motion sequence");
}

static void test_motion_sequence(void)
{
        struct zcp_preprocess_params pp = { .width = MW, .height = MH, .in_w = 8, .in_h = 8, .cell = MCELL };
        struct zcp_motion_params mp = { .width = MW, .height = MH, .cell = MCELL, .threshold = 12.0f, .alpha = 0.05f };
        uint8_t *f = xmalloc(zcp_nv12_size(MW, MH));
        uint32_t grid[13 * 8], mask[(13 * 8 + 31) / 32];
        float bg[13 * 8];

        for (size_t i = 0; i < sizeof(motion_seq) / sizeof(motion_seq[0]); i++) {
                struct zcp_result r;

                memset(&r, 0xab, sizeof(r));
                memset(mask, 0xab, sizeof(mask));
                motion_frame(f, &motion_seq[i]);
                zcp_ref_preprocess(f, &pp, NULL, grid);
                zcp_ref_motion(grid, bg, i == 0, &mp, &r, mask);
                check_motion_result(&r, mask, &motion_seq[i], i);
        }
        free(f);
}

/* ------------------------------------------------------------------ top-k */

static void check_topk(const float *p, uint32_t n, uint32_t k, const uint32_t *want)
{
        uint32_t cls[ZCP_TOPK_MAX];
        float pr[ZCP_TOPK_MAX];
        uint32_t cnt = k < n ? k : n;

        zcp_ref_topk(p, n, k, cls, pr);
        for (uint32_t i = 0; i < cnt; i++) {
                CHECK_MSG(cls[i] == want[i], "topk[%u] = %u, expected %u", i, cls[i], want[i]);
                CHECK(pr[i] == p[want[i]]);
        }
}

static int cmp_desc(const void *a, const void *b, void *probs)
{
        const float *p = probs;
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        if (p[x] != p[y])
                return p[x] > p[y] ? -1 : 1;
        return x < y ? -1 : 1;
}

static void test_topk(void)
{
        const float a[] = { 0.1f, 0.3f, 0.3f, 0.05f, 0.25f };
        const float same[] = { 0.2f, 0.2f, 0.2f, 0.2f, 0.2f };
        const float tail[] = { 0.0f, 0.1f, 0.2f, 0.1f, 0.6f, 0.0f };

        check_topk(a, 5, 3, (const uint32_t[]){ 1, 2, 4 });
        check_topk(a, 5, 10, (const uint32_t[]){ 1, 2, 4, 0, 3 });
        check_topk(a, 5, 1, (const uint32_t[]){ 1 });
        check_topk(same, 5, 5, (const uint32_t[]){ 0, 1, 2, 3, 4 });
        check_topk(tail, 6, 6, (const uint32_t[]){ 4, 2, 1, 3, 0, 5 });

        /* 1000 quantized random values (many ties) against a full sort. */
        float *p = xmalloc(sizeof(float) * 1000);
        uint32_t idx[1000];
        for (uint32_t i = 0; i < 1000; i++) {
                p[i] = (float)(rnd() % 50) / 50.0f;
                idx[i] = i;
        }
        qsort_r(idx, 1000, sizeof(idx[0]), cmp_desc, p);
        check_topk(p, 1000, ZCP_TOPK_MAX, idx);
        free(p);
}

/* ------------------------------------------------------------- CPU backend */

struct slot_mem {
        struct zcp_slot slot;
        size_t bytes;
};

#define SLOT_MASK_WORDS 64   /* room for the moving masks of these tests' grids (cell 16) */

static void slot_new(struct slot_mem *s, uint32_t w, uint32_t h)
{
        void *host, *dev, *rh, *rd;

        memset(s, 0, sizeof(*s));
        s->bytes = zcp_nv12_size(w, h);
        CHECK(zcp_host_allocator.alloc(zcp_host_allocator.ctx, s->bytes, &host, &dev) == 0);
        CHECK(zcp_host_allocator.alloc(zcp_host_allocator.ctx, sizeof(struct zcp_result), &rh, &rd) == 0);
        CHECK(dev == NULL && rd == NULL);
        s->slot.data = host;
        s->slot.cap = s->bytes;
        s->slot.result = rh;
        s->slot.mask_words = zcp_mask_words((uint64_t)zcp_grid_w(w, 16) * zcp_grid_h(h, 16));
        CHECK(s->slot.mask_words <= SLOT_MASK_WORDS);
        s->slot.mask = xmalloc(sizeof(uint32_t) * s->slot.mask_words);
        s->slot.frame.width = w;
        s->slot.frame.height = h;
        s->slot.frame.fmt = ZCP_PIX_NV12;
        s->slot.frame.stride = w;
        s->slot.frame.bytes = s->bytes;
}

static void slot_free(struct slot_mem *s)
{
        zcp_host_allocator.free(zcp_host_allocator.ctx, s->slot.data);
        zcp_host_allocator.free(zcp_host_allocator.ctx, s->slot.result);
        free(s->slot.mask);
}

static struct zcp_stream_config stream_config(uint32_t iw, uint32_t ih, uint32_t top_k)
{
        struct zcp_stream_config c;

        memset(&c, 0, sizeof(c));
        snprintf(c.name, sizeof(c.name), "test");
        c.model.enabled = true;
        c.model.input_width = iw;
        c.model.input_height = ih;
        c.model.top_k = top_k;
        memcpy(c.model.mean, MEAN, sizeof(MEAN));
        memcpy(c.model.std, STD, sizeof(STD));
        c.model.mean_set = c.model.std_set = true;
        c.model.min_score = 0.3f;
        c.model.nms_iou = 0.5f;
        c.model.max_detections = 20;
        c.motion.enabled = true;
        c.motion.cell = 16;
        c.motion.threshold = 12.0f;
        c.motion.alpha = 0.05f;
        return c;
}

static void test_backend_select(void)
{
        const struct zcp_backend_ops *ops = NULL;
        struct zcp_allocator a;
        char why[128];

        CHECK(zcp_backend_select(ZCP_BACKEND_CPU, 0, &ops) == 0 && ops == &zcp_backend_cpu);
        CHECK(strcmp(ops->name, zcp_backend_kind_names[ZCP_BACKEND_CPU]) == 0);
        CHECK(ops->probe(0, why, sizeof(why)) == 0);
        CHECK(ops->allocator(0, &a) == 0 && a.alloc == zcp_host_allocator.alloc);
        ops = NULL;
        CHECK(zcp_backend_select(ZCP_BACKEND_AUTO, 0, &ops) == 0 && ops);
#if HAVE_CUDA
        {
                bool usable = zcp_backend_cuda.probe(0, why, sizeof(why)) == 0;
                const struct zcp_backend_ops *c = NULL;
                int r = zcp_backend_select(ZCP_BACKEND_CUDA, 0, &c);
                CHECK(ops == (usable ? &zcp_backend_cuda : &zcp_backend_cpu));
                CHECK(usable ? (r == 0 && c == &zcp_backend_cuda) : (r == -ENODEV && c == NULL));
        }
#else
        CHECK(ops == &zcp_backend_cpu);
        ops = NULL;
        CHECK(zcp_backend_select(ZCP_BACKEND_CUDA, 0, &ops) == -ENODEV && ops == NULL);
#endif
}

/* The CPU backend opened the way the pipeline does (zcp_backend_params_init). */
static struct zcp_backend_params backend_params(const struct zcp_stream_config *cfg, const struct zcp_plan *m,
                                                uint32_t W, uint32_t H)
{
        struct zcp_backend_params bp;
        char err[256];

        CHECK_MSG(zcp_backend_params_init(&bp, cfg, m, W, H, "test", err, sizeof(err)) == 0, "%s", err);
        return bp;
}

static void test_backend(const struct zcp_plan *m)
{
        const uint32_t W = 320, H = 240, IW = m->tensors[m->input.t].w, IH = m->tensors[m->input.t].h;
        struct zcp_stream_config cfg = stream_config(IW, IH, 5);
        struct zcp_backend_params bp = backend_params(&cfg, m, W, H);
        struct zcp_preprocess_params pp = { .width = W, .height = H, .in_w = IW, .in_h = IH, .cell = 16, .nhwc = true };
        struct zcp_motion_params mp = { .width = W, .height = H, .cell = 16, .threshold = 12.0f, .alpha = 0.05f };
        const struct zcp_backend_ops *ops = &zcp_backend_cpu;
        struct zcp_backend_ctx *ctx = NULL;
        struct slot_mem s;
        float *t = xmalloc(sizeof(float) * 3 * IW * IH), *probs = xmalloc(sizeof(float) * m->head.classes);
        uint32_t grid[20 * 15], mask[(20 * 15 + 31) / 32];
        float bg[20 * 15];

        CHECK(memcmp(&bp.pre.mean, MEAN, sizeof(MEAN)) == 0 && bp.pre.nhwc && !bp.pre.byte_pixels && bp.top_k == 5);
        memcpy(pp.mean, MEAN, sizeof(MEAN));
        memcpy(pp.std, STD, sizeof(STD));
        slot_new(&s, W, H);
        CHECK(ops->open(&bp, NULL, &ctx) == 0 && ctx);
        CHECK(strcmp(ops->transfer_mode(ctx), "host") == 0);
        for (int frame = 0; frame < 3; frame++) {
                struct zcp_result want;
                uint32_t cls[5];
                float pr[5];

                random_nv12(s.slot.data, W, H);
                if (frame == 2)   /* a static frame after a random one: motion everywhere it changed */
                        memset(s.slot.data, 90, (size_t)W * H);
                memset(s.slot.result, 0, sizeof(*s.slot.result));
                memset(s.slot.mask, 0xab, sizeof(uint32_t) * s.slot.mask_words);
                CHECK(ops->submit(ctx, &s.slot) == 0);
                CHECK(ops->wait(ctx, &s.slot) == 0);

                zcp_ref_preprocess(s.slot.data, &pp, t, grid);
                ref_probs(m, t, probs);
                zcp_ref_topk(probs, m->head.classes, 5, cls, pr);
                memset(&want, 0, sizeof(want));
                zcp_ref_motion(grid, bg, frame == 0, &mp, &want, mask);

                const struct zcp_result *r = s.slot.result;
                CHECK(r->valid == 1);
                CHECK(r->topk_count == 5 && r->det_count == 0);
                /* The backend runs the fast plan (cpu_fast.c): within 1e-4 relative of the reference. */
                for (int k = 0; k < 5; k++)
                        CHECK_MSG(r->topk_class[k] == cls[k] && fabsf(r->topk_prob[k] - pr[k]) <= 1e-4f * pr[k],
                                  "top %d: class %u p %.9g, reference class %u p %.9g", k, r->topk_class[k],
                                  (double)r->topk_prob[k], cls[k], (double)pr[k]);
                CHECK(r->topk_prob[0] >= r->topk_prob[4] && r->topk_prob[4] > 0);
                CHECK(r->moving_cells == want.moving_cells && r->total_cells == 20 * 15);
                CHECK(r->moving_fraction == want.moving_fraction);
                CHECK(memcmp(r->bbox, want.bbox, sizeof(want.bbox)) == 0);
                CHECK(r->mask_words == sizeof(mask) / 4 && memcmp(s.slot.mask, mask, sizeof(mask)) == 0);
                kt_mask_check(r, s.slot.mask, W, H, 16, "cpu backend");
                if (frame == 0)
                        CHECK(r->moving_cells == 0 && r->bbox[0] == -1);
                if (frame == 2)
                        CHECK(r->moving_cells > 0 && r->bbox[0] >= 0);
        }
        /* A frame of another geometry or format is refused, the result untouched. */
        s.slot.result->valid = 0;
        s.slot.frame.width = W - 2;
        CHECK(ops->submit(ctx, &s.slot) == -EINVAL && s.slot.result->valid == 0);
        s.slot.frame.width = W;
        s.slot.frame.fmt = ZCP_PIX_YUYV;
        CHECK(ops->submit(ctx, &s.slot) == -EINVAL && s.slot.result->valid == 0);
        s.slot.frame.fmt = ZCP_PIX_NV12;
        ops->close(ctx);

        /* Odd geometry is refused at open. */
        bp.width = W + 1;
        ctx = NULL;
        CHECK(ops->open(&bp, NULL, &ctx) == -EINVAL && ctx == NULL);
        bp.width = W;

        free(t);
        free(probs);
        slot_free(&s);
}

/* top_k larger than the class count; model off (motion only); motion off. */
static void test_backend_modes(const struct zcp_plan *small, const struct zcp_plan *m)
{
        struct zcp_stream_config cfg = stream_config(40, 30, 16);
        struct zcp_backend_params bp = backend_params(&cfg, small, MW, MH);
        const struct zcp_backend_ops *ops = &zcp_backend_cpu;
        struct zcp_backend_ctx *ctx = NULL;
        struct slot_mem s;

        slot_new(&s, MW, MH);

        /* motion off: fields zero, bbox -1; top-k clipped to the 10 classes */
        cfg.motion.enabled = false;
        bp = backend_params(&cfg, small, MW, MH);
        CHECK(ops->open(&bp, NULL, &ctx) == 0);
        random_nv12(s.slot.data, MW, MH);
        CHECK(ops->submit(ctx, &s.slot) == 0 && ops->wait(ctx, &s.slot) == 0);
        CHECK(s.slot.result->valid == 1 && s.slot.result->topk_count == small->head.classes);
        for (uint32_t k = 1; k < small->head.classes; k++)
                CHECK(s.slot.result->topk_prob[k - 1] >= s.slot.result->topk_prob[k]);
        CHECK(s.slot.result->moving_cells == 0 && s.slot.result->total_cells == 0);
        CHECK(s.slot.result->grid_w == 0 && s.slot.result->grid_h == 0 && s.slot.result->mask_words == 0);
        CHECK(s.slot.result->moving_fraction == 0.0f);
        for (int k = 0; k < 4; k++)
                CHECK(s.slot.result->bbox[k] == -1);
        ops->close(ctx);

        /* model off (config) and model NULL: motion only, over the known sequence */
        for (int variant = 0; variant < 2; variant++) {
                cfg.motion.enabled = true;
                cfg.model.enabled = variant == 0 ? false : true;
                bp = backend_params(&cfg, variant == 0 ? m : NULL, MW, MH);
                CHECK(bp.model == NULL);
                CHECK(ops->open(&bp, NULL, &ctx) == 0);
                for (size_t i = 0; i < sizeof(motion_seq) / sizeof(motion_seq[0]); i++) {
                        motion_frame(s.slot.data, &motion_seq[i]);
                        memset(s.slot.result, 0xab, sizeof(*s.slot.result));
                        memset(s.slot.mask, 0xab, sizeof(uint32_t) * s.slot.mask_words);
                        CHECK(ops->submit(ctx, &s.slot) == 0 && ops->wait(ctx, &s.slot) == 0);
                        CHECK(s.slot.result->valid == 1 && s.slot.result->topk_count == 0);
                        check_motion_result(s.slot.result, s.slot.mask, &motion_seq[i], i);
                }
                ops->close(ctx);
        }
        slot_free(&s);
}

int main(void)
{
        struct zcp_plan *m224 = default_model(224, 224), *m96 = default_model(96, 64);
        struct zcp_plan *s37 = small_model(37, 23), *s96 = small_model(96, 64), *s8 = small_model(8, 8);
        struct zcp_plan *s40 = small_model(40, 30);

        check_reference(m224, 642, 482);
        check_reference(m96, 720, 528);
        check_reference(m96, 64, 48);     /* upscaling */
        check_reference(s37, 720, 528);
        check_reference(s96, 642, 482);
        check_reference(s8, 2, 2);

        check_grid(642, 482, 16);
        check_grid(720, 528, 16);
        check_grid(100, 50, 7);
        check_grid(64, 48, 64);
        check_grid(30, 20, 256);

        test_motion_sequence();
        test_topk();
        test_backend_select();
        test_backend(m96);
        test_backend_modes(s40, m96);

        zcp_plan_free(m224);
        zcp_plan_free(m96);
        zcp_plan_free(s37);
        zcp_plan_free(s96);
        zcp_plan_free(s8);
        zcp_plan_free(s40);
        printf("ok\n");
        return 0;
}
