/* SPDX-License-Identifier: MIT */
/*
 * zcpipe-bench's one kernel: read a frame `passes` times, 16 bytes per load,
 * grid-stride, and sum it, so the reads cannot be dropped (the sums are
 * checked on the CPU). The compiler barrier between passes keeps the
 * compiler from folding the passes into one read (each pass must reach
 * memory, or the cache, again, as a k-times reader would).
 */
#include <cuda_runtime.h>

#include "bench_kernels.h"

__global__ void __launch_bounds__(ZCP_BENCH_THREADS)
read_kernel(const uint4 *src, size_t n16, int passes, uint32_t *out)
{
        __shared__ uint32_t part[ZCP_BENCH_THREADS / 32];
        const size_t stride = (size_t)gridDim.x * blockDim.x;
        const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
        uint32_t acc = 0;

#pragma unroll 1
        for (int p = 0; p < passes; p++) {
                for (size_t i = first; i < n16; i += stride) {
                        const uint4 v = src[i];
                        acc += v.x + v.y + v.z + v.w;
                }
                asm volatile("" ::: "memory");
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
                acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if ((threadIdx.x & 31) == 0)
                part[threadIdx.x / 32] = acc;
        __syncthreads();
        if (threadIdx.x == 0) {
                uint32_t t = 0;
                for (int w = 0; w < ZCP_BENCH_THREADS / 32; w++)
                        t += part[w];
                out[blockIdx.x] = t;
        }
}

extern "C" int zcp_bench_read(const void *src, size_t n16, int passes, uint32_t *out, void *stream)
{
        read_kernel<<<ZCP_BENCH_BLOCKS, ZCP_BENCH_THREADS, 0, (cudaStream_t)stream>>>((const uint4 *)src, n16,
                                                                                       passes, out);
        return (int)cudaGetLastError();
}
