/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Internal to the preprocess (preprocess.cu: planning, the resize and the public functions;
 * pre_scan.cu: pass 1, the kernels that read the frame, and the frame node of a graph): the
 * plan of one geometry and the kernels' arguments. Not part of the C ABI.
 */
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
        uint32_t nhwc, byte_pixels;
        float *tensor;
        uint32_t resize_blocks;
        uint32_t *sums, *grid;
        uint32_t grid_w, grid_h, cell, H;
};

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

/* pre_scan.cu: pass 1 over the whole frame (scan_args), and over row list l of the split (rows_args). */
void kpre_scan_launch(const struct zcp_k_pre *k, const uint8_t *nv12, cudaStream_t st);
void kpre_list_launch(const struct zcp_k_pre *k, int l, const uint8_t *nv12, cudaStream_t st);
/* preprocess.cu: blocks of row list l at vpb vectors a block, and the cell rows one block touches. */
void kpre_plan_list(struct zcp_k_pre *k, int l, uint32_t vpb);
