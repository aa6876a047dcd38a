/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The GStreamer sources' timestamps (gst_time.c): writes the timeline
 * fields of the context (gst_priv.h). Source thread. Calls nothing else of
 * the sources.
 */
#include <stdbool.h>
#include <stdint.h>

#include "capture/gst_priv.h"

/*
 * Timeline bookkeeping for one sample: returns pts_ns; counts PTS that do
 * not advance (*ret_repeat) and measures the frame duration from the steps.
 */
uint64_t zcp_gst_track_pts(struct zcp_source_ctx *ctx, GstBuffer *buf, bool *ret_repeat);
/*
 * End of one pass through a file: what the container holds against what
 * reached the ring, into the stats and one log line; the pass counters start
 * again.
 */
void zcp_gst_account_pass(struct zcp_source_ctx *ctx);
/* The file plays again from its start: pts_ns continues after the last frame. */
void zcp_gst_new_pass(struct zcp_source_ctx *ctx);
/* A file that gave neither frames nor EOS while its position stood still for a while has ended. */
bool zcp_gst_stalled(struct zcp_source_ctx *ctx);
/* Network: when the frame's packets arrived (monotonic ns), else now. */
uint64_t zcp_gst_arrival_ns(struct zcp_source_ctx *ctx, GstSample *sample, uint64_t now);
/* Network: the sender's clock (NTP from RTCP sender reports) as Unix-epoch ns; 0 when not synchronised. */
uint64_t zcp_gst_sender_ns(GstBuffer *buf);
