/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The V4L2 source's shared state: one context that its files work on, each
 * group of fields written by the file named above it and read by the files
 * above that one. The files call each other in one direction only:
 *
 *   v4l2.c       the ops and the frame path (dequeue, validate, fill)
 *   v4l2_conn.c  the reconnect state machine            (v4l2_conn.h)
 *   v4l2_geom.c  the geometry the ring is made for      (v4l2_geom.h)
 *   v4l2_buf.c   driver buffers, held slots, lending    (v4l2_buf.h)
 *   v4l2_fmt.c   opening a node, negotiating a format   (v4l2_fmt.h)
 *
 * Nothing outside src/capture/v4l2*.c includes it. Threads: as v4l2.c says.
 */
#include <errno.h>
#include <libv4l2.h>
#include <limits.h>
#include <linux/videodev2.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "capture/mjpeg.h"
#include "capture/source.h"
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
        /* Fixed at open (v4l2.c). */
        struct zcp_source_config cfg;
        char name[ZCP_NAME_MAX];
        struct zcp_stream_stats *stats;
        bool block;                   /* drop: block: never dequeue a frame without a slot for it */

        /*
         * What the ring is made for (v4l2_geom.c; v4l2.c at open and in
         * reconfigure()): changed only by reconfigure(). A renegotiation may
         * set fourcc and size while RECONFIGURE is pending: no frame is
         * delivered then.
         */
        uint32_t fourcc, width, height;
        enum zcp_pixfmt cap_fmt;      /* as captured (MJPEG or the slot format) */
        struct zcp_source_info info;
        struct zcp_mjpeg *mjpeg;
        bool reconfigure_ok;          /* the caller handles ZCP_SOURCE_RECONFIGURE */
        bool renegotiate;             /* the next connection negotiates the format afresh */
        bool follow_source;           /* ... at the size the source now has (after a source change) */
        bool provisional;             /* the info was made without the camera (format auto, absent at open) */
        bool pending;                 /* RECONFIGURE returned; next_info waits for reconfigure() */
        struct zcp_source_info next_info;
        uint64_t pending_since_ns;

        /* The open node and its negotiated format (v4l2_fmt.c). */
        int fd;
        char node[PATH_MAX];
        bool card_logged;
        uint32_t buf_type;            /* V4L2_BUF_TYPE_VIDEO_CAPTURE, or _MPLANE on a multi-planar-only node */
        bool mplane;
        uint32_t bpl, sizeimage;
        size_t needed;                /* bytes of a complete uncompressed frame */
        enum io io;
        bool io_known;
        bool moved;                   /* set_format: the driver now sets another mode than the ring's */

        /* Driver buffers, held slots and lending on the current connection (v4l2_buf.c). */
        struct zcp_ring *ring;
        bool reqbufs, streaming;
        bool events;                  /* subscribed to V4L2_EVENT_SOURCE_CHANGE */
        struct vbuf bufs[MAX_BUFS];
        uint32_t nbufs, queued;
        bool lend;                    /* this connection lends its buffers to slots (path "registered") */
        bool lend_refused;            /* the allocator refused a driver buffer: said once */
        struct lend *lends;           /* ring->count entries */
        uint32_t nlent, nretired;     /* slots reading a buffer in place; of those, buffers of a closed fd */
        uint32_t *held;               /* slots held by the source (state SOURCE), reused when the driver needs buffers */
        uint32_t nheld;

        /* The reconnect state machine (v4l2_conn.c). */
        enum zcp_source_state state;
        bool ever_up;                 /* config errors are fatal only before the first success */
        bool good_since_up;           /* a good frame since the last (re)connect */
        bool quiet;                   /* repeated failures: log at debug */
        int last_fail;
        uint32_t failures;
        uint64_t retry_at_ns;

        /* The frame path (v4l2.c). */
        uint64_t idle_since_ns;       /* the last frame, or the moment the driver got buffers again */
        bool have_seq, starved;
        uint32_t last_seq;
        uint64_t seq;                 /* frame.seq: every frame the camera produced */
};

static inline const char *errname(int err)
{
        const char *n = strerrorname_np(err < 0 ? -err : err);

        return n ? n : "E?";
}

struct fourcc_text {
        char s[5];
};

static inline struct fourcc_text fourcc_text(uint32_t f)
{
        struct fourcc_text t;

        for (int i = 0; i < 4; i++) {
                char ch = (char)((f >> (8 * i)) & 0xff);

                t.s[i] = ch >= 0x20 && ch < 0x7f ? ch : '?';
        }
        t.s[4] = '\0';
        return t;
}

static inline int xioctl(int fd, unsigned long req, void *arg)
{
        int r;

        do
                r = v4l2_ioctl(fd, req, arg);
        while (r < 0 && errno == EINTR);
        return r < 0 ? -errno : r;
}

/* The state, and why it is not up (the last failed attempt's error) for /stats. */
static inline void set_state(struct zcp_source_ctx *c, enum zcp_source_state s)
{
        c->state = s;
        atomic_store(&c->stats->source_error, s == ZCP_SOURCE_UP ? 0 : c->last_fail);
        atomic_store(&c->stats->source_state, (uint32_t)s);
}

static inline enum zcp_log_level fail_level(const struct zcp_source_ctx *c)
{
        return c->quiet ? ZCP_LOG_DEBUG : ZCP_LOG_ERROR;
}
