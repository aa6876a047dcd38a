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
 */
#include <limits.h>
#include <math.h>
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
        int twl, thl, cgl, ks, ck, pws, ph, tx, tiles;
        bool vin, vw;   /* 16-byte copies of the input rows, of the weights (one pass, aligned) */
        /* The patch's copy: slots (rows x pu units a row), each thread's slot in every groups-th channel. */
        int pu, slots, groups;
        float inv_tiles, inv_tx, inv_slots, inv_pu;   /* 1/d for ctile_div (no integer division on the device) */
        /*
         * The patch in ns groups of copies (ZCP_CONV_STAGES, measuring; one pass, packed weights, C <= 64;
         * 1: one group): part[g] has bit ci for the channels of group g, the g-th of ns runs of every slice.
         */
        unsigned long long part[CTILE_STAGES_MAX];
        int ns;
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
 * compute_75 PTX): a load and a store per float. CG: from L2, not L1 (the
 * chain's inputs, written by other multiprocessors in the same launch; a
 * 4-byte copy is then a plain load).
 */
template <int BYTES, bool CG = false>
static __device__ __forceinline__ void ctile_copy(float *dst, const float *src, bool ok)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        if (CG && BYTES == 16)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                                     (unsigned)__cvta_generic_to_shared(dst)),
                             "l"(src), "r"(ok ? 16 : 0)
                             : "memory");
        else if (CG)
                dst[0] = ok ? __ldcg(src) : 0.0f;
        else
                asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(
                                     (unsigned)__cvta_generic_to_shared(dst)),
                             "l"(src), "n"(BYTES), "r"(ok ? BYTES : 0)
                             : "memory");
#else
#pragma unroll
        for (int i = 0; i < BYTES / 4; i++)
                dst[i] = ok ? (CG ? __ldcg(src + i) : __ldg(src + i)) : 0.0f;
#endif
}

static __device__ __forceinline__ void ctile_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

/* The thread's copies issued so far as one group; ctile_wait_pending(n): all but its last n groups have landed. */
static __device__ __forceinline__ void ctile_commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

static __device__ __forceinline__ void ctile_wait_pending(int n)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        static_assert(CTILE_STAGES_MAX <= 4, "one case per pending group");
        switch (n) {
        case 0:
                asm volatile("cp.async.wait_group 0;\n" ::: "memory");
                break;
        case 1:
                asm volatile("cp.async.wait_group 1;\n" ::: "memory");
                break;
        case 2:
                asm volatile("cp.async.wait_group 2;\n" ::: "memory");
                break;
        default:
                asm volatile("cp.async.wait_group 3;\n" ::: "memory");
                break;
        }
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
        r.dst = g * A.ph * A.pws + py * A.pws + c;
        return r;
}

/* MASK: only the channels ci whose bit is set in sel (a group of ZCP_CONV_STAGES). */
template <bool CG, bool MASK = false>
static __device__ __forceinline__ void ctile_copy_slot(const struct ctile_args &A, float *patch,
                                                       const struct ctile_slot &sl, int c0, int ck,
                                                       unsigned long long sel = 0)
{
        const size_t cstep = (size_t)A.H * A.W, plane = (size_t)A.ph * A.pws;
        const float *src = sl.ok ? A.in + (size_t)(c0 + sl.g) * cstep + sl.src : A.in;
        float *dst = patch + sl.dst;

        for (int ci = sl.g; ci < ck; ci += A.groups) {
                if (!MASK || (sel >> ci & 1u)) {
                        if (A.vin)
                                ctile_copy<16, CG>(dst, src, sl.ok);
                        else
                                ctile_copy<4, CG>(dst, src, sl.ok);
                }
                if (sl.ok)
                        src += A.groups * cstep;
                dst += A.groups * plane;
        }
}

template <bool CG, bool MASK = false>
static __device__ __forceinline__ void ctile_copy_patch(const struct ctile_args &A, float *patch, int c0, int ck,
                                                        int ix0, int iy0, unsigned long long sel = 0)
{
        for (int t = (int)threadIdx.x; t < A.slots * A.groups; t += CTILE_THREADS)
                ctile_copy_slot<CG, MASK>(A, patch, ctile_slot_of(A, t, ix0, iy0), c0, ck, sel);
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
 * A thread's sums over input channels cb .. ce - 1: p its pixel pair's patch columns in channel cb, wv that
 * channel's packed weights of its group; a0, a1 the pair's CTILE_OCPT channels.
 */
template <int S>
static __device__ __forceinline__ void ctile_sums(const struct ctile_args &A, const float *p, const float4 *wv, int cb,
                                                  int ce, int plane, float *a0, float *a1)
{
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

/* A layer's own launch: nothing to wait for but the kernel before (kpdl_wait, at the top). */
struct ctile_no_deps {
        __device__ void operator()() const {}
};

/*
 * One block's work: virtual block vb (blockIdx.x of the layer's own launch)
 * in shared memory sm. pdl: wait for the kernel before at the point where the
 * layer's own launch always has (after the set-up of registers); deps(): the
 * wait for the input (every thread calls it) before the first patch copy,
 * with the packed weights' copies issued before it when wfirst; CG: the
 * patch from L2 (ctile_copy). NS > 1 (A.ns: one pass, packed weights;
 * ZCP_CONV_STAGES, measuring): the patch comes in NS groups of copies, group
 * g the g-th of NS runs of every slice's input channels (the weights with
 * group 0); a thread sums its slice's run g once group g has landed
 * (everyone's: a barrier), while the later groups are still on their way.
 * The same sums in the same order: the same bits.
 */
template <int S, bool CG, int NS, typename Deps>
static __device__ __forceinline__ void ctile_block(const struct ctile_args &A, int vb, float *sm, bool pdl,
                                                   const Deps &deps, bool wfirst)
{
        const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31;
        const int TW = 1 << A.twl, tpl = A.twl + A.thl, TP = 1 << tpl, OB = CTILE_OCPT << A.cgl;
        /* Thread: a pixel pair (2m, 2m + 1) of tile row ly, channel group cg, slice ks. */
        const int q = tid & (TP / 2 - 1), cg = (tid >> (tpl - 1)) & ((1 << A.cgl) - 1), ks = tid >> (tpl - 1 + A.cgl);
        const int m = q & (TW / 2 - 1), ly = q >> (A.twl - 1);
        const int grp = ctile_div(vb, A.tiles, A.inv_tiles), tile = vb - grp * A.tiles;
        const int ob0 = grp * OB, tyi = ctile_div(tile, A.tx, A.inv_tx);
        const int ox0 = (tile - tyi * A.tx) << A.twl, oy0 = tyi << A.thl;
        const int xa = ox0 * S - 4, iy0 = oy0 * S - 1;
        const int plane = A.ph * A.pws;
        float *const patch = sm;
        float *const raw = sm + A.ck * plane;   /* the weights as stored: [ol][ci][tap] */
        float4 *const wsm = reinterpret_cast<float4 *>(raw + OB * A.ck * 9);   /* [group][ci][tap] x 4 channels */
        float a0[CTILE_OCPT], a1[CTILE_OCPT];

#pragma unroll
        for (int k = 0; k < CTILE_OCPT; k++)
                a0[k] = a1[k] = 0.0f;
        if (pdl)
                kpdl_wait();
        if constexpr (NS > 1) {
                const int C = A.C;
                if (wfirst)
                        ctile_copy_packed(A, wsm, ob0, 0, C);
                deps();
#pragma unroll
                for (int g = 0; g < NS; g++) {
                        ctile_copy_patch<CG, true>(A, patch, 0, C, xa, iy0, A.part[g]);
                        if (g == 0 && !wfirst)
                                ctile_copy_packed(A, wsm, ob0, 0, C);
                        ctile_commit();
                }
                /* ctile_args_of's runs: the slice's channels cb + n g / NS .. cb + n (g + 1) / NS - 1 are group g. */
                const int cb = C * ks / A.ks, n = C * (ks + 1) / A.ks - cb;
                const float *p = patch + cb * plane + ly * S * A.pws + (S == 2 ? 4 * m : 2 * m + 2);
                const float4 *wv = wsm + (cg * C + cb) * 9;
#pragma unroll
                for (int g = 0; g < NS; g++) {
                        const int r0 = n * g / NS, r1 = n * (g + 1) / NS;
                        ctile_wait_pending(NS - 1 - g);
                        __syncthreads();
                        ctile_sums<S>(A, p + r0 * plane, wv + r0 * 9, cb + r0, cb + r1, plane, a0, a1);
                }
        }
        for (int c0 = 0; NS == 1 && c0 < A.C; c0 += A.ck) {
                const int ck = min(A.ck, A.C - c0), nw = ck * 9;
                if (c0 > 0)
                        __syncthreads();   /* the last pass's reads are done */
                const bool early = wfirst && A.wpk && c0 == 0;
                if (early)
                        ctile_copy_packed(A, wsm, ob0, c0, ck);
                if (c0 == 0)
                        deps();
                ctile_copy_patch<CG>(A, patch, c0, ck, xa, iy0);
                if (A.wpk) {
                        if (!early)
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
                ctile_sums<S>(A, patch + cb * plane + ly * S * A.pws + (S == 2 ? 4 * m : 2 * m + 2),
                              wsm + (cg * ck + cb) * 9, cb, ce, plane, a0, a1);
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
        /*
         * Every thread finishes outputs u = tid, tid + 256, ... (channel major, pixels along the
         * tile's rows, so the stores coalesce): the slices in order, the bias, the ReLU. With
         * parts, the result goes back to slice 0's place, which only this thread reads.
         */
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

template <int S, int NS>
static __global__ void __launch_bounds__(CTILE_THREADS, 2) conv3x3_relu_tile(const struct ctile_args A)
{
        extern __shared__ __align__(16) float sm[];

        ctile_block<S, false, NS>(A, (int)blockIdx.x, sm, true, ctile_no_deps(), false);
}

/*
 * The chain (ZCP_CONV_CHAIN=1, measuring): every layer of a network in one
 * persistent launch instead of one dependent launch each. Blocks take tasks
 * (a layer's tile and channel group, ctile_block) in order from ctr[0]; a
 * layer's tasks go tile row by tile row, and a task waits only for the tile
 * rows of the layer before that its patch reads, each counted in
 * ctr[2 + row0[l] + ty] as its tasks finish. A task waits only on tasks
 * numbered before it, which running blocks hold, so the smallest unfinished
 * task can always run: no co-residency is needed. The last block out clears
 * the counters for the next launch. The same blocks' arithmetic as the
 * layers' own launches: the same bits.
 */
#define CTILE_CHAIN_MAX 8

struct ctile_chain_args {
        struct ctile_args L[CTILE_CHAIN_MAX];
        int S[CTILE_CHAIN_MAX];
        int first[CTILE_CHAIN_MAX + 1];   /* layer l's tasks: first[l] .. first[l + 1] - 1 */
        int row0[CTILE_CHAIN_MAX + 1];    /* layer l's tile rows' counters: ctr[2 + row0[l] + ty]; row0[n]: all */
        int per_row[CTILE_CHAIN_MAX];     /* layer l's tasks a tile row: tiles across x channel groups */
        int n;
        bool wfirst;   /* ZCP_CONV_CHAIN=2: a task's weights copied before it waits for its input */
        unsigned *ctr;
};

/* A counter as L2 holds it now (no ordering: the caller's fence after the last read orders what follows). */
static __device__ __forceinline__ unsigned ctile_ld_relaxed(const unsigned *p)
{
        unsigned v;

        asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
        return v;
}

/* A chain task's wait: the input rows under tile row ty, those tile rows of layer l - 1, every task of each. */
struct ctile_rows_ready {
        const struct ctile_chain_args *C;
        int l, ty;

        __device__ void operator()() const
        {
                if (l > 0 && threadIdx.x == 0) {
                        const struct ctile_args &A = C->L[l], &P = C->L[l - 1];
                        const int s = C->S[l], oy0 = ty << A.thl;
                        const int lo = max(oy0 * s - 1, 0), hi = min((oy0 + (1 << A.thl) - 1) * s + 1, A.H - 1);
                        for (int y = lo >> P.thl; y <= hi >> P.thl; y++)
                                while (ctile_ld_relaxed(C->ctr + 2 + C->row0[l - 1] + y) < (unsigned)C->per_row[l - 1])
                                        ;
                        __threadfence();   /* acquire: the rows' stores, seen by every thread after the barrier */
                }
                __syncthreads();
        }
};

template <int NS>
static __global__ void __launch_bounds__(CTILE_THREADS, 2)
conv3x3_relu_chain(const __grid_constant__ struct ctile_chain_args C)
{
        extern __shared__ __align__(16) float sm[];
        __shared__ int s_task;
        unsigned *const ctr = C.ctr;

        kpdl_wait();
        if (threadIdx.x == 0)
                s_task = (int)atomicAdd(ctr, 1u);
        __syncthreads();
        for (int t = s_task; t < C.first[C.n]; t = s_task) {
                unsigned nxt = 0;
                if (threadIdx.x == 0)
                        nxt = atomicAdd(ctr, 1u);   /* the next task, its latency behind this one's work */
                int l = 0;
                while (t >= C.first[l + 1])
                        l++;
                const struct ctile_args &A = C.L[l];
                const int i = t - C.first[l], ty = i / C.per_row[l], r = i - ty * C.per_row[l], grp = r / A.tx;
                const int vb = grp * A.tiles + ty * A.tx + (r - grp * A.tx);
                const struct ctile_rows_ready deps = { &C, l, ty };
                if (C.S[l] == 2)
                        ctile_block<2, true, NS>(A, vb, sm, false, deps, C.wfirst);
                else
                        ctile_block<1, true, NS>(A, vb, sm, false, deps, C.wfirst);
                __syncthreads();   /* the task's stores are done, and its reads of sm */
                if (threadIdx.x == 0) {
                        s_task = (int)nxt;
                        __threadfence();
                        atomicAdd(ctr + 2 + C.row0[l] + ty, 1u);
                }
                __syncthreads();
        }
        if (threadIdx.x == 0) {
                __threadfence();
                if (atomicAdd(ctr + 1, 1u) == gridDim.x - 1)
                        for (int i = 0; i < 2 + C.row0[C.n]; i++)
                                ctr[i] = 0u;
        }
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

/* This thread's device: multiprocessors, and the shared memory a block may have (without a device: an H200's). */
static void ctile_device(int *ret_sms, int *ret_smem)
{
        int dev = 0, n = 0, optin = 0;

        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0 ||
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
            optin <= 0) {
                n = 132;
                optin = 227 * 1024;
        }
        *ret_sms = n;
        *ret_smem = optin < CTILE_SMEM_MAX ? optin : CTILE_SMEM_MAX;
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
        t->stages = 1;
        t->ks = CTILE_THREADS >> (tpl - 1 + cgl);
        if (t->ks > C)
                return false;
        t->nu = ((TW - 1) * s + 6 + 3) / 4;
        t->ph = ((1 << thl) - 1) * s + 3;
        t->pws = ctile_pws(4 * t->nu, TW, s);
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

bool ctile_plan(int C, int W, int H, int O, int s, uint32_t code, struct ctile *t)
{
        if ((s != 1 && s != 2) || C <= 0 || W <= 0 || H <= 0 || O <= 0 ||
            (uint64_t)C * W * H > INT_MAX / 2 || (uint64_t)O * W * H > INT_MAX / 2)
                return false;
        int sms, smem_max;
        ctile_device(&sms, &smem_max);
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

void ctile_pack(const float *w, int C, int O, float *dst)
{
        for (int g = 0; g < (O + CTILE_OCPT - 1) / CTILE_OCPT; g++)
                for (int j = 0; j < C * 9; j++)
                        for (int k = 0; k < CTILE_OCPT; k++) {
                                const int o = g * CTILE_OCPT + k;
                                dst[((size_t)g * C * 9 + j) * CTILE_OCPT + k] = o < O ? w[(size_t)o * C * 9 + j] : 0.0f;
                        }
}

/* A layer's kernel arguments; false where wpk is not 16-byte aligned. */
static bool ctile_args_of(const struct ctile *t, const float *in, int C, int W, int H, const float *w, const float *wpk,
                          const float *b, int O, int s, float *out, float *parts, struct ctile_args *a)
{
        const int OB = CTILE_OCPT << t->cgl;
        const bool vin = W % 4 == 0 && (uintptr_t)in % 16 == 0;
        const bool vw = t->ck == C && O % 4 == 0 && (uintptr_t)w % 16 == 0 && ((size_t)OB * C * 9) % 4 == 0;
        if (wpk && (uintptr_t)wpk % 16 != 0)
                return false;
        const int pu = vin ? t->nu : 4 * t->nu, slots = t->ph * pu, tiles = t->tx * t->ty;
        *a = { in, w, b, reinterpret_cast<const float4 *>(wpk), out, parts, C, W, H, O, (W - 1) / s + 1,
               (H - 1) / s + 1, t->twl, t->thl, t->cgl, t->ks, t->ck, t->pws, t->ph, t->tx, tiles, vin, vw, pu, slots,
               slots >= CTILE_THREADS ? 1 : CTILE_THREADS / slots, 1.0f / (float)tiles, 1.0f / (float)t->tx,
               1.0f / (float)slots, 1.0f / (float)pu, { 0, 0, 0, 0 }, 1 };
        if (t->stages > 1 && wpk && ctile_stages_fit(t, C)) {
                /* Group g: the g-th of ns runs of each slice's channels (ctile_block's r0 .. r1 - 1). */
                a->ns = t->stages;
                for (int j = 0; j < t->ks; j++) {
                        const int cb = C * j / t->ks, n = C * (j + 1) / t->ks - cb;
                        for (int g = 0; g < a->ns; g++)
                                for (int c = cb + n * g / a->ns; c < cb + n * (g + 1) / a->ns; c++)
                                        a->part[g] |= 1ull << c;
                }
        }
        return true;
}

int ctile_launch(const struct ctile *t, const float *in, int C, int W, int H, const float *w, const float *wpk,
                 const float *b, int O, int s, float *out, float *parts, void *stream, bool pdl)
{
        const cudaStream_t st = (cudaStream_t)stream;
        struct ctile_args a;

        if (!ctile_args_of(t, in, C, W, H, w, wpk, b, O, s, out, parts, &a))
                return cudaErrorInvalidValue;
        if (s == 2)
                klaunch_smem(pdl, a.ns == 4 ? conv3x3_relu_tile<2, 4> : a.ns == 2 ? conv3x3_relu_tile<2, 2>
                                                                                  : conv3x3_relu_tile<2, 1>,
                             t->blocks, CTILE_THREADS, t->smem, st, a);
        else
                klaunch_smem(pdl, a.ns == 4 ? conv3x3_relu_tile<1, 4> : a.ns == 2 ? conv3x3_relu_tile<1, 2>
                                                                                  : conv3x3_relu_tile<1, 1>,
                             t->blocks, CTILE_THREADS, t->smem, st, a);
        return cudaGetLastError();
}

bool ctile_chain_fits(const struct ctile *const *t, const int *s, int n, size_t *ret_smem, int *ret_words)
{
        size_t smem = 0;
        int rows = 0;

        if (n < 1 || n > CTILE_CHAIN_MAX)
                return false;
        for (int l = 0; l < n; l++) {
                if (s[l] != 1 && s[l] != 2)
                        return false;
                smem = t[l]->smem > smem ? t[l]->smem : smem;
                rows += t[l]->ty;
        }
        *ret_smem = smem;
        *ret_words = 2 + rows;
        return true;
}

/* The chain's kernel for every layer in ns groups (4, 2; else 1). */
static const void *ctile_chain_fn(int ns)
{
        return ns == 4 ? (const void *)conv3x3_relu_chain<4>
                       : ns == 2 ? (const void *)conv3x3_relu_chain<2> : (const void *)conv3x3_relu_chain<1>;
}

int ctile_chain_grid(size_t smem, int stages, unsigned *ret_grid)
{
        int dev = 0, sms = 0, occ = 0;
        cudaError_t e;

        if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
            (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, ctile_chain_fn(stages), CTILE_THREADS, smem)) !=
                    cudaSuccess)
                return e;
        if (occ < 1 || sms < 1)
                return cudaErrorInvalidConfiguration;
        *ret_grid = (unsigned)(occ * sms);
        return cudaSuccess;
}

int ctile_chain_launch(const struct ctile_chain_layer *L, int n, unsigned grid, bool wfirst, unsigned *ctr,
                       void *stream, bool pdl)
{
        struct ctile_chain_args c;
        const struct ctile *t[CTILE_CHAIN_MAX];
        int s[CTILE_CHAIN_MAX], words, task = 0, rows = 0;
        size_t smem;

        if (n < 1 || n > CTILE_CHAIN_MAX || grid == 0)
                return cudaErrorInvalidValue;
        for (int l = 0; l < n; l++) {
                t[l] = L[l].t;
                s[l] = L[l].s;
        }
        if (!ctile_chain_fits(t, s, n, &smem, &words))
                return cudaErrorInvalidValue;
        memset(&c, 0, sizeof(c));
        for (int l = 0; l < n; l++) {
                if (!ctile_args_of(L[l].t, L[l].in, L[l].C, L[l].W, L[l].H, L[l].w, L[l].wpk, L[l].b, L[l].O, L[l].s,
                                   L[l].out, L[l].parts, &c.L[l]))
                        return cudaErrorInvalidValue;
                c.S[l] = L[l].s;
                c.first[l] = task;
                c.row0[l] = rows;
                c.per_row[l] = (int)L[l].t->blocks / L[l].t->ty;   /* blocks = tx x ty x groups */
                task += (int)L[l].t->blocks;
                rows += L[l].t->ty;
        }
        c.first[n] = task;
        c.row0[n] = rows;
        c.n = n;
        c.wfirst = wfirst;
        c.ctr = ctr;
        int ns = c.L[0].ns;   /* the groups every layer takes, else one */
        for (int l = 1; l < n; l++)
                ns = c.L[l].ns == ns ? ns : 1;
        if (ns == 4)
                klaunch_smem(pdl, conv3x3_relu_chain<4>, grid, CTILE_THREADS, smem, (cudaStream_t)stream, c);
        else if (ns == 2)
                klaunch_smem(pdl, conv3x3_relu_chain<2>, grid, CTILE_THREADS, smem, (cudaStream_t)stream, c);
        else
                klaunch_smem(pdl, conv3x3_relu_chain<1>, grid, CTILE_THREADS, smem, (cudaStream_t)stream, c);
        return cudaGetLastError();
}

int ctile_init(void)
{
        static uint64_t done;   /* a bit per device */
        int dev = 0, sms, smem_max;
        cudaError_t e;

        if ((e = cudaGetDevice(&dev)) != cudaSuccess)
                return e;
        if (dev < 64 && (__atomic_load_n(&done, __ATOMIC_RELAXED) >> dev & 1u))
                return cudaSuccess;
        ctile_device(&sms, &smem_max);
        const void *const fn[] = {
                (const void *)conv3x3_relu_tile<1, 1>, (const void *)conv3x3_relu_tile<2, 1>,
                (const void *)conv3x3_relu_tile<1, 2>, (const void *)conv3x3_relu_tile<2, 2>,
                (const void *)conv3x3_relu_tile<1, 4>, (const void *)conv3x3_relu_tile<2, 4>,
                ctile_chain_fn(1),                     ctile_chain_fn(2),
                ctile_chain_fn(4),
        };
        for (size_t i = 0; i < sizeof(fn) / sizeof(fn[0]); i++)
                if ((e = cudaFuncSetAttribute(fn[i], cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max)) !=
                    cudaSuccess)
                        return e;
        if (dev < 64)
                __atomic_fetch_or(&done, 1ull << dev, __ATOMIC_RELAXED);
        return cudaSuccess;
}
