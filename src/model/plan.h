/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * A plan: a model turned into zcpipe's own fused operations over tensors whose
 * shapes are all known at load (DESIGN.md §7). Every backend executes the same
 * plan: the C reference (infer/reference.c) op by op, the fast CPU path and
 * CUDA. Nothing in a backend knows which network it runs.
 *
 * Tensors are batch 1, float32, NHWC (h rows of w pixels of c channels, the
 * channels of a pixel contiguous). They live in one arena of floats laid out
 * once at load: tensor t occupies [off, off + h*w*c) of it; tensors whose
 * lifetimes do not overlap share bytes. An op reads and writes channel slices
 * of tensors (struct zcp_plan_view): that is how a concat costs nothing (its
 * producers write side by side into one tensor).
 *
 * Ops run in order; every op finishes before the next starts, except that a
 * backend may run the ops of two lanes side by side (zcp_plan_layout's
 * schedule: op->lane, op->after), which the layout allows for. An op's float
 * math is spelled out below operation by operation so that all backends can
 * agree: the reference does exactly that; faster backends may reassociate sums
 * (convolution and mean) and nothing else.
 *
 * Ownership: a plan is made by a loader (model/model.h) and freed with
 * zcp_plan_free(); immutable after load, so any thread may read it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZCP_PLAN_NAME_MAX 96   /* op names as the model file spells them, cut to fit */

/* An activation applied to every value an op writes (its epilogue), after its sum and bias. */
enum zcp_act {
        ZCP_ACT_NONE,
        ZCP_ACT_RELU,      /* max(x, 0) */
        ZCP_ACT_RELU6,     /* min(max(x, 0), 6) */
        ZCP_ACT_SIGMOID,   /* 1 / (1 + exp(-x)) */
        ZCP_ACT_HSWISH,    /* (x * a) * relu6(x + b)   (a = 1/6, b = 3 in MobileNetV3, as the file has them) */
        ZCP_ACT_HSIGMOID,  /* relu6(x + b) * a */
        ZCP_ACT_SCALE,     /* x * a */
        ZCP_ACT_COUNT
};
extern const char *const zcp_act_names[ZCP_ACT_COUNT];

struct zcp_plan_act {
        enum zcp_act kind;
        float a, b;
};

/* The activation in float operations, in the order every backend uses (no fused multiply-add). */
float zcp_plan_act_apply(const struct zcp_plan_act *act, float x);

enum zcp_op_kind {
        ZCP_OP_CONV,       /* dense (groups 1) or depthwise (groups = channels) convolution */
        ZCP_OP_ELTWISE,    /* a + b or a * b, b broadcast from one value, one per channel or a whole tensor */
        ZCP_OP_MEAN,       /* mean over the pixels: [h][w][c] -> [1][1][c] */
        ZCP_OP_RESIZE,     /* bilinear resize */
        ZCP_OP_MAXPOOL,
        ZCP_OP_COPY,       /* a channel slice copied (a concat whose inputs could not be written in place) */
        ZCP_OP_COUNT
};
extern const char *const zcp_op_kind_names[ZCP_OP_COUNT];

struct zcp_plan_tensor {
        uint32_t h, w, c;
        size_t off;        /* in floats, into the arena */
};

/* Channels [c0, c0 + c) of tensor `t` (all pixels). */
struct zcp_plan_view {
        uint32_t t;
        uint32_t c0, c;
};

/*
 * Convolution. Output pixel (oy, ox), channel o (of the output view):
 *   s = 0; for ky, kx (row-major), for each input channel i the output reads:
 *     iy = oy*sh - pad_t + ky, ix = ox*sw - pad_l + kx (outside the input: skipped, i.e. zero padding)
 *     x = in[iy][ix][i]; if (scale) x = x * scale[i];  s = s + x * w
 *   then y = s + bias[o] (bias absent: s), y = act(y), if (residual) y = y + residual[oy][ox][o].
 * Dense: w = weight[((ky*kw + kx)*cin + i)*cout + o] (HWIO); the input channels are all cin.
 * Depthwise (groups == cin == cout): the only input channel is i = o, w = weight[(ky*kw + kx)*cout + o].
 */
struct zcp_plan_conv {
        uint32_t kh, kw, sh, sw;
        uint32_t pad_t, pad_l, pad_b, pad_r;
        uint32_t groups;                    /* 1 or cin (depthwise, one output per input channel) */
        size_t weight;                      /* float offset into the plan's weights */
        size_t bias;                        /* float offset, or SIZE_MAX: none */
        bool has_scale;                     /* scale: a [1][1][cin] view multiplied into the input first */
        struct zcp_plan_view scale;
        bool has_residual;                  /* residual: a view of the output's shape added last */
        struct zcp_plan_view residual;
};

/*
 * Elementwise: y = act(a OP b) with OP + or *, for every element of `a`'s view. b is
 *   ZCP_BCAST_SCALAR: the float `scalar`;
 *   ZCP_BCAST_CHANNEL: a [1][1][c] view, b[c] for every pixel;
 *   ZCP_BCAST_NONE: a view of a's shape.
 * (a and b in this order: x + y and y + x are the same float, so is x * y against y * x.)
 */
enum zcp_bcast { ZCP_BCAST_NONE, ZCP_BCAST_CHANNEL, ZCP_BCAST_SCALAR };
struct zcp_plan_eltwise {
        bool mul;                           /* false: add */
        enum zcp_bcast bcast;
        struct zcp_plan_view b;
        float scalar;
};

/*
 * Mean over the pixels of each channel: s = 0; for every pixel in row-major order s = s + x / n
 * (n = h * w, as a float; TF.js's order); y = act(s).
 */

/*
 * Bilinear resize to the output's h x w (TensorFlow's ResizeBilinear). Per axis, with
 * scale = in / out (as float; align_corners: (in - 1) / (out - 1), 0 when out is 1):
 *   half_pixel: src = (o + 0.5) * scale - 0.5, else src = o * scale;
 *   lo = max(floor(src), 0) (half_pixel), floor(src) otherwise; hi = min(lo + 1, in - 1); lo = min(lo, in - 1);
 *   f = src - floor(src)   (half_pixel: src clamped at 0 first).
 * y = top + (bottom - top) * fy, top = tl + (tr - tl) * fx, bottom = bl + (br - bl) * fx; then act.
 */
struct zcp_plan_resize {
        bool align_corners, half_pixel;
};

/*
 * Max pool: y = max over the window rows oy*sh - pad_t + ky, columns ox*sw - pad_l + kx that lie
 * inside the input (TensorFlow's SAME padding never contributes a value); then act.
 */
struct zcp_plan_pool {
        uint32_t kh, kw, sh, sw, pad_t, pad_l;
};

struct zcp_plan_op {
        enum zcp_op_kind kind;
        char name[ZCP_PLAN_NAME_MAX];       /* the model's node this op came from (errors, profiles) */
        struct zcp_plan_view in, out;       /* out's shape follows from in's and the op */
        struct zcp_plan_act act;
        /* The schedule (zcp_plan_layout): lane 0 is the plan's longest chain of dependent ops,
         * lane 1 every other op; each lane runs its ops in order, and op i starts only after
         * op after - 1 of the other lane has finished (after 0: nothing more to wait for). */
        uint8_t lane;
        uint32_t after;
        union {
                struct zcp_plan_conv conv;
                struct zcp_plan_eltwise elt;
                struct zcp_plan_resize resize;
                struct zcp_plan_pool pool;
        } u;
};

/* ------------------------------------------------------------------ heads */

enum zcp_head_kind {
        ZCP_HEAD_CLASSIFY,   /* softmax over a [1][1][classes] tensor, then top-k */
        ZCP_HEAD_CENTERNET,  /* CenterNet peaks: heatmap [h][w][classes] and sizes [h][w][4] -> boxes */
        ZCP_HEAD_COUNT
};
extern const char *const zcp_head_kind_names[ZCP_HEAD_COUNT];

/*
 * CLASSIFY: logits = view `scores` (1x1xclasses); p = softmax (max subtracted, exp, sum in
 * class order, each exp divided by the sum); top-k by probability, ties to the lower class.
 *
 * CENTERNET (the decode tail of CenterNet graphs, as TF.js runs it): with heat = view `scores`
 * (h x w x classes, already through its sigmoid) and size = view `sizes` (h x w x 4):
 *   keep(y, x, c) = heat(y,x,c) == max of heat(., ., c) over the 3x3 window at (y, x) inside the
 *   map; candidates are the kept values, ordered by value descending, ties to the lower flat index
 *   (y * w + x) * classes + c; the first `candidates` (TopKV2's k) become detections:
 *   class c, score heat(y,x,c), box in model-input pixels
 *   (x*stride - size0, y*stride - size1, x*stride + size2, y*stride + size3), each product and sum
 *   a float operation in that order (x and y converted to float first).
 *   A map with fewer than `candidates` kept values gives that many.
 * What zcpipe does after (score threshold, class filter, NMS, top-N, frame pixels): infer/detect.h.
 */
struct zcp_plan_head {
        enum zcp_head_kind kind;
        uint32_t classes;
        struct zcp_plan_view scores;        /* CLASSIFY: logits; CENTERNET: heatmap */
        struct zcp_plan_view sizes;         /* CENTERNET only */
        float stride;                       /* CENTERNET: input pixels per map cell */
        uint32_t candidates;                /* CENTERNET: TopKV2's k */
};

/* --------------------------------------------------------------- the input */

enum zcp_pixels { ZCP_PIXELS_UNIT, ZCP_PIXELS_BYTE };   /* the input's values: x / 255, or x (0..255) */
extern const char *const zcp_pixels_names[2];           /* "unit", "byte" */

struct zcp_plan_input {
        uint32_t t;                         /* the input tensor: h x w x 3 (R, G, B) */
        /* What the model file says it wants; config may override (model.*). */
        enum zcp_pixels pixels;
        float mean[3], std[3];              /* v = (pixel - mean) / std after the pixels' scale */
};

/* ------------------------------------------------------------------- plan */

struct zcp_plan {
        char format[16];                    /* "tfjs" or "zcnet" */
        char source[256];                   /* provenance as the file states it (convertedBy, generator) */
        uint32_t tensor_count, op_count;
        struct zcp_plan_tensor *tensors;
        struct zcp_plan_op *ops;
        struct zcp_plan_input input;
        struct zcp_plan_head head;
        size_t arena_floats;                /* the arena every tensor lives in */
        float *weights;                     /* all weights and biases, float32 */
        size_t weight_floats;
        char **labels;                      /* [head.classes] or NULL */
        uint64_t macs;                      /* multiply-adds per frame (logs, benchmarks) */
};

void zcp_plan_free(struct zcp_plan *plan);

/* The views op reads into r (its input first, then a scale, a residual, an elementwise b, those
 * it has); how many. */
uint32_t zcp_plan_op_reads(const struct zcp_plan_op *op, struct zcp_plan_view r[4]);

/* The shape of a view: pixels of its tensor, its channel count. */
static inline size_t zcp_plan_view_pixels(const struct zcp_plan *p, struct zcp_plan_view v)
{
        return (size_t)p->tensors[v.t].h * p->tensors[v.t].w;
}

/*
 * Checks everything a backend relies on: every view inside its tensor, every op's output shape
 * what its input and parameters give, weights inside the weights, heads' views of the right
 * shape. 0, or -EINVAL with "op N (name): what is wrong" in errbuf. Loaders call it last; tests
 * and fuzzers call it on plans they build.
 */
int zcp_plan_check(const struct zcp_plan *plan, char *errbuf, size_t errlen);

/*
 * Schedules the ops in two lanes (op->lane, op->after: above) and lays the tensors out in the
 * arena: each tensor gets `off` so that two tensors live at the same time never overlap (a
 * tensor lives from the op that first writes it to the last op that reads it; the input from
 * the start; the head's views to the end; an op of lane 1 counts as running from the lane 0 op
 * it last waited for to the first lane 0 op that waits for it or a later one, so that ops
 * that may run side by side never share bytes). Running every op in order on one lane
 * satisfies the same schedule. Sets arena_floats. 0 or -ENOMEM.
 */
int zcp_plan_layout(struct zcp_plan *plan);
