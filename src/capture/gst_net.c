/* SPDX-License-Identifier: MIT */
/*
 * The `network` source (gst.c says what it does, "Network"): the file
 * source's pipeline on a live URL, with a lost connection torn down and made
 * again after a capped exponential back-off, and the outage counted when
 * frames flow again. Main thread at open and start, the source thread after.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include <gst/app/gstappsink.h>

#include "capture/gst_source.h"
#include "capture/gst_pipe.h"
#include "core/log.h"

#define BACKOFF_FIRST_MS     50

static int network_open(const struct zcp_stream_config *cfg, struct zcp_stream_stats *stats,
                        struct zcp_source_ctx **ret_ctx, struct zcp_source_info *ret_info)
{
        return zcp_gst_open(cfg, stats, true, ret_ctx, ret_info);
}

static int network_start(struct zcp_source_ctx *ctx, struct zcp_ring *ring)
{
        int r;

        (void)ring;
        if (!ctx->pipeline) {
                /* stopped before: connect again, through next() */
                ctx->retry_at_ns = 0;
                zcp_gst_set_state(ctx, ZCP_SOURCE_BACKOFF);
                return 0;
        }
        r = zcp_gst_play(ctx);
        if (r < 0)
                return r;
        ctx->last_frame_ns = zcp_now_ns();
        ctx->delivered_since_up = false;
        zcp_gst_set_state(ctx, ZCP_SOURCE_UP);
        return 0;
}

static uint32_t backoff_ms(const struct zcp_source_ctx *ctx)
{
        uint64_t ms;

        if (ctx->failures == 0)
                return 0;
        ms = (uint64_t)BACKOFF_FIRST_MS << (ctx->failures - 1 < 20 ? ctx->failures - 1 : 20);
        return ms < ctx->cfg.backoff_max_ms ? (uint32_t)ms : ctx->cfg.backoff_max_ms;
}

/* The connection is gone (or never came): tear down, count, retry after the back-off. */
static int fault(struct zcp_source_ctx *ctx, int err, const char *what)
{
        bool was_up = ctx->state == ZCP_SOURCE_UP;

        zcp_gst_pipeline_free(ctx);
        if (was_up) {
                atomic_fetch_add_explicit(&ctx->stats->reconnects, 1, memory_order_relaxed);
                ctx->down_since_ns = ctx->last_frame_ns;
        }
        ctx->failures = was_up && ctx->delivered_since_up ? 0 : ctx->failures + 1;
        ctx->retry_at_ns = zcp_now_ns() + (uint64_t)backoff_ms(ctx) * ZCP_NSEC_PER_MSEC;
        if (was_up || err != ctx->last_fail)
                zcp_warn("network %s: %s (%s); connecting again in %u ms, then at most every %u ms", ctx->path, what,
                         strerror(-err), backoff_ms(ctx), ctx->cfg.backoff_max_ms);
        else
                zcp_debug("network %s: %s (%s); retrying in %u ms", ctx->path, what, strerror(-err), backoff_ms(ctx));
        ctx->last_fail = err;
        zcp_gst_set_state(ctx, ZCP_SOURCE_BACKOFF);
        return ZCP_SOURCE_AGAIN;
}

/* Back-off over: a new pipeline, PLAYING; frames show whether it connected. */
static int reconnect(struct zcp_source_ctx *ctx)
{
        uint64_t now = zcp_now_ns();
        int r;

        if (now < ctx->retry_at_ns) {
                uint64_t until = MIN(ctx->retry_at_ns, now + NEXT_TIMEOUT_NS);
                struct timespec ts = { .tv_sec = (time_t)(until / ZCP_NSEC_PER_SEC),
                                       .tv_nsec = (long)(until % ZCP_NSEC_PER_SEC) };

                while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                        ;
                return ZCP_SOURCE_AGAIN;
        }
        if (zcp_source_cancelled())
                return ZCP_SOURCE_AGAIN;
        zcp_gst_set_state(ctx, ZCP_SOURCE_OPENING);
        ctx->opening_since_ns = now;
        r = zcp_gst_pipeline_build(ctx);
        if (r == 0)
                r = zcp_gst_play(ctx);
        if (r < 0)
                return fault(ctx, r, "cannot build the pipeline");
        return ZCP_SOURCE_AGAIN;
}

/* The first frame of a new connection: the outage is over. */
static void connected(struct zcp_source_ctx *ctx, uint64_t now)
{
        if (ctx->down_since_ns) {
                uint64_t gap = now - ctx->down_since_ns;
                uint64_t lost = ctx->frame_ns ? gap / ctx->frame_ns : 0;

                atomic_fetch_add_explicit(&ctx->stats->outage_ns, gap, memory_order_relaxed);
                atomic_fetch_add_explicit(&ctx->stats->outage_frames, lost, memory_order_relaxed);
                zcp_info("network %s: connected again after %.3f s without frames (about %llu frames at %.2f fps)",
                         ctx->path, (double)gap / 1e9, (unsigned long long)lost,
                         ctx->frame_ns ? 1e9 / (double)ctx->frame_ns : 0.0);
        }
        ctx->down_since_ns = 0;
        ctx->failures = 0;
        ctx->last_fail = 0;
        /* a new connection starts a new timeline: its PTS restart */
        ctx->have_last = false;
        ctx->geometry_warned = false;
        zcp_gst_set_state(ctx, ZCP_SOURCE_UP);
}

static int network_next(struct zcp_source_ctx *ctx, struct zcp_ring *ring)
{
        GstSample *sample;
        uint64_t now;
        uint32_t idx;
        int r;

        if (ctx->state == ZCP_SOURCE_BACKOFF || !ctx->pipeline)
                return reconnect(ctx);
        if (ctx->pending)
                goto place;   /* kept across a RECONFIGURE */
        r = zcp_gst_check_bus(ctx, true);
        if (r < 0)
                return fault(ctx, r, ctx->state == ZCP_SOURCE_UP ? "the stream failed" : "cannot connect");
        sample = gst_app_sink_try_pull_sample(GST_APP_SINK(ctx->appsink), NEXT_TIMEOUT_NS);
        now = zcp_now_ns();
        if (!sample) {
                r = zcp_gst_check_bus(ctx, true);
                if (r < 0)
                        return fault(ctx, r, ctx->state == ZCP_SOURCE_UP ? "the stream failed" : "cannot connect");
                if (gst_app_sink_is_eos(GST_APP_SINK(ctx->appsink)))
                        return fault(ctx, -EPIPE, "the stream ended");
                if (ctx->state == ZCP_SOURCE_OPENING &&
                    now - ctx->opening_since_ns > (uint64_t)ctx->cfg.connect_timeout_ms * ZCP_NSEC_PER_MSEC)
                        return fault(ctx, -ETIMEDOUT, "no frame since connecting");
                if (ctx->state == ZCP_SOURCE_UP &&
                    now - ctx->last_frame_ns > (uint64_t)ctx->cfg.timeout_ms * ZCP_NSEC_PER_MSEC)
                        return fault(ctx, -ETIMEDOUT, "no frame within timeout_ms");
                return ZCP_SOURCE_AGAIN;
        }
        if (ctx->state != ZCP_SOURCE_UP)
                connected(ctx, now);
        ctx->last_frame_ns = now;
        ctx->delivered_since_up = true;
        ctx->pending = sample;
        if (zcp_gst_wants_reconfigure(ctx))
                return ZCP_SOURCE_RECONFIGURE;
place:
        /* live: the newest frame matters; no free slot = this one is dropped (ring_full) */
        r = zcp_ring_acquire(ring, 0, &idx);
        if (r == -EAGAIN) {
                ctx->seq++;
                ctx->pass_delivered++;
                atomic_fetch_add_explicit(&ctx->stats->captured, 1, memory_order_relaxed);
                zcp_stats_drop(ctx->stats, ZCP_DROP_RING_FULL);
                gst_sample_unref(ctx->pending);
                ctx->pending = NULL;
                return ZCP_SOURCE_AGAIN;
        }
        if (r < 0) {
                gst_sample_unref(ctx->pending);
                ctx->pending = NULL;
                return r;
        }
        zcp_gst_deliver(ctx, ring, idx, false);
        gst_sample_unref(ctx->pending);
        ctx->pending = NULL;
        return ZCP_SOURCE_FRAME;
}

static void network_stop(struct zcp_source_ctx *ctx, struct zcp_ring *ring)
{
        (void)ring;
        if (!ctx)
                return;
        zcp_gst_pipeline_free(ctx);
        zcp_gst_set_state(ctx, ZCP_SOURCE_DOWN);
}

const struct zcp_source_ops zcp_source_network = {
        .name = "network",
        .open = network_open,
        .start = network_start,
        .next = network_next,
        .stop = network_stop,
        .close = zcp_gst_close,
        .reconfigure = zcp_gst_reconfigure,
};
