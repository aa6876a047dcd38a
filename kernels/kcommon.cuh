/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Internal helpers shared by the kernel sources (not part of the C ABI): error
 * text for *_new(), device allocation with a message, and the device-side
 * copy of a result block to the slot's mapped block with `valid` last.
 */
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zcp_kernels.h"

static_assert(sizeof(struct zcp_result) == 176, "struct zcp_result layout changed: update the kernels");
static_assert(sizeof(struct zcp_result) % 16 == 0, "struct zcp_result must stay 16-byte sized");
static_assert(offsetof(struct zcp_result, valid) == 0, "valid must be the first word");
static_assert(offsetof(struct zcp_result, moving_cells) == 4, "zcp_result layout");
static_assert(offsetof(struct zcp_result, moving_fraction) == 12, "zcp_result layout");
static_assert(offsetof(struct zcp_result, bbox) == 16, "zcp_result layout");
static_assert(offsetof(struct zcp_result, topk_count) == 32, "zcp_result layout");
static_assert(offsetof(struct zcp_result, topk_class) == 36, "zcp_result layout");
static_assert(offsetof(struct zcp_result, topk_prob) == 100, "zcp_result layout");
static_assert(offsetof(struct zcp_result, grid_w) == 164, "zcp_result layout");
static_assert(offsetof(struct zcp_result, mask_words) == 172, "zcp_result layout");

#define ZCP_RESULT_WORDS ((unsigned)(sizeof(struct zcp_result) / 4))

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
 * Two kernels meeting to publish one result block (zcp_k_net_head_meet and
 * zcp_k_motion_meet, on two streams): each writes its own words of the
 * mapped block (the head's: khead_word; motion's: the others but `valid`)
 * and fences them (system scope), then one thread of it calls kmeet_valid:
 * it counts itself in on *meet, and the second to arrive sets *meet back to
 * 0 for the next frame and, after a fence, `valid` = 1. So neither kernel
 * waits for the other, and nothing goes through the stage in between.
 */
static __device__ __forceinline__ bool khead_word(unsigned i)
{
        return i >= offsetof(struct zcp_result, topk_count) / 4 && i < offsetof(struct zcp_result, grid_w) / 4;
}

static __device__ __forceinline__ void kmeet_valid(unsigned *meet, struct zcp_result *dst)
{
        if (atomicAdd(meet, 1u) == 1u) {
                *meet = 0u;   /* both are in: nobody else touches it this frame */
                __threadfence_system();
                *(volatile unsigned *)&dst->valid = 1u;
        }
}

/*
 * kmeet_valid for a thread that read *meet (a volatile load) before its
 * system fence: seen 1, the other was in already, so this one is the second
 * without counting in (its fence, after the read, orders the other's words
 * before `valid`); else as kmeet_valid. The head reads it early, beside its
 * softmax, so that where motion has long finished the atomic's round trip
 * is not on the critical path.
 */
static __device__ __forceinline__ void kmeet_valid_seen(unsigned *meet, struct zcp_result *dst, unsigned seen)
{
        if (seen == 1u) {
                *meet = 0u;
                *(volatile unsigned *)&dst->valid = 1u;
        } else {
                kmeet_valid(meet, dst);
        }
}

/*
 * Called by every thread of one block after the stage block is complete
 * (and visible: the caller fences and synchronizes before): copies it word
 * by word to the mapped block, then `valid` = 1 after a system fence. With
 * meet: only the head's words (head) or only the others (motion's), and
 * `valid` by kmeet_valid.
 */
static __device__ __forceinline__ void kpublish_block(const struct zcp_result *stage, struct zcp_result *dst,
                                                      unsigned *meet = NULL, bool head = false)
{
        const unsigned *s = (const unsigned *)stage;
        unsigned *d = (unsigned *)dst;

        for (unsigned i = 1 + threadIdx.x; i < ZCP_RESULT_WORDS; i += blockDim.x)
                if (!meet || khead_word(i) == head)
                        d[i] = s[i];
        __threadfence_system();
        __syncthreads();
        if (threadIdx.x == 0) {
                if (meet)
                        kmeet_valid(meet, dst);
                else
                        *(volatile unsigned *)&dst->valid = 1u;
        }
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
 * Programmatic dependent launch (compute capability 9.0 and later;
 * kpdl_enabled()): the kernels on the zero-copy
 * critical path after the scan (the resize, the layers, the head) are
 * launched with the programmatic-serialization attribute, so each is
 * scheduled as soon as the kernel before it has finished, without the
 * launch gap, and waits at its top (kpdl_wait) until that kernel's writes
 * are visible. No kernel triggers early: waiting grids would hold SM slots
 * the running one needs. Launched plainly, kpdl_wait returns at once.
 */
static __device__ __forceinline__ void kpdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* A launch with `smem` bytes of dynamic shared memory, dependent when pdl. */
template <typename... KArgs, typename... Args>
static void klaunch_smem(bool pdl, void (*kernel)(KArgs...), unsigned grid, unsigned block, size_t smem,
                         cudaStream_t st, Args... args)
{
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute attr[1] = {};

        cfg.gridDim = dim3(grid);
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
static void klaunch(bool pdl, void (*kernel)(KArgs...), unsigned grid, unsigned block, cudaStream_t st,
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
