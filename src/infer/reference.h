/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The C reference of every computation the GPU does (DESIGN.md §4). The CUDA
 * kernels must agree with these: motion exactly, scores within 1e-4 relative.
 *
 * Float math rules shared with kernels/: every a*b+c is written so that no
 * fused multiply-add happens on either side (the C file is compiled with
 * -ffp-contract=off; the kernels use __fmul_rn/__fadd_rn where order matters).
 *
 * Pure functions: they allocate nothing and any thread may call them.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/frame.h"
#include "core/kparams.h"
#include "model/plan.h"

/*
 * Reference preprocess: NV12 -> the float32 model input (p->nhwc: [in_h][in_w][3], the plans'
 * layout; else [3][in_h][in_w]) and the motion grid of per-cell integer luma means
 * [grid_h][grid_w] (row-major). Either output may be NULL to skip it.
 */
void zcp_ref_preprocess(const uint8_t *nv12, const struct zcp_preprocess_params *p,
                        float *ret_tensor, uint32_t *ret_grid);

/* Top-k of probs: descending probability, ties to the lower class index. */
void zcp_ref_topk(const float *probs, uint32_t classes, uint32_t k, uint32_t *ret_class, float *ret_prob);

/*
 * Reference motion: updates bg[grid] in place (first frame: `first` = true
 * sets bg = mean) and fills the motion fields of *ret (moving_cells,
 * total_cells, moving_fraction, bbox in pixels clipped to the frame,
 * grid_w, grid_h, mask_words). For each cell: moving = fabsf((float)mean -
 * bg) > threshold (with bg before the update); then bg = bg + alpha *
 * ((float)mean - bg), as t = (float)mean - bg; t = alpha * t; bg = bg + t
 * (no FMA). ret_mask (NULL: none, mask_words 0) receives the moving mask of
 * frame.h: all zcp_mask_words(grid_w * grid_h) words written (zeros on a
 * first frame).
 */
void zcp_ref_motion(const uint32_t *grid, float *bg, bool first, const struct zcp_motion_params *p,
                    struct zcp_result *ret, uint32_t *ret_mask);

/* ---------------------------------------------------------------- plans */

/* Op i of the plan on the arena (plan->arena_floats floats), as model/plan.h spells it out. */
void zcp_ref_op(const struct zcp_plan *plan, uint32_t i, float *arena);
/* Every op of the plan in order; the input tensor must be in the arena. */
void zcp_ref_plan(const struct zcp_plan *plan, float *arena);
/* The scale of one axis of a bilinear resize from `in` to `out` pixels (plan.h). */
float zcp_plan_resize_scale(uint32_t in, uint32_t out, bool align_corners);
/* One axis of TensorFlow's bilinear resize (model/plan.h): output index o of an axis of `in`
 * inputs -> the two source indices and the weight of the second; the fast CPU path uses it too. */
void zcp_ref_resize_axis(uint32_t o, uint32_t in, float scale, bool half_pixel, uint32_t *ret_lo, uint32_t *ret_hi,
                         float *ret_f);
/* CLASSIFY head: probabilities [head.classes] from the logits in the arena. */
void zcp_ref_classify(const struct zcp_plan *plan, const float *arena, float *ret_probs);
/*
 * CENTERNET head: the decoded candidates (model-input pixels), best first, at most
 * head.candidates of them into ret; returns how many.
 */
uint32_t zcp_ref_centernet(const struct zcp_plan *plan, const float *arena, struct zcp_detection *ret);
