/* SPDX-License-Identifier: MIT */
/*
 * The row converters of the packed formats (convert_priv.h): a row pair in
 * C, and rows in bulk through GCC vector extensions (cloned per CPU level),
 * AVX2 intrinsics where the CPU has them, or libyuv. Each call works on
 * input its outputs do not overlap (convert_packed.c hands over only such
 * chunks), except pair 0's, whose contract says how it may overlap. Pure;
 * any thread; allocates nothing.
 */
#include <string.h>

#include <libyuv.h>

#include "convert/convert_priv.h"

/* ---- packed formats: C row pair ---- */

static void pair_yuv422(const struct zcp_convert_rows *d, const uint8_t *src, size_t stride, uint8_t *dst_y0,
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

static void rgb_row_y(const struct zcp_convert_rows *d, const uint8_t *row, uint8_t *dst, uint32_t w)
{
        const unsigned bpp = d->bpp, or_ = d->off[0], og = d->off[1], ob = d->off[2];

        for (uint32_t x = 0; x < w; x++) {
                const uint8_t *p = row + (size_t)x * bpp;
                dst[x] = rgb_to_y(p[or_], p[og], p[ob]);
        }
}

static void pair_rgb(const struct zcp_convert_rows *d, const uint8_t *src, size_t stride, uint8_t *dst_y0, uint8_t *dst_y1,
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
 * then row 1's luma once row 0 is wholly read.
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

static bool pair_422_avx2(const struct zcp_convert_rows *d, const uint8_t *src, size_t stride, uint8_t *dst_y0,
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

static bool pair_422_avx2(const struct zcp_convert_rows *d, const uint8_t *src, size_t stride, uint8_t *dst_y0,
                          uint8_t *dst_y1, uint8_t *dst_uv, uint32_t w)
{
        return false;
}
#endif

/* Pair 0 of 4:2:2 (first_pair): AVX2 where the CPU has it, else C; the same bytes. */
static void pair_yuv422_first(const struct zcp_convert_rows *d, const uint8_t *src, size_t stride, uint8_t *dst_y0,
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
 * RAWToI420 give with SSSE3 or AVX2, so that a CPU without AVX2, which goes
 * through libyuv, gives the same; libyuv's ANY wrappers run their tails
 * through the same SIMD, so every column rounds alike):
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
 * chroma may differ by one).
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

#define PACKED_YUV(simd_, y0, u, y1, v)                                                                    \
        {                                                                                                  \
                .c_pair = pair_yuv422, .first_pair = pair_yuv422_first, .simd = simd_, .simd_tmp = NULL,   \
                .bpp = 2, .off = { y0, u, y1, v }                                                          \
        }
#define PACKED_RGB(simd_, tmp_, bpp_, r, g, b)                                                              \
        {                                                                                                   \
                .c_pair = pair_rgb, .first_pair = pair_rgb, .simd = simd_, .simd_tmp = tmp_, .bpp = bpp_,   \
                .off = { r, g, b, 0 }                                                                       \
        }

const struct zcp_convert_rows zcp_convert_packed_rows[ZCP_PIX_COUNT] = {
        [ZCP_PIX_YUYV] = PACKED_YUV(simd_yuyv, 0, 1, 2, 3),
        [ZCP_PIX_UYVY] = PACKED_YUV(simd_uyvy, 1, 0, 3, 2),
        [ZCP_PIX_YVYU] = PACKED_YUV(simd_yvyu, 0, 3, 2, 1),
        [ZCP_PIX_RGB24] = PACKED_RGB(simd_rgb24, tmp_uv_argb_rows, 3, 0, 1, 2),
        [ZCP_PIX_BGR24] = PACKED_RGB(simd_bgr24, tmp_uv_argb_rows, 3, 2, 1, 0),
        [ZCP_PIX_RGBX] = PACKED_RGB(simd_rgbx, tmp_uv_rows, 4, 0, 1, 2),
        [ZCP_PIX_BGRX] = PACKED_RGB(simd_bgrx, tmp_uv_rows, 4, 2, 1, 0),
};
