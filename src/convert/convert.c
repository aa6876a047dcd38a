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
 *   in at the end. Pair 0, whose luma overlaps its own input, is done in C:
 *   chroma first, then row 0 in place left to right, then row 1.
 *   Vector code (4:2:2, below) or libyuv (RGB) converts the other pairs,
 *   each call on input that its outputs do not overlap, in chunks as large as
 *   that allows; where libyuv's row buffers do not fit in half a frame (tiny
 *   frames), the C code does it all.
 * - Large packed frames may be split into bands across worker threads
 *   (convert_packed_mt: steps of bands whose outputs land only in scratch or
 *   in memory already read); the bytes are the same as one thread's.
 * libyuv entry points that allocate (RAWToI420, UYVYToNV12, ARGBToNV12, ...)
 * are avoided: RGB goes through ARGB rows and *ToI420 plus MergeUVPlane.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <libyuv.h>

#include "convert/convert.h"
#include "core/workers.h"

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

/* ---- packed 4:2:2: GCC vector extensions, one clone per CPU level ---- */

/*
 * Rows of 4:2:2 (even count) to NV12 luma and chroma rows, 32 pixels per step:
 * luma is a byte shuffle; chroma is taken as 16-bit lanes (one U or V each),
 * averaged with the other row's as (a + b + 1) >> 1 in 16 bits, and narrowed
 * by a shuffle that also puts U before V. Each clone is the same source
 * compiled for its CPU level (the widest the running CPU has is picked once,
 * at load time); never -march=native. Outputs must not overlap the rows read
 * (convert_packed only hands over such chunks).
 */
typedef uint8_t zcp_v32u8 __attribute__((vector_size(32)));
typedef uint16_t zcp_v16u16 __attribute__((vector_size(32)));

/*
 * Shuffle indices as bare lists for __builtin_shufflevector (GCC >= 12 and
 * clang both have it; GCC's __builtin_shuffle is unknown to clang).
 */
#define V_EVEN 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, \
               32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62
#define V_ODD 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, \
              33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63
/* The low bytes of 16-bit lanes V U V U ..., taken pairwise swapped: U V U V ... */
#define V_EVEN_SWAP 2, 0, 6, 4, 10, 8, 14, 12, 18, 16, 22, 20, 26, 24, 30, 28, \
                    34, 32, 38, 36, 42, 40, 46, 44, 50, 48, 54, 52, 58, 56, 62, 60

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZCP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ZCP_CLONES
#endif

/* ymask: luma bytes of two loaded vectors; cshift: chroma in the lanes' high (8) or low (0) byte. */
#define ROWS_422(name, ymask, cshift, cmask, oy0, ou, oy1, ov)                                               \
        ZCP_CLONES static void name(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w_, \
                                    int rows, uint8_t *tmp)                                                  \
        {                                                                                                    \
                const size_t w = (size_t)w_;                                                                 \
                for (int j = 0; j < rows / 2; j++) {                                                         \
                        const uint8_t *r0 = src + (size_t)(2 * j) * (size_t)stride, *r1 = r0 + stride;       \
                        uint8_t *y0 = dst_y + 2 * j * w, *y1 = y0 + w, *uv = dst_uv + j * w;                 \
                        size_t x = 0;                                                                        \
                        for (; x + 32 <= w; x += 32) {                                                       \
                                zcp_v16u16 a0, a1, b0, b1, c0, c1;                                           \
                                zcp_v32u8 ya, yb, c;                                                         \
                                memcpy(&a0, r0 + 2 * x, 32);                                                 \
                                memcpy(&a1, r0 + 2 * x + 32, 32);                                            \
                                memcpy(&b0, r1 + 2 * x, 32);                                                 \
                                memcpy(&b1, r1 + 2 * x + 32, 32);                                            \
                                c0 = (((a0 >> cshift) & 0xff) + ((b0 >> cshift) & 0xff) + 1) >> 1;           \
                                c1 = (((a1 >> cshift) & 0xff) + ((b1 >> cshift) & 0xff) + 1) >> 1;           \
                                ya = __builtin_shufflevector((zcp_v32u8)a0, (zcp_v32u8)a1, ymask);           \
                                yb = __builtin_shufflevector((zcp_v32u8)b0, (zcp_v32u8)b1, ymask);           \
                                c = __builtin_shufflevector((zcp_v32u8)c0, (zcp_v32u8)c1, cmask);            \
                                memcpy(y0 + x, &ya, 32);                                                     \
                                memcpy(y1 + x, &yb, 32);                                                     \
                                memcpy(uv + x, &c, 32);                                                      \
                        }                                                                                    \
                        for (; x < w; x += 2) {                                                              \
                                const uint8_t *p = r0 + 2 * x, *q = r1 + 2 * x;                              \
                                uv[x] = (uint8_t)((p[ou] + q[ou] + 1) >> 1);                                 \
                                uv[x + 1] = (uint8_t)((p[ov] + q[ov] + 1) >> 1);                             \
                                y0[x] = p[oy0];                                                              \
                                y0[x + 1] = p[oy1];                                                          \
                                y1[x] = q[oy0];                                                              \
                                y1[x + 1] = q[oy1];                                                          \
                        }                                                                                    \
                }                                                                                            \
        }

/* Vector arguments stay inside each clone; no vector crosses a call. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
ROWS_422(simd_yuyv, V_EVEN, 8, V_EVEN, 0, 1, 2, 3)
ROWS_422(simd_uyvy, V_ODD, 0, V_EVEN, 1, 0, 3, 2)
ROWS_422(simd_yvyu, V_EVEN, 8, V_EVEN_SWAP, 0, 3, 2, 1)
#pragma GCC diagnostic pop

/* ---- packed RGB: libyuv ---- */

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

/*
 * Pairs [a, b) of the input at buf: luma to rows 2a.. of the plane at y (buf
 * itself, or scratch), chroma to uv (b - a rows of w).
 */
static void packed_chunk(const struct fmt_desc *d, const struct geom *g, uint8_t *buf, uint8_t *y, uint8_t *uv,
                         uint8_t *tmp, bool simd, uint32_t a, uint32_t b)
{
        const size_t w = g->w, s = g->s;

        if (simd && d->simd_multi) {
                d->simd(buf + 2 * a * s, (int)s, y + 2 * a * w, uv, (int)w, (int)(2 * (b - a)), tmp);
                return;
        }
        for (uint32_t j = a; j < b; j++) {
                uint8_t *dst_uv = uv + (j - a) * w;

                if (simd)
                        d->simd(buf + 2 * j * s, (int)s, y + 2 * j * w, dst_uv, (int)w, 2, tmp);
                else
                        d->c_pair(d, buf + 2 * j * s, s, y + 2 * j * w, y + (2 * j + 1) * w, dst_uv, g->w);
        }
}

/*
 * Pairs [from, to) top-down on one thread; every row of the pairs before
 * `from` has been read. Chroma row j goes to its place when j >= direct_from,
 * else to chroma_tmp + j * w; with `flush`, those waiting rows are copied to
 * their place as soon as the input there has been read (while they are still
 * in cache). Returns how many waiting rows (from row 0) are in place.
 */
static uint32_t packed_serial(const struct fmt_desc *d, const struct geom *g, uint8_t *buf, uint8_t *chroma_tmp,
                              uint8_t *tmp, bool simd, uint32_t from, uint32_t to, uint32_t direct_from, bool flush)
{
        const size_t w = g->w, s = g->s, wh = w * g->h;
        uint32_t flushed = 0;

        for (uint32_t a = from, b; a < to; a = b) {
                const bool direct = a >= direct_from;
                /* Luma of pairs [a, b) ends in front of pair a's input: b*w <= a*s. */
                size_t end = (size_t)a * s / w;

                if (direct)
                        end = min_sz(end, (2 * a * s - wh) / w); /* chroma too */
                else
                        end = min_sz(end, direct_from);
                if (!simd || !d->simd_multi)
                        end = (size_t)a + 1;
                assert(end > a);
                b = (uint32_t)min_sz(end, to);
                packed_chunk(d, g, buf, buf, direct ? buf + wh + a * w : chroma_tmp + a * w, tmp, simd, a, b);
                if (flush && 2 * b * s > wh) {
                        /* Rows whose place lies wholly in the input read so far, none past direct_from. */
                        uint32_t k = (uint32_t)min_sz((2 * b * s - wh) / w, min_sz(direct_from, b));
                        if (k > flushed) {
                                memcpy(buf + wh + flushed * w, chroma_tmp + flushed * w, (k - flushed) * w);
                                flushed = k;
                        }
                }
        }
        return flushed;
}

static void convert_packed(const struct fmt_desc *d, const struct geom *g, uint8_t *buf, uint8_t *scratch)
{
        const size_t w = g->w;
        const uint32_t deferred = packed_deferred_pairs(g);
        uint32_t done;

        d->c_pair(d, buf, g->s, buf, buf + w, scratch, g->w);
        done = packed_serial(d, g, buf, scratch, scratch + packed_tmp_offset(d, g), packed_use_simd(d, g), 1,
                             g->h / 2, deferred, true);
        memcpy(buf + w * g->h + (size_t)done * w, scratch + (size_t)done * w, (size_t)(deferred - done) * w);
}

/*
 * ---- packed formats: several threads ----
 *
 * Pair j's luma lands at 2j*w, in front of its input at 2j*s (s >= 2w).
 * Once every row of the pairs [0, a) has been read, the luma of the pairs
 * [a, b) with b*w <= a*s lands only in read memory. So, in steps, each split
 * into bands of pairs across the team with no order between the bands of a
 * step:
 *   1. pairs [0, first): luma and chroma to scratch (the input is only read);
 *   2. MT_IN_PLACE steps of pairs [a, b), b = a*s/w (growing by s/w >= 2 each
 *      time) up to the last pair: luma in place, chroma to scratch (its
 *      place, from input row h*w/s on, is read only by the last step);
 *   3. the luma of step 1 and all the chroma from scratch to their places.
 * Nothing runs on one thread alone; the copying costs first*2w + h/2*w bytes
 * (1/8 of the luma for 4:2:2). Scratch: step 1's luma, the chroma plane,
 * then (64-aligned) per thread the libyuv path's row buffers.
 */
#define MT_IN_PLACE  3
#define MT_MIN_PAIRS 16 /* per thread: below, one thread does it all */

struct mt_plan {
        uint32_t first;      /* step 1 pairs: [0, first) */
        size_t chroma;       /* scratch offset of the chroma plane (step 1's luma at 0) */
        size_t tmp, tmp_stride;
        size_t size;         /* scratch bytes for the team */
};

static struct mt_plan mt_plan(const struct fmt_desc *d, const struct geom *g, uint32_t threads)
{
        const uint32_t pairs = g->h / 2;
        uint64_t first = pairs;
        struct mt_plan p;

        for (int k = 0; k < MT_IN_PLACE; k++)
                first = (first * g->w + g->s - 1) / g->s; /* smallest a with a*s/w >= first */
        p.first = first > 1 ? (uint32_t)first : 1;
        p.chroma = (size_t)p.first * 2 * g->w;
        p.tmp_stride = align64(packed_tmp_size(d, g));
        p.tmp = p.tmp_stride ? align64(p.chroma + (size_t)pairs * g->w) : p.chroma + (size_t)pairs * g->w;
        p.size = p.tmp + threads * p.tmp_stride;
        return p;
}

/*
 * True when `threads` threads split this frame (else it goes through the
 * one-thread code); only where one thread would use the vector/libyuv rows
 * too, so that both give the same bytes.
 */
static bool mt_eligible(const struct fmt_desc *d, const struct geom *g, uint32_t threads)
{
        return d->convert == convert_packed && threads > 1 && g->h / 2 >= MT_MIN_PAIRS * threads &&
               packed_use_simd(d, g) && mt_plan(d, g, threads).size <= g->in_size / 2;
}

enum mt_step { MT_READ, MT_WRITE, MT_COPY };

struct mt_job {
        const struct fmt_desc *d;
        const struct geom *g;
        struct mt_plan plan;
        uint8_t *buf, *scratch;
        enum mt_step step;
        uint32_t a, b; /* pairs of this step */
};

static void mt_band(void *arg, uint32_t i, uint32_t n)
{
        const struct mt_job *job = arg;
        const struct geom *g = job->g;
        const struct mt_plan *p = &job->plan;
        const size_t w = g->w;
        uint32_t lo = job->a + (uint32_t)((uint64_t)(job->b - job->a) * i / n);
        const uint32_t hi = job->a + (uint32_t)((uint64_t)(job->b - job->a) * (i + 1) / n);
        uint8_t *chroma = job->scratch + p->chroma, *luma = job->scratch;

        if (lo == hi)
                return;
        switch (job->step) {
        case MT_READ:
                if (lo == 0) { /* pair 0 in C, as one thread does it (RGB: libyuv rounds its own way) */
                        job->d->c_pair(job->d, job->buf, g->s, luma, luma + w, chroma, g->w);
                        if (++lo == hi)
                                break;
                }
                /* fall through */
        case MT_WRITE:
                packed_chunk(job->d, g, job->buf, job->step == MT_READ ? luma : job->buf, chroma + lo * w,
                             job->scratch + p->tmp + i * p->tmp_stride, true, lo, hi);
                break;
        case MT_COPY:
                memcpy(job->buf + w * g->h + lo * w, chroma + lo * w, (hi - lo) * w);
                if (lo < p->first) {
                        uint32_t end = hi < p->first ? hi : p->first;
                        memcpy(job->buf + 2 * lo * w, luma + 2 * lo * w, (end - lo) * 2 * w);
                }
                break;
        }
}

static void convert_packed_mt(struct zcp_workers *workers, const struct fmt_desc *d, const struct geom *g,
                              uint8_t *buf, uint8_t *scratch)
{
        const uint32_t pairs = g->h / 2;
        struct mt_job job = { .d = d, .g = g, .plan = mt_plan(d, g, zcp_workers_count(workers)), .buf = buf,
                              .scratch = scratch, .step = MT_READ, .a = 0 };

        job.b = job.plan.first < pairs ? job.plan.first : pairs;
        zcp_workers_run(workers, mt_band, &job);
        job.step = MT_WRITE;
        for (job.a = job.b; job.a < pairs; job.a = job.b) {
                job.b = (uint32_t)min_sz((size_t)job.a * g->s / g->w, pairs);
                zcp_workers_run(workers, mt_band, &job);
        }
        job.step = MT_COPY;
        job.a = 0;
        job.b = pairs;
        zcp_workers_run(workers, mt_band, &job);
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
        [ZCP_PIX_UYVY] = PACKED_YUV(simd_uyvy, true, NULL, 1, 0, 3, 2),
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

size_t zcp_convert_scratch_size_mt(enum zcp_pixfmt fmt, uint32_t width, uint32_t height, uint32_t stride,
                                   uint32_t threads)
{
        const struct fmt_desc *d = desc_of(fmt);
        struct geom g;
        size_t one;

        if (geom_init(d, width, height, stride, &g) < 0)
                return 0;
        one = d->scratch(d, &g);
        if (!mt_eligible(d, &g, threads))
                return one;
        return one > mt_plan(d, &g, threads).size ? one : mt_plan(d, &g, threads).size;
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
        const uint32_t n = px >= 1920ull * 1080 ? 4 : px >= 1280ull * 720 ? 2 : 1;
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
                convert_packed_mt(workers, d, &g, buf, scratch);
        else
                d->convert(d, &g, buf, scratch);
        return 0;
}

int zcp_convert_to_nv12(enum zcp_pixfmt fmt, uint8_t *buf, size_t buf_size, uint32_t width, uint32_t height,
                        uint32_t stride, uint8_t *scratch, size_t scratch_size)
{
        return zcp_convert_to_nv12_mt(NULL, fmt, buf, buf_size, width, height, stride, scratch, scratch_size);
}
