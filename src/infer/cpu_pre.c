/* SPDX-License-Identifier: MIT */
/*
 * Fast preprocess and motion grid for the CPU backend (cpu_fast.h). The model input equals
 * zcp_ref_preprocess's bit for bit: the same float expressions in the same order as
 * reference.c (this file keeps the project's -ffp-contract=off: no fused multiply-add), but the
 * bilinear indices and weights are computed once per geometry, each output row converts only
 * the pixels its resize reads, and the per-pixel math runs over contiguous arrays the compiler
 * vectorizes (a clone per CPU level). The motion grid sums whole rows of luma with vector adds.
 * Output rows spread over the worker team.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/workers.h"
#include "infer/cpu_fast.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZCP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ZCP_CLONES
#endif

#define CHUNK 256 /* output columns per pass (stack arrays) */

struct zcp_fast_pre {
        struct zcp_preprocess_params p;
        uint32_t rx, ry, rw, rh;     /* the frame's region of the input (zcp_pre_region) */
        float pad[3];                /* the value of a black pixel outside it */
        uint32_t *x0, *x1, *y0, *y1; /* [rw], [rh] */
        float *lx0, *lx1, *ly0, *ly1;
};

/* reference.c's src_index, the same operations. */
static void src_index(uint32_t dst, float scale, uint32_t in, uint32_t *ret_i0, uint32_t *ret_i1, float *ret_l0,
                      float *ret_l1)
{
        float src = ((float)dst + 0.5f) * scale - 0.5f;
        uint32_t i0;

        if (src < 0.0f)
                src = 0.0f;
        i0 = (uint32_t)(int)src;
        if (i0 > in - 1)
                i0 = in - 1;
        *ret_i0 = i0;
        *ret_i1 = (i0 < in - 1) ? i0 + 1 : i0;
        *ret_l1 = src - (float)i0;
        *ret_l0 = 1.0f - *ret_l1;
}

void zcp_fast_pre_free(struct zcp_fast_pre *pre)
{
        if (!pre)
                return;
        free(pre->x0);
        free(pre->lx0);
        free(pre);
}

int zcp_fast_pre_new(const struct zcp_preprocess_params *p, struct zcp_fast_pre **ret_pre)
{
        struct zcp_fast_pre *pre;
        size_t n;

        if (p->width == 0 || p->height == 0 || p->in_w == 0 || p->in_h == 0)
                return -EINVAL;
        pre = calloc(1, sizeof(*pre));
        if (!pre)
                return -ENOMEM;
        pre->p = *p;
        zcp_pre_region(p, &pre->rx, &pre->ry, &pre->rw, &pre->rh);
        for (int k = 0; k < 3; k++)
                pre->pad[k] = (0.0f - p->mean[k]) / p->std[k];
        n = (size_t)pre->rw + pre->rh;
        pre->x0 = malloc(2 * n * sizeof(uint32_t));
        pre->lx0 = malloc(2 * n * sizeof(float));
        if (!pre->x0 || !pre->lx0) {
                zcp_fast_pre_free(pre);
                return -ENOMEM;
        }
        pre->x1 = pre->x0 + pre->rw;
        pre->y0 = pre->x1 + pre->rw;
        pre->y1 = pre->y0 + pre->rh;
        pre->lx1 = pre->lx0 + pre->rw;
        pre->ly0 = pre->lx1 + pre->rw;
        pre->ly1 = pre->ly0 + pre->rh;
        for (uint32_t i = 0; i < pre->rw; i++)
                src_index(i, (float)p->width / (float)pre->rw, p->width, &pre->x0[i], &pre->x1[i], &pre->lx0[i],
                          &pre->lx1[i]);
        for (uint32_t i = 0; i < pre->rh; i++)
                src_index(i, (float)p->height / (float)pre->rh, p->height, &pre->y0[i], &pre->y1[i], &pre->ly0[i],
                          &pre->ly1[i]);
        *ret_pre = pre;
        return 0;
}

static inline float clamp255(float v)
{
        /* fminf(fmaxf(v, 0), 255) for the finite values that occur here, in a form that vectorizes */
        v = v > 0.0f ? v : 0.0f;
        return v < 255.0f ? v : 255.0f;
}

/*
 * RGB of the pixels (xs[k], y), k < n, as reference.c's nv12_rgb: gathered bytes
 * first, then the float math over the arrays.
 */
static inline void rgb_row(const uint8_t *nv12, uint32_t width, uint32_t height, uint32_t y, const uint32_t *xs,
                           uint32_t n, float *r, float *g, float *b)
{
        const uint8_t *luma = nv12 + (size_t)y * width, *uv = nv12 + (size_t)width * height + (size_t)(y / 2) * width;
        int cy[CHUNK], cu[CHUNK], cv[CHUNK];

        for (uint32_t k = 0; k < n; k++) {
                cy[k] = luma[xs[k]];
                cu[k] = uv[2 * (xs[k] / 2)];
                cv[k] = uv[2 * (xs[k] / 2) + 1];
        }
        for (uint32_t k = 0; k < n; k++) {
                float c = (float)(cy[k] - 16), d = (float)(cu[k] - 128), e = (float)(cv[k] - 128);
                r[k] = clamp255(1.164f * c + 1.596f * e);
                g[k] = clamp255(1.164f * c - 0.392f * d - 0.813f * e);
                b[k] = clamp255(1.164f * c + 2.017f * d);
        }
}

/* Stores value v of channel k at input pixel (x, y) in the tensor's layout. */
static inline void put(const struct zcp_preprocess_params *p, float *t, uint32_t x, uint32_t y, int k, float v)
{
        if (p->nhwc)
                t[((size_t)y * p->in_w + x) * 3 + (size_t)k] = v;
        else
                t[(size_t)k * p->in_w * p->in_h + (size_t)y * p->in_w + x] = v;
}

/* Input row oy outside the frame's region, or its columns left and right of it: black. */
static void pad_cols(const struct zcp_fast_pre *pre, float *t, uint32_t oy, uint32_t x0, uint32_t x1)
{
        for (uint32_t x = x0; x < x1; x++)
                for (int k = 0; k < 3; k++)
                        put(&pre->p, t, x, oy, k, pre->pad[k]);
}

ZCP_CLONES static void pre_rows(const struct zcp_fast_pre *pre, const uint8_t *nv12, float *t, uint32_t oy0,
                                uint32_t oy1)
{
        const struct zcp_preprocess_params *p = &pre->p;
        float px[4][3][CHUNK]; /* corners 00 01 10 11, channels R G B */
        float out[3][CHUNK];

        for (uint32_t oy = oy0; oy < oy1; oy++) {
                uint32_t ry;
                float ly0, ly1;

                if (oy < pre->ry || oy >= pre->ry + pre->rh) {
                        pad_cols(pre, t, oy, 0, p->in_w);
                        continue;
                }
                ry = oy - pre->ry;
                ly0 = pre->ly0[ry];
                ly1 = pre->ly1[ry];
                pad_cols(pre, t, oy, 0, pre->rx);
                pad_cols(pre, t, oy, pre->rx + pre->rw, p->in_w);
                for (uint32_t c0 = 0; c0 < pre->rw; c0 += CHUNK) {
                        const uint32_t n = pre->rw - c0 < CHUNK ? pre->rw - c0 : CHUNK;
                        const float *lx0 = pre->lx0 + c0, *lx1 = pre->lx1 + c0;

                        rgb_row(nv12, p->width, p->height, pre->y0[ry], pre->x0 + c0, n, px[0][0], px[0][1], px[0][2]);
                        rgb_row(nv12, p->width, p->height, pre->y0[ry], pre->x1 + c0, n, px[1][0], px[1][1], px[1][2]);
                        rgb_row(nv12, p->width, p->height, pre->y1[ry], pre->x0 + c0, n, px[2][0], px[2][1], px[2][2]);
                        rgb_row(nv12, p->width, p->height, pre->y1[ry], pre->x1 + c0, n, px[3][0], px[3][1], px[3][2]);
                        for (int k = 0; k < 3; k++) {
                                const float mean = p->mean[k], std = p->std[k];
                                for (uint32_t x = 0; x < n; x++) {
                                        float v = ly0 * (lx0[x] * px[0][k][x] + lx1[x] * px[1][k][x]) +
                                                  ly1 * (lx0[x] * px[2][k][x] + lx1[x] * px[3][k][x]);
                                        if (!p->byte_pixels)
                                                v = v / 255.0f;
                                        out[k][x] = (v - mean) / std;
                                }
                        }
                        if (p->nhwc) {
                                float *dst = t + ((size_t)oy * p->in_w + pre->rx + c0) * 3;
                                for (uint32_t x = 0; x < n; x++) {
                                        dst[3 * x] = out[0][x];
                                        dst[3 * x + 1] = out[1][x];
                                        dst[3 * x + 2] = out[2][x];
                                }
                        } else {
                                for (int k = 0; k < 3; k++)
                                        memcpy(t + (size_t)k * p->in_w * p->in_h + (size_t)oy * p->in_w + pre->rx + c0,
                                               out[k], n * sizeof(float));
                        }
                }
        }
}

struct pre_job {
        const struct zcp_fast_pre *pre;
        const uint8_t *nv12;
        float *tensor;
};

static void pre_share(void *arg, uint32_t i, uint32_t n)
{
        const struct pre_job *job = arg;
        const uint32_t h = job->pre->p.in_h;

        pre_rows(job->pre, job->nv12, job->tensor, (uint32_t)((uint64_t)h * i / n),
                 (uint32_t)((uint64_t)h * (i + 1) / n));
}

void zcp_fast_preprocess(const struct zcp_fast_pre *pre, struct zcp_workers *team, const uint8_t *nv12,
                         float *ret_tensor)
{
        struct pre_job job = { pre, nv12, ret_tensor };

        zcp_workers_run(team, pre_share, &job);
}

/* ------------------------------------------------------------ motion grid */

#define GRID_COLS 8192 /* columns summed per pass (the config's widest frame) */

struct grid_job {
        const uint8_t *luma;
        uint32_t width, height, cell;
        uint32_t *grid;
};

/*
 * Cell rows [gy0, gy1): the rows of a cell row are added into 16-bit column
 * sums (<= 256 * 255) with vector adds, then each cell sums its columns.
 */
ZCP_CLONES static void grid_rows(const struct grid_job *job, uint32_t gy0, uint32_t gy1)
{
        const uint32_t cell = job->cell, width = job->width, gw = (width + cell - 1) / cell;
        const uint32_t span = GRID_COLS / cell * cell; /* whole cells per pass */
        uint16_t col[GRID_COLS];

        for (uint32_t gy = gy0; gy < gy1; gy++) {
                const uint32_t y0 = gy * cell, y1 = y0 + cell < job->height ? y0 + cell : job->height;

                for (uint32_t c0 = 0; c0 < width; c0 += span) {
                        const uint32_t n = width - c0 < span ? width - c0 : span;

                        memset(col, 0, n * sizeof(col[0]));
                        for (uint32_t y = y0; y < y1; y++) {
                                const uint8_t *r = job->luma + (size_t)y * width + c0;
                                for (uint32_t x = 0; x < n; x++)
                                        col[x] = (uint16_t)(col[x] + r[x]);
                        }
                        for (uint32_t x0 = 0; x0 < n; x0 += cell) {
                                const uint32_t x1 = x0 + cell < n ? x0 + cell : n;
                                uint32_t s = 0;

                                for (uint32_t x = x0; x < x1; x++)
                                        s += col[x];
                                job->grid[(size_t)gy * gw + (c0 + x0) / cell] = s / ((x1 - x0) * (y1 - y0));
                        }
                }
        }
}

static void grid_share(void *arg, uint32_t i, uint32_t n)
{
        const struct grid_job *job = arg;
        const uint32_t gh = (job->height + job->cell - 1) / job->cell;

        grid_rows(job, (uint32_t)((uint64_t)gh * i / n), (uint32_t)((uint64_t)gh * (i + 1) / n));
}

void zcp_fast_grid(struct zcp_workers *team, const uint8_t *luma, uint32_t width, uint32_t height, uint32_t cell,
                   uint32_t *ret_grid)
{
        struct grid_job job = { luma, width, height, cell, ret_grid };

        zcp_workers_run(team, grid_share, &job);
}
