/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The V4L2 source's private state, shared by its files (v4l2.c: the ops and
 * the frames; v4l2_fmt.c: opening and format negotiation; v4l2_buf.c:
 * buffers, slots and lending; v4l2_conn.c: the reconnect state machine).
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
        struct zcp_source_config cfg;
        char name[ZCP_NAME_MAX];
        struct zcp_stream_stats *stats;
        struct zcp_ring *ring;

        /*
         * What the ring is made for: fixed at open, changed only by
         * reconfigure() (a renegotiation may set them while RECONFIGURE is
         * pending: no frame is delivered then).
         */
        uint32_t fourcc, width, height;
        enum zcp_pixfmt cap_fmt;      /* as captured (MJPEG or the slot format) */
        enum io io;
        bool io_known;
        struct zcp_source_info info;
        struct zcp_mjpeg *mjpeg;

        /* Geometry changes (v4l2.c: "Geometry"). */
        bool reconfigure_ok;          /* the caller handles ZCP_SOURCE_RECONFIGURE */
        bool renegotiate;             /* the next connection negotiates the format afresh */
        bool follow_source;           /* ... at the size the source now has (after a source change) */
        bool moved;                   /* set_format: the driver now sets another mode than the ring's */
        bool provisional;             /* the info was made without the camera (format auto, absent at open) */
        bool pending;                 /* RECONFIGURE returned; next_info waits for reconfigure() */
        struct zcp_source_info next_info;
        uint64_t pending_since_ns;

        /* The current connection. */
        int fd;
        char node[PATH_MAX];
        uint32_t buf_type;            /* V4L2_BUF_TYPE_VIDEO_CAPTURE, or _MPLANE on a multi-planar-only node */
        bool mplane;
        bool events;                  /* subscribed to V4L2_EVENT_SOURCE_CHANGE */
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

static inline void set_state(struct zcp_source_ctx *c, enum zcp_source_state s)
{
        c->state = s;
        atomic_store(&c->stats->source_state, (uint32_t)s);
}

static inline enum zcp_log_level fail_level(const struct zcp_source_ctx *c)
{
        return c->quiet ? ZCP_LOG_DEBUG : ZCP_LOG_ERROR;
}

/* ---- v4l2_fmt.c: opening and negotiation ------------------------------- */
uint32_t zcp_v4l2_fourcc_of(enum zcp_pixfmt fmt);
enum zcp_pixfmt zcp_v4l2_pixfmt_of(uint32_t fourcc);
/* What a refusal means: a config the camera cannot do (before the first success), else a retryable error. */
int zcp_v4l2_refusal(const struct zcp_source_ctx *c, int err);
int zcp_v4l2_refused(struct zcp_source_ctx *c, const char *what, int err);
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

/* ---- v4l2.c ---------------------------------------------------------------- */
/*
 * After a renegotiation (c->fourcc, size, bpl, sizeimage set for the camera):
 * 0 when the ring still fits (same info), ZCP_SOURCE_RECONFIGURE when the
 * caller handles it (next_info set), else ZCP_ERR_CONFIG (logged).
 */
int zcp_v4l2_renegotiated(struct zcp_source_ctx *c, uint32_t fps_num, uint32_t fps_den);
/* RECONFIGURE is pending: gives lent buffers time to come back, then returns it. */
int zcp_v4l2_pending(struct zcp_source_ctx *c);

/* ---- v4l2_buf.c: buffers, slots and lending ----------------------------- */
size_t zcp_v4l2_page_round(size_t n);
void zcp_v4l2_hold(struct zcp_source_ctx *c, uint32_t idx);
/* Waits up to timeout_ns for a slot to come back and holds it: 0, -EAGAIN, -EPIPE or a QBUF error. */
int zcp_v4l2_collect(struct zcp_source_ctx *c, int64_t timeout_ns);
/* Collects every slot waiting in the free queue (never blocks): 0 or a QBUF error. */
int zcp_v4l2_reclaim(struct zcp_source_ctx *c);
/* A slot to fill, held ones first, never waiting: 0, -EAGAIN (none), or a QBUF error. */
int zcp_v4l2_take_slot(struct zcp_source_ctx *c, uint32_t *ret_idx);
/* Counts n frames dropped before they reached a slot (they were captured all the same). */
void zcp_v4l2_source_drop(struct zcp_source_ctx *c, enum zcp_drop_reason reason, uint32_t n);
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

/* ---- v4l2_conn.c: the reconnect state machine --------------------------- */
uint32_t zcp_v4l2_backoff_ms(const struct zcp_source_ctx *c);
void zcp_v4l2_schedule_retry(struct zcp_source_ctx *c);
void zcp_v4l2_log_streaming(const struct zcp_source_ctx *c);
/* A fault on a working connection: tear down, count, retry (at once if it had delivered). */
int zcp_v4l2_fault(struct zcp_source_ctx *c, int err, const char *what);
int zcp_v4l2_reconnect(struct zcp_source_ctx *c);

