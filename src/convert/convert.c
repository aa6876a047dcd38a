/* SPDX-License-Identifier: MIT */
/*
 * In-place conversion of a slot's frame to tightly packed NV12 (convert.h).
 * In: one frame in a capture format; out: NV12 at the same address. Runs on
 * the convert thread; keeps no state, allocates nothing, logs nothing.
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
 *   in at the end. Pair 0, whose luma overlaps its own input, is done in C:
 *   chroma first, then row 0 in place left to right, then row 1.
 *   libyuv converts the other pairs, each call on input that its outputs do
 *   not overlap, in chunks as large as that allows; where libyuv's row
 *   buffers do not fit in half a frame (tiny frames), the C code does it all.
 * libyuv entry points that allocate (RAWToI420, UYVYToNV12, ARGBToNV12, ...)
 * are avoided: RGB goes through ARGB rows and *ToI420 plus MergeUVPlane.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <libyuv.h>

#include "convert/convert.h"

/* Rows and row bytes above this are refused (keeps libyuv's int math safe). */
#define MAX_DIM (1u << 28)

struct geom {
        uint32_t w, h, s;
        size_t in_size;  /* input bytes with this stride */
        size_t out_size; /* NV12 bytes */
};

struct fmt_desc;

/*
 * One packed row pair in C: chroma of rows src, src + stride to dst_uv (w
 * bytes), then luma of the upper row to dst_y0 (may equal src: written
 * left to right behind the reads), then the lower row to dst_y1.
 */
typedef void (*zcp_convert_pair_fn)(const struct fmt_desc *d, const uint8_t *src, size_t stride, uint8_t *dst_y0,
                                    uint8_t *dst_y1, uint8_t *dst_uv, uint32_t w);
/* libyuv on `rows` packed rows (even) whose outputs do not overlap them. */
typedef void (*zcp_convert_simd_fn)(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows,
                                    uint8_t *tmp);

struct fmt_desc {
        void (*convert)(const struct fmt_desc *d, const struct geom *g, uint8_t *buf, uint8_t *scratch);
        size_t (*scratch)(const struct fmt_desc *d, const struct geom *g);
        zcp_convert_pair_fn c_pair;     /* packed only */
        zcp_convert_simd_fn simd;       /* packed only */
        size_t (*simd_tmp)(uint32_t w); /* packed: row buffer bytes simd needs; NULL = none */
        bool simd_multi;                /* simd takes several row pairs per call (else exactly 2 rows) */
        bool planar420;                 /* chroma planes follow the luma plane */
        bool swap_uv;                   /* chroma order V before U (NV21, YV12) */
        uint8_t bpp;                    /* bytes per pixel of the first plane */
        uint8_t off[4];                 /* packed 4:2:2: Y0 U Y1 V offsets in 4 bytes; RGB: R G B offsets */
};

static inline size_t min_sz(size_t a, size_t b)
{
        return a < b ? a : b;
}

static inline size_t align64(size_t n)
{
        return (n + 63) & ~(size_t)63;
}

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

/* ---- BT.601 limited range, integer (the formulas convert.h documents) ---- */

static inline uint8_t rgb_to_y(int r, int g, int b)
{
        return (uint8_t)((66 * r + 129 * g + 25 * b + 0x1080) >> 8);
}

static inline uint8_t rgb_to_u(int r, int g, int b)
{
        return (uint8_t)((112 * b - 74 * g - 38 * r + 0x8080) >> 8);
}

static inline uint8_t rgb_to_v(int r, int g, int b)
{
        return (uint8_t)((112 * r - 94 * g - 18 * b + 0x8080) >> 8);
}

/* ---- packed formats: C row pair ---- */

static void pair_yuv422(const struct fmt_desc *d, const uint8_t *src, size_t stride, uint8_t *dst_y0,
                        uint8_t *dst_y1, uint8_t *dst_uv, uint32_t w)
{
        const unsigned oy0 = d->off[0], ou = d->off[1], oy1 = d->off[2], ov = d->off[3];
        const uint8_t *r0 = src, *r1 = src + stride;

        for (uint32_t x = 0; x < w; x += 2) {
                const uint8_t *p = r0 + 2 * (size_t)x, *q = r1 + 2 * (size_t)x;
                dst_uv[x] = (uint8_t)((p[ou] + q[ou] + 1) >> 1);
                dst_uv[x + 1] = (uint8_t)((p[ov] + q[ov] + 1) >> 1);
        }
        for (uint32_t x = 0; x < w; x += 2) {
                uint8_t a = r0[2 * (size_t)x + oy0], b = r0[2 * (size_t)x + oy1];
                dst_y0[x] = a;
                dst_y0[x + 1] = b;
        }
        for (uint32_t x = 0; x < w; x += 2) {
                uint8_t a = r1[2 * (size_t)x + oy0], b = r1[2 * (size_t)x + oy1];
                dst_y1[x] = a;
                dst_y1[x + 1] = b;
        }
}

static void rgb_row_y(const struct fmt_desc *d, const uint8_t *row, uint8_t *dst, uint32_t w)
{
        const unsigned bpp = d->bpp, or_ = d->off[0], og = d->off[1], ob = d->off[2];

        for (uint32_t x = 0; x < w; x++) {
                const uint8_t *p = row + (size_t)x * bpp;
                dst[x] = rgb_to_y(p[or_], p[og], p[ob]);
        }
}

static void pair_rgb(const struct fmt_desc *d, const uint8_t *src, size_t stride, uint8_t *dst_y0, uint8_t *dst_y1,
                     uint8_t *dst_uv, uint32_t w)
{
        const unsigned bpp = d->bpp, or_ = d->off[0], og = d->off[1], ob = d->off[2];
        const uint8_t *r0 = src, *r1 = src + stride;

        for (uint32_t x = 0; x < w; x += 2) {
                const uint8_t *p = r0 + (size_t)x * bpp, *q = r1 + (size_t)x * bpp;
                int r = (p[or_] + p[bpp + or_] + q[or_] + q[bpp + or_] + 2) >> 2;
                int g = (p[og] + p[bpp + og] + q[og] + q[bpp + og] + 2) >> 2;
                int b = (p[ob] + p[bpp + ob] + q[ob] + q[bpp + ob] + 2) >> 2;
                dst_uv[x] = rgb_to_u(r, g, b);
                dst_uv[x + 1] = rgb_to_v(r, g, b);
        }
        rgb_row_y(d, r0, dst_y0, w);
        rgb_row_y(d, r1, dst_y1, w);
}

/* ---- packed formats: libyuv ---- */

static void simd_yuyv(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows, uint8_t *tmp)
{
        YUY2ToNV12(src, stride, dst_y, w, dst_uv, w, w, rows);
}

/* YVYU is YUYV with U and V exchanged: convert as YUYV, then swap the chroma bytes. */
static void simd_yvyu(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows, uint8_t *tmp)
{
        YUY2ToNV12(src, stride, dst_y, w, dst_uv, w, w, rows);
        swap_uv(dst_uv, (size_t)w * (size_t)(rows / 2));
}

/* tmp: U row (w/2), V row (w/2). */
static void simd_uyvy(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows, uint8_t *tmp)
{
        uint8_t *u = tmp, *v = tmp + w / 2;

        UYVYToI420(src, stride, dst_y, w, u, w / 2, v, w / 2, w, 2);
        MergeUVPlane(u, w / 2, v, w / 2, dst_uv, w, w / 2, 1);
}

/* libyuv "ABGR" is R G B A in memory: our RGBX. */
static void simd_rgbx(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows, uint8_t *tmp)
{
        uint8_t *u = tmp, *v = tmp + w / 2;

        ABGRToI420(src, stride, dst_y, w, u, w / 2, v, w / 2, w, 2);
        MergeUVPlane(u, w / 2, v, w / 2, dst_uv, w, w / 2, 1);
}

/* libyuv "ARGB" is B G R A in memory: our BGRX. */
static void simd_bgrx(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows, uint8_t *tmp)
{
        uint8_t *u = tmp, *v = tmp + w / 2;

        ARGBToI420(src, stride, dst_y, w, u, w / 2, v, w / 2, w, 2);
        MergeUVPlane(u, w / 2, v, w / 2, dst_uv, w, w / 2, 1);
}

/* tmp: U row, V row, then (64-aligned) two ARGB rows. */
static uint8_t *argb_rows(uint8_t *tmp, int w)
{
        return tmp + align64((size_t)w);
}

/* libyuv "RAW" is R G B in memory: our RGB24. */
static void simd_rgb24(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows, uint8_t *tmp)
{
        uint8_t *argb = argb_rows(tmp, w);

        RAWToARGB(src, stride, argb, 4 * w, w, 2);
        simd_bgrx(argb, 4 * w, dst_y, dst_uv, w, 2, tmp);
}

/* libyuv "RGB24" is B G R in memory: our BGR24. */
static void simd_bgr24(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows, uint8_t *tmp)
{
        uint8_t *argb = argb_rows(tmp, w);

        RGB24ToARGB(src, stride, argb, 4 * w, w, 2);
        simd_bgrx(argb, 4 * w, dst_y, dst_uv, w, 2, tmp);
}

static size_t tmp_uv_rows(uint32_t w)
{
        return w;
}

static size_t tmp_uv_argb_rows(uint32_t w)
{
        return align64(w) + 8 * (size_t)w;
}

/* ---- packed formats: driver ---- */

/*
 * Chroma row j may be written in place as soon as it lies in front of row
 * pair j's input: w*h + (j+1)*w <= 2*j*stride. Rows before the first such j
 * wait in scratch. Always >= 1 (pair 0 never qualifies).
 */
static uint32_t packed_deferred_pairs(const struct geom *g)
{
        uint64_t num = (uint64_t)g->w * (g->h + 1ull), den = 2ull * g->s - g->w;
        uint64_t first = (num + den - 1) / den;

        return (uint32_t)min_sz(first, g->h / 2);
}

static size_t packed_tmp_size(const struct fmt_desc *d, const struct geom *g)
{
        return d->simd_tmp ? d->simd_tmp(g->w) : 0;
}

static size_t packed_tmp_offset(const struct fmt_desc *d, const struct geom *g)
{
        size_t deferred = (size_t)packed_deferred_pairs(g) * g->w;

        return packed_tmp_size(d, g) ? align64(deferred) : deferred;
}

/* libyuv is used where its row buffers fit beside the deferred chroma in half a frame. */
static bool packed_use_simd(const struct fmt_desc *d, const struct geom *g)
{
        return packed_tmp_offset(d, g) + packed_tmp_size(d, g) <= g->in_size / 2;
}

static size_t packed_scratch(const struct fmt_desc *d, const struct geom *g)
{
        if (packed_use_simd(d, g))
                return packed_tmp_offset(d, g) + packed_tmp_size(d, g);
        return (size_t)packed_deferred_pairs(g) * g->w;
}

static void convert_packed(const struct fmt_desc *d, const struct geom *g, uint8_t *buf, uint8_t *scratch)
{
        const size_t w = g->w, s = g->s, wh = w * g->h;
        const uint32_t pairs = g->h / 2, deferred = packed_deferred_pairs(g);
        const bool simd = packed_use_simd(d, g);
        uint8_t *tmp = scratch + packed_tmp_offset(d, g);

        d->c_pair(d, buf, s, buf, buf + w, scratch, g->w);

        for (uint32_t a = 1, b; a < pairs; a = b) {
                const bool direct = a >= deferred;
                /* Luma of pairs [a, b) ends in front of pair a's input: b*w <= a*s. */
                size_t end = (size_t)a * s / w;

                if (direct)
                        end = min_sz(end, (2 * a * s - wh) / w); /* chroma too */
                else
                        end = min_sz(end, deferred);
                if (!simd || !d->simd_multi)
                        end = (size_t)a + 1;
                assert(end > a);
                b = (uint32_t)min_sz(end, pairs);

                uint8_t *uv = direct ? buf + wh + a * w : scratch + a * w;
                if (simd) {
                        d->simd(buf + 2 * a * s, (int)s, buf + 2 * a * w, uv, (int)w, (int)(2 * (b - a)), tmp);
                } else {
                        for (uint32_t j = a; j < b; j++)
                                d->c_pair(d, buf + 2 * j * s, s, buf + 2 * j * w, buf + (2 * j + 1) * w,
                                          uv + (j - a) * w, g->w);
                }
        }
        memcpy(buf + wh, scratch, (size_t)deferred * w);
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

#define PACKED_YUV(simd_, multi_, tmp_, y0, u, y1, v)                                                    \
        {                                                                                                \
                .convert = convert_packed, .scratch = packed_scratch, .c_pair = pair_yuv422,             \
                .simd = simd_, .simd_tmp = tmp_, .simd_multi = multi_, .bpp = 2, .off = { y0, u, y1, v } \
        }
#define PACKED_RGB(simd_, tmp_, bpp_, r, g, b)                                                                      \
        {                                                                                                           \
                .convert = convert_packed, .scratch = packed_scratch, .c_pair = pair_rgb, .simd = simd_,            \
                .simd_tmp = tmp_, .simd_multi = false, .bpp = bpp_, .off = { r, g, b, 0 }                           \
        }

static const struct fmt_desc descs[ZCP_PIX_COUNT] = {
        [ZCP_PIX_YUYV] = PACKED_YUV(simd_yuyv, true, NULL, 0, 1, 2, 3),
        [ZCP_PIX_UYVY] = PACKED_YUV(simd_uyvy, false, tmp_uv_rows, 1, 0, 3, 2),
        [ZCP_PIX_YVYU] = PACKED_YUV(simd_yvyu, true, NULL, 0, 3, 2, 1),
        [ZCP_PIX_NV12] = { .convert = convert_nv, .scratch = no_scratch, .planar420 = true, .bpp = 1 },
        [ZCP_PIX_NV21] = { .convert = convert_nv, .scratch = no_scratch, .planar420 = true, .swap_uv = true, .bpp = 1 },
        [ZCP_PIX_I420] = { .convert = convert_i420, .scratch = i420_scratch, .planar420 = true, .bpp = 1 },
        [ZCP_PIX_YV12] = { .convert = convert_i420, .scratch = i420_scratch, .planar420 = true, .swap_uv = true, .bpp = 1 },
        [ZCP_PIX_RGB24] = PACKED_RGB(simd_rgb24, tmp_uv_argb_rows, 3, 0, 1, 2),
        [ZCP_PIX_BGR24] = PACKED_RGB(simd_bgr24, tmp_uv_argb_rows, 3, 2, 1, 0),
        [ZCP_PIX_RGBX] = PACKED_RGB(simd_rgbx, tmp_uv_rows, 4, 0, 1, 2),
        [ZCP_PIX_BGRX] = PACKED_RGB(simd_bgrx, tmp_uv_rows, 4, 2, 1, 0),
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

bool zcp_convert_supported(enum zcp_pixfmt fmt)
{
        return desc_of(fmt) != NULL;
}

size_t zcp_convert_scratch_size(enum zcp_pixfmt fmt, uint32_t width, uint32_t height, uint32_t stride)
{
        const struct fmt_desc *d = desc_of(fmt);
        struct geom g;

        if (geom_init(d, width, height, stride, &g) < 0)
                return 0;
        return d->scratch(d, &g);
}

int zcp_convert_to_nv12(enum zcp_pixfmt fmt, uint8_t *buf, size_t buf_size, uint32_t width, uint32_t height,
                        uint32_t stride, uint8_t *scratch, size_t scratch_size)
{
        const struct fmt_desc *d = desc_of(fmt);
        struct geom g;
        int r;

        r = geom_init(d, width, height, stride, &g);
        if (r < 0)
                return r;
        if (!buf)
                return -EINVAL;
        if (buf_size < g.in_size || buf_size < g.out_size)
                return -ENOSPC;
        size_t need = d->scratch(d, &g);
        if (scratch_size < need || (need && !scratch))
                return -EINVAL;

        d->convert(d, &g, buf, scratch);
        return 0;
}
