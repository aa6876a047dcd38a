/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * zcnet weights (from a .safetensors file) and the C reference of every
 * computation the GPU does (DESIGN.md §4). The CUDA kernels must agree with
 * these: motion exactly, scores within 1e-4 relative.
 *
 * Float math rules shared with kernels/: every a*b+c is written so that no
 * fused multiply-add happens on either side (the C file is compiled with
 * -ffp-contract=off; the kernels use __fmul_rn/__fadd_rn where order matters).
 *
 * Ownership: zcp_model_load() returns a heap model, freed with
 * zcp_model_free(); immutable after load, so any thread may read it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/frame.h"

#define ZCP_MODEL_MAX_LAYERS 16

struct zcp_conv_layer {
        uint32_t in_ch, out_ch, stride;    /* 3x3 kernel, padding 1 */
        const float *weight;               /* [out_ch][in_ch][3][3] */
        const float *bias;                 /* [out_ch] */
};

struct zcp_model {
        uint32_t conv_count;
        struct zcp_conv_layer conv[ZCP_MODEL_MAX_LAYERS];
        uint32_t classes, fc_in;
        const float *fc_weight;            /* [classes][fc_in] */
        const float *fc_bias;              /* [classes] */
        char **labels;                     /* [classes] or NULL */
        void *blob;                        /* owns all the float data above */
        size_t blob_size;
};

/*
 * Loads a .safetensors file (F32 tensors conv{i}.weight [out,in,3,3],
 * conv{i}.bias [out], fc.weight [classes,C], fc.bias [classes]; optional
 * __metadata__ "stride" (default "2") or "conv{i}.stride"). Checks every shape
 * and offset. Returns 0, or negative errno with a one-line message naming the
 * file in errbuf (-EINVAL for bad content).
 */
int zcp_model_load(const char *path, struct zcp_model **ret_model, char *errbuf, size_t errlen);
/*
 * Optional labels file: one label per line, must have `classes` lines, each
 * non-empty, valid UTF-8 without control characters (tab allowed) and at
 * most ZCP_LABEL_MAX_BYTES bytes; anything else is refused (-EINVAL) with
 * FILE:LINE: reason in errbuf.
 */
#define ZCP_LABEL_MAX_BYTES 256u
int zcp_model_load_labels(struct zcp_model *model, const char *path, char *errbuf, size_t errlen);
void zcp_model_free(struct zcp_model *model);

/* Spatial size after each conv: out = (in + 2 - 3) / stride + 1. */
void zcp_model_shapes(const struct zcp_model *m, uint32_t in_w, uint32_t in_h,
                      uint32_t *ret_w /*[conv_count]*/, uint32_t *ret_h /*[conv_count]*/);

/* Floats of scratch zcp_ref_zcnet needs for an in_w x in_h input. */
size_t zcp_model_scratch_floats(const struct zcp_model *m, uint32_t in_w, uint32_t in_h);

struct zcp_preprocess_params {
        uint32_t width, height;            /* NV12 frame, even */
        uint32_t in_w, in_h;               /* model input */
        float mean[3], std[3];
        uint32_t cell;                     /* motion cell size */
};

static inline uint32_t zcp_grid_w(uint32_t width, uint32_t cell) { return (width + cell - 1) / cell; }
static inline uint32_t zcp_grid_h(uint32_t height, uint32_t cell) { return (height + cell - 1) / cell; }

/*
 * Reference preprocess: NV12 -> float32 NCHW tensor [3][in_h][in_w] and the
 * motion grid of per-cell integer luma means [grid_h][grid_w] (row-major).
 * Either output may be NULL to skip it.
 */
void zcp_ref_preprocess(const uint8_t *nv12, const struct zcp_preprocess_params *p,
                        float *ret_tensor, uint32_t *ret_grid);

/* Reference zcnet forward: tensor -> probabilities [classes]. scratch as zcp_model_scratch_floats. */
void zcp_ref_zcnet(const struct zcp_model *m, const float *tensor, uint32_t in_w, uint32_t in_h,
                   float *scratch, float *ret_probs);

/* Top-k of probs: descending probability, ties to the lower class index. */
void zcp_ref_topk(const float *probs, uint32_t classes, uint32_t k, uint32_t *ret_class, float *ret_prob);

struct zcp_motion_params {
        uint32_t width, height, cell;
        float threshold, alpha;
};

/*
 * Reference motion: updates bg[grid] in place (first frame: `first` = true
 * sets bg = mean) and fills the motion fields of *ret (moving_cells,
 * total_cells, moving_fraction, bbox in pixels clipped to the frame).
 * For each cell: moving = fabsf((float)mean - bg) > threshold (with bg
 * before the update); then bg = bg + alpha * ((float)mean - bg), as
 * t = (float)mean - bg; t = alpha * t; bg = bg + t (no FMA).
 */
void zcp_ref_motion(const uint32_t *grid, float *bg, bool first, const struct zcp_motion_params *p,
                    struct zcp_result *ret);
