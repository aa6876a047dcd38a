/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Formatting of a frame's result as one JSON line (the results-sink
 * format, documented in README.md).
 * Pure functions of their inputs: any thread, no allocation.
 */
#include <stddef.h>
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
