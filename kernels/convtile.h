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
        int cs;                  /* the patch's channel stride in shared memory (floats) */
        bool mma;                /* the channel loop on tensor cores (CTILE_MMA) */
        int tx, ty;              /* tiles across and down */
        unsigned blocks;
        size_t smem;             /* dynamic shared memory, bytes */
        double cost;             /* the rule's estimate (cycles of the busiest multiprocessor) */
};

#define CTILE_OCPT 4

/*
 * With a code (alone or with ZCP_K_TILE's bits): the channel loop as warp-wide
 * tensor-core products in TF32 with the error-compensated split (3xTF32:
 * x w ~ xh wh + xh wl + xl wh), compute 8.0+, input channels a multiple of 8,
 * all of them in one pass; the weights must be packed (ctile_pack). The
 * network plans it first where it fits (ctile_mma_on: unless ZCP_CONV_MMA=0,
 * for measuring; RESULTS.md runs 31-32).
 */
#define CTILE_MMA 0x20000u
bool ctile_mma_on(void);

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
 * The weights w [O][C][3][3] packed for plan t's kernel (host memory, ctile_pack_floats(t, C, O)
 * floats): [O/4 rounded up][C][9][4], channels past O zero; for t->mma, [O/8 rounded up][C/8][9][32
 * lanes][4]: each lane's two weights of an mma step rounded to TF32, then the remainders rounded to
 * TF32. A launch given them (wpk, 16-byte aligned) copies them into place; without, each block turns
 * w around in shared memory (not t->mma: it needs them packed).
 */
static inline size_t ctile_pack_floats(const struct ctile *t, int C, int O)
{
        if (t->mma)
                return (size_t)(O + 7) / 8 * 8 * C * 9 * 2;
        return (size_t)(O + CTILE_OCPT - 1) / CTILE_OCPT * CTILE_OCPT * C * 9;
}
void ctile_pack(const struct ctile *t, const float *w, int C, int O, float *dst);

/* Give the kernels the shared memory ctile_plan may plan (a cudaError_t; once per device, not while capturing). */
int ctile_init(void);

#endif
