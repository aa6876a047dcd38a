/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * zcpipe-bench's kernel (bench_kernels.cu), C ABI. A CUDA stream is passed as
 * `void *` (cudaStream_t; NULL: the legacy default stream).
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The grid: one result word per block, so the result is 4 KiB. */
#define ZCP_BENCH_BLOCKS 1024
#define ZCP_BENCH_THREADS 256

/*
 * Reads the n16 16-byte words at src (device memory, or host memory through
 * its mapped device pointer) `passes` times, every byte of each pass, and
 * writes ZCP_BENCH_BLOCKS sums to out (device or mapped host memory): the
 * words of out add up (mod 2^32) to passes times the sum of src's 32-bit
 * words, which the caller checks. src 16-byte aligned. Asynchronous on
 * stream; returns 0 or the launch's cudaError_t.
 */
int zcp_bench_read(const void *src, size_t n16, int passes, uint32_t *out, void *stream);

#ifdef __cplusplus
}
#endif
