/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Formatting of a frame's result as one JSON line (the results-sink
 * format, documented in README.md).
 * Pure functions of their inputs: any thread, no allocation.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/frame.h"
#include "core/metrics.h"
#include "model/plan.h"

/*
 * The longest result line: 100 detections whose labels are 256 bytes of characters JSON
 * escapes, within the results sink's 64 KiB write.
 */
#define ZCP_PUBLISH_LINE_MAX (60u * 1024)


/*
 * Writes the JSON object for `f` and its result (one line, '\n'-terminated) into buf: the
 * frame, its timestamps, motion, then for a detector ("detections": class label, id, score,
 * box in frame pixels) or a classifier ("topk": class, label, prob) what `model` is (NULL: no
 * model, an empty topk). Returns the length, or -ENOSPC when buf is too small (the line is then
 * not usable).
 */
int zcp_publish_format(char *buf, size_t size, const char *stream, const struct zcp_frame *f,
                       const struct zcp_result *res, const struct zcp_plan *model);

/*
 * The longest line zcp_publish_format() can write for stream `stream` with
 * `model` (NULL: none), '\n' included: every number at its widest, and for
 * a classifier the `top_k` classes with the longest labels (as escaped),
 * for a detector `max_detections` detections of the class with the longest
 * label. SIZE_MAX when it is over ZCP_PUBLISH_LINE_MAX; 0 when out of
 * memory. Main thread (--check, a stream's open): it allocates.
 */
size_t zcp_publish_line_bound(const char *stream, const struct zcp_plan *model, uint32_t top_k,
                              uint32_t max_detections);

/*
 * Whether every line stream `cfg` can produce with `model` (NULL: none, or
 * model disabled) fits its output: the sink's max_line (MQTT: its message
 * limit), else ZCP_PUBLISH_LINE_MAX. Returns 0, or ZCP_ERR_CONFIG with one
 * line in `msg` giving the bound, the limit and the fix (the top_k or
 * max_detections that fits). Main thread (--check, the publish stage's open).
 */
struct zcp_stream_config;
int zcp_publish_check_fits(const struct zcp_stream_config *cfg, const struct zcp_plan *model, char *msg, size_t size);
