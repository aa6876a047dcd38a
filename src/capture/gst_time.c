/* SPDX-License-Identifier: MIT */
/*
 * The GStreamer sources' timestamps (gst_time.h): the timeline of a file
 * (PTS repeats, the frame duration measured from the steps, passes of a
 * loop), what one pass through a file delivered against what the container
 * holds, a file that ends without saying so, and a network frame's arrival
 * and sender times. Source thread.
 */
#include <string.h>

#include "capture/gst_time.h"
#include "core/log.h"

#define STALL_NS             (5 * ZCP_NSEC_PER_SEC)   /* file: no frame, no progress, no EOS = the end */
#define NTP_UNIX_OFFSET_S    2208988800ull            /* 1900-01-01 to 1970-01-01 */

static uint64_t median(uint64_t *v, uint32_t n)
{
        for (uint32_t i = 1; i < n; i++)
                for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
                        uint64_t t = v[j];
                        v[j] = v[j - 1];
                        v[j - 1] = t;
                }
        return v[n / 2];
}

/* Once the timestamps gave a rate: said when the caps carry none, or one 2 % away from it (a default 25/1). */
static void say_rate(struct zcp_source_ctx *ctx)
{
        double measured = 1e9 / (double)ctx->frame_ns;
        double caps = ctx->info.fps_num ? (double)ctx->info.fps_num / ctx->info.fps_den : 0.0;

        ctx->rate_said = true;
        if (caps > 0.0 && measured > caps * 0.98 && measured < caps * 1.02)
                return;
        zcp_info("%s %s: %.3f fps from the timestamps, the caps say %u/%u: the timestamps' rate is the stream's",
                 ctx->kind, ctx->path, measured, ctx->info.fps_num, ctx->info.fps_den);
}

/*
 * Timeline bookkeeping for one sample: returns pts_ns; counts PTS that do
 * not advance (*ret_repeat) and measures the frame duration from the steps.
 */
uint64_t zcp_gst_track_pts(struct zcp_source_ctx *ctx, GstBuffer *buf, bool *ret_repeat)
{
        GstClockTime pts = GST_BUFFER_PTS(buf);

        *ret_repeat = false;
        if (!GST_CLOCK_TIME_IS_VALID(pts)) {
                /* no timestamp (an elementary stream): the next frame in line, at the caps' rate or 25 fps */
                uint64_t step = ctx->frame_ns ? ctx->frame_ns
                                : ctx->info.fps_num ? gst_util_uint64_scale(ZCP_NSEC_PER_SEC, ctx->info.fps_den, ctx->info.fps_num)
                                                    : 40 * ZCP_NSEC_PER_MSEC;

                pts = ctx->have_last ? ctx->last_raw_pts + step : (ctx->have_first ? ctx->first_raw_pts : 0);
        }
        ctx->last_duration = GST_CLOCK_TIME_IS_VALID(GST_BUFFER_DURATION(buf)) ? GST_BUFFER_DURATION(buf) : 0;
        if (!ctx->have_first) {
                ctx->first_raw_pts = pts;
                ctx->have_first = true;
        }
        if (ctx->have_last && pts <= ctx->last_raw_pts) {
                *ret_repeat = true;
                ctx->pass_repeats++;
                atomic_fetch_add_explicit(&ctx->stats->pts_repeats, 1, memory_order_relaxed);
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_INTERVAL_NS,
                                    "%s %s: frame %llu: pts %.3f s does not advance past %.3f s (flagged pts_repeat)",
                                    ctx->kind, ctx->path, (unsigned long long)ctx->seq, (double)pts / 1e9,
                                    (double)ctx->last_raw_pts / 1e9);
                return ctx->loop_base_ns + pts;   /* last_raw_pts stays the highest seen */
        }
        if (ctx->have_last && ctx->n_deltas < RATE_SAMPLES) {
                ctx->deltas[ctx->n_deltas++] = pts - ctx->last_raw_pts;
                if (ctx->n_deltas == RATE_SAMPLES || !ctx->frame_ns) {
                        uint64_t tmp[RATE_SAMPLES];

                        memcpy(tmp, ctx->deltas, ctx->n_deltas * sizeof(tmp[0]));
                        ctx->frame_ns = median(tmp, ctx->n_deltas);
                }
                if (ctx->n_deltas == RATE_SAMPLES && !ctx->rate_said)
                        say_rate(ctx);
        }
        if (!ctx->frame_ns && ctx->last_duration)
                ctx->frame_ns = ctx->last_duration;
        ctx->last_raw_pts = pts;
        ctx->have_last = true;
        return ctx->loop_base_ns + pts;
}

/*
 * End of one pass through a file: what the container holds against what
 * reached the ring. Expected = the compressed frames the decoder was given
 * (frames it could not decode, e.g. before the first keyframe, included)
 * plus the frames the container's duration still covers after the last
 * one (a recording cut short), at the measured frame duration.
 */
void zcp_gst_account_pass(struct zcp_source_ctx *ctx)
{
        uint64_t given, expected, tail = 0, missing, end_ns;
        gint64 dur = -1;
        double fps = ctx->frame_ns ? 1e9 / (double)ctx->frame_ns : 0.0;
        const char *from;

        if (atomic_load(&ctx->have_demuxer)) {
                given = atomic_load(&ctx->demuxed);
                from = "the demuxer gave";
        } else if (atomic_load(&ctx->have_decoder)) {
                given = atomic_load(&ctx->decoded_in);
                from = "the decoder got";
        } else {
                given = ctx->pass_delivered;   /* raw video, no demuxer: every frame read is delivered */
                from = "read";
        }
        expected = given;
        if (ctx->have_last && ctx->frame_ns && gst_element_query_duration(ctx->pipeline, GST_FORMAT_TIME, &dur) &&
            dur > 0) {
                end_ns = ctx->last_raw_pts + (ctx->last_duration ? ctx->last_duration : ctx->frame_ns);
                /* more than half a frame of the container's timeline has no frame: those are missing */
                if ((uint64_t)dur > end_ns + ctx->frame_ns / 2)
                        tail = ((uint64_t)dur - end_ns + ctx->frame_ns / 2) / ctx->frame_ns;
                /* a frame that repeated a pts still stands for a place on the timeline */
                tail = tail > ctx->pass_repeats ? tail - ctx->pass_repeats : 0;
        }
        expected += tail;
        if (expected < ctx->pass_delivered)
                expected = ctx->pass_delivered;   /* a decoder that makes more frames than it was given (fields) */
        missing = expected - ctx->pass_delivered;
        atomic_fetch_add_explicit(&ctx->stats->decode_gaps, missing, memory_order_relaxed);
        atomic_fetch_add_explicit(&ctx->stats->file_frames_expected, expected, memory_order_relaxed);
        atomic_fetch_add_explicit(&ctx->stats->file_frames_delivered, ctx->pass_delivered, memory_order_relaxed);
        zcp_log(missing ? ZCP_LOG_WARN : ZCP_LOG_INFO,
                "file %s: end of file (pass %llu): %llu frames expected, %llu delivered, %llu missing (%s %llu, the container's duration covers %llu more); %llu corrupt, %llu pts repeats; %.3f fps from the timestamps (caps %u/%u); decoders: %llu dropped, %llu warnings",
                ctx->path, (unsigned long long)ctx->passes + 1, (unsigned long long)expected,
                (unsigned long long)ctx->pass_delivered, (unsigned long long)missing, from, (unsigned long long)given,
                (unsigned long long)tail, (unsigned long long)ctx->corrupt_frames,
                (unsigned long long)ctx->pass_repeats, fps, ctx->info.fps_num, ctx->info.fps_den,
                (unsigned long long)ctx->decoder_drops, (unsigned long long)ctx->decoder_warnings);
        atomic_store(&ctx->demuxed, 0);
        atomic_store(&ctx->decoded_in, 0);
        ctx->pass_delivered = 0;
        ctx->pass_repeats = 0;
}

/* The file plays again from its start: pts_ns continues after the last frame. */
void zcp_gst_new_pass(struct zcp_source_ctx *ctx)
{
        if (ctx->have_last)
                ctx->loop_base_ns += ctx->last_raw_pts + (ctx->frame_ns ? ctx->frame_ns : 1) - ctx->first_raw_pts;
        ctx->have_last = false;
        ctx->passes++;
}

/*
 * A file that gives neither frames nor EOS while its position stands still
 * for STALL_NS has ended without saying so (gst-libav's GIF demuxer spins at
 * the end of the file forever): its end, with a warning. A realtime pause
 * in the file moves the position, a slow frame gives a frame: neither is it.
 */
bool zcp_gst_stalled(struct zcp_source_ctx *ctx)
{
        uint64_t now = zcp_now_ns();
        gint64 pos = -1;

        if (ctx->fifo_fd >= 0)
                return false;   /* a writer may pause as long as it likes */
        gst_element_query_position(ctx->pipeline, GST_FORMAT_TIME, &pos);
        if (!ctx->progress_ns || pos != ctx->progress_pos) {
                ctx->progress_ns = now;
                ctx->progress_pos = pos;
                return false;
        }
        if (now - ctx->progress_ns < STALL_NS)
                return false;
        zcp_warn("file %s: no frame, no progress and no end of stream from GStreamer for %llu s: taking it as the end of the file",
                 ctx->path, (unsigned long long)(STALL_NS / ZCP_NSEC_PER_SEC));
        ctx->progress_ns = 0;
        return true;
}

/* Network: when the frame's packets arrived (monotonic ns), else now. */
uint64_t zcp_gst_arrival_ns(struct zcp_source_ctx *ctx, GstSample *sample, uint64_t now)
{
        GstBuffer *buf = gst_sample_get_buffer(sample);
        const GstSegment *seg = gst_sample_get_segment(sample);
        GstClockTime base = gst_element_get_base_time(ctx->pipeline), rt;

        if (!buf || !seg || seg->format != GST_FORMAT_TIME || !GST_BUFFER_PTS_IS_VALID(buf) ||
            !GST_CLOCK_TIME_IS_VALID(base))
                return now;
        rt = gst_segment_to_running_time(seg, GST_FORMAT_TIME, GST_BUFFER_PTS(buf));
        if (!GST_CLOCK_TIME_IS_VALID(rt) || base + rt > now || now - (base + rt) > 10 * ZCP_NSEC_PER_SEC)
                return now;
        return base + rt;
}

/* Network: the sender's clock (NTP from RTCP sender reports) as Unix-epoch ns; 0 when not synchronised. */
uint64_t zcp_gst_sender_ns(GstBuffer *buf)
{
        static GstCaps *ntp;
        GstReferenceTimestampMeta *m;

        if (g_once_init_enter(&ntp))
                g_once_init_leave(&ntp, gst_caps_new_empty_simple("timestamp/x-ntp"));
        m = gst_buffer_get_reference_timestamp_meta(buf, ntp);
        if (!m || !GST_CLOCK_TIME_IS_VALID(m->timestamp) || m->timestamp < NTP_UNIX_OFFSET_S * ZCP_NSEC_PER_SEC)
                return 0;
        return m->timestamp - NTP_UNIX_OFFSET_S * ZCP_NSEC_PER_SEC;
}
