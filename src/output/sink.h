/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Results sinks: where publish writes one JSON object per frame (one line).
 * `stdout`, `file` (appended), `unix` (zcpipe listens on a SOCK_STREAM unix
 * socket and streams the lines to every connected client; a client that
 * cannot keep up is disconnected, never waited for), `none`, and `mqtt`
 * (mqtt.h: a broker, through a bounded queue and its own network thread).
 *
 * Threads: open/close on the main thread, write on the stream's publish
 * thread only.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

/* Why a result line did not reach the sink's destination. */
enum zcp_sink_loss {
        ZCP_SINK_LOSS_QUEUE_FULL,    /* the sink's bounded queue overflowed (oldest dropped) */
        ZCP_SINK_LOSS_WRITE_ERROR,   /* the destination refused it (I/O error, gone) */
        ZCP_SINK_LOSS_TOO_LONG,      /* the line does not fit the sink's limits */
        ZCP_SINK_LOSS_COUNT
};
extern const char *const zcp_sink_loss_names[ZCP_SINK_LOSS_COUNT];   /* "queue_full", "write_error", "too_long" */

/*
 * Per-stream sink counters (kept in struct zcp_stream_stats as `sink`,
 * exported as zcpipe_sink_*). Written by the sink (publish thread or the
 * sink's own thread), read by any thread.
 *   written:    lines delivered (mqtt: acknowledged by the broker at QoS 1)
 *   queued:     gauge, lines waiting in the sink's queue now
 *   lost:       lines that will never be delivered, by reason
 *   reconnects: times the sink re-established its connection
 */
struct zcp_sink_stats {
        _Atomic uint64_t written;
        _Atomic uint64_t queued;
        _Atomic uint64_t lost[ZCP_SINK_LOSS_COUNT];
        _Atomic uint64_t reconnects;
};

struct zcp_sink_ctx;

struct zcp_sink_ops {
        const char *name;   /* matches zcp_output_type_names */
        /* `stream` (the stream's name) and `stats` outlive the sink. */
        int (*open)(const struct zcp_output_config *cfg, const char *stream, struct zcp_sink_stats *stats,
                    struct zcp_sink_ctx **ret_ctx);
        /* Writes one complete line (with its '\n'). Never blocks for long. */
        int (*write)(struct zcp_sink_ctx *ctx, const char *line, size_t len);
        void (*close)(struct zcp_sink_ctx *ctx);
};

const struct zcp_sink_ops *zcp_sink_find(enum zcp_output_type type);
