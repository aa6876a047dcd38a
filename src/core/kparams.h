/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The parameters of the per-frame computations around a model (preprocess, motion, a
 * detector's post-processing), shared by the C reference (src/infer/reference.c,
 * src/infer/detect.c) and the CUDA kernels' C ABI (kernels/zcp_kernels.h): below both infer/
 * and kernels/, so neither includes the other. Plain C types only.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The model input made from a frame (infer/reference.c spells out the float math): the frame,
 * converted to RGB and resized bilinearly into the region (zcp_pre_region) of the in_w x in_h
 * input (all of it: stretch; the largest centred rectangle of the frame's aspect: letterbox, the
 * rest padded with black), each value v scaled (pixels: unit v / 255, byte v) then (v - mean) / std.
 */
struct zcp_preprocess_params {
        uint32_t width, height;            /* NV12 frame, even */
        uint32_t in_w, in_h;               /* model input */
        float mean[3], std[3];
        uint32_t cell;                     /* motion cell size */
        bool nhwc;                         /* tensor [in_h][in_w][3] (plans); false: [3][in_h][in_w] */
        bool byte_pixels;                  /* values 0..255 (else / 255) */
        bool letterbox;                    /* keep the frame's aspect (else stretch) */
};

/* Where the frame lands in the model input: x0, y0, w, h in input pixels. */
static inline void zcp_pre_region(const struct zcp_preprocess_params *p, uint32_t *ret_x, uint32_t *ret_y,
                                  uint32_t *ret_w, uint32_t *ret_h)
{
        uint32_t w = p->in_w, h = p->in_h;

        if (p->letterbox) {
                /* scale = min(in_w / width, in_h / height), the other side rounded to the nearest pixel */
                if ((uint64_t)p->in_w * p->height <= (uint64_t)p->in_h * p->width) {
                        h = (uint32_t)(((uint64_t)p->height * p->in_w * 2 + p->width) / (2ull * p->width));
                        h = h < 1 ? 1 : h > p->in_h ? p->in_h : h;
                } else {
                        w = (uint32_t)(((uint64_t)p->width * p->in_h * 2 + p->height) / (2ull * p->height));
                        w = w < 1 ? 1 : w > p->in_w ? p->in_w : w;
                }
        }
        *ret_x = (p->in_w - w) / 2;
        *ret_y = (p->in_h - h) / 2;
        *ret_w = w;
        *ret_h = h;
}

/*
 * What zcpipe does with a detector's candidates (infer/detect.h): keep those with score >=
 * min_score whose class is in class_mask, map their boxes to frame pixels
 * (frame = (input - off) * scale, clamped to the frame), drop a box whose IoU with a kept box of
 * its class is over nms_iou, keep at most max_det.
 */
#define ZCP_DET_CLASSES_MAX 1024
struct zcp_det_params {
        float min_score, nms_iou;
        uint32_t max_det;
        uint32_t class_mask[ZCP_DET_CLASSES_MAX / 32];   /* bit c set: class c reported */
        float off_x, off_y, scale_x, scale_y;
        float frame_w, frame_h;
};

static inline uint32_t zcp_grid_w(uint32_t width, uint32_t cell) { return (width + cell - 1) / cell; }
static inline uint32_t zcp_grid_h(uint32_t height, uint32_t cell) { return (height + cell - 1) / cell; }

struct zcp_motion_params {
        uint32_t width, height, cell;
        float threshold, alpha;
};
