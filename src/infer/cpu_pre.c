/* SPDX-License-Identifier: MIT */
/*
 * Fast preprocess for the CPU backend (cpu_fast.h): the model input tensor of
 * zcp_ref_preprocess, bit for bit. Same float expressions in the same order
 * as reference.c (this file keeps the project's -ffp-contract=off: no fused
 * multiply-add), but the bilinear indices and weights are computed once per
 * geometry, each output row converts only the pixels its resize reads, and
 * the per-pixel math runs over contiguous arrays the compiler vectorizes (a
 * clone per CPU level). Output rows spread over the worker team.
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
        uint32_t *x0, *x1, *y0, *y1; /* [in_w], [in_h] */
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
        const size_t n = (size_t)p->in_w + p->in_h;

        if (p->width == 0 || p->height == 0 || p->in_w == 0 || p->in_h == 0)
                return -EINVAL;
        pre = calloc(1, sizeof(*pre));
        if (!pre)
                return -ENOMEM;
        pre->p = *p;
        pre->x0 = malloc(2 * n * sizeof(uint32_t));
        pre->lx0 = malloc(2 * n * sizeof(float));
        if (!pre->x0 || !pre->lx0) {
                zcp_fast_pre_free(pre);
                return -ENOMEM;
        }
        pre->x1 = pre->x0 + p->in_w;
        pre->y0 = pre->x1 + p->in_w;
        pre->y1 = pre->y0 + p->in_h;
        pre->lx1 = pre->lx0 + p->in_w;
        pre->ly0 = pre->lx1 + p->in_w;
        pre->ly1 = pre->ly0 + p->in_h;
        for (uint32_t i = 0; i < p->in_w; i++)
                src_index(i, (float)p->width / (float)p->in_w, p->width, &pre->x0[i], &pre->x1[i], &pre->lx0[i],
                          &pre->lx1[i]);
        for (uint32_t i = 0; i < p->in_h; i++)
                src_index(i, (float)p->height / (float)p->in_h, p->height, &pre->y0[i], &pre->y1[i], &pre->ly0[i],
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

ZCP_CLONES static void pre_rows(const struct zcp_fast_pre *pre, const uint8_t *nv12, float *t, uint32_t oy0,
                                uint32_t oy1)
{
        const struct zcp_preprocess_params *p = &pre->p;
        const size_t plane = (size_t)p->in_w * p->in_h;
        float px[4][3][CHUNK]; /* corners 00 01 10 11, channels R G B */

        for (uint32_t oy = oy0; oy < oy1; oy++) {
                const float ly0 = pre->ly0[oy], ly1 = pre->ly1[oy];

                for (uint32_t c0 = 0; c0 < p->in_w; c0 += CHUNK) {
                        const uint32_t n = p->in_w - c0 < CHUNK ? p->in_w - c0 : CHUNK;
                        const float *lx0 = pre->lx0 + c0, *lx1 = pre->lx1 + c0;

                        rgb_row(nv12, p->width, p->height, pre->y0[oy], pre->x0 + c0, n, px[0][0], px[0][1], px[0][2]);
                        rgb_row(nv12, p->width, p->height, pre->y0[oy], pre->x1 + c0, n, px[1][0], px[1][1], px[1][2]);
                        rgb_row(nv12, p->width, p->height, pre->y1[oy], pre->x0 + c0, n, px[2][0], px[2][1], px[2][2]);
                        rgb_row(nv12, p->width, p->height, pre->y1[oy], pre->x1 + c0, n, px[3][0], px[3][1], px[3][2]);
                        for (int k = 0; k < 3; k++) {
                                const float mean = p->mean[k], std = p->std[k];
                                float *dst = t + k * plane + (size_t)oy * p->in_w + c0;
                                for (uint32_t x = 0; x < n; x++) {
                                        float v = ly0 * (lx0[x] * px[0][k][x] + lx1[x] * px[1][k][x]) +
                                                  ly1 * (lx0[x] * px[2][k][x] + lx1[x] * px[3][k][x]);
                                        dst[x] = (v / 255.0f - mean) / std;
                                }
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
