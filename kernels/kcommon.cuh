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
 * Called by every thread of one block after the stage block is complete
 * (and visible: the caller fences and synchronizes before): copies it word
 * by word to the mapped block, then `valid` = 1 after a system fence.
 */
static __device__ __forceinline__ void kpublish_block(const struct zcp_result *stage, struct zcp_result *dst)
{
        const unsigned *s = (const unsigned *)stage;
        unsigned *d = (unsigned *)dst;

        for (unsigned i = 1 + threadIdx.x; i < ZCP_RESULT_WORDS; i += blockDim.x)
                d[i] = s[i];
        __threadfence_system();
        __syncthreads();
        if (threadIdx.x == 0)
                *(volatile unsigned *)&dst->valid = 1u;
}
