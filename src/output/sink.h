/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Results sinks: where publish writes one JSON object per frame (one line).
 * `stdout`, `file` (appended), `unix` (zcpipe listens on a SOCK_STREAM unix
 * socket and streams the lines to every connected client; a client that
 * cannot keep up is disconnected, never waited for), `none`.
 *
 * Threads: open/close on the main thread, write on the stream's publish
 * thread only.
 */
#include <stddef.h>

#include "core/config.h"

struct zcp_sink_ctx;

struct zcp_sink_ops {
        const char *name;   /* matches zcp_output_type_names */
        int (*open)(const struct zcp_output_config *cfg, struct zcp_sink_ctx **ret_ctx);
        /* Writes one complete line (with its '\n'). Never blocks for long. */
        int (*write)(struct zcp_sink_ctx *ctx, const char *line, size_t len);
        void (*close)(struct zcp_sink_ctx *ctx);
};

const struct zcp_sink_ops *zcp_sink_find(enum zcp_output_type type);
