/* SPDX-License-Identifier: MIT */
/*
 * The preprocess's pass 1 (preprocess.cu says what the whole does): the kernels that read the
 * frame where the GPU finds it (mapped host memory in zero-copy mode, device memory in copy
 * mode), in coalesced 16-byte loads, summing luma into the motion cells (shared memory, then one
 * atomic per touched cell) and stashing the rows the resize samples; their launches; and the
 * graph node that carries the frame pointer, which zcp_k_pre_set_frame() re-points.
 *
 * Two whole-frame variants: width % 16 == 0 (every vector lies in one row of one plane: 16-byte
 * stash stores, one division per vector) and any even width (vectors straddle rows and planes:
 * per-byte bookkeeping; correctness first, these geometries are rare). The split (both outputs,
 * width % 16 == 0) scans row lists instead: scan_rows the sampled rows (the frame node; it
 * leaves the frame pointer in device memory), scan_rest the other luma rows of that frame
 * beside the network, scan_luma every luma row of a device-resident frame (copy mode).
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "pre.cuh"

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
 * Blocks of list l at vpb vectors per block, and the most cell rows one
 * block's luma rows touch (its shared window).
 */
void kpre_plan_list(struct zcp_k_pre *k, int l, uint32_t vpb)
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

/*
 * Every luma row of a device-resident frame, into the cells only (list 2,
 * zcp_k_pre_grid_direct): the frame is its own parameter, so it is not a
 * frame node and leaves no pointer behind.
 */
static __global__ void __launch_bounds__(SCAN_THREADS) scan_luma(const rows_args a)
{
        scan_list<SCAN_NV_MAX>(a, a.frame);
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
                kpre_plan_list(k, 0, vpb);
                /*
                 * scan_rest runs beside the network: the fewest blocks, since each holds a
                 * multiprocessor's slots while its PCIe reads are in flight.
                 */
                kpre_plan_list(k, 1, SCAN_THREADS * SCAN_NV_MAX);
        }
        k->nv = nv;
        return cudaSuccess;
}

void kpre_scan_launch(const struct zcp_k_pre *k, const uint8_t *nv12, cudaStream_t st)
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
void kpre_list_launch(const struct zcp_k_pre *k, int l, const uint8_t *nv12, cudaStream_t st)
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
