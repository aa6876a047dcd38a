/* SPDX-License-Identifier: MIT */
/*
 * The 3x3 convolution (padding 1, stride 1 or 2) + bias + ReLU through
 * shared memory: the layered path's default for zcnet's layers.
 *
 * The warp-per-32-outputs kernels (zcnet.cu) load every tap from L1/L2 and
 * wait on those loads (RESULTS.md run 14: long-scoreboard stalls were half
 * of every layer's cycles). Here a block owns a tile of 2^twl x 2^thl output
 * pixels and 2^cgl groups of CTILE_OCPT output channels. It copies the input
 * patch under the tile (all channels, or ck at a time when they do not fit)
 * and the groups' weights into shared memory with asynchronous 16-byte
 * copies, turns the weights to [group][channel][tap][CTILE_OCPT], then each
 * thread computes two neighbouring pixels of CTILE_OCPT channels over a
 * slice of the input channels: per input channel and kernel row two vector
 * loads of the patch (float4 at stride 2, float2 at stride 1) and three
 * float4 loads of weights feed 24 multiply-adds. The block's ks slices are
 * added in slice order, then the bias, then the ReLU: a fixed order, so
 * every launch gives the same bits. The sums are fused multiply-adds in a
 * different order from reference.c's: within the 1e-5 of the split variants
 * (ktest_kernels).
 *
 * A patch row holds input columns xa .. xa + 4 nu - 1, xa = ox0 s - 4 (ox0
 * the tile's first output column), so that rows start 16-byte aligned in
 * both memories; where the input's width is not a multiple of 4 (or the
 * pointers are not aligned) the copies are single floats. The row width in
 * shared memory is chosen so that a warp's vector loads meet no bank
 * conflict.
 *
 * The tiling of a layer (ctile_plan) is the cheapest of every tile and
 * group shape by a cost model of one multiprocessor's cycles: the copies'
 * latency per pass, their bytes and instructions, the per-thread chain of
 * instructions and the blocks each multiprocessor runs. The first version
 * (a float a thread and step, two divisions each; one pixel a thread) was
 * no faster than the split kernels: its copies were half of its
 * instructions (RESULTS.md run 24). The block's tile and channel group and
 * each thread's patch slots come from ctile_div with reciprocals the host
 * worked out: the integer divisions they replaced were most of the
 * block's set-up, a fifth of every layer's stall samples (run 26b; the
 * network alone 1 us faster, run 26e-f). Letting the next layer launch early
 * (griddepcontrol.launch_dependents after the sums) made the network 6 us
 * slower (run 24i: its waiting blocks hold multiprocessor slots, as in run
 * 18a), and copying the packed weights before the dependent-launch wait
 * gained nothing measurable: neither is here.
 *
 * conv3x3_relu_tile_mma runs the channel loop on tensor cores instead
 * (CTILE_MMA; RESULTS.md run 31): the same copies, the same end of the
 * block (ctile_finish), 1080p network 1 us and zero-copy stage 3.5 us
 * faster. The network's default since run 32 (ZCP_CONV_MMA=0: the FFMA loop).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "convtile.h"
#include "kcommon.cuh"

#define CTILE_THREADS 256
#define CTILE_SMEM_MAX (200 * 1024)   /* or the device's opt-in limit, if lower (ctile_device) */

struct ctile_args {
        const float *in, *w, *b;
        const float4 *wpk;   /* the weights packed (ctile_pack), or NULL: w as stored, turned in shared memory */
        float *out, *parts;
        int C, W, H, O, OW, OH;
        int twl, thl, cgl, ks, ck, pws, ph, cs, tx, tiles;
        bool vin, vw;   /* 16-byte copies of the input rows, of the weights (one pass, aligned) */
        /* The patch's copy: slots (rows x pu units a row), each thread's slot in every groups-th channel. */
        int pu, slots, groups;
        float inv_tiles, inv_tx, inv_slots, inv_pu;   /* 1/d for ctile_div (no integer division on the device) */
};

/* n / d for 0 <= n < 2^22, d >= 1, with inv = 1/d: the float quotient is off by at most one. */
static __device__ __forceinline__ int ctile_div(int n, int d, float inv)
{
        int q = __float2int_rz(__int2float_rn(n) * inv);
        const int r = n - q * d;

        q += r >= d ? 1 : r < 0 ? -1 : 0;
        return q;
}

/*
 * BYTES (4 or 16) from global to shared memory, zeros where !ok. Compute
 * 8.0+: an asynchronous copy (cp.async, zero-filled), all of a thread's in
 * flight at once; ctile_wait() before the barrier. Below 8.0 (the package's
 * compute_75 PTX): a load and a store per float.
 */
template <int BYTES>
static __device__ __forceinline__ void ctile_copy(float *dst, const float *src, bool ok)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(
                             (unsigned)__cvta_generic_to_shared(dst)),
                     "l"(src), "n"(BYTES), "r"(ok ? BYTES : 0)
                     : "memory");
#else
#pragma unroll
        for (int i = 0; i < BYTES / 4; i++)
                dst[i] = ok ? __ldg(src + i) : 0.0f;
#endif
}

static __device__ __forceinline__ void ctile_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

/*
 * The patch of channels c0 .. c0 + ck - 1: each thread owns (row, unit)
 * slots, a unit being 4 floats (vin) or 1, and copies that slot of every
 * groups-th channel; whether a slot lies inside the input does not depend
 * on the channel. A slot t: its first channel g, input offset (channel 0,
 * 0 when outside: zeros), patch offset.
 */
struct ctile_slot {
        int g, src, dst, ok;
};

static __device__ __forceinline__ struct ctile_slot ctile_slot_of(const struct ctile_args &A, int t, int ix0, int iy0)
{
        const int U = A.vin ? 4 : 1;
        const int g = ctile_div(t, A.slots, A.inv_slots), slot = t - g * A.slots;
        const int py = ctile_div(slot, A.pu, A.inv_pu), c = (slot - py * A.pu) * U;
        const int iy = iy0 + py, ix = ix0 + c;
        struct ctile_slot r;

        r.g = g;
        r.ok = iy >= 0 && iy < A.H && ix >= 0 && ix + U <= A.W;
        r.src = r.ok ? iy * A.W + ix : 0;
        r.dst = g * A.cs + py * A.pws + c;
        return r;
}

static __device__ __forceinline__ void ctile_copy_slot(const struct ctile_args &A, float *patch,
                                                       const struct ctile_slot &sl, int c0, int ck)
{
        const size_t cstep = (size_t)A.H * A.W, plane = (size_t)A.cs;
        const float *src = sl.ok ? A.in + (size_t)(c0 + sl.g) * cstep + sl.src : A.in;
        float *dst = patch + sl.dst;

        for (int ci = sl.g; ci < ck; ci += A.groups) {
                if (A.vin)
                        ctile_copy<16>(dst, src, sl.ok);
                else
                        ctile_copy<4>(dst, src, sl.ok);
                if (sl.ok)
                        src += A.groups * cstep;
                dst += A.groups * plane;
        }
}

static __device__ __forceinline__ void ctile_copy_patch(const struct ctile_args &A, float *patch, int c0, int ck,
                                                        int ix0, int iy0)
{
        for (int t = (int)threadIdx.x; t < A.slots * A.groups; t += CTILE_THREADS)
                ctile_copy_slot(A, patch, ctile_slot_of(A, t, ix0, iy0), c0, ck);
}

/* The packed weights of channels c0 .. c0 + ck - 1 into wsm ([group][ci][tap] x 4); groups past the last are zeros. */
static __device__ __forceinline__ void ctile_copy_packed(const struct ctile_args &A, float4 *wsm, int ob0, int c0,
                                                         int ck)
{
        const int tid = (int)threadIdx.x, nw = ck * 9, G = 1 << A.cgl;
        const int ng = (A.O + CTILE_OCPT - 1) / CTILE_OCPT - ob0 / CTILE_OCPT;
        const float4 *src = A.wpk + (size_t)(ob0 / CTILE_OCPT) * A.C * 9 + c0 * 9;

        if (ck == A.C) {
                for (int e = tid; e < G * nw; e += CTILE_THREADS)
                        ctile_copy<16>(reinterpret_cast<float *>(wsm + e), reinterpret_cast<const float *>(src + e),
                                       e < ng * nw);
        } else {
                const float inv = 1.0f / (float)nw;
                for (int e = tid; e < G * nw; e += CTILE_THREADS) {
                        const int g = ctile_div(e, nw, inv), j = e - g * nw;
                        ctile_copy<16>(reinterpret_cast<float *>(wsm + e),
                                       reinterpret_cast<const float *>(src + (g < ng ? g : 0) * A.C * 9 + j), g < ng);
                }
        }
}

/*
 * The block's end, red ([ks][OB][TP] in shared memory) complete: every thread
 * finishes outputs u = tid, tid + 256, ... (channel major, pixels along the
 * tile's rows, so the stores coalesce): the slices in order, the bias, the
 * ReLU. With parts, the result goes back to slice 0's place, which only this
 * thread reads, then the tile's sum of each channel.
 */
static __device__ __forceinline__ void ctile_finish(const struct ctile_args &A, float *red, int ob0, int ox0, int oy0,
                                                    int tile, int tpl, int OB)
{
        const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31, TP = 1 << tpl, TW = 1 << A.twl;

        for (int u = tid; u < OB * TP; u += CTILE_THREADS) {
                const int ol = u >> tpl, px = u & (TP - 1), o = ob0 + ol;
                const int ox = ox0 + (px & (TW - 1)), oy = oy0 + (px >> A.twl);
                float t = red[u];
                for (int i = 1; i < A.ks; i++)
                        t = __fadd_rn(t, red[i * OB * TP + u]);
                float r = 0.0f;
                if (o < A.O) {
                        r = __fadd_rn(__ldg(A.b + o), t);
                        r = r > 0.0f ? r : 0.0f;
                        if (ox < A.OW && oy < A.OH)
                                A.out[((size_t)o * A.OH + oy) * A.OW + ox] = r;
                        else
                                r = 0.0f;
                }
                if (A.parts)
                        red[u] = r;
        }
        if (!A.parts)
                return;
        __syncthreads();
        /* The tile's sum of each channel, in a fixed order (lanes, then the warp's tree). */
        for (int ol = warp; ol < OB; ol += CTILE_THREADS / 32) {
                const int o = ob0 + ol;
                float s = 0.0f;
                for (int i = lane; i < TP; i += 32)
                        s = __fadd_rn(s, red[ol * TP + i]);
                s = warp_sum(s);
                if (lane == 0 && o < A.O)
                        A.parts[(size_t)o * A.tiles + tile] = s;
        }
}

template <int S>
static __global__ void __launch_bounds__(CTILE_THREADS, 2) conv3x3_relu_tile(const struct ctile_args A)
{
        extern __shared__ __align__(16) float sm[];
        const int tid = (int)threadIdx.x;
        const int TW = 1 << A.twl, tpl = A.twl + A.thl, TP = 1 << tpl, OB = CTILE_OCPT << A.cgl;
        /* Thread: a pixel pair (2m, 2m + 1) of tile row ly, channel group cg, slice ks. */
        const int q = tid & (TP / 2 - 1), cg = (tid >> (tpl - 1)) & ((1 << A.cgl) - 1), ks = tid >> (tpl - 1 + A.cgl);
        const int m = q & (TW / 2 - 1), ly = q >> (A.twl - 1);
        const int grp = ctile_div((int)blockIdx.x, A.tiles, A.inv_tiles), tile = (int)blockIdx.x - grp * A.tiles;
        const int ob0 = grp * OB, tyi = ctile_div(tile, A.tx, A.inv_tx);
        const int ox0 = (tile - tyi * A.tx) << A.twl, oy0 = tyi << A.thl;
        const int xa = ox0 * S - 4, iy0 = oy0 * S - 1;
        const int plane = A.cs;
        float *const patch = sm;
        float *const raw = sm + A.ck * plane;   /* the weights as stored: [ol][ci][tap] */
        float4 *const wsm = reinterpret_cast<float4 *>(raw + OB * A.ck * 9);   /* [group][ci][tap] x 4 channels */
        float a0[CTILE_OCPT], a1[CTILE_OCPT];

#pragma unroll
        for (int k = 0; k < CTILE_OCPT; k++)
                a0[k] = a1[k] = 0.0f;
        kpdl_wait();
        for (int c0 = 0; c0 < A.C; c0 += A.ck) {
                const int ck = min(A.ck, A.C - c0), nw = ck * 9;
                if (c0 > 0)
                        __syncthreads();   /* the last pass's reads are done */
                ctile_copy_patch(A, patch, c0, ck, xa, iy0);
                if (A.wpk) {
                        ctile_copy_packed(A, wsm, ob0, c0, ck);
                        ctile_wait();
                } else {
                        if (A.vw) {
                                /* One pass: the groups' weights are one run of memory; channels past O are zeros. */
                                const float *src = A.w + (size_t)ob0 * A.C * 9;
                                const int n = OB * nw, have = (A.O - ob0) * nw;
                                for (int e = tid * 4; e < n; e += CTILE_THREADS * 4)
                                        ctile_copy<16>(raw + e, src + e, e < have);
                        } else {
                                const float inv = 1.0f / (float)nw;
                                for (int e = tid; e < OB * nw; e += CTILE_THREADS) {
                                        const int ol = ctile_div(e, nw, inv), i = e - ol * nw, o = ob0 + ol;
                                        ctile_copy<4>(raw + e, A.w + ((size_t)(o < A.O ? o : 0) * A.C + c0) * 9 + i,
                                                      o < A.O);
                                }
                        }
                        ctile_wait();
                        __syncthreads();
                        const float inv = 1.0f / (float)nw;
                        for (int e = tid; e < (OB / CTILE_OCPT) * nw; e += CTILE_THREADS) {
                                const int g = ctile_div(e, nw, inv), j = e - g * nw;
                                const float *r = raw + g * CTILE_OCPT * nw + j;
                                wsm[e] = make_float4(r[0], r[nw], r[2 * nw], r[3 * nw]);
                        }
                }
                __syncthreads();
                const int cb = ck * ks / A.ks, ce = ck * (ks + 1) / A.ks;
                const float *p = patch + cb * plane + ly * S * A.pws + (S == 2 ? 4 * m : 2 * m + 2);
                const float4 *wv = wsm + (cg * ck + cb) * 9;
                for (int ci = cb; ci < ce; ci++, p += plane, wv += 9) {
#pragma unroll
                        for (int ky = 0; ky < 3; ky++) {
                                /* Columns under the pair: v[0..2] for 2m; for 2m + 1 v[2..4] (s 2), v[1..3] (s 1). */
                                float v[5];
                                if (S == 2) {
                                        const float4 x0 = *reinterpret_cast<const float4 *>(p + ky * A.pws);
                                        const float4 x1 = *reinterpret_cast<const float4 *>(p + ky * A.pws + 4);
                                        v[0] = x0.w, v[1] = x1.x, v[2] = x1.y, v[3] = x1.z, v[4] = x1.w;
                                } else {
                                        const float2 x0 = *reinterpret_cast<const float2 *>(p + ky * A.pws);
                                        const float2 x1 = *reinterpret_cast<const float2 *>(p + ky * A.pws + 2);
                                        const float2 x2 = *reinterpret_cast<const float2 *>(p + ky * A.pws + 4);
                                        v[0] = x0.y, v[1] = x1.x, v[2] = x1.y, v[3] = x2.x, v[4] = 0.0f;
                                }
#pragma unroll
                                for (int kx = 0; kx < 3; kx++) {
                                        const float4 w = wv[ky * 3 + kx];
                                        const float u0 = v[kx], u1 = v[kx + S];
                                        a0[0] = __fmaf_rn(w.x, u0, a0[0]);
                                        a0[1] = __fmaf_rn(w.y, u0, a0[1]);
                                        a0[2] = __fmaf_rn(w.z, u0, a0[2]);
                                        a0[3] = __fmaf_rn(w.w, u0, a0[3]);
                                        a1[0] = __fmaf_rn(w.x, u1, a1[0]);
                                        a1[1] = __fmaf_rn(w.y, u1, a1[1]);
                                        a1[2] = __fmaf_rn(w.z, u1, a1[2]);
                                        a1[3] = __fmaf_rn(w.w, u1, a1[3]);
                                }
                        }
                }
        }
        __syncthreads();   /* every read of the patch is done: sm holds the slices' sums now, [ks][OB][TP] */
        float *const red = sm;
        {
                const int px = ly * TW + 2 * m;
#pragma unroll
                for (int k = 0; k < CTILE_OCPT; k++)
                        *reinterpret_cast<float2 *>(red + (ks * OB + cg * CTILE_OCPT + k) * TP + px) =
                                make_float2(a0[k], a1[k]);
        }
        __syncthreads();
        ctile_finish(A, red, ob0, ox0, oy0, tile, tpl, OB);
}

/*
 * The channel loop on tensor cores (CTILE_MMA; RESULTS.md run 31), compute
 * 8.0+. A tile is 16 pixels wide (twl 4) and 2^thl rows; warp w takes tile
 * row w % 2^thl, the mma's 16 rows (m), and slice w / 2^thl of the input
 * channels (ks = 8 / 2^thl slices), for the block's NT x 8 channels (n).
 * A step is 8 input channels at one tap: the im2col fragment a (row gid,
 * column tig and tig + 4: channels 8 g + tig, + 4) straight from the patch,
 * its weights' fragment b one float4 a lane (ctile_pack's order: the TF32
 * high parts, then the remainders). Each product is three TF32 mma
 * (3xTF32): xh wh, xh wl and xl wh into three accumulators, added
 * ((hh) + (hl + lh)) at the end; the sums differ from the FFMA loop's by
 * float reassociation and the dropped xl wl (2^-22 of a term). Then the
 * slices' sums into red as the FFMA loop leaves them, and ctile_finish.
 * The patch's channel stride cs puts a warp's fragment loads on distinct
 * banks (stride 1) or two lanes a bank (stride 2).
 */
static __device__ __forceinline__ uint32_t ctile_tf32(float x)
{
        uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
#else
        (void)x;
#endif
        return r;
}

static __device__ __forceinline__ void ctile_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
        (void)d, (void)a, (void)b0, (void)b1;
#endif
}

static_assert(CTILE_THREADS == 256, "the tensor-core loop's 8 warps: 2^thl tile rows x 8 / 2^thl slices");

template <int S, int NT>
static __global__ void __launch_bounds__(CTILE_THREADS, 2) conv3x3_relu_tile_mma(const struct ctile_args A)
{
        extern __shared__ __align__(16) float sm[];
        constexpr int OB = 8 * NT;
        const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
        const int tpl = 4 + A.thl, G = A.C / 8;
        const int grp = ctile_div((int)blockIdx.x, A.tiles, A.inv_tiles), tile = (int)blockIdx.x - grp * A.tiles;
        const int ob0 = grp * OB, tyi = ctile_div(tile, A.tx, A.inv_tx);
        const int ox0 = (tile - tyi * A.tx) << 4, oy0 = tyi << A.thl;
        const int mt = warp & ((1 << A.thl) - 1), sl = warp >> A.thl;
        float *const patch = sm;
        float4 *const bsm = reinterpret_cast<float4 *>(sm + A.C * A.cs);   /* [n][g][tap][lane] */
        float acc[NT][3][4];

#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
                for (int j = 0; j < 3; j++)
#pragma unroll
                        for (int e = 0; e < 4; e++)
                                acc[n][j][e] = 0.0f;
        kpdl_wait();
        ctile_copy_patch(A, patch, 0, A.C, ox0 * S - 4, oy0 * S - 1);
        {
                const int step = G * 9 * 32, have = min(NT, (A.O + 7) / 8 - ob0 / 8) * step;
                const float4 *src = A.wpk + (size_t)(ob0 / 8) * step;
                for (int e = tid; e < NT * step; e += CTILE_THREADS)
                        ctile_copy<16>(reinterpret_cast<float *>(bsm + e),
                                       reinterpret_cast<const float *>(src + (e < have ? e : 0)), e < have);
        }
        ctile_wait();
        __syncthreads();
        const int g0 = G * sl / A.ks, g1 = G * (sl + 1) / A.ks;
        const float *p = patch + (g0 * 8 + tig) * A.cs + mt * S * A.pws + gid * S + 3;
        for (int g = g0; g < g1; g++, p += 8 * A.cs) {
#pragma unroll
                for (int tap = 0; tap < 9; tap++) {
                        const int off = tap / 3 * A.pws + tap % 3;
                        const float x[4] = { p[off], p[off + 8 * S], p[off + 4 * A.cs], p[off + 4 * A.cs + 8 * S] };
                        uint32_t ah[4], al[4];
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                                ah[e] = ctile_tf32(x[e]);
                                al[e] = ctile_tf32(__fsub_rn(x[e], __uint_as_float(ah[e])));
                        }
#pragma unroll
                        for (int n = 0; n < NT; n++) {
                                const float4 b = bsm[((n * G + g) * 9 + tap) * 32 + lane];
                                ctile_mma(acc[n][0], ah, __float_as_uint(b.x), __float_as_uint(b.y));
                                ctile_mma(acc[n][1], ah, __float_as_uint(b.z), __float_as_uint(b.w));
                                ctile_mma(acc[n][2], al, __float_as_uint(b.x), __float_as_uint(b.y));
                        }
                }
        }
        __syncthreads();   /* every read of the patch is done: sm holds the slices' sums now, [ks][OB][TP] */
        float *const red = sm;
        const int TP = 1 << tpl, px = mt * 16 + gid;
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                        const int o = n * 8 + 2 * tig + (e & 1);
                        red[(sl * OB + o) * TP + px + (e >> 1) * 8] =
                                __fadd_rn(acc[n][0][e], __fadd_rn(acc[n][1][e], acc[n][2][e]));
                }
        __syncthreads();
        ctile_finish(A, red, ob0, ox0, oy0, tile, tpl, OB);
}

/*
 * The stored row width (a multiple of 4, at least w): the first one at
 * which one warp's vector loads of the patch (the second float4 at stride
 * 2, the second float2 at stride 1; lanes along a tile row, 32 / (tw / 2)
 * rows a warp, s patch rows apart) fall on distinct banks within each
 * 128-byte phase.
 */
static int ctile_pws(int w, int tw, int s)
{
        const int per_row = tw / 2, vw = s == 2 ? 4 : 2, phase = 32 / vw;

        for (int p = w; p < w + 64; p += 4) {
                bool ok = true;
                for (int l0 = 0; l0 < 32 && ok; l0 += phase) {
                        uint64_t used = 0;
                        for (int l = l0; l < l0 + phase && ok; l++) {
                                const int m = l % per_row, r = l / per_row;
                                const int word = r * s * p + (s == 2 ? 4 * m + 4 : 2 * m + 4);
                                for (int i = 0; i < vw; i++) {
                                        const int bank = (word + i) % 32;
                                        ok = ok && !(used >> bank & 1u);
                                        used |= 1ull << bank;
                                }
                        }
                }
                if (ok)
                        return p;
        }
        return w;
}

/*
 * This thread's device: multiprocessors, the shared memory a block may have
 * and whether it runs the tensor-core loop: compute 8.0+ running code built
 * from compute 8.0+ PTX (the compute_75 PTX JIT-compiled, CUDA_FORCE_PTX_JIT
 * or a build without newer code, has no mma: its loop is empty). Without a
 * device: an H200's.
 */
static void ctile_device(int *ret_sms, int *ret_smem, bool *ret_mma)
{
        int dev = 0, n = 0, optin = 0, major = 0;
        cudaFuncAttributes fa;

        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0 ||
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
            optin <= 0 || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
                *ret_sms = 132;
                *ret_smem = 227 * 1024 < CTILE_SMEM_MAX ? 227 * 1024 : CTILE_SMEM_MAX;
                *ret_mma = true;
                return;
        }
        *ret_sms = n;
        *ret_smem = optin < CTILE_SMEM_MAX ? optin : CTILE_SMEM_MAX;
        *ret_mma = false;
        if (major >= 8) {
                if (cudaFuncGetAttributes(&fa, conv3x3_relu_tile_mma<2, 1>) == cudaSuccess)
                        *ret_mma = fa.ptxVersion >= 80;
                else
                        (void)cudaGetLastError();   /* not a sticky error: clear it */
        }
}

/* One shape: twl, thl, cgl; false where it does not fit a block. cost: the model (see the file's comment). */
static bool ctile_shape(int C, int W, int H, int O, int s, int twl, int thl, int cgl, int sms, int smem_max,
                        struct ctile *t)
{
        const int tpl = twl + thl, OB = CTILE_OCPT << cgl, TW = 1 << twl;
        const int OW = (W - 1) / s + 1, OH = (H - 1) / s + 1;

        if (twl < 3 || twl > 6 || thl < 0 || thl > 5 || cgl < 0 || cgl > 6 || tpl - 1 < 5 || tpl - 1 + cgl > 8)
                return false;
        t->twl = twl;
        t->thl = thl;
        t->cgl = cgl;
        t->ks = CTILE_THREADS >> (tpl - 1 + cgl);
        if (t->ks > C)
                return false;
        t->nu = ((TW - 1) * s + 6 + 3) / 4;
        t->ph = ((1 << thl) - 1) * s + 3;
        t->pws = ctile_pws(4 * t->nu, TW, s);
        t->cs = t->ph * t->pws;
        t->mma = false;
        const int per_ch = t->ph * t->pws + 2 * OB * 9;
        t->ck = (smem_max / 4) / per_ch;
        if (t->ck > C)
                t->ck = C;
        if (t->ck < 1)
                return false;
        const size_t fl = (size_t)t->ck * per_ch;
        const size_t red = (size_t)t->ks * OB << tpl;
        t->smem = (fl > red ? fl : red) * sizeof(float);
        t->tx = (OW + TW - 1) >> twl;
        t->ty = (OH + (1 << thl) - 1) >> thl;
        const uint64_t blocks = (uint64_t)t->tx * t->ty * ((O + OB - 1) / OB);
        if (blocks >= 1u << 22)   /* ctile_div's range (blockIdx.x); 4 M blocks of 256 threads */
                return false;
        t->blocks = (unsigned)blocks;
        /*
         * Cycles of the busiest multiprocessor: waves x (per pass a copy latency, the bytes at
         * 16 floats a cycle, the copies' and the compute's instructions: 8 warps over 4
         * schedulers, at least one warp's chain at 2 cycles an instruction; the slices' sum).
         * Per input channel a thread issues about 3 x (2 + 3 + 24) + 4 instructions.
         */
        int resident = (int)((228 * 1024) / (t->smem + 1024));   /* an H100/H200's 228 KB */
        resident = resident < 1 ? 1 : resident > 2 ? 2 : resident;   /* about 90 registers a thread: two blocks */
        const double per_sm = ceil((double)blocks / sms);
        const double conc = per_sm < resident ? per_sm : resident, waves = ceil(per_sm / resident);
        const double passes = ceil((double)C / t->ck);
        const double patch = (double)C * t->ph * t->nu * 4, wts = (double)OB * C * 9;
        const double copy_instr = (patch / 4 * 5 + wts / 4 * 4 + wts / 4 * 16) / CTILE_THREADS;
        const double chain = ceil((double)C / t->ks) * 91 + copy_instr;
        const double issue = fmax(conc * 8 * chain / 4, 2 * chain);
        t->cost = waves * (passes * 1000 + conc * (patch + wts) / 16 + issue + (t->ks > 1 ? 300 : 0));
        return true;
}

/*
 * One shape of the tensor-core loop: a tile of 16 x 2^thl pixels, NT x 8
 * channels (cgl = log2(2 NT)), all C channels in one pass; false where it
 * does not fit. cost: the same model's terms with the loop's shared-memory
 * wavefronts a multiprocessor (each step: four fragment loads, two lanes a
 * bank at stride 2, and a 16-byte load a lane per 8 channels) as its issue.
 */
static bool ctile_shape_mma(int C, int W, int H, int O, int s, int thl, int nt, int sms, int smem_max,
                            struct ctile *t)
{
        const int TH = 1 << thl, TP = 16 << thl, OB = 8 * nt, OW = (W - 1) / s + 1, OH = (H - 1) / s + 1;

        if (C % 8 != 0 || thl < 0 || thl > 3 || (nt != 1 && nt != 2 && nt != 4))
                return false;
        t->twl = 4;
        t->thl = thl;
        t->cgl = nt == 1 ? 1 : nt == 2 ? 2 : 3;
        t->ks = 8 >> thl;
        t->nu = (15 * s + 6 + 3) / 4;
        t->ph = (TH - 1) * s + 3;
        t->pws = ctile_pws(4 * t->nu, 16, s);
        t->cs = t->ph * t->pws;
        while (t->cs % 32 != (s == 2 ? 16 : 8))
                t->cs += 4;
        t->ck = C;
        t->mma = true;
        const size_t fl = (size_t)C * t->cs + (size_t)OB * C * 9 * 2, red = (size_t)t->ks * OB * TP;
        t->smem = (fl > red ? fl : red) * sizeof(float);
        if (t->smem > (size_t)smem_max)
                return false;
        t->tx = (OW + 15) >> 4;
        t->ty = (OH + TH - 1) >> thl;
        const uint64_t blocks = (uint64_t)t->tx * t->ty * ((O + OB - 1) / OB);
        if (blocks >= 1u << 22)
                return false;
        t->blocks = (unsigned)blocks;
        int resident = (int)((228 * 1024) / (t->smem + 1024));
        resident = resident < 1 ? 1 : resident > 2 ? 2 : resident;
        const double per_sm = ceil((double)blocks / sms);
        const double conc = per_sm < resident ? per_sm : resident, waves = ceil(per_sm / resident);
        const double patch = (double)C * t->ph * t->nu * 4, wts = (double)OB * C * 9 * 2;
        const double steps = ceil((double)(C / 8) / t->ks) * 9;
        const double wavefronts = conc * 8 * steps * ((s == 2 ? 8 : 4) + 4 * nt);
        t->cost = waves * (1000 + conc * (patch + wts) / 16 + wavefronts + (t->ks > 1 ? 300 : 0));
        return true;
}

bool ctile_mma_on(void)
{
        const char *env = getenv("ZCP_CONV_MMA");

        return !env || strcmp(env, "0") != 0;
}

bool ctile_plan(int C, int W, int H, int O, int s, uint32_t code, struct ctile *t)
{
        if ((s != 1 && s != 2) || C <= 0 || W <= 0 || H <= 0 || O <= 0 ||
            (uint64_t)C * W * H > INT_MAX / 2 || (uint64_t)O * W * H > INT_MAX / 2)
                return false;
        int sms, smem_max;
        bool mma;
        ctile_device(&sms, &smem_max, &mma);
        if (code & CTILE_MMA) {
                if (!mma)
                        return false;
                if (code & 0x8000u)
                        return (code & 15) == 4 && (code >> 8 & 15) >= 1 &&
                               ctile_shape_mma(C, W, H, O, s, code >> 4 & 15, 1 << ((code >> 8 & 15) - 1), sms,
                                               smem_max, t);
                bool found = false;
                struct ctile c;
                for (int thl = 0; thl <= 3; thl++)
                        for (int nt = 1; nt <= 4; nt *= 2)
                                if (ctile_shape_mma(C, W, H, O, s, thl, nt, sms, smem_max, &c) &&
                                    (!found || c.cost < t->cost)) {
                                        *t = c;
                                        found = true;
                                }
                return found;
        }
        if (code)
                return (code & 0x8000u) &&
                       ctile_shape(C, W, H, O, s, code & 15, code >> 4 & 15, code >> 8 & 15, sms, smem_max, t);
        bool found = false;
        struct ctile c;
        for (int twl = 3; twl <= 6; twl++)
                for (int thl = 0; thl <= 5; thl++)
                        for (int cgl = 0; cgl <= 6; cgl++)
                                if (ctile_shape(C, W, H, O, s, twl, thl, cgl, sms, smem_max, &c) &&
                                    (!found || c.cost < t->cost)) {
                                        *t = c;
                                        found = true;
                                }
        return found;
}

/* Round to TF32 (10 mantissa bits), to nearest, ties away from zero: the device's cvt.rna.tf32.f32. */
static float ctile_tf32_host(float x)
{
        uint32_t u;

        memcpy(&u, &x, sizeof(u));
        if ((u & 0x7f800000u) != 0x7f800000u)
                u = (u + 0x1000u) & 0xffffe000u;
        memcpy(&x, &u, sizeof(u));
        return x;
}

void ctile_pack(const struct ctile *t, const float *w, int C, int O, float *dst)
{
        if (t->mma) {
                const int G = C / 8;
                for (int n = 0; n < (O + 7) / 8; n++)
                        for (int g = 0; g < G; g++)
                                for (int tap = 0; tap < 9; tap++)
                                        for (int lane = 0; lane < 32; lane++) {
                                                const int o = n * 8 + (lane >> 2), c = g * 8 + (lane & 3);
                                                const float w0 = o < O ? w[((size_t)o * C + c) * 9 + tap] : 0.0f;
                                                const float w1 = o < O ? w[((size_t)o * C + c + 4) * 9 + tap] : 0.0f;
                                                float *const q =
                                                        dst + ((((size_t)n * G + g) * 9 + tap) * 32 + lane) * 4;
                                                q[0] = ctile_tf32_host(w0);
                                                q[1] = ctile_tf32_host(w1);
                                                q[2] = ctile_tf32_host(w0 - q[0]);
                                                q[3] = ctile_tf32_host(w1 - q[1]);
                                        }
                return;
        }
        for (int g = 0; g < (O + CTILE_OCPT - 1) / CTILE_OCPT; g++)
                for (int j = 0; j < C * 9; j++)
                        for (int k = 0; k < CTILE_OCPT; k++) {
                                const int o = g * CTILE_OCPT + k;
                                dst[((size_t)g * C * 9 + j) * CTILE_OCPT + k] = o < O ? w[(size_t)o * C * 9 + j] : 0.0f;
                        }
}

int ctile_launch(const struct ctile *t, const float *in, int C, int W, int H, const float *w, const float *wpk,
                 const float *b, int O, int s, float *out, float *parts, void *stream, bool pdl)
{
        const cudaStream_t st = (cudaStream_t)stream;
        const int OB = CTILE_OCPT << t->cgl;
        const bool vin = W % 4 == 0 && (uintptr_t)in % 16 == 0;
        const bool vw = t->ck == C && O % 4 == 0 && (uintptr_t)w % 16 == 0 && ((size_t)OB * C * 9) % 4 == 0;
        if ((wpk && (uintptr_t)wpk % 16 != 0) || (t->mma && !wpk))
                return cudaErrorInvalidValue;
        const int pu = vin ? t->nu : 4 * t->nu, slots = t->ph * pu, tiles = t->tx * t->ty;
        const struct ctile_args a = { in, w, b, reinterpret_cast<const float4 *>(wpk), out, parts, C, W, H, O,
                                      (W - 1) / s + 1, (H - 1) / s + 1, t->twl, t->thl, t->cgl, t->ks, t->ck,
                                      t->pws, t->ph, t->cs, t->tx, tiles, vin, vw, pu, slots,
                                      slots >= CTILE_THREADS ? 1 : CTILE_THREADS / slots, 1.0f / (float)tiles,
                                      1.0f / (float)t->tx, 1.0f / (float)slots, 1.0f / (float)pu };

        if (t->mma) {
                const int nt = 1 << (t->cgl - 1);
                if (s == 2)
                        klaunch_smem(pdl, nt == 1 ? conv3x3_relu_tile_mma<2, 1> : nt == 2 ? conv3x3_relu_tile_mma<2, 2>
                                                                                          : conv3x3_relu_tile_mma<2, 4>,
                                     t->blocks, CTILE_THREADS, t->smem, st, a);
                else
                        klaunch_smem(pdl, nt == 1 ? conv3x3_relu_tile_mma<1, 1> : nt == 2 ? conv3x3_relu_tile_mma<1, 2>
                                                                                          : conv3x3_relu_tile_mma<1, 4>,
                                     t->blocks, CTILE_THREADS, t->smem, st, a);
        } else if (s == 2) {
                klaunch_smem(pdl, conv3x3_relu_tile<2>, t->blocks, CTILE_THREADS, t->smem, st, a);
        } else {
                klaunch_smem(pdl, conv3x3_relu_tile<1>, t->blocks, CTILE_THREADS, t->smem, st, a);
        }
        return cudaGetLastError();
}

int ctile_init(void)
{
        static uint64_t done;   /* a bit per device */
        int dev = 0, sms, smem_max;
        bool mma;
        cudaError_t e;

        if ((e = cudaGetDevice(&dev)) != cudaSuccess)
                return e;
        if (dev < 64 && (__atomic_load_n(&done, __ATOMIC_RELAXED) >> dev & 1u))
                return cudaSuccess;
        ctile_device(&sms, &smem_max, &mma);
        void (*const kernels[])(const struct ctile_args) = {
                conv3x3_relu_tile<1>,        conv3x3_relu_tile<2>,        conv3x3_relu_tile_mma<1, 1>,
                conv3x3_relu_tile_mma<1, 2>, conv3x3_relu_tile_mma<1, 4>, conv3x3_relu_tile_mma<2, 1>,
                conv3x3_relu_tile_mma<2, 2>, conv3x3_relu_tile_mma<2, 4>,
        };
        for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++)
                if ((e = cudaFuncSetAttribute(kernels[i], cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max)) !=
                    cudaSuccess)
                        return e;
        if (dev < 64)
                __atomic_fetch_or(&done, 1ull << dev, __ATOMIC_RELAXED);
        return cudaSuccess;
}
