/* SPDX-License-Identifier: MIT */
/*
 * convert.h: every supported format against a naive out-of-place reference
 * (BT.601 limited range integer formulas) on random frames of several sizes
 * and strides (widths that leave vector tails, odd strides), RGB also
 * against libyuv's out-of-place conversion; guard bytes after the slot and
 * the scratch; the size contract
 * (scratch <= half the input frame); argument errors; row bands across teams
 * of 2, 3, 4 and 7 threads giving one thread's bytes; the auto thread count.
 * Ends with a timing table at 1920x1080 (printed, not asserted).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libyuv.h>

#include "common.h"
#include "convert/convert.h"
#include "core/pixfmt.h"
#include "core/workers.h"

#define GUARD 64

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

/* splitmix64: deterministic. */
static uint64_t rng_next(void)
{
        uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

static void rng_fill(uint8_t *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                p[i] = (uint8_t)(rng_next() >> 56);
}

static const enum zcp_pixfmt formats[] = {
        ZCP_PIX_YUYV, ZCP_PIX_UYVY,  ZCP_PIX_YVYU,  ZCP_PIX_NV12, ZCP_PIX_NV21, ZCP_PIX_I420,
        ZCP_PIX_YV12, ZCP_PIX_RGB24, ZCP_PIX_BGR24, ZCP_PIX_RGBX, ZCP_PIX_BGRX, ZCP_PIX_GREY,
};
#define N_FORMATS (sizeof(formats) / sizeof(formats[0]))

static int is_rgb(enum zcp_pixfmt f)
{
        return f == ZCP_PIX_RGB24 || f == ZCP_PIX_BGR24 || f == ZCP_PIX_RGBX || f == ZCP_PIX_BGRX;
}

static int is_planar420(enum zcp_pixfmt f)
{
        return f == ZCP_PIX_NV12 || f == ZCP_PIX_NV21 || f == ZCP_PIX_I420 || f == ZCP_PIX_YV12;
}

/* ---- reference: plain per-pixel loops, out of place ---- */

static int ref_y(int r, int g, int b)
{
        return (66 * r + 129 * g + 25 * b + 128) / 256 + 16;
}

/*
 * U = floor((-38 R - 74 G + 112 B + 128) / 256) + 128, V likewise; the 128 * 256
 * is moved inside so that the division only sees non-negative numerators.
 * Applied to the mean of a 2x2 block (each mean rounded to nearest).
 */
static int ref_u(int r, int g, int b)
{
        return (-38 * r - 74 * g + 112 * b + 128 + 128 * 256) / 256;
}

static int ref_v(int r, int g, int b)
{
        return (112 * r - 94 * g - 18 * b + 128 + 128 * 256) / 256;
}

/* Pixel (x, y) of an RGB-family frame as r, g, b. */
static void rgb_at(enum zcp_pixfmt f, const uint8_t *in, uint32_t s, uint32_t x, uint32_t y, int *r, int *g, int *b)
{
        unsigned bpp = (f == ZCP_PIX_RGB24 || f == ZCP_PIX_BGR24) ? 3 : 4;
        const uint8_t *p = in + (size_t)y * s + (size_t)x * bpp;
        int bgr = f == ZCP_PIX_BGR24 || f == ZCP_PIX_BGRX;

        *r = bgr ? p[2] : p[0];
        *g = p[1];
        *b = bgr ? p[0] : p[2];
}

/* Packed 4:2:2: component c (0 = Y, 1 = U, 2 = V) at pixel (x, y). */
static int yuv422_at(enum zcp_pixfmt f, const uint8_t *in, uint32_t s, uint32_t x, uint32_t y, int c)
{
        const uint8_t *m = in + (size_t)y * s + (size_t)(x / 2) * 4; /* one macropixel: 2 pixels */
        switch (f) {
        case ZCP_PIX_YUYV: /* Y0 U Y1 V */
                return c == 0 ? m[x % 2 ? 2 : 0] : c == 1 ? m[1] : m[3];
        case ZCP_PIX_UYVY: /* U Y0 V Y1 */
                return c == 0 ? m[x % 2 ? 3 : 1] : c == 1 ? m[0] : m[2];
        case ZCP_PIX_YVYU: /* Y0 V Y1 U */
                return c == 0 ? m[x % 2 ? 2 : 0] : c == 1 ? m[3] : m[1];
        default:
                abort();
        }
}

static void ref_convert(enum zcp_pixfmt f, const uint8_t *in, uint32_t w, uint32_t h, uint32_t s, uint8_t *out)
{
        uint8_t *oy = out, *ouv = out + (size_t)w * h;
        size_t luma = (size_t)s * h, cs = s / 2;

        for (uint32_t y = 0; y < h; y++) {
                for (uint32_t x = 0; x < w; x++) {
                        int v, r, g, b;
                        if (is_rgb(f)) {
                                rgb_at(f, in, s, x, y, &r, &g, &b);
                                v = ref_y(r, g, b);
                        } else if (f == ZCP_PIX_YUYV || f == ZCP_PIX_UYVY || f == ZCP_PIX_YVYU) {
                                v = yuv422_at(f, in, s, x, y, 0);
                        } else {
                                v = in[(size_t)y * s + x];
                        }
                        oy[(size_t)y * w + x] = (uint8_t)v;
                }
        }
        for (uint32_t cy = 0; cy < h / 2; cy++) {
                for (uint32_t cx = 0; cx < w / 2; cx++) {
                        int u, v;
                        switch (f) {
                        case ZCP_PIX_YUYV:
                        case ZCP_PIX_UYVY:
                        case ZCP_PIX_YVYU:
                                u = (yuv422_at(f, in, s, 2 * cx, 2 * cy, 1) +
                                     yuv422_at(f, in, s, 2 * cx, 2 * cy + 1, 1) + 1) / 2;
                                v = (yuv422_at(f, in, s, 2 * cx, 2 * cy, 2) +
                                     yuv422_at(f, in, s, 2 * cx, 2 * cy + 1, 2) + 1) / 2;
                                break;
                        case ZCP_PIX_NV12:
                                u = in[luma + (size_t)cy * s + 2 * cx];
                                v = in[luma + (size_t)cy * s + 2 * cx + 1];
                                break;
                        case ZCP_PIX_NV21:
                                v = in[luma + (size_t)cy * s + 2 * cx];
                                u = in[luma + (size_t)cy * s + 2 * cx + 1];
                                break;
                        case ZCP_PIX_I420:
                                u = in[luma + cy * cs + cx];
                                v = in[luma + cs * (h / 2) + cy * cs + cx];
                                break;
                        case ZCP_PIX_YV12:
                                v = in[luma + cy * cs + cx];
                                u = in[luma + cs * (h / 2) + cy * cs + cx];
                                break;
                        case ZCP_PIX_GREY:
                                u = v = 128;
                                break;
                        default: { /* RGB: mean of the 2x2 block */
                                int sr = 0, sg = 0, sb = 0;
                                for (int dy = 0; dy < 2; dy++) {
                                        for (int dx = 0; dx < 2; dx++) {
                                                int r, g, b;
                                                rgb_at(f, in, s, 2 * cx + dx, 2 * cy + dy, &r, &g, &b);
                                                sr += r;
                                                sg += g;
                                                sb += b;
                                        }
                                }
                                sr = (sr + 2) / 4;
                                sg = (sg + 2) / 4;
                                sb = (sb + 2) / 4;
                                u = ref_u(sr, sg, sb);
                                v = ref_v(sr, sg, sb);
                                break;
                        }
                        }
                        ouv[(size_t)cy * w + 2 * cx] = (uint8_t)u;
                        ouv[(size_t)cy * w + 2 * cx + 1] = (uint8_t)v;
                }
        }
}

/* ---- one conversion against the reference ---- */

struct diff_stats {
        int max_diff;
        size_t n_diff_y, n_diff_uv;
        size_t n_total;
        size_t n_as_libyuv; /* RGB frames whose chroma rows >= 1 are libyuv's */
};

/* libyuv out of place to NV12 (chroma merged here): the library's own rounding on this CPU. */
static void libyuv_rgb(enum zcp_pixfmt f, const uint8_t *in, uint32_t w, uint32_t h, uint32_t s, uint8_t *out)
{
        const int W = (int)w, H = (int)h, S = (int)s, cw = W / 2;
        uint8_t *u = malloc((size_t)cw * (h / 2)), *v = malloc((size_t)cw * (h / 2));
        int r = -1;

        CHECK(u && v);
        switch (f) {
        case ZCP_PIX_RGB24: /* libyuv RAW = R G B in memory */
                r = RAWToI420(in, S, out, W, u, cw, v, cw, W, H);
                break;
        case ZCP_PIX_BGR24: /* libyuv RGB24 = B G R */
                r = RGB24ToI420(in, S, out, W, u, cw, v, cw, W, H);
                break;
        case ZCP_PIX_RGBX: /* libyuv ABGR = R G B A */
                r = ABGRToI420(in, S, out, W, u, cw, v, cw, W, H);
                break;
        case ZCP_PIX_BGRX: /* libyuv ARGB = B G R A */
                r = ARGBToI420(in, S, out, W, u, cw, v, cw, W, H);
                break;
        default:
                abort();
        }
        CHECK(r == 0);
        MergeUVPlane(u, cw, v, cw, out + (size_t)w * h, W, cw, H / 2);
        free(u);
        free(v);
}

static void check_one(enum zcp_pixfmt f, uint32_t w, uint32_t h, uint32_t s, struct diff_stats *st)
{
        size_t in_size = zcp_pixfmt_frame_size_stride(f, s, h);
        size_t slot = zcp_pixfmt_slot_size(f, w, h, s);
        size_t nv12 = zcp_nv12_size(w, h);
        size_t need = zcp_convert_scratch_size(f, w, h, s);
        const char *name = zcp_pixfmt_name(f);

        CHECK_MSG(in_size > 0, "%s %ux%u stride %u", name, w, h, s);
        CHECK_MSG(slot == (in_size > nv12 ? in_size : nv12), "%s %ux%u s%u: slot %zu", name, w, h, s, slot);
        CHECK_MSG(need <= in_size / 2, "%s %ux%u s%u: scratch %zu > half of %zu", name, w, h, s, need, in_size);

        /* buf_size says GUARD more bytes are available: the contract is that they stay untouched. */
        uint8_t *buf = malloc(slot + GUARD), *orig = malloc(slot + GUARD), *ref = malloc(nv12);
        uint8_t *scratch = malloc(need + GUARD), *scratch_guard = malloc(GUARD);
        CHECK(buf && orig && ref && scratch && scratch_guard);
        rng_fill(orig, slot + GUARD);
        rng_fill(scratch, need + GUARD);
        memcpy(scratch_guard, scratch + need, GUARD);
        memcpy(buf, orig, slot + GUARD);
        ref_convert(f, orig, w, h, s, ref);

        /* Too small a buffer: refused, nothing touched. */
        CHECK(zcp_convert_to_nv12(f, buf, slot - 1, w, h, s, scratch, need) == -ENOSPC);
        CHECK(memcmp(buf, orig, slot + GUARD) == 0);
        if (need > 0) {
                CHECK(zcp_convert_to_nv12(f, buf, slot, w, h, s, scratch, need - 1) == -EINVAL);
                CHECK(zcp_convert_to_nv12(f, buf, slot, w, h, s, NULL, need) == -EINVAL);
                CHECK(memcmp(buf, orig, slot + GUARD) == 0);
        }

        int r = zcp_convert_to_nv12(f, buf, slot + GUARD, w, h, s, scratch, need);
        CHECK_MSG(r == 0, "%s %ux%u s%u: %d", name, w, h, s, r);

        CHECK_MSG(memcmp(buf + slot, orig + slot, GUARD) == 0, "%s %ux%u s%u: wrote past the slot", name, w, h,
                  s);
        CHECK_MSG(memcmp(scratch + need, scratch_guard, GUARD) == 0, "%s %ux%u s%u: wrote past the scratch",
                  name, w, h, s);

        /*
         * Luma and YUV inputs are bit-exact everywhere. RGB chroma: row 0
         * (pair 0, done in convert_rows.c's C) follows the reference formulas;
         * rows >= 1 are libyuv's bytes (its SIMD rounds chroma its own way,
         * +-1 from the reference) where the vector rows run, which is every
         * frame but the tiniest (libyuv's row buffers must fit in the
         * scratch); there all rows follow the reference.
         */
        size_t wh = (size_t)w * h;
        int tol = is_rgb(f) && h > 2 ? 2 : 0;
        for (size_t i = 0; i < nv12; i++) {
                int d = abs((int)buf[i] - (int)ref[i]);
                CHECK_MSG(d <= (i < wh + w ? 0 : tol), "%s %ux%u s%u: byte %zu (%s row %zu col %zu) got %u want %u",
                          name, w, h, s, i, i < wh ? "Y" : "UV", (i < wh ? i : i - wh) / w, (i < wh ? i : i - wh) % w,
                          buf[i], ref[i]);
                if (d > st->max_diff)
                        st->max_diff = d;
                if (i < wh)
                        st->n_diff_y += d != 0;
                else
                        st->n_diff_uv += d != 0;
        }
        if (is_rgb(f) && h > 2) {
                uint8_t *lib = malloc(nv12);
                CHECK(lib);
                libyuv_rgb(f, orig, w, h, s, lib);
                /* Every row pair >= 1 as libyuv, or (tiny frames only) every row as the reference. */
                bool as_lib = memcmp(buf + wh + w, lib + wh + w, nv12 - wh - w) == 0;
                bool as_ref = memcmp(buf + wh + w, ref + wh + w, nv12 - wh - w) == 0;
                CHECK_MSG(as_lib || as_ref, "%s %ux%u s%u: chroma rows >= 1 neither libyuv's nor the reference's",
                          name, w, h, s);
                CHECK_MSG(memcmp(lib, ref, wh) == 0, "%s %ux%u: libyuv's luma differs from the reference", name, w,
                          h);
                /* Frames this large always go through the vector rows. */
                CHECK_MSG(as_lib || w < 32 || h < 8, "%s %ux%u s%u: chroma not libyuv's", name, w, h, s);
                st->n_as_libyuv += as_lib;
                free(lib);
        }
        st->n_total += nv12;

        free(buf);
        free(orig);
        free(ref);
        free(scratch);
        free(scratch_guard);
}

static void test_formats(void)
{
        static const uint32_t sizes[][2] = {
                { 720, 528 }, { 642, 482 }, { 2, 2 },   { 640, 480 }, { 4, 2 },   { 2, 6 },
                { 6, 4 },     { 34, 10 },   { 66, 2 },  { 130, 18 },  { 258, 34 }, { 722, 2 },
                { 94, 8 },    { 96, 12 },   { 62, 40 },
        };

        for (size_t fi = 0; fi < N_FORMATS; fi++) {
                enum zcp_pixfmt f = formats[fi];
                struct diff_stats st = { 0 };
                CHECK(zcp_convert_supported(f));
                for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
                        uint32_t w = sizes[si][0], h = sizes[si][1];
                        uint32_t min = zcp_pixfmt_min_stride(f, w);
                        /* Minimal, slightly padded (odd where the format allows), doubled. */
                        uint32_t pad = is_planar420(f) ? 8 : 5;
                        uint32_t strides[] = { min, min + pad, 2 * min };
                        for (size_t k = 0; k < 3; k++)
                                check_one(f, w, h, strides[k], &st);
                }
                printf("%-6s ok: max |diff| %d; of %zu bytes, %zu Y and %zu UV differ from the reference", zcp_pixfmt_name(f),
                       st.max_diff, st.n_total, st.n_diff_y, st.n_diff_uv);
                if (is_rgb(f))
                        printf("; %zu frames' chroma rows >= 1 equal libyuv's", st.n_as_libyuv);
                printf("\n");
                CHECK(st.n_diff_y == 0);
                if (!is_rgb(f))
                        CHECK(st.n_diff_uv == 0);
                else
                        CHECK(st.n_as_libyuv >= 3 * 8); /* the sizes >= 32 x 8, 3 strides each */
        }
}

static void test_errors(void)
{
        static uint8_t buf[4096], scratch[4096];

        CHECK(!zcp_convert_supported(ZCP_PIX_NONE));
        CHECK(!zcp_convert_supported(ZCP_PIX_MJPEG));
        CHECK(!zcp_convert_supported(ZCP_PIX_COUNT));
        CHECK(!zcp_convert_supported((enum zcp_pixfmt)-1));

        CHECK(zcp_convert_to_nv12(ZCP_PIX_MJPEG, buf, sizeof(buf), 16, 16, 32, scratch, sizeof(scratch)) == -EINVAL);
        CHECK(zcp_convert_to_nv12(ZCP_PIX_NONE, buf, sizeof(buf), 16, 16, 32, scratch, sizeof(scratch)) == -EINVAL);
        CHECK(zcp_convert_to_nv12(ZCP_PIX_COUNT, buf, sizeof(buf), 16, 16, 32, scratch, sizeof(scratch)) == -EINVAL);
        /* zero, odd */
        CHECK(zcp_convert_to_nv12(ZCP_PIX_YUYV, buf, sizeof(buf), 0, 16, 32, scratch, sizeof(scratch)) == -EINVAL);
        CHECK(zcp_convert_to_nv12(ZCP_PIX_YUYV, buf, sizeof(buf), 16, 0, 32, scratch, sizeof(scratch)) == -EINVAL);
        CHECK(zcp_convert_to_nv12(ZCP_PIX_YUYV, buf, sizeof(buf), 15, 16, 32, scratch, sizeof(scratch)) == -EINVAL);
        CHECK(zcp_convert_to_nv12(ZCP_PIX_GREY, buf, sizeof(buf), 16, 15, 16, scratch, sizeof(scratch)) == -EINVAL);
        /* stride below the minimum; odd stride for 4:2:0 planar */
        CHECK(zcp_convert_to_nv12(ZCP_PIX_YUYV, buf, sizeof(buf), 16, 16, 31, scratch, sizeof(scratch)) == -EINVAL);
        CHECK(zcp_convert_to_nv12(ZCP_PIX_RGBX, buf, sizeof(buf), 16, 16, 63, scratch, sizeof(scratch)) == -EINVAL);
        CHECK(zcp_convert_to_nv12(ZCP_PIX_I420, buf, sizeof(buf), 16, 16, 15, scratch, sizeof(scratch)) == -EINVAL);
        CHECK(zcp_convert_to_nv12(ZCP_PIX_I420, buf, sizeof(buf), 16, 16, 17, scratch, sizeof(scratch)) == -EINVAL);
        CHECK(zcp_convert_to_nv12(ZCP_PIX_YUYV, NULL, sizeof(buf), 16, 16, 32, scratch, sizeof(scratch)) == -EINVAL);
        /* absurd stride */
        CHECK(zcp_convert_to_nv12(ZCP_PIX_GREY, buf, sizeof(buf), 16, 16, 0x80000000u, scratch, sizeof(scratch)) ==
              -EINVAL);
        /* GREY grows: the slot must hold the NV12 result */
        CHECK(zcp_pixfmt_slot_size(ZCP_PIX_GREY, 16, 16, 16) == 384);
        CHECK(zcp_pixfmt_slot_size(ZCP_PIX_GREY, 16, 16, 40) == 640);
        CHECK(zcp_convert_to_nv12(ZCP_PIX_GREY, buf, 256, 16, 16, 16, scratch, sizeof(scratch)) == -ENOSPC);
        CHECK(zcp_convert_to_nv12(ZCP_PIX_GREY, buf, 384, 16, 16, 16, NULL, 0) == 0);

        CHECK(zcp_convert_scratch_size(ZCP_PIX_MJPEG, 16, 16, 32) == 0);
        CHECK(zcp_pixfmt_slot_size(ZCP_PIX_YUYV, 15, 16, 32) == 0);
        CHECK(zcp_pixfmt_slot_size(ZCP_PIX_YUYV, 16, 16, 8) == 0);
        CHECK(zcp_convert_scratch_size(ZCP_PIX_NV12, 16, 16, 16) == 0);
}

/*
 * Bands across threads (zcp_convert_to_nv12_mt): the same bytes as one
 * thread for every format, size and stride, nothing written past the slot or
 * the scratch; a team that gets no band (small frames, planar formats) too.
 */
static void test_threads(void)
{
        static const uint32_t sizes[][2] = { { 64, 128 }, { 642, 482 }, { 720, 528 }, { 1920, 1080 }, { 34, 10 } };
        static const uint32_t teams[] = { 2, 3, 4, 7 };
        size_t compared = 0, split = 0;

        for (size_t ti = 0; ti < sizeof(teams) / sizeof(teams[0]); ti++) {
                struct zcp_workers *wk;
                CHECK(zcp_workers_new(teams[ti], "test-cvt", &wk) == 0);
                CHECK(zcp_workers_count(wk) == teams[ti]);
                for (size_t fi = 0; fi < N_FORMATS; fi++) {
                        enum zcp_pixfmt f = formats[fi];
                        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
                                uint32_t w = sizes[si][0], h = sizes[si][1], min = zcp_pixfmt_min_stride(f, w);
                                uint32_t strides[] = { min, min + (is_planar420(f) ? 8 : 6), 2 * min };
                                for (size_t k = 0; k < 3; k++) {
                                        uint32_t st = strides[k];
                                        size_t slot = zcp_pixfmt_slot_size(f, w, h, st);
                                        size_t one = zcp_convert_scratch_size(f, w, h, st);
                                        size_t need = zcp_convert_scratch_size_mt(f, w, h, st, teams[ti]);
                                        size_t in_size = zcp_pixfmt_frame_size_stride(f, st, h);
                                        CHECK(need >= one && need <= in_size / 2);
                                        uint8_t *a = malloc(slot + GUARD), *b = malloc(slot + GUARD);
                                        uint8_t *sa = malloc(need + GUARD), *sb = malloc(need + GUARD);
                                        CHECK(a && b && sa && sb);
                                        rng_fill(a, slot + GUARD);
                                        memcpy(b, a, slot + GUARD);
                                        memset(sb + need, 0xa5, GUARD);
                                        CHECK(zcp_convert_to_nv12(f, a, slot, w, h, st, sa, one) == 0);
                                        if (need > one)
                                                CHECK(zcp_convert_to_nv12_mt(wk, f, b, slot, w, h, st, sb, need - 1) ==
                                                      -EINVAL);
                                        CHECK(zcp_convert_to_nv12_mt(wk, f, b, slot, w, h, st, sb, need) == 0);
                                        CHECK_MSG(memcmp(a, b, slot + GUARD) == 0, "%s %ux%u s%u, %u threads",
                                                  zcp_pixfmt_name(f), w, h, st, teams[ti]);
                                        for (size_t i = 0; i < GUARD; i++)
                                                CHECK(sb[need + i] == 0xa5);
                                        compared++;
                                        split += need > one;
                                        free(a);
                                        free(b);
                                        free(sa);
                                        free(sb);
                                }
                        }
                }
                zcp_workers_free(wk);
        }
        printf("threads ok: %zu conversions equal to one thread's, %zu of them with band scratch\n", compared, split);
        CHECK(split > 0);
        CHECK(zcp_convert_auto_threads(640, 480, 16) == 1);
        CHECK(zcp_convert_auto_threads(1280, 720, 16) == 1);
        CHECK(zcp_convert_auto_threads(1280, 720, 3) == 1);
        CHECK(zcp_convert_auto_threads(1920, 1080, 16) == 4);
        CHECK(zcp_convert_auto_threads(1920, 1080, 8) == 4);
        CHECK(zcp_convert_auto_threads(3840, 2160, 4) == 2);
        CHECK(zcp_convert_auto_threads(3840, 2160, 2) == 1);
        CHECK(zcp_convert_auto_threads(3840, 2160, 0) == 1);
}

static double now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

/* Timing at 1920x1080, minimal stride: printed for humans, not asserted. */
static void bench(void)
{
        enum { W = 1920, H = 1080, ITER = 15 };
        size_t max_slot = 0, max_scratch = 0;

        for (size_t fi = 0; fi < N_FORMATS; fi++) {
                enum zcp_pixfmt f = formats[fi];
                uint32_t s = zcp_pixfmt_min_stride(f, W);
                size_t slot = zcp_pixfmt_slot_size(f, W, H, s), sc = zcp_convert_scratch_size(f, W, H, s);
                max_slot = slot > max_slot ? slot : max_slot;
                max_scratch = sc > max_scratch ? sc : max_scratch;
        }
        uint8_t *buf = malloc(max_slot), *orig = malloc(max_slot), *scratch = malloc(max_scratch + 1);
        CHECK(buf && orig && scratch);
        rng_fill(orig, max_slot);

        printf("\n1920x1080, minimal stride, warm cache (input just copied in); memcpy = copying the input once\n");
        printf("%-6s %10s %10s %10s %10s %10s\n", "format", "in bytes", "scratch", "ms/frame", "min ms", "memcpy ms");
        for (size_t fi = 0; fi < N_FORMATS; fi++) {
                enum zcp_pixfmt f = formats[fi];
                uint32_t s = zcp_pixfmt_min_stride(f, W);
                size_t slot = zcp_pixfmt_slot_size(f, W, H, s), sc = zcp_convert_scratch_size(f, W, H, s);
                size_t in_size = zcp_pixfmt_frame_size_stride(f, s, H);
                double t[ITER], tc[ITER];
                for (int i = 0; i < ITER; i++) {
                        double t0 = now_ms();
                        memcpy(buf, orig, in_size);
                        tc[i] = now_ms() - t0;
                        memcpy(buf, orig, slot);
                        t0 = now_ms();
                        CHECK(zcp_convert_to_nv12(f, buf, slot, W, H, s, scratch, sc) == 0);
                        t[i] = now_ms() - t0;
                }
                qsort(t, ITER, sizeof(t[0]), cmp_double);
                qsort(tc, ITER, sizeof(tc[0]), cmp_double);
                printf("%-6s %10zu %10zu %10.3f %10.3f %10.3f\n", zcp_pixfmt_name(f), in_size, sc, t[ITER / 2], t[0],
                       tc[ITER / 2]);
        }
        free(buf);
        free(orig);
        free(scratch);
}

/*
 * The ring sizes slots with zcp_pixfmt_slot_size() (core/pixfmt.c), the convert
 * stage checks them with its own geometry (convert.c): the two must agree on
 * every format and small geometry, odd and out-of-range ones included.
 */
static void test_slot_size_agrees(void)
{
        static uint8_t buf[64 * 8 * 2], scratch[64 * 8];
        uint32_t checked = 0;

        for (int f = 0; f < ZCP_PIX_COUNT; f++) {
                for (uint32_t w = 0; w <= 8; w++) {
                        for (uint32_t h = 0; h <= 6; h++) {
                                for (uint32_t st = 0; st <= 40; st++) {
                                        size_t slot = zcp_pixfmt_slot_size((enum zcp_pixfmt)f, w, h, st);
                                        int r = zcp_convert_to_nv12((enum zcp_pixfmt)f, buf, sizeof(buf), w, h, st,
                                                                    scratch, sizeof(scratch));

                                        CHECK_MSG((slot == 0) == (r == -EINVAL), "%s %ux%u s%u: slot %zu, convert %d",
                                                  zcp_pixfmt_name((enum zcp_pixfmt)f), w, h, st, slot, r);
                                        if (slot == 0)
                                                continue;
                                        CHECK(zcp_convert_to_nv12((enum zcp_pixfmt)f, buf, slot - 1, w, h, st, scratch,
                                                                  sizeof(scratch)) == -ENOSPC);
                                        CHECK(zcp_convert_to_nv12((enum zcp_pixfmt)f, buf, slot, w, h, st, scratch,
                                                                  sizeof(scratch)) == 0);
                                        checked++;
                                }
                        }
                }
        }
        CHECK(checked > 1000);
        /* Beyond 32 bits: 2^30 pixels of RGBX need a stride of 2^32 bytes. */
        CHECK(zcp_pixfmt_slot_size(ZCP_PIX_RGBX, 1u << 30, 2, 1u << 28) == 0);
}

int main(void)
{
        setvbuf(stdout, NULL, _IOLBF, 0);
        test_errors();
        test_slot_size_agrees();
        test_formats();
        test_threads();
        bench();
        return 0;
}
