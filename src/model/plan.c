/* SPDX-License-Identifier: MIT */
/*
 * Plans (model/plan.h): the checks every loader ends with, the arena layout,
 * the activations' float math. Main thread, except zcp_plan_act_apply (pure).
 */
#include "model/plan.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

const char *const zcp_act_names[ZCP_ACT_COUNT] = { "none", "relu", "relu6", "sigmoid", "hswish", "hsigmoid", "scale" };
const char *const zcp_op_kind_names[ZCP_OP_COUNT] = { "conv", "eltwise", "mean", "resize", "maxpool", "copy" };
const char *const zcp_head_kind_names[ZCP_HEAD_COUNT] = { "classify", "centernet" };
const char *const zcp_pixels_names[2] = { "unit", "byte" };

float zcp_plan_act_apply(const struct zcp_plan_act *act, float x)
{
        float t;

        switch (act->kind) {
        case ZCP_ACT_RELU:
                return x > 0.0f ? x : 0.0f;
        case ZCP_ACT_RELU6:
                return fminf(fmaxf(x, 0.0f), 6.0f);
        case ZCP_ACT_SIGMOID:
                return 1.0f / (1.0f + expf(-x));
        case ZCP_ACT_HSWISH:
                t = fminf(fmaxf(x + act->b, 0.0f), 6.0f);
                return (x * act->a) * t;
        case ZCP_ACT_HSIGMOID:
                t = fminf(fmaxf(x + act->b, 0.0f), 6.0f);
                return t * act->a;
        case ZCP_ACT_SCALE:
                return x * act->a;
        default:
                return x;
        }
}

void zcp_plan_free(struct zcp_plan *plan)
{
        if (!plan)
                return;
        free(plan->labels);   /* one block: the pointers, then the strings */
        free(plan->tensors);
        free(plan->ops);
        free(plan->weights);
        free(plan);
}

/* ----------------------------------------------------------------- checks */

static int fail(char *errbuf, size_t errlen, const struct zcp_plan_op *op, uint32_t i, const char *fmt, ...)
        ZCP_PRINTF(5, 6);
static int fail(char *errbuf, size_t errlen, const struct zcp_plan_op *op, uint32_t i, const char *fmt, ...)
{
        va_list ap;
        int n = 0;

        if (errbuf && errlen) {
                if (op)
                        n = snprintf(errbuf, errlen, "op %u (%s, %s): ", i, zcp_op_kind_names[op->kind], op->name);
                if (n < 0 || (size_t)n >= errlen)
                        n = 0;
                va_start(ap, fmt);
                vsnprintf(errbuf + n, errlen - (size_t)n, fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

static bool view_ok(const struct zcp_plan *p, struct zcp_plan_view v)
{
        return v.t < p->tensor_count && v.c > 0 && v.c0 <= p->tensors[v.t].c && v.c <= p->tensors[v.t].c - v.c0;
}

static bool same_pixels(const struct zcp_plan *p, struct zcp_plan_view a, struct zcp_plan_view b)
{
        return p->tensors[a.t].h == p->tensors[b.t].h && p->tensors[a.t].w == p->tensors[b.t].w;
}

static bool weights_ok(const struct zcp_plan *p, size_t off, size_t n)
{
        return off <= p->weight_floats && n <= p->weight_floats - off;
}

static uint32_t out_size(uint32_t in, uint32_t k, uint32_t s, uint32_t pad_lo, uint32_t pad_hi)
{
        uint64_t span = (uint64_t)in + pad_lo + pad_hi;

        return span < k || s == 0 ? 0 : (uint32_t)((span - k) / s + 1);
}

static int check_conv(const struct zcp_plan *p, const struct zcp_plan_op *op, uint32_t i, char *errbuf,
                      size_t errlen)
{
        const struct zcp_plan_conv *c = &op->u.conv;
        const struct zcp_plan_tensor *in = &p->tensors[op->in.t], *out = &p->tensors[op->out.t];
        size_t wn;

        if (c->kh == 0 || c->kw == 0 || c->sh == 0 || c->sw == 0 || c->kh > 64 || c->kw > 64 || c->sh > 64 ||
            c->sw > 64 || c->pad_t >= c->kh || c->pad_b >= c->kh || c->pad_l >= c->kw || c->pad_r >= c->kw)
                return fail(errbuf, errlen, op, i, "kernel %ux%u, stride %ux%u, padding %u %u %u %u out of range",
                            c->kh, c->kw, c->sh, c->sw, c->pad_t, c->pad_l, c->pad_b, c->pad_r);
        if (out->h != out_size(in->h, c->kh, c->sh, c->pad_t, c->pad_b) ||
            out->w != out_size(in->w, c->kw, c->sw, c->pad_l, c->pad_r))
                return fail(errbuf, errlen, op, i, "output %ux%u, the input %ux%u gives %ux%u", out->h, out->w, in->h,
                            in->w, out_size(in->h, c->kh, c->sh, c->pad_t, c->pad_b),
                            out_size(in->w, c->kw, c->sw, c->pad_l, c->pad_r));
        if (c->groups == 1) {
                wn = (size_t)c->kh * c->kw * op->in.c * op->out.c;
        } else if (c->groups == op->in.c && op->in.c == op->out.c) {
                wn = (size_t)c->kh * c->kw * op->out.c;
        } else {
                return fail(errbuf, errlen, op, i, "groups %u with %u input and %u output channels", c->groups,
                            op->in.c, op->out.c);
        }
        if (!weights_ok(p, c->weight, wn))
                return fail(errbuf, errlen, op, i, "weights past the end");
        if (c->bias != SIZE_MAX && !weights_ok(p, c->bias, op->out.c))
                return fail(errbuf, errlen, op, i, "bias past the end");
        if (c->has_scale && (!view_ok(p, c->scale) || c->scale.c != op->in.c || p->tensors[c->scale.t].h != 1 ||
                             p->tensors[c->scale.t].w != 1))
                return fail(errbuf, errlen, op, i, "input scale is not 1x1x%u", op->in.c);
        if (c->has_residual &&
            (!view_ok(p, c->residual) || c->residual.c != op->out.c || !same_pixels(p, c->residual, op->out)))
                return fail(errbuf, errlen, op, i, "residual is not of the output's shape");
        return 0;
}

static int check_op(const struct zcp_plan *p, const struct zcp_plan_op *op, uint32_t i, char *errbuf, size_t errlen)
{
        const struct zcp_plan_tensor *in, *out;

        if (op->kind >= ZCP_OP_COUNT || op->act.kind >= ZCP_ACT_COUNT)
                return fail(errbuf, errlen, NULL, i, "op %u: unknown kind or activation", i);
        if (!view_ok(p, op->in) || !view_ok(p, op->out))
                return fail(errbuf, errlen, op, i, "a view outside its tensor");
        if (op->in.t == op->out.t)
                return fail(errbuf, errlen, op, i, "writes the tensor it reads");
        in = &p->tensors[op->in.t];
        out = &p->tensors[op->out.t];
        switch (op->kind) {
        case ZCP_OP_CONV:
                return check_conv(p, op, i, errbuf, errlen);
        case ZCP_OP_ELTWISE:
                if (op->in.c != op->out.c || !same_pixels(p, op->in, op->out))
                        return fail(errbuf, errlen, op, i, "output is not of the input's shape");
                if (op->u.elt.bcast == ZCP_BCAST_SCALAR)
                        return 0;
                if (!view_ok(p, op->u.elt.b) || op->u.elt.b.c != op->in.c || op->u.elt.b.t == op->out.t)
                        return fail(errbuf, errlen, op, i, "second operand of %u channels, expected %u",
                                    op->u.elt.b.c, op->in.c);
                if (op->u.elt.bcast == ZCP_BCAST_CHANNEL &&
                    (p->tensors[op->u.elt.b.t].h != 1 || p->tensors[op->u.elt.b.t].w != 1))
                        return fail(errbuf, errlen, op, i, "per-channel operand is not 1x1");
                if (op->u.elt.bcast == ZCP_BCAST_NONE && !same_pixels(p, op->u.elt.b, op->in))
                        return fail(errbuf, errlen, op, i, "second operand is not of the input's shape");
                return op->u.elt.bcast <= ZCP_BCAST_SCALAR ? 0 : fail(errbuf, errlen, op, i, "unknown broadcast");
        case ZCP_OP_MEAN:
                if (out->h != 1 || out->w != 1 || op->in.c != op->out.c)
                        return fail(errbuf, errlen, op, i, "output is not 1x1x%u", op->in.c);
                return 0;
        case ZCP_OP_RESIZE:
                if (op->in.c != op->out.c)
                        return fail(errbuf, errlen, op, i, "channels change");
                return 0;
        case ZCP_OP_MAXPOOL: {
                const struct zcp_plan_pool *q = &op->u.pool;
                if (op->in.c != op->out.c || q->kh == 0 || q->kw == 0 || q->sh == 0 || q->sw == 0 || q->kh > 64 ||
                    q->kw > 64 || q->pad_t >= q->kh || q->pad_l >= q->kw)
                        return fail(errbuf, errlen, op, i, "window %ux%u stride %ux%u padding %u %u", q->kh, q->kw,
                                    q->sh, q->sw, q->pad_t, q->pad_l);
                /* every output window must hold at least one input pixel */
                if (out->h == 0 || out->w == 0 || (uint64_t)(out->h - 1) * q->sh >= (uint64_t)in->h + q->pad_t ||
                    (uint64_t)(out->w - 1) * q->sw >= (uint64_t)in->w + q->pad_l)
                        return fail(errbuf, errlen, op, i, "output %ux%u reaches past the input %ux%u", out->h,
                                    out->w, in->h, in->w);
                return 0;
        }
        case ZCP_OP_COPY:
                if (op->in.c != op->out.c || !same_pixels(p, op->in, op->out))
                        return fail(errbuf, errlen, op, i, "output is not of the input's shape");
                return 0;
        default:
                return fail(errbuf, errlen, op, i, "unknown op");
        }
}

int zcp_plan_check(const struct zcp_plan *p, char *errbuf, size_t errlen)
{
        const struct zcp_plan_head *h = &p->head;
        int r;

        if (!p->tensors || !p->tensor_count || p->input.t >= p->tensor_count)
                return fail(errbuf, errlen, NULL, 0, "plan without an input tensor");
        for (uint32_t t = 0; t < p->tensor_count; t++) {
                const struct zcp_plan_tensor *x = &p->tensors[t];
                if (!x->h || !x->w || !x->c || x->h > 16384 || x->w > 16384 || x->c > 65536 ||
                    (uint64_t)x->h * x->w * x->c > (1ull << 31) || x->off > p->arena_floats ||
                    (size_t)x->h * x->w * x->c > p->arena_floats - x->off)
                        return fail(errbuf, errlen, NULL, 0, "tensor %u: %ux%ux%u does not fit the arena", t, x->h,
                                    x->w, x->c);
        }
        if (p->tensors[p->input.t].c != 3)
                return fail(errbuf, errlen, NULL, 0, "the input has %u channels, not 3", p->tensors[p->input.t].c);
        for (int k = 0; k < 3; k++)
                if (!isfinite(p->input.mean[k]) || !isfinite(p->input.std[k]) || p->input.std[k] == 0.0f)
                        return fail(errbuf, errlen, NULL, 0, "input mean/std not finite or std 0");
        for (uint32_t i = 0; i < p->op_count; i++) {
                const struct zcp_plan_op *op = &p->ops[i];
                if ((r = check_op(p, op, i, errbuf, errlen)) < 0)
                        return r;
                if (op->lane > 1 || op->after > i || (op->after && p->ops[op->after - 1].lane == op->lane))
                        return fail(errbuf, errlen, op, i, "lane %u after op %u: not a schedule", (unsigned)op->lane,
                                    op->after);
        }
        for (size_t i = 0; i < p->weight_floats; i++)
                if (!isfinite(p->weights[i]))
                        return fail(errbuf, errlen, NULL, 0, "weight %zu is not finite", i);
        if (!h->classes || !view_ok(p, h->scores))
                return fail(errbuf, errlen, NULL, 0, "head without scores");
        if (h->kind == ZCP_HEAD_CLASSIFY) {
                if (h->scores.c != h->classes || p->tensors[h->scores.t].h != 1 || p->tensors[h->scores.t].w != 1)
                        return fail(errbuf, errlen, NULL, 0, "classify head: scores are not 1x1x%u", h->classes);
        } else if (h->kind == ZCP_HEAD_CENTERNET) {
                if (h->scores.c != h->classes || !view_ok(p, h->sizes) || h->sizes.c != 4 ||
                    !same_pixels(p, h->scores, h->sizes) || !(h->stride > 0.0f) || !isfinite(h->stride) ||
                    h->candidates == 0 || h->candidates > 1000)
                        return fail(errbuf, errlen, NULL, 0, "centernet head: maps or parameters out of range");
        } else {
                return fail(errbuf, errlen, NULL, 0, "unknown head");
        }
        return 0;
}

/* --------------------------------------------------------------- schedule */

uint32_t zcp_plan_op_reads(const struct zcp_plan_op *op, struct zcp_plan_view r[4])
{
        uint32_t n = 0;

        r[n++] = op->in;
        if (op->kind == ZCP_OP_CONV && op->u.conv.has_scale)
                r[n++] = op->u.conv.scale;
        if (op->kind == ZCP_OP_CONV && op->u.conv.has_residual)
                r[n++] = op->u.conv.residual;
        if (op->kind == ZCP_OP_ELTWISE && op->u.elt.bcast != ZCP_BCAST_SCALAR)
                r[n++] = op->u.elt.b;
        return n;
}

/* Whether op j (earlier) must finish before op i starts: i reads a tensor j writes, or writes one
 * that j reads or writes (whole tensors: two slices of one concat count as one tensor). */
static bool depends(const struct zcp_plan *p, uint32_t i, uint32_t j)
{
        struct zcp_plan_view ri[4], rj[4];
        const uint32_t ni = zcp_plan_op_reads(&p->ops[i], ri), nj = zcp_plan_op_reads(&p->ops[j], rj);
        const uint32_t wi = p->ops[i].out.t, wj = p->ops[j].out.t;

        if (wi == wj)
                return true;
        for (uint32_t k = 0; k < ni; k++)
                if (ri[k].t == wj)
                        return true;
        for (uint32_t k = 0; k < nj; k++)
                if (rj[k].t == wi)
                        return true;
        return false;
}

/* An op's work, to break ties between chains of as many ops: a convolution's multiply-adds, else
 * the values it writes. */
static double op_work(const struct zcp_plan *p, const struct zcp_plan_op *op)
{
        const struct zcp_plan_tensor *o = &p->tensors[op->out.t];
        double v = (double)o->h * o->w * op->out.c;

        if (op->kind == ZCP_OP_CONV)
                v *= (double)op->u.conv.kh * op->u.conv.kw * (op->u.conv.groups == 1 ? op->in.c : 1);
        return v;
}

/*
 * Lane 0: the longest chain of dependent ops (most ops; of those, most work), the path a frame
 * cannot be faster than; lane 1: the rest (CenterNet's lateral branches and the second of each
 * pair of heads), which can run while lane 0 does. Then each op's `after`: the last op of the
 * other lane it depends on, unless its lane already waited for that one or a later one.
 */
static int schedule(struct zcp_plan *p)
{
        const uint32_t n = p->op_count;
        double *len = malloc(sizeof(double) * (n ? n : 1)), total = 0.0;
        uint32_t *prev = malloc(sizeof(uint32_t) * (n ? n : 1)), end = 0, waited[2] = { 0, 0 };

        if (!len || !prev) {
                free(len);
                free(prev);
                return -ENOMEM;
        }
        for (uint32_t i = 0; i < n; i++)
                total += op_work(p, &p->ops[i]);
        for (uint32_t i = 0; i < n; i++) {
                double best = 0.0;
                prev[i] = UINT32_MAX;
                for (uint32_t j = 0; j < i; j++)
                        if (len[j] > best && depends(p, i, j)) {
                                best = len[j];
                                prev[i] = j;
                        }
                len[i] = best + 1.0 + op_work(p, &p->ops[i]) / (total + 1.0);
                if (len[i] >= len[end])
                        end = i;
                p->ops[i].lane = 1;
        }
        for (uint32_t i = end; n && i != UINT32_MAX; i = prev[i])
                p->ops[i].lane = 0;
        for (uint32_t i = 0; i < n; i++) {
                struct zcp_plan_op *op = &p->ops[i];
                uint32_t need = 0;
                for (uint32_t j = 0; j < i; j++)
                        if (p->ops[j].lane != op->lane && j + 1 > need && depends(p, i, j))
                                need = j + 1;
                op->after = need > waited[op->lane] ? need : 0;
                if (op->after)
                        waited[op->lane] = need;
        }
        free(len);
        free(prev);
        return 0;
}

/* ----------------------------------------------------------------- layout */

static void touch(uint32_t *first, uint32_t *last, uint32_t t, uint32_t i)
{
        if (first[t] == UINT32_MAX)
                first[t] = i;
        if (last[t] == UINT32_MAX || i > last[t])
                last[t] = i;
}

/*
 * The positions op i may run at, lane 0's op j being position j + 1 (0: before the first op,
 * op_count + 1: the head): its own for lane 0; for lane 1, from just after the lane 0 op it
 * last waited for (itself or an earlier op of its lane) to just before the first lane 0 op that
 * waits for it or a later op of lane 1 (the head: every op has finished).
 */
static void window(const struct zcp_plan *p, uint32_t i, uint32_t *lo, uint32_t *hi)
{
        uint32_t from = 0;

        if (p->ops[i].lane == 0) {
                *lo = *hi = i + 1;
                return;
        }
        for (uint32_t j = 0; j <= i; j++)
                if (p->ops[j].lane == 1 && p->ops[j].after)
                        from = p->ops[j].after;
        *lo = from + 1;
        *hi = p->op_count;
        for (uint32_t j = i + 1; j < p->op_count; j++)
                if (p->ops[j].lane == 0 && p->ops[j].after > i) {
                        *hi = j;
                        break;
                }
}

int zcp_plan_layout(struct zcp_plan *p)
{
        uint32_t n = p->tensor_count, end = p->op_count + 1;
        uint32_t *first = malloc(sizeof(uint32_t) * n), *last = malloc(sizeof(uint32_t) * n);
        uint32_t *order = malloc(sizeof(uint32_t) * n);
        size_t top = 0;
        int r = -ENOMEM;

        if (!first || !last || !order || (r = schedule(p)) < 0)
                goto out;
        r = -ENOMEM;
        for (uint32_t t = 0; t < n; t++)
                first[t] = last[t] = UINT32_MAX;
        touch(first, last, p->input.t, 0);
        for (uint32_t i = 0; i < p->op_count; i++) {
                struct zcp_plan_view reads[4];
                uint32_t nr = zcp_plan_op_reads(&p->ops[i], reads), lo, hi;
                window(p, i, &lo, &hi);
                for (uint32_t k = 0; k <= nr; k++) {
                        const uint32_t t = k < nr ? reads[k].t : p->ops[i].out.t;
                        touch(first, last, t, lo);
                        touch(first, last, t, hi);
                }
        }
        touch(first, last, p->head.scores.t, end);
        if (p->head.kind == ZCP_HEAD_CENTERNET)
                touch(first, last, p->head.sizes.t, end);
        /*
         * Greedy first fit in order of first use: each tensor takes the lowest offset (in 16-float
         * steps, so every tensor starts 64-byte aligned) where it overlaps no tensor already placed
         * whose lifetime meets its own.
         */
        for (uint32_t t = 0; t < n; t++)
                order[t] = t;
        for (uint32_t a = 1; a < n; a++) /* insertion sort by first use: n is small */
                for (uint32_t b = a; b > 0 && first[order[b]] < first[order[b - 1]]; b--) {
                        uint32_t x = order[b];
                        order[b] = order[b - 1];
                        order[b - 1] = x;
                }
        for (uint32_t a = 0; a < n; a++) {
                uint32_t t = order[a];
                size_t size = ((size_t)p->tensors[t].h * p->tensors[t].w * p->tensors[t].c + 15) & ~(size_t)15;
                size_t off = 0;
                bool moved = true;

                if (first[t] == UINT32_MAX) { /* never used: give it room of its own at the end later */
                        first[t] = last[t] = end;
                }
                while (moved) {
                        moved = false;
                        for (uint32_t b = 0; b < a; b++) {
                                uint32_t u = order[b];
                                size_t us = ((size_t)p->tensors[u].h * p->tensors[u].w * p->tensors[u].c + 15) &
                                            ~(size_t)15;
                                if (last[u] < first[t] || last[t] < first[u])
                                        continue;   /* lifetimes apart */
                                if (off + size <= p->tensors[u].off || p->tensors[u].off + us <= off)
                                        continue;   /* bytes apart */
                                off = p->tensors[u].off + us;
                                moved = true;
                        }
                }
                p->tensors[t].off = off;
                if (off + size > top)
                        top = off + size;
        }
        p->arena_floats = top;
        r = 0;
out:
        free(first);
        free(last);
        free(order);
        return r;
}
