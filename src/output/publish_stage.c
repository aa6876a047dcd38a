/* SPDX-License-Identifier: MIT */
/*
 * The publish stage (core/stage.h): the frame's result as one JSON line to
 * the stream's results sink, and the frame to the live page's snapshot. The
 * runner then retires the frame (latency, counters, frame log) and frees its
 * slot. The stage opens the sink the config names and the snapshot at open;
 * the sink drains when the stream is joined (drain) and both go at close.
 *
 * In: frames with results. Out: one line per frame to the sink. Blocks: in
 * the sink's write. Drops: no frame; a line longer than the buffer is not
 * written and counted as a sink loss (too_long), a write error is logged
 * (rate-limited) and counted by the sink.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/err.h"
#include "core/kparams.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/ring.h"
#include "core/stage.h"
#include "model/plan.h"
#include "output/publish.h"
#include "output/sink.h"
#include "output/snapshot.h"

#define LINE_MAX_BYTES ZCP_PUBLISH_LINE_MAX

struct publish_stage {
        const struct zcp_plan *model;        /* what the result says; NULL: motion only */
        const struct zcp_sink_ops *sink_ops;
        struct zcp_sink_ctx *sink;           /* NULL once drained */
        struct zcp_snapshot *snapshot;       /* our reference; NULL without the live page */
        char line[LINE_MAX_BYTES];
};

static int publish_open(const struct zcp_stage_env *env, void **ret_ctx)
{
        const struct zcp_output_config *out = &env->cfg->output;
        struct publish_stage *p = calloc(1, sizeof(*p));
        int r;

        if (!p)
                return -ENOMEM;
        p->model = env->model;
        p->sink_ops = zcp_sink_find(out->type);
        if (!p->sink_ops) {
                zcp_err("%s: output type '%s' is not built into this zcpipe (see meson summary)", env->stream,
                        zcp_output_type_names[out->type]);
                free(p);
                return ZCP_ERR_CONFIG;
        }
        {
                char msg[512];

                /* A line the output cannot take would be lost for every frame: refused, as at --check. */
                r = zcp_publish_check_fits(env->cfg, env->model, msg, sizeof(msg));
                if (r < 0) {
                        zcp_err("%s", r == ZCP_ERR_CONFIG ? msg : zcp_strerror(r));
                        free(p);
                        return r;
                }
        }
        r = p->sink_ops->open(out, &env->stats->sink, &p->sink);
        if (r < 0) {
                free(p);
                return ZCP_ERR_CONFIG;
        }
        r = zcp_snapshot_new(env->cfg, &p->snapshot);
        if (r < 0) {
                p->sink_ops->close(p->sink);
                free(p);
                return r;
        }
        *ret_ctx = p;
        return 0;
}

/* Nothing publishes any more: the sink drains (bounded) and its counts are final. */
static void publish_drain(void *ctx)
{
        struct publish_stage *p = ctx;

        if (p->sink)
                p->sink_ops->close(p->sink);
        p->sink = NULL;
}

static void publish_close(void *ctx)
{
        struct publish_stage *p = ctx;

        if (!p)
                return;
        publish_drain(p);
        zcp_snapshot_unref(p->snapshot);
        free(p);
}

static void publish_facts(const void *ctx, struct zcp_stage_facts *facts)
{
        const struct publish_stage *p = ctx;

        facts->sink = p->sink_ops->name;
        facts->snapshot = p->snapshot;
}

static int publish_process(void *ctx, const struct zcp_stage_env *env, struct zcp_slot *slot)
{
        struct publish_stage *p = ctx;
        int n = zcp_publish_format(p->line, sizeof(p->line), env->stream, &slot->frame, slot->result, p->model);

        if (p->model && p->model->head.kind == ZCP_HEAD_CENTERNET)
                zcp_stats_detections(env->stats, slot->result->det, slot->result->det_count);

        if (n < 0) {
                zcp_sink_stats_lose(&env->stats->sink, ZCP_SINK_LOSS_TOO_LONG);
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC,
                                    "%s: a result line is longer than %d bytes (long labels?): not written",
                                    env->stream, LINE_MAX_BYTES);
        } else if (p->sink_ops->write(p->sink, p->line, (size_t)n) < 0) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC, "%s: cannot write results to %s output",
                                    env->stream, p->sink_ops->name);
        }
        /* The live page: a copy only while someone watches, skipped when its buffer is busy. */
        zcp_snapshot_offer(p->snapshot, slot, p->model, zcp_now_ns());
        return 0;
}

const struct zcp_stage_ops zcp_stage_publish = {
        .name = "publish",
        .open = publish_open,
        .drain = publish_drain,
        .close = publish_close,
        .process = publish_process,
        .facts = publish_facts,
};
