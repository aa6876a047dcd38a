/* SPDX-License-Identifier: MIT */
/*
 * JSON line of one frame's result. Hand-written with snprintf into a
 * caller-owned buffer: no allocation on the per-frame path. Labels are
 * escaped; numbers are plain.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "output/publish.h"
#include "output/sink.h"

struct out {
        char *p;
        size_t left;
        bool overflow;
};

static void put(struct out *o, const char *fmt, ...) ZCP_PRINTF(2, 3);

static void put(struct out *o, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (o->overflow)
                return;
        va_start(ap, fmt);
        n = vsnprintf(o->p, o->left, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n >= o->left) {
                o->overflow = true;
                return;
        }
        o->p += n;
        o->left -= (size_t)n;
}

static void put_json_string(struct out *o, const char *s)
{
        size_t n;

        put(o, "\"");
        if (o->overflow)
                return;
        n = zcp_json_escape(o->p, o->left, s);
        if (n >= o->left) {
                o->overflow = true;
                return;
        }
        o->p += n;
        o->left -= n;
        put(o, "\"");
}

/* A class's name: its label, else its number. */
static void put_class(struct out *o, uint32_t cls, const struct zcp_plan *model)
{
        if (model && model->labels && cls < model->head.classes) {
                put_json_string(o, model->labels[cls]);
                return;
        }
        put(o, "\"%u\"", cls);
}

int zcp_publish_format(char *buf, size_t size, const char *stream, const struct zcp_frame *f,
                       const struct zcp_result *res, const struct zcp_plan *model)
{
        struct out o = { buf, size, false };

        put(&o, "{\"stream\":");
        put_json_string(&o, stream);
        put(&o, ",\"seq\":%" PRIu64 ",\"width\":%u,\"height\":%u,\"pts_ns\":%" PRIu64, f->seq, f->width, f->height,
            f->pts_ns);
        if (f->flags & ZCP_FRAME_PTS_REPEAT)
                put(&o, ",\"pts_repeat\":true");
        if (f->sender_ns)
                put(&o, ",\"sender_ns\":%" PRIu64, f->sender_ns);
        put(&o, ",\"t\":{");
        for (int i = 0; i <= ZCP_TS_PUBLISH_START; i++)
                put(&o, "%s\"%s\":%" PRIu64, i ? "," : "", zcp_ts_names[i], f->t[i]);
        put(&o, "}");
        put(&o, ",\"motion\":{\"moving_cells\":%u,\"total_cells\":%u,\"fraction\":%.6g,\"bbox\":",
            res->moving_cells, res->total_cells, (double)res->moving_fraction);
        if (res->bbox[0] < 0)
                put(&o, "null}");
        else
                put(&o, "[%d,%d,%d,%d]}", res->bbox[0], res->bbox[1], res->bbox[2], res->bbox[3]);
        if (model && model->head.kind == ZCP_HEAD_CENTERNET) {
                put(&o, ",\"detections\":[");
                for (uint32_t i = 0; i < res->det_count && i < ZCP_DET_MAX; i++) {
                        const struct zcp_detection *d = &res->det[i];
                        put(&o, "%s{\"class\":", i ? "," : "");
                        put_class(&o, d->cls, model);
                        put(&o, ",\"id\":%u,\"score\":%.4f,\"box\":[%.1f,%.1f,%.1f,%.1f]}", d->cls, (double)d->score,
                            (double)d->box[0], (double)d->box[1], (double)d->box[2], (double)d->box[3]);
                }
                put(&o, "]}\n");
        } else {
                put(&o, ",\"topk\":[");
                for (uint32_t i = 0; i < res->topk_count && i < ZCP_TOPK_MAX; i++) {
                        put(&o, "%s{\"class\":%u", i ? "," : "", res->topk_class[i]);
                        if (model && model->labels && res->topk_class[i] < model->head.classes) {
                                put(&o, ",\"label\":");
                                put_json_string(&o, model->labels[res->topk_class[i]]);
                        }
                        put(&o, ",\"prob\":%.6g}", (double)res->topk_prob[i]);
                }
                put(&o, "]}\n");
        }
        if (o.overflow)
                return -ENOSPC;
        return (int)(size - o.left);
}

/* How long a class's name is in a line: its label as escaped, else its number. */
static size_t class_text_len(const struct zcp_plan *model, uint32_t cls)
{
        if (model->labels)
                return zcp_json_escape(NULL, 0, model->labels[cls]);
        return (size_t)snprintf(NULL, 0, "%u", cls);
}

/* The `count` classes with the longest names, longest first, into `out`; 0 or -ENOMEM. */
static int longest_classes(const struct zcp_plan *model, uint32_t count, uint32_t *out)
{
        uint32_t classes = model->head.classes;
        size_t *len = malloc(classes * sizeof(*len));

        if (!len)
                return -ENOMEM;
        for (uint32_t c = 0; c < classes; c++)
                len[c] = class_text_len(model, c) + 1;   /* + 1: 0 marks a class taken */
        for (uint32_t i = 0; i < count; i++) {
                uint32_t best = 0;

                for (uint32_t c = 1; c < classes; c++)
                        if (len[c] > len[best])
                                best = c;
                out[i] = best;
                len[best] = 0;
        }
        free(len);
        return 0;
}

size_t zcp_publish_line_bound(const char *stream, const struct zcp_plan *model, uint32_t top_k,
                              uint32_t max_detections)
{
        struct zcp_frame f = { 0 };
        struct zcp_result *res = calloc(1, sizeof(*res));
        char *buf = malloc(ZCP_PUBLISH_LINE_MAX);
        uint32_t classes = model ? model->head.classes : 0;
        size_t bound = 0;
        int n;

        if (!res || !buf)
                goto out;
        /* Every number at its widest: the widest text each format gives for its type or range. */
        f.seq = f.pts_ns = f.sender_ns = UINT64_MAX;
        f.width = f.height = UINT32_MAX;
        f.flags = ZCP_FRAME_PTS_REPEAT;
        for (int i = 0; i < ZCP_TS_COUNT; i++)
                f.t[i] = UINT64_MAX;
        res->moving_cells = res->total_cells = UINT32_MAX;
        res->moving_fraction = 1.23457e-05f;   /* %.6g: 11 characters, the most a fraction in [0, 1] takes */
        for (int i = 0; i < 4; i++)
                res->bbox[i] = INT32_MIN;
        if (model && classes && model->head.kind == ZCP_HEAD_CENTERNET) {
                uint32_t longest;

                if (longest_classes(model, 1, &longest) < 0)
                        goto out;
                res->det_count = max_detections < ZCP_DET_MAX ? max_detections : ZCP_DET_MAX;
                for (uint32_t i = 0; i < res->det_count; i++) {
                        res->det[i].cls = longest;
                        res->det[i].score = 0.5f;   /* %.4f of a score in [0, 1]: 6 characters */
                        for (int k = 0; k < 4; k++)
                                res->det[i].box[k] = -99999.9f;   /* wider than any box clamped to a frame */
                }
        } else if (model && classes) {
                res->topk_count = top_k < ZCP_TOPK_MAX ? top_k : ZCP_TOPK_MAX;
                if (res->topk_count > classes)
                        res->topk_count = classes;
                if (longest_classes(model, res->topk_count, res->topk_class) < 0)
                        goto out;
                for (uint32_t i = 0; i < res->topk_count; i++)
                        res->topk_prob[i] = 1.23457e-05f;
        }
        n = zcp_publish_format(buf, ZCP_PUBLISH_LINE_MAX, stream, &f, res, model);
        bound = n < 0 ? SIZE_MAX : (size_t)n;
out:
        free(res);
        free(buf);
        return bound;
}

int zcp_publish_check_fits(const struct zcp_stream_config *cfg, const struct zcp_plan *model, char *msg, size_t size)
{
        const struct zcp_sink_ops *ops = zcp_sink_find(cfg->output.type);
        size_t limit = ops && ops->max_line ? ops->max_line : ZCP_PUBLISH_LINE_MAX;
        bool detector;
        uint32_t n, fit;
        size_t bound, longest = 0;
        const char *key;

        if (!cfg->model.enabled)
                model = NULL;
        detector = model && model->head.kind == ZCP_HEAD_CENTERNET;
        n = detector ? cfg->model.max_detections : cfg->model.top_k;
        bound = zcp_publish_line_bound(cfg->name, model, cfg->model.top_k, cfg->model.max_detections);
        if (bound == 0)
                return -ENOMEM;
        if (bound <= limit)
                return 0;
        /* The most classes or detections that fit. */
        for (fit = n; fit > 0; fit--) {
                size_t b = zcp_publish_line_bound(cfg->name, model, detector ? cfg->model.top_k : fit,
                                                  detector ? fit : cfg->model.max_detections);

                if (b > 0 && b <= limit)
                        break;
        }
        for (uint32_t c = 0; model && model->labels && c < model->head.classes; c++)
                if (strlen(model->labels[c]) > longest)
                        longest = strlen(model->labels[c]);
        key = detector ? "model.max_detections" : "model.top_k";
        snprintf(msg, size,
                 "stream %s: a result line can be %s%zu bytes (%s: %u, labels of up to %zu bytes), over the "
                 "%zu-byte %s of output type %s; fix: %s: %u fits, or shorter labels (model.labels)",
                 cfg->name, bound == SIZE_MAX ? "over " : "", bound == SIZE_MAX ? (size_t)ZCP_PUBLISH_LINE_MAX : bound,
                 key, n, longest, limit - 1, ops && ops->max_line ? "message limit" : "line limit",
                 zcp_output_type_names[cfg->output.type], key, fit);
        return ZCP_ERR_CONFIG;
}
