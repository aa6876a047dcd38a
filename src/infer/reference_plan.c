/* SPDX-License-Identifier: MIT */
/*
 * The C reference of a plan's ops and heads (model/plan.h spells out each op's float math):
 * one obvious loop nest per op, the tests' oracle for the fast CPU path and the CUDA kernels.
 * Compiled with -ffp-contract=off like reference.c. Pure: allocates nothing, any thread.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "infer/reference.h"

static inline float *at(const struct zcp_plan *p, float *arena, struct zcp_plan_view v)
{
        return arena + p->tensors[v.t].off + v.c0;
}

static void run_conv(const struct zcp_plan *p, const struct zcp_plan_op *op, float *arena)
{
        const struct zcp_plan_conv *c = &op->u.conv;
        const struct zcp_plan_tensor *ti = &p->tensors[op->in.t], *to = &p->tensors[op->out.t];
        const float *in = at(p, arena, op->in), *w = p->weights + c->weight;
        const float *scale = c->has_scale ? at(p, arena, c->scale) : NULL;
        const float *res = c->has_residual ? at(p, arena, c->residual) : NULL;
        const size_t res_stride = c->has_residual ? p->tensors[c->residual.t].c : 0;
        float *out = at(p, arena, op->out);
        const uint32_t cin = op->in.c, cout = op->out.c;
        const bool dw = c->groups != 1;

        for (uint32_t oy = 0; oy < to->h; oy++)
                for (uint32_t ox = 0; ox < to->w; ox++)
                        for (uint32_t o = 0; o < cout; o++) {
                                float s = 0.0f, y;

                                for (uint32_t ky = 0; ky < c->kh; ky++) {
                                        int64_t iy = (int64_t)oy * c->sh - c->pad_t + ky;
                                        if (iy < 0 || iy >= ti->h)
                                                continue;
                                        for (uint32_t kx = 0; kx < c->kw; kx++) {
                                                int64_t ix = (int64_t)ox * c->sw - c->pad_l + kx;
                                                const float *px;
                                                if (ix < 0 || ix >= ti->w)
                                                        continue;
                                                px = in + ((size_t)iy * ti->w + (size_t)ix) * ti->c;
                                                if (dw) {
                                                        float x = px[o];
                                                        if (scale)
                                                                x = x * scale[o];
                                                        s = s + x * w[((size_t)ky * c->kw + kx) * cout + o];
                                                        continue;
                                                }
                                                for (uint32_t i = 0; i < cin; i++) {
                                                        float x = px[i];
                                                        if (scale)
                                                                x = x * scale[i];
                                                        s = s + x * w[(((size_t)ky * c->kw + kx) * cin + i) * cout + o];
                                                }
                                        }
                                }
                                y = c->bias != SIZE_MAX ? s + p->weights[c->bias + o] : s;
                                y = zcp_plan_act_apply(&op->act, y);
                                if (res)
                                        y = y + res[((size_t)oy * to->w + ox) * res_stride + o];
                                out[((size_t)oy * to->w + ox) * to->c + o] = y;
                        }
}

static void run_eltwise(const struct zcp_plan *p, const struct zcp_plan_op *op, float *arena)
{
        const struct zcp_plan_eltwise *e = &op->u.elt;
        const struct zcp_plan_tensor *ti = &p->tensors[op->in.t], *to = &p->tensors[op->out.t];
        const float *a = at(p, arena, op->in);
        const float *b = e->bcast == ZCP_BCAST_SCALAR ? NULL : at(p, arena, e->b);
        const size_t bs = e->bcast == ZCP_BCAST_NONE ? p->tensors[e->b.t].c : 0;
        float *out = at(p, arena, op->out);
        const size_t n = (size_t)ti->h * ti->w;

        for (size_t px = 0; px < n; px++)
                for (uint32_t c = 0; c < op->in.c; c++) {
                        float x = a[px * ti->c + c], y;
                        float v = e->bcast == ZCP_BCAST_SCALAR ? e->scalar : b[px * bs + c];
                        y = e->mul ? x * v : x + v;
                        out[px * to->c + c] = zcp_plan_act_apply(&op->act, y);
                }
}

static void run_mean(const struct zcp_plan *p, const struct zcp_plan_op *op, float *arena)
{
        const struct zcp_plan_tensor *ti = &p->tensors[op->in.t];
        const float *in = at(p, arena, op->in);
        float *out = at(p, arena, op->out);
        const size_t n = (size_t)ti->h * ti->w;
        const float nf = (float)n;

        for (uint32_t c = 0; c < op->in.c; c++) {
                float s = 0.0f;
                for (size_t px = 0; px < n; px++)
                        s = s + in[px * ti->c + c] / nf;
                out[c] = zcp_plan_act_apply(&op->act, s);
        }
}

void zcp_ref_resize_axis(uint32_t o, uint32_t in, float scale, bool half_pixel, uint32_t *ret_lo, uint32_t *ret_hi,
                        float *ret_f)
{
        float src = half_pixel ? ((float)o + 0.5f) * scale - 0.5f : (float)o * scale;
        float fl;
        int64_t lo;

        if (half_pixel && src < 0.0f)
                src = 0.0f;
        fl = floorf(src);
        lo = (int64_t)fl;
        if (lo < 0)
                lo = 0;
        if (lo > (int64_t)in - 1)
                lo = (int64_t)in - 1;
        *ret_lo = (uint32_t)lo;
        *ret_hi = (uint32_t)lo + 1 < in ? (uint32_t)lo + 1 : in - 1;
        *ret_f = src - fl;
}

float zcp_plan_resize_scale(uint32_t in, uint32_t out, bool align_corners)
{
        if (align_corners)
                return out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
        return (float)in / (float)out;
}

static void run_resize(const struct zcp_plan *p, const struct zcp_plan_op *op, float *arena)
{
        const struct zcp_plan_resize *r = &op->u.resize;
        const struct zcp_plan_tensor *ti = &p->tensors[op->in.t], *to = &p->tensors[op->out.t];
        const float *in = at(p, arena, op->in);
        float *out = at(p, arena, op->out);
        const float sy = zcp_plan_resize_scale(ti->h, to->h, r->align_corners);
        const float sx = zcp_plan_resize_scale(ti->w, to->w, r->align_corners);

        for (uint32_t oy = 0; oy < to->h; oy++) {
                uint32_t y0, y1;
                float fy;

                zcp_ref_resize_axis(oy, ti->h, sy, r->half_pixel, &y0, &y1, &fy);
                for (uint32_t ox = 0; ox < to->w; ox++) {
                        uint32_t x0, x1;
                        float fx;

                        zcp_ref_resize_axis(ox, ti->w, sx, r->half_pixel, &x0, &x1, &fx);
                        for (uint32_t c = 0; c < op->in.c; c++) {
                                float tl = in[((size_t)y0 * ti->w + x0) * ti->c + c];
                                float tr = in[((size_t)y0 * ti->w + x1) * ti->c + c];
                                float bl = in[((size_t)y1 * ti->w + x0) * ti->c + c];
                                float br = in[((size_t)y1 * ti->w + x1) * ti->c + c];
                                float top = tl + (tr - tl) * fx, bottom = bl + (br - bl) * fx;
                                float v = top + (bottom - top) * fy;
                                out[((size_t)oy * to->w + ox) * to->c + c] = zcp_plan_act_apply(&op->act, v);
                        }
                }
        }
}

static void run_maxpool(const struct zcp_plan *p, const struct zcp_plan_op *op, float *arena)
{
        const struct zcp_plan_pool *q = &op->u.pool;
        const struct zcp_plan_tensor *ti = &p->tensors[op->in.t], *to = &p->tensors[op->out.t];
        const float *in = at(p, arena, op->in);
        float *out = at(p, arena, op->out);

        for (uint32_t oy = 0; oy < to->h; oy++)
                for (uint32_t ox = 0; ox < to->w; ox++)
                        for (uint32_t c = 0; c < op->in.c; c++) {
                                float m = -INFINITY;
                                for (uint32_t ky = 0; ky < q->kh; ky++) {
                                        int64_t iy = (int64_t)oy * q->sh - q->pad_t + ky;
                                        if (iy < 0 || iy >= ti->h)
                                                continue;
                                        for (uint32_t kx = 0; kx < q->kw; kx++) {
                                                int64_t ix = (int64_t)ox * q->sw - q->pad_l + kx;
                                                float v;
                                                if (ix < 0 || ix >= ti->w)
                                                        continue;
                                                v = in[((size_t)iy * ti->w + (size_t)ix) * ti->c + c];
                                                m = v > m ? v : m;
                                        }
                                }
                                out[((size_t)oy * to->w + ox) * to->c + c] = zcp_plan_act_apply(&op->act, m);
                        }
}

static void run_copy(const struct zcp_plan *p, const struct zcp_plan_op *op, float *arena)
{
        const struct zcp_plan_tensor *ti = &p->tensors[op->in.t], *to = &p->tensors[op->out.t];
        const float *in = at(p, arena, op->in);
        float *out = at(p, arena, op->out);
        const size_t n = (size_t)ti->h * ti->w;

        for (size_t px = 0; px < n; px++)
                for (uint32_t c = 0; c < op->in.c; c++)
                        out[px * to->c + c] = zcp_plan_act_apply(&op->act, in[px * ti->c + c]);
}

void zcp_ref_op(const struct zcp_plan *plan, uint32_t i, float *arena)
{
        const struct zcp_plan_op *op = &plan->ops[i];

        switch (op->kind) {
        case ZCP_OP_CONV:
                run_conv(plan, op, arena);
                break;
        case ZCP_OP_ELTWISE:
                run_eltwise(plan, op, arena);
                break;
        case ZCP_OP_MEAN:
                run_mean(plan, op, arena);
                break;
        case ZCP_OP_RESIZE:
                run_resize(plan, op, arena);
                break;
        case ZCP_OP_MAXPOOL:
                run_maxpool(plan, op, arena);
                break;
        case ZCP_OP_COPY:
                run_copy(plan, op, arena);
                break;
        default:
                break;
        }
}

void zcp_ref_plan(const struct zcp_plan *plan, float *arena)
{
        for (uint32_t i = 0; i < plan->op_count; i++)
                zcp_ref_op(plan, i, arena);
}

/* ------------------------------------------------------------------ heads */

void zcp_ref_classify(const struct zcp_plan *plan, const float *arena, float *ret_probs)
{
        const struct zcp_plan_head *h = &plan->head;
        const float *logit = arena + plan->tensors[h->scores.t].off + h->scores.c0;
        float max = logit[0], sum = 0.0f;

        for (uint32_t k = 1; k < h->classes; k++)
                if (logit[k] > max)
                        max = logit[k];
        for (uint32_t k = 0; k < h->classes; k++)
                ret_probs[k] = expf(logit[k] - max);
        for (uint32_t k = 0; k < h->classes; k++)
                sum = sum + ret_probs[k];
        for (uint32_t k = 0; k < h->classes; k++)
                ret_probs[k] = ret_probs[k] / sum;
}

/* Whether heat(y, x, c) is the maximum of its 3x3 window (inside the map). */
static bool is_peak(const float *heat, size_t stride, uint32_t w, uint32_t h, uint32_t y, uint32_t x, uint32_t c)
{
        const float v = heat[((size_t)y * w + x) * stride + c];

        for (uint32_t yy = y ? y - 1 : 0; yy <= y + 1 && yy < h; yy++)
                for (uint32_t xx = x ? x - 1 : 0; xx <= x + 1 && xx < w; xx++)
                        if (heat[((size_t)yy * w + xx) * stride + c] > v)
                                return false;
        return true;
}

uint32_t zcp_ref_centernet(const struct zcp_plan *plan, const float *arena, struct zcp_detection *ret)
{
        const struct zcp_plan_head *hd = &plan->head;
        const struct zcp_plan_tensor *t = &plan->tensors[hd->scores.t], *ts = &plan->tensors[hd->sizes.t];
        const float *heat = arena + t->off + hd->scores.c0, *size = arena + ts->off + hd->sizes.c0;
        const uint32_t k = hd->candidates, classes = hd->classes;
        uint32_t n = 0;

        /*
         * Insertion into a list of the best k kept values, in flat index order: a later value enters
         * only when strictly greater than the one it passes, so ties keep the lower index first.
         * The index order is TopKV2's (y * w + x) * classes + c.
         */
        for (uint32_t y = 0; y < t->h; y++)
                for (uint32_t x = 0; x < t->w; x++)
                        for (uint32_t c = 0; c < classes; c++) {
                                float v = heat[((size_t)y * t->w + x) * t->c + c];
                                const float *s;
                                struct zcp_detection d;
                                uint32_t j;

                                if (n == k && !(v > ret[k - 1].score))
                                        continue;
                                if (!is_peak(heat, t->c, t->w, t->h, y, x, c))
                                        continue;
                                s = size + ((size_t)y * ts->w + x) * ts->c;
                                d.cls = c;
                                d.score = v;
                                d.box[0] = (float)x * hd->stride - s[0];
                                d.box[1] = (float)y * hd->stride - s[1];
                                d.box[2] = (float)x * hd->stride + s[2];
                                d.box[3] = (float)y * hd->stride + s[3];
                                j = n < k ? n++ : k - 1;
                                while (j > 0 && v > ret[j - 1].score) {
                                        ret[j] = ret[j - 1];
                                        j--;
                                }
                                ret[j] = d;
                        }
        return n;
}
