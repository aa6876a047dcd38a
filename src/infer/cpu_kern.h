/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The CPU fast path's op kernels (internal to src/infer/cpu_*.c; cpu_fast.c drives them). Each
 * op of a plan becomes a struct zcp_fk_op at zcp_fast_plan_new (weights repacked for the
 * kernels, tables), then runs per frame as `units` independent pieces of work (output rows, or
 * chunks of pixels) that the worker team takes from a shared counter: any split of the units
 * over any threads writes the same arena.
 *
 * Ownership: a zcp_fk_op owns what its pointers point to (zcp_fk_op_done frees it) and points
 * into the plan. Threads: zcp_fk_*_new/done on one thread; zcp_fk_run_units on any threads at
 * once for disjoint unit ranges of the same run.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/plan.h"

enum zcp_fk_how {
        ZCP_FK_REF,     /* the C reference (an op the kernels do not take, e.g. one reading its own output) */
        ZCP_FK_GEMM,    /* dense 1x1, stride 1, no padding: [pixels x cin] x [cin x cout] */
        ZCP_FK_DENSE,   /* any other dense convolution: taps x cin per output pixel */
        ZCP_FK_DW,      /* depthwise convolution */
        ZCP_FK_ELT,
        ZCP_FK_MEAN,
        ZCP_FK_RESIZE,
        ZCP_FK_POOL,
        ZCP_FK_COPY,
};

struct zcp_fk_op {
        const struct zcp_plan_op *op;
        enum zcp_fk_how how;
        uint32_t units;        /* pieces of work per run */
        uint32_t unit_px;      /* GEMM, ELT, COPY: pixels per unit; the others: output rows */
        uint32_t unit_groups;  /* GEMM: 1, or units per chunk of pixels (one group of blocks each) */
        uint64_t cost;         /* multiply-adds (or elements touched) per run: whether a team helps */
        /* convolutions (cpu_conv.c) */
        float *w;              /* packed weights */
        float *bias;           /* [blocks][16], 0 where the op has none */
        size_t w_floats;
        uint32_t blocks;       /* of 16 output channels */
        uint32_t vmax;         /* dense: blocks per register tile at most */
        /* resize (cpu_ops.c): per output column (row) the two source columns (rows) and the weight */
        uint32_t *xlo, *xhi, *ylo, *yhi;
        float *fx, *fy;
};

/* One op on one frame. */
struct zcp_fk_run {
        const struct zcp_plan *plan;
        const struct zcp_fk_op *k;
        float *arena;
        bool wide;             /* AVX-512: the wide register tiles */
};

/*
 * Fills k for op (a plan that passed zcp_plan_check): how, units, cost and what the kernels need.
 * wide: the CPU has AVX-512 (the register tiles are chosen for it). 0 or -ENOMEM.
 */
int zcp_fk_op_new(const struct zcp_plan *plan, const struct zcp_plan_op *op, bool wide, struct zcp_fk_op *k);
void zcp_fk_op_done(struct zcp_fk_op *k);

/* Units [u0, u1) of the run. */
void zcp_fk_run_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1);

/* The kernels by op kind (cpu_conv.c, cpu_ops.c). */
int zcp_fk_conv_new(const struct zcp_plan *plan, const struct zcp_plan_op *op, bool wide, struct zcp_fk_op *k);
void zcp_fk_conv_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1);
int zcp_fk_resize_new(const struct zcp_plan *plan, const struct zcp_plan_op *op, struct zcp_fk_op *k);
void zcp_fk_ops_units(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1);
