/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The CPU backend's fast kernels: a plan (model/plan.h), the model input and the motion grid,
 * computing what the C reference (reference.h) computes, fast. The reference stays the oracle
 * (tests compare the two):
 * - the plan: every op's outputs within 1e-4 relative of zcp_ref_op's, the same detections
 *   (class, box IoU >= 0.95, score within 1e-3) and top-k as the reference's. The kernels sum
 *   in the reference's order with no fused multiply-add, so every output equals the
 *   reference's but a sigmoid's (its exp is a polynomial, within a few ulp of expf);
 * - the motion grid: equal to the reference's (integer sums);
 * - the input tensor (cpu_pre.c): equal to the reference's, bit for bit.
 *
 * Ownership: zcp_fast_plan_new() returns a heap object (weights repacked for the kernels, the
 * arena for one frame) freed with zcp_fast_plan_free(); it points into the plan, which must
 * outlive it. Threads: new/free on any one thread; zcp_fast_plan_run on one thread at a time
 * (it writes the arena), spreading each op over `team` (may be NULL). zcp_fast_grid is pure.
 */
#include <stddef.h>
#include <stdint.h>

#include "core/kparams.h"
#include "model/plan.h"

struct zcp_fast_plan;
struct zcp_fast_pre;
struct zcp_workers;

/* Returns 0, -ENOMEM, or -EINVAL for a plan that fails zcp_plan_check. */
int zcp_fast_plan_new(const struct zcp_plan *plan, struct zcp_fast_plan **ret);
void zcp_fast_plan_free(struct zcp_fast_plan *fp);

/*
 * The arena: plan->arena_floats floats in the plan's layout (tensor t at tensors[t].off). The
 * caller writes the input tensor there before a run; the heads read their views after one.
 */
float *zcp_fast_plan_arena(struct zcp_fast_plan *fp);

/*
 * The instruction set whose kernels the plan runs ("x86-64-v4", "x86-64-v3" or "baseline"): the
 * best the CPU runs, or a lower one named by ZCP_FAST_ISA in the environment at new (tests).
 */
const char *zcp_fast_plan_isa(const struct zcp_fast_plan *fp);

/* Runs every op of the plan on the arena. Allocates nothing. */
void zcp_fast_plan_run(struct zcp_fast_plan *fp, struct zcp_workers *team);
/* Runs ops [first, first + count) only (tests compare each op's output with the reference's). */
void zcp_fast_plan_run_ops(struct zcp_fast_plan *fp, struct zcp_workers *team, uint32_t first, uint32_t count);

/*
 * The motion grid of zcp_ref_preprocess (integer mean luma per cell x cell
 * block, [grid_h][grid_w]) of a width x height luma plane (stride width),
 * summing whole rows with vector adds; cell rows spread over `team` (NULL:
 * the caller alone). cell 2..256. Allocates nothing.
 */
void zcp_fast_grid(struct zcp_workers *team, const uint8_t *luma, uint32_t width, uint32_t height, uint32_t cell,
                   uint32_t *ret_grid);

/*
 * The bilinear indices and weights of one geometry (p: frame and input size, region, pixels,
 * mean, std, layout; cell unused). Returns 0, -ENOMEM, or -EINVAL for a zero size. Freed with
 * zcp_fast_pre_free (NULL accepted).
 */
int zcp_fast_pre_new(const struct zcp_preprocess_params *p, struct zcp_fast_pre **ret_pre);
void zcp_fast_pre_free(struct zcp_fast_pre *pre);

/*
 * The model input of zcp_ref_preprocess for the NV12 frame, identical to it; output rows spread
 * over `team` (NULL: the caller alone). Allocates nothing; pre is only read.
 */
void zcp_fast_preprocess(const struct zcp_fast_pre *pre, struct zcp_workers *team, const uint8_t *nv12,
                         float *ret_tensor);
