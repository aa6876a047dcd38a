/* SPDX-License-Identifier: MIT */
/*
 * A plan's convolutions (model/plan.h ZCP_OP_CONV), three kernel families:
 *
 * conv_gemm: dense convolutions as a matrix product of the output pixels (M) by the output
 *   channels (N) over the K = kh * kw * cin terms, in NHWC: A[m][k] is the input value output
 *   pixel m multiplies by weight row k (a pointwise convolution reads pixel m's channels as
 *   they lie; any other gathers them, out-of-image taps as zeros, im2col on the fly), B[k][n]
 *   the weights as they lie (HWIO). A block computes a BM x BN tile, 16 terms at a time through
 *   shared memory (the next 16 loaded into registers meanwhile), by one of two engines: FFMA
 *   (each thread a TM x 4 piece, float32 fused multiply-adds) or TF32X3 (each warp m16n8k8
 *   tensor-core products with the error-compensated split, three per step: lo*hi, hi*lo, hi*hi).
 *   Where the tiles alone would leave the GPU mostly idle, the terms are split over blocks
 *   (split-K, gemm_split) and the last block of a tile adds the splits' sums in a fixed order.
 *   The tile then goes through shared memory once more so that the epilogue (bias, activation,
 *   residual: plan.h's order) writes whole pixels' channel runs. The input scale (a
 *   squeeze-excite's) multiplies each A value as it is loaded.
 * conv_matvec: a dense 1x1 convolution of a single pixel (the squeeze-excite's two small
 *   layers): the scaled input in shared memory, 32 outputs a block, 32 warps each summing every
 *   32nd term, the 32 partial sums added in a fixed order.
 * conv_dw: depthwise convolutions, a thread per run of OX output pixels and 1 or 4 channels
 *   (float4 where every view and weight row is 16-byte aligned), the input columns the run
 *   touches held in registers across the kernel's columns; 3x3 and 5x5 at stride 1 and 2 as
 *   templates, anything else through a generic loop.
 *
 * Sums are reassociated (tiles of 16 terms, fused multiply-adds, tensor cores) as plan.h
 * allows; everything after the sum is the reference's float operations (--fmad=false).
 */
#include "plan.cuh"

#define GT  256          /* threads of a gemm block */
#define GBK 16           /* terms per step */
#define DWT 256          /* threads of a depthwise block */

/* ------------------------------------------------------------------ gemm */

static __device__ __forceinline__ uint32_t tf32_of(float x)
{
        uint32_t r = __float_as_uint(x);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
#endif
        return r;
}

/* x = hi + lo, both TF32. (Unused, so unreferenced, in code for GPUs before compute 8.0.) */
static __device__ __forceinline__ __attribute__((unused)) void tf32_split(float x, uint32_t &hi, uint32_t &lo)
{
        hi = tf32_of(x);
        lo = tf32_of(x - __uint_as_float(hi));
}

static __device__ __forceinline__ __attribute__((unused)) void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/*
 * BM x BN tile, warps WGM x WGN (TF32X3: each warp a (BM / WGM) x (BN / WGN) piece); MMA: the
 * tensor-core engine where the code is for compute 8.0+ (else FFMA); IM2COL: the gathering
 * A loader (any kernel size, padding, stride) instead of a pointwise one; SPLIT: split-K (a
 * template of its own: its few registers more cost the big tiles their third block a
 * multiprocessor, measured, so the others are built without it).
 */
template <int BM, int BN, int WGM, int WGN, bool MMA, bool IM2COL, bool SPLIT>
static __global__ void __launch_bounds__(GT) conv_gemm(const kconv a)
{
        constexpr int AST = GBK + 4, BST = BN + 8, CST = BN + 4;
        constexpr int ASZ = BM * AST, BSZ = GBK * BST, CSZ = BM * CST;
        constexpr int SMF = ASZ + BSZ > CSZ ? ASZ + BSZ : CSZ;
        constexpr int AR = BM * GBK / GT;   /* A rows a thread loads: rows ar + 16 i, column ak */
        constexpr int BR = GBK * BN / GT;   /* B values a thread loads */
        static_assert(WGM * WGN == GT / 32, "8 warps");
        static_assert(AR >= 1 && BR >= 1 && BM % (WGM * 16) == 0 && BN % (WGN * 8) == 0, "tile shape");
        static_assert(GT % BN == 0, "a thread's epilogue values in one column");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        constexpr bool use_mma = MMA;
#else
        constexpr bool use_mma = false;
#endif
        constexpr int MT = BM / WGM / 16, NT = BN / WGN / 8;
        constexpr int TNX = BN / 4, TMY = GT / TNX, TM = BM / TMY;
        __shared__ __align__(16) float sm[SMF];
        float *const As = sm, *const Bs = sm + ASZ, *const Cs = sm;
        const int tid = threadIdx.x, ak = tid % GBK, ar = tid / GBK;
        const uint32_t m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
        const uint32_t kbeg = SPLIT ? blockIdx.z * a.kchunk : 0, kend = SPLIT ? min(a.K, kbeg + a.kchunk) : a.K;
        int iy0[AR], ix0[AR];
        bool mok[AR];
        float ra[AR], rb[BR];
        /* The weights are the net's constants: the bias of the thread's epilogue column (tid % BN, the
         * same for all its values) is read before the wait, off the epilogue's path. */
        const uint32_t nb = n0 + (uint32_t)(tid % BN);
        const float bias = a.bias && nb < a.cout ? __ldg(a.bias + nb) : 0.0f;

        /* where each A row starts: arithmetic on the launch's constants, before the wait too */
#pragma unroll
        for (int i = 0; i < AR; i++) {
                const uint32_t m = m0 + ar + 16 * i;
                const uint32_t oy = m / a.ow, ox = m - oy * a.ow;
                mok[i] = m < a.M;
                iy0[i] = (int)(oy * a.sh) - (int)a.pad_t;
                ix0[i] = (int)(ox * a.sw) - (int)a.pad_l;
        }
        kpdl_wait();

        auto load = [&](uint32_t k0) {
                const uint32_t kk = k0 + ak;
                const bool kok = kk < kend;
                if (!IM2COL) {
                        /* pointwise, no padding: term kk is channel kk of the pixel */
                        const float sc = a.scale && kok ? a.scale[kk] : 1.0f;
#pragma unroll
                        for (int i = 0; i < AR; i++) {
                                float v = 0.0f;
                                if (mok[i] && kok) {
                                        v = a.in[((size_t)iy0[i] * a.iw + (uint32_t)ix0[i]) * a.in_stride + kk];
                                        if (a.scale)
                                                v = v * sc;
                                }
                                ra[i] = v;
                        }
                } else {
                        uint32_t ci = 0, kx = 0, ky = 0;
                        float sc = 1.0f;
                        if (kok) {
                                const uint32_t t = kk / a.cin;
                                ci = kk - t * a.cin;
                                ky = t / a.kw;
                                kx = t - ky * a.kw;
                                if (a.scale)
                                        sc = a.scale[ci];
                        }
#pragma unroll
                        for (int i = 0; i < AR; i++) {
                                const int iy = iy0[i] + (int)ky, ix = ix0[i] + (int)kx;
                                float v = 0.0f;
                                if (kok && mok[i] && iy >= 0 && iy < (int)a.ih && ix >= 0 && ix < (int)a.iw) {
                                        v = a.in[((size_t)iy * a.iw + (uint32_t)ix) * a.in_stride + ci];
                                        if (a.scale)
                                                v = v * sc;
                                }
                                ra[i] = v;
                        }
                }
#pragma unroll
                for (int j = 0; j < BR; j++) {
                        const int e = tid + j * GT, bk = e / BN, bn = e % BN;
                        const uint32_t k = k0 + (uint32_t)bk, n = n0 + (uint32_t)bn;
                        rb[j] = k < kend && n < a.cout ? __ldg(a.w + (size_t)k * a.cout + n) : 0.0f;
                }
        };
        auto store = [&]() {
#pragma unroll
                for (int i = 0; i < AR; i++)
                        As[(ar + 16 * i) * AST + ak] = ra[i];
#pragma unroll
                for (int j = 0; j < BR; j++) {
                        const int e = tid + j * GT;
                        Bs[(e / BN) * BST + e % BN] = rb[j];
                }
        };

        const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
        const int wm = warp % WGM, wn = warp / WGM;
        const int tx = tid % TNX, ty = tid / TNX;
        float accm[use_mma ? MT : 1][use_mma ? NT : 1][4];
        float accf[use_mma ? 1 : TM][4];

#pragma unroll
        for (int i = 0; i < (use_mma ? MT : 1); i++)
#pragma unroll
                for (int j = 0; j < (use_mma ? NT : 1); j++)
#pragma unroll
                        for (int q = 0; q < 4; q++)
                                accm[i][j][q] = 0.0f;
#pragma unroll
        for (int i = 0; i < (use_mma ? 1 : TM); i++)
#pragma unroll
                for (int q = 0; q < 4; q++)
                        accf[i][q] = 0.0f;

        load(kbeg);
        for (uint32_t k0 = kbeg; k0 < kend; k0 += GBK) {
                store();
                __syncthreads();
                if (k0 + GBK < kend)
                        load(k0 + GBK);
                if constexpr (use_mma) {
#pragma unroll
                        for (int ks = 0; ks < GBK; ks += 8) {
                                uint32_t ah[MT][4], al[MT][4], bh[NT][2], bl[NT][2];
#pragma unroll
                                for (int mt = 0; mt < MT; mt++) {
                                        const int r = (wm * MT + mt) * 16 + g;
                                        tf32_split(As[r * AST + ks + t4], ah[mt][0], al[mt][0]);
                                        tf32_split(As[(r + 8) * AST + ks + t4], ah[mt][1], al[mt][1]);
                                        tf32_split(As[r * AST + ks + t4 + 4], ah[mt][2], al[mt][2]);
                                        tf32_split(As[(r + 8) * AST + ks + t4 + 4], ah[mt][3], al[mt][3]);
                                }
#pragma unroll
                                for (int nt = 0; nt < NT; nt++) {
                                        const int c = (wn * NT + nt) * 8 + g;
                                        tf32_split(Bs[(ks + t4) * BST + c], bh[nt][0], bl[nt][0]);
                                        tf32_split(Bs[(ks + t4 + 4) * BST + c], bh[nt][1], bl[nt][1]);
                                }
#pragma unroll
                                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                                        for (int nt = 0; nt < NT; nt++) {
                                                mma_tf32(accm[mt][nt], al[mt], bh[nt]);
                                                mma_tf32(accm[mt][nt], ah[mt], bl[nt]);
                                                mma_tf32(accm[mt][nt], ah[mt], bh[nt]);
                                        }
                        }
                } else {
#pragma unroll
                        for (int k = 0; k < GBK; k++) {
                                const float4 b = *(const float4 *)&Bs[k * BST + tx * 4];
#pragma unroll
                                for (int i = 0; i < TM; i++) {
                                        const float x = As[(ty + i * TMY) * AST + k];
                                        accf[i][0] = __fmaf_rn(x, b.x, accf[i][0]);
                                        accf[i][1] = __fmaf_rn(x, b.y, accf[i][1]);
                                        accf[i][2] = __fmaf_rn(x, b.z, accf[i][2]);
                                        accf[i][3] = __fmaf_rn(x, b.w, accf[i][3]);
                                }
                        }
                }
                __syncthreads();
        }

        /* The tile through shared memory (As/Bs are free: every thread is past the last barrier). */
        if constexpr (use_mma) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                        for (int nt = 0; nt < NT; nt++) {
                                const int r = (wm * MT + mt) * 16 + g, c = (wn * NT + nt) * 8 + 2 * t4;
                                Cs[r * CST + c] = accm[mt][nt][0];
                                Cs[r * CST + c + 1] = accm[mt][nt][1];
                                Cs[(r + 8) * CST + c] = accm[mt][nt][2];
                                Cs[(r + 8) * CST + c + 1] = accm[mt][nt][3];
                        }
        } else {
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                        for (int q = 0; q < 4; q++)
                                Cs[(ty + i * TMY) * CST + tx * 4 + q] = accf[i][q];
        }
        __syncthreads();
        const float *part = NULL;   /* split-K: the tile's partial sums, [splits][BM * BN] */
        if (SPLIT) {
                __shared__ bool s_last;
                const uint32_t tile = blockIdx.y * gridDim.x + blockIdx.x;
                float *const mine = a.partial + ((size_t)tile * a.splits + blockIdx.z) * (BM * BN);
                for (int e = tid; e < BM * BN; e += GT)
                        mine[e] = Cs[(e / BN) * CST + e % BN];
                __threadfence();
                __syncthreads();
                if (tid == 0)
                        s_last = atomicAdd(&a.done[tile], 1u) == a.splits - 1;
                __syncthreads();
                if (!s_last)
                        return;
                __threadfence();
                if (tid == 0)
                        a.done[tile] = 0;   /* every split of the tile is in: ready for the next frame */
                part = a.partial + (size_t)tile * a.splits * (BM * BN);
        }
        /*
         * In groups of EQ values a thread: every load of a group (the split sums, the residuals) before
         * its first store. The compiler may not move a load above a store (a residual may lie in the
         * output tensor; for all it knows the output aliases whatever is read), so one value at a time
         * waited a round trip to memory per value, a group waits one.
         */
        constexpr int EPI = BM * BN / GT, EQ = EPI < 4 ? EPI : 4;
        static_assert(EPI % EQ == 0, "whole groups");
        for (int e0 = tid; e0 < BM * BN; e0 += EQ * GT) {
                float y[EQ], rv[EQ];
#pragma unroll
                for (int q = 0; q < EQ; q++) {
                        const int e = e0 + q * GT, r = e / BN, c = e % BN;
                        const uint32_t m = m0 + (uint32_t)r, n = n0 + (uint32_t)c;
                        y[q] = 0.0f;
                        rv[q] = 0.0f;
                        if (m < a.M && n < a.cout) {
                                if (SPLIT) {   /* in order of z, past L1 (other blocks wrote them) */
                                        y[q] = __ldcg(part + e);
                                        for (uint32_t z = 1; z < a.splits; z++)
                                                y[q] = y[q] + __ldcg(part + (size_t)z * (BM * BN) + e);
                                } else {
                                        y[q] = Cs[r * CST + c];
                                }
                                if (a.res)
                                        rv[q] = a.res[(size_t)m * a.res_stride + n];
                        }
                }
#pragma unroll
                for (int q = 0; q < EQ; q++) {
                        const int e = e0 + q * GT, r = e / BN, c = e % BN;
                        const uint32_t m = m0 + (uint32_t)r, n = n0 + (uint32_t)c;
                        if (m < a.M && n < a.cout) {
                                float v = y[q];
                                if (a.bias)
                                        v = v + bias;
                                v = kact_apply(a.act, v);
                                if (a.res)
                                        v = v + rv[q];
                                a.out[(size_t)m * a.out_stride + n] = v;
                        }
                }
        }
}

/* The tilings, by variant / 4 (variant % 4: bit 1 MMA, bit 0 IM2COL). */
static const struct {
        int bm, bn;
} gemm_tiles[] = { { 128, 64 }, { 64, 64 }, { 128, 32 }, { 64, 32 }, { 128, 16 }, { 64, 16 } };
#define GEMM_TILES ((int)(sizeof(gemm_tiles) / sizeof(gemm_tiles[0])))

typedef void (*gemm_fn)(const kconv);
#define GEMM_FNS(BM, BN, WGM, WGN, S)                                                                             \
        conv_gemm<BM, BN, WGM, WGN, false, false, S>, conv_gemm<BM, BN, WGM, WGN, false, true, S>,                \
                conv_gemm<BM, BN, WGM, WGN, true, false, S>, conv_gemm<BM, BN, WGM, WGN, true, true, S>
#define GEMM_NONE NULL, NULL, NULL, NULL

/* The kernels by variant: whole K, and split-K (built for the tilings GEMM_SPLIT_TILE names). */
static const gemm_fn gemm_fns[GEMM_TILES * 4] = {
        GEMM_FNS(128, 64, 4, 2, false), GEMM_FNS(64, 64, 2, 4, false), GEMM_FNS(128, 32, 4, 2, false),
        GEMM_FNS(64, 32, 4, 2, false),  GEMM_FNS(128, 16, 8, 1, false), GEMM_FNS(64, 16, 4, 2, false),
};
static const gemm_fn gemm_split_fns[GEMM_TILES * 4] = {
        GEMM_NONE, GEMM_NONE, GEMM_NONE, GEMM_FNS(64, 32, 4, 2, true), GEMM_NONE, GEMM_FNS(64, 16, 4, 2, true),
};

/* The tilings split-K is built for (gemm_split): the narrow ones small products pick. */
#define GEMM_SPLIT_TILE(t) ((t) == 3 || (t) == 5)

static gemm_fn gemm_kernel(int variant, uint32_t splits)
{
        if (variant < 0 || variant >= GEMM_TILES * 4)
                return NULL;
        return splits > 1 ? gemm_split_fns[variant] : gemm_fns[variant];
}

static cudaError_t gemm_launch(const klaunch_rec *r, bool pdl, cudaStream_t st)
{
        const gemm_fn f = gemm_kernel(r->variant, r->u.conv.splits);

        if (!f)
                return cudaErrorInvalidValue;
        klaunch(pdl, f, r->grid, GT, st, r->u.conv);
        return cudaGetLastError();
}

/*
 * Blocks of a whole-K variant resident a multiprocessor: its registers decide (the 128-row and
 * 64x64 tilings need 88-153 a thread, so 1 or 2 of them fit where a 64x16 block fits 4).
 */
static int gemm_resident(int variant)
{
        const gemm_fn f = gemm_kernel(variant, 1);
        int n = 0;

        if (!f || cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, GT, 0) != cudaSuccess || n < 1)
                return 1;
        return n;
}

/*
 * The tiling with the least estimated time: waves of blocks (as many resident a multiprocessor as
 * the variant's registers allow) times a block's work, its products plus its loads (which small
 * tiles pay more of per product). engine: variant % 4 (MMA, IM2COL).
 */
static int gemm_pick(uint32_t M, uint32_t N, uint32_t K, int engine, int sms)
{
        double best = 0.0;
        int pick = 0;

        for (int t = 0; t < GEMM_TILES; t++) {
                const double bm = gemm_tiles[t].bm, bn = gemm_tiles[t].bn;
                const double blocks = (double)((M + gemm_tiles[t].bm - 1) / gemm_tiles[t].bm) *
                                      (double)((N + gemm_tiles[t].bn - 1) / gemm_tiles[t].bn);
                const double waves = ceil(blocks / ((double)gemm_resident(t * 4 + engine) * sms));
                const double cost = waves * (double)((K + GBK - 1) / GBK) * (bm * bn + 8.0 * (bm + bn));
                if (t == 0 || cost < best) {
                        best = cost;
                        pick = t;
                }
        }
        return pick;
}

/*
 * Split-K where the tiles alone leave most of the GPU idle: a product of few output pixels over
 * many terms (the squeeze-excite's projections at 16x16 and 32x32: 32 blocks, 45 steps each,
 * ran at a step's latency, 45 us). Splits up to a wave of blocks (3 a multiprocessor: counting
 * the split kernels' own residency, 4-5, made more splits and the network slower, 787.5 -> 800.3
 * us on an H100), each at least 4 steps of terms, at most 16 (the last block reads them all).
 */
static void gemm_split(kconv *a, int variant, uint32_t blocks, int sms)
{
        const uint32_t steps = (a->K + GBK - 1) / GBK;
        uint32_t s = blocks && GEMM_SPLIT_TILE(variant / 4) ? (uint32_t)(3 * sms) / blocks : 1;

        s = s < 16 ? s : 16;
        s = s < steps / 4 ? s : steps / 4;
        if (s < 2) {
                a->splits = 1;
                a->kchunk = steps * GBK;
                return;
        }
        {
                const uint32_t per = (steps + s - 1) / s;   /* steps a split */
                a->kchunk = per * GBK;
                a->splits = (steps + per - 1) / per;
        }
}

/* ---------------------------------------------------------------- matvec */

#define MVT 1024          /* threads: 32 warps, each summing every 32nd term (latency, not bandwidth, bounds it) */
#define MVN 32            /* outputs a block */
#define MVPF 8            /* weights a thread reads before the wait: all of them up to K = 256 */

static __global__ void __launch_bounds__(MVT) conv_matvec(const kconv a)
{
        extern __shared__ float s_mv[];   /* [K] the scaled input, then [32][32] partial sums */
        float *const part = s_mv + a.K;
        const int tid = threadIdx.x, lane = tid & 31, slice = tid >> 5;
        const uint32_t n = blockIdx.x * MVN + (uint32_t)lane;
        float acc = 0.0f, wpre[MVPF];
        /* The weights are the net's constants: the bias and each thread's first MVPF weights are read
         * before the wait, so the products start as soon as the input is in shared memory. */
        const float bias = a.bias && n < a.cout ? __ldg(a.bias + n) : 0.0f;
#pragma unroll
        for (int j = 0; j < MVPF; j++) {
                const uint32_t k = (uint32_t)slice + (uint32_t)j * (MVT / 32);
                wpre[j] = n < a.cout && k < a.K ? __ldg(a.w + (size_t)k * a.cout + n) : 0.0f;
        }

        kpdl_wait();
        for (uint32_t k = tid; k < a.K; k += MVT) {
                float x = a.in[k];
                if (a.scale)
                        x = x * a.scale[k];
                s_mv[k] = x;
        }
        __syncthreads();
        if (n < a.cout) {
                uint32_t k = (uint32_t)slice;
#pragma unroll
                for (int j = 0; j < MVPF; j++, k += MVT / 32)
                        if (k < a.K)
                                acc = __fmaf_rn(s_mv[k], wpre[j], acc);
                for (; k < a.K; k += MVT / 32)
                        acc = __fmaf_rn(s_mv[k], __ldg(a.w + (size_t)k * a.cout + n), acc);
        }
        part[slice * 32 + lane] = acc;
        __syncthreads();
        if (slice == 0 && n < a.cout) {
                float y = part[lane];
                for (int j = 1; j < MVT / 32; j++)
                        y = y + part[j * 32 + lane];
                if (a.bias)
                        y = y + bias;
                y = kact_apply(a.act, y);
                if (a.res)
                        y = y + a.res[n];
                a.out[n] = y;
        }
}

/* ------------------------------------------------------------- depthwise */

template <int VEC>
static __device__ __forceinline__ void vload(float (&v)[VEC], const float *p)
{
        if constexpr (VEC == 4) {
                const float4 q = *(const float4 *)p;
                v[0] = q.x;
                v[1] = q.y;
                v[2] = q.z;
                v[3] = q.w;
        } else {
                v[0] = *p;
        }
}

template <int VEC>
static __device__ __forceinline__ void vldg(float (&v)[VEC], const float *p)
{
        if constexpr (VEC == 4) {
                const float4 q = __ldg((const float4 *)p);
                v[0] = q.x;
                v[1] = q.y;
                v[2] = q.z;
                v[3] = q.w;
        } else {
                v[0] = __ldg(p);
        }
}

/* bias (b: read by the caller before its wait), activation, residual and the store of VEC channels of
 * output pixel (oy, ox). */
template <int VEC>
static __device__ __forceinline__ void dw_out(const kconv &a, uint32_t oy, uint32_t ox, uint32_t c,
                                              const float (&s)[VEC], const float (&b)[VEC])
{
        const size_t px = (size_t)oy * a.ow + ox;
        float y[VEC], r[VEC];

        if (a.res)
                vload<VEC>(r, a.res + px * a.res_stride + c);
#pragma unroll
        for (int q = 0; q < VEC; q++) {
                y[q] = a.bias ? s[q] + b[q] : s[q];
                y[q] = kact_apply(a.act, y[q]);
                if (a.res)
                        y[q] = y[q] + r[q];
        }
        if constexpr (VEC == 4)
                *(float4 *)(a.out + px * a.out_stride + c) = make_float4(y[0], y[1], y[2], y[3]);
        else
                a.out[px * a.out_stride + c] = y[0];
}

/* KH x KW, stride S both ways, OX output pixels of a row a thread, VEC channels. */
template <int VEC, int KH, int KW, int S, int OX>
static __global__ void __launch_bounds__(DWT) conv_dw(const kconv a)
{
        constexpr int NC = (OX - 1) * S + KW;
        const uint32_t cv = a.cout / VEC, nxg = (a.ow + OX - 1) / OX;
        const uint32_t idx = blockIdx.x * DWT + threadIdx.x;
        const uint32_t cg = idx % cv, r = idx / cv, xg = r % nxg, oy = r / nxg;
        const uint32_t c = cg * VEC, ox0 = xg * OX;
        float bias[VEC] = {};

        /* The weights are the net's constants: the bias is read before the wait. */
        if (a.bias && idx < a.oh * nxg * cv)
                vldg<VEC>(bias, a.bias + c);
        kpdl_wait();
        if (idx >= a.oh * nxg * cv)
                return;
        const int ix0 = (int)(ox0 * S) - (int)a.pad_l;
        float acc[OX][VEC], sc[VEC];

#pragma unroll
        for (int o = 0; o < OX; o++)
#pragma unroll
                for (int q = 0; q < VEC; q++)
                        acc[o][q] = 0.0f;
        if (a.scale)
                vload<VEC>(sc, a.scale + c);
#pragma unroll
        for (int ky = 0; ky < KH; ky++) {
                const int iy = (int)(oy * S) - (int)a.pad_t + ky;
                float xv[NC][VEC];

                if (iy < 0 || iy >= (int)a.ih)
                        continue;   /* taps outside the image add nothing */
                const float *row = a.in + (size_t)iy * a.iw * a.in_stride + c;
#pragma unroll
                for (int j = 0; j < NC; j++) {
                        const int ix = ix0 + j;
                        if (ix >= 0 && ix < (int)a.iw) {
                                vload<VEC>(xv[j], row + (size_t)ix * a.in_stride);
                                if (a.scale)
#pragma unroll
                                        for (int q = 0; q < VEC; q++)
                                                xv[j][q] = xv[j][q] * sc[q];
                        } else {
#pragma unroll
                                for (int q = 0; q < VEC; q++)
                                        xv[j][q] = 0.0f;
                        }
                }
#pragma unroll
                for (int kx = 0; kx < KW; kx++) {
                        float wv[VEC];
                        vldg<VEC>(wv, a.w + (size_t)(ky * KW + kx) * a.cout + c);
#pragma unroll
                        for (int o = 0; o < OX; o++)
#pragma unroll
                                for (int q = 0; q < VEC; q++)
                                        acc[o][q] = __fmaf_rn(xv[o * S + kx][q], wv[q], acc[o][q]);
                }
        }
#pragma unroll
        for (int o = 0; o < OX; o++)
                if (ox0 + o < a.ow)
                        dw_out<VEC>(a, oy, ox0 + o, c, acc[o], bias);
}

/* Any kernel size and strides: a thread per output value. */
static __global__ void __launch_bounds__(DWT) conv_dw_any(const kconv a)
{
        const uint32_t idx = blockIdx.x * DWT + threadIdx.x;
        const uint32_t c = idx % a.cout, px = idx / a.cout, oy = px / a.ow, ox = px - oy * a.ow;
        const float bias[1] = { a.bias && idx < a.M * a.cout ? __ldg(a.bias + c) : 0.0f };

        kpdl_wait();
        if (idx >= a.M * a.cout)
                return;
        const float sc = a.scale ? a.scale[c] : 1.0f;
        float s[1] = { 0.0f };

        for (uint32_t ky = 0; ky < a.kh; ky++) {
                const int iy = (int)(oy * a.sh) - (int)a.pad_t + (int)ky;
                if (iy < 0 || iy >= (int)a.ih)
                        continue;
                for (uint32_t kx = 0; kx < a.kw; kx++) {
                        const int ix = (int)(ox * a.sw) - (int)a.pad_l + (int)kx;
                        float x;
                        if (ix < 0 || ix >= (int)a.iw)
                                continue;
                        x = a.in[((size_t)iy * a.iw + (uint32_t)ix) * a.in_stride + c];
                        if (a.scale)
                                x = x * sc;
                        s[0] = __fmaf_rn(x, __ldg(a.w + (size_t)(ky * a.kw + kx) * a.cout + c), s[0]);
                }
        }
        dw_out<1>(a, oy, ox, c, s, bias);
}

/* The templated shapes: variant = shape * 4 + (OX 4: 2) + (VEC 4: 1); DW_ANY the generic loop. */
static const struct {
        uint32_t k, s;
} dw_shapes[] = { { 3, 1 }, { 3, 2 }, { 5, 1 }, { 5, 2 } };
#define DW_SHAPES ((int)(sizeof(dw_shapes) / sizeof(dw_shapes[0])))
#define DW_ANY    1000

#define DW_CASE(T, K, S)                                                                                            \
        case T * 4 + 0:                                                                                             \
                klaunch(pdl, conv_dw<1, K, K, S, 1>, r->grid, DWT, st, r->u.conv);                                  \
                break;                                                                                              \
        case T * 4 + 1:                                                                                             \
                klaunch(pdl, conv_dw<4, K, K, S, 1>, r->grid, DWT, st, r->u.conv);                                  \
                break;                                                                                              \
        case T * 4 + 2:                                                                                             \
                klaunch(pdl, conv_dw<1, K, K, S, 4>, r->grid, DWT, st, r->u.conv);                                  \
                break;                                                                                              \
        case T * 4 + 3:                                                                                             \
                klaunch(pdl, conv_dw<4, K, K, S, 4>, r->grid, DWT, st, r->u.conv);                                  \
                break;

static cudaError_t dw_launch(const klaunch_rec *r, bool pdl, cudaStream_t st)
{
        switch (r->variant) {
                DW_CASE(0, 3, 1)
                DW_CASE(1, 3, 2)
                DW_CASE(2, 5, 1)
                DW_CASE(3, 5, 2)
        case DW_ANY:
                klaunch(pdl, conv_dw_any, r->grid, DWT, st, r->u.conv);
                break;
        default:
                return cudaErrorInvalidValue;
        }
        return cudaGetLastError();
}

/* ------------------------------------------------------------------ host */

static bool al4(const void *p)
{
        return ((uintptr_t)p & 15) == 0;
}

static const char *const gemm_names[] = {
        "gemm128x64-ffma",  "gemm128x64-ffma-im2col",  "gemm128x64-tf32x3",  "gemm128x64-tf32x3-im2col",
        "gemm64x64-ffma",   "gemm64x64-ffma-im2col",   "gemm64x64-tf32x3",   "gemm64x64-tf32x3-im2col",
        "gemm128x32-ffma",  "gemm128x32-ffma-im2col",  "gemm128x32-tf32x3",  "gemm128x32-tf32x3-im2col",
        "gemm64x32-ffma",   "gemm64x32-ffma-im2col",   "gemm64x32-tf32x3",   "gemm64x32-tf32x3-im2col",
        "gemm128x16-ffma",  "gemm128x16-ffma-im2col",  "gemm128x16-tf32x3",  "gemm128x16-tf32x3-im2col",
        "gemm64x16-ffma",   "gemm64x16-ffma-im2col",   "gemm64x16-tf32x3",   "gemm64x16-tf32x3-im2col",
};
static const char *const dw_names[] = {
        "dw3x3s1",     "dw3x3s1-v4",     "dw3x3s1-x4",     "dw3x3s1-v4x4",  "dw3x3s2", "dw3x3s2-v4",
        "dw3x3s2-x4",  "dw3x3s2-v4x4",   "dw5x5s1",        "dw5x5s1-v4",    "dw5x5s1-x4", "dw5x5s1-v4x4",
        "dw5x5s2",     "dw5x5s2-v4",     "dw5x5s2-x4",     "dw5x5s2-v4x4",
};

const char *kconv_plan(klaunch_rec *rec, bool depthwise, int gemm, int sms)
{
        kconv *a = &rec->u.conv;

        a->M = a->oh * a->ow;
        if (depthwise) {
                const bool vec = a->cout % 4 == 0 && a->in_stride % 4 == 0 && a->out_stride % 4 == 0 && al4(a->in) &&
                                 al4(a->out) && al4(a->w) && (!a->bias || al4(a->bias)) &&
                                 (!a->scale || al4(a->scale)) && (!a->res || (al4(a->res) && a->res_stride % 4 == 0));
                int shape = -1;

                a->K = a->kh * a->kw;
                rec->kind = KK_DW;
                rec->block = DWT;
                for (int t = 0; t < DW_SHAPES; t++)
                        if (a->kh == dw_shapes[t].k && a->kw == dw_shapes[t].k && a->sh == dw_shapes[t].s &&
                            a->sw == dw_shapes[t].s)
                                shape = t;
                if (shape < 0) {
                        rec->variant = DW_ANY;
                        rec->grid = dim3((unsigned)((a->M * a->cout + DWT - 1) / DWT));
                        return "dw-any";
                }
                {
                        const uint32_t vecw = vec ? 4 : 1, cv = a->cout / vecw;
                        /* runs of 4 pixels where that still leaves two blocks a multiprocessor */
                        const bool x4 = (uint64_t)a->oh * ((a->ow + 3) / 4) * cv >= 2ull * sms * DWT;
                        const uint32_t nxg = x4 ? (a->ow + 3) / 4 : a->ow;

                        rec->variant = shape * 4 + (x4 ? 2 : 0) + (vec ? 1 : 0);
                        rec->grid = dim3((unsigned)((a->oh * nxg * cv + DWT - 1) / DWT));
                        return dw_names[rec->variant];
                }
        }
        a->K = a->kh * a->kw * a->cin;
        if (a->M == 1 && a->kh == 1 && a->kw == 1 && a->ih == 1 && a->iw == 1 &&
            (a->K + MVT) * sizeof(float) <= 48 * 1024) {
                rec->kind = KK_MATVEC;
                rec->variant = 0;
                rec->block = MVT;
                rec->smem = (a->K + MVT) * sizeof(float);
                rec->grid = dim3((a->cout + MVN - 1) / MVN);
                return "matvec";
        }
        {
                const bool im2col = !(a->kh == 1 && a->kw == 1 && a->pad_t == 0 && a->pad_l == 0);
                const int engine = (gemm == ZCP_K_GEMM_TF32X3 ? 2 : 0) + (im2col ? 1 : 0);
                const int t = gemm_pick(a->M, a->cout, a->K, engine, sms);

                const uint32_t gx = (a->M + gemm_tiles[t].bm - 1) / gemm_tiles[t].bm,
                               gy = (a->cout + gemm_tiles[t].bn - 1) / gemm_tiles[t].bn;

                rec->kind = KK_GEMM;
                rec->variant = t * 4 + engine;
                rec->block = GT;
                gemm_split(a, rec->variant, gx * gy, sms);
                a->tile = (uint32_t)(gemm_tiles[t].bm * gemm_tiles[t].bn);
                rec->grid = dim3(gx, gy, a->splits);
                return gemm_names[rec->variant];
        }
}

int kconv_tilings(void)
{
        return GEMM_TILES;
}

bool kconv_retile(klaunch_rec *rec, int tile)
{
        kconv *a = &rec->u.conv;

        if (rec->kind != KK_GEMM || a->splits > 1 || tile < 0 || tile >= GEMM_TILES)
                return false;
        rec->variant = tile * 4 + rec->variant % 4;
        a->tile = (uint32_t)(gemm_tiles[tile].bm * gemm_tiles[tile].bn);
        rec->grid = dim3((a->M + gemm_tiles[tile].bm - 1) / gemm_tiles[tile].bm,
                         (a->cout + gemm_tiles[tile].bn - 1) / gemm_tiles[tile].bn, 1);
        return true;
}

const char *kconv_name(const klaunch_rec *rec)
{
        if (rec->kind == KK_GEMM && rec->variant >= 0 && rec->variant < GEMM_TILES * 4)
                return gemm_names[rec->variant];
        if (rec->kind == KK_DW && rec->variant >= 0 && rec->variant < (int)(sizeof(dw_names) / sizeof(dw_names[0])))
                return dw_names[rec->variant];
        return rec->kind == KK_MATVEC ? "matvec" : "dw-any";
}

cudaError_t kconv_launch(const klaunch_rec *rec, bool pdl, cudaStream_t st)
{
        switch (rec->kind) {
        case KK_GEMM:
                return gemm_launch(rec, pdl, st);
        case KK_MATVEC:
                klaunch_smem(pdl, conv_matvec, rec->grid, MVT, rec->smem, st, rec->u.conv);
                return cudaGetLastError();
        case KK_DW:
                return dw_launch(rec, pdl, st);
        default:
                return cudaErrorInvalidValue;
        }
}
