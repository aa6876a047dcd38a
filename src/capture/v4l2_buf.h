/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * V4L2 source: the driver's buffers (REQBUFS, QBUF, mmap), the slots the
 * source holds, and mmap buffers lent to slots to be read in place
 * (v4l2_buf.c). Writes the "buffers" fields of the context (v4l2_priv.h).
 * Source thread, and the main thread at start before the source thread
 * exists. Calls v4l2_fmt.h only.
 */
#include "capture/v4l2_priv.h"

size_t zcp_v4l2_page_round(size_t n);
/* The slot is held by the source (state SOURCE) until a frame or the driver needs it. */
void zcp_v4l2_hold(struct zcp_source_ctx *c, uint32_t idx);
/* Waits up to timeout_ns for a slot to come back and holds it: 0, -EAGAIN, -EPIPE or a QBUF error. */
int zcp_v4l2_collect(struct zcp_source_ctx *c, int64_t timeout_ns);
/* Collects every slot waiting in the free queue (never blocks): 0 or a QBUF error. */
int zcp_v4l2_reclaim(struct zcp_source_ctx *c);
/* A slot to fill, held ones first, never waiting: 0, -EAGAIN (none), or a QBUF error. */
int zcp_v4l2_take_slot(struct zcp_source_ctx *c, uint32_t *ret_idx);
/* Counts n frames dropped before they reached a slot (they were captured all the same). */
void zcp_v4l2_source_drop(struct zcp_source_ctx *c, enum zcp_drop_reason reason, uint32_t n);
/* Queues buffer i (userptr: with the slot bufs[i].slot): 0 or the QBUF error. */
int zcp_v4l2_qbuf(struct zcp_source_ctx *c, uint32_t i);
/* userptr: gives the driver held and free slots until every index is queued. Never blocks. */
int zcp_v4l2_refill(struct zcp_source_ctx *c);
/* Full teardown of the connection; slots the driver had return to the source. */
void zcp_v4l2_dev_close(struct zcp_source_ctx *c);
/* REQBUFS, buffers to the driver, event subscription, STREAMON. Needs the ring. */
int zcp_v4l2_stream_on(struct zcp_source_ctx *c);
/* A v4l2_buffer for this connection's type and memory; plane: the one plane of an MPLANE buffer. */
void zcp_v4l2_buf_init(const struct zcp_source_ctx *c, struct v4l2_buffer *b, struct v4l2_plane *plane, uint32_t i);
/* After DQBUF/QUERYBUF on MPLANE: the plane's length, bytesused, userptr/offset copied into b. */
void zcp_v4l2_buf_flatten(const struct zcp_source_ctx *c, struct v4l2_buffer *b);
