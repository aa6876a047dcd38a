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
 *   C always (convert.h's rounding, which pair 0 has always had). Vector
 *   code converts the other pairs: AVX2 intrinsics where the CPU has AVX2
 *   (4:2:2 and RGB, one fused pass per row pair, libyuv's x86 bytes for
 *   RGB), else vector extensions (4:2:2) or libyuv row calls (RGB); each
 *   call on input that its outputs do not overlap, in chunks as large as
 *   that allows; where libyuv's row buffers do not fit in half a frame (tiny
 *   frames), the C code does it all (scratch is sized for them whichever
 *   path runs, so that the bytes do not depend on the CPU there).
 * - Large packed frames may be split across worker threads
 *   (convert_packed_mt: one open fork-join per frame; chunks of row pairs
 *   and copies out of scratch, each waiting only for the chunks whose input
 *   it overwrites); the bytes are the same as one thread's.
 * libyuv entry points that allocate (RAWToI420, UYVYToNV12, ARGBToNV12, ...)
 * are avoided: without AVX2, RGB goes through ARGB rows and *ToI420 plus
 * MergeUVPlane, a few row pairs per call (TMP_ROWS_MAX).
 */
#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
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
/*
 * Vector code or libyuv on `rows` packed rows (even) whose outputs do not
 * overlap them; tmp holds simd_tmp(w, tmp_rows) bytes (tmp_rows even, >= 2).
 */
typedef void (*zcp_convert_simd_fn)(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows,
                                    uint8_t *tmp, int tmp_rows);

struct fmt_desc {
        void (*convert)(const struct fmt_desc *d, const struct geom *g, uint8_t *buf, uint8_t *scratch);
        size_t (*scratch)(const struct fmt_desc *d, const struct geom *g);
        zcp_convert_pair_fn c_pair;     /* packed only */
        zcp_convert_pair_fn first_pair; /* packed: pair 0 (c_pair's contract, its bytes) */
        zcp_convert_simd_fn simd;       /* packed only */
        size_t (*simd_tmp)(uint32_t w, uint32_t rows); /* packed: row buffer bytes for `rows` rows; NULL = none */
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
                                    int rows)                                                                \
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
ROWS_422(vec_yuyv, V_EVEN, 8, V_EVEN, 0, 1, 2, 3)
ROWS_422(vec_uyvy, V_ODD, 0, V_EVEN, 1, 0, 3, 2)
ROWS_422(vec_yvyu, V_EVEN, 8, V_EVEN_SWAP, 0, 3, 2, 1)
#pragma GCC diagnostic pop

/*
 * The same rows with AVX2 intrinsics where the CPU has AVX2 (x86-64 GCC and
 * clang: a target attribute, picked at run time, never -march=native). The
 * vector extensions above cannot say "average of bytes": they average 16-bit
 * lanes (mask, shift, add, add, shift, mask per vector and row), where
 * vpavgb does (a + b + 1) >> 1 per byte in one instruction, the same bytes.
 * libyuv's YUY2ToNV12 rows are this shape; fused here (one pass over the two
 * input rows for both outputs) they take about 20 instructions per 32 pixels,
 * the vector-extension clones about 34. kind: 0 YUYV, 1 UYVY, 2 YVYU.
 */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ZCP_HAVE_AVX2 1

__attribute__((target("avx2"))) static void avx2_422(const uint8_t *src, size_t stride, uint8_t *dst_y,
                                                     uint8_t *dst_uv, size_t w, int rows, int kind)
{
        const __m256i lo = _mm256_set1_epi16(0x00ff);
        const __m256i swap = _mm256_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14, 1, 0, 3, 2, 5, 4,
                                              7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
        const size_t wv = w & ~(size_t)31;

        for (int j = 0; j < rows / 2; j++) {
                const uint8_t *r0 = src + (size_t)(2 * j) * stride, *r1 = r0 + stride;
                uint8_t *y0 = dst_y + 2 * (size_t)j * w, *y1 = y0 + w, *uv = dst_uv + (size_t)j * w;

                for (size_t x = 0; x < wv; x += 32) {
                        __m256i a0 = _mm256_loadu_si256((const __m256i *)(r0 + 2 * x));
                        __m256i a1 = _mm256_loadu_si256((const __m256i *)(r0 + 2 * x + 32));
                        __m256i b0 = _mm256_loadu_si256((const __m256i *)(r1 + 2 * x));
                        __m256i b1 = _mm256_loadu_si256((const __m256i *)(r1 + 2 * x + 32));
                        __m256i c0 = _mm256_avg_epu8(a0, b0), c1 = _mm256_avg_epu8(a1, b1), ya, yb, c;

                        if (kind == 1) {
                                ya = _mm256_packus_epi16(_mm256_srli_epi16(a0, 8), _mm256_srli_epi16(a1, 8));
                                yb = _mm256_packus_epi16(_mm256_srli_epi16(b0, 8), _mm256_srli_epi16(b1, 8));
                                c = _mm256_packus_epi16(_mm256_and_si256(c0, lo), _mm256_and_si256(c1, lo));
                        } else {
                                ya = _mm256_packus_epi16(_mm256_and_si256(a0, lo), _mm256_and_si256(a1, lo));
                                yb = _mm256_packus_epi16(_mm256_and_si256(b0, lo), _mm256_and_si256(b1, lo));
                                c = _mm256_packus_epi16(_mm256_srli_epi16(c0, 8), _mm256_srli_epi16(c1, 8));
                                if (kind == 2)
                                        c = _mm256_shuffle_epi8(c, swap);
                        }
                        _mm256_storeu_si256((__m256i *)(y0 + x), _mm256_permute4x64_epi64(ya, 0xd8));
                        _mm256_storeu_si256((__m256i *)(y1 + x), _mm256_permute4x64_epi64(yb, 0xd8));
                        _mm256_storeu_si256((__m256i *)(uv + x), _mm256_permute4x64_epi64(c, 0xd8));
                }
        }
}

/* The last w % 32 pixels of each row pair, as pair_yuv422 does them. */
static void tail_422(const uint8_t *src, size_t stride, uint8_t *dst_y, uint8_t *dst_uv, size_t w, int rows,
                     const uint8_t off[4])
{
        for (int j = 0; j < rows / 2; j++) {
                const uint8_t *r0 = src + (size_t)(2 * j) * stride, *r1 = r0 + stride;
                uint8_t *y0 = dst_y + 2 * (size_t)j * w, *y1 = y0 + w, *uv = dst_uv + (size_t)j * w;

                for (size_t x = w & ~(size_t)31; x < w; x += 2) {
                        const uint8_t *p = r0 + 2 * x, *q = r1 + 2 * x;
                        uv[x] = (uint8_t)((p[off[1]] + q[off[1]] + 1) >> 1);
                        uv[x + 1] = (uint8_t)((p[off[3]] + q[off[3]] + 1) >> 1);
                        y0[x] = p[off[0]];
                        y0[x + 1] = p[off[2]];
                        y1[x] = q[off[0]];
                        y1[x + 1] = q[off[2]];
                }
        }
}

/* Luma of 32 pixels from 64 bytes of 4:2:2 at p (kind as avx2_422). */
static inline __attribute__((target("avx2"))) __m256i avx2_422_y32(const uint8_t *p, int kind)
{
        const __m256i lo = _mm256_set1_epi16(0x00ff);
        __m256i a0 = _mm256_loadu_si256((const __m256i *)p), a1 = _mm256_loadu_si256((const __m256i *)(p + 32));

        if (kind == 1)
                return _mm256_permute4x64_epi64(
                        _mm256_packus_epi16(_mm256_srli_epi16(a0, 8), _mm256_srli_epi16(a1, 8)), 0xd8);
        return _mm256_permute4x64_epi64(_mm256_packus_epi16(_mm256_and_si256(a0, lo), _mm256_and_si256(a1, lo)),
                                        0xd8);
}

/*
 * Pair 0 (pair_yuv422's contract: dst_y0 may be src itself; dst_y1 may lie
 * in row 0's input): the chroma row and row 0's luma in one pass, each step
 * storing only behind its own loads (32 luma bytes at x, read 2x..2x + 64),
 * then row 1's luma once row 0 is wholly read. Was C: about 4% of a 720p
 * frame's conversion.
 */
static __attribute__((target("avx2"))) void avx2_422_first(const uint8_t *src, size_t stride, uint8_t *dst_y0,
                                                            uint8_t *dst_y1, uint8_t *dst_uv, size_t w, int kind,
                                                            const uint8_t off[4])
{
        const __m256i lo = _mm256_set1_epi16(0x00ff);
        const __m256i swap = _mm256_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14, 1, 0, 3, 2, 5, 4,
                                              7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
        const uint8_t *r0 = src, *r1 = src + stride;
        const size_t wv = w & ~(size_t)31;

        for (size_t x = 0; x < wv; x += 32) {
                __m256i a0 = _mm256_loadu_si256((const __m256i *)(r0 + 2 * x));
                __m256i a1 = _mm256_loadu_si256((const __m256i *)(r0 + 2 * x + 32));
                __m256i b0 = _mm256_loadu_si256((const __m256i *)(r1 + 2 * x));
                __m256i b1 = _mm256_loadu_si256((const __m256i *)(r1 + 2 * x + 32));
                __m256i c0 = _mm256_avg_epu8(a0, b0), c1 = _mm256_avg_epu8(a1, b1), ya, c;

                if (kind == 1) {
                        ya = _mm256_packus_epi16(_mm256_srli_epi16(a0, 8), _mm256_srli_epi16(a1, 8));
                        c = _mm256_packus_epi16(_mm256_and_si256(c0, lo), _mm256_and_si256(c1, lo));
                } else {
                        ya = _mm256_packus_epi16(_mm256_and_si256(a0, lo), _mm256_and_si256(a1, lo));
                        c = _mm256_packus_epi16(_mm256_srli_epi16(c0, 8), _mm256_srli_epi16(c1, 8));
                        if (kind == 2)
                                c = _mm256_shuffle_epi8(c, swap);
                }
                _mm256_storeu_si256((__m256i *)(dst_y0 + x), _mm256_permute4x64_epi64(ya, 0xd8));
                _mm256_storeu_si256((__m256i *)(dst_uv + x), _mm256_permute4x64_epi64(c, 0xd8));
        }
        for (size_t x = wv; x < w; x += 2) {
                const uint8_t *p = r0 + 2 * x, *q = r1 + 2 * x;
                uint8_t u = (uint8_t)((p[off[1]] + q[off[1]] + 1) >> 1), v = (uint8_t)((p[off[3]] + q[off[3]] + 1) >> 1);
                uint8_t l0 = p[off[0]], l1 = p[off[2]];
                dst_uv[x] = u;
                dst_uv[x + 1] = v;
                dst_y0[x] = l0;
                dst_y0[x + 1] = l1;
        }
        for (size_t x = 0; x < wv; x += 32)
                _mm256_storeu_si256((__m256i *)(dst_y1 + x), avx2_422_y32(r1 + 2 * x, kind));
        for (size_t x = wv; x < w; x += 2) {
                dst_y1[x] = r1[2 * x + off[0]];
                dst_y1[x + 1] = r1[2 * x + off[2]];
        }
}

static bool pair_422_avx2(const struct fmt_desc *d, const uint8_t *src, size_t stride, uint8_t *dst_y0,
                          uint8_t *dst_y1, uint8_t *dst_uv, uint32_t w)
{
        if (!__builtin_cpu_supports("avx2"))
                return false;
        avx2_422_first(src, stride, dst_y0, dst_y1, dst_uv, w, d->off[0] == 1 ? 1 : d->off[1] == 3 ? 2 : 0, d->off);
        return true;
}

/* True when the AVX2 rows did it (the CPU has AVX2). */
static bool rows_422_avx2(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows, int kind,
                          const uint8_t off[4])
{
        if (!__builtin_cpu_supports("avx2"))
                return false;
        avx2_422(src, (size_t)stride, dst_y, dst_uv, (size_t)w, rows, kind);
        tail_422(src, (size_t)stride, dst_y, dst_uv, (size_t)w, rows, off);
        return true;
}
#else
static bool rows_422_avx2(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows, int kind,
                          const uint8_t off[4])
{
        return false;
}

static bool pair_422_avx2(const struct fmt_desc *d, const uint8_t *src, size_t stride, uint8_t *dst_y0,
                          uint8_t *dst_y1, uint8_t *dst_uv, uint32_t w)
{
        return false;
}
#endif

/* Pair 0 of 4:2:2 (first_pair): AVX2 where the CPU has it, else C; the same bytes. */
static void pair_yuv422_first(const struct fmt_desc *d, const uint8_t *src, size_t stride, uint8_t *dst_y0,
                              uint8_t *dst_y1, uint8_t *dst_uv, uint32_t w)
{
        if (!pair_422_avx2(d, src, stride, dst_y0, dst_y1, dst_uv, w))
                pair_yuv422(d, src, stride, dst_y0, dst_y1, dst_uv, w);
}

#define SIMD_422(name, kind, vec, y0, u, y1, v)                                                             \
        static void name(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows, \
                         uint8_t *tmp, int tmp_rows)                                                        \
        {                                                                                                   \
                static const uint8_t off[4] = { y0, u, y1, v };                                             \
                if (!rows_422_avx2(src, stride, dst_y, dst_uv, w, rows, kind, off))                         \
                        vec(src, stride, dst_y, dst_uv, w, rows);                                           \
        }
SIMD_422(simd_yuyv, 0, vec_yuyv, 0, 1, 2, 3)
SIMD_422(simd_uyvy, 1, vec_uyvy, 1, 0, 3, 2)
SIMD_422(simd_yvyu, 2, vec_yvyu, 0, 3, 2, 1)

/* ---- packed RGB without AVX2: libyuv, up to tmp_rows rows per call ---- */

/* tmp: the U rows, the V rows (tmp_rows / 2 of w / 2 each), then (64-aligned) tmp_rows ARGB rows. */
static uint8_t *argb_rows(uint8_t *tmp, int w, int tmp_rows)
{
        return tmp + align64((size_t)w * (size_t)(tmp_rows / 2));
}

/* libyuv "ABGR" is R G B A in memory: our RGBX; "ARGB" is B G R A: our BGRX. */
static void rgb32_rows(bool abgr, const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows,
                       uint8_t *tmp, int tmp_rows)
{
        const int cw = w / 2;
        uint8_t *u = tmp, *v = tmp + (size_t)cw * (size_t)(tmp_rows / 2);

        for (int r = 0; r < rows; r += tmp_rows) {
                const int n = rows - r < tmp_rows ? rows - r : tmp_rows;
                const uint8_t *in = src + (size_t)r * (size_t)stride;
                uint8_t *y = dst_y + (size_t)r * (size_t)w, *uv = dst_uv + (size_t)(r / 2) * (size_t)w;

                if (abgr)
                        ABGRToI420(in, stride, y, w, u, cw, v, cw, w, n);
                else
                        ARGBToI420(in, stride, y, w, u, cw, v, cw, w, n);
                MergeUVPlane(u, cw, v, cw, uv, w, cw, n / 2);
        }
}


/* libyuv "RAW" is R G B in memory: our RGB24; "RGB24" is B G R: our BGR24. Through ARGB rows. */
static void rgb24_rows(bool raw, const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows,
                       uint8_t *tmp, int tmp_rows)
{
        uint8_t *argb = argb_rows(tmp, w, tmp_rows);

        for (int r = 0; r < rows; r += tmp_rows) {
                const int n = rows - r < tmp_rows ? rows - r : tmp_rows;
                const uint8_t *in = src + (size_t)r * (size_t)stride;

                if (raw)
                        RAWToARGB(in, stride, argb, 4 * w, w, n);
                else
                        RGB24ToARGB(in, stride, argb, 4 * w, w, n);
                rgb32_rows(false, argb, 4 * w, dst_y + (size_t)r * (size_t)w, dst_uv + (size_t)(r / 2) * (size_t)w,
                           w, n, tmp, tmp_rows);
        }
}


/*
 * ---- packed RGB: AVX2 rows ----
 *
 * Where the CPU has AVX2 the RGB rows go through one fused pass instead of
 * libyuv: both rows of a pair are read once, for their luma and the chroma
 * row, with no ARGB row buffer (24-bit input is widened in registers) and no
 * U and V planes to merge afterwards. libyuv's way (RAWToARGBRow, then
 * ARGBToYRow for each row, ARGBToUVRow reading both rows again, then
 * MergeUVRow) reads every pixel two or three times and moves the row
 * buffers through memory; fused, it is about 1 vector instruction per pixel.
 *
 * The bytes are libyuv's x86 SIMD bytes (what ARGBToI420/ABGRToI420 and
 * RAWToI420 give with SSSE3 or AVX2, which the libyuv path here used on
 * such CPUs; libyuv's ANY wrappers run their tails through the same SIMD, so
 * every column rounds alike):
 *   Y = (66 R + 129 G + 25 B + 0x1080) >> 8, as convert.h's formula;
 *   chroma from avg(avg(row 0, row 1) of the left pixel, the same of the
 *   right), avg(a, b) = (a + b + 1) >> 1 (vpavgb), per channel; then
 *   U = ((112 B - 74 G - 38 R) >> 8) + 128, V = ((112 R - 94 G - 18 B) >> 8)
 *   + 128, the shift rounding down (libyuv's vpsraw, no rounding term).
 * Luma is libyuv's arithmetic (pixels biased by -128 so that 129 fits
 * vpmaddubsw's unsigned operand; 0x7e80 puts back 128 * (66 + 129 + 25) and
 * adds 0x1080); the pair sums use vpmaddwd + vpackssdw rather than
 * vphaddw (fewer shuffle-port uops), exact either way: no sum leaves int16.
 * The fourth byte of a pixel (X, or 0 where 24-bit input is widened) has
 * coefficient 0. Pair 0 stays in C (pair_rgb, convert.h's formula: its
 * chroma may differ by one), as it always has.
 */
#if defined(ZCP_HAVE_AVX2)
#define ZCP_AVX2 __attribute__((target("avx2")))

struct rgb_coef {
        __m256i y, u, v; /* per pixel's 4 bytes: Y unsigned (vpmaddubsw's first operand); U, V signed */
};

/* 8 pixels from p, one per 32-bit lane, in memory's channel order, fourth byte 0 (24-bit) or X. */
static inline ZCP_AVX2 __m256i rgb_load8(const uint8_t *p, unsigned bpp, __m256i widen)
{
        if (bpp == 4)
                return _mm256_loadu_si256((const __m256i *)p);
        /* Pixels 0-3 from bytes 0-11, 4-7 from bytes 12-23 read at 8: nothing past the 24 bytes is read. */
        __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)),
                                            _mm_loadu_si128((const __m128i *)(p + 8)), 1);
        return _mm256_shuffle_epi8(v, widen);
}

/* Luma of 16 pixels (a: 0-7, b: 8-15) as 16-bit lanes in the order vpackssdw leaves. */
static inline ZCP_AVX2 __m256i rgb_y16(__m256i a, __m256i b, __m256i yc)
{
        const __m256i bias = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
        __m256i sa = _mm256_madd_epi16(_mm256_maddubs_epi16(yc, _mm256_xor_si256(a, bias)), ones);
        __m256i sb = _mm256_madd_epi16(_mm256_maddubs_epi16(yc, _mm256_xor_si256(b, bias)), ones);

        return _mm256_srli_epi16(_mm256_add_epi16(_mm256_packs_epi32(sa, sb), _mm256_set1_epi16(0x7e80)), 8);
}

/* U or V (before + 128) of 16 averaged pixels, as 16-bit lanes. */
static inline ZCP_AVX2 __m256i rgb_c16(__m256i a, __m256i b, __m256i c)
{
        const __m256i ones = _mm256_set1_epi16(1);
        __m256i sa = _mm256_madd_epi16(_mm256_maddubs_epi16(a, c), ones);
        __m256i sb = _mm256_madd_epi16(_mm256_maddubs_epi16(b, c), ones);

        return _mm256_srai_epi16(_mm256_packs_epi32(sa, sb), 8);
}

/* Average of pixels 2i and 2i + 1 of a (0-7) and b (8-15): chroma pixels 0-7, lanes 0 1 4 5 | 2 3 6 7. */
static inline ZCP_AVX2 __m256i rgb_hpair(__m256i a, __m256i b)
{
        __m256 fa = _mm256_castsi256_ps(a), fb = _mm256_castsi256_ps(b);

        return _mm256_avg_epu8(_mm256_castps_si256(_mm256_shuffle_ps(fa, fb, 0x88)),
                               _mm256_castps_si256(_mm256_shuffle_ps(fa, fb, 0xdd)));
}

/* libyuv's rounding, one chroma pixel (the tails): p, q its two pixels in rows 0 and 1. */
static inline void rgb_uv_tail(const uint8_t *p, const uint8_t *q, unsigned bpp, unsigned or_, unsigned ob,
                               uint8_t *uv)
{
        int c[3];
        const unsigned o[3] = { or_, 1, ob };

        for (int k = 0; k < 3; k++) {
                int l = (p[o[k]] + q[o[k]] + 1) >> 1, r = (p[bpp + o[k]] + q[bpp + o[k]] + 1) >> 1;
                c[k] = (l + r + 1) >> 1;
        }
        /* + 0x8000 keeps the numerators positive: the shift is floor, as vpsraw's. */
        uv[0] = (uint8_t)((112 * c[2] - 74 * c[1] - 38 * c[0] + 0x8000) >> 8);
        uv[1] = (uint8_t)((112 * c[0] - 94 * c[1] - 18 * c[2] + 0x8000) >> 8);
}

static inline ZCP_AVX2 __attribute__((always_inline)) void
avx2_rgb(const uint8_t *src, size_t stride, uint8_t *dst_y, uint8_t *dst_uv, size_t w, int rows, unsigned bpp,
         bool r_first)
{
        /* The bytes of each 32-bit lane: R G B X (r_first) or B G R X. */
        const struct rgb_coef k = r_first ? (struct rgb_coef){ _mm256_set1_epi32(0x00198142),
                                                               _mm256_set1_epi32(0x0070b6da),
                                                               _mm256_set1_epi32(0x00eea270) }
                                          : (struct rgb_coef){ _mm256_set1_epi32(0x00428119),
                                                               _mm256_set1_epi32(0x00dab670),
                                                               _mm256_set1_epi32(0x0070a2ee) };
        const __m256i widen = _mm256_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1, 4, 5, 6, -1, 7,
                                               8, 9, -1, 10, 11, 12, -1, 13, 14, 15, -1);
        /* U bytes then V bytes per lane (vpacksswb) to U V pairs; then the lanes' 4-byte groups in order. */
        const __m256i inter = _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8, 1, 9, 2,
                                               10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
        const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7), c128 = _mm256_set1_epi8((char)0x80);
        const size_t wv = w & ~(size_t)31, step = 8 * (size_t)bpp;
        const unsigned or_ = r_first ? 0 : 2, ob = r_first ? 2 : 0;

        for (int j = 0; j < rows / 2; j++) {
                const uint8_t *r0 = src + (size_t)(2 * j) * stride, *r1 = r0 + stride;
                uint8_t *y0 = dst_y + 2 * (size_t)j * w, *y1 = y0 + w, *uv = dst_uv + (size_t)j * w;

                for (size_t x = 0; x < wv; x += 32) {
                        const uint8_t *p = r0 + x * bpp, *q = r1 + x * bpp;
                        __m256i p0 = rgb_load8(p, bpp, widen), p1 = rgb_load8(p + step, bpp, widen);
                        __m256i p2 = rgb_load8(p + 2 * step, bpp, widen), p3 = rgb_load8(p + 3 * step, bpp, widen);
                        __m256i q0 = rgb_load8(q, bpp, widen), q1 = rgb_load8(q + step, bpp, widen);
                        __m256i q2 = rgb_load8(q + 2 * step, bpp, widen), q3 = rgb_load8(q + 3 * step, bpp, widen);
                        __m256i ya = _mm256_packus_epi16(rgb_y16(p0, p1, k.y), rgb_y16(p2, p3, k.y));
                        __m256i yb = _mm256_packus_epi16(rgb_y16(q0, q1, k.y), rgb_y16(q2, q3, k.y));
                        __m256i a01 = rgb_hpair(_mm256_avg_epu8(p0, q0), _mm256_avg_epu8(p1, q1));
                        __m256i a23 = rgb_hpair(_mm256_avg_epu8(p2, q2), _mm256_avg_epu8(p3, q3));
                        __m256i c = _mm256_packs_epi16(rgb_c16(a01, a23, k.u), rgb_c16(a01, a23, k.v));

                        c = _mm256_shuffle_epi8(_mm256_add_epi8(c, c128), inter);
                        _mm256_storeu_si256((__m256i *)(y0 + x), _mm256_permutevar8x32_epi32(ya, order));
                        _mm256_storeu_si256((__m256i *)(y1 + x), _mm256_permutevar8x32_epi32(yb, order));
                        _mm256_storeu_si256((__m256i *)(uv + x), _mm256_permutevar8x32_epi32(c, order));
                }
                for (size_t x = wv; x < w; x += 2) {
                        const uint8_t *p = r0 + x * bpp, *q = r1 + x * bpp;
                        y0[x] = rgb_to_y(p[or_], p[1], p[ob]);
                        y0[x + 1] = rgb_to_y(p[bpp + or_], p[bpp + 1], p[bpp + ob]);
                        y1[x] = rgb_to_y(q[or_], q[1], q[ob]);
                        y1[x + 1] = rgb_to_y(q[bpp + or_], q[bpp + 1], q[bpp + ob]);
                        rgb_uv_tail(p, q, bpp, or_, ob, uv + x);
                }
        }
}

/* One clone per pixel size (the loads differ); the channel order is only the coefficients. */
static ZCP_AVX2 void avx2_rgb24(const uint8_t *src, size_t stride, uint8_t *dst_y, uint8_t *dst_uv, size_t w,
                                int rows, bool r_first)
{
        avx2_rgb(src, stride, dst_y, dst_uv, w, rows, 3, r_first);
}

static ZCP_AVX2 void avx2_rgb32(const uint8_t *src, size_t stride, uint8_t *dst_y, uint8_t *dst_uv, size_t w,
                                int rows, bool r_first)
{
        avx2_rgb(src, stride, dst_y, dst_uv, w, rows, 4, r_first);
}

/* True when the AVX2 rows did it (the CPU has AVX2). */
static bool rows_rgb_avx2(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows,
                          unsigned bpp, bool r_first)
{
        if (!__builtin_cpu_supports("avx2"))
                return false;
        if (bpp == 3)
                avx2_rgb24(src, (size_t)stride, dst_y, dst_uv, (size_t)w, rows, r_first);
        else
                avx2_rgb32(src, (size_t)stride, dst_y, dst_uv, (size_t)w, rows, r_first);
        return true;
}
#else
static bool rows_rgb_avx2(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows,
                          unsigned bpp, bool r_first)
{
        return false;
}
#endif

/* AVX2 rows where the CPU has them, else libyuv through the row buffer in tmp (as SIMD_422). */
#define SIMD_RGB(name, libyuv_rows, bpp, r_first)                                                           \
        static void name(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows, \
                         uint8_t *tmp, int tmp_rows)                                                        \
        {                                                                                                   \
                if (!rows_rgb_avx2(src, stride, dst_y, dst_uv, w, rows, bpp, r_first))                      \
                        libyuv_rows(r_first, src, stride, dst_y, dst_uv, w, rows, tmp, tmp_rows);           \
        }
SIMD_RGB(simd_rgbx, rgb32_rows, 4, true)
SIMD_RGB(simd_bgrx, rgb32_rows, 4, false)
SIMD_RGB(simd_rgb24, rgb24_rows, 3, true)
SIMD_RGB(simd_bgr24, rgb24_rows, 3, false)

static size_t tmp_uv_rows(uint32_t w, uint32_t rows)
{
        return (size_t)w * (rows / 2);
}

static size_t tmp_uv_argb_rows(uint32_t w, uint32_t rows)
{
        return align64((size_t)w * (rows / 2)) + 4 * (size_t)w * rows;
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

static size_t packed_tmp_offset(const struct fmt_desc *d, const struct geom *g)
{
        size_t deferred = (size_t)packed_deferred_pairs(g) * g->w;

        return d->simd_tmp ? align64(deferred) : deferred;
}

/*
 * The vector rows are used where libyuv's buffers for 2 rows fit beside the
 * deferred chroma in half a frame, whether or not this CPU needs them (AVX2
 * does not): which frames go wholly through C does not depend on the CPU.
 */
static bool packed_use_simd(const struct fmt_desc *d, const struct geom *g)
{
        return !d->simd_tmp || packed_tmp_offset(d, g) + d->simd_tmp(g->w, 2) <= g->in_size / 2;
}

/*
 * Rows per libyuv call (RGB): as many as TMP_ROWS_MAX (a row pair per call
 * cost about a tenth of the frame in libyuv's per-call setup) while the row
 * buffers still fit there; at least 2. The bytes do not depend on it.
 */
#define TMP_ROWS_MAX 4

static uint32_t packed_tmp_rows(const struct fmt_desc *d, const struct geom *g)
{
        uint32_t k = TMP_ROWS_MAX;

        if (!d->simd_tmp)
                return 2;
        while (k > 2 && packed_tmp_offset(d, g) + d->simd_tmp(g->w, k) > g->in_size / 2)
                k /= 2;
        return k;
}

static size_t packed_tmp_size(const struct fmt_desc *d, const struct geom *g)
{
        return d->simd_tmp ? d->simd_tmp(g->w, packed_tmp_rows(d, g)) : 0;
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
                         uint8_t *tmp, int tmp_rows, bool simd, uint32_t a, uint32_t b)
{
        const size_t w = g->w, s = g->s;

        if (simd) {
                d->simd(buf + 2 * a * s, (int)s, y + 2 * a * w, uv, (int)w, (int)(2 * (b - a)), tmp, tmp_rows);
                return;
        }
        for (uint32_t j = a; j < b; j++)
                d->c_pair(d, buf + 2 * j * s, s, y + 2 * j * w, y + (2 * j + 1) * w, uv + (j - a) * w, g->w);
}

/*
 * Pairs [from, to) top-down on one thread; every row of the pairs before
 * `from` has been read. Chroma row j goes to its place when j >= direct_from,
 * else to chroma_tmp + j * w; with `flush`, those waiting rows are copied to
 * their place as soon as the input there has been read (while they are still
 * in cache). Returns how many waiting rows (from row 0) are in place.
 */
static uint32_t packed_serial(const struct fmt_desc *d, const struct geom *g, uint8_t *buf, uint8_t *chroma_tmp,
                              uint8_t *tmp, int tmp_rows, bool simd, uint32_t from, uint32_t to, uint32_t direct_from,
                              bool flush)
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
                if (!simd)
                        end = (size_t)a + 1;
                assert(end > a);
                b = (uint32_t)min_sz(end, to);
                packed_chunk(d, g, buf, buf, direct ? buf + wh + a * w : chroma_tmp + a * w, tmp, tmp_rows, simd,
                             a, b);
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

        d->first_pair(d, buf, g->s, buf, buf + w, scratch, g->w);
        done = packed_serial(d, g, buf, scratch, scratch + packed_tmp_offset(d, g), (int)packed_tmp_rows(d, g),
                             packed_use_simd(d, g), 1, g->h / 2, deferred, true);
        memcpy(buf + w * g->h + (size_t)done * w, scratch + (size_t)done * w, (size_t)(deferred - done) * w);
}

/*
 * ---- packed formats: several threads ----
 *
 * One open fork-join per frame (zcp_workers_run_open): the pairs are cut into
 * chunks of c pairs, and a fixed list of tasks (made per frame, on the stack)
 * is taken in order by whichever member is free, through one atomic counter:
 *   - chunk k (pairs [a, b)), in order: luma of pairs [0, first) to scratch
 *     (pair 0 overlaps its own input); from `first` on, in place. Chroma to
 *     scratch up to pair `direct`, then in place.
 *   - copies from scratch to their places: first's luma, the chroma rows
 *     before `direct`, in chunks, each listed as soon as the chunks it waits
 *     for are `lag` pairs behind the chunk being listed.
 * A task waits (spinning) until every chunk whose input its outputs overlap
 * is done: pair p's input is [2ps, 2(p+1)s); luma of pairs [a, b) lands in
 * [2aw, 2bw), chroma rows [a, b) in [wh + aw, wh + bw). Chunks done are
 * flagged (release) and waiters read the flags (acquire), so a task's writes
 * follow the reads of the chunks it waited for. Tasks wait only for earlier
 * tasks, so the first undone task can always run: no deadlock, and a worker
 * still waking up (a futex wake-up costs ~10-50 us) only means the others
 * take its share. Nothing runs on one thread alone and nothing has to wait
 * for a step: the step plan before this one (an eighth read into scratch,
 * three in-place steps, one copy step; five fork-joins) paid five joins and
 * a copy step at the end, 4 threads reaching 0.55 of one thread's time
 * (critical path 0.41) on a 16-core host.
 *
 * `first` and `direct` are where a chunk's requirement falls `lag` = T*c
 * pairs (T members) behind its own start: with every member on a core, the
 * chunks in flight are the T - 1 before it, so it does not wait. For s = 2w
 * (4:2:2 at minimal stride) luma needs prefix >= (a + c)/2: first ~ (2T-1)c;
 * chroma needs (wh + bw)/(2s) = (h + b)/4 pairs: direct ~ (h + c + 4L)/3,
 * against one thread's (h + 1)/3. The work on paper, in bytes of w*h
 * (4:2:2): read 2, write 1.5, and the copies: first's luma 2*2*first/h,
 * chroma 2*direct/h, twice each (to scratch, back; its final write counted).
 * At 1080p YUYV, T = 4, c = 8: first = 72 (0.27), direct = 408 (0.76):
 * 4.52 wh, against one thread's 4.17 (its deferred chroma: 0.67); RGB24
 * 5.18 against 4.90, RGBX 6.03 against 5.79. Spread evenly over 4 cores that
 * is 4.52 / 4.17 / 4 = 0.27 of one thread's time (RGB 0.26): 1/3 is in
 * reach where the cores' combined cache bandwidth scales (a server's L2 and
 * L3 do; a captured frame was just written, so it is in cache), plus the
 * latency until the other members are awake (the caller works meanwhile)
 * and, at the end, imbalance of up to one chunk (1/68 of the frame). Were the
 * conversion bound by one shared bandwidth (DRAM) instead, no split could
 * beat 4.52 / 4.17 = 1.08 of one thread's traffic time; the copies are why
 * no in-place split reaches the 1/T of an out-of-place one. 2 threads:
 * 0.55, 3: 0.36, 8: 0.135 by the same count.
 */
#define MT_MIN_PAIRS 16   /* per thread: below, one thread does it all */
#define MT_MAX_CHUNKS 256 /* chunks per frame (the task list lives on the stack) */
#define MT_MAX_TASKS (3 * MT_MAX_CHUNKS)

struct mt_plan {
        uint32_t c, chunks;  /* pairs per chunk; chunks (the last may be short) */
        uint32_t lag;        /* pairs */
        uint32_t first;      /* pairs [0, first): luma to scratch (at 0); a multiple of c, >= 1 chunk */
        uint32_t direct;     /* chroma rows [0, direct) to scratch (at `chroma`); a multiple of c */
        size_t chroma;       /* scratch offset of the waiting chroma rows */
        size_t tmp, tmp_stride;
        int tmp_rows;
        size_t size;         /* scratch bytes for the team */
};

/* Pairs whose input overlaps [0, end) bytes: those p with 2ps < end. */
static uint32_t pairs_under(const struct geom *g, size_t end)
{
        return (uint32_t)min_sz((end + 2 * (size_t)g->s - 1) / (2 * (size_t)g->s), g->h / 2);
}

static struct mt_plan mt_plan(const struct fmt_desc *d, const struct geom *g, uint32_t threads)
{
        const uint32_t pairs = g->h / 2;
        const size_t w = g->w, wh = w * g->h;
        struct mt_plan p = { 0 };
        uint32_t c = pairs / (16 * threads);

        c = c < 4 ? 4 : c;
        c = c < (pairs + MT_MAX_CHUNKS - 1) / MT_MAX_CHUNKS ? (pairs + MT_MAX_CHUNKS - 1) / MT_MAX_CHUNKS : c;
        p.c = c;
        p.chunks = (pairs + c - 1) / c;
        p.lag = threads * c;
        p.first = pairs;
        p.direct = pairs;
        for (uint32_t a = c; a < pairs; a += c) {
                uint32_t b = a + c < pairs ? a + c : pairs;
                if (p.first == pairs && a >= p.lag && pairs_under(g, 2 * b * w) <= a - p.lag)
                        p.first = a;
                if (p.direct == pairs && a >= p.lag && pairs_under(g, wh + b * w) <= a - p.lag) {
                        p.direct = a;
                        break;
                }
        }
        if (p.direct < p.first)
                p.direct = p.first; /* chunks before `first` wait for nothing */
        p.chroma = (size_t)p.first * 2 * w;
        p.tmp_rows = (int)packed_tmp_rows(d, g);
        p.tmp_stride = align64(packed_tmp_size(d, g));
        p.tmp = p.tmp_stride ? align64(p.chroma + (size_t)p.direct * w) : p.chroma + (size_t)p.direct * w;
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

enum mt_kind { MT_CHUNK, MT_COPY_LUMA, MT_COPY_CHROMA };

struct mt_task {
        uint8_t kind;
        uint32_t a, b; /* pairs (chunk, luma copy) or chroma rows */
        uint32_t need; /* chunks [0, need) must be done first */
};

struct mt_job {
        const struct fmt_desc *d;
        const struct geom *g;
        struct mt_plan plan;
        uint8_t *buf, *scratch;
        uint32_t n_tasks;
        _Atomic uint32_t next;    /* next task to take */
        _Atomic uint32_t done_to; /* chunks [0, done_to) known done (a hint: flags are the truth) */
        _Atomic uint8_t done[MT_MAX_CHUNKS];
        struct mt_task tasks[MT_MAX_TASKS];
};

static inline void mt_relax(uint32_t spins)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if (spins > 4096)
                sched_yield(); /* the chunk's owner may not be running (more threads than free CPUs) */
}

static void mt_wait(struct mt_job *job, uint32_t need)
{
        /* Acquire: whoever moved done_to had acquired the flags it passed, then released. */
        uint32_t p = atomic_load_explicit(&job->done_to, memory_order_acquire), spins = 0;

        while (p < need) {
                if (atomic_load_explicit(&job->done[p], memory_order_acquire))
                        p++;
                else
                        mt_relax(++spins);
        }
        uint32_t cur = atomic_load_explicit(&job->done_to, memory_order_relaxed);
        while (cur < p && !atomic_compare_exchange_weak_explicit(&job->done_to, &cur, p, memory_order_release,
                                                                 memory_order_relaxed))
                ;
}

/* Chunks whose pairs all lie below `pairs` are done once chunk ceil(pairs / c) - 1 is. */
static uint32_t chunks_for(const struct mt_plan *p, uint32_t pairs)
{
        return (pairs + p->c - 1) / p->c;
}

static void mt_add(struct mt_job *job, enum mt_kind kind, uint32_t a, uint32_t b, uint32_t need)
{
        assert(job->n_tasks < MT_MAX_TASKS);
        job->tasks[job->n_tasks++] = (struct mt_task){ .kind = (uint8_t)kind, .a = a, .b = b, .need = need };
}

/* The task list: chunks in order, each copy right after the chunk `lag` pairs past what it waits for. */
static void mt_tasks(struct mt_job *job)
{
        const struct geom *g = job->g;
        const struct mt_plan *p = &job->plan;
        const uint32_t pairs = g->h / 2;
        const size_t w = g->w, wh = w * g->h;
        uint32_t luma_next = 0, chroma_next = 0;

        job->n_tasks = 0;
        for (uint32_t k = 0; k <= p->chunks; k++) {
                const uint32_t a = k * p->c < pairs ? k * p->c : pairs, b = a + p->c < pairs ? a + p->c : pairs;
                const uint32_t ready = a > p->lag ? a - p->lag : 0; /* pairs surely done when chunk k is taken */

                /* Copies whose destination's input lies below `ready` (all of them after the last chunk). */
                while (luma_next < p->first) {
                        uint32_t e = luma_next + p->c < p->first ? luma_next + p->c : p->first;
                        uint32_t need = pairs_under(g, 2 * (size_t)e * w);
                        if (k < p->chunks && need > ready)
                                break;
                        /* Its rows come from the chunks up to e too. */
                        mt_add(job, MT_COPY_LUMA, luma_next, e, chunks_for(p, need > e ? need : e));
                        luma_next = e;
                }
                while (chroma_next < p->direct) {
                        uint32_t e = chroma_next + p->c < p->direct ? chroma_next + p->c : p->direct;
                        uint32_t need = pairs_under(g, wh + (size_t)e * w);
                        if (k < p->chunks && need > ready)
                                break;
                        mt_add(job, MT_COPY_CHROMA, chroma_next, e, chunks_for(p, need > e ? need : e));
                        chroma_next = e;
                }
                if (k == p->chunks)
                        break;
                uint32_t need = 0;
                if (a >= p->first)
                        need = pairs_under(g, 2 * (size_t)b * w);
                if (a >= p->direct) {
                        uint32_t n = pairs_under(g, wh + (size_t)b * w);
                        need = n > need ? n : need;
                }
                mt_add(job, MT_CHUNK, a, b, chunks_for(p, need));
        }
}

static void mt_run_task(struct mt_job *job, const struct mt_task *t, uint8_t *tmp)
{
        const struct fmt_desc *d = job->d;
        const struct geom *g = job->g;
        const struct mt_plan *p = &job->plan;
        const size_t w = g->w, wh = w * g->h;
        uint8_t *luma = job->scratch, *chroma = job->scratch + p->chroma;
        uint32_t a = t->a;

        mt_wait(job, t->need);
        switch (t->kind) {
        case MT_CHUNK: {
                uint8_t *y = a < p->first ? luma : job->buf;
                uint8_t *uv = a < p->direct ? chroma : job->buf + wh;

                if (a == 0) { /* pair 0 as one thread does it (RGB: convert.h's rounding, not libyuv's) */
                        d->first_pair(d, job->buf, g->s, y, y + w, uv, g->w);
                        a++;
                }
                if (a < t->b)
                        packed_chunk(d, g, job->buf, y, uv + (size_t)a * w, tmp, p->tmp_rows, true, a, t->b);
                atomic_store_explicit(&job->done[t->a / p->c], 1, memory_order_release);
                break;
        }
        case MT_COPY_LUMA:
                memcpy(job->buf + 2 * (size_t)a * w, luma + 2 * (size_t)a * w, 2 * (size_t)(t->b - a) * w);
                break;
        case MT_COPY_CHROMA:
                memcpy(job->buf + wh + (size_t)a * w, chroma + (size_t)a * w, (size_t)(t->b - a) * w);
                break;
        }
}

static void mt_share(void *arg, uint32_t i, uint32_t n)
{
        struct mt_job *job = arg;
        uint8_t *tmp = job->scratch + job->plan.tmp + i * job->plan.tmp_stride;
        uint32_t k;

        while ((k = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed)) < job->n_tasks)
                mt_run_task(job, &job->tasks[k], tmp);
        /* Tasks others took are theirs to finish: the join waits for every share that started. */
}

static void convert_packed_mt(struct zcp_workers *workers, const struct fmt_desc *d, const struct geom *g,
                              uint8_t *buf, uint8_t *scratch)
{
        struct mt_job job = { .d = d, .g = g, .plan = mt_plan(d, g, zcp_workers_count(workers)), .buf = buf,
                              .scratch = scratch };

        mt_tasks(&job);
        zcp_workers_run_open(workers, mt_share, &job);
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

#define PACKED_YUV(simd_, tmp_, y0, u, y1, v)                                                            \
        {                                                                                                \
                .convert = convert_packed, .scratch = packed_scratch, .c_pair = pair_yuv422,             \
                .first_pair = pair_yuv422_first,                                                         \
                .simd = simd_, .simd_tmp = tmp_, .bpp = 2, .off = { y0, u, y1, v }                       \
        }
#define PACKED_RGB(simd_, tmp_, bpp_, r, g, b)                                                                      \
        {                                                                                                           \
                .convert = convert_packed, .scratch = packed_scratch, .c_pair = pair_rgb, .simd = simd_,            \
                .first_pair = pair_rgb,                                                                             \
                .simd_tmp = tmp_, .bpp = bpp_, .off = { r, g, b, 0 }                                                \
        }

static const struct fmt_desc descs[ZCP_PIX_COUNT] = {
        [ZCP_PIX_YUYV] = PACKED_YUV(simd_yuyv, NULL, 0, 1, 2, 3),
        [ZCP_PIX_UYVY] = PACKED_YUV(simd_uyvy, NULL, 1, 0, 3, 2),
        [ZCP_PIX_YVYU] = PACKED_YUV(simd_yvyu, NULL, 0, 3, 2, 1),
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
        /*
         * 1080p and up: 4. Below, one thread: on the 16-core GPU host (tests/kernels/
         * RESULTS.md run 19) 2 threads took 1.35x one thread's time for 720p 4:2:2
         * (0.131 against 0.097 ms) and the same for RGB: the frame is too short for
         * a split to pay for the other cores pulling its lines.
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
