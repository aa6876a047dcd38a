/* SPDX-License-Identifier: MIT */
/*
 * V4L2 source: the reconnect state machine. A fault tears the connection
 * down; reconnect() opens it again with capped exponential back-off, one log
 * line per state change (v4l2.c says what the source does as a whole). A
 * connection that renegotiates (v4l2.c, "Geometry") and finds that the ring
 * no longer fits closes the device and leaves RECONFIGURE pending.
 * Source thread, and the main thread at start.
 */
#include <time.h>

#include "capture/v4l2_conn.h"
#include "capture/v4l2_buf.h"
#include "capture/v4l2_fmt.h"
#include "capture/v4l2_geom.h"
#include "core/clock.h"
#include "core/err.h"

/*
 * Reopens the node for the geometry the ring is made for; or, when the
 * format is to be negotiated afresh (format auto and the camera absent at
 * open, a source change), negotiates it and says whether the ring still
 * fits: ZCP_SOURCE_RECONFIGURE when it does not (nothing allocated on the fd).
 */
static int dev_connect(struct zcp_source_ctx *c)
{
        uint32_t num, den;
        int r;

        r = zcp_v4l2_dev_open(c);
        if (r < 0)
                return r;
        if (!c->renegotiate) {
                r = zcp_v4l2_set_format(c, false);
                if (r == 0) {
                        zcp_v4l2_set_rate(c, &num, &den);
                        if (!c->io_known) {
                                r = zcp_v4l2_decide_io(c);
                                if (r < 0)
                                        return r;
                        }
                        return zcp_v4l2_stream_on(c);
                }
                /*
                 * A camera that streamed before now has another mode (a source
                 * change its driver did not report): follow it where the caller
                 * can re-make the ring. Before the first success it is the
                 * config's mistake (ZCP_ERR_CONFIG).
                 */
                if (!(c->moved && c->ever_up && c->reconfigure_ok))
                        return r;
                zcp_info("%s: %s: the camera's mode changed while it was away: renegotiating", c->name, c->node);
                c->renegotiate = true;
                c->follow_source = true;
        }
        if (c->follow_source) {
                uint32_t w, h;

                r = zcp_v4l2_source_size(c, &w, &h);
                if (r < 0)
                        return r;
                if (w != c->width || h != c->height)
                        zcp_info("%s: %s: the source is now %ux%u (was %ux%u)", c->name, c->node, w, h, c->width,
                                 c->height);
                c->width = w;
                c->height = h;
        }
        r = zcp_v4l2_choose_format(c);
        if (r < 0)
                return r;
        c->cap_fmt = zcp_v4l2_pixfmt_of(c->fourcc);
        r = zcp_v4l2_set_format(c, true);
        if (r < 0)
                return r;
        zcp_v4l2_set_rate(c, &num, &den);
        if (!c->io_known || c->provisional) {
                r = zcp_v4l2_decide_io(c);
                if (r < 0)
                        return r;
        }
        r = zcp_v4l2_renegotiated(c, num, den);
        if (r != 0)
                return r;
        return zcp_v4l2_stream_on(c);
}

uint32_t zcp_v4l2_backoff_ms(const struct zcp_source_ctx *c)
{
        uint64_t ms;

        if (c->failures == 0)
                return 0;
        ms = (uint64_t)BACKOFF_FIRST_MS << (c->failures - 1 < 20 ? c->failures - 1 : 20);
        return ms < c->cfg.backoff_max_ms ? (uint32_t)ms : c->cfg.backoff_max_ms;
}

void zcp_v4l2_schedule_retry(struct zcp_source_ctx *c)
{
        c->retry_at_ns = zcp_now_ns() + (uint64_t)zcp_v4l2_backoff_ms(c) * ZCP_NSEC_PER_MSEC;
        set_state(c, ZCP_SOURCE_BACKOFF);
}

void zcp_v4l2_log_streaming(const struct zcp_source_ctx *c)
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
int zcp_v4l2_fault(struct zcp_source_ctx *c, int err, const char *what)
{
        zcp_warn("%s: %s: %s: %s (%s); closing the device and opening it again", c->name, c->node, what,
                 errname(err), zcp_strerror(err));
        zcp_v4l2_dev_close(c);
        atomic_fetch_add_explicit(&c->stats->reconnects, 1, memory_order_relaxed);
        c->failures = c->good_since_up ? 0 : c->failures + 1;
        c->quiet = false;
        c->last_fail = err;
        zcp_v4l2_schedule_retry(c);
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
                int r = zcp_v4l2_collect(c, (int64_t)(until - now));

                if (r != -EPIPE)
                        return;
        }
        ts.tv_sec = (time_t)(until / ZCP_NSEC_PER_SEC);
        ts.tv_nsec = (long)(until % ZCP_NSEC_PER_SEC);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

int zcp_v4l2_reconnect(struct zcp_source_ctx *c)
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
                zcp_v4l2_log_streaming(c);
                c->ever_up = true;
                c->good_since_up = false;
                c->quiet = false;
                set_state(c, ZCP_SOURCE_UP);
                return ZCP_SOURCE_AGAIN;
        }
        zcp_v4l2_dev_close(c);
        if (r == ZCP_SOURCE_RECONFIGURE) {
                /* The ring is re-made for the camera's geometry: reconfigure(), then start() with the new ring. */
                c->pending = true;
                c->pending_since_ns = zcp_now_ns();
                c->failures = 0;
                return zcp_v4l2_pending(c);
        }
        if (r == ZCP_ERR_CONFIG) {
                set_state(c, ZCP_SOURCE_DOWN);
                return r;
        }
        c->failures++;
        if (!c->quiet || r != c->last_fail)
                zcp_warn("%s: %s: cannot open: %s (%s); retrying in %u ms, then at most every %u ms", c->name,
                         c->cfg.device, errname(r), zcp_strerror(r), zcp_v4l2_backoff_ms(c), c->cfg.backoff_max_ms);
        else
                zcp_debug("%s: %s: still cannot open: %s; retrying in %u ms", c->name, c->cfg.device, errname(r),
                          zcp_v4l2_backoff_ms(c));
        c->last_fail = r;
        c->quiet = true;
        zcp_v4l2_schedule_retry(c);
        return ZCP_SOURCE_AGAIN;
}
