/* SPDX-License-Identifier: MIT */
/*
 * JSON line of one frame's result. Hand-written with snprintf into a
 * caller-owned buffer: no allocation on the per-frame path. Labels are
 * escaped; numbers are plain.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "core/log.h"
#include "output/publish.h"

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
