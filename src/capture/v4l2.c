/* SPDX-License-Identifier: MIT */
/*
 * V4L2 camera source (source.h), through libv4l2 with its conversion off.
 *
 * In: frames from a capture node. Out: filled ring slots, submitted to convert.
 *   io userptr: the ring's slots themselves are the capture buffers; the
 *               camera writes straight into them (path "direct").
 *   io mmap:    the driver's own buffers. Where they can hold the slot's
 *               NV12 and the ring's allocator maps them (cudaHostRegister
 *               for cuda; host memory as it is for cpu), each dequeued
 *               buffer is lent to a slot and read in place (path
 *               "registered"): convert works in it, the backend reads it,
 *               and it goes back to the driver when the slot returns to the
 *               free queue. Else each frame is copied into a free slot (path
 *               "copy", each copy counted). MJPEG is always captured into
 *               mmap buffers and decoded into the slot as I420 (path "direct").
 * Blocks: in poll() on the device, on the free queue when every slot is
 * downstream, and in back-off waits: at most 100 ms per next() call.
 * Drop policy: with `drop: block` a buffer is dequeued only once a slot can
 * take it (mmap included); with `newest` a frame dequeued with no free slot
 * is dropped as ring-full and its buffer re-queued at once.
 * Dropped, counted by reason, re-queued and never handed on: buffers the
 * driver flags as erroneous, short or oversized buffers, indices out of range
 * or not queued, JPEGs that do not decode cleanly; frames the driver skipped
 * (sequence gaps) are counted too (as ring-full when the driver ran out of
 * buffers because every slot was downstream).
 * Faults (ENODEV, EIO, no frame for timeout_ms): full teardown (STREAMOFF,
 * munmap, REQBUFS 0, close), then the node (symlinks re-resolved) is reopened
 * with capped exponential back-off; the ring is kept and the slots the driver
 * held return to the source. Buffers lent downstream at teardown are
 * retired: they stay mapped (the mapping keeps the memory alive after close)
 * until their slot comes back, then are unmapped; they are never queued on
 * the new fd. One log line per state change.
 * Multi-planar: a node with V4L2_CAP_VIDEO_CAPTURE_MPLANE and without
 * V4L2_CAP_VIDEO_CAPTURE is driven with the MPLANE buffer type, one plane
 * per buffer (formats the driver keeps in one plane; v4l2_fmt.c), on the
 * same paths; v4l2_buf.c builds and flattens the plane arrays.
 * Geometry (source.h, ZCP_SOURCE_RECONFIGURE): the ring is made for the info
 * open returns; it changes only through the caller, and only if it said it
 * can (reconfigure(ctx, NULL)). Two cases:
 *   - format auto, camera absent at open: the info is provisional: the
 *     configured size (default 640x480) in the format auto may pick that
 *     needs the largest slot (BGRX). The first connection negotiates as at
 *     open; if the result differs (format, stride, frame bytes), the caller
 *     re-makes the ring before any frame. A caller that cannot gets
 *     ZCP_ERR_CONFIG from next() then, with a log naming the format to set:
 *     the convert stage is made at open for one format and size, so frames of
 *     another format cannot honestly go into the provisional ring.
 *   - V4L2_EVENT_SOURCE_CHANGE (subscribed where the driver offers it;
 *     POLLPRI): the connection is torn down (STREAMOFF, unmap, REQBUFS 0,
 *     close) and the next one applies the detected DV timings (HDMI
 *     receivers), learns the size from G_FMT and renegotiates at that size
 *     (the configured format, or auto's best there). Without the caller's
 *     support the event is logged and streaming goes on. A driver without
 *     the event: its frames of the new size are dropped until timeout_ms
 *     passes without a good one; the reopen finds the driver in another
 *     mode (S_FMT answers with it) and, once the camera has streamed and the
 *     caller can, follows it the same way (v4l2_conn.c).
 *   Either way, validate() never lets a frame of another size into a slot:
 *   short, larger than the negotiated image, or flagged: dropped, counted.
 * How the caller drives it: next() returns ZCP_SOURCE_RECONFIGURE (the device
 * is closed, nothing is queued; it is returned once no slot reads a driver
 * buffer, or after timeout_ms) and keeps returning it until reconfigure().
 * The caller then lets downstream finish the frames it has, stops its stage
 * threads, calls stop(ctx, old ring) (slots held by the source go back to the
 * free queue, driver buffers still read in place are unmapped), frees the
 * ring, calls reconfigure(ctx, &info), makes a ring for that info and calls
 * start(ctx, new ring); the next next() opens the device for the new
 * geometry. No frame is lost to the change except those the camera made
 * meanwhile (the reopen), which V4L2 cannot count.
 * Threads: open/close on the main thread; start on the main thread before the
 * source thread exists; next/stop on the source thread (stop after every
 * other stage thread has exited, as pipeline.c does).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/v4l2_buf.h"
#include "capture/v4l2_conn.h"
#include "capture/v4l2_fmt.h"
#include "capture/v4l2_geom.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/pixfmt.h"

/* ---- frames ------------------------------------------------------------ */

static void seq_check(struct zcp_source_ctx *c, uint32_t sequence)
{
        if (c->have_seq) {
                uint32_t gap = sequence - c->last_seq - 1;

                /* Forward jumps only; a repeated or backward number is not a loss. */
                if (gap != 0 && gap < (1u << 30))
                        zcp_v4l2_source_drop(c, c->starved ? ZCP_DROP_RING_FULL : ZCP_DROP_SEQ_GAP, gap);
        }
        c->have_seq = true;
        c->last_seq = sequence;
        c->starved = false;
}

/* ZCP_DROP_REASON_COUNT when the buffer holds a whole frame. */
static enum zcp_drop_reason validate(const struct zcp_source_ctx *c, const struct v4l2_buffer *b, const struct vbuf *vb)
{
        size_t len = c->io == IO_USERPTR ? zcp_ring_slot(c->ring, vb->slot)->cap : vb->map_len;

        if (b->flags & V4L2_BUF_FLAG_ERROR)
                return ZCP_DROP_CORRUPT;
        if (b->bytesused > len || (b->length && b->bytesused > b->length))
                return ZCP_DROP_OVERSIZE;
        /* More than the negotiated image: a frame of another geometry (a source change); never a slot's. */
        if (c->cap_fmt != ZCP_PIX_MJPEG && b->bytesused > (c->sizeimage > c->needed ? c->sizeimage : c->needed))
                return ZCP_DROP_OVERSIZE;
        if (c->cap_fmt == ZCP_PIX_MJPEG ? b->bytesused == 0 : b->bytesused < c->needed)
                return ZCP_DROP_SHORT;
        return ZCP_DROP_REASON_COUNT;
}

static void fill(struct zcp_source_ctx *c, struct zcp_slot *s, const struct v4l2_buffer *b, uint64_t now)
{
        struct zcp_frame *f = &s->frame;
        uint64_t ts = 0;

        if (b->timestamp.tv_sec >= 0 && b->timestamp.tv_usec >= 0)
                ts = (uint64_t)b->timestamp.tv_sec * ZCP_NSEC_PER_SEC +
                     (uint64_t)b->timestamp.tv_usec * ZCP_NSEC_PER_USEC;
        f->seq = c->seq++;
        f->width = c->width;
        f->height = c->height;
        f->fmt = c->info.fmt;
        f->stride = c->info.stride;
        f->bytes = c->cap_fmt == ZCP_PIX_MJPEG ? c->info.frame_bytes : c->needed;
        f->pts_ns = ts;
        /* The driver's time is ours only when it says it is CLOCK_MONOTONIC (and it is plausible). */
        if ((b->flags & V4L2_BUF_FLAG_TIMESTAMP_MASK) == V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC && ts != 0 && ts <= now)
                f->t[ZCP_TS_CAPTURE] = ts;
        else
                f->t[ZCP_TS_CAPTURE] = now;
        atomic_fetch_add_explicit(&c->stats->captured, 1, memory_order_relaxed);
}

static int dequeued(struct zcp_source_ctx *c, const struct v4l2_buffer *b, uint64_t now)
{
        struct zcp_ring *ring = c->ring;
        enum zcp_drop_reason why;
        struct vbuf *vb;
        uint32_t idx;
        int r;

        if (b->index >= c->nbufs || !c->bufs[b->index].queued ||
            (c->io == IO_USERPTR && b->m.userptr != (unsigned long)zcp_ring_slot(ring, c->bufs[b->index].slot)->data)) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_EVERY_NS, "%s: %s: driver returned buffer %u (%s): dropped",
                                    c->name, c->node, b->index,
                                    b->index >= c->nbufs ? "out of range" : "not queued");
                zcp_v4l2_source_drop(c, ZCP_DROP_BAD_INDEX, 1);
                return ZCP_SOURCE_AGAIN;
        }
        vb = &c->bufs[b->index];
        vb->queued = false;
        c->queued--;
        seq_check(c, b->sequence);
        why = validate(c, b, vb);
        if (why != ZCP_DROP_REASON_COUNT) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_EVERY_NS,
                                    "%s: %s: frame dropped (%s): flags 0x%x, %u bytes used of %u, %zu needed",
                                    c->name, c->node, zcp_drop_reason_names[why], b->flags, b->bytesused, b->length,
                                    c->needed);
                zcp_v4l2_source_drop(c, why, 1);
                r = zcp_v4l2_qbuf(c, b->index);
                return r < 0 ? zcp_v4l2_fault(c, r, "VIDIOC_QBUF") : ZCP_SOURCE_AGAIN;
        }

        if (c->io == IO_USERPTR) {
                idx = vb->slot;
                vb->slot = NO_SLOT;
                zcp_ring_move(ring, idx, ZCP_SLOT_DRIVER, ZCP_SLOT_SOURCE);
        } else {
                struct zcp_slot *s;

                r = zcp_v4l2_take_slot(c, &idx);
                if (r == -EAGAIN) {
                        /* The camera is fine; the pipeline is behind. */
                        c->idle_since_ns = now;
                        zcp_v4l2_source_drop(c, ZCP_DROP_RING_FULL, 1);
                        r = zcp_v4l2_qbuf(c, b->index);
                        return r < 0 ? zcp_v4l2_fault(c, r, "VIDIOC_QBUF") : ZCP_SOURCE_AGAIN;
                }
                if (r < 0) {
                        /* Giving a returned buffer back failed: this one is not queued either. */
                        return zcp_v4l2_fault(c, r, "VIDIOC_QBUF");
                }
                s = zcp_ring_slot(ring, idx);
                if (c->lend) {
                        /*
                         * Read in place (map_for_lending checked that the buffer
                         * holds a slot's bytes); back to the driver when the slot
                         * returns (take_back).
                         */
                        zcp_ring_lend(ring, idx, vb->map, vb->dev, ring->slot_size, b->index + 1);
                        c->lends[idx] = (struct lend){
                                .map = vb->map, .map_len = vb->map_len, .mapped = vb->mapped, .buf = b->index,
                        };
                        vb->lent = idx;
                        c->nlent++;
                } else if (c->mjpeg) {
                        r = zcp_mjpeg_decode_i420(c->mjpeg, vb->map, b->bytesused, s->data);
                        if (r < 0) {
                                why = r == -ERANGE ? ZCP_DROP_OVERSIZE : ZCP_DROP_CORRUPT;
                                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_EVERY_NS, "%s: %s: JPEG dropped (%s): %s",
                                                    c->name, c->node, zcp_drop_reason_names[why],
                                                    zcp_mjpeg_error(c->mjpeg));
                                zcp_v4l2_hold(c, idx);
                                zcp_v4l2_source_drop(c, why, 1);
                                r = zcp_v4l2_qbuf(c, b->index);
                                return r < 0 ? zcp_v4l2_fault(c, r, "VIDIOC_QBUF") : ZCP_SOURCE_AGAIN;
                        }
                } else {
                        memcpy(s->data, vb->map, c->needed);
                        atomic_fetch_add_explicit(&c->stats->copies, 1, memory_order_relaxed);
                }
        }

        fill(c, zcp_ring_slot(ring, idx), b, now);
        zcp_ring_submit(ring, idx);
        c->good_since_up = true;
        c->failures = 0;
        c->idle_since_ns = now;

        r = c->io == IO_USERPTR ? zcp_v4l2_refill(c) : c->lend ? 0 : zcp_v4l2_qbuf(c, b->index);
        if (r < 0)
                zcp_v4l2_fault(c, r, "VIDIOC_QBUF");
        return ZCP_SOURCE_FRAME;
}

/*
 * POLLPRI: events. A source change that alters the resolution tears the
 * connection down and renegotiates (the caller re-makes the ring); without
 * a caller that can, it is logged and frames of another size are dropped.
 * Returns GO_ON to go on dequeuing, else what next() returns.
 */
#define GO_ON 100
static int source_event(struct zcp_source_ctx *c)
{
        struct v4l2_event ev;
        bool changed = false;

        for (int i = 0; i < 64; i++) {
                memset(&ev, 0, sizeof(ev));
                if (xioctl(c->fd, VIDIOC_DQEVENT, &ev) < 0)
                        break;
                if (ev.type == V4L2_EVENT_SOURCE_CHANGE && (ev.u.src_change.changes & V4L2_EVENT_SRC_CH_RESOLUTION))
                        changed = true;
        }
        if (!changed)
                return GO_ON;
        if (!c->reconfigure_ok) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_EVERY_NS,
                                    "%s: %s: the source changed its resolution; the stream is made for %ux%u and "
                                    "cannot re-make its ring: frames of another size are dropped",
                                    c->name, c->node, c->width, c->height);
                return GO_ON;
        }
        zcp_info("%s: %s: the source changed its resolution: renegotiating", c->name, c->node);
        /* Frames still queued are of either size: none is taken. STREAMOFF, REQBUFS 0, close; then anew. */
        zcp_v4l2_dev_close(c);
        c->renegotiate = true;
        c->follow_source = true;
        c->failures = 0;
        c->retry_at_ns = 0;
        set_state(c, ZCP_SOURCE_OPENING);
        return zcp_v4l2_reconnect(c);
}

static int capture(struct zcp_source_ctx *c)
{
        struct pollfd pfd = { .fd = c->fd, .events = (short)(POLLIN | (c->events ? POLLPRI : 0)) };
        uint64_t now = zcp_now_ns();
        uint64_t deadline = c->idle_since_ns + (uint64_t)c->cfg.timeout_ms * ZCP_NSEC_PER_MSEC;
        struct v4l2_buffer b;
        struct v4l2_plane plane;
        int wait_ms = 0, r;

        if (now < deadline) {
                uint64_t left = deadline - now;

                wait_ms = left >= WAIT_MAX_MS * ZCP_NSEC_PER_MSEC
                                  ? WAIT_MAX_MS
                                  : (int)((left + ZCP_NSEC_PER_MSEC - 1) / ZCP_NSEC_PER_MSEC);
        }
        /* Even past the deadline, look once: a late wake-up is not a dead camera. */
        r = poll(&pfd, 1, wait_ms);
        if (r < 0)
                return errno == EINTR ? ZCP_SOURCE_AGAIN : zcp_v4l2_fault(c, -errno, "poll");
        if (r == 0) {
                if (zcp_now_ns() >= deadline) {
                        char what[64];

                        snprintf(what, sizeof(what), "no frame for %u ms", c->cfg.timeout_ms);
                        return zcp_v4l2_fault(c, -ETIMEDOUT, what);
                }
                return ZCP_SOURCE_AGAIN;
        }
        if (pfd.revents & POLLPRI) {
                r = source_event(c);
                if (r != GO_ON)
                        return r;
        }
        zcp_v4l2_buf_init(c, &b, &plane, 0);
        r = xioctl(c->fd, VIDIOC_DQBUF, &b);
        if (r == -EAGAIN) {
                if (pfd.revents & (POLLERR | POLLHUP | POLLNVAL))
                        return zcp_v4l2_fault(c, -EIO, "poll reported an error");
                return ZCP_SOURCE_AGAIN;
        }
        if (r < 0)
                return zcp_v4l2_fault(c, r, "VIDIOC_DQBUF");
        zcp_v4l2_buf_flatten(c, &b);
        if (c->mplane && plane.data_offset != 0) {
                /* The image after a header in the plane: not a layout a slot can take as is. */
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_EVERY_NS, "%s: %s: plane data at offset %u: dropped", c->name,
                                    c->node, plane.data_offset);
                b.flags |= V4L2_BUF_FLAG_ERROR;
        }
        return dequeued(c, &b, zcp_now_ns());
}

/* ---- ops --------------------------------------------------------------- */

static void v4l2_src_close(struct zcp_source_ctx *c)
{
        if (!c)
                return;
        zcp_v4l2_dev_close(c);
        zcp_mjpeg_free(c->mjpeg);
        free(c->held);
        free(c->lends);
        free(c);
}

static int v4l2_src_open(const struct zcp_stream_config *cfg, struct zcp_stream_stats *stats,
                         struct zcp_source_ctx **ret_ctx, struct zcp_source_info *ret_info)
{
        struct zcp_source_ctx *c;
        uint32_t num = 0, den = 1;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->cfg = cfg->source;
        snprintf(c->name, sizeof(c->name), "%s", cfg->name);
        c->stats = stats;
        c->block = cfg->ring.drop == ZCP_DROP_POLICY_BLOCK;
        c->fd = -1;
        c->width = cfg->source.width ? cfg->source.width : 640;
        c->height = cfg->source.height ? cfg->source.height : 480;
        for (uint32_t i = 0; i < MAX_BUFS; i++) {
                c->bufs[i].slot = NO_SLOT;
                c->bufs[i].lent = NO_SLOT;
        }
        set_state(c, ZCP_SOURCE_OPENING);

        r = zcp_v4l2_dev_open(c);
        if (r == -ENOENT || r == -ENODEV || r == -ENXIO) {
                zcp_v4l2_dev_close(c);
                c->cap_fmt = cfg->source.format;
                if (c->cap_fmt == ZCP_PIX_NONE) {
                        /*
                         * format: auto: the camera decides. Until it is there, the
                         * ring is made for the format auto may pick that needs the
                         * most bytes at this size; the first connection negotiates
                         * and, where it differs, the caller re-makes the ring.
                         */
                        c->cap_fmt = zcp_v4l2_largest_auto(c->width, c->height);
                        c->provisional = true;
                        c->renegotiate = true;
                }
                c->fourcc = zcp_v4l2_fourcc_of(c->cap_fmt);
                if (c->fourcc == 0) {
                        zcp_err("%s: format %s is not one zcpipe captures from V4L2", c->name,
                                zcp_pixfmt_name(cfg->source.format));
                        r = ZCP_ERR_CONFIG;
                        goto fail;
                }
                if (c->cap_fmt != ZCP_PIX_MJPEG) {
                        c->bpl = zcp_pixfmt_min_stride(c->cap_fmt, c->width);
                        c->needed = zcp_pixfmt_frame_size(c->cap_fmt, c->width, c->height);
                        c->sizeimage = (uint32_t)c->needed;
                }
                /* The first connection decides io: auto assumes userptr until then. */
                c->io = c->cap_fmt == ZCP_PIX_MJPEG || cfg->source.io == ZCP_IO_MMAP ? IO_MMAP : IO_USERPTR;
                c->io_known = cfg->source.io != ZCP_IO_AUTO || c->cap_fmt == ZCP_PIX_MJPEG;
                num = cfg->source.fps;
                zcp_warn("%s: %s is absent (%s); the stream starts and waits for it%s", c->name, c->cfg.device,
                         zcp_strerror(r),
                         c->provisional ? " (format auto: sized for the largest format until the camera is there)"
                                        : "");
                c->last_fail = r;
                set_state(c, ZCP_SOURCE_DOWN);
        } else if (r < 0) {
                zcp_err("%s: cannot open %s: %s", c->name, c->cfg.device, zcp_strerror(r));
                if (r == -ENOTTY)
                        r = ZCP_ERR_CONFIG;
                goto fail;
        } else {
                r = zcp_v4l2_choose_format(c);
                if (r < 0)
                        goto fail;
                c->cap_fmt = zcp_v4l2_pixfmt_of(c->fourcc);
                r = zcp_v4l2_set_format(c, true);
                if (r < 0)
                        goto fail;
                zcp_v4l2_set_rate(c, &num, &den);
                if (num && (uint64_t)num != (uint64_t)cfg->source.fps * den)
                        zcp_info("%s: %s runs at %u/%u fps (asked for %u)", c->name, c->node, num, den,
                                 cfg->source.fps);
                r = zcp_v4l2_decide_io(c);
                if (r < 0)
                        goto fail;
        }
        if (c->cap_fmt == ZCP_PIX_MJPEG) {
                r = zcp_mjpeg_new(c->width, c->height, &c->mjpeg);
                if (r < 0)
                        goto fail;
        }
        zcp_v4l2_make_info(c, num, den);
        zcp_info("%s: %s: %s %ux%u, %u bytes per line, %zu bytes per slot frame, io %s (%s)", c->name,
                 c->node[0] ? c->node : c->cfg.device, fourcc_text(c->fourcc).s, c->width, c->height,
                 c->info.stride, c->info.frame_bytes, io_names[c->io], zcp_capture_path_names[c->info.path]);
        *ret_ctx = c;
        *ret_info = c->info;
        return 0;

fail:
        v4l2_src_close(c);
        return r;
}

static int v4l2_src_start(struct zcp_source_ctx *c, struct zcp_ring *ring)
{
        int r;

        if (c->pending) {
                zcp_err("%s: start() before reconfigure(): the ring is not made for the camera's geometry", c->name);
                return -EINVAL;
        }
        if (c->nlent > 0) {
                zcp_err("%s: %u driver buffers are still lent to slots of the old ring (leaked)", c->name, c->nlent);
                c->nlent = 0;
                c->nretired = 0;
        }
        /* Per slot of this ring (a new ring after a reconfigure may have another count). */
        free(c->held);
        free(c->lends);
        c->ring = ring;
        c->held = calloc(ring->count, sizeof(*c->held));
        c->lends = calloc(ring->count, sizeof(*c->lends));
        if (!c->held || !c->lends)
                return -ENOMEM;
        for (uint32_t i = 0; i < ring->count; i++)
                c->lends[i].buf = NO_SLOT;
        c->nheld = 0;
        c->failures = 0;
        if (c->fd < 0) {
                /* Absent at open: the first attempt is the first next(). */
                c->retry_at_ns = 0;
                set_state(c, ZCP_SOURCE_BACKOFF);
                return 0;
        }
        r = zcp_v4l2_stream_on(c);
        if (r == 0) {
                zcp_v4l2_log_streaming(c);
                c->ever_up = true;
                set_state(c, ZCP_SOURCE_UP);
                return 0;
        }
        zcp_v4l2_dev_close(c);
        if (r == ZCP_ERR_CONFIG)
                return r;
        c->failures = 1;
        c->last_fail = r;
        c->quiet = true;
        zcp_warn("%s: %s: cannot start streaming: %s (%s); retrying in %u ms, then at most every %u ms", c->name,
                 c->cfg.device, errname(r), zcp_strerror(r), zcp_v4l2_backoff_ms(c), c->cfg.backoff_max_ms);
        zcp_v4l2_schedule_retry(c);
        return 0;
}

static int v4l2_src_next(struct zcp_source_ctx *c, struct zcp_ring *ring)
{
        int r;

        if (c->pending)
                return zcp_v4l2_pending(c);
        if (c->state != ZCP_SOURCE_UP)
                return zcp_v4l2_reconnect(c);
        if (c->nlent > 0) {
                r = zcp_v4l2_reclaim(c);
                if (r < 0)
                        return zcp_v4l2_fault(c, r, "VIDIOC_QBUF");
        }
        if (c->lend && c->queued == 0) {
                /* Every buffer is read downstream: the driver has none and cannot stall. */
                c->starved = true;
                r = zcp_v4l2_collect(c, WAIT_MAX_MS * (int64_t)ZCP_NSEC_PER_MSEC);
                if (r < 0 && r != -EAGAIN && r != -EPIPE)
                        return zcp_v4l2_fault(c, r, "VIDIOC_QBUF");
                return ZCP_SOURCE_AGAIN;
        }
        if (c->io != IO_USERPTR && c->block && c->nheld == 0) {
                /*
                 * drop: block: a buffer is dequeued only when a slot can take
                 * it. Until one returns, frames wait in the driver's buffers;
                 * what the driver loses meanwhile shows as a sequence gap,
                 * counted as ring-full (the pipeline was behind, not the camera).
                 */
                r = zcp_v4l2_collect(c, WAIT_MAX_MS * (int64_t)ZCP_NSEC_PER_MSEC);
                if (r == -EAGAIN || r == -EPIPE) {
                        c->starved = true;
                        c->idle_since_ns = zcp_now_ns();
                        return ZCP_SOURCE_AGAIN;
                }
                if (r < 0)
                        return zcp_v4l2_fault(c, r, "VIDIOC_QBUF");
        }
        if (c->io == IO_USERPTR) {
                r = zcp_v4l2_refill(c);
                if (r < 0)
                        return zcp_v4l2_fault(c, r, "VIDIOC_QBUF");
                if (c->queued == 0) {
                        /* Every slot is downstream: the driver has no buffer and cannot stall. */
                        c->starved = true;
                        r = zcp_v4l2_collect(c, WAIT_MAX_MS * (int64_t)ZCP_NSEC_PER_MSEC);
                        if (r == 0) {
                                r = zcp_v4l2_refill(c);
                                if (r < 0)
                                        return zcp_v4l2_fault(c, r, "VIDIOC_QBUF");
                        }
                        return ZCP_SOURCE_AGAIN;
                }
        }
        return capture(c);
}

static void v4l2_src_stop(struct zcp_source_ctx *c, struct zcp_ring *ring)
{
        if (c->ring)
                zcp_v4l2_dev_close(c);
        /*
         * pipeline.c calls this once every stage thread has exited: every slot
         * is in the free queue or held, and the free queue has no other
         * producer now. Collecting them unmaps the buffers still lent.
         */
        if (c->ring)
                (void)zcp_v4l2_reclaim(c);
        if (c->nlent > 0)
                zcp_err("%s: %u driver buffers are still lent to slots at stop (leaked)", c->name, c->nlent);
        for (uint32_t i = 0; i < c->nheld; i++) {
                zcp_ring_move(ring, c->held[i], ZCP_SLOT_SOURCE, ZCP_SLOT_FREE);
                zcp_spsc_push(&ring->q[ZCP_Q_FREE], c->held[i]);
        }
        c->nheld = 0;
        c->ring = NULL;
        set_state(c, ZCP_SOURCE_DOWN);
        if (c->pending)
                zcp_info("%s: %s: the old ring is released", c->name, c->node[0] ? c->node : c->cfg.device);
        else
                zcp_info("%s: %s: stopped", c->name, c->node[0] ? c->node : c->cfg.device);
}

static int v4l2_src_reconfigure(struct zcp_source_ctx *c, struct zcp_source_info *ret_info)
{
        int r;

        if (!ret_info) {
                c->reconfigure_ok = true;
                return 0;
        }
        if (!c->pending)
                return -EINVAL;
        /*
         * The caller calls this once the old ring's threads are gone and
         * before it frees that ring (pipeline.c keeps the old stream until
         * the new one is made). A caller that did not stop() the source on
         * the old ring: what it holds of it goes back now, lent buffers are
         * unmapped, as stop() does.
         */
        if (c->ring)
                v4l2_src_stop(c, c->ring);
        zcp_mjpeg_free(c->mjpeg);
        c->mjpeg = NULL;
        if (c->cap_fmt == ZCP_PIX_MJPEG) {
                r = zcp_mjpeg_new(c->width, c->height, &c->mjpeg);
                if (r < 0)
                        return r;
        }
        zcp_info("%s: %s: the geometry changes from %ux%u %s to %ux%u %s (%u bytes per line, %zu bytes per slot "
                 "frame, io %s)", c->name, c->node, c->info.width, c->info.height, zcp_pixfmt_name(c->info.fmt),
                 c->next_info.width, c->next_info.height, zcp_pixfmt_name(c->next_info.fmt), c->next_info.stride,
                 c->next_info.frame_bytes, io_names[c->io]);
        c->info = c->next_info;
        c->quiet = false;   /* what goes wrong with the new geometry is said once, loudly */
        c->pending = false;
        c->renegotiate = false;
        c->follow_source = false;
        c->provisional = false;
        /* The slots held were the old ring's: start() takes the new one. */
        c->nheld = 0;
        c->ring = NULL;
        *ret_info = c->info;
        return 0;
}

const struct zcp_source_ops zcp_source_v4l2 = {
        .name = "v4l2",
        .open = v4l2_src_open,
        .start = v4l2_src_start,
        .next = v4l2_src_next,
        .stop = v4l2_src_stop,
        .close = v4l2_src_close,
        .reconfigure = v4l2_src_reconfigure,
};
