/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Formatting of a frame's result as one JSON line (the results-sink
 * format, documented in README.md) and of the summary table printed at exit.
 * Pure functions of their inputs: any thread, no allocation.
 */
#include <stddef.h>
#include <stdio.h>

#include "core/frame.h"
#include "core/metrics.h"

struct zcp_model;

/*
 * Writes the JSON object for `f` and its result (one line, '\n'-terminated)
 * into buf. `labels` may be NULL. Returns the length, or -ENOSPC when buf is
 * too small (the line is then not usable).
 */
int zcp_publish_format(char *buf, size_t size, const char *stream, const struct zcp_frame *f,
                       const struct zcp_result *res, char *const *labels);

/* Prints the per-stream summary table (frames, fps, drops by reason, stage percentiles) to out. */
void zcp_summary_print(FILE *out, const char *stream, const struct zcp_stream_stats *stats);

/* One-line summary for the log / systemd STATUS=: "name: 29.9 fps, p99 3.1 ms, 0 dropped". */
int zcp_summary_line(char *buf, size_t size, const char *stream, const struct zcp_stream_stats *stats);
