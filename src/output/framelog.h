/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The per-frame log (metrics.frame_log): one JSON line per frame that
 * reaches publish, dropped ones included, with every timestamp it carries.
 *
 *   {"stream":"cam0","seq":41,"pts_ns":1366666666,"dropped":false,"drop_reason":null,
 *    "t":{"capture":...,"convert_enter":...,...,"publish_end":...},"e2e_ns":8123456}
 *
 * Timestamps are CLOCK_MONOTONIC ns; a stage a dropped frame never reached
 * is null, and e2e_ns is null for dropped frames.
 *
 * Publish threads only copy the line into a bounded in-memory buffer (a
 * short mutex, no allocation, no I/O); a writer thread ("zcp-framelog")
 * appends it to the file. When the file would grow past max_bytes it is
 * rotated: path.(keep-1) -> path.keep, ..., path -> path.1, then a fresh
 * path. When the writer falls behind (slow disk) lines are dropped and
 * counted, never waited for. Ownership: the caller of open owns the log and
 * closes it after every stream that writes to it has been joined.
 */
#include "core/config.h"
#include "core/frame.h"

struct zcp_framelog;

/*
 * Opens (appends to) cfg->path and starts the writer thread. cfg->path empty:
 * returns 0 with *ret_framelog = NULL (no log). Returns -errno, logged with
 * the path, when the file cannot be opened. Main thread.
 */
int zcp_framelog_open(const struct zcp_frame_log_config *cfg, struct zcp_framelog **ret_framelog);

/*
 * Publish threads of every stream (thread-safe; no allocation; never blocks
 * on I/O). Logs frame `f` of stream `stream`.
 */
void zcp_framelog_write(struct zcp_framelog *fl, const char *stream, const struct zcp_frame *f);

/* Lines dropped so far because the writer fell behind or the file could not be written. Any thread. */
uint64_t zcp_framelog_lost(const struct zcp_framelog *fl);
/* Lines written whole to the file so far. Any thread. */
uint64_t zcp_framelog_written(const struct zcp_framelog *fl);

/*
 * Rotations that could not rename the live file (read-only directory,
 * something in the way): the file was then appended to past max_bytes,
 * never truncated. Any thread.
 */
uint64_t zcp_framelog_rotate_failed(const struct zcp_framelog *fl);

/* Writes what is buffered, stops the writer and closes the file. Accepts NULL. Main thread. */
void zcp_framelog_close(struct zcp_framelog *fl);

/* Formats the line for `f` (with '\n') into buf; returns its length or -ENOSPC. Any thread (tests). */
int zcp_framelog_format(char *buf, size_t size, const char *stream, const struct zcp_frame *f);
