/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Summaries of a stream's statistics: the table printed at exit and the one
 * line of the periodic log summary and systemd's STATUS=. Read-only on the
 * stats (snapshots): any thread, no allocation.
 */
#include <stddef.h>
#include <stdio.h>

#include "core/metrics.h"

/* Prints the per-stream summary table (frames, fps, drops by reason, stage percentiles) to out. */
void zcp_summary_print(FILE *out, const char *stream, const struct zcp_stream_stats *stats);

/*
 * One-line summary for the log / systemd STATUS=: "name: up, 1200 frames, 29.9 fps now, e2e p50 ...,
 * 0 dropped", with the supervisor's state (metrics.h), the source's while it is not up, restarts,
 * and `fps`, the caller's current rate (the supervisor's, over the last seconds; not since start).
 */
int zcp_summary_line(char *buf, size_t size, const char *stream, const struct zcp_stream_stats *stats, double fps);

/* The counting part of that line: "1200 frames, 29.9 fps now, e2e p50 ..., 0 dropped" (for a stream
 * stopped, whose log line says so itself). */
int zcp_summary_counts(char *buf, size_t size, const struct zcp_stream_stats *stats, double fps);
