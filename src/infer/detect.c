/* SPDX-License-Identifier: MIT */
/*
 * A detector's candidates to the detections of a result (infer/detect.h). Compiled with
 * -ffp-contract=off: the CUDA head computes the same floats.
 */
#include "infer/detect.h"

#include <math.h>

static float clampf(float v, float hi)
{
        return fminf(fmaxf(v, 0.0f), hi);
}

static float iou(const float *a, const float *b)
{
        float iw = fminf(a[2], b[2]) - fmaxf(a[0], b[0]);
        float ih = fminf(a[3], b[3]) - fmaxf(a[1], b[1]);
        float inter = fmaxf(iw, 0.0f) * fmaxf(ih, 0.0f);
        float area_a = (a[2] - a[0]) * (a[3] - a[1]);
        float area_b = (b[2] - b[0]) * (b[3] - b[1]);
        float uni = (area_a + area_b) - inter;

        return uni > 0.0f ? inter / uni : 0.0f;
}

uint32_t zcp_detect_post(const struct zcp_detection *cand, uint32_t n, const struct zcp_det_params *p,
                         struct zcp_detection *ret)
{
        uint32_t kept = 0;

        for (uint32_t i = 0; i < n && kept < p->max_det; i++) {
                const struct zcp_detection *c = &cand[i];
                struct zcp_detection d;
                bool drop = false;

                if (!(c->score >= p->min_score) || !zcp_det_class_on(p, c->cls))
                        continue;
                d.cls = c->cls;
                d.score = c->score;
                d.box[0] = clampf((c->box[0] - p->off_x) * p->scale_x, p->frame_w);
                d.box[1] = clampf((c->box[1] - p->off_y) * p->scale_y, p->frame_h);
                d.box[2] = clampf((c->box[2] - p->off_x) * p->scale_x, p->frame_w);
                d.box[3] = clampf((c->box[3] - p->off_y) * p->scale_y, p->frame_h);
                for (uint32_t j = 0; j < kept && !drop; j++)
                        drop = ret[j].cls == d.cls && iou(ret[j].box, d.box) > p->nms_iou;
                if (!drop)
                        ret[kept++] = d;
        }
        return kept;
}
