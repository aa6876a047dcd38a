/* SPDX-License-Identifier: MIT */
/*
 * Backend selection (backend.h): resolves the configured kind to an ops
 * table, probing CUDA where it is built in, and logs the choice once.
 * Main thread, at stream start.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "infer/backend.h"
#include "model/model.h"

/* Every backend this build has, indexed by enum zcp_backend_kind (auto is resolved below). */
static const struct zcp_backend_ops *const backends[ZCP_BACKEND_KIND_COUNT] = {
#if HAVE_CUDA
        [ZCP_BACKEND_CUDA] = &zcp_backend_cuda,
#endif
        [ZCP_BACKEND_CPU] = &zcp_backend_cpu,
};

int zcp_backend_choose(enum zcp_backend_kind kind, uint32_t device, struct zcp_backend_choice *ret)
{
        const struct zcp_backend_ops *cuda = backends[ZCP_BACKEND_CUDA];
        struct zcp_backend_choice c = { .ops = backends[ZCP_BACKEND_CPU] };
        char why[sizeof(c.why) - 32] = "";
        int r;

        if ((int)kind < 0 || kind >= ZCP_BACKEND_KIND_COUNT) {
                zcp_err("backend: unknown kind %d", (int)kind);
                return -EINVAL;
        }
        if (kind == ZCP_BACKEND_CPU) {
                snprintf(c.why, sizeof(c.why), "configured");
                *ret = c;
                return 0;
        }
        if (!cuda) {
                if (kind == ZCP_BACKEND_CUDA) {
                        zcp_err("backend: cuda asked for, but this build has no CUDA support; fix: build with CUDA "
                                "(meson summary: cuda) or use backend: cpu");
                        return -ENODEV;
                }
                snprintf(c.why, sizeof(c.why), "this build has no CUDA support");
                zcp_info("backend: auto -> cpu (%s)", c.why);
                *ret = c;
                return 0;
        }
        r = cuda->probe(device, why, sizeof(why));
        if (r < 0) {
                if (!why[0])
                        snprintf(why, sizeof(why), "probe failed: %s", strerror(-r));
                if (kind == ZCP_BACKEND_CUDA) {
                        zcp_err("backend: cuda asked for, but GPU %u cannot be used: %s", device, why);
                        return -ENODEV;
                }
                /* No GPU at all is the normal case of a CPU host; a GPU we cannot use is not. */
                c.degraded = r != -ENODEV;
                if (c.degraded) {
                        snprintf(c.why, sizeof(c.why), "GPU %u cannot be used: %s", device, why);
                        zcp_warn("backend: auto -> cpu, %s", c.why);
                } else {
                        snprintf(c.why, sizeof(c.why), "%s", why);
                        zcp_info("backend: auto -> cpu (%s)", c.why);
                }
                *ret = c;
                return 0;
        }
        c.ops = cuda;
        snprintf(c.why, sizeof(c.why), "%s", kind == ZCP_BACKEND_AUTO ? "GPU usable" : "configured");
        if (kind == ZCP_BACKEND_AUTO)
                zcp_info("backend: auto -> cuda (GPU %u usable)", device);
        *ret = c;
        return 0;
}

int zcp_backend_select(enum zcp_backend_kind kind, uint32_t device, const struct zcp_backend_ops **ret_ops)
{
        struct zcp_backend_choice c;
        int r = zcp_backend_choose(kind, device, &c);

        if (r == 0)
                *ret_ops = c.ops;
        return r;
}

uint32_t zcp_backend_gpu_count(void)
{
        const struct zcp_backend_ops *cuda = backends[ZCP_BACKEND_CUDA];

        return cuda && cuda->devices ? cuda->devices() : 0;
}

bool zcp_backend_gpu_usable(uint32_t device)
{
        const struct zcp_backend_ops *cuda = backends[ZCP_BACKEND_CUDA];
        char why[384] = "";
        int r;

        if (!cuda)
                return false;
        r = cuda->probe(device, why, sizeof(why));
        if (r < 0)
                zcp_warn("placement: GPU %u takes no stream of gpu.device auto: %s", device,
                         why[0] ? why : strerror(-r));
        return r == 0;
}

int zcp_backend_params_init(struct zcp_backend_params *p, const struct zcp_stream_config *cfg,
                            const struct zcp_plan *model, uint32_t width, uint32_t height, const char *stream_name,
                            char *err, size_t errlen)
{
        const struct zcp_model_config *mc = &cfg->model;
        uint32_t rx, ry, rw, rh;
        int r;

        memset(p, 0, sizeof(*p));
        p->cfg = cfg;
        p->model = mc->enabled ? model : NULL;
        p->width = width;
        p->height = height;
        p->stream_name = stream_name;
        p->pre.width = width;
        p->pre.height = height;
        p->pre.cell = cfg->motion.cell;
        p->pre.nhwc = true;
        if (!p->model)
                return 0;
        {
                const struct zcp_plan_tensor *in = &model->tensors[model->input.t];
                p->pre.in_w = in->w;
                p->pre.in_h = in->h;
        }
        p->pre.byte_pixels = mc->pixels == ZCP_MPIX_AUTO ? model->input.pixels == ZCP_PIXELS_BYTE
                                                         : mc->pixels == ZCP_MPIX_BYTE;
        for (int k = 0; k < 3; k++) {
                p->pre.mean[k] = mc->mean_set ? mc->mean[k] : model->input.mean[k];
                p->pre.std[k] = mc->std_set ? mc->std[k] : model->input.std[k];
        }
        p->pre.letterbox = mc->resize == ZCP_RESIZE_LETTERBOX;
        p->top_k = mc->top_k < ZCP_TOPK_MAX ? mc->top_k : ZCP_TOPK_MAX;
        if (p->top_k > model->head.classes)
                p->top_k = model->head.classes;
        p->det.min_score = mc->min_score;
        p->det.nms_iou = mc->nms_iou;
        p->det.max_det = mc->max_detections < ZCP_DET_MAX ? mc->max_detections : ZCP_DET_MAX;
        if ((r = zcp_model_class_mask(model, mc->classes, p->det.class_mask, err, errlen)) < 0)
                return r;
        zcp_pre_region(&p->pre, &rx, &ry, &rw, &rh);
        p->det.off_x = (float)rx;
        p->det.off_y = (float)ry;
        p->det.scale_x = (float)width / (float)rw;
        p->det.scale_y = (float)height / (float)rh;
        p->det.frame_w = (float)width;
        p->det.frame_h = (float)height;
        return 0;
}
