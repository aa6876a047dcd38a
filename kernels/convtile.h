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
        int stages;              /* the patch in this many groups (ctile_stages_fit; ZCP_CONV_STAGES); ctile_plan: 1 */
        double cost;             /* the rule's estimate (cycles of the busiest multiprocessor) */
};

#define CTILE_OCPT 4

/*
 * Whether a layer of C input channels with tiling t may take its patch in t->stages = 2 or 4 groups of
 * copies (the launch given packed weights; measuring: ZCP_CONV_STAGES): group g the g-th run of each
 * slice's channels, its sums once it has landed while the later groups are on their way. One pass through
 * shared memory, C <= 64.
 */
#define CTILE_STAGES_MAX 4

static inline bool ctile_stages_fit(const struct ctile *t, int C)
{
        return t->ck == C && C >= 1 && C <= 64;
}

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

/*
 * The chain (ZCP_CONV_CHAIN=1): layers 0 .. n - 1 in one persistent launch,
 * each task waiting for the tile rows of the layer before that it reads
 * (convtile.cu). Layer l reads L[l].in, which must be L[l - 1].out, and no
 * two layers may share an output buffer.
 */
struct ctile_chain_layer {
        const struct ctile *t;
        const float *in, *w, *wpk, *b;
        int C, W, H, O, s;
        float *out, *parts;
};

/* Whether n layers (strides s) run as a chain; then the shared memory a block needs and the counter words (zeroed). */
bool ctile_chain_fits(const struct ctile *const *t, const int *s, int n, size_t *ret_smem, int *ret_words);

/*
 * The grid that keeps every multiprocessor busy with blocks of smem bytes (a cudaError_t); stages: the
 * groups every layer's patch comes in (the chain runs them where every layer takes the same, else 1).
 */
int ctile_chain_grid(size_t smem, int stages, unsigned *ret_grid);

/*
 * Launch the chain on grid blocks; ctr: ctile_chain_fits' words, zero, and zero again when it ends. wfirst: each
 * task copies its weights before it waits for its input.
 */
int ctile_chain_launch(const struct ctile_chain_layer *L, int n, unsigned grid, bool wfirst, unsigned *ctr,
                       void *stream, bool pdl);

/* Give the kernels the shared memory ctile_plan may plan (a cudaError_t; once per device, not while capturing). */
int ctile_init(void);

#endif
