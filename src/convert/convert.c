/* SPDX-License-Identifier: MIT */
/*
 * In-place conversion of a slot's frame to tightly packed NV12 (convert.h).
 * In: one frame in a capture format; out: NV12 at the same address. Runs on
 * the convert thread (and its band workers); keeps no state, allocates
 * nothing, logs nothing.
 *
 * The output never extends past the input (except GREY, whose slot is sized
 * for the NV12 result), and every output byte is written only where the input
 * has already been read:
 * - Planar inputs move rows towards the start (memmove). I420/YV12 first copy
 *   their first chroma plane into scratch, then interleave it with the second
 *   plane, row by row, through a one-row buffer where the row would overlap
 *   the second plane's unread rows.
 * - Packed inputs (4:2:2, RGB) go row pair by row pair, top-down. Luma of pair
 *   j >= 1 lands wholly in front of pair j's input. Chroma row j goes straight
 *   to its place once that place lies in front of pair j's input (pairs >=
 *   packed_deferred_pairs()); the earlier rows wait in scratch and are copied
 *   in as soon as the input under their place has been read (that copy is
 *   most of what in place costs over out of place: about a tenth of a 4:2:2
 *   frame's time). Pair 0, whose luma overlaps its own input, goes chroma
 *   and row 0 first (row 0 in place, left to right, each store behind its
 *   loads), then row 1: AVX2 for 4:2:2 where the CPU has it, else C; RGB in
 *   C always (convert.h's rounding). Vector code converts the other pairs:
 *   AVX2 intrinsics where the CPU has AVX2 (4:2:2 and RGB, one fused pass
 *   per row pair, libyuv's x86 bytes for RGB), else vector extensions
 *   (4:2:2) or libyuv row calls (RGB); each call on input that its outputs
 *   do not overlap, in chunks as large as that allows; where libyuv's row
 *   buffers do not fit in half a frame (tiny frames), the C code does it
 *   all (scratch is sized for them whichever path runs, so that the bytes
 *   do not depend on the CPU there).
 * - Large packed frames may be split across worker threads
 *   (zcp_convert_packed_mt: one open fork-join per frame; chunks of row pairs
 *   and copies out of scratch, each waiting only for the chunks whose input
 *   it overwrites); the bytes are the same as one thread's.
 * libyuv entry points that allocate (RAWToI420, UYVYToNV12, ARGBToNV12, ...)
 * are avoided: without AVX2, RGB goes through ARGB rows and *ToI420 plus
 * MergeUVPlane, a few row pairs per call (TMP_ROWS_MAX).
 *
 * This file holds the entry points, the format table and the planar and grey
 * formats; the packed formats' order of work is convert_packed.c, their rows
 * convert_rows.c (convert_priv.h says who calls whom).
 */
#include <errno.h>
#include <string.h>

#include <libyuv.h>

#include "convert/convert.h"
#include "convert/convert_packed.h"
#include "convert/convert_priv.h"
#include "core/workers.h"

/* Rows and row bytes above this are refused (keeps libyuv's int math safe). */
#define MAX_DIM (1u << 28)

struct fmt_desc {
        void (*convert)(const struct fmt_desc *d, const struct geom *g, uint8_t *buf, uint8_t *scratch);
        size_t (*scratch)(const struct fmt_desc *d, const struct geom *g);
        const struct zcp_convert_rows *rows; /* packed only */
        bool planar420;                 /* chroma planes follow the luma plane */
        bool swap_uv;                   /* chroma order V before U (NV21, YV12) */
        uint8_t bpp;                    /* bytes per pixel of the first plane */
};

/* Moves `rows` rows of `len` bytes from stride src_stride to stride len, towards lower addresses. */
static void compact_rows(uint8_t *buf, size_t dst, size_t src, size_t src_stride, size_t len, uint32_t rows)
{
        if (dst == src && src_stride == len)
                return;
        for (uint32_t i = 0; i < rows; i++)
                memmove(buf + dst + i * len, buf + src + i * src_stride, len);
}

/* Swaps the bytes of each 2-byte pair of p[0..n) (n even), 8 bytes at a time. */
static void swap_uv(uint8_t *p, size_t n)
{
        const uint64_t lo = 0x00ff00ff00ff00ffull;
        size_t i = 0;

        for (; i + 8 <= n; i += 8) {
                uint64_t v;
                memcpy(&v, p + i, 8);
                v = ((v & lo) << 8) | ((v >> 8) & lo);
                memcpy(p + i, &v, 8);
        }
        for (; i + 1 < n; i += 2) {
                uint8_t t = p[i];
                p[i] = p[i + 1];
                p[i + 1] = t;
        }
}

/* ---- planar and grey ---- */

static size_t no_scratch(const struct fmt_desc *d, const struct geom *g)
{
        return 0;
}

static void convert_nv(const struct fmt_desc *d, const struct geom *g, uint8_t *buf, uint8_t *scratch)
{
        const size_t w = g->w, s = g->s, wh = w * g->h;

        compact_rows(buf, 0, 0, s, w, g->h);
        compact_rows(buf, wh, s * g->h, s, w, g->h / 2);
        if (d->swap_uv)
                swap_uv(buf + wh, wh / 2);
}

/* First chroma plane (tight), then one row buffer. */
static size_t i420_scratch(const struct fmt_desc *d, const struct geom *g)
{
        return (size_t)(g->w / 2) * (g->h / 2) + g->w;
}

static void convert_i420(const struct fmt_desc *d, const struct geom *g, uint8_t *buf, uint8_t *scratch)
{
        const size_t w = g->w, s = g->s, wh = w * g->h, cw = w / 2, cs = s / 2;
        const size_t p1 = s * g->h, p2 = p1 + cs * (g->h / 2);
        uint8_t *row = scratch + cw * (g->h / 2);

        compact_rows(buf, 0, 0, s, w, g->h);
        for (uint32_t j = 0; j < g->h / 2; j++)
                memcpy(scratch + j * cw, buf + p1 + j * cs, cw);

        for (uint32_t j = 0; j < g->h / 2; j++) {
                const uint8_t *first = scratch + j * cw, *second = buf + p2 + j * cs;
                const uint8_t *u = d->swap_uv ? second : first, *v = d->swap_uv ? first : second;
                uint8_t *dst = buf + wh + j * w;

                /* Straight in unless the row overlaps second-plane row j (rows > j lie beyond it). */
                if (wh + (j + 1) * w <= p2 + j * cs) {
                        MergeUVPlane(u, (int)cw, v, (int)cw, dst, (int)w, (int)cw, 1);
                } else {
                        MergeUVPlane(u, (int)cw, v, (int)cw, row, (int)w, (int)cw, 1);
                        memcpy(dst, row, w);
                }
        }
}

static void convert_grey(const struct fmt_desc *d, const struct geom *g, uint8_t *buf, uint8_t *scratch)
{
        const size_t w = g->w, wh = w * g->h;

        compact_rows(buf, 0, 0, g->s, w, g->h);
        memset(buf + wh, 128, wh / 2);
}

static void convert_packed(const struct fmt_desc *d, const struct geom *g, uint8_t *buf, uint8_t *scratch)
{
        zcp_convert_packed(d->rows, g, buf, scratch);
}

static size_t packed_scratch(const struct fmt_desc *d, const struct geom *g)
{
        return zcp_convert_packed_scratch(d->rows, g);
}

#define PACKED(fmt, bpp_)                                                                       \
        {                                                                                       \
                .convert = convert_packed, .scratch = packed_scratch,                           \
                .rows = &zcp_convert_packed_rows[fmt], .bpp = bpp_                              \
        }

static const struct fmt_desc descs[ZCP_PIX_COUNT] = {
        [ZCP_PIX_YUYV] = PACKED(ZCP_PIX_YUYV, 2),
        [ZCP_PIX_UYVY] = PACKED(ZCP_PIX_UYVY, 2),
        [ZCP_PIX_YVYU] = PACKED(ZCP_PIX_YVYU, 2),
        [ZCP_PIX_NV12] = { .convert = convert_nv, .scratch = no_scratch, .planar420 = true, .bpp = 1 },
        [ZCP_PIX_NV21] = { .convert = convert_nv, .scratch = no_scratch, .planar420 = true, .swap_uv = true, .bpp = 1 },
        [ZCP_PIX_I420] = { .convert = convert_i420, .scratch = i420_scratch, .planar420 = true, .bpp = 1 },
        [ZCP_PIX_YV12] = { .convert = convert_i420, .scratch = i420_scratch, .planar420 = true, .swap_uv = true, .bpp = 1 },
        [ZCP_PIX_RGB24] = PACKED(ZCP_PIX_RGB24, 3),
        [ZCP_PIX_BGR24] = PACKED(ZCP_PIX_BGR24, 3),
        [ZCP_PIX_RGBX] = PACKED(ZCP_PIX_RGBX, 4),
        [ZCP_PIX_BGRX] = PACKED(ZCP_PIX_BGRX, 4),
        [ZCP_PIX_GREY] = { .convert = convert_grey, .scratch = no_scratch, .bpp = 1 },
};

static const struct fmt_desc *desc_of(enum zcp_pixfmt fmt)
{
        if ((unsigned)fmt >= ZCP_PIX_COUNT || !descs[fmt].convert)
                return NULL;
        return &descs[fmt];
}

static int geom_init(const struct fmt_desc *d, uint32_t width, uint32_t height, uint32_t stride, struct geom *ret_g)
{
        if (!d || width == 0 || height == 0 || width % 2 || height % 2)
                return -EINVAL;
        if (stride > MAX_DIM || height > MAX_DIM || (uint64_t)width * d->bpp > stride)
                return -EINVAL;
        if (d->planar420 && stride % 2)
                return -EINVAL;

        size_t luma = (size_t)stride * height;
        *ret_g = (struct geom){
                .w = width,
                .h = height,
                .s = stride,
                .in_size = d->planar420 ? luma + luma / 2 : luma,
                .out_size = zcp_nv12_size(width, height),
        };
        return 0;
}

/* A packed frame that `threads` threads split (convert_packed.h). */
static bool mt_eligible(const struct fmt_desc *d, const struct geom *g, uint32_t threads)
{
        return d->rows && zcp_convert_packed_mt_eligible(d->rows, g, threads);
}

bool zcp_convert_supported(enum zcp_pixfmt fmt)
{
        return desc_of(fmt) != NULL;
}

size_t zcp_convert_scratch_size_mt(enum zcp_pixfmt fmt, uint32_t width, uint32_t height, uint32_t stride,
                                   uint32_t threads)
{
        const struct fmt_desc *d = desc_of(fmt);
        struct geom g;
        size_t one, mt;

        if (geom_init(d, width, height, stride, &g) < 0)
                return 0;
        one = d->scratch(d, &g);
        if (!mt_eligible(d, &g, threads))
                return one;
        mt = zcp_convert_packed_mt_scratch(d->rows, &g, threads);
        return one > mt ? one : mt;
}

size_t zcp_convert_scratch_size(enum zcp_pixfmt fmt, uint32_t width, uint32_t height, uint32_t stride)
{
        return zcp_convert_scratch_size_mt(fmt, width, height, stride, 1);
}

uint32_t zcp_convert_team_size(enum zcp_pixfmt fmt, uint32_t width, uint32_t height, uint32_t stride,
                               uint32_t threads)
{
        const struct fmt_desc *d = desc_of(fmt);
        struct geom g;

        if (geom_init(d, width, height, stride, &g) < 0 || !mt_eligible(d, &g, threads))
                return 1;
        return threads;
}

uint32_t zcp_convert_auto_threads(uint32_t width, uint32_t height, uint32_t cpus)
{
        const uint64_t px = (uint64_t)width * height;
        /*
         * 1080p and up: 4. Below, one thread: a smaller frame is too short
         * for a split to pay for the other cores pulling its lines (two
         * threads took 1.35x one thread's time for 720p 4:2:2 and RGB on a
         * 16-core host).
         */
        const uint32_t n = px >= 1920ull * 1080 ? 4 : 1;
        /* Half the CPUs at most: the stream's other stage threads run meanwhile. */
        const uint32_t cap = cpus / 2 ? cpus / 2 : 1;

        return n < cap ? n : cap;
}

int zcp_convert_to_nv12_mt(struct zcp_workers *workers, enum zcp_pixfmt fmt, uint8_t *buf, size_t buf_size,
                           uint32_t width, uint32_t height, uint32_t stride, uint8_t *scratch, size_t scratch_size)
{
        const struct fmt_desc *d = desc_of(fmt);
        const uint32_t threads = zcp_workers_count(workers);
        struct geom g;
        int r;

        r = geom_init(d, width, height, stride, &g);
        if (r < 0)
                return r;
        if (!buf)
                return -EINVAL;
        if (buf_size < g.in_size || buf_size < g.out_size)
                return -ENOSPC;
        size_t need = zcp_convert_scratch_size_mt(fmt, width, height, stride, threads);
        if (scratch_size < need || (need && !scratch))
                return -EINVAL;

        if (mt_eligible(d, &g, threads))
                zcp_convert_packed_mt(workers, d->rows, &g, buf, scratch);
        else
                d->convert(d, &g, buf, scratch);
        return 0;
}

int zcp_convert_to_nv12(enum zcp_pixfmt fmt, uint8_t *buf, size_t buf_size, uint32_t width, uint32_t height,
                        uint32_t stride, uint8_t *scratch, size_t scratch_size)
{
        return zcp_convert_to_nv12_mt(NULL, fmt, buf, buf_size, width, height, stride, scratch, scratch_size);
}
