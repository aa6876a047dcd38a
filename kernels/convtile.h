/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory tiled 3x3 convolution (convtile.cu), internal to the
 * kernels: zcnet.cu launches it for the layered path and the standalone
 * conv API (split ZCP_K_CONV_TILED).
 */
#ifndef ZCP_CONVTILE_H
#define ZCP_CONVTILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One layer's tiling (ctile_plan). */
struct ctile {
        int twl, thl, cgl;       /* tile 2^twl x 2^thl output pixels, 2^cgl groups of CTILE_OCPT channels */
        int ks;                  /* slices of the input channels, summed through shared memory */
        int ck;                  /* input channels per pass through shared memory */
        int nu, pws, ph;         /* patch: float4s a row, stored row width (floats), rows */
        int tx, ty;              /* tiles across and down */
        unsigned blocks;
        size_t smem;             /* dynamic shared memory, bytes */
        double cost;             /* the rule's estimate (cycles of the busiest multiprocessor) */
};

#define CTILE_OCPT 4

/*
 * The tiling `code` (ZCP_K_TILE; 0: the cheapest by the rule) for a layer,
 * false where the tiled kernel does not take it (stride other than 1 or 2,
 * int indexing overflow, a code that does not fit 256 threads).
 */
bool ctile_plan(int C, int W, int H, int O, int s, uint32_t code, struct ctile *t);

/*
 * Launch on a cudaStream_t (a cudaError_t back): out [O][OH][OW] =
 * ReLU(conv + bias); w as stored, wpk the same packed or NULL. parts non-NULL:
 * also the sums of each channel over each tile, parts[o * tiles + tile] (the
 * global average pool's first half; tiles = tx * ty).
 */
int ctile_launch(const struct ctile *t, const float *in, int C, int W, int H, const float *w, const float *wpk,
                 const float *b, int O, int s, float *out, float *parts, void *stream, bool pdl);

/*
 * The weights w [O][C][3][3] packed for the kernel (host memory, ctile_pack_floats(C, O) floats):
 * [O/4 rounded up][C][9][4], channels past O zero. A launch given them (wpk, 16-byte aligned) copies
 * them into place; without, each block turns w around in shared memory.
 */
static inline size_t ctile_pack_floats(int C, int O)
{
        return (size_t)(O + CTILE_OCPT - 1) / CTILE_OCPT * CTILE_OCPT * C * 9;
}
void ctile_pack(const float *w, int C, int O, float *dst);

/* Give the kernels the shared memory ctile_plan may plan (a cudaError_t; once per device, not while capturing). */
int ctile_init(void);

#endif
