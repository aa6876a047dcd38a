/* SPDX-License-Identifier: MIT */
/*
 * zcnet: the C reference of every computation the GPU does (DESIGN.md §4).
 * The zcp_ref_* functions are pure, allocate nothing and may run on any
 * thread.
 *
 * EXACT ORDER OF FLOAT OPERATIONS. The CUDA kernels mirror this. This file is
 * compiled with -ffp-contract=off, the preprocess and motion kernels with
 * --fmad=false, so no a*b+c is ever fused there; the plan executor's
 * convolution sums (kernels/conv.cu) use explicit FMAs, within the score
 * tolerance below. Parentheses below are the evaluation order; "/" is IEEE
 * division (never a reciprocal multiply). The tensor and the motion
 * grid/results are meant to match bit for bit; the sums inside zcnet may be
 * reordered by a kernel (tree reductions), which the 1e-4 relative score
 * tolerance covers.
 *
 * Against PyTorch itself (torch 2.11, CPU and CUDA, measured): its builds
 * contract the source index scale*(dst+0.5)-0.5 into an FMA, so a torch
 * tensor differs from this one by up to 1 ulp of the source index times the
 * neighbour difference (max 3.4e-5 abs for 642x482 -> 224x224, 2.7e-4 for
 * 1920x1080 -> 224x224); with that FMA emulated, within 1 ulp everywhere.
 * The no-FMA form below is the contract.
 *
 * 1. Preprocess, tensor [3][in_h][in_w] (k = 0 R, 1 G, 2 B), output pixel (ox, oy):
 *      sx = (float)width / (float)in_w;   sy = (float)height / (float)in_h
 *      fx = ((float)ox + 0.5f) * sx - 0.5f;  if (fx < 0.0f) fx = 0.0f
 *      x0 = min((int)fx, width - 1) (truncation, fx >= 0; the min never binds,
 *           it is PyTorch's guard);         x1 = (x0 < width - 1) ? x0 + 1 : x0
 *      lx1 = fx - (float)x0;                 lx0 = 1.0f - lx1
 *      (the same for fy, y0, y1, ly1, ly0 with sy, height, oy)
 *    RGB of a full-resolution pixel (x, y), never materialized:
 *      Y = luma[y*width + x]; U = uv[(y/2)*width + 2*(x/2)]; V = uv[(y/2)*width + 2*(x/2) + 1]
 *      (uv = nv12 + width*height)
 *      c = (float)(Y - 16); d = (float)(U - 128); e = (float)(V - 128)   (exact)
 *      R = (1.164f*c) + (1.596f*e)
 *      G = ((1.164f*c) - (0.392f*d)) - (0.813f*e)
 *      B = (1.164f*c) + (2.017f*d)
 *      each then clamped: fminf(fmaxf(v, 0.0f), 255.0f)
 *    Bilinear (PyTorch interpolate bilinear, align_corners=False, no antialias),
 *    p00 = P(x0,y0), p01 = P(x1,y0), p10 = P(x0,y1), p11 = P(x1,y1), per channel:
 *      v = (ly0 * ((lx0*p00) + (lx1*p01))) + (ly1 * ((lx0*p10) + (lx1*p11)))
 *    Normalize:
 *      tensor[k][oy][ox] = ((v / 255.0f) - mean[k]) / std[k]
 *
 * 2. Motion grid [grid_h][grid_w], cell (gx, gy) covers x in
 *    [gx*cell, min(gx*cell + cell, width)), y likewise (edge cells smaller):
 *      sum = sum of Y over the cell (uint32_t); grid = sum / (cw*ch) (integer division)
 *
 * 3. zcnet. Layer l: input [C][H][W], output [O][H'][W'], stride s,
 *    H' = (H - 1)/s + 1, W' = (W - 1)/s + 1 (3x3, padding 1). For each output:
 *      acc = bias[o]
 *      for ci = 0..C-1, ky = 0..2, kx = 0..2 (in this nesting):
 *          iy = oy*s + ky - 1; ix = ox*s + kx - 1
 *          if (0 <= iy < H && 0 <= ix < W) acc = acc + (w[o][ci][ky][kx] * in[ci][iy][ix])
 *      out[o][oy][ox] = (acc > 0.0f) ? acc : 0.0f
 *    Pool: sum = 0.0f; for y, x row-major: sum = sum + a[c][y][x]; pooled[c] = sum / (float)(H*W)
 *    FC:   acc = fc_bias[k]; for j = 0..C-1: acc = acc + (fc_w[k][j] * pooled[j]); logit[k] = acc
 *    Softmax: m = max_k logit[k]; e[k] = expf(logit[k] - m);
 *             sum = 0.0f; for k = 0..classes-1: sum = sum + e[k]; p[k] = e[k] / sum
 *
 * 4. Top-k: descending p, ties to the lower class index; min(k, classes) entries.
 *
 * 5. Motion, per cell i in row-major order, m = (float)grid[i]:
 *      first frame: bg[i] = m (no cell moves)
 *      else: t = m - bg[i]; moving = fabsf(t) > threshold; t = alpha * t; bg[i] = bg[i] + t
 *    moving_cells = count; total_cells = grid_w*grid_h;
 *    moving_fraction = (float)moving_cells / (float)total_cells;
 *    bbox = { min gx*cell, min gy*cell, min((max gx + 1)*cell, width),
 *             min((max gy + 1)*cell, height) } over moving cells, all -1 if none.
 *    mask: bit i % 32 of word i / 32 = moving (frame.h), zeros elsewhere.
 */
#include "infer/reference.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

static inline float clamp255(float v)
{
        return fminf(fmaxf(v, 0.0f), 255.0f);
}

static inline void nv12_rgb(const uint8_t *luma, const uint8_t *uv, uint32_t width, uint32_t x, uint32_t y,
                            float rgb[3])
{
        const uint8_t *c2 = uv + (size_t)(y / 2) * width + 2 * (x / 2);
        float c = (float)((int)luma[(size_t)y * width + x] - 16);
        float d = (float)((int)c2[0] - 128);
        float e = (float)((int)c2[1] - 128);

        rgb[0] = clamp255(1.164f * c + 1.596f * e);
        rgb[1] = clamp255(1.164f * c - 0.392f * d - 0.813f * e);
        rgb[2] = clamp255(1.164f * c + 2.017f * d);
}

/* PyTorch area_pixel_compute_source_index + the linear index/weight computation. */
static inline void src_index(uint32_t dst, float scale, uint32_t in, uint32_t *ret_i0, uint32_t *ret_i1,
                             float *ret_l0, float *ret_l1)
{
        float src = ((float)dst + 0.5f) * scale - 0.5f;
        uint32_t i0;

        if (src < 0.0f)
                src = 0.0f;
        i0 = (uint32_t)(int)src;
        if (i0 > in - 1)
                i0 = in - 1;   /* not reached for in >= 1; keeps reads in bounds whatever the rounding */
        *ret_i0 = i0;
        *ret_i1 = (i0 < in - 1) ? i0 + 1 : i0;
        *ret_l1 = src - (float)i0;
        *ret_l0 = 1.0f - *ret_l1;
}

static void preprocess_tensor(const uint8_t *nv12, const struct zcp_preprocess_params *p, float *t)
{
        const uint8_t *uv = nv12 + (size_t)p->width * p->height;
        const size_t plane = (size_t)p->in_w * p->in_h;
        uint32_t rx, ry, rw, rh;
        float sx, sy, pad[3];

        zcp_pre_region(p, &rx, &ry, &rw, &rh);
        sx = (float)p->width / (float)rw;
        sy = (float)p->height / (float)rh;
        for (int k = 0; k < 3; k++)
                pad[k] = (0.0f - p->mean[k]) / p->std[k];
        for (uint32_t oy = 0; oy < p->in_h; oy++) {
                uint32_t y0 = 0, y1 = 0;
                float ly0 = 0.0f, ly1 = 0.0f;
                bool yin = oy >= ry && oy < ry + rh;

                if (yin)
                        src_index(oy - ry, sy, p->height, &y0, &y1, &ly0, &ly1);
                for (uint32_t ox = 0; ox < p->in_w; ox++) {
                        float p00[3], p01[3], p10[3], p11[3], out[3];
                        uint32_t x0, x1;
                        float lx0, lx1;

                        if (!yin || ox < rx || ox >= rx + rw) {
                                memcpy(out, pad, sizeof(out));
                        } else {
                                src_index(ox - rx, sx, p->width, &x0, &x1, &lx0, &lx1);
                                nv12_rgb(nv12, uv, p->width, x0, y0, p00);
                                nv12_rgb(nv12, uv, p->width, x1, y0, p01);
                                nv12_rgb(nv12, uv, p->width, x0, y1, p10);
                                nv12_rgb(nv12, uv, p->width, x1, y1, p11);
                                for (int k = 0; k < 3; k++) {
                                        float v = ly0 * (lx0 * p00[k] + lx1 * p01[k]) +
                                                  ly1 * (lx0 * p10[k] + lx1 * p11[k]);
                                        if (!p->byte_pixels)
                                                v = v / 255.0f;
                                        out[k] = (v - p->mean[k]) / p->std[k];
                                }
                        }
                        for (int k = 0; k < 3; k++) {
                                if (p->nhwc)
                                        t[((size_t)oy * p->in_w + ox) * 3 + k] = out[k];
                                else
                                        t[k * plane + (size_t)oy * p->in_w + ox] = out[k];
                        }
                }
        }
}

static void preprocess_grid(const uint8_t *luma, const struct zcp_preprocess_params *p, uint32_t *grid)
{
        const uint32_t cell = p->cell, gw = zcp_grid_w(p->width, cell), gh = zcp_grid_h(p->height, cell);

        for (uint32_t gy = 0; gy < gh; gy++) {
                uint32_t y0 = gy * cell, y1 = y0 + cell < p->height ? y0 + cell : p->height;
                for (uint32_t gx = 0; gx < gw; gx++) {
                        uint32_t x0 = gx * cell, x1 = x0 + cell < p->width ? x0 + cell : p->width;
                        uint32_t sum = 0;

                        for (uint32_t y = y0; y < y1; y++) {
                                const uint8_t *row = luma + (size_t)y * p->width;
                                for (uint32_t x = x0; x < x1; x++)
                                        sum += row[x];
                        }
                        grid[gy * gw + gx] = sum / ((x1 - x0) * (y1 - y0));
                }
        }
}

void zcp_ref_preprocess(const uint8_t *nv12, const struct zcp_preprocess_params *p, float *ret_tensor,
                        uint32_t *ret_grid)
{
        if (ret_tensor)
                preprocess_tensor(nv12, p, ret_tensor);
        if (ret_grid)
                preprocess_grid(nv12, p, ret_grid);
}

void zcp_ref_topk(const float *probs, uint32_t classes, uint32_t k, uint32_t *ret_class, float *ret_prob)
{
        uint32_t n = 0;

        if (k > classes)
                k = classes;
        if (k == 0)
                return;
        /* Insertion into a sorted list of k; strict '>' keeps the lower index first on ties. */
        for (uint32_t c = 0; c < classes; c++) {
                float p = probs[c];
                uint32_t j;

                if (n == k && !(p > ret_prob[k - 1]))
                        continue;
                j = (n < k) ? n++ : k - 1;
                while (j > 0 && p > ret_prob[j - 1]) {
                        ret_prob[j] = ret_prob[j - 1];
                        ret_class[j] = ret_class[j - 1];
                        j--;
                }
                ret_prob[j] = p;
                ret_class[j] = c;
        }
}

void zcp_ref_motion(const uint32_t *grid, float *bg, bool first, const struct zcp_motion_params *p,
                    struct zcp_result *ret, uint32_t *ret_mask)
{
        const uint32_t gw = zcp_grid_w(p->width, p->cell), gh = zcp_grid_h(p->height, p->cell);
        const uint32_t words = zcp_mask_words((uint64_t)gw * gh);
        uint32_t moving = 0, cx0 = UINT32_MAX, cy0 = UINT32_MAX, cx1 = 0, cy1 = 0;

        if (ret_mask)
                memset(ret_mask, 0, (size_t)words * sizeof(uint32_t));

        for (uint32_t gy = 0; gy < gh; gy++) {
                for (uint32_t gx = 0; gx < gw; gx++) {
                        const size_t i = (size_t)gy * gw + gx;
                        const float m = (float)grid[i];
                        float t;

                        if (first) {
                                bg[i] = m;
                                continue;
                        }
                        t = m - bg[i];
                        if (fabsf(t) > p->threshold) {
                                if (ret_mask)
                                        ret_mask[i / 32] |= 1u << (i % 32);
                                moving++;
                                cx0 = gx < cx0 ? gx : cx0;
                                cy0 = gy < cy0 ? gy : cy0;
                                cx1 = gx > cx1 ? gx : cx1;
                                cy1 = gy > cy1 ? gy : cy1;
                        }
                        t = p->alpha * t;
                        bg[i] = bg[i] + t;
                }
        }
        ret->moving_cells = moving;
        ret->total_cells = gw * gh;
        ret->moving_fraction = (float)moving / (float)(gw * gh);
        ret->grid_w = gw;
        ret->grid_h = gh;
        ret->mask_words = ret_mask ? words : 0;
        if (moving == 0) {
                for (int i = 0; i < 4; i++)
                        ret->bbox[i] = -1;
                return;
        }
        ret->bbox[0] = (int32_t)(cx0 * p->cell);
        ret->bbox[1] = (int32_t)(cy0 * p->cell);
        ret->bbox[2] = (int32_t)((cx1 + 1) * p->cell < p->width ? (cx1 + 1) * p->cell : p->width);
        ret->bbox[3] = (int32_t)((cy1 + 1) * p->cell < p->height ? (cy1 + 1) * p->cell : p->height);
}
