// SPDX-License-Identifier: MIT
// Run 27c: what a chain of dependent kernels costs on its own, against one persistent kernel
// with grid barriers: the floor under the network's five launches (issue 15 item 2).
//
//   nvcc -O3 -arch=sm_90 -o run27c-chain tests/kernels/results/run27c-chain.cu
//   ./run27c-chain [replays]
//
// Each variant is captured into a CUDA graph between two event records and replayed; the
// figure is the median of the events' elapsed times (device time, as bench_gpu's kern).
//   chain-N plain / pdl : N kernels of G blocks x 256 threads; each block reads a value the
//                         previous kernel's same block wrote and writes the next one (so every
//                         edge is a real data dependency); pdl: launched with programmatic
//                         serialization, each waits (griddepcontrol.wait) at its top.
//   coop-N              : one cooperative kernel of G blocks running the same N steps with
//                         cooperative_groups grid.sync() between them.
//   flag-N              : the same with a hand-rolled barrier (one arrival counter, release/acquire).
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace cg = cooperative_groups;

#define CK(x)                                                                                      \
        do {                                                                                       \
                cudaError_t e_ = (x);                                                              \
                if (e_ != cudaSuccess) {                                                           \
                        fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
                        exit(1);                                                                   \
                }                                                                                  \
        } while (0)

__device__ __forceinline__ void step(const float *in, float *out)
{
        if (threadIdx.x == 0)
                out[blockIdx.x] = __ldcg(in + (blockIdx.x * 7 + 1) % gridDim.x) + 1.0f;
}

__global__ void k_step(const float *in, float *out)
{
        asm volatile("griddepcontrol.wait;" ::: "memory");
        step(in, out);
}

__global__ void k_coop(float *buf, int n)
{
        cg::grid_group g = cg::this_grid();
        for (int i = 0; i < n; i++) {
                step(buf + (size_t)i * gridDim.x, buf + (size_t)(i + 1) * gridDim.x);
                g.sync();
        }
}

__device__ unsigned g_arrive;

__global__ void k_flag(float *buf, int n, unsigned base)
{
        for (int i = 0; i < n; i++) {
                step(buf + (size_t)i * gridDim.x, buf + (size_t)(i + 1) * gridDim.x);
                __syncthreads();
                if (threadIdx.x == 0) {
                        const unsigned target = base + (unsigned)(i + 1) * gridDim.x;
                        unsigned v;
                        __threadfence();
                        atomicAdd(&g_arrive, 1u);
                        do {
                                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(&g_arrive));
                        } while ((int)(v - target) < 0);
                }
                __syncthreads();
        }
}

static int cmpf(const void *a, const void *b)
{
        const float x = *(const float *)a, y = *(const float *)b;
        return x < y ? -1 : x > y;
}

enum kind { PLAIN, PDL, COOP, FLAG };

static double run(enum kind k, int n, int G, int reps, float *buf)
{
        cudaStream_t st;
        cudaEvent_t e0, e1;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        float *ms = (float *)malloc(sizeof(float) * reps);
        unsigned zero = 0;

        CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        if (k == FLAG)
                CK(cudaMemcpyToSymbol(g_arrive, &zero, sizeof(zero)));
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        CK(cudaEventRecordWithFlags(e0, st, cudaEventRecordExternal));
        if (k == PLAIN || k == PDL) {
                for (int i = 0; i < n; i++) {
                        cudaLaunchConfig_t cfg = {};
                        cudaLaunchAttribute at[1] = {};
                        cfg.gridDim = dim3(G);
                        cfg.blockDim = dim3(256);
                        cfg.stream = st;
                        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
                        at[0].val.programmaticStreamSerializationAllowed = 1;
                        cfg.attrs = at;
                        cfg.numAttrs = k == PDL && i > 0 ? 1 : 0;
                        CK(cudaLaunchKernelEx(&cfg, k_step, (const float *)(buf + (size_t)i * G),
                                              buf + (size_t)(i + 1) * G));
                }
        } else {
                cudaLaunchConfig_t cfg = {};
                cudaLaunchAttribute at[1] = {};
                cfg.gridDim = dim3(G);
                cfg.blockDim = dim3(256);
                cfg.stream = st;
                at[0].id = cudaLaunchAttributeCooperative;
                at[0].val.cooperative = 1;
                cfg.attrs = at;
                cfg.numAttrs = 1;
                if (k == COOP)
                        CK(cudaLaunchKernelEx(&cfg, k_coop, buf, n));
        }
        CK(cudaEventRecordWithFlags(e1, st, cudaEventRecordExternal));
        if (k == FLAG) {
                // The flag barrier's counter grows each replay: not capturable with a fixed base, so
                // it is timed by plain launches between events below instead.
        }
        CK(cudaStreamEndCapture(st, &graph));
        CK(cudaGraphInstantiate(&exec, graph, 0));
        for (int r = 0; r < reps + 20; r++) {
                if (k == FLAG) {
                        cudaLaunchConfig_t cfg = {};
                        cudaLaunchAttribute at[1] = {};
                        cfg.gridDim = dim3(G);
                        cfg.blockDim = dim3(256);
                        cfg.stream = st;
                        at[0].id = cudaLaunchAttributeCooperative;
                        at[0].val.cooperative = 1;
                        cfg.attrs = at;
                        cfg.numAttrs = 1;
                        CK(cudaEventRecord(e0, st));
                        CK(cudaLaunchKernelEx(&cfg, k_flag, buf, n, (unsigned)(r * n * G)));
                        CK(cudaEventRecord(e1, st));
                } else {
                        CK(cudaGraphLaunch(exec, st));
                }
                CK(cudaStreamSynchronize(st));
                if (r >= 20)
                        CK(cudaEventElapsedTime(&ms[r - 20], e0, e1));
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
        static const char *names[] = { "chain plain", "chain pdl", "coop grid.sync", "flag barrier" };
        cudaDeviceProp prop;
        float *buf;
        int sms;

        CK(cudaGetDeviceProperties(&prop, 0));
        sms = prop.multiProcessorCount;
        CK(cudaMalloc(&buf, sizeof(float) * 8 * 4 * sms * 16));
        CK(cudaMemset(buf, 0, sizeof(float) * 8 * 4 * sms * 16));
        printf("%s, %d SMs; median of %d replays, us (events around; flag barrier: plain launches)\n", prop.name,
               sms, reps);
        printf("%-16s %6s %6s %8s %8s %8s %8s\n", "variant", "blocks", "n=1", "n=2", "n=4", "n=6", "per step");
        for (int gm = 1; gm <= 4; gm *= 2) {
                const int G = gm * sms;
                for (int k = 0; k < 4; k++) {
                        double t[4];
                        const int ns[4] = { 1, 2, 4, 6 };
                        for (int j = 0; j < 4; j++)
                                t[j] = run((enum kind)k, ns[j], G, reps, buf);
                        printf("%-16s %6d %6.2f %8.2f %8.2f %8.2f %8.2f\n", names[k], G, t[0], t[1], t[2], t[3],
                               (t[3] - t[0]) / 5.0);
                }
        }
        return 0;
}
