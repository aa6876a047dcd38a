/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * V4L2 source: the reconnect state machine (v4l2_conn.c). Writes the
 * "reconnect" fields of the context (v4l2_priv.h). Source thread, and the
 * main thread at start. Calls v4l2_geom.h, v4l2_buf.h and v4l2_fmt.h only.
 */
#include "capture/v4l2_priv.h"

uint32_t zcp_v4l2_backoff_ms(const struct zcp_source_ctx *c);
/* State BACKOFF until now + the back-off for c->failures. */
void zcp_v4l2_schedule_retry(struct zcp_source_ctx *c);
/* Exports the capture path in use and says, once per connection, how the camera streams. */
void zcp_v4l2_log_streaming(const struct zcp_source_ctx *c);
/* A fault on a working connection: tear down, count, retry (at once if it had delivered). */
int zcp_v4l2_fault(struct zcp_source_ctx *c, int err, const char *what);
/* Opens the connection again once the back-off has passed: what next() returns meanwhile. */
int zcp_v4l2_reconnect(struct zcp_source_ctx *c);
