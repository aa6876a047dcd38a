/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The parameters the zcnet computations take, shared by the C reference
 * (src/infer/reference.c), the CUDA kernels' C ABI (kernels/zcp_kernels.h)
 * and the weights loader (src/infer/weights.c): below both infer/ and
 * kernels/, so neither includes the other. Plain C types only.
 *
 * struct zcp_model is owned by whoever loaded it (zcp_model_load(),
 * zcp_model_free()); immutable after load, so any thread may read it.
 */
#include <stddef.h>
#include <stdint.h>

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

struct zcp_preprocess_params {
        uint32_t width, height;            /* NV12 frame, even */
        uint32_t in_w, in_h;               /* model input */
        float mean[3], std[3];
        uint32_t cell;                     /* motion cell size */
};

static inline uint32_t zcp_grid_w(uint32_t width, uint32_t cell) { return (width + cell - 1) / cell; }
static inline uint32_t zcp_grid_h(uint32_t height, uint32_t cell) { return (height + cell - 1) / cell; }

struct zcp_motion_params {
        uint32_t width, height, cell;
        float threshold, alpha;
};
