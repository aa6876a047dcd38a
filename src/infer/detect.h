/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * What zcpipe does with a detector's candidates (core/kparams.h, struct zcp_det_params): the
 * score threshold, the class filter, boxes to frame pixels, per-class non-maximum suppression
 * and the top N. This is the C reference the CUDA head mirrors; the CPU backends call it.
 * Pure: allocates nothing, any thread.
 */
#include <stdint.h>

#include "core/frame.h"
#include "core/kparams.h"

/*
 * cand: n candidates in model-input pixels, best first (a decode's order). Writes at most
 * p->max_det detections (frame pixels) into ret and returns how many. In float operations,
 * for a candidate that passes the score and class tests:
 *   x0 = (box0 - off_x) * scale_x, clamped to [0, frame_w]; y likewise with off_y, scale_y,
 *   frame_h (box1, box3); the clamp is fminf(fmaxf(v, 0), frame side)
 *   then, against every detection of its class already kept:
 *   iw = min(x1a, x1b) - max(x0a, x0b), ih likewise, inter = max(iw, 0) * max(ih, 0),
 *   area = (x1 - x0) * (y1 - y0), union = (area_a + area_b) - inter,
 *   it is dropped when union > 0 and inter / union > nms_iou.
 */
uint32_t zcp_detect_post(const struct zcp_detection *cand, uint32_t n, const struct zcp_det_params *p,
                         struct zcp_detection *ret);

/* Whether class c passes p's class filter. */
static inline int zcp_det_class_on(const struct zcp_det_params *p, uint32_t c)
{
        return c < ZCP_DET_CLASSES_MAX && (p->class_mask[c / 32] >> (c % 32) & 1u);
}
