/* SPDX-License-Identifier: MIT */
/*
 * The head of a TF.js graph: what its outputs mean. Two are understood:
 *   - a CenterNet decode tail: peaks of a class heatmap (MaxPool 3x3, Equal, Cast, Mul), TopKV2
 *     over the flattened map, the flat index split into class, x and y (FloorMod, FloorDiv), the
 *     sizes gathered at each peak and the box made as x*stride - size0, y*stride - size1,
 *     x*stride + size2, y*stride + size3, concatenated with score and class;
 *   - a classifier: Softmax over a 1x1xclasses map.
 * The tail is checked node by node against that structure (anything else is refused, naming the
 * node), then replaced by the plan's head (model/plan.h), which computes the same. Main thread.
 */
#include <string.h>

#include "model/graph.h"

static bool is(const struct zcp_graph *g, uint32_t i, const char *op)
{
        return i < g->n && strcmp(g->nodes[i].op, op) == 0;
}

static uint32_t src(const struct zcp_graph *g, const struct zcp_gnode *n, uint32_t input)
{
        return input < n->n_in ? zcp_gsource(g, n->in[input]) : UINT32_MAX;
}

/* A const of `count` int values: true and the values. */
static bool const_ints(const struct zcp_gnode *c, int64_t *v, size_t count)
{
        if (!c || !c->is_const || c->count != count)
                return false;
        for (size_t k = 0; k < count; k++)
                v[k] = c->is_int ? c->i[k] : (int64_t)c->f[k];
        return true;
}

static void mark(struct zcp_graph *g, uint32_t i)
{
        if (i < g->n)
                g->nodes[i].tail = true;
}

/* Every node downstream of i becomes tail. */
static void mark_down(struct zcp_graph *g, uint32_t i)
{
        struct zcp_gnode *n = &g->nodes[i];

        if (n->tail && i != UINT32_MAX)
                return;
        n->tail = true;
        for (uint32_t u = 0; u < n->n_users; u++)
                mark_down(g, n->users[u]);
}

/*
 * Which coordinate node i (Mul(Cast(ExpandDims(coord)), stride) or the coord itself) carries:
 * 'x' for FloorMod(FloorDiv(index, classes), width), 'y' for FloorDiv(FloorDiv(index, classes),
 * width); 0 for anything else. The stride constant into *stride.
 */
static int coord(const struct zcp_graph *g, uint32_t i, uint32_t topk, float *stride)
{
        const struct zcp_gnode *n;
        uint32_t a, b, inner;
        float s;

        if (!is(g, i, "Mul"))
                return 0;
        n = &g->nodes[i];
        a = src(g, n, 0);
        b = src(g, n, 1);
        if (zcp_gconst_scalar(&g->nodes[b], &s)) {
                i = a;
        } else if (zcp_gconst_scalar(&g->nodes[a], &s)) {
                i = b;
        } else {
                return 0;
        }
        *stride = s;
        if (!is(g, i, "Cast"))
                return 0;
        i = src(g, &g->nodes[i], 0);
        if (is(g, i, "ExpandDims"))
                i = src(g, &g->nodes[i], 0);
        if (!is(g, i, "FloorMod") && !is(g, i, "FloorDiv"))
                return 0;
        inner = src(g, &g->nodes[i], 0);
        if (!is(g, inner, "FloorDiv") || g->nodes[inner].in[0].node != topk || g->nodes[inner].in[0].port != 1)
                return 0;
        return is(g, i, "FloorMod") ? 'x' : 'y';
}

/* Which size channel a StridedSlice picks: begin [0,0,j], end [0,0,j+1], strides 1; -1 otherwise. */
static int slice_channel(const struct zcp_graph *g, uint32_t i, uint32_t gather)
{
        const struct zcp_gnode *n;
        int64_t b[3], e[3], s[3];
        uint32_t from;

        if (!is(g, i, "StridedSlice"))
                return -1;
        n = &g->nodes[i];
        from = src(g, n, 0);
        if (is(g, from, "Reshape"))
                from = src(g, &g->nodes[from], 0);
        if (from != gather || !const_ints(zcp_gconst(g, n, 1), b, 3) || !const_ints(zcp_gconst(g, n, 2), e, 3) ||
            !const_ints(zcp_gconst(g, n, 3), s, 3) || s[2] != 1 || e[2] != b[2] + 1 || b[2] < 0 || b[2] > 3)
                return -1;
        return (int)b[2];
}

static int centernet(struct zcp_graph *g, uint32_t topk, struct zcp_ghead *h, char *err, size_t errlen)
{
        const struct zcp_gnode *tn = &g->nodes[topk], *cat = NULL;
        uint32_t r, m, a, b, heat, cast, eq, pool, gather = UINT32_MAX, rr, sizes;
        int64_t k, shape[2], ks[4], st[4];
        uint32_t nks, nst;
        char pad[16];
        float stride = 0.0f;
        static const char *const need = "the box part of a CenterNet decode (x*s - w0, y*s - w1, x*s + w2, y*s + w3)";

        h->at = tn;
        /* TopKV2(Reshape(Mul(heat, Cast(Equal(heat, MaxPool(heat)))), [1, -1]), k) */
        r = src(g, tn, 0);
        if (!is(g, r, "Reshape") || !const_ints(zcp_gconst(g, &g->nodes[r], 1), shape, 2) || shape[0] != 1)
                return zcp_gerr(g, tn, err, errlen, "its input is not the heatmap reshaped to [1, -1]");
        if (!zcp_gconst(g, tn, 1) || !const_ints(zcp_gconst(g, tn, 1), &k, 1) || k < 1 || k > 1000)
                return zcp_gerr(g, tn, err, errlen, "k is not a constant in 1..1000");
        m = src(g, &g->nodes[r], 0);
        if (!is(g, m, "Mul"))
                return zcp_gerr(g, &g->nodes[r], err, errlen, "expected the heatmap times its peak mask");
        a = src(g, &g->nodes[m], 0);
        b = src(g, &g->nodes[m], 1);
        heat = is(g, a, "Cast") ? b : a;
        cast = heat == a ? b : a;
        if (!is(g, cast, "Cast") || !is(g, (eq = src(g, &g->nodes[cast], 0)), "Equal"))
                return zcp_gerr(g, &g->nodes[m], err, errlen, "expected Cast(Equal(heatmap, MaxPool(heatmap)))");
        a = src(g, &g->nodes[eq], 0);
        b = src(g, &g->nodes[eq], 1);
        pool = is(g, a, "MaxPool") ? a : b;
        if (!is(g, pool, "MaxPool") || (pool == a ? b : a) != heat || src(g, &g->nodes[pool], 0) != heat)
                return zcp_gerr(g, &g->nodes[eq], err, errlen, "expected Equal(heatmap, MaxPool(heatmap))");
        if (!zcp_gattr_ints(&g->nodes[pool], "ksize", ks, 4, &nks) || nks != 4 || ks[1] != 3 || ks[2] != 3 ||
            !zcp_gattr_ints(&g->nodes[pool], "strides", st, 4, &nst) || nst != 4 || st[1] != 1 || st[2] != 1 ||
            !zcp_gattr_str(&g->nodes[pool], "padding", pad, sizeof(pad)) || strcmp(pad, "SAME") != 0)
                return zcp_gerr(g, &g->nodes[pool], err, errlen, "the peak window must be 3x3, stride 1, SAME");
        /* GatherV2(Reshape(sizes, [pixels, 4]), indices): the sizes at each peak */
        for (uint32_t i = 0; i < g->n; i++)
                if (is(g, i, "GatherV2")) {
                        if (gather != UINT32_MAX)
                                return zcp_gerr(g, &g->nodes[i], err, errlen, "a second GatherV2 in the decode");
                        gather = i;
                }
        if (gather == UINT32_MAX)
                return zcp_gerr(g, tn, err, errlen, "no GatherV2 of the size map after it");
        rr = src(g, &g->nodes[gather], 0);
        if (!is(g, rr, "Reshape") || !const_ints(zcp_gconst(g, &g->nodes[rr], 1), shape, 2) || shape[1] != 4)
                return zcp_gerr(g, &g->nodes[gather], err, errlen, "expected the size map reshaped to [pixels, 4]");
        sizes = src(g, &g->nodes[rr], 0);
        h->pixels = shape[0];
        /* the classes and the width: the divisors of the index */
        h->classes = h->width = -1;
        for (uint32_t i = 0; i < g->n; i++) {
                int64_t d;
                if (!is(g, i, "FloorDiv") && !is(g, i, "FloorMod"))
                        continue;
                if (!const_ints(zcp_gconst(g, &g->nodes[i], 1), &d, 1) || d < 1)
                        return zcp_gerr(g, &g->nodes[i], err, errlen, "its divisor is not a positive constant");
                if (g->nodes[i].in[0].node == topk && g->nodes[i].in[0].port == 1) {
                        if (h->classes >= 0 && h->classes != d)
                                return zcp_gerr(g, &g->nodes[i], err, errlen, "two class counts in the decode");
                        h->classes = d;
                } else {
                        if (h->width >= 0 && h->width != d)
                                return zcp_gerr(g, &g->nodes[i], err, errlen, "two map widths in the decode");
                        h->width = d;
                }
        }
        if (h->classes < 0 || h->width < 0)
                return zcp_gerr(g, tn, err, errlen, "the index is not split into class, x and y");
        /* ConcatV2(x0, y0, x1, y1, score, class, axis) */
        for (uint32_t i = 0; i < g->n; i++)
                if (is(g, i, "ConcatV2") && g->nodes[i].n_in == 7) {
                        const struct zcp_gnode *c = &g->nodes[i];
                        uint32_t sc = src(g, c, 4), cl = src(g, c, 5);
                        if (is(g, sc, "ExpandDims") && g->nodes[sc].in[0].node == topk &&
                            g->nodes[sc].in[0].port == 0 && is(g, cl, "Cast"))
                                cat = c;
                }
        if (!cat)
                return zcp_gerr(g, tn, err, errlen, "no [x0, y0, x1, y1, score, class] concat of its results");
        for (uint32_t j = 0; j < 4; j++) {
                const char *op = j < 2 ? "Sub" : "Add";
                uint32_t e = src(g, cat, j), p0, p1;
                int c0, ch;
                float s = 0.0f;

                if (!is(g, e, op))
                        return zcp_gerr(g, cat, err, errlen, "input %u is not a %s: %s", j, op, need);
                p0 = src(g, &g->nodes[e], 0);
                p1 = src(g, &g->nodes[e], 1);
                if (j >= 2 && slice_channel(g, p0, gather) >= 0) { /* Add is commutative */
                        uint32_t t = p0;
                        p0 = p1;
                        p1 = t;
                }
                c0 = coord(g, p0, topk, &s);
                ch = slice_channel(g, p1, gather);
                if (c0 != ((j & 1) ? 'y' : 'x') || ch != (int)j || !(s > 0.0f) || (stride > 0.0f && s != stride))
                        return zcp_gerr(g, &g->nodes[e], err, errlen, "not %s", need);
                stride = s;
        }
        /* everything from the peaks on is the decode */
        mark(g, pool);
        mark(g, eq);
        mark(g, cast);
        mark(g, m);
        mark(g, r);
        mark(g, rr);
        g->nodes[topk].tail = false;
        mark_down(g, topk);
        g->nodes[gather].tail = false;
        mark_down(g, gather);
        h->head.kind = ZCP_HEAD_CENTERNET;
        h->head.stride = stride;
        h->head.candidates = (uint32_t)k;
        h->scores = heat;
        h->sizes = sizes;
        return 0;
}

static int classify(struct zcp_graph *g, uint32_t sm, struct zcp_ghead *h, char *err, size_t errlen)
{
        uint32_t in = src(g, &g->nodes[sm], 0);

        h->at = &g->nodes[sm];
        mark_down(g, sm);
        h->head.kind = ZCP_HEAD_CLASSIFY;
        h->scores = in;
        h->sizes = UINT32_MAX;
        return 0;
}

int zcp_graph_head(struct zcp_graph *g, struct zcp_ghead *h, char *err, size_t errlen)
{
        uint32_t topk = UINT32_MAX, sm = UINT32_MAX;

        memset(h, 0, sizeof(*h));
        for (uint32_t i = 0; i < g->n; i++) {
                if (is(g, i, "TopKV2")) {
                        if (topk != UINT32_MAX)
                                return zcp_gerr(g, &g->nodes[i], err, errlen, "a second TopKV2: one head only");
                        topk = i;
                }
                if (is(g, i, "Softmax"))
                        sm = sm == UINT32_MAX ? i : UINT32_MAX - 1;
        }
        if (topk != UINT32_MAX)
                return centernet(g, topk, h, err, errlen);
        if (sm < UINT32_MAX - 1)
                return classify(g, sm, h, err, errlen);
        return zcp_gerr(g, NULL, err, errlen,
                        "no head zcpipe understands: a CenterNet decode (TopKV2 of the heatmap's peaks) or one "
                        "Softmax classifier");
}
