/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Plans for tests and benchmarks (header only, no CUDA): a random zcnet plan, a random plan
 * that uses every op kind and activation of model/plan.h (dense convolutions of several kernel
 * sizes, strides and paddings, depthwise ones, input scales, residuals, elementwise ops of each
 * broadcast, means, resizes both ways, max pools, copies into concat slices), the shipped
 * models, and a comparison of two arenas. Uses hostutil.h's seeded generator. Single-threaded
 * test code; plans are freed with zcp_plan_free.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "hostutil.h"
#include "model/model.h"
#include "model/plan.h"

/* A plan under construction: growth helpers. */
struct kt_pb {
        struct zcp_plan *p;
        uint32_t tcap, ocap;
        size_t wcap;
};

static inline struct kt_pb kt_pb_new(uint32_t in_w, uint32_t in_h)
{
        struct kt_pb b = { .p = calloc(1, sizeof(struct zcp_plan)), .tcap = 256, .ocap = 256, .wcap = 1 << 16 };

        CHECK(b.p);
        b.p->tensors = kt_malloc(sizeof(struct zcp_plan_tensor) * b.tcap);
        b.p->ops = kt_malloc(sizeof(struct zcp_plan_op) * b.ocap);
        b.p->weights = kt_malloc(sizeof(float) * b.wcap);
        b.p->tensors[0] = (struct zcp_plan_tensor){ .h = in_h, .w = in_w, .c = 3 };
        b.p->tensor_count = 1;
        b.p->input = (struct zcp_plan_input){ .t = 0, .pixels = ZCP_PIXELS_UNIT, .mean = { 0.485f, 0.456f, 0.406f },
                                              .std = { 0.229f, 0.224f, 0.225f } };
        snprintf(b.p->format, sizeof(b.p->format), "test");
        return b;
}

static inline uint32_t kt_pb_tensor(struct kt_pb *b, uint32_t h, uint32_t w, uint32_t c)
{
        CHECK(b->p->tensor_count < b->tcap);
        b->p->tensors[b->p->tensor_count] = (struct zcp_plan_tensor){ .h = h, .w = w, .c = c };
        return b->p->tensor_count++;
}

static inline struct zcp_plan_op *kt_pb_op(struct kt_pb *b, enum zcp_op_kind kind, const char *name)
{
        struct zcp_plan_op *op;

        CHECK(b->p->op_count < b->ocap);
        op = &b->p->ops[b->p->op_count++];
        memset(op, 0, sizeof(*op));
        op->kind = kind;
        snprintf(op->name, sizeof(op->name), "%s", name);
        return op;
}

/* n random weights with values in [-bound, bound]; their offset. */
static inline size_t kt_pb_weights(struct kt_pb *b, size_t n, float bound)
{
        size_t off = b->p->weight_floats, need = (off + n + 3) & ~(size_t)3;

        while (need > b->wcap) {
                b->wcap *= 2;
                b->p->weights = realloc(b->p->weights, sizeof(float) * b->wcap);
                CHECK(b->p->weights);
        }
        for (size_t i = 0; i < need - off; i++)
                b->p->weights[off + i] = i < n ? kt_unit() * bound : 0.0f;
        b->p->weight_floats = need;
        return off;
}

static inline uint32_t kt_conv_out(uint32_t in, uint32_t k, uint32_t s, uint32_t lo, uint32_t hi)
{
        return (in + lo + hi - k) / s + 1;
}

/*
 * A convolution from view `in` into a new tensor (or into `out` when out.c > 0): kernel k, stride
 * s, TF SAME padding, dense or depthwise, random weights and bias; returns its output view.
 */
static inline struct zcp_plan_view kt_pb_conv(struct kt_pb *b, struct zcp_plan_view in, uint32_t cout, uint32_t k,
                                              uint32_t s, bool dw, enum zcp_act act, struct zcp_plan_view out)
{
        const struct zcp_plan_tensor *ti = &b->p->tensors[in.t];
        uint32_t oh = (ti->h + s - 1) / s, ow = (ti->w + s - 1) / s;
        int32_t th = (int32_t)((oh - 1) * s + k) - (int32_t)ti->h, tw = (int32_t)((ow - 1) * s + k) - (int32_t)ti->w;
        struct zcp_plan_op *op;
        struct zcp_plan_conv c = { .kh = k, .kw = k, .sh = s, .sw = s, .groups = dw ? in.c : 1 };

        th = th < 0 ? 0 : th;
        tw = tw < 0 ? 0 : tw;
        c.pad_t = (uint32_t)th / 2;
        c.pad_b = (uint32_t)th - c.pad_t;
        c.pad_l = (uint32_t)tw / 2;
        c.pad_r = (uint32_t)tw - c.pad_l;
        if (dw)
                cout = in.c;
        c.weight = kt_pb_weights(b, (size_t)k * k * (dw ? 1 : in.c) * cout, sqrtf(6.0f / (float)(k * k * (dw ? 1 : in.c))));
        c.bias = kt_pb_weights(b, cout, 0.1f);
        if (!out.c)
                out = (struct zcp_plan_view){ .t = kt_pb_tensor(b, oh, ow, cout), .c = cout };
        op = kt_pb_op(b, ZCP_OP_CONV, dw ? "dwconv" : "conv");
        op->in = in;
        op->out = out;
        op->act = (struct zcp_plan_act){ act, 1.0f / 6.0f, 3.0f };
        op->u.conv = c;
        return out;
}

static inline struct zcp_plan *kt_pb_finish(struct kt_pb *b)
{
        char err[512];

        CHECK(zcp_plan_layout(b->p) == 0);
        CHECK_MSG(zcp_plan_check(b->p, err, sizeof(err)) == 0, "%s", err);
        for (uint32_t i = 0; i < b->p->op_count; i++) {
                const struct zcp_plan_op *op = &b->p->ops[i];
                if (op->kind == ZCP_OP_CONV)
                        b->p->macs += (uint64_t)b->p->tensors[op->out.t].h * b->p->tensors[op->out.t].w * op->out.c *
                                      op->u.conv.kh * op->u.conv.kw * (op->u.conv.groups == 1 ? op->in.c : 1);
        }
        return b->p;
}

/* A random zcnet plan: 3x3 convolutions (padding 1) + ReLU, mean, fc, classify. */
static inline struct zcp_plan *kt_zcnet_plan(const uint32_t *chans, const uint32_t *strides, uint32_t convs,
                                             uint32_t classes, uint32_t in_w, uint32_t in_h)
{
        struct kt_pb b = kt_pb_new(in_w, in_h);
        struct zcp_plan_view v = { .t = 0, .c = 3 };
        struct zcp_plan_op *op;
        uint32_t h = in_h, w = in_w, t;

        CHECK(chans[0] == 3);
        for (uint32_t l = 0; l < convs; l++) {
                h = kt_conv_out(h, 3, strides[l], 1, 1);
                w = kt_conv_out(w, 3, strides[l], 1, 1);
                t = kt_pb_tensor(&b, h, w, chans[l + 1]);
                op = kt_pb_op(&b, ZCP_OP_CONV, "conv");
                op->in = v;
                op->out = (struct zcp_plan_view){ .t = t, .c = chans[l + 1] };
                op->act.kind = ZCP_ACT_RELU;
                op->u.conv = (struct zcp_plan_conv){ .kh = 3, .kw = 3, .sh = strides[l], .sw = strides[l],
                                                     .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1, .groups = 1 };
                op->u.conv.weight = kt_pb_weights(&b, (size_t)9 * chans[l] * chans[l + 1], sqrtf(6.0f / (9.0f * chans[l])));
                op->u.conv.bias = kt_pb_weights(&b, chans[l + 1], 0.1f);
                v = op->out;
        }
        t = kt_pb_tensor(&b, 1, 1, v.c);
        op = kt_pb_op(&b, ZCP_OP_MEAN, "pool");
        op->in = v;
        op->out = (struct zcp_plan_view){ .t = t, .c = v.c };
        v = op->out;
        t = kt_pb_tensor(&b, 1, 1, classes);
        op = kt_pb_op(&b, ZCP_OP_CONV, "fc");
        op->in = v;
        op->out = (struct zcp_plan_view){ .t = t, .c = classes };
        op->u.conv = (struct zcp_plan_conv){ .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = 1 };
        op->u.conv.weight = kt_pb_weights(&b, (size_t)v.c * classes, sqrtf(6.0f / (float)v.c));
        op->u.conv.bias = kt_pb_weights(&b, classes, 0.1f);
        b.p->head = (struct zcp_plan_head){ .kind = ZCP_HEAD_CLASSIFY, .classes = classes, .scores = op->out };
        return kt_pb_finish(&b);
}

/*
 * A random plan of every op kind at input in_w x in_h (both >= 16), ending in a CenterNet head
 * (classes, its sizes map) at 1/4 of the input. Channel counts are small and odd on purpose.
 */
static inline struct zcp_plan *kt_random_plan(uint32_t in_w, uint32_t in_h, uint32_t classes)
{
        static const struct zcp_plan_view none = { 0 };
        struct kt_pb b = kt_pb_new(in_w, in_h);
        struct zcp_plan_view x = { .t = 0, .c = 3 }, y, z, se, cat;
        struct zcp_plan_op *op;
        uint32_t h, w, t;

        x = kt_pb_conv(&b, x, 13, 3, 2, false, ZCP_ACT_HSWISH, none);            /* 3x3 s2, hard swish */
        y = kt_pb_conv(&b, x, 0, 3, 1, true, ZCP_ACT_RELU, none);                /* depthwise 3x3 */
        z = kt_pb_conv(&b, y, 13, 1, 1, false, ZCP_ACT_NONE, none);              /* 1x1 + residual */
        b.p->ops[b.p->op_count - 1].u.conv.has_residual = true;
        b.p->ops[b.p->op_count - 1].u.conv.residual = x;
        x = kt_pb_conv(&b, z, 24, 1, 1, false, ZCP_ACT_RELU6, none);             /* expand */
        y = kt_pb_conv(&b, x, 0, 5, 2, true, ZCP_ACT_HSWISH, none);              /* depthwise 5x5 s2 */
        h = b.p->tensors[y.t].h;
        w = b.p->tensors[y.t].w;
        /* squeeze-excite: mean, 1x1 relu, 1x1 hard sigmoid, then the scale folded into the next conv */
        t = kt_pb_tensor(&b, 1, 1, y.c);
        op = kt_pb_op(&b, ZCP_OP_MEAN, "se-mean");
        op->in = y;
        op->out = (struct zcp_plan_view){ .t = t, .c = y.c };
        se = kt_pb_conv(&b, op->out, 7, 1, 1, false, ZCP_ACT_RELU, none);
        se = kt_pb_conv(&b, se, y.c, 1, 1, false, ZCP_ACT_HSIGMOID, none);
        z = kt_pb_conv(&b, y, 17, 1, 1, false, ZCP_ACT_NONE, none);
        b.p->ops[b.p->op_count - 1].u.conv.has_scale = true;
        b.p->ops[b.p->op_count - 1].u.conv.scale = se;
        /* elementwise: scalar add with sigmoid, channel multiply, tensor add */
        t = kt_pb_tensor(&b, h, w, z.c);
        op = kt_pb_op(&b, ZCP_OP_ELTWISE, "add-scalar");
        op->in = z;
        op->out = (struct zcp_plan_view){ .t = t, .c = z.c };
        op->act.kind = ZCP_ACT_SIGMOID;
        op->u.elt = (struct zcp_plan_eltwise){ .mul = false, .bcast = ZCP_BCAST_SCALAR, .scalar = 0.25f };
        y = op->out;
        t = kt_pb_tensor(&b, 1, 1, z.c);
        op = kt_pb_op(&b, ZCP_OP_MEAN, "mean");
        op->in = z;
        op->out = (struct zcp_plan_view){ .t = t, .c = z.c };
        se = op->out;
        t = kt_pb_tensor(&b, h, w, z.c);
        op = kt_pb_op(&b, ZCP_OP_ELTWISE, "mul-channel");
        op->in = y;
        op->out = (struct zcp_plan_view){ .t = t, .c = z.c };
        op->u.elt = (struct zcp_plan_eltwise){ .mul = true, .bcast = ZCP_BCAST_CHANNEL, .b = se };
        y = op->out;
        t = kt_pb_tensor(&b, h, w, z.c);
        op = kt_pb_op(&b, ZCP_OP_ELTWISE, "add");
        op->in = y;
        op->out = (struct zcp_plan_view){ .t = t, .c = z.c };
        op->act = (struct zcp_plan_act){ ZCP_ACT_SCALE, 1.5f, 0.0f };
        op->u.elt = (struct zcp_plan_eltwise){ .mul = false, .bcast = ZCP_BCAST_NONE, .b = z };
        y = op->out;
        /* down by a max pool, back up by resizes into the two halves of a concat */
        {
                uint32_t ph = (h + 1) / 2, pw = (w + 1) / 2;
                uint32_t th = (ph - 1) * 2 + 3 > h ? (ph - 1) * 2 + 3 - h : 0;
                uint32_t tw = (pw - 1) * 2 + 3 > w ? (pw - 1) * 2 + 3 - w : 0;

                t = kt_pb_tensor(&b, ph, pw, y.c);
                op = kt_pb_op(&b, ZCP_OP_MAXPOOL, "pool");
                op->in = y;
                op->out = (struct zcp_plan_view){ .t = t, .c = y.c };
                op->u.pool = (struct zcp_plan_pool){ .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pad_t = th / 2,
                                                     .pad_l = tw / 2 };
        }
        z = op->out;
        cat = (struct zcp_plan_view){ .t = kt_pb_tensor(&b, h, w, 2 * y.c + 5), .c = 2 * y.c + 5 };
        op = kt_pb_op(&b, ZCP_OP_RESIZE, "up-legacy");
        op->in = z;
        op->out = (struct zcp_plan_view){ .t = cat.t, .c0 = 0, .c = y.c };
        op->act.kind = ZCP_ACT_RELU;
        op->u.resize = (struct zcp_plan_resize){ .align_corners = false, .half_pixel = false };
        op = kt_pb_op(&b, ZCP_OP_RESIZE, "up-half-pixel");
        op->in = z;
        op->out = (struct zcp_plan_view){ .t = cat.t, .c0 = y.c, .c = y.c };
        op->u.resize = (struct zcp_plan_resize){ .align_corners = false, .half_pixel = true };
        op = kt_pb_op(&b, ZCP_OP_COPY, "copy");
        op->in = (struct zcp_plan_view){ .t = y.t, .c0 = 2, .c = 5 };
        op->out = (struct zcp_plan_view){ .t = cat.t, .c0 = 2 * y.c, .c = 5 };
        op->act.kind = ZCP_ACT_RELU6;
        /* the head's maps: a 3x3 dense conv (odd padding) and 1x1s */
        x = kt_pb_conv(&b, cat, 19, 3, 1, false, ZCP_ACT_RELU, none);
        y = kt_pb_conv(&b, x, classes, 1, 1, false, ZCP_ACT_SIGMOID, none);
        {
                /*
                 * Small heatmap weights: logits of a few units, so the scores spread over (0, 1) instead
                 * of saturating at 1.0, where many equal peaks would leave the detections' order (and the
                 * NMS) to the last bit of two backends' sums in different orders.
                 */
                const struct zcp_plan_op *heat = &b.p->ops[b.p->op_count - 1];
                for (size_t k = 0; k < (size_t)x.c * classes; k++)
                        b.p->weights[heat->u.conv.weight + k] *= 0.05f;
        }
        z = kt_pb_conv(&b, x, 4, 1, 1, false, ZCP_ACT_SCALE, none);
        b.p->ops[b.p->op_count - 1].act.a = 16.0f;
        b.p->head = (struct zcp_plan_head){ .kind = ZCP_HEAD_CENTERNET, .classes = classes, .scores = y, .sizes = z,
                                            .stride = 4.0f, .candidates = 100 };
        b.p->input.pixels = ZCP_PIXELS_BYTE;
        for (int k = 0; k < 3; k++) {
                b.p->input.mean[k] = 0.0f;
                b.p->input.std[k] = 1.0f;
        }
        return kt_pb_finish(&b);
}

/*
 * A random graph of about n ops on 16x16x4 tensors after a first convolution of the input: each
 * op reads one or two of the tensors made so far, chosen at random (a dense 1x1 or 3x3
 * convolution, with a residual half the time; a depthwise one; an add or a multiply of two; or
 * two convolutions writing the halves of a concat, which later ops read by halves), then a mean
 * and a classify head. Branches and joins of every shape, for the two-lane schedule of
 * model/plan.h and the layout that allows for it.
 */
static inline struct zcp_plan *kt_random_dag(uint32_t n)
{
        static const struct zcp_plan_view none = { 0 };
        struct kt_pb b = kt_pb_new(32, 32);
        struct zcp_plan_view v[128], x = { .t = 0, .c = 3 };
        struct zcp_plan_op *op;
        uint32_t nv = 0, t;

        v[nv++] = kt_pb_conv(&b, x, 4, 3, 2, false, ZCP_ACT_RELU, none);
        for (uint32_t i = 0; i < n && nv < 120; i++) {
                const struct zcp_plan_view a = v[kt_rnd() % nv], c = v[kt_rnd() % nv];
                switch (kt_rnd() % 4) {
                case 0:
                        v[nv++] = kt_pb_conv(&b, a, 4, kt_rnd() % 2 ? 3 : 1, 1, false, ZCP_ACT_RELU, none);
                        if (kt_rnd() % 2) {
                                b.p->ops[b.p->op_count - 1].u.conv.has_residual = true;
                                b.p->ops[b.p->op_count - 1].u.conv.residual = c;
                        }
                        break;
                case 1:
                        v[nv++] = kt_pb_conv(&b, a, 0, 3, 1, true, ZCP_ACT_RELU6, none);
                        break;
                case 2:
                        t = kt_pb_tensor(&b, 16, 16, 4);
                        op = kt_pb_op(&b, ZCP_OP_ELTWISE, "eltwise");
                        op->in = a;
                        op->out = (struct zcp_plan_view){ .t = t, .c = 4 };
                        op->u.elt = (struct zcp_plan_eltwise){ .mul = kt_rnd() % 2, .bcast = ZCP_BCAST_NONE, .b = c };
                        v[nv++] = op->out;
                        break;
                default:
                        t = kt_pb_tensor(&b, 16, 16, 8);
                        v[nv++] = kt_pb_conv(&b, a, 4, 1, 1, false, ZCP_ACT_NONE,
                                             (struct zcp_plan_view){ .t = t, .c0 = 0, .c = 4 });
                        v[nv++] = kt_pb_conv(&b, c, 4, 1, 1, false, ZCP_ACT_NONE,
                                             (struct zcp_plan_view){ .t = t, .c0 = 4, .c = 4 });
                        break;
                }
        }
        t = kt_pb_tensor(&b, 1, 1, 4);
        op = kt_pb_op(&b, ZCP_OP_MEAN, "mean");
        op->in = v[nv - 1];
        op->out = (struct zcp_plan_view){ .t = t, .c = 4 };
        b.p->head = (struct zcp_plan_head){ .kind = ZCP_HEAD_CLASSIFY, .classes = 4, .scores = op->out };
        return kt_pb_finish(&b);
}

/* A model of the source tree's models/ (e.g. "centernet/model.json"), or NULL with the reason printed. */
static inline struct zcp_plan *kt_load_model(const char *rel)
{
        char path[ZCP_PATH_MAX], err[512] = "";
        struct zcp_plan *p = NULL;

        snprintf(path, sizeof(path), "%s/models/%s", zcp_test_src_root(), rel);
        if (zcp_model_load(path, NULL, &p, err, sizeof(err)) < 0) {
                printf("note: %s not loaded: %s\n", rel, err);
                return NULL;
        }
        return p;
}

/* The default zcnet weights (zcp_test_default_weights()), or NULL (reason printed). */
static inline struct zcp_plan *kt_default_zcnet(uint32_t in_w, uint32_t in_h)
{
        struct zcp_model_opts o = { .in_w = in_w, .in_h = in_h };
        struct zcp_plan *p = NULL;
        char err[512] = "";

        if (zcp_model_load(zcp_test_default_weights(), &o, &p, err, sizeof(err)) < 0) {
                printf("note: default zcnet not loaded: %s\n", err);
                return NULL;
        }
        return p;
}

/*
 * Worst relative difference of two arenas over tensor t's view v (|a - b| / max(|b|, floor)).
 */
static inline double kt_view_diff(const struct zcp_plan *p, const float *a, const float *b, struct zcp_plan_view v,
                                  double floor)
{
        const struct zcp_plan_tensor *t = &p->tensors[v.t];
        double worst = 0.0;

        for (size_t px = 0; px < (size_t)t->h * t->w; px++)
                for (uint32_t c = 0; c < v.c; c++) {
                        size_t i = t->off + px * t->c + v.c0 + c;
                        double d = fabs((double)a[i] - (double)b[i]) / fmax(fabs((double)b[i]), floor);
                        if (!(d <= worst))
                                worst = isnan(d) ? INFINITY : d;
                }
        return worst;
}
