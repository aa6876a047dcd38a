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


/*
 * Writes the JSON object for `f` and its result (one line, '\n'-terminated)
 * into buf. `labels` may be NULL. Returns the length, or -ENOSPC when buf is
 * too small (the line is then not usable).
 */
int zcp_publish_format(char *buf, size_t size, const char *stream, const struct zcp_frame *f,
                       const struct zcp_result *res, char *const *labels);
