// SPDX-License-Identifier: MIT
// Run 33c: the floor of the one structure for the network not measured before: the four layers and the
// head's gathering inside one launch of thread-block clusters, each cluster a band of the image (halos
// recomputed), the layers separated by cluster barriers instead of dependent launches, activations
// passed through distributed shared memory, and the clusters' partial pools met through a global ticket.
// No arithmetic of the network: each step moves the bytes a block of such a design would move (per block,
// 1080p default model, 7 bands of 16 blocks), so the figure compares with run 33's "noloop" (the layers'
// launches with their copies but no channel loop) and "empty" (no bodies at all). `+ffma` adds each
// thread's share of the network's multiply-adds as register FFMAs (the bands' recomputed halos
// included, 1.6x): a lower bound for the arithmetic in this structure.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -o run33-cluster tests/kernels/results/run33-cluster.cu
//   ./run33-cluster [replays]
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

namespace cg = cooperative_groups;

#define CK(x)                                                                                                    \
        do {                                                                                                     \
                cudaError_t e_ = (x);                                                                            \
                if (e_ != cudaSuccess) {                                                                         \
                        fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
                        exit(1);                                                                                 \
                }                                                                                                \
        } while (0)

// float4 counts a block moves (see the header): weights prefetched (conv0-2 whole, conv3 an eighth-of-128
// channel slice: 1.7 + 18.4 + 73.7 + 18.4 KB), the input rows it reads from global (13 KB), then per layer
// what it gathers from its peers and what it leaves in its own shared memory.
#define W4    7168
#define IN4   832
#define L0OUT 704
#define L1IN  832
#define L1OUT 313
#define L2IN  768
#define L2OUT 140
#define L3IN  2304
// FFMAs a thread for each layer at 112 blocks x 256 threads (5.4 M and 3 x 14.4 M multiply-adds, x 1.6).
#define F0 304
#define F1 808

static __device__ __forceinline__ void cp16(void *dst, const void *src)
{
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)),
                     "l"(src)
                     : "memory");
}

static __device__ __forceinline__ float4 add4(float4 a, float4 b)
{
        return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

template <int N>
static __device__ __forceinline__ float ffma_chain(float x, float y)
{
        float a[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
                a[i] = x + i;
#pragma unroll 4
        for (int i = 0; i < N / 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++)
                        a[j] = __fmaf_rn(a[j], y, x);
        return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

template <bool MATH>
__global__ void __launch_bounds__(256, 1) knet(const float4 *__restrict__ w, const float4 *__restrict__ in,
                                               float *part, unsigned *ticket, float *out, int nc, float y,
                                               int stop)
{
        extern __shared__ float4 sm[];
        __shared__ float pool[16 * 8], red[8 * 8];
        __shared__ bool last;
        cg::cluster_group cl = cg::this_cluster();
        const int tid = threadIdx.x, r = (int)cl.block_rank(), cs = (int)cl.num_blocks();
        const int c = blockIdx.x / cs;
        float4 *const wsm = sm, *const a0 = sm + W4, *const aA = a0 + IN4, *const aB = aA + L0OUT;
        float f = 0.0f;

        if (stop == 1)
                return;
        for (int i = tid; i < W4; i += 256)
                cp16(wsm + i, w + (i < W4 - 1152 ? i : i + r * 1152));
        for (int i = tid; i < IN4; i += 256)
                cp16(a0 + i, in + (size_t)(c * cs + r) * IN4 + i);
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        __syncthreads();
        if (stop == 2)
                return;
        // conv0: from the block's input rows into its own activations.
        for (int i = tid; i < L0OUT; i += 256)
                aA[i] = add4(a0[i], wsm[i]);
        if (MATH)
                f += ffma_chain<F0>(wsm[tid].x, y);
        cl.sync();
        if (stop == 3)
                return;
        // conv1: a patch from three peers' conv0 rows.
        for (int i = tid; i < L1IN; i += 256) {
                const float4 *p = cl.map_shared_rank(aA, (r + 1 + i % 3) % cs);
                const float4 v = p[i % L0OUT];
                if (i < L1OUT)
                        aB[i] = add4(v, wsm[1000 + i]);
                else
                        f += v.x;
        }
        if (MATH)
                f += ffma_chain<F1>(wsm[tid + 256].y, y);
        cl.sync();
        if (stop == 4)
                return;
        // conv2: a patch from four peers' conv1 tiles.
        for (int i = tid; i < L2IN; i += 256) {
                const float4 *p = cl.map_shared_rank(aB, (r + 1 + i % 4) % cs);
                const float4 v = p[i % L1OUT];
                if (i < L2OUT)
                        aA[i] = add4(v, wsm[3000 + i]);
                else
                        f += v.y;
        }
        if (MATH)
                f += ffma_chain<F1>(wsm[tid + 512].z, y);
        cl.sync();
        if (stop == 5)
                return;
        // conv3: the whole band's conv2 output (every peer's), for this block's slice of the output channels.
        for (int i = tid; i < L3IN; i += 256) {
                const float4 *p = cl.map_shared_rank(aA, i % cs);
                const float4 v = p[(i / cs) % L2OUT];
                f += v.x + v.w;
        }
        if (MATH)
                f += ffma_chain<F1>(wsm[tid + 6000].w, y);
        // The block's eight channels' pool sums into block 0 of the cluster.
        f += __shfl_xor_sync(~0u, f, 16);
        f += __shfl_xor_sync(~0u, f, 8);
        if ((tid & 31) < 8)
                red[(tid >> 5) * 8 + (tid & 31)] = f;
        __syncthreads();
        if (tid < 8) {
                float s = 0.0f;
                for (int j = 0; j < 8; j++)
                        s += red[j * 8 + tid];
                float *p0 = cl.map_shared_rank(pool, 0);
                p0[r * 8 + tid] = s;
        }
        cl.sync();
        if (stop == 6)
                return;
        if (r != 0)
                return;
        if (tid < 128) {
                float s = 0.0f;
                for (int j = tid; j < cs * 8; j += 128)
                        s += pool[j];
                part[c * 128 + tid] = s;
        }
        __threadfence();
        __syncthreads();
        if (tid == 0)
                last = atomicAdd(ticket, 1u) == (unsigned)nc - 1;
        __syncthreads();
        if (!last)
                return;
        __threadfence();
        if (tid < 128) {
                float s = 0.0f;
                for (int j = 0; j < nc; j++)
                        s += __ldcg(part + j * 128 + tid);
                out[tid] = s;
        }
        if (tid == 0)
                *ticket = 0;
}

__global__ void kempty(float *out)
{
        if (threadIdx.x == 0 && blockIdx.x == 0)
                out[0] += 1.0f;
}

static int cmpf(const void *a, const void *b)
{
        const float x = *(const float *)a, y = *(const float *)b;
        return x < y ? -1 : x > y;
}

struct bufs {
        float4 *w, *in;
        float *part, *out;
        unsigned *ticket;
};

// variant: 0 one empty kernel (the graph's first-launch floor), 1 knet, 2 knet + ffma.
static double run(int variant, int cs, int nc, int reps, const struct bufs &b, int *fits, int stop)
{
        cudaStream_t st;
        cudaEvent_t e0, e1;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        float *ms = (float *)malloc(sizeof(float) * reps);
        const size_t smem = sizeof(float4) * (W4 + IN4 + L0OUT + L1OUT);
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1] = {};

        cfg.gridDim = dim3(nc * cs);
        cfg.blockDim = dim3(256);
        cfg.dynamicSmemBytes = smem;
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = cs;
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = 1;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        void (*k)(const float4 *, const float4 *, float *, unsigned *, float *, int, float, int) =
                variant == 2 ? knet<true> : knet<false>;
        CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        *fits = 0;
        CK(cudaOccupancyMaxActiveClusters(fits, k, &cfg));
        CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        cfg.stream = st;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        CK(cudaEventRecordWithFlags(e0, st, cudaEventRecordExternal));
        if (variant == 0)
                kempty<<<1, 32, 0, st>>>(b.out);
        else
                CK(cudaLaunchKernelEx(&cfg, k, (const float4 *)b.w, (const float4 *)b.in, b.part, b.ticket, b.out, nc,
                                      1.0000001f, stop));
        CK(cudaEventRecordWithFlags(e1, st, cudaEventRecordExternal));
        CK(cudaStreamEndCapture(st, &graph));
        CK(cudaGraphInstantiate(&exec, graph, 0));
        for (int i = 0; i < reps + 20; i++) {
                CK(cudaGraphLaunch(exec, st));
                CK(cudaStreamSynchronize(st));
                if (i >= 20)
                        CK(cudaEventElapsedTime(&ms[i - 20], e0, e1));
        }
        qsort(ms, reps, sizeof(float), cmpf);
        const double med = ms[reps / 2] * 1e3;
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        cudaStreamDestroy(st);
        free(ms);
        return med;
}

int main(int argc, char **argv)
{
        const int reps = argc > 1 ? atoi(argv[1]) : 1000;
        cudaDeviceProp prop;
        struct bufs b;

        CK(cudaGetDeviceProperties(&prop, 0));
        CK(cudaMalloc(&b.w, sizeof(float4) * (W4 + 16 * 1152)));
        CK(cudaMalloc(&b.in, sizeof(float4) * 32 * 16 * IN4));
        CK(cudaMalloc(&b.part, sizeof(float) * 32 * 128));
        CK(cudaMalloc(&b.out, sizeof(float) * 128));
        CK(cudaMalloc(&b.ticket, sizeof(unsigned)));
        CK(cudaMemset(b.w, 0, sizeof(float4) * (W4 + 16 * 1152)));
        CK(cudaMemset(b.in, 0, sizeof(float4) * 32 * 16 * IN4));
        CK(cudaMemset(b.ticket, 0, sizeof(unsigned)));
        printf("%s, %d SMs; median of %d graph replays, us\n", prop.name, prop.multiProcessorCount, reps);
        printf("%-28s %8s %8s %10s %8s\n", "variant", "cluster", "clusters", "resident", "p50 us");
        int fits = 0;
        printf("%-28s %8s %8s %10s %8.2f\n", "one empty kernel", "-", "-", "-", run(0, 1, 1, reps, b, &fits, 0));
        const int shapes[][2] = { { 16, 7 }, { 16, 8 }, { 8, 14 }, { 8, 16 }, { 4, 28 }, { 1, 112 } };
        for (int v = 1; v <= 2; v++)
                for (const auto &s : shapes) {
                        const double t = run(v, s[0], s[1], reps, b, &fits, 0);
                        printf("%-28s %8d %8d %10d %8.2f\n", v == 1 ? "bands, bytes moved" : "bands, bytes + ffma",
                               s[0], s[1], fits, t);
                }
        // Where the bytes-moved variant's time goes: each block returns after step `stop` (1 at entry, 2 after the
        // prefetch, 3-6 after conv0-3's cluster barrier, 7 the whole kernel with the head's ticket).
        printf("\nbytes moved, returning after step (1 entry, 2 prefetch, 3-6 conv0-3, 7 all), p50 us\n");
        printf("%8s %8s %8s %8s %8s %8s %8s %8s %8s\n", "cluster", "clusters", "1", "2", "3", "4", "5", "6", "7");
        for (const auto &s : shapes) {
                printf("%8d %8d", s[0], s[1]);
                for (int stop = 1; stop <= 7; stop++)
                        printf(" %8.2f", run(1, s[0], s[1], reps, b, &fits, stop));
                printf("\n");
        }
        return 0;
}
