/* SPDX-License-Identifier: MIT */
/*
 * The CPU fast path's other ops (cpu_kern.h), a template included by each kernel file after
 * cpu_conv_tmpl.c: elementwise, mean, bilinear resize, max pool and copy, one vector of
 * channels at a time (NHWC: a pixel's channels are contiguous). As for the convolutions, the
 * last vector of a pixel ends at the view's last channel, overlapping the one before (its
 * channels are written twice with the same values); views under one vector use partial loads
 * and stores. Work in pixel chunks (elementwise, copy), output rows (resize, max pool) or
 * channel blocks (mean). The same float operations in the same order as the reference.
 */

/* A view's channel 0 of pixel 0 in this frame's arena, and its floats per pixel. */
static inline float *view_at(const struct zcp_fk_run *r, struct zcp_plan_view v, size_t *ret_stride)
{
        const struct zcp_plan_tensor *t = &r->plan->tensors[v.t];

        *ret_stride = t->c;
        return r->arena + t->off + v.c0;
}

/* Loads and stores of the n channels at p: whole vectors, or partial ones under one vector. */
ZCP_INLINE zcp_vf ld(const float *p, uint32_t n)
{
        return n >= ZCP_VL ? zcp_vload(p) : zcp_vload_n(p, n);
}

ZCP_INLINE void st(float *p, zcp_vf v, uint32_t n)
{
        if (n >= ZCP_VL)
                zcp_vstore(p, v);
        else
                zcp_vstore_n(p, v, n);
}

/* ---------------------------------------------------------------- kernels */

static void elt_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1)
{
        const struct zcp_plan_op *op = r->k->op;
        const struct zcp_plan_eltwise *e = &op->u.elt;
        const size_t px = zcp_plan_view_pixels(r->plan, op->in);
        const uint32_t c = op->in.c, nb = zcp_blocks(c);
        size_t as, bs = 0, os;
        const float *a = view_at(r, op->in, &as), *b = e->bcast == ZCP_BCAST_SCALAR ? NULL : view_at(r, e->b, &bs);
        float *out = view_at(r, op->out, &os);
        const size_t p1 = (size_t)u1 * r->k->unit_px < px ? (size_t)u1 * r->k->unit_px : px;

        if (e->bcast == ZCP_BCAST_CHANNEL)
                bs = 0;
        for (size_t p = (size_t)u0 * r->k->unit_px; p < p1; p++)
                for (uint32_t blk = 0; blk < nb; blk++) {
                        const uint32_t c0 = zcp_block_c0(blk, c);
                        const zcp_vf x = ld(a + p * as + c0, c);
                        const zcp_vf y = b ? ld(b + p * bs + c0, c) : zcp_vsplat(e->scalar);
                        st(out + p * os + c0, zcp_vact(&op->act, e->mul ? x * y : x + y), c);
                }
}

static void copy_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1)
{
        const struct zcp_plan_op *op = r->k->op;
        const size_t px = zcp_plan_view_pixels(r->plan, op->in);
        const uint32_t c = op->in.c, nb = zcp_blocks(c);
        size_t is, os;
        const float *in = view_at(r, op->in, &is);
        float *out = view_at(r, op->out, &os);
        const size_t p1 = (size_t)u1 * r->k->unit_px < px ? (size_t)u1 * r->k->unit_px : px;

        for (size_t p = (size_t)u0 * r->k->unit_px; p < p1; p++)
                for (uint32_t blk = 0; blk < nb; blk++) {
                        const uint32_t c0 = zcp_block_c0(blk, c);
                        st(out + p * os + c0, zcp_vact(&op->act, ld(in + p * is + c0, c)), c);
                }
}

/* The reference's sum, s = s + x / n in pixel order, for 16 channels at a time. */
static void mean_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1)
{
        const struct zcp_plan_op *op = r->k->op;
        const size_t px = zcp_plan_view_pixels(r->plan, op->in);
        const uint32_t c = op->in.c;
        const zcp_vf n = zcp_vsplat((float)px);
        size_t is, os;
        const float *in = view_at(r, op->in, &is);
        float *out = view_at(r, op->out, &os);

        for (uint32_t blk = u0; blk < u1; blk++) {
                const uint32_t c0 = zcp_block_c0(blk, c);
                zcp_vf s = { 0 };

                for (size_t p = 0; p < px; p++)
                        s = s + ld(in + p * is + c0, c) / n;
                st(out + c0, zcp_vact(&op->act, s), c);
        }
}

static void resize_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1)
{
        const struct zcp_fk_op *k = r->k;
        const struct zcp_plan_op *op = k->op;
        const uint32_t c = op->in.c, nb = zcp_blocks(c), iw = r->plan->tensors[op->in.t].w;
        const uint32_t ow = r->plan->tensors[op->out.t].w;
        size_t is, os;
        const float *in = view_at(r, op->in, &is);
        float *out = view_at(r, op->out, &os);

        for (uint32_t oy = u0; oy < u1; oy++) {
                const float *top = in + (size_t)k->ylo[oy] * iw * is, *bot = in + (size_t)k->yhi[oy] * iw * is;
                const zcp_vf fy = zcp_vsplat(k->fy[oy]);

                for (uint32_t ox = 0; ox < ow; ox++) {
                        const size_t x0 = k->xlo[ox] * is, x1 = k->xhi[ox] * is;
                        const zcp_vf fx = zcp_vsplat(k->fx[ox]);
                        float *o = out + ((size_t)oy * ow + ox) * os;

                        for (uint32_t blk = 0; blk < nb; blk++) {
                                const uint32_t c0 = zcp_block_c0(blk, c);
                                const zcp_vf tl = ld(top + x0 + c0, c), tr = ld(top + x1 + c0, c);
                                const zcp_vf bl = ld(bot + x0 + c0, c), br = ld(bot + x1 + c0, c);
                                const zcp_vf t = tl + (tr - tl) * fx, b = bl + (br - bl) * fx;
                                st(o + c0, zcp_vact(&op->act, t + (b - t) * fy), c);
                        }
                }
        }
}

static void pool_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1)
{
        const struct zcp_plan_op *op = r->k->op;
        const struct zcp_plan_pool *q = &op->u.pool;
        const struct zcp_plan_tensor *ti = &r->plan->tensors[op->in.t], *to = &r->plan->tensors[op->out.t];
        const uint32_t c = op->in.c, nb = zcp_blocks(c);
        size_t is, os;
        const float *in = view_at(r, op->in, &is);
        float *out = view_at(r, op->out, &os);

        for (uint32_t oy = u0; oy < u1; oy++) {
                const int64_t iy = (int64_t)oy * q->sh - q->pad_t;
                const uint32_t ky0 = iy < 0 ? (uint32_t)-iy : 0;
                const uint32_t ky1 = iy + q->kh > ti->h ? (uint32_t)((int64_t)ti->h - iy) : q->kh;

                for (uint32_t ox = 0; ox < to->w; ox++) {
                        const int64_t ix = (int64_t)ox * q->sw - q->pad_l;
                        const uint32_t kx0 = ix < 0 ? (uint32_t)-ix : 0;
                        const uint32_t kx1 = ix + q->kw > ti->w ? (uint32_t)((int64_t)ti->w - ix) : q->kw;
                        float *o = out + ((size_t)oy * to->w + ox) * os;

                        for (uint32_t blk = 0; blk < nb; blk++) {
                                const uint32_t c0 = zcp_block_c0(blk, c);
                                zcp_vf m = zcp_vsplat(-INFINITY);

                                for (uint32_t ky = ky0; ky < ky1; ky++)
                                        for (uint32_t kx = kx0; kx < kx1; kx++) {
                                                const zcp_vf v = ld(in + ((size_t)(iy + ky) * ti->w + (size_t)(ix + kx)) * is + c0, c);
                                                m = zcp_vsel(v > m, v, m);
                                        }
                                st(o + c0, zcp_vact(&op->act, m), c);
                        }
                }
        }
}

static void ops_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1)
{
        switch (r->k->how) {
        case ZCP_FK_ELT:
                elt_units(r, u0, u1);
                break;
        case ZCP_FK_COPY:
                copy_units(r, u0, u1);
                break;
        case ZCP_FK_MEAN:
                mean_units(r, u0, u1);
                break;
        case ZCP_FK_RESIZE:
                resize_units(r, u0, u1);
                break;
        case ZCP_FK_POOL:
                pool_units(r, u0, u1);
                break;
        default:
                break;
        }
}
