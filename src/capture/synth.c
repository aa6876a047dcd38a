/* SPDX-License-Identifier: MIT */
/*
 * Synthetic source: draws the pattern of synth.h straight into NV12 slots.
 * In: nothing. Out: one frame per call, paced at cfg fps (pace realtime,
 * camera-like: live, so the ring drops the oldest when behind) or as fast as
 * the ring takes them (pace fast: back-pressure, nothing dropped). Ends after
 * `frames` frames when that is non-zero.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture/source.h"
#include "capture/synth.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/metrics.h"

struct zcp_source_ctx {
        const struct zcp_stream_config *cfg;
        struct zcp_stream_stats *stats;
        uint32_t width, height, box, speed;
        uint64_t frames, seq;
        uint64_t period_ns, next_ns;
        bool live;
};

static uint32_t bounce(uint64_t pos, uint32_t span)
{
        uint64_t period;

        if (span == 0)
                return 0;
        period = 2ull * span;
        pos %= period;
        return (uint32_t)(pos <= span ? pos : period - pos);
}

void zcp_synth_box_at(uint32_t width, uint32_t height, uint32_t box, uint32_t speed, uint64_t seq,
                      uint32_t *ret_x, uint32_t *ret_y)
{
        uint32_t bw = box < width ? box : width, bh = box < height ? box : height;

        *ret_x = bounce(seq * speed, width - bw);
        /* A different phase on y so the path is not a single diagonal. */
        *ret_y = bounce(seq * speed + (height - bh) / 3, height - bh);
}

static int synth_open(const struct zcp_stream_config *cfg, struct zcp_stream_stats *stats,
                      struct zcp_source_ctx **ret_ctx, struct zcp_source_info *ret_info)
{
        struct zcp_source_ctx *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        c->cfg = cfg;
        c->stats = stats;
        c->width = cfg->source.width ? cfg->source.width : 640;
        c->height = cfg->source.height ? cfg->source.height : 480;
        c->box = cfg->source.box_size;
        c->speed = cfg->source.speed;
        c->frames = cfg->source.frames;
        c->live = cfg->source.pace == ZCP_PACE_REALTIME;
        c->period_ns = ZCP_NSEC_PER_SEC / (cfg->source.fps ? cfg->source.fps : 30);

        *ret_info = (struct zcp_source_info){
                .width = c->width,
                .height = c->height,
                .fmt = ZCP_PIX_NV12,
                .stride = c->width,
                .frame_bytes = zcp_nv12_size(c->width, c->height),
                .fps_num = cfg->source.fps ? cfg->source.fps : 30,
                .fps_den = 1,
                .live = c->live,
                .path = ZCP_PATH_DIRECT,
        };
        *ret_ctx = c;
        return 0;
}

static int synth_start(struct zcp_source_ctx *c, struct zcp_ring *ring)
{
        c->next_ns = zcp_now_ns();
        atomic_store(&c->stats->source_state, ZCP_SOURCE_UP);
        return 0;
}

static void draw(struct zcp_source_ctx *c, uint8_t *p, uint64_t seq)
{
        size_t luma = (size_t)c->width * c->height;
        uint32_t x0, y0, bw = c->box < c->width ? c->box : c->width, bh = c->box < c->height ? c->box : c->height;

        memset(p, ZCP_SYNTH_BG_Y, luma);
        memset(p + luma, 128, luma / 2);
        zcp_synth_box_at(c->width, c->height, c->box, c->speed, seq, &x0, &y0);
        for (uint32_t y = y0; y < y0 + bh; y++)
                memset(p + (size_t)y * c->width + x0, ZCP_SYNTH_BOX_Y, bw);
}

static int synth_next(struct zcp_source_ctx *c, struct zcp_ring *ring)
{
        struct zcp_slot *s;
        uint32_t idx;
        int r;

        if (c->frames && c->seq >= c->frames)
                return ZCP_SOURCE_EOS;

        if (c->live) {
                /* Camera-like: wait for the frame time (in chunks of <= 100 ms). */
                uint64_t now = zcp_now_ns();

                if (now < c->next_ns) {
                        uint64_t until = c->next_ns - now > 100 * ZCP_NSEC_PER_MSEC ? now + 100 * ZCP_NSEC_PER_MSEC
                                                                                     : c->next_ns;
                        struct timespec ts = { .tv_sec = (time_t)(until / ZCP_NSEC_PER_SEC),
                                               .tv_nsec = (long)(until % ZCP_NSEC_PER_SEC) };
                        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
                        if (zcp_now_ns() < c->next_ns)
                                return ZCP_SOURCE_AGAIN;
                }
                c->next_ns += c->period_ns;
                r = zcp_ring_acquire(ring, 0, &idx);
                if (r == -EAGAIN) {
                        /* The frame happened and nobody could take it. */
                        c->seq++;
                        atomic_fetch_add(&c->stats->captured, 1);
                        zcp_stats_drop(c->stats, ZCP_DROP_RING_FULL);
                        return ZCP_SOURCE_AGAIN;
                }
        } else {
                r = zcp_ring_acquire(ring, 100 * (int64_t)ZCP_NSEC_PER_MSEC, &idx);
                if (r == -EAGAIN)
                        return ZCP_SOURCE_AGAIN;
        }
        if (r < 0)
                return r;

        s = zcp_ring_slot(ring, idx);
        draw(c, s->data, c->seq);
        s->frame.seq = c->seq;
        s->frame.width = c->width;
        s->frame.height = c->height;
        s->frame.fmt = ZCP_PIX_NV12;
        s->frame.stride = c->width;
        s->frame.bytes = zcp_nv12_size(c->width, c->height);
        s->frame.pts_ns = c->seq * c->period_ns;
        s->frame.t[ZCP_TS_CAPTURE] = zcp_now_ns();
        c->seq++;
        atomic_fetch_add(&c->stats->captured, 1);
        zcp_ring_submit(ring, idx);
        return ZCP_SOURCE_FRAME;
}

static void synth_stop(struct zcp_source_ctx *c, struct zcp_ring *ring)
{
        atomic_store(&c->stats->source_state, ZCP_SOURCE_ENDED);
}

static void synth_close(struct zcp_source_ctx *c)
{
        free(c);
}

const struct zcp_source_ops zcp_source_synthetic = {
        .name = "synthetic",
        .open = synth_open,
        .start = synth_start,
        .next = synth_next,
        .stop = synth_stop,
        .close = synth_close,
};
