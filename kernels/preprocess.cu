/* SPDX-License-Identifier: MIT */
/*
 * Fused preprocess (DESIGN.md §4, reference.c's header comment is the contract):
 * NV12 frame -> float32 NCHW tensor + motion grid of integer cell means.
 *
 * Pass 1, scan: reads the frame once, in coalesced 16-byte loads, where the
 * GPU finds it (mapped host memory in zero-copy mode, device memory in copy
 * mode). Every luma vector is read when the grid is wanted (otherwise only
 * the rows the resize samples); a chroma vector only when its row is sampled.
 * Luma bytes are summed per motion cell in shared memory, then added to the
 * global cell sums with one atomic per touched cell. The sampled luma and
 * chroma rows are stashed in device memory (at most 2*in_h of each).
 * Pass 2, finish: the bilinear resize + colour conversion + normalisation
 * reads the stash (device memory, L2-resident), and the cell sums become
 * means (and are zeroed for the next frame).
 *
 * Split pass 1 (tensor and grid, width % 16 == 0): the resize needs only
 * the rows it samples, the grid every luma row. Pass 1 then reads the
 * sampled luma and chroma rows (scan_rows, over a row list; their luma is
 * summed into the cells as it passes), and the unsampled luma rows are read
 * by a second launch (scan_rest) that zcp_k_pre_grid() puts where the
 * caller wants it: beside the resize and the network, so that in zero-copy
 * the network starts after about half the frame has crossed PCIe instead of
 * all of it (1080p: 1.5 of 2.7 MB). Every byte is still read once.
 *
 * The frame pointer is pass 1's parameter only (pass 1 leaves it in device
 * memory for scan_rest, so one graph node carries it): zcp_k_pre_set_frame()
 * changes it in an instantiated graph (frames that move between capture
 * buffers) by copying the captured arguments and replacing it.
 *
 * Two scan variants: width % 16 == 0 (every vector lies in one row of one
 * plane: 16-byte stash stores, one division per vector) and any even width
 * (vectors straddle rows and planes: per-byte bookkeeping; correctness
 * first, these geometries are rare).
 *
 * The float expressions use __fmul_rn/__fadd_rn/__fsub_rn/__fdiv_rn so that
 * they match reference.c bit for bit whatever the contraction flags; the
 * resize's source indices and weights are computed on the host by the same
 * code as reference.c's src_index().
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "kcommon.cuh"

#define SCAN_THREADS 256
#define SCAN_NV_MAX  4                               /* vectors in flight per thread: 1, 2 or 4 */
#define FIN_THREADS  256

struct zcp_k_pre {
        struct zcp_preprocess_params p;
        bool want_tensor, want_grid, aligned;
        uint32_t grid_w, grid_h, wh, total, scan_bytes;
        uint32_t ny, nuv;                    /* stashed luma / chroma rows */
        int32_t *yslot, *uvslot;             /* [height], [height/2]: stash row or -1 */
        uint8_t *stash_y, *stash_uv;         /* [ny][width], [nuv][width] */
        int4 *xt;                            /* [in_w]: x0, x1, 2*(x0/2), 2*(x1/2) */
        float2 *xl;                          /* [in_w]: lx0, lx1 */
        int4 *yt;                            /* [in_h]: stash rows of y0, y1, y0/2, y1/2 */
        int4 *ytf;                           /* [in_h]: frame rows of the same (direct) */
        float2 *yl;                          /* [in_h]: ly0, ly1 */
        uint32_t *sums;                      /* [grid_h][grid_w], zero between frames */
        uint32_t nv;                         /* vectors per thread (blocks of 4, 8 or 16 KiB) */
        uint32_t scan_blocks, y_blocks, nv_y, nv_end, cell_rows;
        size_t scan_smem;
        int sms;
        uint32_t resize_blocks, grid_blocks;
        /*
         * Split pass 1 (want_tensor, want_grid, aligned): list 0 the sampled rows, list 1 the other luma rows.
         * Direct (the same, device-resident frames): list 2 every luma row.
         */
        bool split, direct;
        int32_t *rows[3];                    /* device lists */
        int32_t *hrows[3];                   /* host copies (planning) */
        uint32_t nrows[3], nluma[3];         /* entries; luma entries (the first ones) */
        uint32_t rblocks[3], rcells[3];      /* per list at nv (list 2: SCAN_NV_MAX): blocks, cell rows of a
                                                block's window */
        const uint8_t **frame_slot;          /* scan_rows -> scan_rest */
        bool pdl;                            /* the tensor's pass 2 launched dependent (kpdl_enabled) */
        size_t dev_bytes;
};

struct scan_args {
        const uint8_t *frame;
        uint32_t W, wh, scan_bytes;
        uint32_t cell, grid_w, grid_h, cell_rows;
        uint32_t nv_y, nv_end, y_blocks;
        int want_grid;
        const int32_t *yslot, *uvslot;       /* NULL without tensor */
        uint8_t *stash_y, *stash_uv;
        uint32_t *sums;
};

struct fin_args {
        const uint8_t *stash_y, *stash_uv;
        const int4 *xt, *yt;
        const float2 *xl, *yl;
        uint32_t W, in_w, in_h;
        float mean[3], std[3];
        float *tensor;
        uint32_t resize_blocks;
        uint32_t *sums, *grid;
        uint32_t grid_w, grid_h, cell, H;
};

size_t zcp_k_frame_bytes_padded(uint32_t width, uint32_t height)
{
        return (zcp_nv12_size(width, height) + 15) & ~(size_t)15;
}

static __device__ __forceinline__ uint32_t byte_of(const uint4 &d, int i)
{
        const uint32_t w = (i < 4) ? d.x : (i < 8) ? d.y : (i < 12) ? d.z : d.w;
        return (w >> (8 * (i & 3))) & 0xffu;
}

static __device__ __forceinline__ uint32_t sum16(const uint4 &d)
{
        const uint32_t ones = 0x01010101u;
        return __dp4a(d.x, ones, __dp4a(d.y, ones, __dp4a(d.z, ones, __dp4a(d.w, ones, 0u))));
}

static __device__ __forceinline__ void zero_cells(uint32_t *s, uint32_t n)
{
        for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
                s[i] = 0;
        __syncthreads();
}

/* Adds the block's shared cell sums (cell rows cr0..) to the global sums. */
template <typename A>
static __device__ __forceinline__ void flush_cells(const A &a, const uint32_t *s, uint32_t cr0)
{
        const uint32_t n = a.cell_rows * a.grid_w;

        __syncthreads();
        for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
                const uint32_t v = s[i];
                if (v) {
                        const uint32_t gy = cr0 + i / a.grid_w;
                        atomicAdd(&a.sums[gy * a.grid_w + i % a.grid_w], v);
                }
        }
}

/* Adds the 16 luma bytes of one vector (row, col..col+15 of one row) to the shared cells. */
template <typename A>
static __device__ __forceinline__ void add_cells(const A &a, uint32_t *s, uint32_t cr0, uint32_t row, uint32_t col,
                                                 const uint4 &d)
{
        uint32_t *sr = s + (row / a.cell - cr0) * a.grid_w;
        uint32_t cx = col / a.cell, rem = col - cx * a.cell, acc = 0;

        if (rem + 16 <= a.cell) {
                atomicAdd(sr + cx, sum16(d));
                return;
        }
#pragma unroll
        for (int i = 0; i < 16; i++) {
                acc += byte_of(d, i);
                if (++rem == a.cell) {
                        atomicAdd(sr + cx, acc);
                        acc = 0;
                        rem = 0;
                        cx++;
                }
        }
        if (acc)
                atomicAdd(sr + cx, acc);
}

/* width % 16 == 0: blocks [0, y_blocks) scan luma, the others the sampled chroma rows. */
template <int SCAN_NV>
static __global__ void __launch_bounds__(SCAN_THREADS) scan_aligned(const scan_args a)
{
        constexpr uint32_t SCAN_VPB = SCAN_THREADS * SCAN_NV;
        extern __shared__ uint32_t s_cells[];
        const uint4 *f = (const uint4 *)a.frame;
        uint4 d[SCAN_NV];
        uint32_t row[SCAN_NV], col[SCAN_NV];
        int32_t slot[SCAN_NV];
        bool on[SCAN_NV];

        if (blockIdx.x < a.y_blocks) {
                const uint32_t vb = blockIdx.x * SCAN_VPB;
                const uint32_t cr0 = (vb * 16 / a.W) / a.cell;

#pragma unroll
                for (int k = 0; k < SCAN_NV; k++) {
                        const uint32_t v = vb + k * SCAN_THREADS + threadIdx.x;
                        on[k] = v < a.nv_y;
                        row[k] = on[k] ? v * 16 / a.W : 0;
                        col[k] = v * 16 - row[k] * a.W;
                        slot[k] = -1;
                }
                if (a.want_grid) {
                        /* Every luma vector is wanted: loads first, stash lookups behind them. */
#pragma unroll
                        for (int k = 0; k < SCAN_NV; k++)
                                if (on[k])
                                        d[k] = __ldg(f + vb + k * SCAN_THREADS + threadIdx.x);
                        if (a.yslot) {
#pragma unroll
                                for (int k = 0; k < SCAN_NV; k++)
                                        if (on[k])
                                                slot[k] = __ldg(a.yslot + row[k]);
                        }
                        zero_cells(s_cells, a.cell_rows * a.grid_w);
#pragma unroll
                        for (int k = 0; k < SCAN_NV; k++)
                                if (on[k])
                                        add_cells(a, s_cells, cr0, row[k], col[k], d[k]);
                } else {
#pragma unroll
                        for (int k = 0; k < SCAN_NV; k++)
                                if (on[k]) {
                                        slot[k] = __ldg(a.yslot + row[k]);
                                        on[k] = slot[k] >= 0;
                                }
#pragma unroll
                        for (int k = 0; k < SCAN_NV; k++)
                                if (on[k])
                                        d[k] = __ldg(f + vb + k * SCAN_THREADS + threadIdx.x);
                }
#pragma unroll
                for (int k = 0; k < SCAN_NV; k++)
                        if (on[k] && slot[k] >= 0)
                                *(uint4 *)(a.stash_y + (size_t)slot[k] * a.W + col[k]) = d[k];
                if (a.want_grid)
                        flush_cells(a, s_cells, cr0);
                return;
        }

        /* Chroma: only the sampled rows are read. */
        const uint32_t vb = (blockIdx.x - a.y_blocks) * SCAN_VPB + a.nv_y;
#pragma unroll
        for (int k = 0; k < SCAN_NV; k++) {
                const uint32_t v = vb + k * SCAN_THREADS + threadIdx.x;
                on[k] = v < a.nv_end;
                slot[k] = -1;
                if (on[k]) {
                        const uint32_t o = v * 16 - a.wh;
                        row[k] = o / a.W;
                        col[k] = o - row[k] * a.W;
                        slot[k] = __ldg(a.uvslot + row[k]);
                        on[k] = slot[k] >= 0;
                }
        }
#pragma unroll
        for (int k = 0; k < SCAN_NV; k++)
                if (on[k])
                        d[k] = __ldg(f + vb + k * SCAN_THREADS + threadIdx.x);
#pragma unroll
        for (int k = 0; k < SCAN_NV; k++)
                if (on[k])
                        *(uint4 *)(a.stash_uv + (size_t)slot[k] * a.W + col[k]) = d[k];
}

/* Whether the frame byte at `off` is needed (luma for the grid or a sampled row, sampled chroma). */
static __device__ __forceinline__ bool byte_needed(const scan_args &a, uint32_t off)
{
        if (off < a.wh)
                return a.want_grid || (a.yslot && a.yslot[off / a.W] >= 0);
        return a.uvslot && a.uvslot[(off - a.wh) / a.W] >= 0;
}

/* Any even width: flat 16-byte vectors over the frame, per-byte bookkeeping. */
template <int SCAN_NV>
static __global__ void __launch_bounds__(SCAN_THREADS) scan_generic(const scan_args a)
{
        constexpr uint32_t SCAN_VPB = SCAN_THREADS * SCAN_NV;
        extern __shared__ uint32_t s_cells[];
        const uint4 *f = (const uint4 *)a.frame;
        const uint32_t vb = blockIdx.x * SCAN_VPB;
        const uint32_t o0 = vb * 16;
        const uint32_t cr0 = o0 < a.wh ? (o0 / a.W) / a.cell : 0;
        uint4 d[SCAN_NV];
        bool on[SCAN_NV];

#pragma unroll
        for (int k = 0; k < SCAN_NV; k++) {
                const uint32_t v = vb + k * SCAN_THREADS + threadIdx.x;
                on[k] = false;
                if (v < a.nv_end) {
                        const uint32_t o = v * 16;
                        const uint32_t last = (o + 15 < a.scan_bytes) ? o + 15 : a.scan_bytes - 1;
                        /* A vector spans at most two rows (width >= 16): its ends decide. */
                        on[k] = byte_needed(a, o) || byte_needed(a, last);
                }
        }
#pragma unroll
        for (int k = 0; k < SCAN_NV; k++)
                if (on[k])
                        d[k] = __ldg(f + vb + k * SCAN_THREADS + threadIdx.x);
        if (a.want_grid)
                zero_cells(s_cells, a.cell_rows * a.grid_w);
#pragma unroll
        for (int k = 0; k < SCAN_NV; k++) {
                const uint32_t o = (vb + k * SCAN_THREADS + threadIdx.x) * 16;
                if (!on[k])
                        continue;
#pragma unroll
                for (int i = 0; i < 16; i++) {
                        const uint32_t off = o + i;
                        const uint32_t b = byte_of(d[k], i);
                        if (off >= a.scan_bytes)
                                break;
                        if (off < a.wh) {
                                const uint32_t r = off / a.W, c = off - r * a.W;
                                if (a.want_grid)
                                        atomicAdd(&s_cells[(r / a.cell - cr0) * a.grid_w + c / a.cell], b);
                                if (a.yslot) {
                                        const int32_t sl = a.yslot[r];
                                        if (sl >= 0)
                                                a.stash_y[(size_t)sl * a.W + c] = (uint8_t)b;
                                }
                        } else if (a.uvslot) {
                                const uint32_t o2 = off - a.wh, r = o2 / a.W, c = o2 - r * a.W;
                                const int32_t sl = a.uvslot[r];
                                if (sl >= 0)
                                        a.stash_uv[(size_t)sl * a.W + c] = (uint8_t)b;
                        }
                }
        }
        if (a.want_grid)
                flush_cells(a, s_cells, cr0);
}

/*
 * Split pass 1 (width % 16 == 0): the rows of a list, as one run of vectors
 * (vpr per row). List entries r < H are luma rows, H + c chroma row c;
 * luma rows ascend, chroma rows follow them. A block's luma rows lie within
 * cell_rows cell rows from its first one (planned on the host).
 */
struct rows_args {
        const uint8_t *frame;                /* scan_rows, scan_luma: the frame; scan_rest: NULL (read *frame_slot) */
        const uint8_t **frame_slot;          /* scan_rows leaves the frame pointer here for scan_rest */
        const int32_t *rows;
        uint32_t n_vec, vpr, W, H, wh;
        uint32_t cell, grid_w, cell_rows;    /* cell_rows 0: no grid */
        const int32_t *yslot, *uvslot;       /* NULL without tensor */
        uint8_t *stash_y, *stash_uv;
        uint32_t *sums;
};

template <int SCAN_NV>
static __device__ __forceinline__ void scan_list(const rows_args &a, const uint8_t *frame)
{
        constexpr uint32_t SCAN_VPB = SCAN_THREADS * SCAN_NV;
        extern __shared__ uint32_t s_cells[];
        const uint32_t vb = blockIdx.x * SCAN_VPB;
        const int32_t first = __ldg(a.rows + vb / a.vpr);
        const uint32_t cr0 = (uint32_t)first < a.H ? (uint32_t)first / a.cell : 0;
        uint4 d[SCAN_NV];
        uint32_t row[SCAN_NV], col[SCAN_NV];
        bool on[SCAN_NV];

#pragma unroll
        for (int k = 0; k < SCAN_NV; k++) {
                const uint32_t v = vb + k * SCAN_THREADS + threadIdx.x;
                on[k] = v < a.n_vec;
                row[k] = 0;
                col[k] = 0;
                if (on[k]) {
                        const uint32_t li = v / a.vpr;
                        row[k] = (uint32_t)__ldg(a.rows + li);
                        col[k] = (v - li * a.vpr) * 16;
                }
        }
#pragma unroll
        for (int k = 0; k < SCAN_NV; k++)
                if (on[k]) {
                        const size_t off = row[k] < a.H ? (size_t)row[k] * a.W + col[k]
                                                        : a.wh + (size_t)(row[k] - a.H) * a.W + col[k];
                        d[k] = __ldg((const uint4 *)(frame + off));
                }
        if (a.cell_rows)
                zero_cells(s_cells, a.cell_rows * a.grid_w);
#pragma unroll
        for (int k = 0; k < SCAN_NV; k++) {
                if (!on[k])
                        continue;
                if (row[k] < a.H) {
                        if (a.cell_rows)
                                add_cells(a, s_cells, cr0, row[k], col[k], d[k]);
                        if (a.yslot) {
                                const int32_t sl = __ldg(a.yslot + row[k]);
                                if (sl >= 0)
                                        *(uint4 *)(a.stash_y + (size_t)sl * a.W + col[k]) = d[k];
                        }
                } else if (a.uvslot) {
                        const int32_t sl = __ldg(a.uvslot + (row[k] - a.H));
                        if (sl >= 0)
                                *(uint4 *)(a.stash_uv + (size_t)sl * a.W + col[k]) = d[k];
                }
        }
        if (a.cell_rows)
                flush_cells(a, s_cells, cr0);
}

/* The sampled rows (the frame-reading node: its parameter is the frame). */
template <int SCAN_NV>
static __global__ void __launch_bounds__(SCAN_THREADS) scan_rows(const rows_args a)
{
        if (blockIdx.x == 0 && threadIdx.x == 0)
                *a.frame_slot = a.frame;
        scan_list<SCAN_NV>(a, a.frame);
}

/* The other luma rows, of the frame scan_rows (an earlier launch) read; SCAN_NV_MAX vectors per thread. */
template <int SCAN_NV>
static __global__ void __launch_bounds__(SCAN_THREADS) scan_rest(const rows_args a)
{
        scan_list<SCAN_NV>(a, *a.frame_slot);
}

/*
 * Every luma row of a device-resident frame, into the cells only (list 2,
 * zcp_k_pre_grid_direct): the frame is its own parameter, so it is not a
 * frame node and leaves no pointer behind.
 */
static __global__ void __launch_bounds__(SCAN_THREADS) scan_luma(const rows_args a)
{
        scan_list<SCAN_NV_MAX>(a, a.frame);
}

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
                const float2 xl = __ldg(a.xl + ox), yl = __ldg(a.yl + oy);
                const uint8_t *y0 = a.stash_y + (size_t)yt.x * a.W, *y1 = a.stash_y + (size_t)yt.y * a.W;
                const uint8_t *c0 = a.stash_uv + (size_t)yt.z * a.W, *c1 = a.stash_uv + (size_t)yt.w * a.W;
                const size_t plane = (size_t)a.in_w * a.in_h;
                float p00[3], p01[3], p10[3], p11[3];

                pixel(y0, c0, xt.x, xt.z, p00);
                pixel(y0, c0, xt.y, xt.w, p01);
                pixel(y1, c1, xt.x, xt.z, p10);
                pixel(y1, c1, xt.y, xt.w, p11);
#pragma unroll
                for (int k = 0; k < 3; k++) {
                        const float top = __fadd_rn(__fmul_rn(xl.x, p00[k]), __fmul_rn(xl.y, p01[k]));
                        const float bot = __fadd_rn(__fmul_rn(xl.x, p10[k]), __fmul_rn(xl.y, p11[k]));
                        const float v = __fadd_rn(__fmul_rn(yl.x, top), __fmul_rn(yl.y, bot));
                        a.tensor[k * plane + i] = __fdiv_rn(__fsub_rn(__fdiv_rn(v, 255.0f), a.mean[k]), a.std[k]);
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

/*
 * Blocks of list l at vpb vectors per block, and the most cell rows one
 * block's luma rows touch (its shared window).
 */
static void plan_list(struct zcp_k_pre *k, int l, uint32_t vpb)
{
        const uint32_t vpr = k->p.width / 16, n_vec = k->nrows[l] * vpr;
        uint32_t cells = 1;

        k->rblocks[l] = (n_vec + vpb - 1) / vpb;
        for (uint32_t b = 0; b < k->rblocks[l]; b++) {
                const uint32_t li0 = b * vpb / vpr, li1 = (((b + 1) * vpb < n_vec ? (b + 1) * vpb : n_vec) - 1) / vpr;
                const uint32_t last = li1 < k->nluma[l] ? li1 : k->nluma[l] - 1;
                if (li0 >= k->nluma[l])
                        continue;
                const uint32_t span = (uint32_t)k->hrows[l][last] / k->p.cell - (uint32_t)k->hrows[l][li0] / k->p.cell + 1;
                cells = span > cells ? span : cells;
        }
        k->rcells[l] = cells < k->grid_h ? cells : k->grid_h;
}

/* Stash tables and resize indices (want_tensor). */
static cudaError_t plan_tensor(struct zcp_k_pre *k, char *errbuf, size_t errlen)
{
        const struct zcp_preprocess_params *p = &k->p;
        const float sx = (float)p->width / (float)p->in_w, sy = (float)p->height / (float)p->in_h;
        int32_t *yslot = NULL, *uvslot = NULL;
        int4 *xt = NULL, *yt = NULL, *ytf = NULL;
        float2 *xl = NULL, *yl = NULL;
        cudaError_t e = cudaErrorMemoryAllocation;

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
        for (uint32_t oy = 0; oy < p->in_h; oy++) {
                uint32_t y0, y1;
                float l0, l1;
                src_index(oy, sy, p->height, &y0, &y1, &l0, &l1);
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
                src_index(oy, sy, p->height, &y0, &y1, &l0, &l1);
                yt[oy] = make_int4(yslot[y0], yslot[y1], uvslot[y0 / 2], uvslot[y1 / 2]);
                ytf[oy] = make_int4((int)y0, (int)y1, (int)(y0 / 2), (int)(y1 / 2));
                yl[oy] = make_float2(l0, l1);
        }
        for (uint32_t ox = 0; ox < p->in_w; ox++) {
                uint32_t x0, x1;
                float l0, l1;
                src_index(ox, sx, p->width, &x0, &x1, &l0, &l1);
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

uint32_t zcp_k_pre_vectors(const struct zcp_k_pre *k)
{
        return k->nv;
}

int zcp_k_pre_set_vectors(struct zcp_k_pre *k, uint32_t nv)
{
        const uint32_t vpb = SCAN_THREADS * nv;
        int max_smem = 0, dev = 0;
        cudaError_t e;

        if (nv != 1 && nv != 2 && nv != 4)
                return cudaErrorInvalidValue;
        k->cell_rows = 0;
        k->scan_smem = 0;
        if (k->want_grid) {
                /* Rows a block's bytes can touch, then cell rows. */
                const uint32_t rows_span = (vpb * 16 - 1) / k->p.width + 2;
                const uint32_t cr = (rows_span - 1 + k->p.cell - 1) / k->p.cell + 1;
                k->cell_rows = cr < k->grid_h ? cr : k->grid_h;
                k->scan_smem = sizeof(uint32_t) * k->cell_rows * k->grid_w;
        }
        if (k->scan_smem > 48 * 1024) {
                if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
                    (e = cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) !=
                            cudaSuccess)
                        return e;
                if (k->scan_smem > (size_t)max_smem)
                        return cudaErrorInvalidValue;
                const void *fn = k->aligned ? (nv == 4 ? (const void *)scan_aligned<4>
                                                       : nv == 2 ? (const void *)scan_aligned<2> : (const void *)scan_aligned<1>)
                                            : (nv == 4 ? (const void *)scan_generic<4>
                                                       : nv == 2 ? (const void *)scan_generic<2> : (const void *)scan_generic<1>);
                if ((e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)k->scan_smem)) !=
                    cudaSuccess)
                        return e;
        }
        if (k->aligned) {
                k->nv_y = k->wh / 16;
                k->nv_end = k->scan_bytes / 16;
                k->y_blocks = (k->nv_y + vpb - 1) / vpb;
                k->scan_blocks = k->y_blocks + (k->nv_end - k->nv_y + vpb - 1) / vpb;
        } else {
                k->nv_y = 0;
                k->nv_end = (k->scan_bytes + 15) / 16;
                k->y_blocks = 0;
                k->scan_blocks = (k->nv_end + vpb - 1) / vpb;
        }
        if (k->split) {
                plan_list(k, 0, vpb);
                /*
                 * scan_rest runs beside the network: the fewest blocks. Each holds an
                 * SM's slots while its PCIe reads are in flight; with 1 vector per
                 * thread (297 blocks at 1080p) the first convolution's 784 blocks no
                 * longer all fit beside them (zero-copy 1080p 10% slower).
                 */
                plan_list(k, 1, SCAN_THREADS * SCAN_NV_MAX);
        }
        k->nv = nv;
        return cudaSuccess;
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
                        plan_list(k, l, SCAN_THREADS * SCAN_NV_MAX);
                        if (sizeof(uint32_t) * k->rcells[l] * k->grid_w > 48 * 1024)
                                k->split = false;
                }
        }
        if (k->direct && getenv("ZCP_PRE_DIRECT") && strcmp(getenv("ZCP_PRE_DIRECT"), "0") == 0)
                k->direct = false;   /* the scan path on device frames too (meson test kernels-no-direct) */
        if (k->direct) {
                /* The same window rule for list 2 (its blocks always take SCAN_NV_MAX vectors a thread). */
                plan_list(k, 2, SCAN_THREADS * SCAN_NV_MAX);
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

static void scan_launch(const struct zcp_k_pre *k, const uint8_t *nv12, cudaStream_t st)
{
        scan_args a;

        memset(&a, 0, sizeof(a));
        a.frame = nv12;
        a.W = k->p.width;
        a.wh = k->wh;
        a.scan_bytes = k->scan_bytes;
        a.cell = k->p.cell ? k->p.cell : 1;
        a.grid_w = k->grid_w;
        a.grid_h = k->grid_h;
        a.cell_rows = k->cell_rows;
        a.nv_y = k->nv_y;
        a.nv_end = k->nv_end;
        a.y_blocks = k->y_blocks;
        a.want_grid = k->want_grid;
        a.yslot = k->want_tensor ? k->yslot : NULL;
        a.uvslot = k->want_tensor ? k->uvslot : NULL;
        a.stash_y = k->stash_y;
        a.stash_uv = k->stash_uv;
        a.sums = k->sums;
        if (k->aligned && k->nv == 4)
                scan_aligned<4><<<k->scan_blocks, SCAN_THREADS, k->scan_smem, st>>>(a);
        else if (k->aligned && k->nv == 2)
                scan_aligned<2><<<k->scan_blocks, SCAN_THREADS, k->scan_smem, st>>>(a);
        else if (k->aligned)
                scan_aligned<1><<<k->scan_blocks, SCAN_THREADS, k->scan_smem, st>>>(a);
        else if (k->nv == 4)
                scan_generic<4><<<k->scan_blocks, SCAN_THREADS, k->scan_smem, st>>>(a);
        else if (k->nv == 2)
                scan_generic<2><<<k->scan_blocks, SCAN_THREADS, k->scan_smem, st>>>(a);
        else
                scan_generic<1><<<k->scan_blocks, SCAN_THREADS, k->scan_smem, st>>>(a);
}

/* List l of the split scan: l 0 scan_rows (reads nv12), l 1 scan_rest; l 2 scan_luma (reads nv12, cells only). */
static void list_launch(const struct zcp_k_pre *k, int l, const uint8_t *nv12, cudaStream_t st)
{
        const size_t smem = sizeof(uint32_t) * k->rcells[l] * k->grid_w;
        rows_args a;

        memset(&a, 0, sizeof(a));
        a.frame = l == 1 ? NULL : nv12;
        a.frame_slot = k->frame_slot;
        a.rows = k->rows[l];
        a.vpr = k->p.width / 16;
        a.n_vec = k->nrows[l] * a.vpr;
        a.W = k->p.width;
        a.H = k->p.height;
        a.wh = k->wh;
        a.cell = k->p.cell;
        a.grid_w = k->grid_w;
        a.cell_rows = k->rcells[l];
        a.yslot = l == 2 ? NULL : k->yslot;
        a.uvslot = l == 2 ? NULL : k->uvslot;
        a.stash_y = k->stash_y;
        a.stash_uv = k->stash_uv;
        a.sums = k->sums;
        if (l == 2)
                scan_luma<<<k->rblocks[2], SCAN_THREADS, smem, st>>>(a);
        else if (l == 0 && k->nv == 4)
                scan_rows<4><<<k->rblocks[0], SCAN_THREADS, smem, st>>>(a);
        else if (l == 0 && k->nv == 2)
                scan_rows<2><<<k->rblocks[0], SCAN_THREADS, smem, st>>>(a);
        else if (l == 0)
                scan_rows<1><<<k->rblocks[0], SCAN_THREADS, smem, st>>>(a);
        else
                scan_rest<SCAN_NV_MAX><<<k->rblocks[1], SCAN_THREADS, smem, st>>>(a);
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
        list_launch(k, 1, NULL, st);
        return cudaGetLastError();
}

int zcp_k_pre_scan(const struct zcp_k_pre *k, const uint8_t *nv12, void *stream)
{
        if (!k || !nv12 || ((uintptr_t)nv12 & 15))
                return cudaErrorInvalidValue;
        if (k->split)
                list_launch(k, 0, nv12, (cudaStream_t)stream);
        else
                scan_launch(k, nv12, (cudaStream_t)stream);
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
        list_launch(k, 2, nv12, (cudaStream_t)stream);
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

static bool is_rows(const void *fn)
{
        return fn == (const void *)scan_rows<1> || fn == (const void *)scan_rows<2> || fn == (const void *)scan_rows<4>;
}

/* Whether `fn` is one of the pass-1 kernels (the only ones whose parameters name the frame). */
static bool is_scan(const void *fn)
{
        return fn == (const void *)scan_aligned<1> || fn == (const void *)scan_aligned<2> ||
               fn == (const void *)scan_aligned<4> || fn == (const void *)scan_generic<1> ||
               fn == (const void *)scan_generic<2> || fn == (const void *)scan_generic<4> || is_rows(fn);
}

int zcp_k_pre_frame_node(const struct zcp_k_pre *k, void *graph, void **ret_node)
{
        cudaGraph_t g = (cudaGraph_t)graph;
        cudaGraphNode_t *nodes = NULL, found = NULL;
        size_t n = 0, hits = 0;
        cudaError_t e;

        if (!k || !g || !ret_node)
                return cudaErrorInvalidValue;
        if ((e = cudaGraphGetNodes(g, NULL, &n)) != cudaSuccess)
                return e;
        if (n == 0)
                return cudaErrorInvalidValue;
        nodes = (cudaGraphNode_t *)malloc(sizeof(*nodes) * n);
        if (!nodes)
                return cudaErrorMemoryAllocation;
        if ((e = cudaGraphGetNodes(g, nodes, &n)) != cudaSuccess)
                goto out;
        for (size_t i = 0; i < n; i++) {
                enum cudaGraphNodeType type;
                cudaKernelNodeParams kp;

                if ((e = cudaGraphNodeGetType(nodes[i], &type)) != cudaSuccess)
                        goto out;
                if (type != cudaGraphNodeTypeKernel)
                        continue;
                if ((e = cudaGraphKernelNodeGetParams(nodes[i], &kp)) != cudaSuccess)
                        goto out;
                if (is_scan(kp.func)) {
                        found = nodes[i];
                        hits++;
                }
        }
        if (hits != 1) {
                e = cudaErrorInvalidValue;
                goto out;
        }
        *ret_node = (void *)found;
        e = cudaSuccess;
out:
        free(nodes);
        return e;
}

int zcp_k_pre_set_frame(const struct zcp_k_pre *k, void *exec, void *node, const uint8_t *nv12)
{
        cudaGraphNode_t nd = (cudaGraphNode_t)node;
        cudaKernelNodeParams kp;
        scan_args a;
        rows_args r;
        void *args[1] = { &a };
        cudaError_t e;

        if (!k || !exec || !nd || !nv12 || ((uintptr_t)nv12 & 15))
                return cudaErrorInvalidValue;
        /* The node's own parameters (what was captured); its memory is the runtime's: copied, not changed. */
        if ((e = cudaGraphKernelNodeGetParams(nd, &kp)) != cudaSuccess)
                return e;
        if (!is_scan(kp.func) || !kp.kernelParams || !kp.kernelParams[0])
                return cudaErrorInvalidValue;
        if (is_rows(kp.func)) {
                memcpy(&r, kp.kernelParams[0], sizeof(r));
                r.frame = nv12;
                args[0] = &r;
        } else {
                memcpy(&a, kp.kernelParams[0], sizeof(a));
                a.frame = nv12;
        }
        kp.kernelParams = args;
        kp.extra = NULL;
        return cudaGraphExecKernelNodeSetParams((cudaGraphExec_t)exec, nd, &kp);
}
