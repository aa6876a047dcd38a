/* SPDX-License-Identifier: MIT */
/*
 * A plan's other ops (model/plan.h): element-wise add/multiply, bilinear resize, max pool and
 * copy, a thread per output value with the reference's float operations in its order
 * (--fmad=false), so their results equal the C reference's bit for bit (but for the
 * activation's expf); and the mean over the pixels, whose sum is reassociated: each block sums
 * the terms x / n of one slice of the pixels for 32 channels (8 rows of threads, their partial
 * sums added in a fixed order), and the last block of a channel group to finish adds the slices'
 * sums in a fixed order (8 rows of strided slices, then the rows), so the result does not depend
 * on the blocks' timing.
 */
#include "plan.cuh"

#define OT 256

static __global__ void __launch_bounds__(OT) op_eltwise(const kelt a)
{
        const uint32_t i = blockIdx.x * OT + threadIdx.x;
        const uint32_t px = i / a.c, c = i - px * a.c;

        kpdl_wait();
        if (i >= a.pixels * a.c)
                return;
        const float x = a.a[(size_t)px * a.a_stride + c];
        const float v = !a.b ? a.scalar : a.b[(size_t)px * a.b_stride + c];
        const float y = a.mul ? x * v : x + v;
        a.out[(size_t)px * a.out_stride + c] = kact_apply(a.act, y);
}

static __global__ void __launch_bounds__(OT) op_copy(const kelt a)
{
        const uint32_t i = blockIdx.x * OT + threadIdx.x;

        kpdl_wait();
        if (i >= a.pixels * a.c)
                return;
        const uint32_t px = i / a.c, c = i - px * a.c;
        a.out[(size_t)px * a.out_stride + c] = kact_apply(a.act, a.a[(size_t)px * a.a_stride + c]);
}

/* One axis of TensorFlow's bilinear resize, as reference_plan.c's resize_axis(). */
static __device__ __forceinline__ void resize_axis(uint32_t o, uint32_t in, float scale, bool half_pixel,
                                                   uint32_t &lo_ret, uint32_t &hi_ret, float &f_ret)
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
        lo_ret = (uint32_t)lo;
        hi_ret = (uint32_t)lo + 1 < in ? (uint32_t)lo + 1 : in - 1;
        f_ret = src - fl;
}

static __global__ void __launch_bounds__(OT) op_resize(const kresize a)
{
        const uint32_t i = blockIdx.x * OT + threadIdx.x;
        const uint32_t c = i % a.c, px = i / a.c, oy = px / a.ow, ox = px - oy * a.ow;
        uint32_t y0, y1, x0, x1;
        float fy, fx;

        /* the sources and weights: arithmetic on the launch's constants, before the wait */
        resize_axis(oy, a.ih, a.sy, a.half_pixel, y0, y1, fy);
        resize_axis(ox, a.iw, a.sx, a.half_pixel, x0, x1, fx);
        kpdl_wait();
        if (i >= a.oh * a.ow * a.c)
                return;
        const float tl = a.in[((size_t)y0 * a.iw + x0) * a.in_stride + c];
        const float tr = a.in[((size_t)y0 * a.iw + x1) * a.in_stride + c];
        const float bl = a.in[((size_t)y1 * a.iw + x0) * a.in_stride + c];
        const float br = a.in[((size_t)y1 * a.iw + x1) * a.in_stride + c];
        const float top = tl + (tr - tl) * fx, bottom = bl + (br - bl) * fx;
        const float v = top + (bottom - top) * fy;
        a.out[(size_t)px * a.out_stride + c] = kact_apply(a.act, v);
}

static __global__ void __launch_bounds__(OT) op_maxpool(const kpool a)
{
        const uint32_t i = blockIdx.x * OT + threadIdx.x;

        kpdl_wait();
        if (i >= a.oh * a.ow * a.c)
                return;
        const uint32_t c = i % a.c, px = i / a.c, oy = px / a.ow, ox = px - oy * a.ow;
        float m = -INFINITY;

        for (uint32_t ky = 0; ky < a.kh; ky++) {
                const int iy = (int)(oy * a.sh) - (int)a.pad_t + (int)ky;
                if (iy < 0 || iy >= (int)a.ih)
                        continue;
                for (uint32_t kx = 0; kx < a.kw; kx++) {
                        const int ix = (int)(ox * a.sw) - (int)a.pad_l + (int)kx;
                        float v;
                        if (ix < 0 || ix >= (int)a.iw)
                                continue;
                        v = a.in[((size_t)iy * a.iw + (uint32_t)ix) * a.in_stride + c];
                        m = v > m ? v : m;
                }
        }
        a.out[(size_t)px * a.out_stride + c] = kact_apply(a.act, m);
}

/*
 * The sum of p[y * stride] / div for y = first, first + R, ... below end, in that order, MU loads in
 * flight ahead of their sums; PAST_L1: values other blocks wrote (__ldcg).
 */
template <uint32_t R, uint32_t MU, bool PAST_L1>
static __device__ float strided_sum(const float *p, uint32_t stride, uint32_t first, uint32_t end, float div)
{
        uint32_t y = first;
        float s = 0.0f;

        for (; y + (MU - 1) * R < end; y += MU * R) {
                float v[MU];
#pragma unroll
                for (uint32_t j = 0; j < MU; j++) {
                        const float *q = p + (size_t)(y + j * R) * stride;
                        v[j] = PAST_L1 ? __ldcg(q) : *q;
                }
#pragma unroll
                for (uint32_t j = 0; j < MU; j++)
                        s = s + v[j] / div;
        }
        for (; y < end; y += R) {
                const float *q = p + (size_t)y * stride;
                s = s + (PAST_L1 ? __ldcg(q) : *q) / div;
        }
        return s;
}

/*
 * blockIdx.x: 32 channels; blockIdx.y: a slice of the pixels. 256 threads: 32 channels x 8 rows.
 * Loads eight at a time ahead of their in-order sums, and the last block adds the slices' sums
 * with its 8 rows too (row r: slices r, r + 8, ...; then the rows in order): a chain of one load
 * after another costs a load's latency each (one warp adding 66 slices: 26 us).
 */
static __global__ void __launch_bounds__(OT) op_mean(const kmean a)
{
        constexpr uint32_t R = OT / 32, MU = 8;   /* rows; loads in flight a thread */
        __shared__ float s_part[OT];
        __shared__ bool s_last;
        const uint32_t lane = threadIdx.x & 31, row = threadIdx.x >> 5;
        const uint32_t c = blockIdx.x * 32 + lane;
        const uint32_t p0 = blockIdx.y * a.chunk, p1 = min(p0 + a.chunk, a.pixels);
        float s = 0.0f;

        kpdl_wait();
        if (c < a.c)
                s = strided_sum<R, MU, false>(a.in + c, a.in_stride, p0 + row, p1, a.n);
        s_part[threadIdx.x] = s;
        __syncthreads();
        if (row == 0) {
                for (uint32_t r = 1; r < R; r++)
                        s = s + s_part[r * 32 + lane];
                if (c < a.c)
                        a.partial[(size_t)blockIdx.y * a.c + c] = s;
                __threadfence();
        }
        __syncthreads();
        if (threadIdx.x == 0)
                s_last = atomicAdd(&a.done[blockIdx.x], 1u) == a.splits - 1;
        __syncthreads();
        if (!s_last)
                return;
        __threadfence();
        s = c < a.c ? strided_sum<R, MU, true>(a.partial + c, a.c, row, a.splits, 1.0f) : 0.0f;
        s_part[threadIdx.x] = s;   /* row 0 read the first phase's before the barriers above */
        __syncthreads();
        if (row != 0)
                return;
        if (c < a.c) {
                float t = s;
                for (uint32_t r = 1; r < R; r++)
                        t = t + s_part[r * 32 + lane];
                a.out[c] = kact_apply(a.act, t);
        }
        if (lane == 0)
                a.done[blockIdx.x] = 0;   /* every block of the group is in: ready for the next frame */
}

const char *kops_plan(klaunch_rec *rec, int sms)
{
        size_t n = 0;

        rec->block = OT;
        switch (rec->kind) {
        case KK_ELT:
        case KK_COPY:
                n = (size_t)rec->u.elt.pixels * rec->u.elt.c;
                break;
        case KK_RESIZE:
                n = (size_t)rec->u.resize.oh * rec->u.resize.ow * rec->u.resize.c;
                break;
        case KK_POOL:
                n = (size_t)rec->u.pool.oh * rec->u.pool.ow * rec->u.pool.c;
                break;
        case KK_MEAN: {
                kmean *m = &rec->u.mean;
                const uint32_t groups = (m->c + 31) / 32;
                /*
                 * slices of at least 32 pixels, about four blocks a multiprocessor in all: a slice's
                 * loads in flight, not its arithmetic, bound the mean (two blocks a multiprocessor
                 * and loads four at a time: 23 us for 128x128 pixels of 128 channels on an H200)
                 */
                uint32_t splits = (4u * (uint32_t)sms + groups - 1) / groups;
                const uint32_t most = (m->pixels + 31) / 32;

                splits = splits < most ? splits : most;
                splits = splits ? splits : 1;
                m->chunk = (m->pixels + splits - 1) / splits;
                m->splits = (m->pixels + m->chunk - 1) / m->chunk;
                m->n = (float)m->pixels;
                rec->grid = dim3(groups, m->splits);
                return "mean";
        }
        default:
                return NULL;
        }
        rec->grid = dim3((unsigned)((n + OT - 1) / OT));
        return rec->kind == KK_ELT ? "eltwise" : rec->kind == KK_COPY ? "copy"
                                              : rec->kind == KK_RESIZE ? "resize" : "maxpool";
}

cudaError_t kops_launch(const klaunch_rec *rec, bool pdl, cudaStream_t st)
{
        switch (rec->kind) {
        case KK_ELT:
                klaunch(pdl, op_eltwise, rec->grid, OT, st, rec->u.elt);
                break;
        case KK_COPY:
                klaunch(pdl, op_copy, rec->grid, OT, st, rec->u.elt);
                break;
        case KK_RESIZE:
                klaunch(pdl, op_resize, rec->grid, OT, st, rec->u.resize);
                break;
        case KK_POOL:
                klaunch(pdl, op_maxpool, rec->grid, OT, st, rec->u.pool);
                break;
        case KK_MEAN:
                klaunch(pdl, op_mean, rec->grid, OT, st, rec->u.mean);
                break;
        default:
                return cudaErrorInvalidValue;
        }
        return cudaGetLastError();
}
