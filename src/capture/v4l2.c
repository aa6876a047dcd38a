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
 * Threads: open/close on the main thread; start on the main thread before the
 * source thread exists; next/stop on the source thread (stop after every
 * other stage thread has exited, as pipeline.c does).
 */
#include <errno.h>
#include <fcntl.h>
#include <libv4l2.h>
#include <limits.h>
#include <linux/videodev2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "capture/mjpeg.h"
#include "capture/source.h"
#include "convert/convert.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/metrics.h"

#define MAX_BUFS         VIDEO_MAX_FRAME
#define MMAP_BUFS        4
#define NO_SLOT          UINT32_MAX
#define WAIT_MAX_MS      100
#define BACKOFF_FIRST_MS 50
#define LOG_EVERY_NS     (5 * ZCP_NSEC_PER_SEC)

enum io { IO_USERPTR, IO_MMAP, IO_COUNT };
static const char *const io_names[IO_COUNT] = { [IO_USERPTR] = "userptr", [IO_MMAP] = "mmap" };
static const uint32_t io_memory[IO_COUNT] = { [IO_USERPTR] = V4L2_MEMORY_USERPTR, [IO_MMAP] = V4L2_MEMORY_MMAP };

/*
 * The formats zcpipe captures, in the order `format: auto` prefers them (the
 * cheapest conversions to NV12 first, MJPEG last: decoding costs the most).
 * V4L2 names byte orders its own way: XR24 is B G R X in memory, XB24 R G B X.
 */
static const struct {
        uint32_t fourcc;
        enum zcp_pixfmt fmt;
} formats[] = {
        { V4L2_PIX_FMT_NV12, ZCP_PIX_NV12 },   { V4L2_PIX_FMT_NV21, ZCP_PIX_NV21 },
        { V4L2_PIX_FMT_YUYV, ZCP_PIX_YUYV },   { V4L2_PIX_FMT_UYVY, ZCP_PIX_UYVY },
        { V4L2_PIX_FMT_YVYU, ZCP_PIX_YVYU },   { V4L2_PIX_FMT_YUV420, ZCP_PIX_I420 },
        { V4L2_PIX_FMT_YVU420, ZCP_PIX_YV12 }, { V4L2_PIX_FMT_RGB24, ZCP_PIX_RGB24 },
        { V4L2_PIX_FMT_BGR24, ZCP_PIX_BGR24 }, { V4L2_PIX_FMT_XBGR32, ZCP_PIX_BGRX },
        { V4L2_PIX_FMT_BGR32, ZCP_PIX_BGRX },  { V4L2_PIX_FMT_RGBX32, ZCP_PIX_RGBX },
        { V4L2_PIX_FMT_GREY, ZCP_PIX_GREY },   { V4L2_PIX_FMT_MJPEG, ZCP_PIX_MJPEG },
        { V4L2_PIX_FMT_JPEG, ZCP_PIX_MJPEG },
};
#define FORMAT_COUNT (sizeof(formats) / sizeof(formats[0]))

struct vbuf {
        uint32_t slot;   /* userptr: the slot given to the driver with this index, else NO_SLOT */
        uint8_t *map;    /* mmap: the driver buffer, mapped */
        size_t map_len;
        void *dev;       /* registered: device alias from the ring allocator's map() */
        bool mapped;     /* registered: map() succeeded, unmap() before munmap */
        bool queued;     /* in the driver's hands */
        uint32_t lent;   /* registered: the slot reading it in place, else NO_SLOT */
};

/* Per slot: the driver buffer lent to it, so that it can be given back (or unmapped once retired). */
struct lend {
        uint8_t *map;
        size_t map_len;
        bool mapped;
        uint32_t buf;    /* index on the current connection, or NO_SLOT once retired by a teardown */
};

struct zcp_source_ctx {
        struct zcp_source_config cfg;
        char name[ZCP_NAME_MAX];
        struct zcp_stream_stats *stats;
        struct zcp_ring *ring;

        /* Fixed at open: what the ring is made for. */
        uint32_t fourcc, width, height;
        enum zcp_pixfmt cap_fmt;      /* as captured (MJPEG or the slot format) */
        enum io io;
        bool io_known;
        struct zcp_source_info info;
        struct zcp_mjpeg *mjpeg;

        /* The current connection. */
        int fd;
        char node[PATH_MAX];
        uint32_t bpl, sizeimage;
        size_t needed;                /* bytes of a complete uncompressed frame */
        bool reqbufs, streaming;
        struct vbuf bufs[MAX_BUFS];
        uint32_t nbufs, queued;
        bool lend;                    /* this connection lends its buffers to slots (path "registered") */
        bool lend_refused;            /* the allocator refused a driver buffer: said once */
        struct lend *lends;           /* ring->count entries */
        uint32_t nlent, nretired;     /* slots reading a buffer in place; of those, buffers of a closed fd */

        /* Slots held by the source (state SOURCE), reused when the driver needs buffers. */
        uint32_t *held;
        uint32_t nheld;

        enum zcp_source_state state;
        bool ever_up;                 /* config errors are fatal only before the first success */
        bool good_since_up;           /* a good frame since the last (re)connect */
        bool quiet;                   /* repeated failures: log at debug */
        bool card_logged;
        int last_fail;
        uint32_t failures;
        uint64_t retry_at_ns, idle_since_ns;
        bool have_seq, starved;
        bool block;                   /* drop: block: never dequeue a frame without a slot for it */
        uint32_t last_seq;
        uint64_t seq;                 /* frame.seq: every frame the camera produced */
};

static const char *errname(int err)
{
        const char *n = strerrorname_np(err < 0 ? -err : err);

        return n ? n : "E?";
}

struct fourcc_text {
        char s[5];
};

static struct fourcc_text fourcc_text(uint32_t f)
{
        struct fourcc_text t;

        for (int i = 0; i < 4; i++) {
                char ch = (char)((f >> (8 * i)) & 0xff);

                t.s[i] = ch >= 0x20 && ch < 0x7f ? ch : '?';
        }
        t.s[4] = '\0';
        return t;
}

static int xioctl(int fd, unsigned long req, void *arg)
{
        int r;

        do
                r = v4l2_ioctl(fd, req, arg);
        while (r < 0 && errno == EINTR);
        return r < 0 ? -errno : r;
}

static void set_state(struct zcp_source_ctx *c, enum zcp_source_state s)
{
        c->state = s;
        atomic_store(&c->stats->source_state, (uint32_t)s);
}

static enum zcp_log_level fail_level(const struct zcp_source_ctx *c)
{
        return c->quiet ? ZCP_LOG_DEBUG : ZCP_LOG_ERROR;
}

static uint32_t fourcc_of(enum zcp_pixfmt fmt)
{
        for (size_t i = 0; i < FORMAT_COUNT; i++) {
                if (formats[i].fmt == fmt)
                        return formats[i].fourcc;
        }
        return 0;
}

static enum zcp_pixfmt pixfmt_of(uint32_t fourcc)
{
        for (size_t i = 0; i < FORMAT_COUNT; i++) {
                if (formats[i].fourcc == fourcc)
                        return formats[i].fmt;
        }
        return ZCP_PIX_NONE;
}

/* What a refusal means: a config the camera cannot do (before the first success), else a retryable error. */
static int refusal(const struct zcp_source_ctx *c, int err)
{
        if (!c->ever_up && (err == -EINVAL || err == -ERANGE || err == -ENOSPC || err == -ENOTTY))
                return ZCP_ERR_CONFIG;
        return err;
}

static int refused(struct zcp_source_ctx *c, const char *what, int err)
{
        zcp_log(fail_level(c), "%s: %s: %s for %s %ux%u, io %s, refused: %s (%s)", c->name, c->node, what,
                fourcc_text(c->fourcc).s, c->width, c->height, io_names[c->io], errname(err), strerror(-err));
        return refusal(c, err);
}

/* ---- buffers ---------------------------------------------------------- */

static size_t page_round(size_t n)
{
        long p = sysconf(_SC_PAGESIZE);
        size_t ps = p > 0 ? (size_t)p : 4096;

        return (n + ps - 1) / ps * ps;
}

static void hold(struct zcp_source_ctx *c, uint32_t idx)
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

static int qbuf(struct zcp_source_ctx *c, uint32_t i);

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
                        r = qbuf(c, l->buf);
                }
                *l = (struct lend){ .buf = NO_SLOT };
        }
        hold(c, idx);
        return r;
}

/* Waits up to timeout_ns for a slot to come back and holds it: 0, -EAGAIN, -EPIPE or a QBUF error. */
static int collect(struct zcp_source_ctx *c, int64_t timeout_ns)
{
        uint32_t idx;
        int r = zcp_ring_acquire(c->ring, timeout_ns, &idx);

        return r < 0 ? r : take_back(c, idx);
}

/* Collects every slot waiting in the free queue (never blocks): 0 or a QBUF error. */
static int reclaim(struct zcp_source_ctx *c)
{
        int r;

        while ((r = collect(c, 0)) == 0)
                ;
        return r == -EAGAIN || r == -EPIPE ? 0 : r;
}

/* A slot to fill, held ones first, never waiting: 0, -EAGAIN (none), or a QBUF error. */
static int take_slot(struct zcp_source_ctx *c, uint32_t *ret_idx)
{
        if (c->nheld == 0) {
                int r = collect(c, 0);

                if (r < 0)
                        return r == -EPIPE ? -EAGAIN : r;
        }
        *ret_idx = c->held[--c->nheld];
        return 0;
}

/* Counts n frames dropped before they reached a slot (they were captured all the same). */
static void source_drop(struct zcp_source_ctx *c, enum zcp_drop_reason reason, uint32_t n)
{
        c->seq += n;
        atomic_fetch_add_explicit(&c->stats->captured, n, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->stats->dropped[reason], n, memory_order_relaxed);
}

static int qbuf(struct zcp_source_ctx *c, uint32_t i)
{
        struct v4l2_buffer b = {
                .index = i,
                .type = V4L2_BUF_TYPE_VIDEO_CAPTURE,
                .memory = io_memory[c->io],
        };
        int r;

        if (c->io == IO_USERPTR) {
                struct zcp_slot *s = zcp_ring_slot(c->ring, c->bufs[i].slot);

                b.m.userptr = (unsigned long)s->data;
                b.length = (uint32_t)s->cap;
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
static int refill(struct zcp_source_ctx *c)
{
        uint32_t before = c->queued;

        while (c->queued < c->nbufs) {
                uint32_t idx, i;
                int r = take_slot(c, &idx);

                if (r == -EAGAIN)
                        break;
                if (r < 0)
                        return r;
                i = pick_index(c, idx);
                if (i == NO_SLOT) {
                        hold(c, idx);
                        break;
                }
                zcp_ring_move(c->ring, idx, ZCP_SLOT_SOURCE, ZCP_SLOT_DRIVER);
                c->bufs[i].slot = idx;
                r = qbuf(c, i);
                if (r < 0) {
                        c->bufs[i].slot = NO_SLOT;
                        zcp_ring_move(c->ring, idx, ZCP_SLOT_DRIVER, ZCP_SLOT_SOURCE);
                        hold(c, idx);
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
        enum v4l2_buf_type type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        uint32_t retired = 0;

        if (c->streaming) {
                (void)xioctl(c->fd, VIDIOC_STREAMOFF, &type);
                c->streaming = false;
        }
        for (uint32_t i = 0; i < c->nbufs; i++) {
                struct vbuf *b = &c->bufs[i];

                if (b->slot != NO_SLOT) {
                        zcp_ring_move(c->ring, b->slot, ZCP_SLOT_DRIVER, ZCP_SLOT_SOURCE);
                        hold(c, b->slot);
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
                        .type = V4L2_BUF_TYPE_VIDEO_CAPTURE,
                        .memory = io_memory[c->io],
                };
                (void)xioctl(c->fd, VIDIOC_REQBUFS, &req);
        }
        c->reqbufs = false;
}

/* Full teardown of the connection; slots the driver had return to the source. */
static void dev_close(struct zcp_source_ctx *c)
{
        if (c->fd < 0)
                return;
        release_buffers(c);
        v4l2_close(c->fd);
        c->fd = -1;
}

/* ---- opening and negotiation ------------------------------------------- */

static int dev_open(struct zcp_source_ctx *c)
{
        char node[PATH_MAX];
        struct v4l2_capability cap;
        uint32_t caps;
        int fd, r;

        /* Links such as /dev/v4l/by-id/... may point elsewhere after a replug. */
        if (!realpath(c->cfg.device, node))
                return -errno;
        fd = open(node, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        errno = 0;
        if (v4l2_fd_open(fd, V4L2_DISABLE_CONVERSION) < 0) {
                r = errno ? -errno : -ENOTTY;
                close(fd);
                zcp_log(fail_level(c), "%s: %s: libv4l2 does not take it as a V4L2 device: %s", c->name, node,
                        strerror(-r));
                return r == -ENODEV ? r : -ENOTTY;
        }
        c->fd = fd;
        if (strcmp(node, c->node) != 0) {
                if (c->node[0] || strcmp(node, c->cfg.device) != 0)
                        zcp_info("%s: %s is %s", c->name, c->cfg.device, node);
                snprintf(c->node, sizeof(c->node), "%s", node);
        }
        memset(&cap, 0, sizeof(cap));
        r = xioctl(fd, VIDIOC_QUERYCAP, &cap);
        if (r < 0) {
                zcp_log(fail_level(c), "%s: %s: VIDIOC_QUERYCAP failed: %s", c->name, node, strerror(-r));
                return r == -ENOTTY || r == -EINVAL ? -ENOTTY : r;
        }
        caps = (cap.capabilities & V4L2_CAP_DEVICE_CAPS) ? cap.device_caps : cap.capabilities;
        if (!(caps & V4L2_CAP_VIDEO_CAPTURE) || !(caps & V4L2_CAP_STREAMING)) {
                zcp_log(fail_level(c),
                        "%s: %s ('%.32s', driver %.16s) is not a single-planar streaming video capture node "
                        "(capabilities 0x%08x)",
                        c->name, node, (const char *)cap.card, (const char *)cap.driver, caps);
                return -ENOTTY;
        }
        if (!c->card_logged) {
                zcp_info("%s: %s: '%.32s' (driver %.16s, %.32s)", c->name, node, (const char *)cap.card,
                         (const char *)cap.driver, (const char *)cap.bus_info);
                c->card_logged = true;
        }
        return 0;
}

static uint32_t enum_formats(int fd, uint32_t *out, uint32_t max)
{
        uint32_t n = 0;

        for (uint32_t i = 0; i < 64 && n < max; i++) {
                struct v4l2_fmtdesc d = { .index = i, .type = V4L2_BUF_TYPE_VIDEO_CAPTURE };

                if (xioctl(fd, VIDIOC_ENUM_FMT, &d) < 0)
                        break;
                out[n++] = d.pixelformat;
        }
        return n;
}

static bool listed(const uint32_t *list, uint32_t n, uint32_t f)
{
        for (uint32_t i = 0; i < n; i++) {
                if (list[i] == f)
                        return true;
        }
        return false;
}

/* Does the device keep fourcc at w x h? TRY_FMT, else ENUM_FRAMESIZES, else "maybe" (S_FMT decides). */
static bool size_ok(int fd, uint32_t fourcc, uint32_t w, uint32_t h)
{
        struct v4l2_format f = { .type = V4L2_BUF_TYPE_VIDEO_CAPTURE };
        int r;

        f.fmt.pix.pixelformat = fourcc;
        f.fmt.pix.width = w;
        f.fmt.pix.height = h;
        f.fmt.pix.field = V4L2_FIELD_ANY;
        r = xioctl(fd, VIDIOC_TRY_FMT, &f);
        if (r == 0)
                return f.fmt.pix.pixelformat == fourcc && f.fmt.pix.width == w && f.fmt.pix.height == h;
        if (r != -ENOTTY)
                return false;
        for (uint32_t i = 0; i < 256; i++) {
                struct v4l2_frmsizeenum s = { .index = i, .pixel_format = fourcc };

                if (xioctl(fd, VIDIOC_ENUM_FRAMESIZES, &s) < 0)
                        return i == 0;
                if (s.type == V4L2_FRMSIZE_TYPE_DISCRETE) {
                        if (s.discrete.width == w && s.discrete.height == h)
                                return true;
                        continue;
                }
                return w >= s.stepwise.min_width && w <= s.stepwise.max_width && h >= s.stepwise.min_height &&
                       h <= s.stepwise.max_height &&
                       (s.stepwise.step_width == 0 || (w - s.stepwise.min_width) % s.stepwise.step_width == 0) &&
                       (s.stepwise.step_height == 0 || (h - s.stepwise.min_height) % s.stepwise.step_height == 0);
        }
        return false;
}

static bool reaches(const struct v4l2_fract *interval, uint32_t fps)
{
        return interval->numerator && (uint64_t)interval->denominator >= (uint64_t)fps * interval->numerator;
}

/* 1: the device lists a rate >= fps for this mode, 0: it lists only slower ones, -1: it does not say. */
static int rate_ok(int fd, uint32_t fourcc, uint32_t w, uint32_t h, uint32_t fps)
{
        struct v4l2_frmivalenum fi = { .index = 0, .pixel_format = fourcc, .width = w, .height = h };

        if (xioctl(fd, VIDIOC_ENUM_FRAMEINTERVALS, &fi) < 0)
                return -1;
        if (fi.type != V4L2_FRMIVAL_TYPE_DISCRETE)
                return reaches(&fi.stepwise.min, fps) ? 1 : 0;
        for (uint32_t i = 1; i < 256; i++) {
                if (reaches(&fi.discrete, fps))
                        return 1;
                fi.index = i;
                if (xioctl(fd, VIDIOC_ENUM_FRAMEINTERVALS, &fi) < 0)
                        break;
        }
        return 0;
}

static void format_list(const uint32_t *list, uint32_t n, char *buf, size_t size)
{
        size_t len = 0;

        buf[0] = '\0';
        for (uint32_t i = 0; i < n && len < size; i++) {
                int w = snprintf(buf + len, size - len, "%s%s", i ? " " : "", fourcc_text(list[i]).s);

                if (w < 0)
                        break;
                len += (size_t)w;
        }
        if (n == 0)
                snprintf(buf, size, "none listed");
}

/* Picks the V4L2 format: the configured one (it must be listed), or the best listed one that fits. */
static int choose_format(struct zcp_source_ctx *c)
{
        uint32_t list[64], n = enum_formats(c->fd, list, 64), fallback = 0;
        char names[400];

        format_list(list, n, names, sizeof(names));
        if (c->cfg.format != ZCP_PIX_NONE) {
                uint32_t want = fourcc_of(c->cfg.format);

                if (want == 0) {
                        zcp_err("%s: format %s is not one zcpipe captures from V4L2 (nv12 nv21 yuyv uyvy yvyu i420 "
                                "yv12 rgb24 bgr24 bgrx rgbx grey mjpeg)",
                                c->name, zcp_pixfmt_name(c->cfg.format));
                        return ZCP_ERR_CONFIG;
                }
                /* Some formats have two V4L2 codes (MJPG/JPEG, XR24/BGR4): the one the camera lists. */
                for (size_t i = 0; i < FORMAT_COUNT && n > 0; i++) {
                        if (formats[i].fmt == c->cfg.format && listed(list, n, formats[i].fourcc)) {
                                c->fourcc = formats[i].fourcc;
                                return 0;
                        }
                }
                if (n > 0) {
                        zcp_err("%s: %s does not offer %s (it offers: %s)", c->name, c->node, fourcc_text(want).s,
                                names);
                        return ZCP_ERR_CONFIG;
                }
                c->fourcc = want;
                return 0;
        }
        for (size_t i = 0; i < FORMAT_COUNT; i++) {
                uint32_t f = formats[i].fourcc;

                if (!listed(list, n, f) || !size_ok(c->fd, f, c->width, c->height))
                        continue;
                if (rate_ok(c->fd, f, c->width, c->height, c->cfg.fps) != 0) {
                        c->fourcc = f;
                        return 0;
                }
                if (!fallback)
                        fallback = f;
        }
        if (fallback) {
                zcp_warn("%s: %s: no format reaches %u fps at %ux%u; using %s", c->name, c->node, c->cfg.fps,
                         c->width, c->height, fourcc_text(fallback).s);
                c->fourcc = fallback;
                return 0;
        }
        zcp_err("%s: %s offers no format zcpipe takes at %ux%u (it offers: %s; zcpipe takes NV12 NV21 YUYV UYVY "
                "YVYU YU12 YV12 RGB3 BGR3 XR24 BGR4 XB24 GREY MJPG JPEG)",
                c->name, c->node, c->width, c->height, names);
        return ZCP_ERR_CONFIG;
}

/*
 * S_FMT with the fixed fourcc and size. `first`: learn bytesperline and
 * sizeimage; else they must suit the ring made at open.
 */
static int set_format(struct zcp_source_ctx *c, bool first)
{
        struct v4l2_format f = { .type = V4L2_BUF_TYPE_VIDEO_CAPTURE };
        bool compressed = c->cap_fmt == ZCP_PIX_MJPEG;
        uint32_t min_bpl = compressed ? 0 : zcp_pixfmt_min_stride(c->cap_fmt, c->width);
        uint32_t bpl;
        int r;

        f.fmt.pix.pixelformat = c->fourcc;
        f.fmt.pix.width = c->width;
        f.fmt.pix.height = c->height;
        f.fmt.pix.field = V4L2_FIELD_ANY;
        f.fmt.pix.bytesperline = first || compressed ? 0 : c->info.stride;
        r = xioctl(c->fd, VIDIOC_S_FMT, &f);
        if (r < 0)
                return refused(c, "VIDIOC_S_FMT", r);
        if (f.fmt.pix.pixelformat != c->fourcc || f.fmt.pix.width != c->width || f.fmt.pix.height != c->height) {
                zcp_log(fail_level(c),
                        "%s: %s: asked for %s %ux%u, the driver set %s %ux%u: the camera cannot deliver that "
                        "(choose a mode it lists, e.g. with v4l2-ctl --list-formats-ext)",
                        c->name, c->node, fourcc_text(c->fourcc).s, c->width, c->height,
                        fourcc_text(f.fmt.pix.pixelformat).s, f.fmt.pix.width, f.fmt.pix.height);
                return refusal(c, -EINVAL);
        }
        switch (f.fmt.pix.field) {
        case V4L2_FIELD_TOP:
        case V4L2_FIELD_BOTTOM:
        case V4L2_FIELD_ALTERNATE:
        case V4L2_FIELD_SEQ_TB:
        case V4L2_FIELD_SEQ_BT:
                zcp_log(fail_level(c), "%s: %s: the driver delivers %ux%u as separate fields (field %u): not supported",
                        c->name, c->node, c->width, c->height, f.fmt.pix.field);
                return refusal(c, -EINVAL);
        default:
                break;
        }
        bpl = compressed ? 0 : (f.fmt.pix.bytesperline ? f.fmt.pix.bytesperline : min_bpl);
        if (!compressed) {
                size_t needed = zcp_pixfmt_frame_size_stride(c->cap_fmt, bpl, c->height);

                if (bpl < min_bpl || needed == 0) {
                        zcp_log(fail_level(c), "%s: %s: %s %ux%u with %u bytes per line cannot be captured", c->name,
                                c->node, fourcc_text(c->fourcc).s, c->width, c->height, bpl);
                        return refusal(c, -EINVAL);
                }
                if (!first && bpl != c->info.stride) {
                        zcp_log(fail_level(c), "%s: %s: the driver now uses %u bytes per line, the stream was "
                                "made for %u", c->name, c->node, bpl, c->info.stride);
                        return refusal(c, -EINVAL);
                }
                c->needed = needed;
        }
        c->bpl = bpl;
        c->sizeimage = f.fmt.pix.sizeimage;
        if (!compressed && c->sizeimage < c->needed)
                c->sizeimage = (uint32_t)c->needed;
        if (compressed && c->sizeimage == 0) {
                zcp_log(fail_level(c), "%s: %s: the driver reports no buffer size for %s", c->name, c->node,
                        fourcc_text(c->fourcc).s);
                return refusal(c, -EINVAL);
        }
        return 0;
}

/* Asks for cfg fps; returns the rate the driver settled on as num / den (0/1 when it does not say). */
static void set_rate(struct zcp_source_ctx *c, uint32_t *ret_num, uint32_t *ret_den)
{
        struct v4l2_streamparm p = { .type = V4L2_BUF_TYPE_VIDEO_CAPTURE };
        struct v4l2_fract *tpf = &p.parm.capture.timeperframe;
        int r;

        *ret_num = 0;
        *ret_den = 1;
        if (xioctl(c->fd, VIDIOC_G_PARM, &p) < 0 || !(p.parm.capture.capability & V4L2_CAP_TIMEPERFRAME))
                return;
        tpf->numerator = 1;
        tpf->denominator = c->cfg.fps;
        r = xioctl(c->fd, VIDIOC_S_PARM, &p);
        if (r < 0) {
                zcp_log(c->quiet ? ZCP_LOG_DEBUG : ZCP_LOG_WARN, "%s: %s: cannot set %u fps: %s", c->name, c->node,
                        c->cfg.fps, strerror(-r));
                if (xioctl(c->fd, VIDIOC_G_PARM, &p) < 0)
                        return;
        }
        if (tpf->numerator && tpf->denominator) {
                *ret_num = tpf->denominator;
                *ret_den = tpf->numerator;
        }
}

/* userptr unless the config says mmap, the format is MJPEG, or the driver refuses USERPTR. */
static int decide_io(struct zcp_source_ctx *c)
{
        struct v4l2_requestbuffers req = {
                .count = 0,
                .type = V4L2_BUF_TYPE_VIDEO_CAPTURE,
                .memory = V4L2_MEMORY_USERPTR,
        };
        int r;

        if (c->cap_fmt == ZCP_PIX_MJPEG) {
                if (c->cfg.io == ZCP_IO_USERPTR)
                        zcp_info("%s: MJPEG is captured into mmap buffers and decoded into the slot (io: userptr "
                                 "does not apply)", c->name);
                c->io = IO_MMAP;
        } else if (c->cfg.io == ZCP_IO_MMAP) {
                c->io = IO_MMAP;
        } else {
                r = xioctl(c->fd, VIDIOC_REQBUFS, &req);
                if (r == -EINVAL) {
                        if (c->cfg.io == ZCP_IO_USERPTR) {
                                c->io = IO_USERPTR;
                                return refused(c, "USERPTR buffers (io: userptr; use io: mmap or auto)", r);
                        }
                        zcp_info("%s: %s refuses USERPTR buffers: capturing into mmap buffers, one copy per frame",
                                 c->name, c->node);
                        c->io = IO_MMAP;
                } else if (r < 0) {
                        zcp_log(fail_level(c), "%s: %s: VIDIOC_REQBUFS (probe) failed: %s", c->name, c->node,
                                strerror(-r));
                        return r;
                } else {
                        c->io = IO_USERPTR;
                }
        }
        c->io_known = true;
        return 0;
}

/* Can this connection's buffers be lent to slots? (The buffer sizes are checked as they are mapped.) */
static bool lendable(const struct zcp_source_ctx *c)
{
        return c->cap_fmt != ZCP_PIX_MJPEG && c->ring->alloc.map && c->ring->alloc.unmap &&
               page_round(c->sizeimage) >= c->ring->slot_size;
}

/* Stops lending on this connection: the buffers mapped so far are unmapped from the allocator. */
static void lend_off(struct zcp_source_ctx *c, const char *why, int err)
{
        if (!c->lend_refused)
                zcp_warn("%s: %s: the driver's buffers cannot be read in place (%s%s%s); copying each frame into "
                         "the ring instead", c->name, c->node, why, err ? ": " : "", err ? strerror(-err) : "");
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

        if (page_round(b->map_len) < c->ring->slot_size) {
                snprintf(why, sizeof(why), "buffer %u holds %zu bytes, converting in place needs %zu", i, b->map_len,
                         c->ring->slot_size);
                lend_off(c, why, 0);
                return;
        }
        r = a->map(a->ctx, b->map, page_round(b->map_len), &b->dev);
        if (r < 0) {
                snprintf(why, sizeof(why), "the %s allocator cannot map buffer %u", a->name ? a->name : "ring", i);
                lend_off(c, why, r);
                return;
        }
        b->mapped = true;
}

/* REQBUFS, buffers to the driver, STREAMON. Needs the ring. */
static int stream_on(struct zcp_source_ctx *c)
{
        enum v4l2_buf_type type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        struct v4l2_requestbuffers req;
        size_t need = c->io == IO_USERPTR ? c->sizeimage : c->needed;
        uint32_t lend_bufs = c->ring->count + 2 < MAX_BUFS ? c->ring->count + 2 : MAX_BUFS;
        int r;

        if (need > c->ring->slot_size) {
                zcp_log(fail_level(c), "%s: %s: frames of %zu bytes do not fit the ring's %zu-byte slots", c->name,
                        c->node, need, c->ring->slot_size);
                return refusal(c, -EINVAL);
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
                req.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
                req.memory = io_memory[c->io];
                r = xioctl(c->fd, VIDIOC_REQBUFS, &req);
                if (r == -EINVAL && c->io == IO_USERPTR && c->cfg.io == ZCP_IO_AUTO && c->cap_fmt != ZCP_PIX_MJPEG) {
                        zcp_warn("%s: %s refuses USERPTR buffers now: capturing into mmap buffers, one copy per "
                                 "frame", c->name, c->node);
                        c->io = IO_MMAP;
                        if (c->needed > c->ring->slot_size)
                                return refusal(c, -EINVAL);
                        continue;
                }
                break;
        }
        if (r < 0)
                return refused(c, "VIDIOC_REQBUFS", r);
        c->reqbufs = true;
        if (req.count == 0)
                return refused(c, "VIDIOC_REQBUFS (no buffers)", -ENOMEM);
        c->nbufs = req.count < MAX_BUFS ? req.count : MAX_BUFS;
        if (c->io == IO_USERPTR && c->nbufs > c->ring->count)
                c->nbufs = c->ring->count;
        for (uint32_t i = 0; i < c->nbufs; i++) {
                c->bufs[i] = (struct vbuf){ .slot = NO_SLOT, .lent = NO_SLOT };
        }

        if (c->io == IO_MMAP) {
                for (uint32_t i = 0; i < c->nbufs; i++) {
                        struct v4l2_buffer b = { .index = i, .type = type, .memory = V4L2_MEMORY_MMAP };
                        void *p;

                        r = xioctl(c->fd, VIDIOC_QUERYBUF, &b);
                        if (r < 0)
                                return refused(c, "VIDIOC_QUERYBUF", r);
                        if (b.length < (c->cap_fmt == ZCP_PIX_MJPEG ? 1 : c->needed)) {
                                zcp_log(fail_level(c), "%s: %s: driver buffer %u holds %u bytes, a frame needs %zu",
                                        c->name, c->node, i, b.length, c->needed);
                                return refusal(c, -EINVAL);
                        }
                        p = v4l2_mmap(NULL, b.length, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, b.m.offset);
                        if (p == MAP_FAILED) {
                                r = -errno;
                                zcp_log(fail_level(c), "%s: %s: mmap of buffer %u (%u bytes) failed: %s", c->name,
                                        c->node, i, b.length, strerror(-r));
                                return r;
                        }
                        c->bufs[i].map = p;
                        c->bufs[i].map_len = b.length;
                        if (c->lend)
                                map_for_lending(c, i);
                        r = qbuf(c, i);
                        if (r < 0)
                                return refused(c, "VIDIOC_QBUF", r);
                }
        } else {
                r = refill(c);
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
                        return refused(c, "VIDIOC_QBUF", r);
        }
        r = xioctl(c->fd, VIDIOC_STREAMON, &type);
        if (r < 0)
                return refused(c, "VIDIOC_STREAMON", r);
        c->streaming = true;
        c->idle_since_ns = zcp_now_ns();
        c->have_seq = false;
        c->starved = false;
        return 0;
}

/* Reopens the node for the geometry fixed at open. */
static int dev_connect(struct zcp_source_ctx *c)
{
        uint32_t num, den;
        int r;

        r = dev_open(c);
        if (r < 0)
                return r;
        r = set_format(c, false);
        if (r < 0)
                return r;
        set_rate(c, &num, &den);
        if (!c->io_known) {
                r = decide_io(c);
                if (r < 0)
                        return r;
        }
        return stream_on(c);
}

/* ---- state machine ----------------------------------------------------- */

static uint32_t backoff_ms(const struct zcp_source_ctx *c)
{
        uint64_t ms;

        if (c->failures == 0)
                return 0;
        ms = (uint64_t)BACKOFF_FIRST_MS << (c->failures - 1 < 20 ? c->failures - 1 : 20);
        return ms < c->cfg.backoff_max_ms ? (uint32_t)ms : c->cfg.backoff_max_ms;
}

static void schedule_retry(struct zcp_source_ctx *c)
{
        c->retry_at_ns = zcp_now_ns() + (uint64_t)backoff_ms(c) * ZCP_NSEC_PER_MSEC;
        set_state(c, ZCP_SOURCE_BACKOFF);
}

static void log_streaming(const struct zcp_source_ctx *c)
{
        /* The exporters show the path in use: io auto may have fallen back to mmap, mmap to copying. */
        atomic_store(&c->stats->capture_path, c->cap_fmt == ZCP_PIX_MJPEG || c->io == IO_USERPTR ? ZCP_PATH_DIRECT
                                              : c->lend                                        ? ZCP_PATH_REGISTERED
                                                                                               : ZCP_PATH_COPY);
        zcp_info("%s: %s: streaming %s %ux%u, io %s (%s%s)%s", c->name, c->node, fourcc_text(c->fourcc).s, c->width,
                 c->height, io_names[c->io],
                 c->cap_fmt == ZCP_PIX_MJPEG ? "decoded into the slot"
                 : c->io == IO_USERPTR     ? "direct: the camera writes into the ring"
                 : c->lend                 ? "registered: the driver's buffers are read in place, mapped for "
                                           : "copied into the ring",
                 c->lend ? c->ring->alloc.name : "", c->ever_up ? " again" : "");
}

/* A fault on a working connection: tear down, count, retry (at once if it had delivered). */
static int fault(struct zcp_source_ctx *c, int err, const char *what)
{
        zcp_warn("%s: %s: %s: %s (%s); closing the device and opening it again", c->name, c->node, what,
                 errname(err), strerror(-err));
        dev_close(c);
        atomic_fetch_add_explicit(&c->stats->reconnects, 1, memory_order_relaxed);
        c->failures = c->good_since_up ? 0 : c->failures + 1;
        c->quiet = false;
        c->last_fail = err;
        schedule_retry(c);
        return ZCP_SOURCE_AGAIN;
}

/* Waits (<= 100 ms) for the back-off to pass, collecting slots that come back meanwhile. */
static void backoff_wait(struct zcp_source_ctx *c, uint64_t now)
{
        uint64_t until = c->retry_at_ns - now > WAIT_MAX_MS * ZCP_NSEC_PER_MSEC ? now + WAIT_MAX_MS * ZCP_NSEC_PER_MSEC
                                                                                 : c->retry_at_ns;
        struct timespec ts;

        /* Collecting also unmaps buffers retired by the teardown as their slots come back. */
        if (c->io == IO_USERPTR || c->nlent > 0) {
                int r = collect(c, (int64_t)(until - now));

                if (r != -EPIPE)
                        return;
        }
        ts.tv_sec = (time_t)(until / ZCP_NSEC_PER_SEC);
        ts.tv_nsec = (long)(until % ZCP_NSEC_PER_SEC);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

static int reconnect(struct zcp_source_ctx *c)
{
        uint64_t now = zcp_now_ns();
        int r;

        if (now < c->retry_at_ns) {
                backoff_wait(c, now);
                if (zcp_now_ns() < c->retry_at_ns)
                        return ZCP_SOURCE_AGAIN;
        }
        set_state(c, ZCP_SOURCE_OPENING);
        r = dev_connect(c);
        if (r == 0) {
                log_streaming(c);
                c->ever_up = true;
                c->good_since_up = false;
                c->quiet = false;
                set_state(c, ZCP_SOURCE_UP);
                return ZCP_SOURCE_AGAIN;
        }
        dev_close(c);
        if (r == ZCP_ERR_CONFIG) {
                set_state(c, ZCP_SOURCE_DOWN);
                return r;
        }
        c->failures++;
        if (!c->quiet || r != c->last_fail)
                zcp_warn("%s: %s: cannot open: %s (%s); retrying in %u ms, then at most every %u ms", c->name,
                         c->cfg.device, errname(r), strerror(-r), backoff_ms(c), c->cfg.backoff_max_ms);
        else
                zcp_debug("%s: %s: still cannot open: %s; retrying in %u ms", c->name, c->cfg.device, errname(r),
                          backoff_ms(c));
        c->last_fail = r;
        c->quiet = true;
        schedule_retry(c);
        return ZCP_SOURCE_AGAIN;
}

/* ---- frames ------------------------------------------------------------ */

static void seq_check(struct zcp_source_ctx *c, uint32_t sequence)
{
        if (c->have_seq) {
                uint32_t gap = sequence - c->last_seq - 1;

                /* Forward jumps only; a repeated or backward number is not a loss. */
                if (gap != 0 && gap < (1u << 30))
                        source_drop(c, c->starved ? ZCP_DROP_RING_FULL : ZCP_DROP_SEQ_GAP, gap);
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
                source_drop(c, ZCP_DROP_BAD_INDEX, 1);
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
                source_drop(c, why, 1);
                r = qbuf(c, b->index);
                return r < 0 ? fault(c, r, "VIDIOC_QBUF") : ZCP_SOURCE_AGAIN;
        }

        if (c->io == IO_USERPTR) {
                idx = vb->slot;
                vb->slot = NO_SLOT;
                zcp_ring_move(ring, idx, ZCP_SLOT_DRIVER, ZCP_SLOT_SOURCE);
        } else {
                struct zcp_slot *s;

                r = take_slot(c, &idx);
                if (r == -EAGAIN) {
                        /* The camera is fine; the pipeline is behind. */
                        c->idle_since_ns = now;
                        source_drop(c, ZCP_DROP_RING_FULL, 1);
                        r = qbuf(c, b->index);
                        return r < 0 ? fault(c, r, "VIDIOC_QBUF") : ZCP_SOURCE_AGAIN;
                }
                if (r < 0) {
                        /* Giving a returned buffer back failed: this one is not queued either. */
                        return fault(c, r, "VIDIOC_QBUF");
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
                                hold(c, idx);
                                source_drop(c, why, 1);
                                r = qbuf(c, b->index);
                                return r < 0 ? fault(c, r, "VIDIOC_QBUF") : ZCP_SOURCE_AGAIN;
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

        r = c->io == IO_USERPTR ? refill(c) : c->lend ? 0 : qbuf(c, b->index);
        if (r < 0)
                fault(c, r, "VIDIOC_QBUF");
        return ZCP_SOURCE_FRAME;
}

static int capture(struct zcp_source_ctx *c)
{
        struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
        uint64_t now = zcp_now_ns();
        uint64_t deadline = c->idle_since_ns + (uint64_t)c->cfg.timeout_ms * ZCP_NSEC_PER_MSEC;
        struct v4l2_buffer b;
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
                return errno == EINTR ? ZCP_SOURCE_AGAIN : fault(c, -errno, "poll");
        if (r == 0) {
                if (zcp_now_ns() >= deadline) {
                        char what[64];

                        snprintf(what, sizeof(what), "no frame for %u ms", c->cfg.timeout_ms);
                        return fault(c, -ETIMEDOUT, what);
                }
                return ZCP_SOURCE_AGAIN;
        }
        memset(&b, 0, sizeof(b));
        b.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        b.memory = io_memory[c->io];
        r = xioctl(c->fd, VIDIOC_DQBUF, &b);
        if (r == -EAGAIN) {
                if (pfd.revents & (POLLERR | POLLHUP | POLLNVAL))
                        return fault(c, -EIO, "poll reported an error");
                return ZCP_SOURCE_AGAIN;
        }
        if (r < 0)
                return fault(c, r, "VIDIOC_DQBUF");
        return dequeued(c, &b, zcp_now_ns());
}

/* ---- ops --------------------------------------------------------------- */

/*
 * The path open predicts (the ring does not exist yet): mmap buffers are read
 * in place when they can hold a converted frame. The path in use, exported
 * once streaming, also depends on the ring allocator taking them.
 */
static enum zcp_capture_path predicted_path(const struct zcp_source_ctx *c)
{
        size_t slot;

        if (c->cap_fmt == ZCP_PIX_MJPEG || c->io == IO_USERPTR)
                return ZCP_PATH_DIRECT;
        slot = zcp_convert_slot_size(c->cap_fmt, c->width, c->height, c->bpl);
        if (slot < c->needed)
                slot = c->needed;
        return page_round(c->sizeimage) >= page_round(slot) ? ZCP_PATH_REGISTERED : ZCP_PATH_COPY;
}

static void make_info(struct zcp_source_ctx *c, uint32_t fps_num, uint32_t fps_den)
{
        bool mjpeg = c->cap_fmt == ZCP_PIX_MJPEG;

        c->info = (struct zcp_source_info){
                .width = c->width,
                .height = c->height,
                .fmt = mjpeg ? ZCP_PIX_I420 : c->cap_fmt,
                .stride = mjpeg ? c->width : c->bpl,
                .frame_bytes = mjpeg ? zcp_mjpeg_i420_size(c->width, c->height)
                               : c->io == IO_USERPTR ? c->sizeimage
                                                     : c->needed,
                .fps_num = fps_num,
                .fps_den = fps_den,
                .live = true,
                .path = predicted_path(c),
        };
}

static void v4l2_src_close(struct zcp_source_ctx *c)
{
        if (!c)
                return;
        dev_close(c);
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

        r = dev_open(c);
        if (r == -ENOENT || r == -ENODEV || r == -ENXIO) {
                dev_close(c);
                if (cfg->source.format == ZCP_PIX_NONE || cfg->source.width == 0 || cfg->source.height == 0) {
                        zcp_err("%s: %s is absent (%s); to start without the camera, set source.format, "
                                "source.width and source.height",
                                c->name, c->cfg.device, strerror(-r));
                        r = ZCP_ERR_CONFIG;
                        goto fail;
                }
                c->fourcc = fourcc_of(cfg->source.format);
                if (c->fourcc == 0) {
                        zcp_err("%s: format %s is not one zcpipe captures from V4L2", c->name,
                                zcp_pixfmt_name(cfg->source.format));
                        r = ZCP_ERR_CONFIG;
                        goto fail;
                }
                c->cap_fmt = cfg->source.format;
                if (c->cap_fmt != ZCP_PIX_MJPEG) {
                        c->bpl = zcp_pixfmt_min_stride(c->cap_fmt, c->width);
                        c->needed = zcp_pixfmt_frame_size(c->cap_fmt, c->width, c->height);
                        c->sizeimage = (uint32_t)c->needed;
                }
                /* The first connection decides io: auto assumes userptr until then. */
                c->io = c->cap_fmt == ZCP_PIX_MJPEG || cfg->source.io == ZCP_IO_MMAP ? IO_MMAP : IO_USERPTR;
                c->io_known = cfg->source.io != ZCP_IO_AUTO || c->cap_fmt == ZCP_PIX_MJPEG;
                num = cfg->source.fps;
                zcp_warn("%s: %s is absent (%s); the stream starts and waits for it", c->name, c->cfg.device,
                         strerror(-r));
                set_state(c, ZCP_SOURCE_DOWN);
        } else if (r < 0) {
                zcp_err("%s: cannot open %s: %s", c->name, c->cfg.device, strerror(-r));
                if (r == -ENOTTY)
                        r = ZCP_ERR_CONFIG;
                goto fail;
        } else {
                r = choose_format(c);
                if (r < 0)
                        goto fail;
                c->cap_fmt = pixfmt_of(c->fourcc);
                r = set_format(c, true);
                if (r < 0)
                        goto fail;
                set_rate(c, &num, &den);
                if (num && (uint64_t)num != (uint64_t)cfg->source.fps * den)
                        zcp_info("%s: %s runs at %u/%u fps (asked for %u)", c->name, c->node, num, den,
                                 cfg->source.fps);
                r = decide_io(c);
                if (r < 0)
                        goto fail;
        }
        if (c->cap_fmt == ZCP_PIX_MJPEG) {
                r = zcp_mjpeg_new(c->width, c->height, &c->mjpeg);
                if (r < 0)
                        goto fail;
        }
        make_info(c, num, den);
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

        c->ring = ring;
        if (!c->held) {
                c->held = calloc(ring->count, sizeof(*c->held));
                c->lends = calloc(ring->count, sizeof(*c->lends));
                if (!c->held || !c->lends)
                        return -ENOMEM;
                for (uint32_t i = 0; i < ring->count; i++)
                        c->lends[i].buf = NO_SLOT;
        }
        c->nheld = 0;
        c->failures = 0;
        if (c->fd < 0) {
                /* Absent at open: the first attempt is the first next(). */
                c->retry_at_ns = 0;
                set_state(c, ZCP_SOURCE_BACKOFF);
                return 0;
        }
        r = stream_on(c);
        if (r == 0) {
                log_streaming(c);
                c->ever_up = true;
                set_state(c, ZCP_SOURCE_UP);
                return 0;
        }
        dev_close(c);
        if (r == ZCP_ERR_CONFIG)
                return r;
        c->failures = 1;
        c->last_fail = r;
        c->quiet = true;
        zcp_warn("%s: %s: cannot start streaming: %s (%s); retrying in %u ms, then at most every %u ms", c->name,
                 c->cfg.device, errname(r), strerror(-r), backoff_ms(c), c->cfg.backoff_max_ms);
        schedule_retry(c);
        return 0;
}

static int v4l2_src_next(struct zcp_source_ctx *c, struct zcp_ring *ring)
{
        int r;

        if (c->state != ZCP_SOURCE_UP)
                return reconnect(c);
        if (c->nlent > 0) {
                r = reclaim(c);
                if (r < 0)
                        return fault(c, r, "VIDIOC_QBUF");
        }
        if (c->lend && c->queued == 0) {
                /* Every buffer is read downstream: the driver has none and cannot stall. */
                c->starved = true;
                r = collect(c, WAIT_MAX_MS * (int64_t)ZCP_NSEC_PER_MSEC);
                if (r < 0 && r != -EAGAIN && r != -EPIPE)
                        return fault(c, r, "VIDIOC_QBUF");
                return ZCP_SOURCE_AGAIN;
        }
        if (c->io != IO_USERPTR && c->block && c->nheld == 0) {
                /*
                 * drop: block: a buffer is dequeued only when a slot can take
                 * it. Until one returns, frames wait in the driver's buffers;
                 * what the driver loses meanwhile shows as a sequence gap,
                 * counted as ring-full (the pipeline was behind, not the camera).
                 */
                r = collect(c, WAIT_MAX_MS * (int64_t)ZCP_NSEC_PER_MSEC);
                if (r == -EAGAIN || r == -EPIPE) {
                        c->starved = true;
                        c->idle_since_ns = zcp_now_ns();
                        return ZCP_SOURCE_AGAIN;
                }
                if (r < 0)
                        return fault(c, r, "VIDIOC_QBUF");
        }
        if (c->io == IO_USERPTR) {
                r = refill(c);
                if (r < 0)
                        return fault(c, r, "VIDIOC_QBUF");
                if (c->queued == 0) {
                        /* Every slot is downstream: the driver has no buffer and cannot stall. */
                        c->starved = true;
                        r = collect(c, WAIT_MAX_MS * (int64_t)ZCP_NSEC_PER_MSEC);
                        if (r == 0) {
                                r = refill(c);
                                if (r < 0)
                                        return fault(c, r, "VIDIOC_QBUF");
                        }
                        return ZCP_SOURCE_AGAIN;
                }
        }
        return capture(c);
}

static void v4l2_src_stop(struct zcp_source_ctx *c, struct zcp_ring *ring)
{
        if (c->ring)
                dev_close(c);
        /*
         * pipeline.c calls this once every stage thread has exited: every slot
         * is in the free queue or held, and the free queue has no other
         * producer now. Collecting them unmaps the buffers still lent.
         */
        if (c->ring)
                (void)reclaim(c);
        if (c->nlent > 0)
                zcp_err("%s: %u driver buffers are still lent to slots at stop (leaked)", c->name, c->nlent);
        for (uint32_t i = 0; i < c->nheld; i++) {
                zcp_ring_move(ring, c->held[i], ZCP_SLOT_SOURCE, ZCP_SLOT_FREE);
                zcp_spsc_push(&ring->q[ZCP_Q_FREE], c->held[i]);
        }
        c->nheld = 0;
        set_state(c, ZCP_SOURCE_DOWN);
        zcp_info("%s: %s: stopped", c->name, c->node[0] ? c->node : c->cfg.device);
}

const struct zcp_source_ops zcp_source_v4l2 = {
        .name = "v4l2",
        .open = v4l2_src_open,
        .start = v4l2_src_start,
        .next = v4l2_src_next,
        .stop = v4l2_src_stop,
        .close = v4l2_src_close,
};
