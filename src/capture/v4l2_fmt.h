/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * V4L2 source: opening a node and negotiating its format, size, rate and io
 * mode (v4l2_fmt.c). Writes the "open node" fields of the context
 * (v4l2_priv.h), and fourcc at choose_format(). Main thread at open, the
 * source thread on a reconnect. Calls nothing else of the source.
 */
#include "capture/v4l2_priv.h"

uint32_t zcp_v4l2_fourcc_of(enum zcp_pixfmt fmt);
enum zcp_pixfmt zcp_v4l2_pixfmt_of(uint32_t fourcc);
/* What a refusal means: a config the camera cannot do (before the first success), else a retryable error. */
int zcp_v4l2_refusal(const struct zcp_source_ctx *c, int err);
/* Logs what the driver refused (at fail_level) and returns zcp_v4l2_refusal(). */
int zcp_v4l2_refused(struct zcp_source_ctx *c, const char *what, int err);
/* Opens the node (symlinks resolved again), checks it captures and streams: 0 or -errno (-ENOTTY: not one). */
int zcp_v4l2_dev_open(struct zcp_source_ctx *c);
/* Picks the V4L2 format: the configured one (it must be listed), or the best listed one that fits. */
int zcp_v4l2_choose_format(struct zcp_source_ctx *c);
/* The format `format: auto` could pick that needs the largest slot at w x h (sizing a ring without the camera). */
enum zcp_pixfmt zcp_v4l2_largest_auto(uint32_t w, uint32_t h);
/*
 * S_FMT with the fixed fourcc and size. `first`: learn bytesperline and
 * sizeimage; else they must suit the ring made at open (c->moved: the
 * driver set another format or size).
 */
int zcp_v4l2_set_format(struct zcp_source_ctx *c, bool first);
/* Asks for cfg fps; returns the rate the driver settled on as num / den (0/1 when it does not say). */
void zcp_v4l2_set_rate(struct zcp_source_ctx *c, uint32_t *ret_num, uint32_t *ret_den);
/* userptr unless the config says mmap, the format is MJPEG, or the driver refuses USERPTR. */
int zcp_v4l2_decide_io(struct zcp_source_ctx *c);
/*
 * After a source change: the size the driver delivers now (HDMI receivers:
 * the detected DV timings are applied first, where the node has them).
 */
int zcp_v4l2_source_size(struct zcp_source_ctx *c, uint32_t *ret_w, uint32_t *ret_h);
