/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Host-only helpers shared by the kernel tests, the CPU tests and the
 * benchmarks (header only, no CUDA): a seeded random generator, NV12 frames,
 * a stream config with every
 * default (through the production config parser), and the sample's first
 * frames decoded by the production file source. Single-threaded test code.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/source.h"
#include "common.h"
#include "convert/convert.h"
#include "core/config.h"
#include "core/metrics.h"
#include "core/ring.h"
#include "infer/reference.h"

static uint64_t kt_rng = 1;

static inline void kt_seed(uint64_t s)
{
        kt_rng = s;
}

static inline uint64_t kt_rnd(void)
{
        uint64_t z = (kt_rng += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static inline float kt_unit(void)
{
        return (float)(kt_rnd() >> 40) * 0x1.0p-23f - 1.0f;
}

static inline void *kt_malloc(size_t n)
{
        void *p = malloc(n ? n : 1);
        CHECK(p);
        return p;
}

/*
 * NV12 frame: luma with structure (a gradient and a box at a random place)
 * plus noise, chroma noise; or (noise_only) every byte uniform.
 */
static inline void kt_frame(uint8_t *f, uint32_t w, uint32_t h, bool noise_only)
{
        const uint32_t bx = (uint32_t)(kt_rnd() % w), by = (uint32_t)(kt_rnd() % h);
        const uint32_t bs = 8 + (uint32_t)(kt_rnd() % (w / 4 + 1));

        if (noise_only) {
                for (size_t i = 0; i < zcp_nv12_size(w, h); i += 8) {
                        uint64_t r = kt_rnd();
                        size_t n = zcp_nv12_size(w, h) - i < 8 ? zcp_nv12_size(w, h) - i : 8;
                        memcpy(f + i, &r, n);
                }
                return;
        }
        for (uint32_t y = 0; y < h; y++)
                for (uint32_t x = 0; x < w; x++) {
                        uint32_t v = (x * 3 + y * 2) % 180 + (uint32_t)(kt_rnd() >> 59);
                        if (x >= bx && x < bx + bs && y >= by && y < by + bs)
                                v = 235 - (uint32_t)(kt_rnd() >> 60);
                        f[(size_t)y * w + x] = (uint8_t)v;
                }
        for (size_t i = (size_t)w * h; i < zcp_nv12_size(w, h); i++)
                f[i] = (uint8_t)(kt_rnd() >> 56);
}

/* Stream config with every default (production parser), then the caller's changes. */
static inline struct zcp_stream_config kt_stream_config(void)
{
        static const char yaml[] = "streams:\n  - name: kt\n    source:\n      type: synthetic\n";
        struct zcp_config *c = NULL;
        struct zcp_stream_config s;
        char err[512] = "";

        CHECK_MSG(zcp_config_parse("kernels-test", yaml, sizeof(yaml) - 1, &c, err, sizeof(err)) == 0, "%s", err);
        s = c->streams[0];
        zcp_config_free(c);
        return s;
}

/*
 * Decodes up to max frames of a clip through the production file source and
 * convert; returns the count (0 with a printed reason when it cannot) and
 * malloc'ed NV12 frames in frames[].
 */
static inline uint32_t kt_clip_frames(const char *clip, uint8_t **frames, uint32_t max, uint32_t *ret_w,
                                      uint32_t *ret_h)
{
#if HAVE_GSTREAMER
        static struct zcp_stream_stats st;
        const struct zcp_source_ops *ops = &zcp_source_file;
        struct zcp_stream_config cfg = kt_stream_config();
        struct zcp_source_ctx *src = NULL;
        struct zcp_source_info info;
        struct zcp_ring *ring = NULL;
        uint8_t *scratch = NULL;
        size_t scratch_size, slot_size;
        uint32_t n = 0;
        int r;

        zcp_stream_stats_init(&st);
        cfg.source.type = ZCP_SOURCE_FILE;
        snprintf(cfg.source.path, sizeof(cfg.source.path), "%s", clip);
        cfg.source.pace = ZCP_PACE_FAST;
        cfg.source.loop = false;
        r = ops->open(&cfg, &st, &src, &info);
        if (r < 0) {
                printf("note: sample frames: cannot open %s (%d): real-frame cases not run\n", cfg.source.path, r);
                return 0;
        }
        slot_size = zcp_pixfmt_slot_size(info.fmt, info.width, info.height, info.stride);
        scratch_size = zcp_convert_scratch_size(info.fmt, info.width, info.height, info.stride);
        CHECK(slot_size > 0);
        scratch = kt_malloc(scratch_size);
        CHECK(zcp_ring_new(4, slot_size, 0, &zcp_host_allocator, &st, &ring) == 0);
        CHECK(ops->start(src, ring) == 0);
        while (n < max) {
                uint32_t idx;
                struct zcp_slot *s;

                r = ops->next(src, ring);
                if (r == ZCP_SOURCE_AGAIN)
                        continue;
                if (r != ZCP_SOURCE_FRAME)
                        break;
                CHECK(zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], 0, &idx) == 0);
                s = zcp_ring_slot(ring, idx);
                if (!(s->frame.flags & ZCP_FRAME_DROPPED)) {
                        CHECK(zcp_convert_to_nv12(s->frame.fmt, s->data, ring->slot_size, s->frame.width,
                                                  s->frame.height, s->frame.stride, scratch, scratch_size) == 0);
                        frames[n] = kt_malloc(zcp_nv12_size(info.width, info.height));
                        memcpy(frames[n], s->data, zcp_nv12_size(info.width, info.height));
                        n++;
                }
                zcp_ring_move(ring, idx, ZCP_SLOT_CONVERT, ZCP_SLOT_FREE);
                CHECK(zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx) == 0);
        }
        ops->stop(src, ring);
        ops->close(src);
        zcp_ring_free(ring);
        free(scratch);
        *ret_w = info.width;
        *ret_h = info.height;
        printf("sample: %u frames of %s, %ux%u %s -> nv12\n", n, cfg.source.path, info.width, info.height,
               zcp_pixfmt_name(info.fmt));
        return n;
#else
        (void)clip;
        (void)frames;
        (void)max;
        (void)ret_w;
        (void)ret_h;
        printf("note: built without GStreamer: real-frame cases not run\n");
        return 0;
#endif
}

/* The sample's first frames (kt_clip_frames of samples/vtest-h264.mp4). */
static inline uint32_t kt_sample_frames(uint8_t **frames, uint32_t max, uint32_t *ret_w, uint32_t *ret_h)
{
        char path[ZCP_PATH_MAX];

        snprintf(path, sizeof(path), "%s/samples/vtest-h264.mp4", zcp_test_src_root());
        return kt_clip_frames(path, frames, max, ret_w, ret_h);
}

/* ---- moving masks (core/frame.h) ---- */

static inline bool kt_mask_bit(const uint32_t *mask, size_t i)
{
        return (mask[i / 32] >> (i % 32)) & 1u;
}

/*
 * What must hold of a result's moving mask, for a width x height frame at
 * `cell`: grid and word count as the geometry says, bits past the last cell
 * zero, popcount == moving_cells, and bbox exactly the pixel box of the set
 * cells (so every set cell lies inside it; all -1 with none set).
 */
static inline void kt_mask_check(const struct zcp_result *r, const uint32_t *mask, uint32_t width, uint32_t height,
                                 uint32_t cell, const char *what)
{
        const uint32_t gw = (width + cell - 1) / cell, gh = (height + cell - 1) / cell;
        const size_t n = (size_t)gw * gh, words = (n + 31) / 32;
        uint32_t pop = 0, x0 = UINT32_MAX, y0 = UINT32_MAX, x1 = 0, y1 = 0;
        int32_t box[4] = { -1, -1, -1, -1 };

        CHECK_MSG(r->grid_w == gw && r->grid_h == gh && r->mask_words == words,
                  "%s: grid %ux%u, %u mask words; expected %ux%u, %zu", what, r->grid_w, r->grid_h, r->mask_words, gw,
                  gh, words);
        for (size_t i = n; i < words * 32; i++)
                CHECK_MSG(!kt_mask_bit(mask, i), "%s: mask bit %zu set past the %zu cells", what, i, n);
        for (size_t i = 0; i < n; i++) {
                const uint32_t gx = (uint32_t)(i % gw), gy = (uint32_t)(i / gw);

                if (!kt_mask_bit(mask, i))
                        continue;
                pop++;
                x0 = gx < x0 ? gx : x0;
                y0 = gy < y0 ? gy : y0;
                x1 = gx > x1 ? gx : x1;
                y1 = gy > y1 ? gy : y1;
                CHECK_MSG((int64_t)gx * cell >= r->bbox[0] && (int64_t)gy * cell >= r->bbox[1] &&
                                  (int64_t)gx * cell < r->bbox[2] && (int64_t)gy * cell < r->bbox[3],
                          "%s: moving cell (%u, %u) outside bbox %d,%d,%d,%d", what, gx, gy, r->bbox[0], r->bbox[1],
                          r->bbox[2], r->bbox[3]);
        }
        CHECK_MSG(pop == r->moving_cells, "%s: mask popcount %u, moving_cells %u", what, pop, r->moving_cells);
        if (pop) {
                box[0] = (int32_t)(x0 * cell);
                box[1] = (int32_t)(y0 * cell);
                box[2] = (int32_t)((x1 + 1) * cell < width ? (x1 + 1) * cell : width);
                box[3] = (int32_t)((y1 + 1) * cell < height ? (y1 + 1) * cell : height);
        }
        CHECK_MSG(memcmp(box, r->bbox, sizeof(box)) == 0, "%s: bbox %d,%d,%d,%d, the mask's cells span %d,%d,%d,%d",
                  what, r->bbox[0], r->bbox[1], r->bbox[2], r->bbox[3], box[0], box[1], box[2], box[3]);
}

/*
 * The obvious moving mask of frame b after frame a (NV12, width x height;
 * a set the background, so it is a's cell means exactly): per cell, the
 * integer mean luma of each frame by a plain loop over its pixels (edge
 * cells smaller), moving when |mean_b - mean_a| > threshold. Returns the
 * count set; ret_mask of (cells + 31) / 32 words.
 */
static inline uint32_t kt_mask_two_frames(const uint8_t *a, const uint8_t *b, uint32_t width, uint32_t height,
                                          uint32_t cell, float threshold, uint32_t *ret_mask)
{
        const uint32_t gw = (width + cell - 1) / cell, gh = (height + cell - 1) / cell;
        uint32_t count = 0;

        memset(ret_mask, 0, ((size_t)gw * gh + 31) / 32 * 4);
        for (uint32_t gy = 0; gy < gh; gy++)
                for (uint32_t gx = 0; gx < gw; gx++) {
                        uint64_t sa = 0, sb = 0, px = 0;
                        for (uint32_t y = gy * cell; y < height && y < (gy + 1) * cell; y++)
                                for (uint32_t x = gx * cell; x < width && x < (gx + 1) * cell; x++) {
                                        sa += a[(size_t)y * width + x];
                                        sb += b[(size_t)y * width + x];
                                        px++;
                                }
                        const double d = (double)(sb / px) - (double)(sa / px);
                        if (fabs(d) > threshold) {
                                const size_t i = (size_t)gy * gw + gx;
                                ret_mask[i / 32] |= 1u << (i % 32);
                                count++;
                        }
                }
        return count;
}
