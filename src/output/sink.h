/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Results sinks: where publish writes one JSON object per frame (one line).
 * `stdout`, `file` (appended), `unix` (zcpipe listens on a SOCK_STREAM unix
 * socket and streams the lines to every connected client; a client that
 * cannot keep up is disconnected, never waited for), `none`, and `mqtt`
 * (mqtt.h: a broker, through its own network thread). write() only
 * queues the line (bounded, oldest dropped when full); a writer thread per
 * sink writes whole lines (sink.c explains how for each kind of output).
 *
 * Threads: open/close on the main thread, write on the stream's publish
 * thread only.
 *
 * Accounting (struct zcp_sink_stats, core/metrics.h; exported per stream and
 * sink as zcpipe_sink_*): open() is given the stream's counters and the sink
 * keeps them: `written` when a whole line reached its destination, `lost`
 * by reason (zcp_sink_loss_names: "queue_full", "write_error", "too_long")
 * for a line that never will, `queued` for lines accepted but not written
 * yet, `reconnects` for sinks that connect out. A line is counted exactly
 * once as written or lost (lines still queued at close are lost).
 */
#include <stddef.h>

#include "core/config.h"
#include "core/metrics.h"   /* enum zcp_sink_loss, zcp_sink_loss_names, struct zcp_sink_stats */

struct zcp_sink_ctx;

struct zcp_sink_ops {
        const char *name;   /* matches zcp_output_type_names */
        /* `stats` outlives the sink; the sink counts into it. */
        int (*open)(const struct zcp_output_config *cfg, struct zcp_sink_stats *stats,
                    struct zcp_sink_ctx **ret_ctx);
        /*
         * Hands over one complete line (with its '\n'); copies it, never
         * blocks on the destination. Returns 0 when accepted (counted later
         * as written or lost), negative errno when refused (counted).
         */
        int (*write)(struct zcp_sink_ctx *ctx, const char *line, size_t len);
        void (*close)(struct zcp_sink_ctx *ctx);
        /* The longest line (with its '\n') it takes; 0: any the publish stage writes (ZCP_PUBLISH_LINE_MAX). */
        size_t max_line;
};

const struct zcp_sink_ops *zcp_sink_find(enum zcp_output_type type);
