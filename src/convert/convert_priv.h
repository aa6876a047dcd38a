/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * In-place conversion to NV12 (convert.h): what its files share. They call
 * each other in one direction only:
 *
 *   convert.c          the entry points, the format table, planar and grey
 *   convert_packed.c   packed formats (4:2:2, RGB): the in-place order of
 *                      row pairs, on one thread or a team (convert_packed.h)
 *   convert_rows.c     the row converters of each packed format: C, vector
 *                      extensions, AVX2, libyuv (the table below)
 *
 * Nothing outside src/convert/convert*.c includes it. Keeps no state.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pixfmt.h"

/* One frame's geometry as the conversion sees it. */
struct geom {
        uint32_t w, h, s;
        size_t in_size;  /* input bytes with this stride */
        size_t out_size; /* NV12 bytes */
};

struct zcp_convert_rows;

/*
 * One packed row pair in C: chroma of rows src, src + stride to dst_uv (w
 * bytes), then luma of the upper row to dst_y0 (may equal src: written
 * left to right behind the reads), then the lower row to dst_y1.
 */
typedef void (*zcp_convert_pair_fn)(const struct zcp_convert_rows *d, const uint8_t *src, size_t stride, uint8_t *dst_y0,
                                    uint8_t *dst_y1, uint8_t *dst_uv, uint32_t w);
/*
 * Vector code or libyuv on `rows` packed rows (even) whose outputs do not
 * overlap them; tmp holds simd_tmp(w, tmp_rows) bytes (tmp_rows even, >= 2).
 */
typedef void (*zcp_convert_simd_fn)(const uint8_t *src, int stride, uint8_t *dst_y, uint8_t *dst_uv, int w, int rows,
                                    uint8_t *tmp, int tmp_rows);

/* A packed format's row converters, and where its bytes sit (convert_rows.c). */
struct zcp_convert_rows {
        zcp_convert_pair_fn c_pair;     /* C, any row pair */
        zcp_convert_pair_fn first_pair; /* pair 0 (c_pair's contract, its bytes) */
        zcp_convert_simd_fn simd;
        size_t (*simd_tmp)(uint32_t w, uint32_t rows); /* row buffer bytes for `rows` rows; NULL = none */
        uint8_t bpp;                    /* bytes per pixel */
        uint8_t off[4];                 /* 4:2:2: Y0 U Y1 V offsets in 4 bytes; RGB: R G B offsets */
};

/* Indexed by format: the packed ones (YUYV UYVY YVYU RGB24 BGR24 RGBX BGRX); zeroed for the others. */
extern const struct zcp_convert_rows zcp_convert_packed_rows[ZCP_PIX_COUNT];

static inline size_t min_sz(size_t a, size_t b)
{
        return a < b ? a : b;
}

static inline size_t align64(size_t n)
{
        return (n + 63) & ~(size_t)63;
}

/* BT.601 limited range, integer (the formulas convert.h documents). */

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
