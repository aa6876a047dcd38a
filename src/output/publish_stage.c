/* SPDX-License-Identifier: MIT */
/*
 * The publish stage (core/stage.h): the frame's result as one JSON line to
 * the stream's results sink. The runner then retires the frame (latency,
 * counters, frame log) and frees its slot.
 *
 * In: frames with results. Out: one line per frame to the sink. Blocks: in
 * the sink's write. Drops: no frame; a line longer than the buffer is not
 * written and counted as a sink loss (too_long), a write error is logged
 * (rate-limited) and counted by the sink.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/clock.h"
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
        const struct zcp_plan *model;   /* what the result says; NULL: motion only */
        char line[LINE_MAX_BYTES];
};

static int publish_open(const struct zcp_stage_env *env, void **ret_ctx)
{
        struct publish_stage *p = malloc(sizeof(*p));

        if (!p)
                return -ENOMEM;
        p->model = env->model;
        *ret_ctx = p;
        return 0;
}

static void publish_close(void *ctx)
{
        free(ctx);
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
        } else if (env->sink->write(env->sink_ctx, p->line, (size_t)n) < 0) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC, "%s: cannot write results to %s output",
                                    env->stream, env->sink->name);
        }
        /* The live page: a copy only while someone watches, skipped when its buffer is busy. */
        zcp_snapshot_offer(env->snapshot, slot, p->model, zcp_now_ns());
        return 0;
}

const struct zcp_stage_ops zcp_stage_publish = {
        .name = "publish",
        .open = publish_open,
        .close = publish_close,
        .process = publish_process,
};
