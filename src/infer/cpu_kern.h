/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The CPU fast path's op kernels (internal to src/infer/cpu_*.c; cpu_fast.c drives them). Each
 * op of a plan becomes a struct zcp_fk_op at zcp_fast_plan_new (weights repacked for the
 * kernels, tables), then runs per frame as `units` independent pieces of work (output rows, or
 * chunks of pixels) that the worker team takes from a shared counter: any split of the units
 * over any threads writes the same arena.
 *
 * The kernels come once per instruction set, each built for it with vectors of its width
 * (cpu_kern_v4.c: x86-64-v4, 16 floats; cpu_kern_v3.c: x86-64-v3, 8; cpu_kern_base.c: the
 * baseline of any CPU, 4) from the same templates (cpu_conv_tmpl.c, cpu_ops_tmpl.c);
 * zcp_fast_plan_new picks the best the CPU runs. Packed weights are laid out for the kernels
 * that packed them.
 *
 * Ownership: a zcp_fk_op owns what its pointers point to (zcp_fk_op_done frees it) and points
 * into the plan. Threads: new/done on one thread; units on any threads at once for disjoint
 * unit ranges of the same run.
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
        size_t scratch_floats; /* what a share needs of struct zcp_fk_run's scratch (0: none) */
        /* convolutions (cpu_conv_tmpl.c) */
        float *w;              /* packed weights */
        float *bias;           /* [blocks][vector], 0 where the op has none */
        uint32_t blocks;       /* of one vector of output channels */
        uint32_t vmax;         /* dense: blocks per register tile at most */
        /*
         * Depthwise: the 1x1 convolution just before it whose output only this op reads, or NULL.
         * A run of both makes that output row by row into the share's scratch (fused_floats).
         */
        const struct zcp_fk_op *pw;
        size_t fused_floats;
        /* resize (cpu_fast.c): per output column (row) the two source columns (rows) and the weight */
        uint32_t *xlo, *xhi, *ylo, *yhi;
        float *fx, *fy;
};

/* One op on one frame. */
struct zcp_fk_run {
        const struct zcp_plan *plan;
        const struct zcp_fk_op *k;
        float *arena;
        float *scratch;        /* the share's own: k->scratch_floats (fused: k->fused_floats) floats */
        bool fused;            /* a depthwise op and its k->pw together */
};

/* The kernels of one instruction set. */
struct zcp_fk_isa {
        const char *name;      /* "x86-64-v4", "x86-64-v3", "baseline" */
        uint32_t vl;           /* floats per vector */
        /* Fills a convolution's how, units, cost and packed weights (k->op set). 0 or -ENOMEM. */
        int (*conv_new)(const struct zcp_plan *plan, struct zcp_fk_op *k);
        /* Units [u0, u1) of a run of a convolution, of the other ops. */
        void (*conv_units)(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1);
        void (*ops_units)(const struct zcp_fk_run *r, uint32_t u0, uint32_t u1);
};

extern const struct zcp_fk_isa zcp_fk_base;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZCP_FK_X86 1
extern const struct zcp_fk_isa zcp_fk_v4, zcp_fk_v3;
#else
#define ZCP_FK_X86 0
#endif
