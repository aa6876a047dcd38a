/* SPDX-License-Identifier: MIT */
/*
 * The CPU fast path's convolutions (cpu_kern.h), a template: a kernel file includes it once,
 * built for its instruction set, after defining ZCP_VL (floats per vector), ZCP_VMAX (blocks
 * per dense register tile at most: 4 or 2) and the tile sizes below. In the reference's order,
 * with no fused multiply-add (the project's -ffp-contract=off).
 *
 * Dense (GEMM for 1x1, stride 1, no padding; DENSE for any other kernel, stride and padding).
 * Tensors are NHWC, so a 1x1 convolution is [pixels x cin] x [cin x cout] and any other dense
 * one the same with taps x cin rows. Output channels go in blocks of one vector (cpu_vec.h's
 * zcp_block_c0: the last block overlaps the one before), blocks in groups of up to ZCP_VMAX
 * whose weights are packed together as [tap][cin][block of the group][vector]. A register
 * tile holds R output pixels x the group's blocks (x86-64-v4: 6 x 4, 8 x 3, 12 x 2, 16 x 1
 * vectors, 24 accumulators or fewer of the 32 registers; v3 and baseline: 6 x 2, 12 x 1 of 16):
 * per input channel it loads the group's weight vectors once and broadcasts each pixel's
 * input value against them. The epilogue adds the bias, applies the activation, adds the
 * residual and stores. GEMM work comes in chunks of pixels small enough that the chunk's inputs
 * stay in the L2 cache while every group of weights passes over them (on small maps, a chunk's
 * groups one by one); DENSE work in output rows, the columns whose window crosses the border
 * one pixel at a time with the taps clipped.
 *
 * Depthwise: blocks of one vector of channels, weights [tap][vector] per block, a tile of
 * 8 output pixels along a row: per tap one weight vector and one input vector per
 * pixel. Work in output rows.
 *
 * An input scale (per input channel) multiplies each input value before its weight, as the
 * reference does: a GEMM's chunk of inputs once into the share's scratch, for all its groups;
 * the other kernels as they load each value.
 */
static float *falloc(size_t n)
{
        size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
        float *p = aligned_alloc(64, bytes ? bytes : 64);

        if (p)
                memset(p, 0, bytes ? bytes : 64);
        return p;
}

/* Group g of the blocks: its first block and block count (the groups as even as can be). */
static inline void group_of(uint32_t g, uint32_t blocks, uint32_t vmax, uint32_t *ret_b0, uint32_t *ret_nv)
{
        const uint32_t ng = (blocks + vmax - 1) / vmax, base = blocks / ng, rem = blocks % ng;

        *ret_b0 = g * base + (g < rem ? g : rem);
        *ret_nv = base + (g < rem);
}

static inline uint32_t groups_of(uint32_t blocks, uint32_t vmax)
{
        return (blocks + vmax - 1) / vmax;
}

/* ---------------------------------------------------------------- set-up */

static int conv_new(const struct zcp_plan *p, struct zcp_fk_op *k)
{
        const struct zcp_plan_op *op = k->op;
        const struct zcp_plan_conv *c = &op->u.conv;
        const struct zcp_plan_tensor *to = &p->tensors[op->out.t];
        const uint32_t cout = op->out.c, cin = op->in.c, taps = c->kh * c->kw, lanes = zcp_lanes(cout);
        const float *src = p->weights + c->weight;
        const bool dw = c->groups != 1;

        k->blocks = zcp_blocks(cout);
        k->bias = falloc((size_t)k->blocks * ZCP_VL);
        if (!k->bias)
                return -ENOMEM;
        for (uint32_t b = 0; b < k->blocks && c->bias != SIZE_MAX; b++)
                memcpy(k->bias + (size_t)b * ZCP_VL, p->weights + c->bias + zcp_block_c0(b, cout), lanes * sizeof(float));

        if (dw) {
                k->how = ZCP_FK_DW;
                k->w = falloc((size_t)k->blocks * taps * ZCP_VL);
                if (!k->w)
                        return -ENOMEM;
                for (uint32_t b = 0; b < k->blocks; b++)
                        for (uint32_t t = 0; t < taps; t++)
                                memcpy(k->w + ((size_t)b * taps + t) * ZCP_VL, src + (size_t)t * cout + zcp_block_c0(b, cout),
                                       lanes * sizeof(float));
                k->units = to->h;
                k->unit_px = 1;
                k->cost = (uint64_t)to->h * to->w * cout * taps;
                return 0;
        }

        const size_t kdim = (size_t)taps * cin;
        k->vmax = ZCP_VMAX;
        k->w = falloc((size_t)k->blocks * ZCP_VL * kdim);
        if (!k->w)
                return -ENOMEM;
        for (uint32_t g = 0; g < groups_of(k->blocks, k->vmax); g++) {
                uint32_t b0, nv;
                float *dst;

                group_of(g, k->blocks, k->vmax, &b0, &nv);
                dst = k->w + (size_t)b0 * ZCP_VL * kdim;
                for (size_t i = 0; i < kdim; i++)
                        for (uint32_t v = 0; v < nv; v++)
                                memcpy(dst + (i * nv + v) * ZCP_VL, src + i * cout + zcp_block_c0(b0 + v, cout),
                                       lanes * sizeof(float));
        }
        k->cost = (uint64_t)to->h * to->w * cout * kdim;
        if (taps == 1 && c->sh == 1 && c->sw == 1 && c->pad_t == 0 && c->pad_l == 0) {
                /*
                 * Chunks of pixels whose inputs fill about 128 KiB (in multiples of every tile's
                 * pixels, 48), as even as can be; where that makes few chunks (small maps, many
                 * channels), each group of a chunk is a unit of its own.
                 */
                const size_t px = (size_t)to->h * to->w;
                size_t chunk = 128 * 1024 / (kdim * sizeof(float)), n;

                chunk = chunk < 48 ? 48 : chunk > 2304 ? 2304 : chunk;
                n = (px + chunk - 1) / chunk;
                chunk = ((px + n - 1) / n + 47) / 48 * 48;
                k->how = ZCP_FK_GEMM;
                k->unit_px = (uint32_t)chunk;
                k->units = (uint32_t)((px + chunk - 1) / chunk);
                k->unit_groups = k->units < 16 ? groups_of(k->blocks, k->vmax) : 1;
                k->units *= k->unit_groups;
                if (c->has_scale)
                        k->scratch_floats = (size_t)chunk * cin;
        } else {
                k->how = ZCP_FK_DENSE;
                k->unit_px = 1;
                k->units = to->h;
        }
        return 0;
}

/* ----------------------------------------------------------- dense tiles */

/* A register tile's geometry: everything but where its first pixel is. */
struct dtile {
        size_t pstep;              /* floats between neighbouring output pixels' inputs */
        size_t rstep;              /* floats per input row */
        size_t cs;                 /* floats per input pixel */
        uint32_t nky, nkx;         /* taps inside the input, from (ky0, kx0) */
        uint32_t tap0, kw, cin;    /* tap0 = ky0 * kw + kx0 */
        const float *scale;        /* the input scale [cin], or NULL */
        const float *wg;           /* the group's weights: [tap][cin][nv][vector] */
        const float *bias;         /* the group's: [nv][vector] */
        uint32_t oc[4];            /* the group's blocks' first output channel (of the output view) */
        uint32_t lanes;            /* ZCP_VL, or the output channels under it */
        size_t ops, rps;           /* floats per output, residual pixel */
        const struct zcp_plan_act *act;
};

/*
 * Tile of R pixels x V blocks: a = the first pixel's input at tap (ky0, kx0), out and res its
 * output and residual (channel 0 of the views; res may be NULL).
 */
#define DENSE_TILE(R, V, SC)                                                                               \
        ZCP_INLINE void dense_tile_##R##_##V##_##SC(const struct dtile *t, const float *a, float *out,     \
                                                    const float *res)                                     \
        {                                                                                                  \
                zcp_vf acc[R][V];                                                                          \
                for (int p = 0; p < R; p++)                                                                \
                        for (int v = 0; v < V; v++)                                                        \
                                acc[p][v] = (zcp_vf){ 0 };                                                 \
                for (uint32_t dy = 0; dy < t->nky; dy++)                                                   \
                        for (uint32_t dx = 0; dx < t->nkx; dx++) {                                         \
                                const float *ap = a + dy * t->rstep + dx * t->cs;                          \
                                const float *wp =                                                          \
                                        t->wg + (size_t)(t->tap0 + dy * t->kw + dx) * t->cin * V * ZCP_VL; \
                                for (uint32_t ci = 0; ci < t->cin; ci++, wp += V * ZCP_VL) {               \
                                        zcp_vf wv[V];                                                      \
                                        for (int v = 0; v < V; v++)                                        \
                                                wv[v] = zcp_vload(wp + v * ZCP_VL);                        \
                                        for (int p = 0; p < R; p++) {                                      \
                                                const float x = SC ? ap[p * t->pstep + ci] * t->scale[ci]  \
                                                                   : ap[p * t->pstep + ci];                \
                                                for (int v = 0; v < V; v++)                                \
                                                        acc[p][v] += wv[v] * x;                            \
                                        }                                                                  \
                                }                                                                          \
                        }                                                                                  \
                for (int v = 0; v < V; v++) {                                                              \
                        const zcp_vf b = zcp_vload(t->bias + v * ZCP_VL);                                  \
                        zcp_vf y[R];                                                                       \
                        for (int p = 0; p < R; p++)                                                        \
                                y[p] = acc[p][v] + b;                                                      \
                        zcp_vact_n(t->act, y, R);                                                               \
                        if (t->lanes == ZCP_VL) {                                                          \
                                if (res)                                                                   \
                                        for (int p = 0; p < R; p++)                                        \
                                                y[p] += zcp_vload(res + p * t->rps + t->oc[v]);            \
                                for (int p = 0; p < R; p++)                                                \
                                        zcp_vstore(out + p * t->ops + t->oc[v], y[p]);                     \
                        } else {                                                                           \
                                for (int p = 0; p < R; p++) {                                              \
                                        if (res)                                                           \
                                                y[p] += zcp_vload_n(res + p * t->rps, t->lanes);           \
                                        zcp_vstore_n(out + p * t->ops, y[p], t->lanes);                    \
                                }                                                                          \
                        }                                                                                  \
                }                                                                                          \
        }

/* The tiles of each group size: the widest (ZCP_TILE_R<V> pixels), 4 and 1 for what is left. */
#define DENSE_TILES(R, V)                                                                                  \
        DENSE_TILE(R, V, 0)                                                                                \
        DENSE_TILE(4, V, 0)                                                                                \
        DENSE_TILE(1, V, 0)                                                                                \
        DENSE_TILE(R, V, 1)                                                                                \
        DENSE_TILE(4, V, 1)                                                                                \
        DENSE_TILE(1, V, 1)

#if ZCP_VMAX >= 4
DENSE_TILES(ZCP_TILE_R4, 4)
DENSE_TILES(ZCP_TILE_R3, 3)
#endif
DENSE_TILES(ZCP_TILE_R2, 2)
DENSE_TILES(ZCP_TILE_R1, 1)

#define DENSE_SPAN_SC(R, V, SC)                                                                            \
        do {                                                                                               \
                for (; x + R <= n; x += R)                                                                 \
                        dense_tile_##R##_##V##_##SC(t, a + x * t->pstep, out + x * t->ops,                 \
                                                    res ? res + x * t->rps : NULL);                        \
                for (; x + 4 <= n; x += 4)                                                                 \
                        dense_tile_4_##V##_##SC(t, a + x * t->pstep, out + x * t->ops,                     \
                                                res ? res + x * t->rps : NULL);                            \
                for (; x < n; x++)                                                                         \
                        dense_tile_1_##V##_##SC(t, a + x * t->pstep, out + x * t->ops,                     \
                                                res ? res + x * t->rps : NULL);                            \
        } while (0)
#define DENSE_SPAN(R, V)                                                                                   \
        do {                                                                                               \
                if (t->scale)                                                                              \
                        DENSE_SPAN_SC(R, V, 1);                                                            \
                else                                                                                       \
                        DENSE_SPAN_SC(R, V, 0);                                                            \
        } while (0)

/* n consecutive output pixels of one group (nv blocks), tiles as wide as fit. */
static void dense_span(const struct dtile *t, uint32_t nv, size_t n, const float *a, float *out, const float *res)
{
        size_t x = 0;

        switch (nv) {
#if ZCP_VMAX >= 4
        case 4:
                DENSE_SPAN(ZCP_TILE_R4, 4);
                break;
        case 3:
                DENSE_SPAN(ZCP_TILE_R3, 3);
                break;
#endif
        case 2:
                DENSE_SPAN(ZCP_TILE_R2, 2);
                break;
        default:
                DENSE_SPAN(ZCP_TILE_R1, 1);
                break;
        }
}

/* The views of a convolution on this frame's arena. */
struct cviews {
        const float *in, *res, *scale;
        float *out;
        size_t cs, ops, rps;
        const struct zcp_plan_tensor *ti, *to;
};

static struct cviews views_of(const struct zcp_fk_run *r)
{
        const struct zcp_plan *p = r->plan;
        const struct zcp_plan_op *op = r->k->op;
        const struct zcp_plan_conv *c = &op->u.conv;
        struct cviews v = {
                .ti = &p->tensors[op->in.t],
                .to = &p->tensors[op->out.t],
        };

        v.in = r->arena + v.ti->off + op->in.c0;
        v.out = r->arena + v.to->off + op->out.c0;
        v.cs = v.ti->c;
        v.ops = v.to->c;
        if (c->has_scale)
                v.scale = r->arena + p->tensors[c->scale.t].off + c->scale.c0;
        if (c->has_residual) {
                v.res = r->arena + p->tensors[c->residual.t].off + c->residual.c0;
                v.rps = p->tensors[c->residual.t].c;
        }
        return v;
}

static void dtile_group(const struct zcp_fk_run *r, struct dtile *t, uint32_t g, uint32_t *ret_nv)
{
        const struct zcp_fk_op *k = r->k;
        const size_t kdim = (size_t)k->op->u.conv.kh * k->op->u.conv.kw * k->op->in.c;
        uint32_t b0;

        group_of(g, k->blocks, k->vmax, &b0, ret_nv);
        t->wg = k->w + (size_t)b0 * ZCP_VL * kdim;
        t->bias = k->bias + (size_t)b0 * ZCP_VL;
        for (uint32_t v = 0; v < *ret_nv; v++)
                t->oc[v] = zcp_block_c0(b0 + v, k->op->out.c);
}

static void gemm_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1)
{
        const struct zcp_fk_op *k = r->k;
        const struct cviews cv = views_of(r);
        const size_t px = (size_t)cv.to->h * cv.to->w;
        struct dtile t = {
                .pstep = cv.cs, .cs = cv.cs, .nky = 1, .nkx = 1, .kw = 1, .cin = k->op->in.c, .scale = cv.scale,
                .lanes = zcp_lanes(k->op->out.c), .ops = cv.ops, .rps = cv.rps, .act = &k->op->act,
        };

        for (uint32_t u = u0; u < u1; u++) {
                const size_t p0 = (size_t)(u / k->unit_groups) * k->unit_px;
                const size_t n = px - p0 < k->unit_px ? px - p0 : k->unit_px;
                const uint32_t g0 = k->unit_groups > 1 ? u % k->unit_groups : 0;
                const uint32_t g1 = k->unit_groups > 1 ? g0 + 1 : groups_of(k->blocks, k->vmax);
                const float *in = cv.in + p0 * cv.cs;

                if (cv.scale) {
                        /* The chunk's inputs times the scale, once for all its groups (cin floats a pixel). */
                        const uint32_t cin = k->op->in.c, nb = zcp_blocks(cin);

                        for (size_t p = 0; p < n; p++)
                                for (uint32_t b = 0; b < nb; b++) {
                                        const uint32_t c0 = zcp_block_c0(b, cin);
                                        if (cin < ZCP_VL)
                                                zcp_vstore_n(r->scratch + p * cin, zcp_vload_n(in + p * cv.cs, cin) *
                                                                                           zcp_vload_n(cv.scale, cin), cin);
                                        else
                                                zcp_vstore(r->scratch + p * cin + c0,
                                                           zcp_vload(in + p * cv.cs + c0) * zcp_vload(cv.scale + c0));
                                }
                        in = r->scratch;
                        t.pstep = t.cs = cin;
                        t.scale = NULL;
                }
                for (uint32_t g = g0; g < g1; g++) {
                        uint32_t nv;
                        dtile_group(r, &t, g, &nv);
                        dense_span(&t, nv, n, in, cv.out + p0 * cv.ops, cv.res ? cv.res + p0 * cv.rps : NULL);
                }
        }
}

/* Clips taps k0 .. k0 + k - 1 at input position i (may be negative) to [0, size): first and count. */
static inline void clip_taps(int64_t i, uint32_t k, uint32_t size, uint32_t *ret_first, uint32_t *ret_n)
{
        int64_t lo = i < 0 ? -i : 0, hi = i + k > size ? (int64_t)size - i : k;

        *ret_first = (uint32_t)lo;
        *ret_n = hi > lo ? (uint32_t)(hi - lo) : 0;
}

/* Output columns [*ret_a, *ret_b) whose window lies inside the input. */
static void interior_cols(const struct zcp_plan_conv *c, uint32_t iw, uint32_t ow, uint32_t *ret_a, uint32_t *ret_b)
{
        uint32_t a = (c->pad_l + c->sw - 1) / c->sw, b = 0;

        if ((uint64_t)iw + c->pad_l >= c->kw)
                b = (uint32_t)(((uint64_t)iw + c->pad_l - c->kw) / c->sw + 1);
        b = b < ow ? b : ow;
        a = a < b ? a : b;
        *ret_a = a;
        *ret_b = b;
}

static void dense_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1)
{
        const struct zcp_fk_op *k = r->k;
        const struct zcp_plan_conv *c = &k->op->u.conv;
        const struct cviews cv = views_of(r);
        const uint32_t iw = cv.ti->w, ow = cv.to->w;
        struct dtile t = {
                .pstep = (size_t)c->sw * cv.cs, .rstep = (size_t)iw * cv.cs, .cs = cv.cs, .kw = c->kw,
                .cin = k->op->in.c, .scale = cv.scale, .lanes = zcp_lanes(k->op->out.c), .ops = cv.ops, .rps = cv.rps,
                .act = &k->op->act,
        };
        uint32_t xa, xb;

        interior_cols(c, iw, ow, &xa, &xb);
        for (uint32_t oy = u0; oy < u1; oy++) {
                const int64_t iy = (int64_t)oy * c->sh - c->pad_t;
                const size_t orow = (size_t)oy * ow;
                uint32_t ky0;

                clip_taps(iy, c->kh, cv.ti->h, &ky0, &t.nky);
                for (uint32_t g = 0; g < groups_of(k->blocks, k->vmax); g++) {
                        uint32_t nv;

                        dtile_group(r, &t, g, &nv);
                        for (uint32_t ox = 0; ox < ow; ox++) {
                                const int64_t ix = (int64_t)ox * c->sw - c->pad_l;
                                const float *res = cv.res ? cv.res + (orow + ox) * cv.rps : NULL;
                                uint32_t kx0, n = 1;

                                clip_taps(ix, c->kw, iw, &kx0, &t.nkx);
                                if (ox == xa && xb > xa)
                                        n = xb - xa;
                                t.tap0 = ky0 * c->kw + kx0;
                                dense_span(&t, nv, n,
                                           cv.in + ((size_t)(iy + ky0) * iw + (size_t)(ix + kx0)) * cv.cs,
                                           cv.out + (orow + ox) * cv.ops, res);
                                ox += n - 1;
                        }
                }
        }
}

/* ------------------------------------------------------------- depthwise */

/* What every tile of an output row shares. */
struct dwrow {
        size_t pstep, cs;          /* as struct dtile's */
        size_t ops, rps;
        uint32_t nky, nkx, tap0, kw, taps;
        uint32_t blocks, ch, lanes;
        const float *w;            /* [block][tap][vector] */
        const float *bias;         /* [block][vector] */
        const float *scale;        /* the input scale [ch], or NULL */
        const struct zcp_plan_act *act;
        const float *rows[64];     /* per tap row inside the input: the tile's first pixel's first tap */
};

/*
 * R output pixels of one block (its first channel c0): rows as struct dwrow's, out and res at the
 * first pixel's block; wb the block's weights.
 */
#define DW_TILE(R, SC)                                                                                     \
        ZCP_INLINE void dw_tile_##R##_##SC(const struct dwrow *t, uint32_t c0, const float *wb,            \
                                           zcp_vf bias, zcp_vf scale, float *out, const float *res)       \
        {                                                                                                  \
                zcp_vf acc[R];                                                                             \
                for (int p = 0; p < R; p++)                                                                \
                        acc[p] = (zcp_vf){ 0 };                                                            \
                for (uint32_t dy = 0; dy < t->nky; dy++)                                                   \
                        for (uint32_t dx = 0; dx < t->nkx; dx++) {                                         \
                                const float *ap = t->rows[dy] + c0 + dx * t->cs;                           \
                                const zcp_vf w = zcp_vload(wb + (size_t)(t->tap0 + dy * t->kw + dx) * ZCP_VL); \
                                for (int p = 0; p < R; p++)                                                \
                                        acc[p] += w * (SC ? zcp_vload(ap + p * t->pstep) * scale           \
                                                          : zcp_vload(ap + p * t->pstep));                 \
                        }                                                                                  \
                for (int p = 0; p < R; p++)                                                                \
                        acc[p] += bias;                                                                    \
                zcp_vact_n(t->act, acc, R);                                                                     \
                for (int p = 0; p < R; p++) {                                                              \
                        if (res)                                                                           \
                                acc[p] += zcp_vload(res + p * t->rps);                                     \
                        zcp_vstore(out + p * t->ops, acc[p]);                                              \
                }                                                                                          \
        }

DW_TILE(8, 0)
DW_TILE(4, 0)
DW_TILE(1, 0)
DW_TILE(8, 1)
DW_TILE(4, 1)
DW_TILE(1, 1)

/* One pixel of the one block of a view under one vector of channels: partial loads and stores. */
ZCP_INLINE void dw_tile_part(const struct dwrow *t, size_t x, float *out, const float *res)
{
        const zcp_vf scale = t->scale ? zcp_vload_n(t->scale, t->lanes) : zcp_vsplat(1.0f);
        zcp_vf acc = { 0 };

        for (uint32_t dy = 0; dy < t->nky; dy++)
                for (uint32_t dx = 0; dx < t->nkx; dx++)
                        acc += zcp_vload(t->w + (size_t)(t->tap0 + dy * t->kw + dx) * ZCP_VL) *
                               (zcp_vload_n(t->rows[dy] + x * t->pstep + dx * t->cs, t->lanes) * scale);
        acc += zcp_vload(t->bias);
        zcp_vact_n(t->act, &acc, 1);
        if (res)
                acc += zcp_vload_n(res, t->lanes);
        zcp_vstore_n(out, acc, t->lanes);
}

/* The tile of R pixels for every block in turn. */
#define DW_BLOCKS(R, SC)                                                                                   \
        for (uint32_t b = 0; b < t->blocks; b++) {                                                         \
                const uint32_t c0 = zcp_block_c0(b, t->ch);                                                \
                dw_tile_##R##_##SC(t, c0, t->w + (size_t)b * t->taps * ZCP_VL,                             \
                                   zcp_vload(t->bias + (size_t)b * ZCP_VL),                                \
                                   SC ? zcp_vload(t->scale + c0) : zcp_vsplat(1.0f), out + c0,             \
                                   res ? res + c0 : NULL);                                                 \
        }

/* Output pixels [x, x + n) of a row (n: 8, 4 or 1), all channels; out, res at the first pixel. */
static void dw_pixels(const struct dwrow *t, uint32_t n, float *out, const float *res)
{
        if (t->lanes < ZCP_VL) {
                for (uint32_t x = 0; x < n; x++)
                        dw_tile_part(t, x, out + x * t->ops, res ? res + x * t->rps : NULL);
                return;
        }
        switch (n + (t->scale != NULL)) {
        case 8:
                DW_BLOCKS(8, 0);
                break;
        case 9:
                DW_BLOCKS(8, 1);
                break;
        case 4:
                DW_BLOCKS(4, 0);
                break;
        case 5:
                DW_BLOCKS(4, 1);
                break;
        case 1:
                DW_BLOCKS(1, 0);
                break;
        default:
                DW_BLOCKS(1, 1);
                break;
        }
}

/*
 * One output row oy, its input rows at rowbase[dy] (the row of tap ky0 + dy, pixel 0, the view's
 * channel 0): along the row, tiles of 8 (then 4, then 1) pixels whose windows lie inside the
 * input, the border pixels one at a time with their taps clipped; each tile position passes
 * over every block of channels before the next.
 */
static void dw_row(struct dwrow *t, const struct zcp_plan_conv *c, const struct cviews *cv, uint32_t oy, uint32_t ky0,
                   const float *const *rowbase)
{
        const uint32_t iw = cv->ti->w, ow = cv->to->w;
        const size_t orow = (size_t)oy * ow;
        uint32_t xa, xb, n;

        interior_cols(c, iw, ow, &xa, &xb);
        for (uint32_t ox = 0; ox < ow; ox += n) {
                const int64_t ix = (int64_t)ox * c->sw - c->pad_l;
                uint32_t kx0;

                n = ox < xa || ox >= xb ? 1 : ox + 8 <= xb ? 8 : ox + 4 <= xb ? 4 : 1;
                clip_taps(ix, c->kw, iw, &kx0, &t->nkx);
                t->tap0 = ky0 * c->kw + kx0;
                for (uint32_t dy = 0; dy < t->nky; dy++)
                        t->rows[dy] = rowbase[dy] + (size_t)(ix + kx0) * t->cs;
                dw_pixels(t, n, cv->out + (orow + ox) * cv->ops, cv->res ? cv->res + (orow + ox) * cv->rps : NULL);
        }
}

static struct dwrow dwrow_of(const struct zcp_fk_op *k, const struct cviews *cv, size_t cs)
{
        const struct zcp_plan_conv *c = &k->op->u.conv;

        return (struct dwrow){
                .pstep = (size_t)c->sw * cs, .cs = cs, .ops = cv->ops, .rps = cv->rps, .kw = c->kw,
                .taps = c->kh * c->kw, .blocks = k->blocks, .ch = k->op->out.c, .lanes = zcp_lanes(k->op->out.c),
                .w = k->w, .bias = k->bias, .scale = cv->scale, .act = &k->op->act,
        };
}

/* Output rows [u0, u1) from the input tensor. */
static void dw_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1)
{
        const struct zcp_plan_conv *c = &r->k->op->u.conv;
        const struct cviews cv = views_of(r);
        struct dwrow t = dwrow_of(r->k, &cv, cv.cs);
        const float *rowbase[64];

        for (uint32_t oy = u0; oy < u1; oy++) {
                const int64_t iy = (int64_t)oy * c->sh - c->pad_t;
                uint32_t ky0;

                clip_taps(iy, c->kh, cv.ti->h, &ky0, &t.nky);
                for (uint32_t dy = 0; dy < t.nky; dy++)
                        rowbase[dy] = cv.in + (size_t)(iy + ky0 + dy) * cv.ti->w * cv.cs;
                dw_row(&t, c, &cv, oy, ky0, rowbase);
        }
}

/*
 * Output rows [u0, u1) of a depthwise convolution fused with the 1x1 convolution before it
 * (k->pw, whose output is this one's input and nobody else's): the 1x1's output rows are made
 * as the rows need them, into a ring of kh rows in the share's scratch ([kh][iw][ch]), and
 * never reach the arena. Rows of the ring are made in order within the call.
 */
static void dw_fused_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1)
{
        const struct zcp_fk_op *k = r->k, *pk = k->pw;
        const struct zcp_plan_conv *c = &k->op->u.conv;
        const struct zcp_fk_run pr = { .plan = r->plan, .k = pk, .arena = r->arena };
        const struct cviews cv = views_of(r), pv = views_of(&pr);
        const uint32_t iw = cv.ti->w, ch = k->op->in.c;
        const size_t rowfloats = (size_t)iw * ch;
        struct dwrow t = dwrow_of(k, &cv, ch);
        struct dtile pt = {
                .pstep = pv.cs, .cs = pv.cs, .nky = 1, .nkx = 1, .kw = 1, .cin = pk->op->in.c,
                .lanes = zcp_lanes(ch), .ops = ch, .act = &pk->op->act,
        };
        const float *rowbase[64];
        int64_t made = -1; /* the last input row in the ring */

        for (uint32_t oy = u0; oy < u1; oy++) {
                const int64_t iy = (int64_t)oy * c->sh - c->pad_t;
                uint32_t ky0;

                clip_taps(iy, c->kh, cv.ti->h, &ky0, &t.nky);
                for (int64_t row = iy + ky0 > made + 1 ? iy + ky0 : made + 1; row < iy + ky0 + t.nky; row++) {
                        float *dst = r->scratch + (size_t)(row % c->kh) * rowfloats;

                        for (uint32_t g = 0; g < groups_of(pk->blocks, pk->vmax); g++) {
                                uint32_t nv;
                                dtile_group(&pr, &pt, g, &nv);
                                dense_span(&pt, nv, iw, pv.in + (size_t)row * iw * pv.cs, dst, NULL);
                        }
                        made = row;
                }
                for (uint32_t dy = 0; dy < t.nky; dy++)
                        rowbase[dy] = r->scratch + (size_t)((iy + ky0 + dy) % c->kh) * rowfloats;
                dw_row(&t, c, &cv, oy, ky0, rowbase);
        }
}

static void conv_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1)
{
        switch (r->k->how) {
        case ZCP_FK_GEMM:
                gemm_units(r, u0, u1);
                break;
        case ZCP_FK_DENSE:
                dense_units(r, u0, u1);
                break;
        case ZCP_FK_DW:
                if (r->fused)
                        dw_fused_units(r, u0, u1);
                else
                        dw_units(r, u0, u1);
                break;
        default:
                break;
        }
}
