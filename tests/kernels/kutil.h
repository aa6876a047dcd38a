/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Helpers shared by the kernel tests and the GPU benchmarks (header only):
 * the host-side ones of hostutil.h (random generator, frames, stream config,
 * the sample's frames) and planutil.h (plans), a memfd buffer, slots, backend
 * parameters, the detections' contract, and CUDA call checking.
 * Single-threaded test code.
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
#include "planutil.h"
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

/* The backend parameters every backend computes from a config, a plan (NULL: none) and a geometry. */
static inline struct zcp_backend_params kt_backend_params(const struct zcp_stream_config *cfg,
                                                          const struct zcp_plan *plan, uint32_t w, uint32_t h,
                                                          const char *name)
{
        struct zcp_backend_params bp;
        char err[256] = "";

        CHECK_MSG(zcp_backend_params_init(&bp, cfg, plan, w, h, name, err, sizeof(err)) == 0, "%s", err);
        return bp;
}

/*
 * IoU of two boxes as their corners lie: a random detector's negative sizes give boxes whose
 * corners are swapped ([582 480 640 0] clamped to a 640x480 frame), which compare as the
 * rectangles they span; boxes of no area match when their corners are within 0.01 px.
 */
static inline float kt_box_iou(const float *a, const float *b)
{
        const float ax0 = fminf(a[0], a[2]), ax1 = fmaxf(a[0], a[2]), ay0 = fminf(a[1], a[3]), ay1 = fmaxf(a[1], a[3]);
        const float bx0 = fminf(b[0], b[2]), bx1 = fmaxf(b[0], b[2]), by0 = fminf(b[1], b[3]), by1 = fmaxf(b[1], b[3]);
        const float iw = fminf(ax1, bx1) - fmaxf(ax0, bx0), ih = fminf(ay1, by1) - fmaxf(ay0, by0);
        const float inter = fmaxf(iw, 0.0f) * fmaxf(ih, 0.0f);
        const float uni = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter;

        if (uni > 0.0f)
                return inter / uni;
        for (int i = 0; i < 4; i++)
                if (fabsf(a[i] - b[i]) > 0.01f)
                        return 0.0f;
        return 1.0f;
}

/*
 * The detections' contract (DESIGN.md §7): every detection of `a` has one of `b` (each used
 * once) of its class with box IoU >= 0.95 and a score within 1e-3, unless it is on a border
 * where a rounding may put it on either side: its score within 1e-3 of the threshold, or of the
 * last kept one's when max_det were kept; and the other way round. Returns how many of a's
 * matched.
 */
static inline uint32_t kt_match_dets(const struct zcp_result *a, const struct zcp_result *b, float min_score,
                                     uint32_t max_det, const char *what)
{
        uint32_t matched = 0;

        for (int dir = 0; dir < 2; dir++) {
                const struct zcp_result *x = dir ? b : a, *y = dir ? a : b;
                bool used[ZCP_DET_MAX] = { false };

                for (uint32_t i = 0; i < x->det_count; i++) {
                        const struct zcp_detection *d = &x->det[i];
                        bool found = false;
                        for (uint32_t j = 0; j < y->det_count && !found; j++) {
                                const struct zcp_detection *e = &y->det[j];
                                if (!used[j] && e->cls == d->cls && fabsf(e->score - d->score) <= 1e-3f &&
                                    kt_box_iou(e->box, d->box) >= 0.95f)
                                        found = used[j] = true;
                        }
                        const bool border = fabsf(d->score - min_score) <= 1e-3f ||
                                            (x->det_count == max_det &&
                                             fabsf(d->score - x->det[max_det - 1].score) <= 1e-3f);
                        CHECK_MSG(found || border,
                                  "%s: %s detection %u (class %u, %.6f, [%.1f %.1f %.1f %.1f]) has no match", what,
                                  dir ? "second" : "first", i, d->cls, d->score, d->box[0], d->box[1], d->box[2],
                                  d->box[3]);
                        matched += found && !dir;
                }
        }
        return matched;
}
