/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The CPU backend's fast kernels: zcnet and the motion grid, computing what
 * the C reference (reference.h) computes, fast. The reference stays the oracle
 * (tests compare the two):
 * - zcnet: probabilities within 1e-5 relative of zcp_ref_zcnet (each
 *   convolution sums the same products in another order, with fused
 *   multiply-adds where the CPU has them); pooling, softmax as the reference;
 * - the motion grid: equal to the reference's (integer sums);
 * - the input tensor (cpu_pre.c): equal to the reference's, bit for bit.
 *
 * Ownership: zcp_fast_net_new() returns a heap object (weights repacked for
 * the kernels, activation buffers for one input size) freed with
 * zcp_fast_net_free(); it points into the model, which must outlive it.
 * Threads: new/free on any one thread; zcp_fast_zcnet on one thread at a time
 * (it writes the net's buffers), spreading rows over `team` (may be NULL).
 * zcp_fast_grid is pure.
 */
#include <stddef.h>
#include <stdint.h>

#include "core/kparams.h"

struct zcp_fast_net;
struct zcp_fast_pre;
struct zcp_workers;

/* Returns 0, -ENOMEM, or -EINVAL for a model without layers or an input below 1x1. */
int zcp_fast_net_new(const struct zcp_model *m, uint32_t in_w, uint32_t in_h, struct zcp_fast_net **ret_net);
void zcp_fast_net_free(struct zcp_fast_net *net);

/*
 * tensor: [3][in_h][in_w] as zcp_ref_preprocess writes it; ret_probs:
 * [classes]. Allocates nothing.
 */
void zcp_fast_zcnet(struct zcp_fast_net *net, struct zcp_workers *team, const float *tensor, float *ret_probs);

/*
 * The motion grid of zcp_ref_preprocess (integer mean luma per cell x cell
 * block, [grid_h][grid_w]) of a width x height luma plane (stride width),
 * summing whole rows with vector adds; cell rows spread over `team` (NULL:
 * the caller alone). cell 2..256. Allocates nothing.
 */
void zcp_fast_grid(struct zcp_workers *team, const uint8_t *luma, uint32_t width, uint32_t height, uint32_t cell,
                   uint32_t *ret_grid);

/*
 * The bilinear indices and weights of one geometry (p: frame and input size,
 * mean, std; cell unused). Returns 0, -ENOMEM, or -EINVAL for a zero size.
 * Freed with zcp_fast_pre_free (NULL accepted).
 */
int zcp_fast_pre_new(const struct zcp_preprocess_params *p, struct zcp_fast_pre **ret_pre);
void zcp_fast_pre_free(struct zcp_fast_pre *pre);

/*
 * The tensor [3][in_h][in_w] of zcp_ref_preprocess for the NV12 frame,
 * identical to it; output rows spread over `team` (NULL: the caller alone).
 * Allocates nothing; pre is only read.
 */
void zcp_fast_preprocess(const struct zcp_fast_pre *pre, struct zcp_workers *team, const uint8_t *nv12,
                         float *ret_tensor);
