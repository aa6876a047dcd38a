/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Helpers shared by the kernel tests and the GPU benchmark (header only):
 * the host-side ones of hostutil.h (random generator, frames, models, stream
 * config, the sample's frames), a memfd buffer, slots, and CUDA call
 * checking. Single-threaded test code.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "capture/source.h"
#include "common.h"
#include "hostutil.h"
#include "convert/convert.h"
#include "core/config.h"
#include "core/metrics.h"
#include "core/ring.h"
#include "infer/backend.h"
#include "infer/reference.h"
#include "infer/weights.h"
#include "zcp_kernels.h"

#define CK(call)                                                                                  \
        do {                                                                                      \
                cudaError_t e_ = (cudaError_t)(call);                                             \
                CHECK_MSG(e_ == cudaSuccess, "%s: %s (%s)", #call, cudaGetErrorString(e_),        \
                          cudaGetErrorName(e_));                                                  \
        } while (0)

/* A capture driver's buffer stand-in: `bytes` of a memfd, mapped shared (as V4L2 mmap buffers are). */
static inline uint8_t *kt_memfd_buffer(size_t bytes)
{
        int fd = memfd_create("zcp-kt-lend", MFD_CLOEXEC);
        void *p;

        CHECK_MSG(fd >= 0, "memfd_create: %s", strerror(errno));
        CHECK_MSG(ftruncate(fd, (off_t)bytes) == 0, "ftruncate: %s", strerror(errno));
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        CHECK_MSG(p != MAP_FAILED, "mmap %zu bytes of a memfd: %s", bytes, strerror(errno));
        close(fd);
        return p;
}

/* Fills a slot as convert hands it to infer: NV12 frame of w x h. */
static inline void kt_slot_frame(struct zcp_slot *s, const uint8_t *nv12, uint32_t w, uint32_t h, uint64_t seq)
{
        memcpy(s->data, nv12, zcp_nv12_size(w, h));
        memset(&s->frame, 0, sizeof(s->frame));
        s->frame.width = w;
        s->frame.height = h;
        s->frame.fmt = ZCP_PIX_NV12;
        s->frame.stride = w;
        s->frame.bytes = zcp_nv12_size(w, h);
        s->frame.seq = seq;
}

/* Exits 77 with the reason when no usable CUDA GPU is there (the production probe). */
static inline void kt_need_gpu(void)
{
        char why[256] = "";

        if (zcp_backend_cuda.probe(0, why, sizeof(why)) < 0) {
                printf("SKIP: no usable CUDA GPU: %s\n", why);
                exit(ZCP_TEST_SKIP);
        }
}
