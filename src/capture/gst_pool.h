/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Files: ring slots lent to a decoder as the buffer pool it decodes into, so
 * that a frame lands in its slot without a copy (gst_pool.c says when and
 * how). A lender is made per pipeline for a file source; its state is its
 * own. Threads: as each function says; the lender's lock makes the decoder's
 * streaming thread and the source thread take turns on the free queue.
 */
#include <stdbool.h>
#include <stdint.h>

#include <gst/gst.h>
#include <gst/video/video.h>

#include "capture/source.h"
#include "core/ring.h"

struct zcp_gst_lender;

/* A lender answering for the appsink pad `sinkpad` (a ref is taken); NULL without memory. Main thread. */
struct zcp_gst_lender *zcp_gst_lender_new(GstPad *sinkpad);
/* Drops the caller's reference (pools hold their own). Accepts NULL. Any thread. */
void zcp_gst_lender_unref(struct zcp_gst_lender *l);
/*
 * The ALLOCATION query `q` at the appsink (streaming thread): adds a pool of
 * ring slots where the caps are the ring's, laid out as the slot, and
 * `producer` (the element that fills the buffers, by factory name) is known
 * to keep nothing in them; says which, once per binding. True: answered.
 */
bool zcp_gst_lender_answer(struct zcp_gst_lender *l, GstQuery *q, const char *producer, const char *kind,
                           const char *path);
/*
 * start(): lends slots of `ring` from now on where GStreamer lays a frame of
 * `info` out as the slot does, and asks upstream to negotiate its
 * allocation again. Main thread, no streaming thread running. l may be NULL.
 */
void zcp_gst_lender_bind(struct zcp_gst_lender *l, struct zcp_ring *ring, const struct zcp_source_info *info,
                         const char *kind, const char *path);
/*
 * Gives every slot GStreamer or the lender holds back to the ring's free
 * queue; nothing is lent until the next bind. Main thread, no streaming
 * thread running and no stage running. l may be NULL.
 */
void zcp_gst_lender_unbind(struct zcp_gst_lender *l, const char *kind, const char *path);
/* stop(): a decoder waiting for a slot gives up at once. Any thread. l may be NULL. */
void zcp_gst_lender_close(struct zcp_gst_lender *l);
/* A ring is bound (bind without unbind). l may be NULL. */
bool zcp_gst_lender_bound(const struct zcp_gst_lender *l);
/* `buf` comes from a pool of this lender while a ring is bound. l may be NULL. Source thread. */
bool zcp_gst_lender_lent(const struct zcp_gst_lender *l, const GstBuffer *buf);
/*
 * Source thread: `buf` (lent) holds a frame of `vinfo` (NULL: caps no
 * format of ours) in slot memory nothing else holds, of the ring's
 * geometry: that slot is the frame's (DRIVER -> SOURCE, frame cleared),
 * *ret_idx. Else false, and a buffer over a slot that cannot be taken as
 * it is counts in *refused (it is copied).
 */
bool zcp_gst_lender_claim(struct zcp_gst_lender *l, struct zcp_ring *ring, GstBuffer *buf, const GstVideoInfo *vinfo,
                          uint32_t *ret_idx, uint64_t *refused);
/*
 * Source thread: a slot to copy a frame into, the ones back from GStreamer
 * first; as zcp_ring_acquire(). l may be NULL (zcp_ring_acquire itself).
 */
int zcp_gst_lender_take(struct zcp_gst_lender *l, struct zcp_ring *ring, int64_t timeout_ns, uint32_t *ret_idx);
