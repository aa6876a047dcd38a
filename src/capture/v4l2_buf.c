/* SPDX-License-Identifier: MIT */
/*
 * V4L2 source: the driver's buffers (REQBUFS, QBUF, mmap), the slots the
 * source holds, and mmap buffers lent to slots to be read in place (v4l2.c
 * says what the source does as a whole). Source thread, and the main thread
 * at start before the source thread exists.
 */
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "capture/v4l2_buf.h"
#include "capture/v4l2_fmt.h"
#include "core/clock.h"
#include "core/err.h"

size_t zcp_v4l2_page_round(size_t n)
{
        long p = sysconf(_SC_PAGESIZE);
        size_t ps = p > 0 ? (size_t)p : 4096;

        return (n + ps - 1) / ps * ps;
}

void zcp_v4l2_hold(struct zcp_source_ctx *c, uint32_t idx)
{
        c->held[c->nheld++] = idx;
}

/* Unmaps a driver buffer: from the ring's allocator first, then from us. */
static void unmap_buf(struct zcp_source_ctx *c, uint8_t *map, size_t len, bool mapped)
{
        if (mapped)
                c->ring->alloc.unmap(c->ring->alloc.ctx, map);
        v4l2_munmap(map, len);
}

/*
 * A slot came back from downstream: the driver buffer it read in place goes
 * back to the driver, or is unmapped if its connection is gone. The slot is
 * held. Returns 0 or the QBUF error (the caller faults).
 */
static int take_back(struct zcp_source_ctx *c, uint32_t idx)
{
        struct lend *l = &c->lends[idx];
        int r = 0;

        if (zcp_ring_unlend(c->ring, idx)) {
                c->nlent--;
                if (l->buf == NO_SLOT) {
                        unmap_buf(c, l->map, l->map_len, l->mapped);
                        c->nretired--;
                } else {
                        /* A driver that had no buffer could not stall: its timeout starts now. */
                        if (c->queued == 0)
                                c->idle_since_ns = zcp_now_ns();
                        c->bufs[l->buf].lent = NO_SLOT;
                        r = zcp_v4l2_qbuf(c, l->buf);
                }
                *l = (struct lend){ .buf = NO_SLOT };
        }
        zcp_v4l2_hold(c, idx);
        return r;
}

/* Waits up to timeout_ns for a slot to come back and holds it: 0, -EAGAIN, -EPIPE or a QBUF error. */
int zcp_v4l2_collect(struct zcp_source_ctx *c, int64_t timeout_ns)
{
        uint32_t idx;
        int r = zcp_ring_acquire(c->ring, timeout_ns, &idx);

        return r < 0 ? r : take_back(c, idx);
}

/* Collects every slot waiting in the free queue (never blocks): 0 or a QBUF error. */
int zcp_v4l2_reclaim(struct zcp_source_ctx *c)
{
        int r;

        while ((r = zcp_v4l2_collect(c, 0)) == 0)
                ;
        return r == -EAGAIN || r == -EPIPE ? 0 : r;
}

/* A slot to fill, held ones first, never waiting: 0, -EAGAIN (none), or a QBUF error. */
int zcp_v4l2_take_slot(struct zcp_source_ctx *c, uint32_t *ret_idx)
{
        if (c->nheld == 0) {
                int r = zcp_v4l2_collect(c, 0);

                if (r < 0)
                        return r == -EPIPE ? -EAGAIN : r;
        }
        *ret_idx = c->held[--c->nheld];
        return 0;
}

/* Counts n frames dropped before they reached a slot (they were captured all the same). */
void zcp_v4l2_source_drop(struct zcp_source_ctx *c, enum zcp_drop_reason reason, uint32_t n)
{
        c->seq += n;
        atomic_fetch_add_explicit(&c->stats->captured, n, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->stats->dropped[reason], n, memory_order_relaxed);
}

/* A v4l2_buffer for this connection's type and memory; plane: the one plane of an MPLANE buffer. */
void zcp_v4l2_buf_init(const struct zcp_source_ctx *c, struct v4l2_buffer *b, struct v4l2_plane *plane, uint32_t i)
{
        memset(b, 0, sizeof(*b));
        memset(plane, 0, sizeof(*plane));
        b->index = i;
        b->type = c->buf_type;
        b->memory = io_memory[c->io];
        if (c->mplane) {
                /* Single-plane formats only (v4l2_fmt.c refuses others): one plane, the whole frame. */
                b->m.planes = plane;
                b->length = 1;
        }
}

/* After DQBUF/QUERYBUF on MPLANE: the plane's length, bytesused, userptr/offset copied into b. */
void zcp_v4l2_buf_flatten(const struct zcp_source_ctx *c, struct v4l2_buffer *b)
{
        const struct v4l2_plane *p = b->m.planes;

        if (!c->mplane)
                return;
        b->bytesused = p->bytesused;
        b->length = p->length;
        if (c->io == IO_USERPTR)
                b->m.userptr = p->m.userptr;
        else
                b->m.offset = p->m.mem_offset;
}

int zcp_v4l2_qbuf(struct zcp_source_ctx *c, uint32_t i)
{
        struct v4l2_buffer b;
        struct v4l2_plane plane;
        int r;

        zcp_v4l2_buf_init(c, &b, &plane, i);
        if (c->io == IO_USERPTR) {
                struct zcp_slot *s = zcp_ring_slot(c->ring, c->bufs[i].slot);

                if (c->mplane) {
                        plane.m.userptr = (unsigned long)s->data;
                        plane.length = (uint32_t)s->cap;
                } else {
                        b.m.userptr = (unsigned long)s->data;
                        b.length = (uint32_t)s->cap;
                }
        }
        r = xioctl(c->fd, VIDIOC_QBUF, &b);
        if (r < 0)
                return r;
        c->bufs[i].queued = true;
        c->queued++;
        return 0;
}

/* A free V4L2 index for slot idx: the slot's own number when possible, so the driver sees stable pointers. */
static uint32_t pick_index(const struct zcp_source_ctx *c, uint32_t idx)
{
        if (idx < c->nbufs && c->bufs[idx].slot == NO_SLOT)
                return idx;
        for (uint32_t i = 0; i < c->nbufs; i++) {
                if (c->bufs[i].slot == NO_SLOT)
                        return i;
        }
        return NO_SLOT;
}

/* userptr: gives the driver held and free slots until every index is queued. Never blocks. */
int zcp_v4l2_refill(struct zcp_source_ctx *c)
{
        uint32_t before = c->queued;

        while (c->queued < c->nbufs) {
                uint32_t idx, i;
                int r = zcp_v4l2_take_slot(c, &idx);

                if (r == -EAGAIN)
                        break;
                if (r < 0)
                        return r;
                i = pick_index(c, idx);
                if (i == NO_SLOT) {
                        zcp_v4l2_hold(c, idx);
                        break;
                }
                zcp_ring_move(c->ring, idx, ZCP_SLOT_SOURCE, ZCP_SLOT_DRIVER);
                c->bufs[i].slot = idx;
                r = zcp_v4l2_qbuf(c, i);
                if (r < 0) {
                        c->bufs[i].slot = NO_SLOT;
                        zcp_ring_move(c->ring, idx, ZCP_SLOT_DRIVER, ZCP_SLOT_SOURCE);
                        zcp_v4l2_hold(c, idx);
                        return r;
                }
        }
        if (before == 0 && c->queued > 0)
                c->idle_since_ns = zcp_now_ns();
        return 0;
}

/* STREAMOFF, slots the driver had back to the source, munmap (lent buffers: retired), REQBUFS 0. */
static void release_buffers(struct zcp_source_ctx *c)
{
        enum v4l2_buf_type type = (enum v4l2_buf_type)c->buf_type;
        uint32_t retired = 0;

        if (c->streaming) {
                (void)xioctl(c->fd, VIDIOC_STREAMOFF, &type);
                c->streaming = false;
        }
        for (uint32_t i = 0; i < c->nbufs; i++) {
                struct vbuf *b = &c->bufs[i];

                if (b->slot != NO_SLOT) {
                        zcp_ring_move(c->ring, b->slot, ZCP_SLOT_DRIVER, ZCP_SLOT_SOURCE);
                        zcp_v4l2_hold(c, b->slot);
                        b->slot = NO_SLOT;
                }
                if (b->lent != NO_SLOT) {
                        /* Still read downstream: unmapped when its slot comes back. */
                        c->lends[b->lent].buf = NO_SLOT;
                        b->lent = NO_SLOT;
                        retired++;
                } else if (b->map) {
                        unmap_buf(c, b->map, b->map_len, b->mapped);
                }
                b->map = NULL;
                b->map_len = 0;
                b->dev = NULL;
                b->mapped = false;
                b->queued = false;
        }
        c->nbufs = 0;
        c->queued = 0;
        c->lend = false;
        c->nretired += retired;
        /* Buffers still mapped cannot be freed by REQBUFS 0 (older kernels: EBUSY); closing the fd orphans them. */
        if (c->reqbufs && retired == 0) {
                struct v4l2_requestbuffers req = {
                        .count = 0,
                        .type = c->buf_type,
                        .memory = io_memory[c->io],
                };
                (void)xioctl(c->fd, VIDIOC_REQBUFS, &req);
        }
        c->reqbufs = false;
}

/* Full teardown of the connection; slots the driver had return to the source. */
void zcp_v4l2_dev_close(struct zcp_source_ctx *c)
{
        if (c->fd < 0)
                return;
        release_buffers(c);
        v4l2_close(c->fd);
        c->fd = -1;
        c->events = false;
}

/* Can this connection's buffers be lent to slots? (The buffer sizes are checked as they are mapped.) */
static bool lendable(const struct zcp_source_ctx *c)
{
        return c->cap_fmt != ZCP_PIX_MJPEG && c->ring->alloc.map && c->ring->alloc.unmap &&
               zcp_v4l2_page_round(c->sizeimage) >= c->ring->slot_size;
}

/* Stops lending on this connection: the buffers mapped so far are unmapped from the allocator. */
static void lend_off(struct zcp_source_ctx *c, const char *why, int err)
{
        if (!c->lend_refused)
                zcp_warn("%s: %s: the driver's buffers cannot be read in place (%s%s%s); copying each frame into "
                         "the ring instead", c->name, c->node, why, err ? ": " : "", err ? zcp_strerror(err) : "");
        c->lend_refused = true;
        c->lend = false;
        for (uint32_t i = 0; i < c->nbufs; i++) {
                struct vbuf *b = &c->bufs[i];

                if (b->mapped)
                        c->ring->alloc.unmap(c->ring->alloc.ctx, b->map);
                b->mapped = false;
                b->dev = NULL;
        }
}

/* Maps driver buffer i with the ring's allocator (cudaHostRegister for cuda), or stops lending. */
static void map_for_lending(struct zcp_source_ctx *c, uint32_t i)
{
        struct vbuf *b = &c->bufs[i];
        const struct zcp_allocator *a = &c->ring->alloc;
        char why[96];
        int r;

        if (zcp_v4l2_page_round(b->map_len) < c->ring->slot_size) {
                snprintf(why, sizeof(why), "buffer %u holds %zu bytes, converting in place needs %zu", i, b->map_len,
                         c->ring->slot_size);
                lend_off(c, why, 0);
                return;
        }
        r = a->map(a->ctx, b->map, zcp_v4l2_page_round(b->map_len), &b->dev);
        if (r < 0) {
                snprintf(why, sizeof(why), "the %s allocator cannot map buffer %u", a->name ? a->name : "ring", i);
                lend_off(c, why, r);
                return;
        }
        b->mapped = true;
}

/*
 * Source changes (an HDMI grabber's new resolution) are reported as events
 * where the driver has them; a driver that refuses the subscription has none
 * (frames of another size are then dropped as short or oversize).
 */
static void subscribe(struct zcp_source_ctx *c)
{
        struct v4l2_event_subscription sub = { .type = V4L2_EVENT_SOURCE_CHANGE };

        c->events = xioctl(c->fd, VIDIOC_SUBSCRIBE_EVENT, &sub) == 0;
        zcp_debug("%s: %s: source change events %s", c->name, c->node, c->events ? "subscribed" : "not offered");
}

/* REQBUFS, buffers to the driver, event subscription, STREAMON. Needs the ring. */
int zcp_v4l2_stream_on(struct zcp_source_ctx *c)
{
        enum v4l2_buf_type type = (enum v4l2_buf_type)c->buf_type;
        struct v4l2_requestbuffers req;
        size_t need = c->io == IO_USERPTR ? c->sizeimage : c->needed;
        uint32_t lend_bufs = c->ring->count + 2 < MAX_BUFS ? c->ring->count + 2 : MAX_BUFS;
        int r;

        if (need > c->ring->slot_size) {
                zcp_log(fail_level(c), "%s: %s: frames of %zu bytes do not fit the ring's %zu-byte slots", c->name,
                        c->node, need, c->ring->slot_size);
                return zcp_v4l2_refusal(c, -EINVAL);
        }
again:
        for (;;) {
                memset(&req, 0, sizeof(req));
                /*
                 * Lent buffers stay downstream until their slot returns: one
                 * per slot at most, and two more keep the driver fed.
                 */
                c->lend = c->io == IO_MMAP && lendable(c);
                req.count = c->io == IO_USERPTR ? (c->ring->count < MAX_BUFS ? c->ring->count : MAX_BUFS)
                            : c->lend       ? lend_bufs
                                            : MMAP_BUFS;
                req.type = c->buf_type;
                req.memory = io_memory[c->io];
                r = xioctl(c->fd, VIDIOC_REQBUFS, &req);
                if (r == -EINVAL && c->io == IO_USERPTR && c->cfg.io == ZCP_IO_AUTO && c->cap_fmt != ZCP_PIX_MJPEG) {
                        zcp_warn("%s: %s refuses USERPTR buffers now: capturing into mmap buffers, one copy per "
                                 "frame", c->name, c->node);
                        c->io = IO_MMAP;
                        if (c->needed > c->ring->slot_size)
                                return zcp_v4l2_refusal(c, -EINVAL);
                        continue;
                }
                break;
        }
        if (r < 0)
                return zcp_v4l2_refused(c, "VIDIOC_REQBUFS", r);
        c->reqbufs = true;
        if (req.count == 0)
                return zcp_v4l2_refused(c, "VIDIOC_REQBUFS (no buffers)", -ENOMEM);
        c->nbufs = req.count < MAX_BUFS ? req.count : MAX_BUFS;
        if (c->io == IO_USERPTR && c->nbufs > c->ring->count)
                c->nbufs = c->ring->count;
        for (uint32_t i = 0; i < c->nbufs; i++) {
                c->bufs[i] = (struct vbuf){ .slot = NO_SLOT, .lent = NO_SLOT };
        }

        if (c->io == IO_MMAP) {
                for (uint32_t i = 0; i < c->nbufs; i++) {
                        struct v4l2_buffer b;
                        struct v4l2_plane plane;
                        void *p;

                        zcp_v4l2_buf_init(c, &b, &plane, i);
                        r = xioctl(c->fd, VIDIOC_QUERYBUF, &b);
                        if (r < 0)
                                return zcp_v4l2_refused(c, "VIDIOC_QUERYBUF", r);
                        zcp_v4l2_buf_flatten(c, &b);
                        if (b.length < (c->cap_fmt == ZCP_PIX_MJPEG ? 1 : c->needed)) {
                                zcp_log(fail_level(c), "%s: %s: driver buffer %u holds %u bytes, a frame needs %zu",
                                        c->name, c->node, i, b.length, c->needed);
                                return zcp_v4l2_refusal(c, -EINVAL);
                        }
                        p = v4l2_mmap(NULL, b.length, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, b.m.offset);
                        if (p == MAP_FAILED) {
                                r = -errno;
                                zcp_log(fail_level(c), "%s: %s: mmap of buffer %u (%u bytes) failed: %s", c->name,
                                        c->node, i, b.length, zcp_strerror(r));
                                return r;
                        }
                        c->bufs[i].map = p;
                        c->bufs[i].map_len = b.length;
                        if (c->lend)
                                map_for_lending(c, i);
                        r = zcp_v4l2_qbuf(c, i);
                        if (r < 0)
                                return zcp_v4l2_refused(c, "VIDIOC_QBUF", r);
                }
        } else {
                r = zcp_v4l2_refill(c);
                /*
                 * A driver may take USERPTR yet not this memory (e.g. pinned
                 * memory mapped by another driver: get_user_pages fails).
                 */
                if (r < 0 && c->cfg.io == ZCP_IO_AUTO && (r == -EFAULT || r == -EINVAL || r == -ENOMEM) &&
                    c->needed <= c->ring->slot_size) {
                        zcp_warn("%s: %s: the driver cannot capture into the ring's memory (VIDIOC_QBUF USERPTR: %s); "
                                 "capturing into mmap buffers, one copy per frame", c->name, c->node, errname(r));
                        release_buffers(c);
                        c->io = IO_MMAP;
                        goto again;
                }
                if (r < 0)
                        return zcp_v4l2_refused(c, "VIDIOC_QBUF", r);
        }
        subscribe(c);
        r = xioctl(c->fd, VIDIOC_STREAMON, &type);
        if (r < 0)
                return zcp_v4l2_refused(c, "VIDIOC_STREAMON", r);
        c->streaming = true;
        c->idle_since_ns = zcp_now_ns();
        c->have_seq = false;
        c->starved = false;
        return 0;
}
