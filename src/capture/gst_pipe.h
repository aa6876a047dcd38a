/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The GStreamer sources' pipeline (gst_pipe.c): uridecodebin ->
 * videoconvert -> appsink, built, prerolled, played, its bus read and torn
 * down. Writes the pipeline fields of the context (gst_priv.h) and makes a
 * file's lender (gst_pool.h). Main thread at open, the source thread after.
 */
#include <stdbool.h>
#include <stdint.h>

#include "capture/gst_priv.h"

/* A new pipeline for ctx->uri (its callbacks on ctx): 0, -ENOENT (elements missing) or -EINVAL. */
int zcp_gst_pipeline_build(struct zcp_source_ctx *ctx);
/*
 * The pipeline (to NULL; a network one within a bound, else left behind and
 * counted in ctx->abandoned), its pending sample and counters go. Safe to
 * repeat.
 */
void zcp_gst_pipeline_free(struct zcp_source_ctx *ctx);
/*
 * Waits for the pipeline to preroll (a live one: its first frame) or fail,
 * at most `timeout_ns`; zcp_source_cancel_all() ends it (-ECANCELED).
 * Returns 0 or -errno, logged with GStreamer's own message.
 */
int zcp_gst_preroll(struct zcp_source_ctx *ctx, uint64_t timeout_ns);
/* PLAYING: 0 or -EIO (logged). */
int zcp_gst_play(struct zcp_source_ctx *ctx);
/* Drains the bus: decoder warnings are counted; an ERROR (or, when `eos_fails`, EOS) is -EIO (-EPIPE). */
int zcp_gst_check_bus(struct zcp_source_ctx *ctx, bool eos_fails);
