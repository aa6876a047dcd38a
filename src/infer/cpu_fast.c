/* SPDX-License-Identifier: MIT */
/*
 * Fast zcnet and motion grid for the CPU backend (cpu_fast.h). The slow,
 * obvious reference in reference.c is the oracle; this file may sum in another
 * order and fuse multiply-adds (it is built with -ffp-contract=fast, see
 * src/meson.build), within 1e-5 relative of the reference's scores.
 *
 * Convolution: activations are channels-last with a zero border of one pixel
 * ([H+2][W+2][C], C rounded up to a multiple of 16), so the 3x3 taps need no
 * bounds checks; weights are repacked per block of 16 output channels as
 * [ky][kx][ci][16]. The kernel keeps a tile of up to 4 output pixels x 16
 * output channels in registers and, per input value, broadcasts it against a
 * vector of 16 weights: each weight vector is loaded once per tile and each
 * input value once per output block, instead of the reference's re-reading
 * and re-writing the whole output plane for every tap. Vectors are GCC vector
 * extensions; the hot functions are cloned per CPU level (x86-64-v4 AVX-512,
 * v3 AVX2+FMA, baseline SSE2) and the loader picks the one the CPU runs.
 * Output rows are spread over the worker team, one fork-join per layer.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/workers.h"
#include "infer/cpu_fast.h"
#include "infer/reference.h"

#define OB   16 /* output channels per block (one vector) */
#define TILE 4  /* output pixels per register tile */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZCP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ZCP_CLONES
#endif

/* Vector arguments and returns stay inside each clone (the helpers are inlined into them). */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float zcp_v16f __attribute__((vector_size(OB * sizeof(float))));
typedef int32_t zcp_v16i __attribute__((vector_size(OB * sizeof(int32_t))));

struct fast_layer {
        uint32_t ci;         /* input channels as stored (the previous layer's padded count, or 3) */
        uint32_t op;         /* output channels as stored: out_ch rounded up to OB */
        uint32_t stride;
        uint32_t iw, ih, ow, oh;
        float *wpack;        /* [op/OB][3][3][ci][OB] */
        float *bias;         /* [op] */
        float *in;           /* [ih+2][iw+2][ci], zero border */
};

struct zcp_fast_net {
        const struct zcp_model *m;
        uint32_t layers, in_w, in_h;
        struct fast_layer l[ZCP_MODEL_MAX_LAYERS];
        float *out;          /* last layer's output [oh+2][ow+2][op] */
        float *pooled;       /* [last op] */
};

static float *falloc(size_t n)
{
        size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
        float *p = aligned_alloc(64, bytes ? bytes : 64);

        if (p)
                memset(p, 0, bytes ? bytes : 64);
        return p;
}

void zcp_fast_net_free(struct zcp_fast_net *net)
{
        if (!net)
                return;
        for (uint32_t i = 0; i < net->layers; i++) {
                free(net->l[i].wpack);
                free(net->l[i].bias);
                free(net->l[i].in);
        }
        free(net->out);
        free(net->pooled);
        free(net);
}

int zcp_fast_net_new(const struct zcp_model *m, uint32_t in_w, uint32_t in_h, struct zcp_fast_net **ret_net)
{
        uint32_t w[ZCP_MODEL_MAX_LAYERS], h[ZCP_MODEL_MAX_LAYERS];
        struct zcp_fast_net *net;
        uint32_t ci = 3, iw = in_w, ih = in_h;

        if (!m || m->conv_count == 0 || m->conv_count > ZCP_MODEL_MAX_LAYERS || in_w == 0 || in_h == 0)
                return -EINVAL;
        net = calloc(1, sizeof(*net));
        if (!net)
                return -ENOMEM;
        net->m = m;
        net->in_w = in_w;
        net->in_h = in_h;
        zcp_model_shapes(m, in_w, in_h, w, h);
        for (uint32_t i = 0; i < m->conv_count; i++) {
                const struct zcp_conv_layer *c = &m->conv[i];
                struct fast_layer *L = &net->l[i];

                net->layers = i + 1;
                *L = (struct fast_layer){
                        .ci = ci, .op = (c->out_ch + OB - 1) / OB * OB, .stride = c->stride,
                        .iw = iw, .ih = ih, .ow = w[i], .oh = h[i],
                };
                L->wpack = falloc((size_t)L->op * 9 * ci);
                L->bias = falloc(L->op);
                L->in = falloc((size_t)(ih + 2) * (iw + 2) * ci);
                if (!L->wpack || !L->bias || !L->in)
                        goto nomem;
                /* Padded channels keep zero weights and bias: they stay 0 after ReLU. */
                for (uint32_t o = 0; o < c->out_ch; o++) {
                        L->bias[o] = c->bias[o];
                        for (uint32_t k = 0; k < c->in_ch; k++)
                                for (uint32_t t = 0; t < 9; t++)
                                        L->wpack[(((size_t)(o / OB) * 9 + t) * ci + k) * OB + o % OB] =
                                                c->weight[((size_t)o * c->in_ch + k) * 9 + t];
                }
                ci = L->op;
                iw = w[i];
                ih = h[i];
        }
        net->out = falloc((size_t)(ih + 2) * (iw + 2) * ci);
        net->pooled = falloc(ci);
        if (!net->out || !net->pooled)
                goto nomem;
        *ret_net = net;
        return 0;
nomem:
        zcp_fast_net_free(net);
        return -ENOMEM;
}

/* ---- convolution ---- */

static inline zcp_v16f vload(const float *p)
{
        zcp_v16f v;

        memcpy(&v, p, sizeof(v));
        return v;
}

static inline void vstore(float *p, zcp_v16f v)
{
        memcpy(p, &v, sizeof(v));
}

/*
 * One tile: P output pixels (consecutive in x) x OB channels. in: the tile's
 * first tap (top-left, padded coordinates); px: floats between neighbouring
 * output pixels' inputs (stride * ci); row: floats per padded input row.
 */
#define CONV_TILE(P)                                                                                      \
        static inline __attribute__((always_inline)) void tile##P(const float *in, size_t px, size_t row, \
                                                                  uint32_t ci, const float *wb,           \
                                                                  zcp_v16f bias, float *out, size_t opx)  \
        {                                                                                                 \
                zcp_v16f acc[P];                                                                          \
                for (int p = 0; p < P; p++)                                                               \
                        acc[p] = bias;                                                                    \
                for (uint32_t t = 0; t < 9; t++) {                                                        \
                        const float *base = in + (t / 3) * row + (t % 3) * (size_t)ci;                    \
                        const float *wt = wb + (size_t)t * ci * OB;                                       \
                        for (uint32_t k = 0; k < ci; k++) {                                               \
                                const zcp_v16f wv = vload(wt + (size_t)k * OB);                           \
                                for (int p = 0; p < P; p++)                                               \
                                        acc[p] += wv * base[p * px + k];                                  \
                        }                                                                                 \
                }                                                                                         \
                for (int p = 0; p < P; p++) {                                                             \
                        /* ReLU as the reference's (acc > 0) ? acc : 0: NaN and -0 give +0 */             \
                        const zcp_v16i pos = acc[p] > 0.0f;                                               \
                        vstore(out + p * opx, (zcp_v16f)((zcp_v16i)acc[p] & pos));                        \
                }                                                                                         \
        }

CONV_TILE(4)
CONV_TILE(1)

/* Output rows [y0, y1) of layer L from L->in into dst ([oh+2][ow+2][op], interior). */
ZCP_CLONES static void conv_rows(const struct fast_layer *L, float *dst, uint32_t y0, uint32_t y1)
{
        const size_t row = (size_t)(L->iw + 2) * L->ci, px = (size_t)L->stride * L->ci;
        const size_t orow = (size_t)(L->ow + 2) * L->op;

        for (uint32_t oy = y0; oy < y1; oy++) {
                const float *in_row = L->in + (size_t)oy * L->stride * row;
                float *out_row = dst + (size_t)(oy + 1) * orow + L->op;

                for (uint32_t ob = 0; ob < L->op; ob += OB) {
                        const float *wb = L->wpack + (size_t)ob * 9 * L->ci;
                        const zcp_v16f bias = vload(L->bias + ob);
                        uint32_t ox = 0;

                        for (; ox + TILE <= L->ow; ox += TILE)
                                tile4(in_row + ox * px, px, row, L->ci, wb, bias, out_row + (size_t)ox * L->op + ob,
                                      L->op);
                        for (; ox < L->ow; ox++)
                                tile1(in_row + ox * px, px, row, L->ci, wb, bias, out_row + (size_t)ox * L->op + ob,
                                      L->op);
                }
        }
}
struct conv_job {
        const struct fast_layer *L;
        float *dst;
};

static void conv_share(void *arg, uint32_t i, uint32_t n)
{
        const struct conv_job *job = arg;
        const uint32_t oh = job->L->oh;

        conv_rows(job->L, job->dst, (uint32_t)((uint64_t)oh * i / n), (uint32_t)((uint64_t)oh * (i + 1) / n));
}

/* NCHW tensor into layer 0's padded channels-last input. */
static void load_input(struct fast_layer *L, const float *tensor)
{
        const size_t plane = (size_t)L->iw * L->ih;

        for (uint32_t y = 0; y < L->ih; y++) {
                float *d = L->in + ((size_t)(y + 1) * (L->iw + 2) + 1) * L->ci;
                for (uint32_t x = 0; x < L->iw; x++)
                        for (uint32_t c = 0; c < 3; c++)
                                d[(size_t)x * L->ci + c] = tensor[c * plane + (size_t)y * L->iw + x];
        }
}

/* w . v over n floats, in vector partial sums. */
static float dot(const float *w, const float *v, uint32_t n)
{
        zcp_v16f acc = { 0 };
        float s = 0.0f, lanes[OB];
        uint32_t j = 0;

        for (; j + OB <= n; j += OB)
                acc += vload(w + j) * vload(v + j);
        memcpy(lanes, &acc, sizeof(lanes));
        for (int k = 0; k < OB; k++)
                s += lanes[k];
        for (; j < n; j++)
                s += w[j] * v[j];
        return s;
}

void zcp_fast_zcnet(struct zcp_fast_net *net, struct zcp_workers *team, const float *tensor, float *ret_probs)
{
        const struct zcp_model *m = net->m;
        const uint32_t last = net->layers - 1, real_c = m->conv[last].out_ch;
        const struct fast_layer *L = &net->l[last];
        const size_t orow = (size_t)(L->ow + 2) * L->op;
        float max, sum;

        load_input(&net->l[0], tensor);
        for (uint32_t i = 0; i < net->layers; i++) {
                struct conv_job job = { &net->l[i], i == last ? net->out : net->l[i + 1].in };
                zcp_workers_run(team, conv_share, &job);
        }

        /* Pool: per channel, pixels in row-major order, as the reference. */
        for (uint32_t c = 0; c < real_c; c++)
                net->pooled[c] = 0.0f;
        for (uint32_t y = 0; y < L->oh; y++)
                for (uint32_t x = 0; x < L->ow; x++) {
                        const float *a = net->out + (size_t)(y + 1) * orow + (size_t)(x + 1) * L->op;
                        for (uint32_t c = 0; c < real_c; c++)
                                net->pooled[c] = net->pooled[c] + a[c];
                }
        for (uint32_t c = 0; c < real_c; c++)
                net->pooled[c] = net->pooled[c] / (float)((size_t)L->ow * L->oh);

        for (uint32_t k = 0; k < m->classes; k++)
                ret_probs[k] = m->fc_bias[k] + dot(m->fc_weight + (size_t)k * m->fc_in, net->pooled, m->fc_in);

        max = ret_probs[0];
        for (uint32_t k = 1; k < m->classes; k++)
                if (ret_probs[k] > max)
                        max = ret_probs[k];
        for (uint32_t k = 0; k < m->classes; k++)
                ret_probs[k] = expf(ret_probs[k] - max);
        sum = 0.0f;
        for (uint32_t k = 0; k < m->classes; k++)
                sum = sum + ret_probs[k];
        for (uint32_t k = 0; k < m->classes; k++)
                ret_probs[k] = ret_probs[k] / sum;
}

/* ---- motion grid ---- */

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
