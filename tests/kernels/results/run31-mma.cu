// SPDX-License-Identifier: MIT
// Run 31: would tensor cores pay for the convolutions' channel loop (issue 15 item 2)?
//
//   nvcc -O3 -arch=sm_90 -o run31-mma tests/kernels/results/run31-mma.cu
//   ./run31-mma [launches]
//
// One block's channel loop of a stride-2 layer, as kernels/convtile.cu runs it for a tile of 16x4
// output pixels and 8 or 16 output channels (OB), with the patch and the weights already in shared memory
// (filled before the clock starts): the sums of every input channel and tap, the slices' sums
// through shared memory, in registers at the end. Timed with clock64() from the barrier after the
// fill to the barrier after the slices' sum; 132 blocks (one a multiprocessor), median over
// blocks and launches, for 16, 32 and 64 input channels (conv1-3's).
//   ffma  : convtile.cu's loop (a pixel pair x 4 channels a thread, 256 / (8 OB / 4) slices of the
//           input channels), fused multiply-adds in fp32.
//   mma1  : warp-wide mma.sync m16n8k8 TF32 (a warp: one tile row of 16 pixels x OB channels over
//           half the input channels; 2 slices): one product, the inputs rounded to TF32 (10-bit
//           mantissa). The speed bound of tensor cores here; not within the contract.
//   mma3  : the error-compensated split (3xTF32): x = xh + xl, w = wh + wl (wh, wl packed on the
//           host), x.w ~ xh.wh + xh.wl + xl.wh, three mma a step into three accumulators.
//   mma3x2: mma3 with two sets of accumulators (even and odd taps), half the chain of dependent mma.
// Each variant's sums are checked against double-precision sums of the same products on the host:
// max |err| / sum |w x| over the block's 512 outputs.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#define CK(x)                                                                                            \
        do {                                                                                             \
                cudaError_t e_ = (x);                                                                    \
                if (e_ != cudaSuccess) {                                                                 \
                        fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
                        exit(1);                                                                         \
                }                                                                                        \
        } while (0)

#define THREADS 256
#define TW      16
#define TH      4
#define TP      (TW * TH)
#define S       2
#define PH      ((TH - 1) * S + 3)
#define PW      36   /* convtile's 4 nu: input columns ox0 S - 4 .. + 35 */
#define BLOCKS  132

/* convtile.cu's ctile_pws: the stored row width at which one warp's vector loads meet no bank conflict. */
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

/* The slices' sums into registers: red [ks][OB][TP] in shared memory, OB * TP / THREADS outputs a thread. */
template <int KS, int OB>
static __device__ __forceinline__ void slice_sum(const float *red, float (&r)[OB * TP / THREADS])
{
        for (int j = 0; j < OB * TP / THREADS; j++) {
                const int u = (int)threadIdx.x + j * THREADS;
                float t = red[u];
#pragma unroll
                for (int i = 1; i < KS; i++)
                        t = __fadd_rn(t, red[i * OB * TP + u]);
                r[j] = t;
        }
}

template <int OB>
static __device__ __forceinline__ void finish(float (&r)[OB * TP / THREADS], long long t0, float *out,
                                              long long *cyc)
{
        __syncthreads();
        const long long t1 = clock64();
        if (threadIdx.x == 0)
                cyc[blockIdx.x] = t1 - t0;
        for (int j = 0; j < OB * TP / THREADS; j++)
                out[(size_t)blockIdx.x * OB * TP + threadIdx.x + j * THREADS] = r[j];
}

/* convtile.cu's channel loop at stride 2, twl 4, thl 2, cgl log2(OB / 4) (ks = 256 / (32 OB / 4)). */
template <int C, int OB>
static __global__ void __launch_bounds__(THREADS) k_ffma(const float *gp, const float4 *gw, int pws, float *out,
                                                         long long *cyc)
{
        extern __shared__ __align__(16) float sm[];
        constexpr int NG = OB / 4, KS = THREADS / 32 / NG;
        const int plane = PH * pws, tid = (int)threadIdx.x;
        float *const patch = sm;
        float4 *const wsm = reinterpret_cast<float4 *>(sm + C * plane);

        for (int i = tid; i < C * plane; i += THREADS)
                patch[i] = gp[i];
        for (int i = tid; i < OB / 4 * C * 9; i += THREADS)
                wsm[i] = gw[i];
        __syncthreads();
        const long long t0 = clock64();
        const int q = tid & 31, cg = (tid >> 5) & (NG - 1), ks = (tid >> 5) / NG, m = q & 7, ly = q >> 3;
        const int cb = C * ks / KS, ce = C * (ks + 1) / KS;
        float a0[4] = { 0, 0, 0, 0 }, a1[4] = { 0, 0, 0, 0 };
        const float *p = patch + cb * plane + ly * S * pws + 4 * m;
        const float4 *wv = wsm + (cg * C + cb) * 9;
        for (int ci = cb; ci < ce; ci++, p += plane, wv += 9) {
#pragma unroll
                for (int ky = 0; ky < 3; ky++) {
                        const float4 x0 = *reinterpret_cast<const float4 *>(p + ky * pws);
                        const float4 x1 = *reinterpret_cast<const float4 *>(p + ky * pws + 4);
                        const float v[5] = { x0.w, x1.x, x1.y, x1.z, x1.w };
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
        __syncthreads();
        float *const red = sm;
        const int px = ly * TW + 2 * m;
        for (int k = 0; k < 4; k++)
                *reinterpret_cast<float2 *>(red + (ks * OB + cg * 4 + k) * TP + px) = make_float2(a0[k], a1[k]);
        __syncthreads();
        float r[OB * TP / THREADS];
        slice_sum<KS, OB>(red, r);
        finish<OB>(r, t0, out, cyc);
}

static __device__ __forceinline__ uint32_t tf32(float x)
{
        uint32_t r;
        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
        return r;
}

static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/*
 * A warp: tile row mt (16 pixels, the mma's rows) x 8 channels (its columns) over the channel
 * groups of its slice; a step k is 8 input channels at one tap: column t <-> channel 8 g + t.
 * Fragments (PTX ISA, m16n8k8 .tf32): a0 (row gid, col tig), a1 (gid + 8, tig), a2 (gid, tig + 4),
 * a3 (gid + 8, tig + 4); b0 (k tig, n gid), b1 (k tig + 4, n gid); d0 (gid, 2 tig), d1 (gid,
 * 2 tig + 1), d2 (gid + 8, 2 tig), d3 (gid + 8, 2 tig + 1). gb: per step, a float4 a lane
 * (b0 high, b1 high, b0 low, b1 low parts). cs: the patch's channel stride.
 */
template <int C, int OB, int TERMS, int NACC>
static __global__ void __launch_bounds__(THREADS) k_mma(const float *gp, const float4 *gb, int pws, int cs,
                                                        float *out, long long *cyc)
{
        extern __shared__ __align__(16) float sm[];
        constexpr int KS = 2, G = C / 8, NT = OB / 8;
        const int tid = (int)threadIdx.x;
        float *const patch = sm;
        float4 *const bsm = reinterpret_cast<float4 *>(sm + C * cs);

        for (int i = tid; i < C * cs; i += THREADS)
                patch[i] = gp[i];
        for (int i = tid; i < G * 9 * NT * 32; i += THREADS)
                bsm[i] = gb[i];
        __syncthreads();
        const long long t0 = clock64();
        const int warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
        const int mt = warp & 3, sl = warp >> 2;
        float acc[NT][NACC][3][4];
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
                for (int s = 0; s < NACC; s++)
#pragma unroll
                        for (int j = 0; j < 3; j++)
#pragma unroll
                                for (int e = 0; e < 4; e++)
                                        acc[n][s][j][e] = 0.0f;
        const float *p = patch + (G * sl / KS * 8 + tig) * cs + mt * S * pws + gid * S + 3;
        const float4 *bw = bsm + G * sl / KS * 9 * NT * 32 + lane;
        for (int g = G * sl / KS; g < G * (sl + 1) / KS; g++, p += 8 * cs, bw += 9 * NT * 32) {
#pragma unroll
                for (int tap = 0; tap < 9; tap++) {
                        const int off = tap / 3 * pws + tap % 3;
                        const float x[4] = { p[off], p[off + 8 * S], p[off + 4 * cs], p[off + 4 * cs + 8 * S] };
                        const int s = NACC == 2 ? tap & 1 : 0;
                        uint32_t ah[4], al[4];
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                                ah[e] = tf32(x[e]);
                                al[e] = tf32(__fsub_rn(x[e], __uint_as_float(ah[e])));
                        }
#pragma unroll
                        for (int n = 0; n < NT; n++) {
                                const float4 b = bw[(tap * NT + n) * 32];
                                mma(acc[n][s][0], ah, __float_as_uint(b.x), __float_as_uint(b.y));
                                if (TERMS == 3) {
                                        mma(acc[n][s][1], ah, __float_as_uint(b.z), __float_as_uint(b.w));
                                        mma(acc[n][s][2], al, __float_as_uint(b.x), __float_as_uint(b.y));
                                }
                        }
                }
        }
        __syncthreads();
        float *const red = sm;
        const int px = mt * TW + gid;
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                        float t = acc[n][0][0][e], c = __fadd_rn(acc[n][0][1][e], acc[n][0][2][e]);
                        if (NACC == 2) {
                                t = __fadd_rn(t, acc[n][1][0][e]);
                                c = __fadd_rn(c, __fadd_rn(acc[n][1][1][e], acc[n][1][2][e]));
                        }
                        const int o = n * 8 + 2 * tig + (e & 1), pp = px + (e >> 1) * 8;
                        red[(sl * OB + o) * TP + pp] = TERMS == 3 ? __fadd_rn(t, c) : t;
                }
        __syncthreads();
        float r[OB * TP / THREADS];
        slice_sum<KS, OB>(red, r);
        finish<OB>(r, t0, out, cyc);
}

/* Host: TF32 rounding to nearest, ties away (cvt.rna). */
static float tf32_h(float x)
{
        uint32_t u;
        memcpy(&u, &x, 4);
        u = (u + 0x1000u) & 0xffffe000u;
        memcpy(&x, &u, 4);
        return x;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void)   /* [0, 1) */
{
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return (float)(rng >> 40) / (float)(1u << 24);
}

struct res {
        const char *name;
        double cyc, us, err;
};

static int cmp_ll(const void *a, const void *b)
{
        const long long x = *(const long long *)a, y = *(const long long *)b;
        return x < y ? -1 : x > y;
}

template <int OB, typename K, typename... Args>
static struct res run_one(const char *name, K kernel, size_t smem, int launches, const std::vector<double> &ref,
                          const std::vector<double> &mag, float *d_out, long long *d_cyc, Args... args)
{
        CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        std::vector<long long> all;
        std::vector<long long> cyc(BLOCKS);
        std::vector<float> ms;
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        for (int i = 0; i < launches + 5; i++) {
                CK(cudaEventRecord(e0));
                kernel<<<BLOCKS, THREADS, smem>>>(args..., d_out, d_cyc);
                CK(cudaEventRecord(e1));
                CK(cudaGetLastError());
                CK(cudaEventSynchronize(e1));
                if (i < 5)
                        continue;
                float t;
                CK(cudaEventElapsedTime(&t, e0, e1));
                ms.push_back(t);
                CK(cudaMemcpy(cyc.data(), d_cyc, sizeof(long long) * BLOCKS, cudaMemcpyDeviceToHost));
                all.insert(all.end(), cyc.begin(), cyc.end());
        }
        qsort(all.data(), all.size(), sizeof(long long), cmp_ll);
        std::sort(ms.begin(), ms.end());
        std::vector<float> out((size_t)BLOCKS * OB * TP);
        CK(cudaMemcpy(out.data(), d_out, sizeof(float) * out.size(), cudaMemcpyDeviceToHost));
        double err = 0.0;
        for (int b = 0; b < BLOCKS; b++)
                for (int u = 0; u < OB * TP; u++)
                        err = fmax(err, fabs((double)out[(size_t)b * OB * TP + u] - ref[u]) / mag[u]);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        return res{ name, (double)all[all.size() / 2], ms[ms.size() / 2] * 1e3, err };
}

template <int C, int OB>
static void run_c(int launches, float *d_out, long long *d_cyc, double ghz)
{
        /* The logical patch P[c][row][col] (activations after a ReLU: [0, 1)) and weights W[o][c][tap]. */
        std::vector<float> P((size_t)C * PH * PW), W((size_t)OB * C * 9);
        const float a = sqrtf(6.0f / (float)(C * 9));
        for (auto &v : P)
                v = urand();
        for (auto &v : W)
                v = (2.0f * urand() - 1.0f) * a;
        /* Double-precision sums, and sum |w x| (the scale of each output's rounding). */
        std::vector<double> ref(OB * TP), mag(OB * TP);
        for (int o = 0; o < OB; o++)
                for (int ly = 0; ly < TH; ly++)
                        for (int lx = 0; lx < TW; lx++) {
                                double s = 0.0, m = 0.0;
                                for (int c = 0; c < C; c++)
                                        for (int tap = 0; tap < 9; tap++) {
                                                const double w = W[((size_t)o * C + c) * 9 + tap];
                                                const double x = P[((size_t)c * PH + ly * S + tap / 3) * PW + lx * S +
                                                                   3 + tap % 3];
                                                s += w * x;
                                                m += fabs(w * x);
                                        }
                                ref[o * TP + ly * TW + lx] = s;
                                mag[o * TP + ly * TW + lx] = m;
                        }
        /* ffma: the patch at convtile's row width; weights [group][c][tap] x 4 channels. */
        const int pws = ctile_pws(PW, TW, S), plane = PH * pws;
        std::vector<float> pf((size_t)C * plane, 0.0f), wf((size_t)OB * C * 9);
        for (int c = 0; c < C; c++)
                for (int r = 0; r < PH; r++)
                        for (int x = 0; x < PW; x++)
                                pf[(size_t)c * plane + r * pws + x] = P[((size_t)c * PH + r) * PW + x];
        for (int g = 0; g < OB / 4; g++)
                for (int j = 0; j < C * 9; j++)
                        for (int k = 0; k < 4; k++)
                                wf[((size_t)g * C * 9 + j) * 4 + k] = W[(size_t)(g * 4 + k) * C * 9 + j];
        /* mma: channel stride cs = 16 mod 32 (at most two lanes a bank); per step a float4 a lane. */
        int cs = plane;
        while (cs % 32 != 16)
                cs += 4;
        std::vector<float> pm((size_t)C * cs, 0.0f), bm((size_t)C / 8 * 9 * OB / 8 * 32 * 4);
        for (int c = 0; c < C; c++)
                for (int r = 0; r < PH; r++)
                        for (int x = 0; x < PW; x++)
                                pm[(size_t)c * cs + r * pws + x] = P[((size_t)c * PH + r) * PW + x];
        for (int g = 0; g < C / 8; g++)
                for (int tap = 0; tap < 9; tap++)
                        for (int n = 0; n < OB / 8; n++)
                                for (int lane = 0; lane < 32; lane++) {
                                        const int o = n * 8 + (lane >> 2), t = lane & 3;
                                        const float w0 = W[((size_t)o * C + g * 8 + t) * 9 + tap];
                                        const float w1 = W[((size_t)o * C + g * 8 + t + 4) * 9 + tap];
                                        float *const q = &bm[((((size_t)g * 9 + tap) * (OB / 8) + n) * 32 + lane) * 4];
                                        q[0] = tf32_h(w0);
                                        q[1] = tf32_h(w1);
                                        q[2] = tf32_h(w0 - q[0]);
                                        q[3] = tf32_h(w1 - q[1]);
                                }
        float *d_pf, *d_pm;
        float4 *d_wf, *d_bm;
        CK(cudaMalloc(&d_pf, pf.size() * 4));
        CK(cudaMalloc(&d_pm, pm.size() * 4));
        CK(cudaMalloc(&d_wf, wf.size() * 4));
        CK(cudaMalloc(&d_bm, bm.size() * 4));
        CK(cudaMemcpy(d_pf, pf.data(), pf.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_pm, pm.data(), pm.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_wf, wf.data(), wf.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_bm, bm.data(), bm.size() * 4, cudaMemcpyHostToDevice));
        const size_t sf = (pf.size() + wf.size()) * 4, smm = (pm.size() + bm.size()) * 4;
        struct res r[4] = {
                run_one<OB>("ffma", k_ffma<C, OB>, sf, launches, ref, mag, d_out, d_cyc, (const float *)d_pf,
                        (const float4 *)d_wf, pws),
                run_one<OB>("mma1", k_mma<C, OB, 1, 1>, smm, launches, ref, mag, d_out, d_cyc, (const float *)d_pm,
                        (const float4 *)d_bm, pws, cs),
                run_one<OB>("mma3", k_mma<C, OB, 3, 1>, smm, launches, ref, mag, d_out, d_cyc, (const float *)d_pm,
                        (const float4 *)d_bm, pws, cs),
                run_one<OB>("mma3x2", k_mma<C, OB, 3, 2>, smm, launches, ref, mag, d_out, d_cyc, (const float *)d_pm,
                        (const float4 *)d_bm, pws, cs),
        };
        for (int i = 0; i < 4; i++)
                printf("| %d | %d | %s | %.0f | %.2f | %.2f | %.2f | %.2e |\n", C, OB, r[i].name, r[i].cyc,
                       r[i].cyc / ghz / 1e3, r[i].cyc / r[0].cyc, r[i].us, r[i].err);
        cudaFree(d_pf);
        cudaFree(d_pm);
        cudaFree(d_wf);
        cudaFree(d_bm);
}

int main(int argc, char **argv)
{
        const int launches = argc > 1 ? atoi(argv[1]) : 200;
        float *d_out;
        long long *d_cyc;
        int khz = 0;
        cudaDeviceProp prop;

        CK(cudaGetDeviceProperties(&prop, 0));
        if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0) != cudaSuccess || khz <= 0)
                khz = 1980000;
        const double ghz = khz / 1e6;
        CK(cudaMalloc(&d_out, sizeof(float) * BLOCKS * 16 * TP));
        CK(cudaMalloc(&d_cyc, sizeof(long long) * BLOCKS));
        printf("%s, %d SMs, clock %.2f GHz; %d blocks x %d threads, %d launches; tile %dx%d px, stride %d\n\n",
               prop.name, prop.multiProcessorCount, ghz, BLOCKS, THREADS, launches, TW, TH, S);
        printf("| input channels | output channels a block | variant | cycles (median) | us at that clock | x ffma | "
               "kernel us (event) | max err / sum|wx| |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
        run_c<16, 8>(launches, d_out, d_cyc, ghz);
        run_c<32, 8>(launches, d_out, d_cyc, ghz);
        run_c<64, 8>(launches, d_out, d_cyc, ghz);
        run_c<16, 16>(launches, d_out, d_cyc, ghz);
        run_c<32, 16>(launches, d_out, d_cyc, ghz);
        run_c<64, 16>(launches, d_out, d_cyc, ghz);
        return 0;
}
