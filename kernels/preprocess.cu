/* SPDX-License-Identifier: MIT */
/*
 * Fused preprocess (DESIGN.md §4 and §7; reference.c's header comment is the contract): an NV12
 * frame -> the model input tensor (NHWC for plans, or NCHW; pixels 0..1 or 0..255; mean/std;
 * stretched or letterboxed into zcp_pre_region with the rest padded as black) + the motion grid
 * of integer cell means.
 *
 * Pass 1 (pre_scan.cu) reads the frame once in coalesced 16-byte loads: every luma vector when
 * the grid is wanted (otherwise only the rows the resize samples), a chroma vector only when its
 * row is sampled; luma is summed per motion cell; the sampled luma and chroma rows are stashed in
 * device memory (at most 2 * in_h of each). Pass 2 (here, `finish`) resizes from the stash
 * (device memory, L2-resident) with the colour conversion and the normalisation, and turns the
 * cell sums into means (zeroing them for the next frame).
 *
 * Split pass 1 (tensor and grid, width % 16 == 0): the resize needs only the rows it samples,
 * the grid every luma row; pass 1 reads the sampled rows, and the other luma rows are read by a
 * second launch that zcp_k_pre_grid() puts where the caller wants it (beside the resize and the
 * network), so that in zero-copy the network starts before the whole frame has crossed PCIe.
 * Every byte is still read once. Direct (copy mode, the same geometries): the resize reads the
 * device frame's rows itself and the grid's scan runs beside it.
 *
 * The float expressions use __fmul_rn/__fadd_rn/__fsub_rn/__fdiv_rn so that they match
 * reference.c bit for bit whatever the contraction flags; the resize's source indices and
 * weights are computed on the host by the same code as reference.c's src_index(), a column or
 * row outside the letterbox region marked -1 (the pad value, (0 - mean) / std).
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "pre.cuh"

static __device__ __forceinline__ float clamp255(float v)
{
        return fminf(fmaxf(v, 0.0f), 255.0f);
}

/* reference.c nv12_rgb(), operation for operation. */
static __device__ __forceinline__ void nv12_rgb(uint32_t Y, uint32_t U, uint32_t V, float rgb[3])
{
        const float c = (float)((int)Y - 16), d = (float)((int)U - 128), e = (float)((int)V - 128);
        const float yc = __fmul_rn(1.164f, c);

        rgb[0] = clamp255(__fadd_rn(yc, __fmul_rn(1.596f, e)));
        rgb[1] = clamp255(__fsub_rn(__fsub_rn(yc, __fmul_rn(0.392f, d)), __fmul_rn(0.813f, e)));
        rgb[2] = clamp255(__fadd_rn(yc, __fmul_rn(2.017f, d)));
}

static __device__ __forceinline__ void pixel(const uint8_t *yrow, const uint8_t *uvrow, int x, int cu, float rgb[3])
{
        nv12_rgb(yrow[x], uvrow[cu], uvrow[cu + 1], rgb);
}

static __global__ void __launch_bounds__(FIN_THREADS) finish(const fin_args a)
{
        kpdl_wait();
        if (blockIdx.x < a.resize_blocks) {
                const uint32_t i = blockIdx.x * FIN_THREADS + threadIdx.x;
                if (i >= a.in_w * a.in_h)
                        return;
                const uint32_t oy = i / a.in_w, ox = i - oy * a.in_w;
                const int4 xt = __ldg(a.xt + ox), yt = __ldg(a.yt + oy);
                const size_t plane = (size_t)a.in_w * a.in_h;
                float out[3];

                if (xt.x < 0 || yt.x < 0) {
#pragma unroll
                        for (int k = 0; k < 3; k++)
                                out[k] = __fdiv_rn(__fsub_rn(0.0f, a.mean[k]), a.std[k]);
                } else {
                        const float2 xl = __ldg(a.xl + ox), yl = __ldg(a.yl + oy);
                        const uint8_t *y0 = a.stash_y + (size_t)yt.x * a.W, *y1 = a.stash_y + (size_t)yt.y * a.W;
                        const uint8_t *c0 = a.stash_uv + (size_t)yt.z * a.W, *c1 = a.stash_uv + (size_t)yt.w * a.W;
                        float p00[3], p01[3], p10[3], p11[3];

                        pixel(y0, c0, xt.x, xt.z, p00);
                        pixel(y0, c0, xt.y, xt.w, p01);
                        pixel(y1, c1, xt.x, xt.z, p10);
                        pixel(y1, c1, xt.y, xt.w, p11);
#pragma unroll
                        for (int k = 0; k < 3; k++) {
                                const float top = __fadd_rn(__fmul_rn(xl.x, p00[k]), __fmul_rn(xl.y, p01[k]));
                                const float bot = __fadd_rn(__fmul_rn(xl.x, p10[k]), __fmul_rn(xl.y, p11[k]));
                                float v = __fadd_rn(__fmul_rn(yl.x, top), __fmul_rn(yl.y, bot));
                                if (!a.byte_pixels)
                                        v = __fdiv_rn(v, 255.0f);
                                out[k] = __fdiv_rn(__fsub_rn(v, a.mean[k]), a.std[k]);
                        }
                }
                if (a.nhwc) {
                        a.tensor[(size_t)i * 3] = out[0];
                        a.tensor[(size_t)i * 3 + 1] = out[1];
                        a.tensor[(size_t)i * 3 + 2] = out[2];
                } else {
                        a.tensor[i] = out[0];
                        a.tensor[plane + i] = out[1];
                        a.tensor[2 * plane + i] = out[2];
                }
                return;
        }

        const uint32_t j = (blockIdx.x - a.resize_blocks) * FIN_THREADS + threadIdx.x;
        if (j >= a.grid_w * a.grid_h)
                return;
        const uint32_t gy = j / a.grid_w, gx = j - gy * a.grid_w;
        const uint32_t x0 = gx * a.cell, y0 = gy * a.cell;
        const uint32_t cw = (x0 + a.cell < a.W ? x0 + a.cell : a.W) - x0;
        const uint32_t ch = (y0 + a.cell < a.H ? y0 + a.cell : a.H) - y0;

        a.grid[j] = a.sums[j] / (cw * ch);
        a.sums[j] = 0;
}

/* reference.c src_index(), operation for operation (host, compiled without contraction). */
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

static cudaError_t pre_alloc(struct zcp_k_pre *k, void **ret, size_t bytes, const char *what, char *errbuf,
                             size_t errlen)
{
        cudaError_t e = kmalloc(ret, bytes, what, errbuf, errlen);

        if (e == cudaSuccess)
                k->dev_bytes += bytes;
        return e;
}

void zcp_k_pre_free(struct zcp_k_pre *k)
{
        if (!k)
                return;
        cudaFree(k->yslot);
        cudaFree(k->uvslot);
        cudaFree(k->stash_y);
        cudaFree(k->stash_uv);
        cudaFree(k->xt);
        cudaFree(k->xl);
        cudaFree(k->yt);
        cudaFree(k->ytf);
        cudaFree(k->yl);
        cudaFree(k->sums);
        for (int l = 0; l < 3; l++) {
                cudaFree(k->rows[l]);
                free(k->hrows[l]);
        }
        cudaFree((void *)k->frame_slot);
        free(k);
}

size_t zcp_k_pre_device_bytes(const struct zcp_k_pre *k)
{
        return k ? k->dev_bytes : 0;
}

/*
 * The split's row lists from the stash tables (slot >= 0: sampled): list 0
 * the sampled luma rows then the sampled chroma rows (H + c), list 1 the
 * other luma rows.
 */
static cudaError_t plan_split(struct zcp_k_pre *k, const int32_t *yslot, const int32_t *uvslot, char *errbuf,
                              size_t errlen)
{
        const uint32_t H = k->p.height;
        cudaError_t e;

        for (int l = 0; l < 2; l++) {
                k->hrows[l] = (int32_t *)malloc(sizeof(int32_t) * (H + H / 2 + 1));
                if (!k->hrows[l]) {
                        kerr(errbuf, errlen, "out of host memory planning the scan");
                        return cudaErrorMemoryAllocation;
                }
                k->nrows[l] = 0;
        }
        for (uint32_t r = 0; r < H; r++) {
                const int l = yslot[r] >= 0 ? 0 : 1;
                k->hrows[l][k->nrows[l]++] = (int32_t)r;
        }
        k->nluma[0] = k->nrows[0];
        k->nluma[1] = k->nrows[1];
        for (uint32_t c = 0; c < H / 2; c++)
                if (uvslot[c] >= 0)
                        k->hrows[0][k->nrows[0]++] = (int32_t)(H + c);
        for (int l = 0; l < 2; l++) {
                const size_t bytes = sizeof(int32_t) * (k->nrows[l] ? k->nrows[l] : 1);
                if ((e = pre_alloc(k, (void **)&k->rows[l], bytes, "scan row list", errbuf, errlen)) ||
                    (e = kupload(k->rows[l], k->hrows[l], sizeof(int32_t) * k->nrows[l], "the scan row list", errbuf,
                                 errlen)))
                        return e;
        }
        if ((e = pre_alloc(k, (void **)&k->frame_slot, sizeof(*k->frame_slot), "frame pointer slot", errbuf,
                           errlen)) != cudaSuccess)
                return e;
        k->split = true;
        return cudaSuccess;
}

/*
 * Direct (device-resident frames, zcp_k_pre_tensor_direct): the resize's
 * rows in the frame (ytf: y0, y1 and their chroma rows) and list 2, every
 * luma row, for scan_luma.
 */
static cudaError_t plan_direct(struct zcp_k_pre *k, const int4 *ytf, char *errbuf, size_t errlen)
{
        const uint32_t H = k->p.height;
        cudaError_t e;

        k->hrows[2] = (int32_t *)malloc(sizeof(int32_t) * H);
        if (!k->hrows[2]) {
                kerr(errbuf, errlen, "out of host memory planning the scan");
                return cudaErrorMemoryAllocation;
        }
        for (uint32_t r = 0; r < H; r++)
                k->hrows[2][r] = (int32_t)r;
        k->nrows[2] = k->nluma[2] = H;
        if ((e = pre_alloc(k, (void **)&k->rows[2], sizeof(int32_t) * H, "scan row list", errbuf, errlen)) ||
            (e = kupload(k->rows[2], k->hrows[2], sizeof(int32_t) * H, "the scan row list", errbuf, errlen)) ||
            (e = pre_alloc(k, (void **)&k->ytf, sizeof(int4) * k->p.in_h, "resize frame row table", errbuf,
                           errlen)) ||
            (e = kupload(k->ytf, ytf, sizeof(int4) * k->p.in_h, "the resize tables", errbuf, errlen)))
                return e;
        k->direct = true;
        return cudaSuccess;
}

/* Stash tables and resize indices (want_tensor). */
static cudaError_t plan_tensor(struct zcp_k_pre *k, char *errbuf, size_t errlen)
{
        const struct zcp_preprocess_params *p = &k->p;
        int32_t *yslot = NULL, *uvslot = NULL;
        int4 *xt = NULL, *yt = NULL, *ytf = NULL;
        float2 *xl = NULL, *yl = NULL;
        uint32_t rx, ry, rw, rh;
        float sx, sy;
        cudaError_t e = cudaErrorMemoryAllocation;

        /* reference.c preprocess_tensor(): the frame fills the region, scaled per axis */
        zcp_pre_region(p, &rx, &ry, &rw, &rh);
        sx = (float)p->width / (float)rw;
        sy = (float)p->height / (float)rh;
        yslot = (int32_t *)malloc(sizeof(int32_t) * p->height);
        uvslot = (int32_t *)malloc(sizeof(int32_t) * (p->height / 2));
        xt = (int4 *)malloc(sizeof(int4) * p->in_w);
        xl = (float2 *)malloc(sizeof(float2) * p->in_w);
        yt = (int4 *)malloc(sizeof(int4) * p->in_h);
        ytf = (int4 *)malloc(sizeof(int4) * p->in_h);
        yl = (float2 *)malloc(sizeof(float2) * p->in_h);
        if (!yslot || !uvslot || !xt || !xl || !yt || !ytf || !yl) {
                kerr(errbuf, errlen, "out of host memory planning the resize");
                goto out;
        }
        for (uint32_t i = 0; i < p->height; i++)
                yslot[i] = -1;
        for (uint32_t i = 0; i < p->height / 2; i++)
                uvslot[i] = -1;
        for (uint32_t oy = ry; oy < ry + rh; oy++) {
                uint32_t y0, y1;
                float l0, l1;
                src_index(oy - ry, sy, p->height, &y0, &y1, &l0, &l1);
                yslot[y0] = yslot[y1] = 0;
                uvslot[y0 / 2] = uvslot[y1 / 2] = 0;
        }
        k->ny = k->nuv = 0;
        for (uint32_t i = 0; i < p->height; i++)
                if (yslot[i] == 0)
                        yslot[i] = (int32_t)k->ny++;
        for (uint32_t i = 0; i < p->height / 2; i++)
                if (uvslot[i] == 0)
                        uvslot[i] = (int32_t)k->nuv++;
        for (uint32_t oy = 0; oy < p->in_h; oy++) {
                uint32_t y0, y1;
                float l0, l1;
                if (oy < ry || oy >= ry + rh) {   /* padding: the pad value */
                        yt[oy] = ytf[oy] = make_int4(-1, -1, -1, -1);
                        yl[oy] = make_float2(0.0f, 0.0f);
                        continue;
                }
                src_index(oy - ry, sy, p->height, &y0, &y1, &l0, &l1);
                yt[oy] = make_int4(yslot[y0], yslot[y1], uvslot[y0 / 2], uvslot[y1 / 2]);
                ytf[oy] = make_int4((int)y0, (int)y1, (int)(y0 / 2), (int)(y1 / 2));
                yl[oy] = make_float2(l0, l1);
        }
        for (uint32_t ox = 0; ox < p->in_w; ox++) {
                uint32_t x0, x1;
                float l0, l1;
                if (ox < rx || ox >= rx + rw) {
                        xt[ox] = make_int4(-1, -1, -1, -1);
                        xl[ox] = make_float2(0.0f, 0.0f);
                        continue;
                }
                src_index(ox - rx, sx, p->width, &x0, &x1, &l0, &l1);
                xt[ox] = make_int4((int)x0, (int)x1, (int)(2 * (x0 / 2)), (int)(2 * (x1 / 2)));
                xl[ox] = make_float2(l0, l1);
        }
        if (k->want_grid && k->aligned && ((e = plan_split(k, yslot, uvslot, errbuf, errlen)) != cudaSuccess ||
                                           (e = plan_direct(k, ytf, errbuf, errlen)) != cudaSuccess))
                goto out;
        if ((e = pre_alloc(k, (void **)&k->yslot, sizeof(int32_t) * p->height, "luma row table", errbuf, errlen)) ||
            (e = pre_alloc(k, (void **)&k->uvslot, sizeof(int32_t) * (p->height / 2), "chroma row table", errbuf,
                           errlen)) ||
            (e = pre_alloc(k, (void **)&k->stash_y, (size_t)k->ny * p->width, "luma row stash", errbuf, errlen)) ||
            (e = pre_alloc(k, (void **)&k->stash_uv, (size_t)k->nuv * p->width, "chroma row stash", errbuf,
                           errlen)) ||
            (e = pre_alloc(k, (void **)&k->xt, sizeof(int4) * p->in_w, "resize column table", errbuf, errlen)) ||
            (e = pre_alloc(k, (void **)&k->xl, sizeof(float2) * p->in_w, "resize column weights", errbuf,
                           errlen)) ||
            (e = pre_alloc(k, (void **)&k->yt, sizeof(int4) * p->in_h, "resize row table", errbuf, errlen)) ||
            (e = pre_alloc(k, (void **)&k->yl, sizeof(float2) * p->in_h, "resize row weights", errbuf, errlen)))
                goto out;
        if ((e = kupload(k->yslot, yslot, sizeof(int32_t) * p->height, "the luma row table", errbuf, errlen)) ||
            (e = kupload(k->uvslot, uvslot, sizeof(int32_t) * (p->height / 2), "the chroma row table", errbuf,
                         errlen)) ||
            (e = kupload(k->xt, xt, sizeof(int4) * p->in_w, "the resize tables", errbuf, errlen)) ||
            (e = kupload(k->xl, xl, sizeof(float2) * p->in_w, "the resize tables", errbuf, errlen)) ||
            (e = kupload(k->yt, yt, sizeof(int4) * p->in_h, "the resize tables", errbuf, errlen)) ||
            (e = kupload(k->yl, yl, sizeof(float2) * p->in_h, "the resize tables", errbuf, errlen)))
                goto out;
        e = cudaSuccess;
out:
        free(yslot);
        free(uvslot);
        free(xt);
        free(xl);
        free(yt);
        free(ytf);
        free(yl);
        return e;
}

int zcp_k_pre_new(const struct zcp_preprocess_params *p, bool want_tensor, bool want_grid,
                  struct zcp_k_pre **ret_pre, char *errbuf, size_t errlen)
{
        struct zcp_k_pre *k;
        cudaError_t e;
        int dev = 0;

        if (p->width < 16 || p->height < 2 || p->width % 2 || p->height % 2 || (!want_tensor && !want_grid) ||
            (want_tensor && (p->in_w == 0 || p->in_h == 0)) || (want_grid && p->cell == 0) ||
            zcp_nv12_size(p->width, p->height) > 0xffffff00u) {
                kerr(errbuf, errlen, "preprocess: unsupported geometry %ux%u (input %ux%u, cell %u)", p->width,
                     p->height, p->in_w, p->in_h, p->cell);
                return cudaErrorInvalidValue;
        }
        k = (struct zcp_k_pre *)calloc(1, sizeof(*k));
        if (!k) {
                kerr(errbuf, errlen, "out of host memory");
                return cudaErrorMemoryAllocation;
        }
        k->p = *p;
        k->want_tensor = want_tensor;
        k->want_grid = want_grid;
        k->aligned = p->width % 16 == 0;
        k->wh = p->width * p->height;
        k->total = (uint32_t)zcp_nv12_size(p->width, p->height);
        k->scan_bytes = want_tensor ? k->total : k->wh;
        k->grid_w = want_grid ? zcp_grid_w(p->width, p->cell) : 0;
        k->grid_h = want_grid ? zcp_grid_h(p->height, p->cell) : 0;

        if (want_tensor && (e = plan_tensor(k, errbuf, errlen)) != cudaSuccess)
                goto fail;
        if (want_grid) {
                const size_t bytes = sizeof(uint32_t) * k->grid_w * k->grid_h;
                if ((e = pre_alloc(k, (void **)&k->sums, bytes, "motion cell sums", errbuf, errlen)) != cudaSuccess)
                        goto fail;
                if ((e = cudaMemset(k->sums, 0, bytes)) != cudaSuccess) {
                        kerr(errbuf, errlen, "clearing the cell sums: %s", cudaGetErrorString(e));
                        goto fail;
                }
        }
        k->pdl = kpdl_enabled();
        if (k->split) {
                /*
                 * A block's cell window must fit the default shared memory at the
                 * most vectors per block (the widest window); else the unsplit scan.
                 */
                for (int l = 0; l < 2; l++) {
                        kpre_plan_list(k, l, SCAN_THREADS * SCAN_NV_MAX);
                        if (sizeof(uint32_t) * k->rcells[l] * k->grid_w > 48 * 1024)
                                k->split = false;
                }
        }
        if (k->direct) {
                /* The same window rule for list 2 (its blocks always take SCAN_NV_MAX vectors a thread). */
                kpre_plan_list(k, 2, SCAN_THREADS * SCAN_NV_MAX);
                if (sizeof(uint32_t) * k->rcells[2] * k->grid_w > 48 * 1024)
                        k->direct = false;
        }
        if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&k->sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) {
                kerr(errbuf, errlen, "preprocess: reading the device's attributes: %s", cudaGetErrorString(e));
                goto fail;
        }
        /* The most bytes per block that still spreads the frame over two blocks per multiprocessor. */
        for (uint32_t nv = SCAN_NV_MAX; nv >= 1; nv /= 2) {
                if ((e = (cudaError_t)zcp_k_pre_set_vectors(k, nv)) != cudaSuccess) {
                        kerr(errbuf, errlen, "preprocess: planning %u vectors per thread: %s", nv,
                             cudaGetErrorString(e));
                        goto fail;
                }
                if ((k->split ? k->rblocks[0] : k->scan_blocks) >= 2u * (uint32_t)k->sms)
                        break;
        }
        k->resize_blocks = want_tensor ? (p->in_w * p->in_h + FIN_THREADS - 1) / FIN_THREADS : 0;
        k->grid_blocks = want_grid ? (k->grid_w * k->grid_h + FIN_THREADS - 1) / FIN_THREADS : 0;
        *ret_pre = k;
        return cudaSuccess;
fail:
        zcp_k_pre_free(k);
        return e;
}

/*
 * Pass 2: the resize's blocks (resize), then the grid's (grid), in one
 * launch. frame non-NULL: the resize reads the rows in that (device) frame
 * instead of the stash (direct).
 */
static void finish_launch(const struct zcp_k_pre *k, float *tensor_dev, uint32_t *grid_dev, bool resize, bool grid,
                          const uint8_t *frame, cudaStream_t st)
{
        fin_args f;

        memset(&f, 0, sizeof(f));
        f.stash_y = frame ? frame : k->stash_y;
        f.stash_uv = frame ? frame + k->wh : k->stash_uv;
        f.xt = k->xt;
        f.yt = frame ? k->ytf : k->yt;
        f.xl = k->xl;
        f.yl = k->yl;
        f.W = k->p.width;
        f.H = k->p.height;
        f.in_w = k->p.in_w;
        f.in_h = k->p.in_h;
        for (int c = 0; c < 3; c++) {
                f.mean[c] = k->p.mean[c];
                f.std[c] = k->p.std[c];
        }
        f.nhwc = k->p.nhwc;
        f.byte_pixels = k->p.byte_pixels;
        f.tensor = tensor_dev;
        f.resize_blocks = resize ? k->resize_blocks : 0;
        f.sums = k->sums;
        f.grid = grid_dev;
        f.grid_w = k->grid_w;
        f.grid_h = k->grid_h;
        f.cell = k->p.cell;
        /*
         * Alone after the scan (zcp_k_pre_tensor), the resize waits for it on the device (kpdl_wait); direct, it
         * follows no kernel of its own (a copy, the start of a graph).
         */
        klaunch(k->pdl && resize && !grid && !frame, finish, f.resize_blocks + (grid ? k->grid_blocks : 0),
                FIN_THREADS, st, f);
}

/* The split's other luma rows (scan_rest), where the plan splits and has any. */
static cudaError_t rest_launch(const struct zcp_k_pre *k, cudaStream_t st)
{
        if (!k->split || k->rblocks[1] == 0)
                return cudaSuccess;
        kpre_list_launch(k, 1, NULL, st);
        return cudaGetLastError();
}

int zcp_k_pre_scan(const struct zcp_k_pre *k, const uint8_t *nv12, void *stream)
{
        if (!k || !nv12 || ((uintptr_t)nv12 & 15))
                return cudaErrorInvalidValue;
        if (k->split)
                kpre_list_launch(k, 0, nv12, (cudaStream_t)stream);
        else
                kpre_scan_launch(k, nv12, (cudaStream_t)stream);
        return cudaGetLastError();
}

int zcp_k_pre_tensor(const struct zcp_k_pre *k, float *tensor_dev, void *stream)
{
        if (!k || (k->want_tensor && !tensor_dev))
                return cudaErrorInvalidValue;
        if (!k->want_tensor)
                return cudaSuccess;
        finish_launch(k, tensor_dev, NULL, true, false, NULL, (cudaStream_t)stream);
        return cudaGetLastError();
}

int zcp_k_pre_grid(const struct zcp_k_pre *k, uint32_t *grid_dev, void *stream)
{
        cudaError_t e;

        if (!k || (k->want_grid && !grid_dev))
                return cudaErrorInvalidValue;
        if (!k->want_grid)
                return cudaSuccess;
        if ((e = rest_launch(k, (cudaStream_t)stream)) != cudaSuccess)
                return e;
        finish_launch(k, NULL, grid_dev, false, true, NULL, (cudaStream_t)stream);
        return cudaGetLastError();
}

bool zcp_k_pre_direct(const struct zcp_k_pre *k)
{
        return k && k->direct;
}

bool zcp_k_pre_split(const struct zcp_k_pre *k)
{
        return k && k->split;
}

int zcp_k_pre_tensor_direct(const struct zcp_k_pre *k, const uint8_t *nv12, float *tensor_dev, void *stream)
{
        if (!k || !k->direct || !nv12 || ((uintptr_t)nv12 & 15) || !tensor_dev)
                return cudaErrorInvalidValue;
        finish_launch(k, tensor_dev, NULL, true, false, nv12, (cudaStream_t)stream);
        return cudaGetLastError();
}

int zcp_k_pre_grid_direct(const struct zcp_k_pre *k, const uint8_t *nv12, uint32_t *grid_dev, void *stream)
{
        if (!k || !k->direct || !nv12 || ((uintptr_t)nv12 & 15) || !grid_dev)
                return cudaErrorInvalidValue;
        kpre_list_launch(k, 2, nv12, (cudaStream_t)stream);
        finish_launch(k, NULL, grid_dev, false, true, NULL, (cudaStream_t)stream);
        return cudaGetLastError();
}

int zcp_k_preprocess(const struct zcp_k_pre *k, const uint8_t *nv12, float *tensor_dev, uint32_t *grid_dev,
                     void *stream)
{
        cudaStream_t st = (cudaStream_t)stream;
        cudaError_t e;

        if (!k || !nv12 || ((uintptr_t)nv12 & 15) || (k->want_tensor && !tensor_dev) || (k->want_grid && !grid_dev))
                return cudaErrorInvalidValue;
        if ((e = (cudaError_t)zcp_k_pre_scan(k, nv12, st)) != cudaSuccess)
                return e;
        if ((e = rest_launch(k, st)) != cudaSuccess)
                return e;
        /* One pass-2 launch for both outputs. */
        finish_launch(k, tensor_dev, grid_dev, k->want_tensor, k->want_grid, NULL, st);
        return cudaGetLastError();
}
