/* SPDX-License-Identifier: MIT */
/*
 * zcnet on the GPU (DESIGN.md §4): 3x3 convolutions + bias + ReLU, global
 * average pool, fully connected + softmax + top-k, and the per-stream
 * network object that holds the weights and activations in device memory.
 *
 * Convolution: a warp computes 32 consecutive outputs (lanes along the row,
 * so input loads coalesce and weight loads are uniform) of OCPT channels
 * each; S warps share those outputs, warp j summing a contiguous run of the
 * input channels, and the S partials are added in a fixed order through
 * shared memory (deterministic). S = 1 is the exact variant: every output
 * accumulates exactly as reference.c does (bias first, then taps in (ci, ky, kx)
 * order, no contraction), bit-identical to the reference. Small, deep layers
 * (too few outputs to fill the GPU) and the first layer (RGB in: too little
 * work per output) use S > 1, launched as conv3x3_relu_tasks
 * (the fused path's per-output task: explicit FMAs, see below). Pool, fc and softmax reduce in
 * trees; expf is CUDA's (<= 2 ulp). reference.c allows these reorderings: the
 * scores agree within the 1e-4 relative tolerance, not bit for bit.
 *
 * fc + softmax + top-k is one launch: each block computes the logits of a
 * few classes (a warp per class); the last block to finish (an atomic
 * counter) does the softmax, the top-k and the publish, with the values in
 * registers (softmax_topk_regs). On the layered path the last layer's
 * epilogue leaves the pool's partial sums and the head finishes the pool
 * (conv3x3_relu_tasks_parts): no separate pool launch. With a meeting word
 * (zcp_k_net_head_meet) the head writes only the top-k words of the mapped
 * block and the later of it and motion sets `valid` (kcommon.cuh).
 */
#include <cuda_runtime.h>
#include <float.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <cooperative_groups.h>

#include "convtile.h"
#include "kcommon.cuh"

#define CONV_THREADS 256
#define POOL_THREADS 256
#define FC_THREADS   256

/*
 * The split (S > 1) convolutions' epilogue, shared by both network paths:
 * warp j of group g left its OCPT partial sums in part; warp 0 of the group
 * adds the S partials in order, then the bias, and stores the ReLU. The
 * fixed order is what makes every grid and both paths agree bit for bit.
 */
template <int S, int OCPT>
static __device__ __forceinline__ void conv_split_store(const float *part, int g, int lane, int o0, int O,
                                                        const float *__restrict__ b, float *__restrict__ out,
                                                        int P, int pix)
{
#pragma unroll
        for (int k = 0; k < OCPT; k++) {
                if (o0 + k >= O)
                        continue;
                float t = part[((g * S) * OCPT + k) * 32 + lane];
#pragma unroll
                for (int i = 1; i < S; i++)
                        t = __fadd_rn(t, part[((g * S + i) * OCPT + k) * 32 + lane]);
                t = __fadd_rn(__ldg(b + o0 + k), t);
                out[(size_t)(o0 + k) * P + pix] = t > 0.0f ? t : 0.0f;
        }
}

/*
 * Block: CONV_THREADS / 32 warps = G groups of S warps. Group g owns 32
 * output units (unit = OCPT channels of one output pixel; units ordered
 * channel group major, pixel minor); warp j of the group sums input
 * channels [j*C/S, (j+1)*C/S).
 */
template <int S, int OCPT>
static __global__ void __launch_bounds__(CONV_THREADS)
conv3x3_relu(const float *__restrict__ in, int C, int W, int H, const float *__restrict__ w,
             const float *__restrict__ b, int O, int s, float *__restrict__ out, int OW, int OH)
{
        constexpr int G = (CONV_THREADS / 32) / S;
        __shared__ float part[S > 1 ? G * S * OCPT * 32 : 1];
        const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
        const int g = warp / S, j = warp % S;
        const int P = OW * OH, OG = (O + OCPT - 1) / OCPT;
        const long long u = ((long long)blockIdx.x * G + g) * 32 + lane;
        const bool live = u < (long long)OG * P;
        const int og = live ? (int)(u / P) : 0, pix = live ? (int)(u - (long long)og * P) : 0;
        const int o0 = og * OCPT;
        const int oy = pix / OW, ox = pix - oy * OW;
        const int iy0 = oy * s - 1, ix0 = ox * s - 1;
        const int c0 = C * j / S, c1 = C * (j + 1) / S;
        float acc[OCPT];

        kpdl_wait();

#pragma unroll
        for (int k = 0; k < OCPT; k++)
                acc[k] = (S == 1 && live && o0 + k < O) ? __ldg(b + o0 + k) : 0.0f;
        if (live) {
                for (int ci = c0; ci < c1; ci++) {
                        const float *src = in + (size_t)ci * W * H;
#pragma unroll
                        for (int ky = 0; ky < 3; ky++) {
                                const int iy = iy0 + ky;
                                if (iy < 0 || iy >= H)
                                        continue;
#pragma unroll
                                for (int kx = 0; kx < 3; kx++) {
                                        const int ix = ix0 + kx;
                                        if (ix < 0 || ix >= W)
                                                continue;
                                        const float v = __ldg(src + (size_t)iy * W + ix);
#pragma unroll
                                        for (int k = 0; k < OCPT; k++)
                                                if (o0 + k < O)
                                                        acc[k] = __fadd_rn(
                                                                acc[k],
                                                                __fmul_rn(__ldg(w + ((size_t)(o0 + k) * C + ci) * 9 +
                                                                                ky * 3 + kx),
                                                                          v));
                                }
                        }
                }
        }
        if constexpr (S == 1) {
                if (live) {
#pragma unroll
                        for (int k = 0; k < OCPT; k++)
                                if (o0 + k < O)
                                        out[(size_t)(o0 + k) * P + pix] = acc[k] > 0.0f ? acc[k] : 0.0f;
                }
        } else {
#pragma unroll
                for (int k = 0; k < OCPT; k++)
                        part[((g * S + j) * OCPT + k) * 32 + lane] = acc[k];
                __syncthreads();
                if (j == 0 && live)
                        conv_split_store<S, OCPT>(part, g, lane, o0, O, b, out, P, pix);
        }
}

/* One warp per channel. */
static __global__ void __launch_bounds__(POOL_THREADS)
avgpool(const float *__restrict__ in, int ch, int hw, float *__restrict__ out)
{
        const int c = blockIdx.x * (POOL_THREADS / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
        float s = 0.0f;

        if (c >= ch)
                return;
        for (int i = lane; i < hw; i += 32)
                s = __fadd_rn(s, __ldg(in + (size_t)c * hw + i));
        s = warp_sum(s);
        if (lane == 0)
                out[c] = __fdiv_rn(s, (float)hw);
}

/* (p desc, index asc): true when (pa, ia) ranks before (pb, ib). */
static __device__ __forceinline__ bool ranks_before(float pa, int ia, float pb, int ib)
{
        return pa > pb || (pa == pb && ia < ib);
}

/* The warp's first (p, index) by ranks_before, in every lane. */
static __device__ __forceinline__ void warp_argmax(float &bp, int &bi)
{
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
                const float op = __shfl_xor_sync(0xffffffffu, bp, o);
                const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
                if (ranks_before(op, oi, bp, bi)) {
                        bp = op;
                        bi = oi;
                }
        }
}

/* The warp's largest v, in every lane (one redux.sync from compute 8.0). */
static __device__ __forceinline__ unsigned warp_max_u32(unsigned v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        return __reduce_max_sync(0xffffffffu, v);
#else
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
                v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
        return v;
#endif
}

/*
 * A class's rank key: a larger key ranks before, as ranks_before (p desc,
 * index asc); 0 is no class. p >= 0 (a probability), so its bits order as its
 * value; the low word is the index's complement, so a real key is never 0.
 */
static __device__ __forceinline__ unsigned long long rank_key(float p, int i)
{
        return ((unsigned long long)__float_as_uint(p) << 32) | (0xffffffffu - (unsigned)i);
}

/* The warp's largest key, in every lane: the largest high word, then the largest low word among those. */
static __device__ __forceinline__ unsigned long long warp_max_key(unsigned long long key)
{
        const unsigned hi = warp_max_u32((unsigned)(key >> 32));
        const unsigned lo = warp_max_u32((unsigned)(key >> 32) == hi ? (unsigned)key : 0u);
        return ((unsigned long long)hi << 32) | lo;
}

/*
 * The n largest of the keys the warp's lanes hold (C a lane), largest first,
 * into out[0..n) (lane 0 stores; 0 once none is left): n rounds of the
 * warp's largest below the last round's. No barrier: the warp alone.
 */
template <int C>
static __device__ __forceinline__ void warp_topk(const unsigned long long (&key)[C], int n, unsigned long long *out)
{
        unsigned long long prev = ~0ull;

        for (int r = 0; r < n; r++) {
                unsigned long long b = 0;
#pragma unroll
                for (int c = 0; c < C; c++)
                        if (key[c] < prev && key[c] > b)
                                b = key[c];
                prev = warp_max_key(b);
                if ((threadIdx.x & 31) == 0)
                        out[r] = prev;
        }
}

/* Classes whose values the head keeps in shared memory between its passes (8 KiB); more: global memory. */
#define HEAD_SHARED_CLASSES 2048

/*
 * Softmax over probs[classes] (logits written by other blocks: read through
 * L2) in place, the top-k into stage, then stage copied to publish (when not
 * NULL). One whole block (FC_THREADS threads) calls it, after the logits are
 * complete and visible. The logits are read from global memory once; the
 * exponentials, the probabilities and the top-k rounds work on a copy in
 * shared memory (up to HEAD_SHARED_CLASSES; on probs itself beyond), each
 * thread on the same elements in the same order either way, so the results
 * do not depend on where the values live. (Nsight Compute, RESULTS.md run 11:
 * the head's eight passes over L2 made fc_softmax_topk 12.6 us at 0.9% SM.)
 */
static __device__ void softmax_topk_block(float *probs, int classes, int k, struct zcp_result *stage,
                                          struct zcp_result *publish, unsigned *meet)
{
        constexpr int warps = FC_THREADS / 32;
        __shared__ float s_f[warps];
        __shared__ int s_i[warps];
        __shared__ float s_bcast;
        __shared__ float s_vals[HEAD_SHARED_CLASSES];
        float *const v = classes <= HEAD_SHARED_CLASSES ? s_vals : probs;
        const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;

        /* Max (logits of other blocks: read through L2). */
        float m = -FLT_MAX;
        for (int i = threadIdx.x; i < classes; i += FC_THREADS) {
                const float x = __ldcg(probs + i);
                v[i] = x;   /* each thread reads back only what it wrote */
                m = fmaxf(m, x);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (lane == 0)
                s_f[warp] = m;
        __syncthreads();
        if (threadIdx.x == 0) {
                float mm = s_f[0];
                for (int i = 1; i < warps; i++)
                        mm = fmaxf(mm, s_f[i]);
                s_bcast = mm;
        }
        __syncthreads();
        m = s_bcast;

        /* exp and sum. */
        float sum = 0.0f;
        for (int i = threadIdx.x; i < classes; i += FC_THREADS) {
                const float e = expf(__fsub_rn(v[i], m));
                v[i] = e;
                sum = __fadd_rn(sum, e);
        }
        sum = warp_sum(sum);
        __syncthreads();
        if (lane == 0)
                s_f[warp] = sum;
        __syncthreads();
        if (threadIdx.x == 0) {
                float t = 0.0f;
                for (int i = 0; i < warps; i++)
                        t = __fadd_rn(t, s_f[i]);
                s_bcast = t;
        }
        __syncthreads();
        sum = s_bcast;
        for (int i = threadIdx.x; i < classes; i += FC_THREADS) {
                const float p = __fdiv_rn(v[i], sum);
                v[i] = p;
                probs[i] = p;
        }
        __syncthreads();

        /* Top-k: k rounds of a block arg-max below the previous pick. */
        float prev_p = FLT_MAX;
        int prev_i = -1;
        for (int r = 0; r < k; r++) {
                float bp = -1.0f;
                int bi = INT_MAX;
                for (int i = threadIdx.x; i < classes; i += FC_THREADS) {
                        const float p = v[i];
                        if (ranks_before(prev_p, prev_i, p, i) && ranks_before(p, i, bp, bi)) {
                                bp = p;
                                bi = i;
                        }
                }
                warp_argmax(bp, bi);
                if (lane == 0) {
                        s_f[warp] = bp;
                        s_i[warp] = bi;
                }
                __syncthreads();
                if (threadIdx.x == 0) {
                        for (int i = 1; i < warps; i++)
                                if (ranks_before(s_f[i], s_i[i], bp, bi)) {
                                        bp = s_f[i];
                                        bi = s_i[i];
                                }
                        stage->topk_class[r] = (uint32_t)bi;
                        stage->topk_prob[r] = bp;
                        s_f[0] = bp;
                        s_i[0] = bi;
                }
                __syncthreads();
                prev_p = s_f[0];
                prev_i = s_i[0];
                __syncthreads();
        }
        if (threadIdx.x == 0)
                stage->topk_count = (uint32_t)k;
        __threadfence();
        __syncthreads();
        if (publish)
                kpublish_block(stage, publish, meet, true);
}

/*
 * The head for up to FC_THREADS * R classes: the same results as
 * softmax_topk_block (the same operations on each value: its max, exp, sum
 * and division; the top-k rounds rank (p desc, index asc)), with the values
 * in registers (thread t holds classes t, t + FC_THREADS, ...) instead of
 * passes over shared memory, every thread reducing the warps' partials
 * itself (one barrier per reduction and per top-k round instead of three),
 * and the block published from the top-k it just found and the rest of
 * stage (written by earlier kernels: motion), without the stage's round
 * trip. The logits are loaded all at once (R independent loads per thread).
 * Deterministic: each warp's partial and each thread's sum of the partials
 * follow a fixed order.
 */
template <int R>
static __device__ void softmax_topk_regs(float *probs, int classes, int k, struct zcp_result *stage,
                                         struct zcp_result *publish, bool early, unsigned *meet,
                                         const float *s_logits = NULL, bool rounds = false)
{
        constexpr int warps = FC_THREADS / 32;
        __shared__ float s_max[warps], s_sum[warps];
        __shared__ float s_cp[ZCP_TOPK_MAX][warps];
        __shared__ int s_ci[ZCP_TOPK_MAX][warps];
        __shared__ unsigned long long s_key[warps * ZCP_TOPK_MAX + ZCP_TOPK_MAX];
        __shared__ unsigned s_top[2 * ZCP_TOPK_MAX];   /* classes, then probabilities (bits) */
        const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
        const unsigned *sw = (const unsigned *)stage, wi = 1 + threadIdx.x;
        unsigned wv = 0;
        float x[R];

        /* early: this thread's word of the block to publish (motion's, done before) with the logits' loads; not
         * with meet (motion writes its own words). */
        early = early && !meet;
        if (early && publish && wi < ZCP_RESULT_WORDS)
                wv = __ldcg(sw + wi);
#pragma unroll
        for (int r = 0; r < R; r++) {
                const int i = threadIdx.x + r * FC_THREADS;
                x[r] = i >= classes ? -FLT_MAX : s_logits ? s_logits[i] : __ldcg(probs + i);
        }
        float m = x[0];
#pragma unroll
        for (int r = 1; r < R; r++)
                m = fmaxf(m, x[r]);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (lane == 0)
                s_max[warp] = m;
        __syncthreads();
        m = s_max[0];
#pragma unroll
        for (int i = 1; i < warps; i++)
                m = fmaxf(m, s_max[i]);

        float sum = 0.0f;
#pragma unroll
        for (int r = 0; r < R; r++)
                if (threadIdx.x + r * FC_THREADS < classes) {
                        x[r] = expf(__fsub_rn(x[r], m));
                        sum = __fadd_rn(sum, x[r]);
                }
        sum = warp_sum(sum);
        if (lane == 0)
                s_sum[warp] = sum;
        __syncthreads();
        sum = 0.0f;
#pragma unroll
        for (int i = 0; i < warps; i++)
                sum = __fadd_rn(sum, s_sum[i]);
#pragma unroll
        for (int r = 0; r < R; r++) {
                const int i = threadIdx.x + r * FC_THREADS;
                if (i < classes) {
                        x[r] = __fdiv_rn(x[r], sum);
                        probs[i] = x[r];
                }
        }

        /* meet: whether motion is in already, read here, used after the publish's fence (kmeet_valid_seen). */
        const unsigned seen = meet && threadIdx.x == 0 ? *(volatile unsigned *)meet : 0u;
        if (!rounds) {
                /*
                 * Top-k (RESULTS.md run 28): each warp its k best by rank key (warp_topk, no barrier), one barrier,
                 * then warp 0 the k best of the warps' (the block's k best are among them); the same ranking as
                 * the rounds below, by a warp-wide redux instead of a block arg-max and a barrier each round.
                 */
                unsigned long long key[R];
#pragma unroll
                for (int r = 0; r < R; r++) {
                        const int i = threadIdx.x + r * FC_THREADS;
                        key[r] = i < classes ? rank_key(x[r], i) : 0ull;
                }
                warp_topk<R>(key, k, s_key + warp * k);
                __syncthreads();
                if (warp == 0) {
                        constexpr int C = (warps * ZCP_TOPK_MAX + 31) / 32;
                        unsigned long long *const best = s_key + warps * ZCP_TOPK_MAX;
                        unsigned long long ck[C];
#pragma unroll
                        for (int c = 0; c < C; c++) {
                                const int j = lane + 32 * c;
                                ck[c] = j < warps * k ? s_key[j] : 0ull;
                        }
                        warp_topk<C>(ck, k, best);
                        __syncwarp();
                        if (lane < k) {
                                const unsigned cls = 0xffffffffu - (unsigned)best[lane];
                                const unsigned pb = (unsigned)(best[lane] >> 32);
                                s_top[lane] = cls;
                                s_top[ZCP_TOPK_MAX + lane] = pb;
                                stage->topk_class[lane] = cls;
                                stage->topk_prob[lane] = __uint_as_float(pb);
                        }
                }
        }
        /* rounds (ZCP_TOPK_ROUNDS=1, for measuring): k rounds of a block arg-max below the previous pick; every
         * thread merges the warps' picks. */
        float prev_p = FLT_MAX;
        int prev_i = -1;
        for (int rd = 0; rounds && rd < k; rd++) {
                float bp = -1.0f;
                int bi = INT_MAX;
#pragma unroll
                for (int r = 0; r < R; r++) {
                        const int i = threadIdx.x + r * FC_THREADS;
                        if (i < classes && ranks_before(prev_p, prev_i, x[r], i) && ranks_before(x[r], i, bp, bi)) {
                                bp = x[r];
                                bi = i;
                        }
                }
                warp_argmax(bp, bi);
                if (lane == 0) {
                        s_cp[rd][warp] = bp;
                        s_ci[rd][warp] = bi;
                }
                __syncthreads();
                bp = s_cp[rd][0];
                bi = s_ci[rd][0];
#pragma unroll
                for (int i = 1; i < warps; i++)
                        if (ranks_before(s_cp[rd][i], s_ci[rd][i], bp, bi)) {
                                bp = s_cp[rd][i];
                                bi = s_ci[rd][i];
                        }
                if (threadIdx.x == 0) {
                        s_top[rd] = (unsigned)bi;
                        s_top[ZCP_TOPK_MAX + rd] = __float_as_uint(bp);
                        stage->topk_class[rd] = (uint32_t)bi;
                        stage->topk_prob[rd] = bp;
                }
                prev_p = bp;
                prev_i = bi;
        }
        if (threadIdx.x == 0)
                stage->topk_count = (uint32_t)k;
        if (!publish)
                return;
        __syncthreads();   /* s_top complete */
        constexpr unsigned cls0 = offsetof(struct zcp_result, topk_class) / 4;
        constexpr unsigned prob0 = offsetof(struct zcp_result, topk_prob) / 4;
        constexpr unsigned count_w = offsetof(struct zcp_result, topk_count) / 4;
        unsigned *d = (unsigned *)publish;
        for (unsigned i = wi; i < ZCP_RESULT_WORDS; i += FC_THREADS) {
                unsigned v;
                if (i == count_w)
                        v = (unsigned)k;
                else if (i >= cls0 && i < cls0 + (unsigned)k)
                        v = s_top[i - cls0];
                else if (i >= prob0 && i < prob0 + (unsigned)k)
                        v = s_top[ZCP_TOPK_MAX + i - prob0];
                else if (meet && !khead_word(i))
                        continue;   /* motion's, written by motion */
                else if (meet)
                        v = 0u;     /* a slot past k (the stage's are 0: nothing writes them) */
                else
                        v = early && i == wi ? wv : __ldcg(sw + i);
                d[i] = v;
        }
        __threadfence_system();
        __syncthreads();
        if (threadIdx.x == 0) {
                if (meet)
                        kmeet_valid_seen(meet, publish, seen);
                else
                        *(volatile unsigned *)&publish->valid = 1u;
        }
}

/* The head for `classes` classes: in registers up to FC_THREADS * 8 (when regs), else in shared memory. */
static __device__ __forceinline__ void head_block(float *probs, int classes, int k, struct zcp_result *stage,
                                                  struct zcp_result *publish, bool regs, bool early, unsigned *meet)
{
        if (regs && classes <= FC_THREADS * 4)
                softmax_topk_regs<4>(probs, classes, k, stage, publish, early, meet);
        else if (regs && classes <= FC_THREADS * 8)
                softmax_topk_regs<8>(probs, classes, k, stage, publish, early, meet);
        else
                softmax_topk_block(probs, classes, k, stage, publish, meet);
}

/* The pool's partial sums (conv3x3_relu_tasks_parts) for the head to finish. */
struct pool_parts {
        const float *parts;   /* [channels][np] */
        float *pooled;        /* [channels]: block 0 stores the features it computed (the net's pooled) */
        int np, P, ocpt;      /* ocpt 0: np pieces per channel (the tiled layer's tiles) */
};

/* Inputs of the fc the head can pool itself (the block's shared copy). */
#define FC_PARTS_MAX 1024
/* float4s of weights a lane loads before the wait (fc inputs up to 32 * 4 * FC_EARLY4 = 512). */
#define FC_EARLY4 4

/* Channel i's pooled feature from its pieces of the pool's sums, in order, eight loads in flight. */
static __device__ __forceinline__ float pool_feature(const struct pool_parts &pp, int i, int pieces)
{
        const float *q = pp.parts + (size_t)i * pp.np;
        float t = 0.0f, v[8];

        for (int j = 0; j < pieces; j += 8) {
#pragma unroll
                for (int u = 0; u < 8; u++)
                        v[u] = j + u < pieces ? __ldg(q + j + u) : 0.0f;
#pragma unroll
                for (int u = 0; u < 8; u++)
                        if (j + u < pieces)
                                t = __fadd_rn(t, v[u]);
        }
        return __fdiv_rn(t, (float)pp.P);
}

/* s + a . v, the products added in order x, y, z, w (the fc's unfused sums). */
static __device__ __forceinline__ float dot4_add(float s, const float4 &a, const float4 &v)
{
        s = __fadd_rn(s, __fmul_rn(a.x, v.x));
        s = __fadd_rn(s, __fmul_rn(a.y, v.y));
        s = __fadd_rn(s, __fmul_rn(a.z, v.z));
        return __fadd_rn(s, __fmul_rn(a.w, v.w));
}

/*
 * fc + softmax + top-k. Every block: the logits of FC_THREADS/32 classes (a
 * warp per class) into probs. The last block to finish (sync counter):
 * softmax over all classes, top-k into stage, publish; resets the counter.
 * With PARTS, the inputs are the average pool of the last layer: each block
 * first adds each channel's partial sums (pp) in order and divides, into
 * shared memory (every block gets the same bits). `early` (the default;
 * ZCP_HEAD_EARLY=0 for measuring): what does not depend on the layer before
 * is loaded before waiting for it (each warp's fc row and bias) or beside
 * the logits (the last block's words of the block to publish), two fewer
 * memory round trips after the layer (RESULTS.md run 25d: head 8.8 -> 8.1 us
 * in Nsight Compute, kernels 33.3 -> 33.0 us).
 */
template <bool PARTS>
static __global__ void __launch_bounds__(FC_THREADS)
fc_softmax_topk(const float *__restrict__ in, int n, const float *__restrict__ w, const float *__restrict__ b,
                int classes, int k, float *probs, uint32_t *sync, struct zcp_result *stage,
                struct zcp_result *publish, unsigned *meet, bool vec4, bool regs, bool early,
                const struct pool_parts pp)
{
        constexpr int warps = FC_THREADS / 32;
        __shared__ bool s_last;
        __shared__ __align__(16) float s_in[PARTS ? FC_PARTS_MAX : 4];
        const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
        const int c = blockIdx.x * warps + warp;
        const float *x = in;
        /*
         * early (vec4, n <= 32 * FC_EARLY4 * 4): the warp's row of weights and its bias into
         * registers before waiting for the layer before (they do not depend on it).
         */
        const bool pre = early && vec4 && c < classes && n / 4 <= 32 * FC_EARLY4;
        float4 wr4[FC_EARLY4];
        float bias = 0.0f;
        if (pre) {
#pragma unroll
                for (int u = 0; u < FC_EARLY4; u++) {
                        const int j = lane + 32 * u;
                        wr4[u] = j < n / 4 ? __ldg(reinterpret_cast<const float4 *>(w + (size_t)c * n) + j)
                                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                }
                bias = __ldg(b + c);
        }

        kpdl_wait();
        if constexpr (PARTS) {
                for (int i = threadIdx.x; i < n; i += FC_THREADS) {
                        /* ocpt 0: the tiled layer's np tiles for every channel; else conv3x3_relu_tasks_parts' runs. */
                        const int og = pp.ocpt ? i / pp.ocpt : 0;
                        const int pieces = pp.ocpt ? (og * pp.P + pp.P - 1) / 32 - og * pp.P / 32 + 1 : pp.np;
                        const float t = pool_feature(pp, i, pieces);
                        s_in[i] = t;
                        if (blockIdx.x == 0)
                                pp.pooled[i] = t;
                }
                __syncthreads();
                x = s_in;
        }
        if (pre) {
                /* The order of the vec4 loop below: j = lane, lane + 32, ... */
                const float4 *x4 = (const float4 *)x;
                float s = 0.0f;
#pragma unroll
                for (int u = 0; u < FC_EARLY4; u++) {
                        const int j = lane + 32 * u;
                        if (j < n / 4)
                                s = dot4_add(s, wr4[u], x4[j]);
                }
                s = warp_sum(s);
                if (lane == 0)
                        probs[c] = __fadd_rn(bias, s);
        } else if (c < classes) {
                const float *wr = w + (size_t)c * n;
                float s = 0.0f;
                if (vec4) {
                        /* n % 4 == 0, rows 16-byte aligned: a lane's four products from two loads. */
                        const float4 *w4 = (const float4 *)wr, *x4 = (const float4 *)x;
#pragma unroll 2
                        for (int j = lane; j < n / 4; j += 32)
                                s = dot4_add(s, __ldg(w4 + j), x4[j]);
                } else {
#pragma unroll 4
                        for (int j = lane; j < n; j += 32)
                                s = __fadd_rn(s, __fmul_rn(__ldg(wr + j), x[j]));
                }
                s = warp_sum(s);
                if (lane == 0)
                        probs[c] = __fadd_rn(__ldg(b + c), s);
        }
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0)
                s_last = atomicAdd(sync, 1u) == gridDim.x - 1;
        __syncthreads();
        if (!s_last)
                return;
        __threadfence();
        if (threadIdx.x == 0)
                *sync = 0;
        head_block(probs, classes, k, stage, publish, regs, early, meet);
}

/*
 * The head as one cluster of HEAD_CLUSTER blocks (compute 9.0+, launched
 * dependent; fc_softmax_topk elsewhere). fc_softmax_topk's 125 blocks meet
 * through global memory: each stores its logits, fences, counts itself in
 * with an atomic, and the last one fences and loads all the logits back,
 * three round trips after the fc. Here each block pools the features (the
 * same sums in the same order), its warps compute HEAD_CPW classes each
 * (classes w, w + 64, ...; the fc rows and biases loaded before the wait,
 * each dot product as fc_softmax_topk's vec4 loop) and store the logits into
 * block 0's shared memory (distributed shared memory, once every block has
 * arrived at a first cluster barrier: block 0 has started); a second cluster
 * barrier, then block 0 runs the same softmax and top-k and publishes. The
 * same bits as fc_softmax_topk's. ZCP_HEAD_CLUSTER=0: fc_softmax_topk.
 */
#define HEAD_CLUSTER 8
#define HEAD_CPW     16    /* classes a warp: up to HEAD_CLUSTER * 8 warps * 16 = 1024 */

static __global__ void __launch_bounds__(FC_THREADS)
fc_head_cluster(int n, const float *__restrict__ w, const float *__restrict__ b, int classes, int k, float *probs,
                struct zcp_result *stage, struct zcp_result *publish, unsigned *meet, const struct pool_parts pp,
                bool rounds)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        constexpr int warps = FC_THREADS / 32, cw = HEAD_CLUSTER * warps;
        __shared__ __align__(16) float s_in[128];
        __shared__ float s_logits[HEAD_CLUSTER * warps * HEAD_CPW];
        cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
        const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
        const int wg = (int)cluster.block_rank() * warps + warp;
        float4 wr[HEAD_CPW];
        float bias[HEAD_CPW];

        /* Arrive now, wait before the first store into block 0: distributed shared memory may be written only in blocks
         * known to have started (racecheck flags it otherwise: run 26c). */
        cluster.barrier_arrive();
        /* n == 128: a float4 of each row a lane. */
#pragma unroll
        for (int u = 0; u < HEAD_CPW; u++) {
                const int c = wg + cw * u;
                wr[u] = c < classes ? __ldg(reinterpret_cast<const float4 *>(w + (size_t)c * n) + lane)
                                    : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                bias[u] = c < classes ? __ldg(b + c) : 0.0f;
        }
        kpdl_wait();
        for (int i = threadIdx.x; i < n; i += FC_THREADS) {
                const float t = pool_feature(pp, i, pp.np);
                s_in[i] = t;
                if (cluster.block_rank() == 0)
                        pp.pooled[i] = t;
        }
        __syncthreads();
        float *const lead = cluster.map_shared_rank(s_logits, 0);
        const float4 v = reinterpret_cast<const float4 *>(s_in)[lane];
        cluster.barrier_wait();
#pragma unroll
        for (int u = 0; u < HEAD_CPW; u++) {
                const int c = wg + cw * u;
                const float t = warp_sum(dot4_add(0.0f, wr[u], v));
                if (lane == 0 && c < classes)
                        lead[c] = __fadd_rn(bias[u], t);
        }
        cluster.sync();   /* every logit is in block 0's shared memory */
        if (cluster.block_rank() != 0)
                return;
        softmax_topk_regs<4>(probs, classes, k, stage, publish, true, meet, s_logits, rounds);
#endif
}

/* Whether fc_head_cluster takes a head of n inputs and `classes` (the device aside: head_cluster_runs). */
static bool head_cluster_fits(uint32_t n, uint32_t classes)
{
        return n == 128 && classes <= (uint32_t)HEAD_CLUSTER * (FC_THREADS / 32) * HEAD_CPW &&
               classes <= FC_THREADS * 4;
}

/* fc_head_cluster's launch: one cluster, dependent when pdl (attr: room for 2). */
static void head_cluster_config(cudaLaunchConfig_t *cfg, cudaLaunchAttribute *attr, cudaStream_t st, bool pdl)
{
        *cfg = cudaLaunchConfig_t{};
        cfg->gridDim = dim3(HEAD_CLUSTER);
        cfg->blockDim = dim3(FC_THREADS);
        cfg->stream = st;
        attr[0] = cudaLaunchAttribute{};
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = HEAD_CLUSTER;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        attr[1] = cudaLaunchAttribute{};
        attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[1].val.programmaticStreamSerializationAllowed = 1;
        cfg->attrs = attr;
        cfg->numAttrs = pdl ? 2 : 1;
}

/*
 * Whether this thread's device runs fc_head_cluster: dependent launches (its
 * sm_90 code, kpdl_enabled) and room for a cluster of HEAD_CLUSTER blocks
 * (a partition of the GPU may have too few multiprocessors together).
 */
static bool head_cluster_runs(bool pdl)
{
        cudaLaunchConfig_t cfg;
        cudaLaunchAttribute attr[2];
        int clusters = 0;

        if (!pdl)
                return false;
        head_cluster_config(&cfg, attr, NULL, false);
        if (cudaOccupancyMaxActiveClusters(&clusters, fc_head_cluster, &cfg) != cudaSuccess) {
                (void)cudaGetLastError();   /* not a sticky error: clear it */
                return false;
        }
        return clusters >= 1;
}

/* ------------------------------------------------------------ fused path */

/*
 * The whole network in one launch (zcp_k_net_set_path, ZCP_K_NET_FUSED): a
 * persistent grid works through a list of tasks, stage by stage (each conv
 * layer, the pool, the fc). A block takes task numbers in increasing order
 * from a device counter (the next one fetched while the current one runs); a
 * task of stage s first waits until every task of stage s - 1 is done (a
 * per-stage counter). Since tasks are taken in order by blocks that are
 * running, the lowest unfinished task never waits on anything unfinished: the
 * grid needs no co-residency guarantee (no cooperative launch), so other
 * kernels and other streams may share the GPU with it. The block that
 * finishes the last fc task (its counter says so, as in fc_softmax_topk) does
 * the head: softmax, top-k, publish, and clears the stage counters (every
 * task is done by then); the last block to take a number past the end clears
 * the task counter. So the next launch starts from zero.
 *
 * Every stage writes its own buffer (no ping-pong), and no buffer is read in
 * a launch before it is complete: the read-only cache (__ldg) never holds a
 * stale line of it. The small ones written by other blocks (pooled
 * features, logits) are read through L2 (__ldcg) anyway.
 *
 * Convolutions: the same work split as conv3x3_relu (S warps share 32
 * outputs of OCPT channels, partials added in a fixed order), with fused
 * multiply-adds and padded taps read as zero (w * 0 adds nothing), bias
 * added last; the fc with fused multiply-adds too. Deterministic whatever the
 * grid: which block computes an output changes nothing in how it is computed.
 */
#define FUSED_THREADS      256
#define FUSED_STAGES       (ZCP_MODEL_MAX_LAYERS + 2)
#define FUSED_LINE         32    /* uint32 per counter: each on its own 128-byte line */
#define FUSED_MAX_OCPT     2
#define FUSED_BLOCKS_PER_SM 4    /* default cap: more blocks, more pollers of the counters */

static_assert(FUSED_THREADS == FC_THREADS, "the head runs softmax_topk_block with the fused block");

struct fused_conv {
        const float *in;           /* NULL: the launch's tensor */
        const float *w, *b;
        float *out;
        int C, W, H, O, s, OW, OH, S, OCPT, nvb;
};

struct fused_plan {
        int convs, stages;                   /* stages: convs, pool, fc (+ the head) */
        int first[FUSED_STAGES + 1];         /* first task of each stage; first[stages] = total */
        struct fused_conv conv[ZCP_MODEL_MAX_LAYERS];
        const float *pool_in;
        int pool_ch, pool_hw;
        float *pooled;
        const float *fw, *fb;
        int classes, fc_in;
        float *probs;
};

/* Virtual blocks task, task + tasks, ... of a conv layer (S warps per 32 outputs of OCPT channels). */
template <int S, int OCPT>
static __device__ __forceinline__ void fused_conv_task(const struct fused_conv &L, const float *__restrict__ in,
                                                       int task, int tasks, float *part)
{
        constexpr int G = (FUSED_THREADS / 32) / S;
        const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
        const int g = warp / S, j = warp % S;
        const int C = L.C, W = L.W, H = L.H, O = L.O, OW = L.OW;
        const int P = OW * L.OH, OG = (O + OCPT - 1) / OCPT, plane = W * H;
        const int c0 = C * j / S, c1 = C * (j + 1) / S;

        for (int vb = task; vb < L.nvb; vb += tasks) {
                const int u = (vb * G + g) * 32 + lane;
                const bool live = u < OG * P;
                const int og = live ? u / P : 0, pix = live ? u - og * P : 0;
                const int o0 = og * OCPT;
                const int oy = pix / OW, ox = pix - oy * OW;
                const int iy0 = oy * L.s - 1, ix0 = ox * L.s - 1;
                int off[9];
                unsigned vm = 0;
                float acc[OCPT];
                const float *wp[OCPT];

#pragma unroll
                for (int t = 0; t < 9; t++) {
                        const int iy = iy0 + t / 3, ix = ix0 + t % 3;
                        const bool ok = iy >= 0 && iy < H && ix >= 0 && ix < W;
                        off[t] = ok ? iy * W + ix : 0;
                        vm |= (ok ? 1u : 0u) << t;
                }
#pragma unroll
                for (int k = 0; k < OCPT; k++) {
                        const int o = o0 + k < O ? o0 + k : O - 1;   /* past the last channel: computed, not stored */
                        acc[k] = 0.0f;
                        wp[k] = L.w + ((size_t)o * C + c0) * 9;
                }
                if (live) {
                        const float *src = in + (size_t)c0 * plane;
                        for (int ci = c0; ci < c1; ci++, src += plane) {
#pragma unroll
                                for (int t = 0; t < 9; t++) {
                                        const float v = (vm >> t) & 1u ? __ldg(src + off[t]) : 0.0f;
#pragma unroll
                                        for (int k = 0; k < OCPT; k++)
                                                acc[k] = __fmaf_rn(__ldg(wp[k] + t), v, acc[k]);
                                }
#pragma unroll
                                for (int k = 0; k < OCPT; k++)
                                        wp[k] += 9;
                        }
                }
                if constexpr (S == 1) {
                        if (live) {
#pragma unroll
                                for (int k = 0; k < OCPT; k++)
                                        if (o0 + k < O) {
                                                const float r = __fadd_rn(acc[k], __ldg(L.b + o0 + k));
                                                L.out[(size_t)(o0 + k) * P + pix] = r > 0.0f ? r : 0.0f;
                                        }
                        }
                } else {
#pragma unroll
                        for (int k = 0; k < OCPT; k++)
                                part[((g * S + j) * OCPT + k) * 32 + lane] = acc[k];
                        __syncthreads();
                        if (j == 0 && live)
                                conv_split_store<S, OCPT>(part, g, lane, o0, O, L.b, L.out, P, pix);
                        __syncthreads();   /* part is written again by the next virtual block */
                }
        }
}

/* Stage counter `done` reaches `need` (thread 0 of the block; the caller synchronizes the block). */
static __device__ __forceinline__ void fused_wait(const uint32_t *done, uint32_t need)
{
        while (*(volatile const uint32_t *)done < need)
                __nanosleep(32);
        __threadfence();
}

static __global__ void __launch_bounds__(FUSED_THREADS, FUSED_BLOCKS_PER_SM)
net_fused(const struct fused_plan *__restrict__ pl, const float *__restrict__ tensor, int k,
          struct zcp_result *stage, struct zcp_result *publish, uint32_t *ctr)
{
        __shared__ float part[FUSED_THREADS * FUSED_MAX_OCPT];
        __shared__ int s_next[2];
        __shared__ bool s_head;
        const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
        const int stages = pl->stages, convs = pl->convs, total = pl->first[stages];
        int t, st = 0, buf = 0, ready = -1, nxt = 0;

        if (threadIdx.x == 0)
                s_next[0] = (int)atomicAdd(ctr, 1u);
        __syncthreads();
        t = s_next[0];
        while (t < total) {
                /*
                 * The next task number, asked for now and stored at the end of this
                 * task (its latency hides behind the work): s_next alternates, so
                 * the slot written is the one read two barriers ago.
                 */
                if (threadIdx.x == 0)
                        nxt = (int)atomicAdd(ctr, 1u);
                while (t >= pl->first[st + 1])
                        st++;
                /* Stage st - 1 complete (once per stage: `ready` is the last stage this block saw complete). */
                if (st > 0 && st - 1 > ready) {
                        if (threadIdx.x == 0)
                                fused_wait(ctr + FUSED_LINE * st, (uint32_t)(pl->first[st] - pl->first[st - 1]));
                        __syncthreads();
                        ready = st - 1;
                }
                const int task = t - pl->first[st], tasks = pl->first[st + 1] - pl->first[st];
                if (st < convs) {
                        const struct fused_conv L = pl->conv[st];
                        const float *in = L.in ? L.in : tensor;
                        /* The plan's variants (fused_plan_upload): exact-order S 1 with 1 channel, split with 2. */
                        switch (L.S) {
                        case 1: fused_conv_task<1, 1>(L, in, task, tasks, part); break;
                        case 2: fused_conv_task<2, 2>(L, in, task, tasks, part); break;
                        case 4: fused_conv_task<4, 2>(L, in, task, tasks, part); break;
                        case 8: fused_conv_task<8, 2>(L, in, task, tasks, part); break;
                        default: break;
                        }
                } else if (st == convs) {
                        /* Global average pool: a warp per channel. */
                        const int c = task * (FUSED_THREADS / 32) + warp, hw = pl->pool_hw;
                        if (c < pl->pool_ch) {
                                const float *a = pl->pool_in + (size_t)c * hw;
                                float s = 0.0f;
                                for (int i = lane; i < hw; i += 32)
                                        s = __fadd_rn(s, __ldg(a + i));
                                s = warp_sum(s);
                                if (lane == 0)
                                        pl->pooled[c] = __fdiv_rn(s, (float)hw);
                        }
                } else {
                        /* fc: a warp per class. */
                        const int c = task * (FUSED_THREADS / 32) + warp, n = pl->fc_in;
                        if (c < pl->classes) {
                                const float *wr = pl->fw + (size_t)c * n, *x = pl->pooled;
                                float s = 0.0f;
                                for (int i = lane; i < n; i += 32)
                                        s = __fmaf_rn(__ldg(wr + i), __ldcg(x + i), s);
                                s = warp_sum(s);
                                if (lane == 0)
                                        pl->probs[c] = __fadd_rn(__ldg(pl->fb + c), s);
                        }
                }
                buf ^= 1;
                if (threadIdx.x == 0)
                        s_next[buf] = nxt;
                __syncthreads();   /* the task's outputs are written, s_next[buf] is set */
                if (st < stages - 1) {
                        if (threadIdx.x == 0) {
                                __threadfence();
                                atomicAdd(ctr + FUSED_LINE * (st + 1), 1u);
                        }
                } else {
                        if (threadIdx.x == 0) {
                                __threadfence();
                                s_head = atomicAdd(ctr + FUSED_LINE * (st + 1), 1u) == (uint32_t)(tasks - 1);
                        }
                        __syncthreads();
                        if (s_head) {
                                /* The last fc task done: so is every task. The head, then clear the stage counters. */
                                __threadfence();
                                head_block(pl->probs, pl->classes, k, stage, publish, true, false, NULL);
                                if (threadIdx.x == 0)
                                        for (int i = 1; i <= stages; i++)
                                                atomicExch(ctr + FUSED_LINE * i, 0u);
                        }
                }
                t = s_next[buf];
        }
        /* Every block stops at its first number past the end: the last such number clears the counter. */
        if (threadIdx.x == 0 && t == total + (int)gridDim.x - 1)
                atomicExch(ctr, 0u);
}

/* Threads that keep the GPU busy: below this, a layer's taps are split over warps. */
#define CONV_BUSY_THREADS (1u << 17)

/* The split kernels' rule (the fused path's, and the layered path's where the tiled kernel does not apply). */
static void conv_split_rule(uint32_t in_ch, uint32_t in_w, uint32_t in_h, uint32_t out_ch, uint32_t stride,
                            uint32_t *ret_split, uint32_t *ret_ocpt)
{
        const uint64_t outputs = (uint64_t)((in_w - 1) / stride + 1) * ((in_h - 1) / stride + 1) * out_ch;
        static const uint32_t ocpts[] = { 4, 2 };

        *ret_split = 1;
        *ret_ocpt = 1;
        if (in_ch >= 2 && in_ch < 4 && outputs >= CONV_BUSY_THREADS) {
                /*
                 * The first layer (RGB in): 27 taps per output, too little work per thread. 2 warps x 4
                 * channels was the fastest variant of 3x224x224 -> 16 in every run that timed them all
                 * (RESULTS.md run 13: 7.3 against the exact variant's 8.0 us; run 21: 6.6 against 7.8).
                 * ZCP_CONV0_EXACT=1 keeps the exact variant (for measuring).
                 */
                const char *env = getenv("ZCP_CONV0_EXACT");
                if (!(env && strcmp(env, "1") == 0)) {
                        *ret_split = 2;
                        *ret_ocpt = 4;
                }
                return;
        }
        if (outputs >= CONV_BUSY_THREADS || in_ch < 4)
                return;   /* enough outputs (or too few channels to split): the exact variant */
        /*
         * Split layers (conv3x3_relu_tasks): the fewest warps per output that give about
         * 2^16..2^17 threads, with 4 channels per thread if that many suffice, else 2. Measured on
         * the H200 (tests/kernels/RESULTS.md run 13, every variant timed alone, us): 16x112x112 -> 32
         * best at 4 x 4 (8.7; 2 x 2 10.2), 32x56x56 -> 64 at 8 x 4 (8.6; 4 x 2 10.7), 64x28x28 -> 128
         * at 8 x 2 (11.1; 8 x 4 11.8): each is the rule's choice. More threads than that
         * (8 x 4 at 16x112x112: 9.8) only add partial sums.
         */
        for (uint32_t i = 0; i < 2; i++)
                for (uint32_t s = 2; s <= 8 && s * 2 <= in_ch; s *= 2)
                        if (outputs * s / ocpts[i] >= CONV_BUSY_THREADS / 2) {
                                *ret_split = s;
                                *ret_ocpt = ocpts[i];
                                return;
                        }
        /* Too few outputs even at 8 warps with 2 channels: the most threads there are. */
        for (*ret_split = 2; *ret_split < 8 && *ret_split * 4 <= in_ch; *ret_split *= 2)
                ;
        *ret_ocpt = 2;
}

/* Whether the layered path's layers take the tiled kernel (ZCP_CONV_TILED=0: the split rule, for measuring). */
static bool conv_tiled_on(void)
{
        const char *env = getenv("ZCP_CONV_TILED");

        return !(env && strcmp(env, "0") == 0);
}

/* split 0's choice: the tiled kernel where it plans the layer (its plan in *t), else the split rule. */
static void conv_auto(uint32_t in_ch, uint32_t in_w, uint32_t in_h, uint32_t out_ch, uint32_t stride,
                      uint32_t *ret_split, uint32_t *ret_ocpt, struct ctile *t)
{
        if (conv_tiled_on() && in_ch <= INT_MAX / 2 && in_w <= INT_MAX / 2 && in_h <= INT_MAX / 2 &&
            out_ch <= INT_MAX / 2 && stride <= 2 &&
            ctile_plan((int)in_ch, (int)in_w, (int)in_h, (int)out_ch, (int)stride, 0, t)) {
                *ret_split = ZCP_K_CONV_TILED;
                *ret_ocpt = 0;
                return;
        }
        conv_split_rule(in_ch, in_w, in_h, out_ch, stride, ret_split, ret_ocpt);
}

void zcp_k_conv_auto(uint32_t in_ch, uint32_t in_w, uint32_t in_h, uint32_t out_ch, uint32_t stride,
                     uint32_t *ret_split, uint32_t *ret_ocpt)
{
        struct ctile t;

        conv_auto(in_ch, in_w, in_h, out_ch, stride, ret_split, ret_ocpt, &t);
}

int zcp_k_conv_tile_info(uint32_t in_ch, uint32_t in_w, uint32_t in_h, uint32_t out_ch, uint32_t stride,
                         uint32_t code, uint32_t *ret_code, double *ret_cost)
{
        struct ctile t;

        if (in_ch > INT_MAX || in_w > INT_MAX || in_h > INT_MAX || out_ch > INT_MAX || stride > INT_MAX ||
            !ctile_plan((int)in_ch, (int)in_w, (int)in_h, (int)out_ch, (int)stride, code, &t))
                return -1;
        *ret_code = ZCP_K_TILE(t.twl, t.thl, t.cgl);
        *ret_cost = t.cost;
        return 0;
}

/*
 * The split layers (S > 1) in their own launch, one virtual block of the
 * fused path's task per block: the same outputs and split as conv3x3_relu,
 * computed as the fused path does (tap offsets and the padding mask worked
 * out once per output, weight pointers stepped, fused multiply-adds). Nsight
 * Compute (RESULTS.md run 12) found conv3x3_relu issuing 14 instructions per
 * multiply-add, mostly 64-bit index arithmetic per tap, at 36% occupancy. The
 * scores stay within the split variants' tolerance (1e-5 of the double sums
 * in ktest_kernels), and the layered and fused paths now compute every
 * output alike. Sizes past the fused path's int indexing keep conv3x3_relu.
 */
template <int S, int OCPT>
static __global__ void __launch_bounds__(CONV_THREADS) conv3x3_relu_tasks(const struct fused_conv L)
{
        __shared__ float part[CONV_THREADS * OCPT];

        kpdl_wait();
        fused_conv_task<S, OCPT>(L, L.in, (int)blockIdx.x, (int)gridDim.x, part);
}

static_assert(CONV_THREADS == FUSED_THREADS, "fused_conv_task's warps and groups");

/*
 * The last layer with the first half of the global average pool in its
 * epilogue (the layered path's default; ZCP_POOL_IN_HEAD=0 keeps the
 * separate avgpool launch): the warp that stores a group's 32 outputs
 * (units: channel group major, so they belong to at most two channel groups
 * when the plane has >= 32 pixels) also sums them per channel group, and
 * lane 0 stores the sums as piece gg - og*P/32 of each channel's partial
 * sums (parts [OG*OCPT][np]). The head adds a channel's pieces in order and
 * divides (fc_softmax_topk with parts). No counters, no fences, no extra
 * launch: one launch and one dependent step fewer on the critical path
 * (conv + a last-block pool in the conv's tail measured slower: run 22a).
 */
template <int S, int OCPT>
static __global__ void __launch_bounds__(CONV_THREADS)
conv3x3_relu_tasks_parts(const struct fused_conv L, float *__restrict__ parts, int np)
{
        constexpr int G = (CONV_THREADS / 32) / S;
        __shared__ float part[CONV_THREADS * OCPT];
        const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = warp / S;
        const int P = L.OW * L.OH, O = L.O, units = ((O + OCPT - 1) / OCPT) * P;
        const int gg = (int)blockIdx.x * G + g, u = gg * 32 + lane;

        kpdl_wait();
        fused_conv_task<S, OCPT>(L, L.in, (int)blockIdx.x, (int)gridDim.x, part);
        if (warp % S != 0 || gg * 32 >= units)
                return;
        /* This lane stored its outputs (conv_split_store): it reads back its own writes. */
        const bool live = u < units;
        const int og = live ? u / P : 0, pix = live ? u - og * P : 0;
        const int ogA = gg * 32 / P, last = min(gg * 32 + 31, units - 1) / P;
#pragma unroll
        for (int k = 0; k < OCPT; k++) {
                const int o = og * OCPT + k;
                const float v = live && o < O ? L.out[(size_t)o * P + pix] : 0.0f;
                const float a = warp_sum(og == ogA ? v : 0.0f), b = warp_sum(og == ogA ? 0.0f : v);
                if (lane == 0) {
                        parts[(size_t)(ogA * OCPT + k) * np + (gg - ogA * P / 32)] = a;
                        if (last != ogA)
                                parts[(size_t)(last * OCPT + k) * np] = b;
                }
        }
}

template <int S, int OCPT>
static void launch_conv(const float *in, int C, int W, int H, const float *w, const float *b, int O, int s,
                        float *out, int OW, int OH, cudaStream_t st, bool pdl)
{
        const uint64_t units = (uint64_t)((O + OCPT - 1) / OCPT) * OW * OH;
        const uint64_t per_block = (uint64_t)(CONV_THREADS / 32 / S) * 32;
        const unsigned blocks = (unsigned)((units + per_block - 1) / per_block);

        if (S > 1 && units + per_block <= INT_MAX / 2 && (uint64_t)C * W * H <= INT_MAX / 2 &&
            (uint64_t)O * OW * OH <= INT_MAX / 2) {
                const struct fused_conv L = { in, w, b, out, C, W, H, O, s, OW, OH, S, OCPT, (int)blocks };

                klaunch(pdl, conv3x3_relu_tasks<S, OCPT>, blocks, CONV_THREADS, st, L);
                return;
        }
        klaunch(pdl, conv3x3_relu<S, OCPT>, blocks, CONV_THREADS, st, in, C, W, H, w, b, O, s, out, OW, OH);
}

template <int S>
static int launch_conv_s(uint32_t ocpt, const float *in, int C, int W, int H, const float *w, const float *b, int O,
                         int s, float *out, int OW, int OH, cudaStream_t st, bool pdl)
{
        switch (ocpt) {
        case 1:
                launch_conv<S, 1>(in, C, W, H, w, b, O, s, out, OW, OH, st, pdl);
                return 0;
        case 2:
                launch_conv<S, 2>(in, C, W, H, w, b, O, s, out, OW, OH, st, pdl);
                return 0;
        case 4:
                launch_conv<S, 4>(in, C, W, H, w, b, O, s, out, OW, OH, st, pdl);
                return 0;
        default:
                return -1;
        }
}

static_assert(ZCP_K_TILE_MMA == CTILE_MMA, "the tensor-core loop's code bit");

/* The tiled kernel with the weights packed as the network keeps them (ZCP_K_TILE_PACKED: tests). */
static int conv_tiled_packed(const struct ctile *t, const float *in, int C, int W, int H, const float *w_dev,
                             const float *b, int O, int s, float *out, cudaStream_t st)
{
        const size_t nw = (size_t)O * C * 9, np = ctile_pack_floats(t, C, O);
        float *w = (float *)malloc(nw * sizeof(float)), *pk = (float *)malloc(np * sizeof(float)), *pk_dev = NULL;
        cudaError_t e = cudaErrorMemoryAllocation;

        if (w && pk && (e = cudaMemcpy(w, w_dev, nw * sizeof(float), cudaMemcpyDeviceToHost)) == cudaSuccess &&
            (e = cudaMalloc((void **)&pk_dev, np * sizeof(float))) == cudaSuccess) {
                ctile_pack(t, w, C, O, pk);
                if ((e = cudaMemcpy(pk_dev, pk, np * sizeof(float), cudaMemcpyHostToDevice)) == cudaSuccess &&
                    (e = (cudaError_t)ctile_launch(t, in, C, W, H, w_dev, pk_dev, b, O, s, out, NULL, st, false)) ==
                            cudaSuccess)
                        e = cudaStreamSynchronize(st);
        }
        cudaFree(pk_dev);
        free(w);
        free(pk);
        return e;
}

static int conv_variant(const float *in_dev, uint32_t in_ch, uint32_t in_w, uint32_t in_h, const float *weight_dev,
                        const float *bias_dev, uint32_t out_ch, uint32_t stride, float *out_dev, uint32_t split,
                        uint32_t ocpt, cudaStream_t st, bool pdl)
{
        int r;

        if (!in_dev || !out_dev || in_w == 0 || in_h == 0 || stride == 0 || out_ch == 0 || in_ch == 0)
                return cudaErrorInvalidValue;
        const int ow = (int)((in_w - 1) / stride + 1), oh = (int)((in_h - 1) / stride + 1);
        const int C = (int)in_ch, W = (int)in_w, H = (int)in_h, O = (int)out_ch, s = (int)stride;
        struct ctile t;
        if (split == 0)
                conv_auto(in_ch, in_w, in_h, out_ch, stride, &split, &ocpt, &t);
        else if (split == ZCP_K_CONV_TILED && (in_ch > INT_MAX / 2 || out_ch > INT_MAX / 2 ||
                                               !ctile_plan(C, W, H, O, s, ocpt & ~ZCP_K_TILE_PACKED, &t)))
                return cudaErrorInvalidValue;
        if (split == ZCP_K_CONV_TILED) {
                cudaError_t ce;
                if ((ce = (cudaError_t)ctile_init()) != cudaSuccess)
                        return ce;
                if (ocpt & ZCP_K_TILE_PACKED)
                        return conv_tiled_packed(&t, in_dev, C, W, H, weight_dev, bias_dev, O, s, out_dev, st);
                return ctile_launch(&t, in_dev, C, W, H, weight_dev, NULL, bias_dev, O, s, out_dev, NULL, st, pdl);
        }
        switch (split) {
        case 1:
                r = launch_conv_s<1>(ocpt, in_dev, C, W, H, weight_dev, bias_dev, O, s, out_dev, ow, oh, st, pdl);
                break;
        case 2:
                r = launch_conv_s<2>(ocpt, in_dev, C, W, H, weight_dev, bias_dev, O, s, out_dev, ow, oh, st, pdl);
                break;
        case 4:
                r = launch_conv_s<4>(ocpt, in_dev, C, W, H, weight_dev, bias_dev, O, s, out_dev, ow, oh, st, pdl);
                break;
        case 8:
                r = launch_conv_s<8>(ocpt, in_dev, C, W, H, weight_dev, bias_dev, O, s, out_dev, ow, oh, st, pdl);
                break;
        default:
                r = -1;
                break;
        }
        if (r < 0)
                return cudaErrorInvalidValue;
        return cudaGetLastError();
}

int zcp_k_conv3x3_relu_variant(const float *in_dev, uint32_t in_ch, uint32_t in_w, uint32_t in_h,
                               const float *weight_dev, const float *bias_dev, uint32_t out_ch, uint32_t stride,
                               float *out_dev, uint32_t split, uint32_t ocpt, void *stream)
{
        return conv_variant(in_dev, in_ch, in_w, in_h, weight_dev, bias_dev, out_ch, stride, out_dev, split, ocpt,
                            (cudaStream_t)stream, false);
}

int zcp_k_conv3x3_relu(const float *in_dev, uint32_t in_ch, uint32_t in_w, uint32_t in_h, const float *weight_dev,
                       const float *bias_dev, uint32_t out_ch, uint32_t stride, float *out_dev, void *stream)
{
        return zcp_k_conv3x3_relu_variant(in_dev, in_ch, in_w, in_h, weight_dev, bias_dev, out_ch, stride, out_dev, 0,
                                          0, stream);
}

template <int S, int OCPT>
static void launch_conv_parts(const struct fused_conv &L, float *parts, int np, cudaStream_t st, bool pdl)
{
        klaunch(pdl, conv3x3_relu_tasks_parts<S, OCPT>, (unsigned)L.nvb, CONV_THREADS, st, L, parts, np);
}

/*
 * Where the layer (the network's last) can leave the pool's partial sums
 * (conv3x3_relu_tasks_parts): a split layer that fits int indexing, whose
 * output planes have >= 32 pixels. Then *ret_L is its launch and *ret_np
 * the pieces per channel.
 */
static bool conv_parts_plan(const float *in, uint32_t in_ch, uint32_t in_w, uint32_t in_h, const float *w,
                            const float *b, uint32_t out_ch, uint32_t stride, float *out, struct fused_conv *ret_L,
                            int *ret_np)
{
        uint32_t S, ocpt;
        const uint32_t ow = (in_w - 1) / stride + 1, oh = (in_h - 1) / stride + 1;

        conv_split_rule(in_ch, in_w, in_h, out_ch, stride, &S, &ocpt);
        const uint64_t units = (uint64_t)((out_ch + ocpt - 1) / ocpt) * ow * oh;
        const uint64_t per_block = (uint64_t)(CONV_THREADS / 32 / S) * 32;
        if (S == 1 || (uint64_t)ow * oh < 32 || units + per_block > INT_MAX / 2 ||
            (uint64_t)in_ch * in_w * in_h > INT_MAX / 2 || (uint64_t)out_ch * ow * oh > INT_MAX / 2)
                return false;
        *ret_L = { in, w, b, out, (int)in_ch, (int)in_w, (int)in_h, (int)out_ch, (int)stride, (int)ow, (int)oh,
                   (int)S, (int)ocpt, (int)((units + per_block - 1) / per_block) };
        *ret_np = (int)((ow * oh + 31) / 32 + 1);
        return true;
}

static int conv3x3_relu_parts(const struct fused_conv &L, float *parts, int np, cudaStream_t st, bool pdl)
{
        switch (L.S * 8 + L.OCPT) {
        case 2 * 8 + 2: launch_conv_parts<2, 2>(L, parts, np, st, pdl); break;
        case 2 * 8 + 4: launch_conv_parts<2, 4>(L, parts, np, st, pdl); break;
        case 4 * 8 + 2: launch_conv_parts<4, 2>(L, parts, np, st, pdl); break;
        case 4 * 8 + 4: launch_conv_parts<4, 4>(L, parts, np, st, pdl); break;
        case 8 * 8 + 2: launch_conv_parts<8, 2>(L, parts, np, st, pdl); break;
        case 8 * 8 + 4: launch_conv_parts<8, 4>(L, parts, np, st, pdl); break;
        default: return cudaErrorInvalidValue;
        }
        return cudaGetLastError();
}

int zcp_k_avgpool(const float *in_dev, uint32_t ch, uint32_t w, uint32_t h, float *out_dev, void *stream)
{
        const uint32_t per_block = POOL_THREADS / 32;

        if (!in_dev || !out_dev || ch == 0 || w == 0 || h == 0)
                return cudaErrorInvalidValue;
        avgpool<<<(ch + per_block - 1) / per_block, POOL_THREADS, 0, (cudaStream_t)stream>>>(in_dev, (int)ch,
                                                                                          (int)(w * h), out_dev);
        return cudaGetLastError();
}

/* The head's launch; pp: the pool's partial sums instead of in_dev (NULL: in_dev). */
static int launch_head(const float *in_dev, uint32_t in_n, const float *weight_dev, const float *bias_dev,
                       uint32_t classes, uint32_t k, float *probs_dev, uint32_t *sync_dev,
                       struct zcp_result *stage_dev, struct zcp_result *publish_dev, unsigned *meet_dev,
                       const struct pool_parts *pp, cudaStream_t st, bool pdl, bool cluster)
{
        const uint32_t per_block = FC_THREADS / 32, blocks = (classes + per_block - 1) / per_block;

        if (!in_dev || !weight_dev || !bias_dev || !probs_dev || !sync_dev || !stage_dev || classes == 0 || in_n == 0 ||
            (meet_dev && !publish_dev))
                return cudaErrorInvalidValue;
        if (k > ZCP_TOPK_MAX)
                k = ZCP_TOPK_MAX;
        if (k > classes)
                k = classes;
        /* ZCP_HEAD_REGS=0: the head as before run 22 (scalar fc loads, softmax in shared memory), for measuring. */
        const char *env = getenv("ZCP_HEAD_REGS");
        const bool regs = !(env && strcmp(env, "0") == 0);
        const bool vec4 =
                regs && in_n % 4 == 0 && (uintptr_t)weight_dev % 16 == 0 && (pp || (uintptr_t)in_dev % 16 == 0);
        /* ZCP_HEAD_EARLY=0: the fc weights and the published words loaded where they are used, for measuring. */
        const char *env_early = getenv("ZCP_HEAD_EARLY");
        const bool early = !(env_early && strcmp(env_early, "0") == 0);
        /* ZCP_HEAD_CLUSTER=0: the head's 125 blocks where the cluster would run, for measuring. */
        const char *env_cl = getenv("ZCP_HEAD_CLUSTER");
        if (cluster && pp && pp->ocpt == 0 && regs && vec4 && !(env_cl && strcmp(env_cl, "0") == 0)) {
                cudaLaunchConfig_t cfg;
                cudaLaunchAttribute attr[2];
                head_cluster_config(&cfg, attr, st, pdl);
                /* ZCP_TOPK_ROUNDS=1: the top-k as k rounds of a block arg-max (before run 28), for measuring. */
                const char *env_rd = getenv("ZCP_TOPK_ROUNDS");
                const bool rounds = env_rd && strcmp(env_rd, "1") == 0;
                cudaLaunchKernelEx(&cfg, fc_head_cluster, (int)in_n, weight_dev, bias_dev, (int)classes, (int)k,
                                   probs_dev, stage_dev, publish_dev, meet_dev, *pp, rounds);
        } else if (pp) {
                if (in_n > FC_PARTS_MAX)
                        return cudaErrorInvalidValue;
                klaunch(pdl, fc_softmax_topk<true>, blocks, FC_THREADS, st, in_dev, (int)in_n, weight_dev, bias_dev,
                        (int)classes, (int)k, probs_dev, sync_dev, stage_dev, publish_dev, meet_dev, vec4, regs, early,
                        *pp);
        } else {
                const struct pool_parts none = { NULL, NULL, 0, 0, 0 };
                klaunch(pdl, fc_softmax_topk<false>, blocks, FC_THREADS, st, in_dev, (int)in_n, weight_dev, bias_dev,
                        (int)classes, (int)k, probs_dev, sync_dev, stage_dev, publish_dev, meet_dev, vec4, regs, early,
                        none);
        }
        return cudaGetLastError();
}

int zcp_k_fc_softmax_topk(const float *in_dev, uint32_t in_n, const float *weight_dev, const float *bias_dev,
                          uint32_t classes, uint32_t k, float *probs_dev, uint32_t *sync_dev,
                          struct zcp_result *stage_dev, struct zcp_result *publish_dev, void *stream)
{
        return launch_head(in_dev, in_n, weight_dev, bias_dev, classes, k, probs_dev, sync_dev, stage_dev, publish_dev,
                           NULL, NULL, (cudaStream_t)stream, false, false);
}

struct zcp_k_net {
        uint32_t layers, in_w, in_h;
        uint32_t in_ch[ZCP_MODEL_MAX_LAYERS], out_ch[ZCP_MODEL_MAX_LAYERS], stride[ZCP_MODEL_MAX_LAYERS];
        uint32_t w[ZCP_MODEL_MAX_LAYERS + 1], h[ZCP_MODEL_MAX_LAYERS + 1];   /* [0] = input */
        const float *cw[ZCP_MODEL_MAX_LAYERS], *cb[ZCP_MODEL_MAX_LAYERS];
        const float *fw, *fb;
        uint32_t classes, fc_in;
        float *weights;          /* every parameter, one allocation */
        float *act[2];           /* ping-pong activations */
        float *pooled, *probs;
        uint32_t *sync;          /* fc blocks' counter, zero between launches */
        float *parts;            /* the last layer's pool partial sums; NULL: avgpool */
        int parts_np;            /* pieces per channel */
        int parts_ocpt;          /* conv3x3_relu_tasks_parts' channels a thread; 0: tiled (np pieces a channel) */
        bool tiled[ZCP_MODEL_MAX_LAYERS];   /* the layer runs the tiled kernel (convtile.cu), with tile[l] */
        float *packed;                      /* the tiled layers' weights packed (ctile_pack), one allocation */
        const float *wpk[ZCP_MODEL_MAX_LAYERS];
        struct ctile tile[ZCP_MODEL_MAX_LAYERS];
        bool pdl;                /* layers and head launched dependent (klaunch; compute 9.0+, unless ZCP_PDL=0) */
        bool head_cluster;       /* the head as one cluster (fc_head_cluster) where it has pool parts */
        size_t dev_bytes;
        /* The fused path: one kernel for the whole network. */
        enum zcp_k_net_path path;
        bool fused_ok;           /* every size fits the fused kernel's int indexing */
        uint32_t fused_blocks, fused_default;
        float *fused_act;        /* every conv layer's output, one after the other */
        size_t fused_off[ZCP_MODEL_MAX_LAYERS];
        struct fused_plan *plan; /* device copy of the plan for fused_blocks */
        uint32_t *ctr;           /* task counter, then a counter per stage, each on its own line; zero between launches */
};

void zcp_k_net_free(struct zcp_k_net *net)
{
        if (!net)
                return;
        cudaFree(net->weights);
        cudaFree(net->act[0]);
        cudaFree(net->act[1]);
        cudaFree(net->pooled);
        cudaFree(net->probs);
        cudaFree(net->sync);
        cudaFree(net->parts);
        cudaFree(net->packed);
        cudaFree(net->fused_act);
        cudaFree(net->plan);
        cudaFree(net->ctr);
        free(net);
}

size_t zcp_k_net_device_bytes(const struct zcp_k_net *net)
{
        return net ? net->dev_bytes : 0;
}

const float *zcp_k_net_probs(const struct zcp_k_net *net)
{
        return net->probs;
}

static cudaError_t net_alloc(struct zcp_k_net *net, float **ret, size_t floats, const char *what, char *errbuf,
                             size_t errlen)
{
        cudaError_t e = kmalloc((void **)ret, floats * sizeof(float), what, errbuf, errlen);

        if (e == cudaSuccess)
                net->dev_bytes += floats * sizeof(float);
        return e;
}

/* The fused plan for `blocks` blocks, uploaded (synchronous). */
static cudaError_t fused_plan_upload(struct zcp_k_net *net, uint32_t blocks)
{
        struct fused_plan p;
        const uint32_t L = net->layers;
        int t = 0;

        memset(&p, 0, sizeof(p));
        p.convs = (int)L;
        p.stages = (int)L + 2;
        for (uint32_t l = 0; l < L; l++) {
                struct fused_conv *c = &p.conv[l];
                uint32_t split, ocpt;
                /* The layered path's split (1, 2, 4 or 8); the kernel holds 2 channels per thread once split. */
                conv_split_rule(net->in_ch[l], net->w[l], net->h[l], net->out_ch[l], net->stride[l], &split, &ocpt);
                ocpt = split >= 2 ? 2 : 1;
                c->in = l == 0 ? NULL : net->fused_act + net->fused_off[l - 1];
                c->w = net->cw[l];
                c->b = net->cb[l];
                c->out = net->fused_act + net->fused_off[l];
                c->C = (int)net->in_ch[l];
                c->W = (int)net->w[l];
                c->H = (int)net->h[l];
                c->O = (int)net->out_ch[l];
                c->s = (int)net->stride[l];
                c->OW = (int)net->w[l + 1];
                c->OH = (int)net->h[l + 1];
                c->S = (int)split;
                c->OCPT = (int)ocpt;
                const long long units = (long long)((c->O + c->OCPT - 1) / c->OCPT) * c->OW * c->OH;
                const long long per_vb = (long long)(FUSED_THREADS / 32 / c->S) * 32;
                c->nvb = (int)((units + per_vb - 1) / per_vb);
                p.first[l] = t;
                t += c->nvb < (int)blocks ? c->nvb : (int)blocks;
        }
        p.pool_in = net->fused_act + net->fused_off[L - 1];
        p.pool_ch = (int)net->out_ch[L - 1];
        p.pool_hw = (int)(net->w[L] * net->h[L]);
        p.pooled = net->pooled;
        p.first[L] = t;
        t += (p.pool_ch + FUSED_THREADS / 32 - 1) / (FUSED_THREADS / 32);
        p.fw = net->fw;
        p.fb = net->fb;
        p.classes = (int)net->classes;
        p.fc_in = (int)net->fc_in;
        p.probs = net->probs;
        p.first[L + 1] = t;
        t += (p.classes + FUSED_THREADS / 32 - 1) / (FUSED_THREADS / 32);
        p.first[L + 2] = t;
        return cudaMemcpy(net->plan, &p, sizeof(p), cudaMemcpyHostToDevice);
}

/*
 * The fused path's buffers and plan (the layered path stays the default).
 * A network whose sizes overflow the kernel's int indexing keeps fused_ok
 * false: zcp_k_net_set_path refuses it.
 */
static cudaError_t fused_new(struct zcp_k_net *net, char *errbuf, size_t errlen)
{
        size_t total = 0;
        int dev = 0, sms = 0, occ = 0;
        cudaError_t e;

        net->path = ZCP_K_NET_LAYERS;
        net->fused_ok = (size_t)net->classes * net->fc_in <= INT_MAX;
        for (uint32_t l = 0; l < net->layers; l++) {
                const size_t in = (size_t)net->in_ch[l] * net->w[l] * net->h[l];
                const size_t out = (size_t)net->out_ch[l] * net->w[l + 1] * net->h[l + 1];
                net->fused_ok &= in <= INT_MAX / 2 && out <= INT_MAX / 2 && net->w[l] * (size_t)net->h[l] <= INT_MAX / 2;
                net->fused_off[l] = total;
                total += (out + 31) & ~(size_t)31;   /* each layer on its own 128-byte lines */
        }
        if ((e = net_alloc(net, &net->fused_act, total, "zcnet fused activations", errbuf, errlen)) ||
            (e = kmalloc((void **)&net->plan, sizeof(struct fused_plan), "zcnet fused plan", errbuf, errlen)) ||
            (e = kmalloc((void **)&net->ctr, sizeof(uint32_t) * FUSED_LINE * (FUSED_STAGES + 1),
                         "zcnet fused counters", errbuf, errlen)))
                return e;
        net->dev_bytes += sizeof(struct fused_plan) + sizeof(uint32_t) * FUSED_LINE * (FUSED_STAGES + 1);
        if ((e = cudaMemset(net->ctr, 0, sizeof(uint32_t) * FUSED_LINE * (FUSED_STAGES + 1))) != cudaSuccess ||
            (e = cudaGetDevice(&dev)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
            (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, net_fused, FUSED_THREADS, 0)) != cudaSuccess) {
                kerr(errbuf, errlen, "zcnet fused path: %s", cudaGetErrorString(e));
                return e;
        }
        if (occ < 1 || sms < 1) {
                kerr(errbuf, errlen, "zcnet fused path: no block of %d threads fits a multiprocessor", FUSED_THREADS);
                return cudaErrorInvalidConfiguration;
        }
        net->fused_default = (uint32_t)sms * (uint32_t)(occ < FUSED_BLOCKS_PER_SM ? occ : FUSED_BLOCKS_PER_SM);
        net->fused_blocks = net->fused_default;
        if ((e = fused_plan_upload(net, net->fused_blocks)) != cudaSuccess)
                kerr(errbuf, errlen, "uploading the zcnet fused plan: %s", cudaGetErrorString(e));
        return e;
}

int zcp_k_net_set_path(struct zcp_k_net *net, enum zcp_k_net_path path)
{
        if (path != ZCP_K_NET_LAYERS && path != ZCP_K_NET_FUSED)
                return cudaErrorInvalidValue;
        if (path == ZCP_K_NET_FUSED && !net->fused_ok)
                return cudaErrorNotSupported;
        net->path = path;
        return cudaSuccess;
}

bool zcp_k_net_head_clustered(const struct zcp_k_net *net)
{
        return net->head_cluster && net->parts && net->parts_ocpt == 0;
}

uint32_t zcp_k_net_mma_layers(const struct zcp_k_net *net)
{
        uint32_t n = 0;

        for (uint32_t l = 0; l < net->layers; l++)
                n += net->tiled[l] && net->tile[l].mma;
        return n;
}

enum zcp_k_net_path zcp_k_net_get_path(const struct zcp_k_net *net)
{
        return net->path;
}

int zcp_k_net_set_fused_blocks(struct zcp_k_net *net, uint32_t blocks)
{
        cudaError_t e;

        if (blocks == 0)
                blocks = net->fused_default;
        if (blocks > (1u << 20))
                return cudaErrorInvalidValue;
        if ((e = fused_plan_upload(net, blocks)) != cudaSuccess)
                return e;
        net->fused_blocks = blocks;
        return cudaSuccess;
}

uint32_t zcp_k_net_fused_blocks(const struct zcp_k_net *net)
{
        return net->fused_blocks;
}

int zcp_k_net_new(const struct zcp_model *m, uint32_t in_w, uint32_t in_h, struct zcp_k_net **ret_net,
                  char *errbuf, size_t errlen)
{
        struct zcp_k_net *net;
        size_t total = 0, off = 0, max_act = 0;
        uint32_t ch = 3;
        cudaError_t e;

        if (!m || m->conv_count == 0 || m->conv_count > ZCP_MODEL_MAX_LAYERS || m->classes == 0 || in_w == 0 ||
            in_h == 0) {
                kerr(errbuf, errlen, "zcnet: unusable model for input %ux%u", in_w, in_h);
                return cudaErrorInvalidValue;
        }
        net = (struct zcp_k_net *)calloc(1, sizeof(*net));
        if (!net) {
                kerr(errbuf, errlen, "out of host memory");
                return cudaErrorMemoryAllocation;
        }
        net->layers = m->conv_count;
        net->w[0] = in_w;
        net->h[0] = in_h;
        for (uint32_t l = 0; l < m->conv_count; l++) {
                const struct zcp_conv_layer *c = &m->conv[l];
                if (c->in_ch != ch || c->stride == 0) {
                        kerr(errbuf, errlen, "zcnet: conv%u takes %u channels (stride %u), the input has %u", l,
                             c->in_ch, c->stride, ch);
                        zcp_k_net_free(net);
                        return cudaErrorInvalidValue;
                }
                net->in_ch[l] = c->in_ch;
                net->out_ch[l] = c->out_ch;
                net->stride[l] = c->stride;
                net->w[l + 1] = (net->w[l] - 1) / c->stride + 1;
                net->h[l + 1] = (net->h[l] - 1) / c->stride + 1;
                if ((size_t)c->out_ch * net->w[l + 1] * net->h[l + 1] > max_act)
                        max_act = (size_t)c->out_ch * net->w[l + 1] * net->h[l + 1];
                total += (size_t)c->out_ch * c->in_ch * 9 + c->out_ch;
                ch = c->out_ch;
        }
        if (m->fc_in != ch) {
                kerr(errbuf, errlen, "zcnet: fc takes %u inputs, the last conv gives %u", m->fc_in, ch);
                zcp_k_net_free(net);
                return cudaErrorInvalidValue;
        }
        net->classes = m->classes;
        net->fc_in = m->fc_in;
        net->in_w = in_w;
        net->in_h = in_h;
        total += 3 + (size_t)m->classes * m->fc_in + m->classes;   /* 3: the fc weights start 16-byte aligned */

        if ((e = net_alloc(net, &net->weights, total, "zcnet weights", errbuf, errlen)) ||
            (e = net_alloc(net, &net->act[0], max_act, "zcnet activations", errbuf, errlen)) ||
            (e = net_alloc(net, &net->act[1], max_act, "zcnet activations", errbuf, errlen)) ||
            (e = net_alloc(net, &net->pooled, m->fc_in, "zcnet pooled features", errbuf, errlen)) ||
            (e = net_alloc(net, &net->probs, m->classes, "zcnet probabilities", errbuf, errlen)) ||
            (e = net_alloc(net, (float **)&net->sync, 1, "zcnet fc counter", errbuf, errlen)))
                goto fail;
        if ((e = cudaMemset(net->sync, 0, sizeof(uint32_t))) != cudaSuccess) {
                kerr(errbuf, errlen, "clearing the fc counter: %s", cudaGetErrorString(e));
                goto fail;
        }
        net->pdl = kpdl_enabled();
        net->head_cluster = head_cluster_fits(m->fc_in, m->classes) && head_cluster_runs(net->pdl);
        if (conv_tiled_on()) {
                if ((e = (cudaError_t)ctile_init()) != cudaSuccess) {
                        kerr(errbuf, errlen, "zcnet: the tiled convolution's shared memory: %s", cudaGetErrorString(e));
                        goto fail;
                }
                size_t packed = 0;
                const bool mma = ctile_mma_on();
                for (uint32_t l = 0; l < net->layers; l++) {
                        const int C = (int)net->in_ch[l], W = (int)net->w[l], H = (int)net->h[l];
                        const int O = (int)net->out_ch[l], s = (int)net->stride[l];
                        /* The tensor-core loop where it plans the layer (ZCP_CONV_MMA=0: not; RESULTS.md run 31-32). */
                        net->tiled[l] = (mma && ctile_plan(C, W, H, O, s, CTILE_MMA, &net->tile[l])) ||
                                        ctile_plan(C, W, H, O, s, 0, &net->tile[l]);
                        if (net->tiled[l])
                                packed += ctile_pack_floats(&net->tile[l], C, O);
                }
                if (packed && (e = net_alloc(net, &net->packed, packed, "zcnet packed weights", errbuf, errlen)))
                        goto fail;
                packed = 0;
                for (uint32_t l = 0; l < net->layers; l++) {
                        if (!net->tiled[l])
                                continue;
                        const size_t n = ctile_pack_floats(&net->tile[l], (int)net->in_ch[l], (int)net->out_ch[l]);
                        float *h = (float *)malloc(n * sizeof(float));
                        if (!h) {
                                kerr(errbuf, errlen, "out of host memory");
                                e = cudaErrorMemoryAllocation;
                                goto fail;
                        }
                        ctile_pack(&net->tile[l], m->conv[l].weight, (int)net->in_ch[l], (int)net->out_ch[l], h);
                        e = kupload(net->packed + packed, h, n * sizeof(float), "packed conv weights", errbuf, errlen);
                        free(h);
                        if (e)
                                goto fail;
                        net->wpk[l] = net->packed + packed;
                        packed += n;   /* a multiple of 4 floats: every layer's start stays 16-byte aligned */
                }
        }
        {
                /* The pool's sums in the last layer's epilogue, finished by the head (ZCP_POOL_IN_HEAD=0: avgpool). */
                const char *env = getenv("ZCP_POOL_IN_HEAD");
                const uint32_t l = net->layers - 1;
                struct fused_conv L;
                if (env && strcmp(env, "0") == 0) {
                        /* the separate avgpool */
                } else if (net->tiled[l] && m->fc_in <= FC_PARTS_MAX) {
                        net->parts_np = net->tile[l].tx * net->tile[l].ty;
                        net->parts_ocpt = 0;
                        if ((e = net_alloc(net, &net->parts, (size_t)net->out_ch[l] * net->parts_np, "zcnet pool sums",
                                           errbuf, errlen)))
                                goto fail;
                } else if (!net->tiled[l] && m->fc_in <= FC_PARTS_MAX &&
                           conv_parts_plan(NULL, net->in_ch[l], net->w[l], net->h[l], NULL, NULL, net->out_ch[l],
                                           net->stride[l], NULL, &L, &net->parts_np)) {
                        net->parts_ocpt = L.OCPT;
                        const size_t rows = (size_t)((L.O + L.OCPT - 1) / L.OCPT) * L.OCPT;
                        if ((e = net_alloc(net, &net->parts, rows * net->parts_np, "zcnet pool sums", errbuf,
                                           errlen)))
                                goto fail;
                }
        }
        for (uint32_t l = 0; l < m->conv_count; l++) {
                const struct zcp_conv_layer *c = &m->conv[l];
                const size_t nw = (size_t)c->out_ch * c->in_ch * 9;
                if ((e = kupload(net->weights + off, c->weight, nw * sizeof(float), "conv weights", errbuf, errlen)))
                        goto fail;
                net->cw[l] = net->weights + off;
                off += nw;
                if ((e = kupload(net->weights + off, c->bias, c->out_ch * sizeof(float), "conv biases", errbuf,
                                 errlen)))
                        goto fail;
                net->cb[l] = net->weights + off;
                off += c->out_ch;
        }
        off = (off + 3) & ~(size_t)3;
        if ((e = kupload(net->weights + off, m->fc_weight, (size_t)m->classes * m->fc_in * sizeof(float),
                         "fc weights", errbuf, errlen)))
                goto fail;
        net->fw = net->weights + off;
        off += (size_t)m->classes * m->fc_in;
        if ((e = kupload(net->weights + off, m->fc_bias, m->classes * sizeof(float), "fc biases", errbuf, errlen)))
                goto fail;
        net->fb = net->weights + off;
        if ((e = fused_new(net, errbuf, errlen)) != cudaSuccess)
                goto fail;
        *ret_net = net;
        return cudaSuccess;
fail:
        zcp_k_net_free(net);
        return e;
}

int zcp_k_net_features(const struct zcp_k_net *net, const float *tensor_dev, void *stream)
{
        const float *in = tensor_dev;
        int e;

        for (uint32_t l = 0; l < net->layers; l++) {
                float *out = net->act[l & 1];
                const bool last = l == net->layers - 1;
                struct fused_conv L;
                int np;
                if (net->tiled[l]) {
                        e = ctile_launch(&net->tile[l], in, (int)net->in_ch[l], (int)net->w[l], (int)net->h[l],
                                         net->cw[l], net->wpk[l], net->cb[l], (int)net->out_ch[l],
                                         (int)net->stride[l], out, last ? net->parts : NULL, stream, net->pdl);
                        if (e || (last && net->parts))
                                return e;
                        in = out;
                        continue;
                }
                if (last && net->parts &&
                    conv_parts_plan(in, net->in_ch[l], net->w[l], net->h[l], net->cw[l], net->cb[l], net->out_ch[l],
                                    net->stride[l], out, &L, &np))
                        return conv3x3_relu_parts(L, net->parts, np, (cudaStream_t)stream, net->pdl);
                e = conv_variant(in, net->in_ch[l], net->w[l], net->h[l], net->cw[l], net->cb[l], net->out_ch[l],
                                 net->stride[l], out, 0, 0, (cudaStream_t)stream, net->pdl);
                if (e)
                        return e;
                in = out;
        }
        return zcp_k_avgpool(in, net->out_ch[net->layers - 1], net->w[net->layers], net->h[net->layers],
                             net->pooled, stream);
}

int zcp_k_net_head(const struct zcp_k_net *net, uint32_t k, struct zcp_result *stage_dev,
                   struct zcp_result *publish_dev, void *stream)
{
        return zcp_k_net_head_meet(net, k, stage_dev, publish_dev, NULL, stream);
}

bool zcp_k_meet_enabled(void)
{
        const char *env = getenv("ZCP_MEET");

        return !(env && strcmp(env, "0") == 0);
}

int zcp_k_net_head_meet(const struct zcp_k_net *net, uint32_t k, struct zcp_result *stage_dev,
                        struct zcp_result *publish_dev, uint32_t *meet_dev, void *stream)
{
        if (net->parts) {
                const uint32_t l = net->layers - 1;
                const struct pool_parts pp = { net->parts, net->pooled, net->parts_np,
                                               (int)(net->w[l + 1] * net->h[l + 1]), net->parts_ocpt };
                return launch_head(net->pooled, net->fc_in, net->fw, net->fb, net->classes, k, net->probs, net->sync,
                                   stage_dev, publish_dev, meet_dev, &pp, (cudaStream_t)stream, net->pdl,
                                   net->head_cluster);
        }
        return launch_head(net->pooled, net->fc_in, net->fw, net->fb, net->classes, k, net->probs, net->sync,
                           stage_dev, publish_dev, meet_dev, NULL, (cudaStream_t)stream, net->pdl, false);
}

int zcp_k_net_forward(const struct zcp_k_net *net, const float *tensor_dev, uint32_t k, struct zcp_result *stage_dev,
                      struct zcp_result *publish_dev, void *stream)
{
        if (net->path == ZCP_K_NET_FUSED) {
                if (!tensor_dev || !stage_dev)
                        return cudaErrorInvalidValue;
                if (k > ZCP_TOPK_MAX)
                        k = ZCP_TOPK_MAX;
                if (k > net->classes)
                        k = net->classes;
                net_fused<<<net->fused_blocks, FUSED_THREADS, 0, (cudaStream_t)stream>>>(
                        net->plan, tensor_dev, (int)k, stage_dev, publish_dev, net->ctr);
                return cudaGetLastError();
        }
        int e = zcp_k_net_features(net, tensor_dev, stream);

        return e ? e : zcp_k_net_head(net, k, stage_dev, publish_dev, stream);
}
