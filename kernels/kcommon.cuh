/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Internal helpers shared by the kernel sources (not part of the C ABI): error
 * text for *_new(), device allocation with a message, the device-side copy of
 * a result block to the slot's mapped block with `valid` last, and launches
 * that may depend programmatically on the kernel before them.
 */
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zcp_kernels.h"

static_assert(offsetof(struct zcp_result, valid) == 0, "valid must be the first word");
static_assert(sizeof(struct zcp_result) % 4 == 0 && sizeof(struct zcp_detection) % 4 == 0, "zcp_result: words");
static_assert(offsetof(struct zcp_result, det) % 4 == 0, "zcp_result: det[] on a word");

/* The words of a result block before det[]; and of one detection. */
#define ZCP_RESULT_HEAD_WORDS ((unsigned)(offsetof(struct zcp_result, det) / 4))
#define ZCP_DET_WORDS ((unsigned)(sizeof(struct zcp_detection) / 4))

static inline void kerr(char *errbuf, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline void kerr(char *errbuf, size_t errlen, const char *fmt, ...)
{
        va_list ap;

        if (!errbuf || errlen == 0)
                return;
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
}

/* cudaMalloc with a message naming the bytes and what they are for. */
static inline cudaError_t kmalloc(void **ret, size_t bytes, const char *what, char *errbuf, size_t errlen)
{
        cudaError_t e = cudaMalloc(ret, bytes ? bytes : 16);

        if (e != cudaSuccess) {
                *ret = NULL;
                kerr(errbuf, errlen, "cudaMalloc(%zu bytes) for the %s failed: %s", bytes, what,
                     cudaGetErrorString(e));
        }
        return e;
}

static inline cudaError_t kupload(void *dev, const void *host, size_t bytes, const char *what, char *errbuf,
                                  size_t errlen)
{
        cudaError_t e = cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);

        if (e != cudaSuccess)
                kerr(errbuf, errlen, "uploading %zu bytes of %s failed: %s", bytes, what, cudaGetErrorString(e));
        return e;
}

/*
 * Called by every thread of one block after the stage block is complete and visible to it (the
 * caller fences and synchronizes before): copies its words up to det[] and its det_count
 * detections to the mapped block, then `valid` = 1 after a system fence, so the CPU never sees
 * valid before the rest.
 */
static __device__ __forceinline__ void kpublish_block(const struct zcp_result *stage, struct zcp_result *dst)
{
        const unsigned *s = (const unsigned *)stage;
        unsigned *d = (unsigned *)dst;
        const unsigned ndet = stage->det_count < ZCP_DET_MAX ? stage->det_count : ZCP_DET_MAX;
        const unsigned n = ZCP_RESULT_HEAD_WORDS + ndet * ZCP_DET_WORDS;

        for (unsigned i = 1 + threadIdx.x; i < n; i += blockDim.x)
                d[i] = s[i];
        __threadfence_system();
        __syncthreads();
        if (threadIdx.x == 0)
                *(volatile unsigned *)&dst->valid = 1u;
}

/* The sum of v over the warp (a fixed butterfly: every lane gets the same bits). */
static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
                v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
        return v;
}

/*
 * Programmatic dependent launch (compute capability 9.0 and later, kpdl_enabled()): the kernels
 * on the critical path after the scan (the resize, the plan's ops, the head) are launched with
 * the programmatic-serialization attribute, so each is scheduled as the kernel before it
 * drains, without the launch gap, and waits at its top (kpdl_wait), before touching memory,
 * until that kernel has finished and its writes are visible. No kernel triggers early: waiting
 * grids would hold multiprocessor slots (measured: a trigger after each wait made the network
 * 2% slower, docs/design.md). Launched plainly, kpdl_wait returns at once.
 */
static __device__ __forceinline__ void kpdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* A launch with `smem` bytes of dynamic shared memory, dependent when pdl. */
template <typename... KArgs, typename... Args>
static void klaunch_smem(bool pdl, void (*kernel)(KArgs...), dim3 grid, unsigned block, size_t smem,
                         cudaStream_t st, Args... args)
{
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute attr[1] = {};

        cfg.gridDim = grid;
        cfg.blockDim = dim3(block);
        cfg.dynamicSmemBytes = smem;
        cfg.stream = st;
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = pdl ? 1 : 0;
        cudaLaunchKernelEx(&cfg, kernel, args...);
}

template <typename... KArgs, typename... Args>
static void klaunch(bool pdl, void (*kernel)(KArgs...), dim3 grid, unsigned block, cudaStream_t st,
                    Args... args)
{
        klaunch_smem(pdl, kernel, grid, block, 0, st, args...);
}

/* Its code tells kpdl_enabled() whether kpdl_wait() is compiled in for this device. */
static __global__ void kpdl_probe()
{
        kpdl_wait();
}

/*
 * Whether this thread's device launches dependent kernels (read when a
 * per-stream object is made): compute 9.0+ running code built from compute
 * 9.0+ PTX. The compute_75 PTX JIT-compiled for a Hopper (CUDA_FORCE_PTX_JIT,
 * or a build without sm_90 code) has no kpdl_wait, so its kernels could read
 * a predecessor's results before they are visible: plain launches there.
 */
static inline bool kpdl_enabled(void)
{
        cudaFuncAttributes fa;
        int dev = 0, major = 0;

        return cudaGetDevice(&dev) == cudaSuccess &&
               cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9 &&
               cudaFuncGetAttributes(&fa, kpdl_probe) == cudaSuccess && fa.ptxVersion >= 90;
}
