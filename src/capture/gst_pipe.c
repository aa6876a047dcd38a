/* SPDX-License-Identifier: MIT */
/*
 * The GStreamer sources' pipeline (gst_pipe.h; gst.c draws it and says what
 * the sources do): building it and setting up what uridecodebin creates
 * (decoder threads and error tolerance, frame counting probes, the caps
 * probe that picks a conversion, the network settings of the source
 * element, linking the decoded video), prerolling it, playing it, reading
 * its bus, and tearing it down (for a network source within a bound, on a
 * thread of its own). Main thread at open, the source thread after.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gst/app/gstappsink.h>
#include <gst/base/gstbasetransform.h>

#include "capture/gst_pipe.h"
#include "capture/gst_layout.h"
#include "capture/gst_pool.h"
#include "core/log.h"

#define IDLE_GIVE_UP_NS      (1 * ZCP_NSEC_PER_SEC)
#define APPSINK_MAX_BUFFERS  2
#define TEARDOWN_NS          (2 * ZCP_NSEC_PER_SEC)   /* network: stopping an old connection */

/* -errno for a GStreamer error while opening: a missing resource, else content. */
static int errno_from_gerror(const GError *err)
{
        if (err && err->domain == GST_RESOURCE_ERROR) {
                if (err->code == GST_RESOURCE_ERROR_NOT_FOUND)
                        return -ENOENT;
                if (err->code == GST_RESOURCE_ERROR_NOT_AUTHORIZED)
                        return -EACCES;
                return -EIO;
        }
        return -EINVAL;
}

/* Logs an ERROR/WARNING message with the path; returns the GError's -errno. */
static int log_gst_message(struct zcp_source_ctx *ctx, GstMessage *msg, const char *what)
{
        GError *err = NULL;
        gchar *dbg = NULL;
        int r;

        if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR)
                gst_message_parse_error(msg, &err, &dbg);
        else
                gst_message_parse_warning(msg, &err, &dbg);
        /* a network source retrying a server that is down: the back-off line says it once */
        zcp_log(ctx->network && ctx->state == ZCP_SOURCE_OPENING && ctx->last_fail ? ZCP_LOG_DEBUG : ZCP_LOG_ERROR,
                "%s %s: %s: %s (%s: %s)", ctx->kind, ctx->path, what, err ? err->message : "unknown error",
                GST_OBJECT_NAME(GST_MESSAGE_SRC(msg)), dbg ? dbg : "no details");
        r = errno_from_gerror(err);
        g_clear_error(&err);
        g_free(dbg);
        return r;
}

static bool from_video_decoder(GstMessage *msg)
{
        return GST_MESSAGE_SRC(msg) && GST_IS_VIDEO_DECODER(GST_MESSAGE_SRC(msg));
}

/*
 * A frame the container presents: one whose time lies in the pad's segment.
 * An edit list that starts a track later (an MP4 cut without re-encoding)
 * still hands out the frames before it, for the decoder to reference; the
 * decoder decodes them and drops them as outside the segment: not frames
 * of the video, not missing either.
 */
static bool presented(GstPad *pad, GstBuffer *buf)
{
        GstEvent *ev;
        const GstSegment *seg = NULL;
        GstClockTime pts = GST_BUFFER_PTS(buf), dur = GST_BUFFER_DURATION(buf);
        bool in = true;

        if (!GST_CLOCK_TIME_IS_VALID(pts))
                return true;
        ev = gst_pad_get_sticky_event(pad, GST_EVENT_SEGMENT, 0);
        if (!ev)
                return true;
        gst_event_parse_segment(ev, &seg);
        if (seg && seg->format == GST_FORMAT_TIME)
                in = gst_segment_clip(seg, GST_FORMAT_TIME, pts, GST_CLOCK_TIME_IS_VALID(dur) ? pts + dur : pts, NULL,
                                      NULL);
        gst_event_unref(ev);
        return in;
}

/* Counts compressed frames: out of the demuxer (when there is one), into the video decoder. */
static GstPadProbeReturn on_compressed(GstPad *pad, GstPadProbeInfo *info, gpointer user)
{
        atomic_uint_fast64_t *count = user;
        GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER(info);

        /* codec headers travel as buffers of their own in some containers: not frames */
        if (buf && gst_buffer_get_size(buf) > 0 && !GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_HEADER) &&
            presented(pad, buf))
                atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
        return GST_PAD_PROBE_OK;
}

static void count_on(GstPad *pad, atomic_uint_fast64_t *count)
{
        /* an element kept across a restart keeps its probe: one per pad */
        if (g_object_get_data(G_OBJECT(pad), "zcp-counted"))
                return;
        gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, on_compressed, count, NULL);
        g_object_set_data(G_OBJECT(pad), "zcp-counted", count);
}

/*
 * A demuxer's new pad: a video one is counted (what the container holds,
 * parser losses included), unless the demuxer says it hands out a byte
 * stream rather than frames (parsed=false: an MPEG program stream's packets
 * each carry a part of a frame); the frames are then counted into the
 * decoder, after the parser. Other streams (audio) are only noted.
 */
static void on_demux_pad(GstElement *demux, GstPad *pad, gpointer user)
{
        struct zcp_source_ctx *ctx = user;
        GstCaps *caps = gst_pad_get_current_caps(pad);
        const GstStructure *st = NULL;
        gboolean parsed = TRUE;
        const gchar *name;

        (void)demux;
        if (!caps)
                caps = gst_pad_query_caps(pad, NULL);
        if (caps && gst_caps_get_size(caps) > 0)
                st = gst_caps_get_structure(caps, 0);
        name = st ? gst_structure_get_name(st) : "";
        if (g_str_has_prefix(name, "video/") || g_str_has_prefix(name, "image/")) {
                atomic_store(&ctx->video_pad, true);
                if (!gst_structure_get_boolean(st, "parsed", &parsed) || parsed) {
                        count_on(pad, &ctx->demuxed);
                        atomic_store(&ctx->have_demuxer, true);
                }
        } else if (st) {
                atomic_fetch_add(&ctx->other_pads, 1);
        }
        if (caps)
                gst_caps_unref(caps);
}

/*
 * Opening found no video: a file that holds other streams only (an audio
 * file) says so in one line, rather than what GStreamer says about the
 * decoder of its audio. -EINVAL when it did, 0 otherwise.
 */
static int no_video(struct zcp_source_ctx *ctx)
{
        unsigned others = atomic_load(&ctx->other_pads);

        if (atomic_load(&ctx->linked) || atomic_load(&ctx->video_pad) || !others)
                return 0;
        zcp_err("%s %s: no video in it: it holds %u stream%s of other kinds (audio, subtitles) and no video stream",
                ctx->kind, ctx->path, others, others == 1 ? "" : "s");
        return -EINVAL;
}

/*
 * decoder_threads: a decoder's own worker threads, bounded. avdec_* (libav)
 * starts max-threads = 0 = one per CPU, per stream: 16 streams of 1080p on
 * 16 CPUs then run 16 x 16 decoding threads beside GStreamer's streaming
 * threads and the stages. The first of max-threads (avdec_*),
 * threads (libvpx, x264-like) and n-threads (dav1d) that the element has is
 * set; a decoder with none (openh264dec: one thread) runs on its streaming
 * thread anyway. Said once per stream at info, later elements at debug.
 */
static void bound_threads(struct zcp_source_ctx *ctx, GstElement *e)
{
        static const char *const names[] = { "max-threads", "threads", "n-threads" };
        GstElementFactory *fac = gst_element_get_factory(e);
        const char *set = NULL;
        int64_t value = ctx->dec_threads;

        for (size_t i = 0; i < G_N_ELEMENTS(names) && !set; i++) {
                GParamSpec *ps = g_object_class_find_property(G_OBJECT_GET_CLASS(e), names[i]);

                if (!ps || !(ps->flags & G_PARAM_WRITABLE))
                        continue;
                if (ps->value_type == G_TYPE_INT) {
                        value = MIN(value, G_PARAM_SPEC_INT(ps)->maximum);
                        g_object_set(e, names[i], (gint)value, NULL);
                } else if (ps->value_type == G_TYPE_UINT) {
                        value = MIN(value, (int64_t)G_PARAM_SPEC_UINT(ps)->maximum);
                        g_object_set(e, names[i], (guint)value, NULL);
                } else {
                        continue;
                }
                set = names[i];
        }
        if (set)
                zcp_log(atomic_exchange(&ctx->threads_said, true) ? ZCP_LOG_DEBUG : ZCP_LOG_INFO,
                        "%s %s: decoder %s: %s %lld (decoder_threads %u%s)", ctx->kind, ctx->path,
                        fac ? GST_OBJECT_NAME(fac) : GST_OBJECT_NAME(e), set, (long long)value, ctx->dec_threads,
                        ctx->cfg.decoder_threads ? "" : ", auto");
        else
                zcp_log(atomic_exchange(&ctx->threads_said, true) ? ZCP_LOG_DEBUG : ZCP_LOG_INFO,
                        "%s %s: decoder %s: no thread setting, it decodes on its streaming thread (decoder_threads %u%s)",
                        ctx->kind, ctx->path, fac ? GST_OBJECT_NAME(fac) : GST_OBJECT_NAME(e), ctx->dec_threads,
                        ctx->cfg.decoder_threads ? "" : ", auto");
}

/* Decoders keep going on corrupt input instead of failing the stream; compressed frames are counted. */
static void on_deep_element_added(GstBin *bin, GstBin *sub_bin, GstElement *element, gpointer user)
{
        struct zcp_source_ctx *ctx = user;
        GstElementFactory *fac = gst_element_get_factory(element);
        const gchar *klass = fac ? gst_element_factory_get_metadata(fac, GST_ELEMENT_METADATA_KLASS) : NULL;
        GParamSpec *ps;
        GstPad *pad;

        (void)bin;
        (void)sub_bin;
        if (klass && strstr(klass, "Demux") && !g_object_get_data(G_OBJECT(element), "zcp-demux")) {
                /* multipartdemux (HTTP MJPEG) says "no more pads" only when told it has one
                 * stream: without it decodebin may hold the first frames back for seconds */
                if (g_object_class_find_property(G_OBJECT_GET_CLASS(element), "single-stream"))
                        g_object_set(element, "single-stream", TRUE, NULL);
                g_signal_connect(element, "pad-added", G_CALLBACK(on_demux_pad), ctx);
                g_object_set_data(G_OBJECT(element), "zcp-demux", ctx);
                return;
        }
        if (!GST_IS_VIDEO_DECODER(element))
                return;
        pad = gst_element_get_static_pad(element, "sink");
        if (pad) {
                count_on(pad, &ctx->decoded_in);
                gst_object_unref(pad);
        }
        atomic_store(&ctx->have_decoder, true);
        bound_threads(ctx, element);
        ps = g_object_class_find_property(G_OBJECT_GET_CLASS(element), "max-errors");
        if (!ps || ps->value_type != G_TYPE_INT)
                return;
        g_object_set(element, "max-errors", -1, NULL);
        zcp_debug("%s %s: decoder %s, max-errors -1", ctx->kind, ctx->path, GST_OBJECT_NAME(element));
}

/*
 * The decoder's caps on their way into videoconvert (streaming thread, before
 * videoconvert sees them): a format convert takes passes through; any other
 * makes the appsink ask for I420, so videoconvert converts to that.
 */
static GstPadProbeReturn on_conv_caps(GstPad *pad, GstPadProbeInfo *info, gpointer user)
{
        struct zcp_source_ctx *ctx = user;
        GstEvent *ev = GST_PAD_PROBE_INFO_EVENT(info);
        GstVideoInfo vi;
        GstCaps *caps = NULL, *want;

        (void)pad;
        if (!ev || GST_EVENT_TYPE(ev) != GST_EVENT_CAPS)
                return GST_PAD_PROBE_OK;
        gst_event_parse_caps(ev, &caps);
        if (!caps || !gst_video_info_from_caps(&vi, caps))
                return GST_PAD_PROBE_OK;
        atomic_store(&ctx->dec_format, (int)GST_VIDEO_INFO_FORMAT(&vi));
        if (zcp_gst_pixfmt(GST_VIDEO_INFO_FORMAT(&vi)) != ZCP_PIX_NONE)
                want = gst_caps_ref(ctx->allowed);
        else
                want = gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "I420", NULL);
        g_object_set(ctx->appsink, "caps", want, NULL);
        gst_caps_unref(want);
        return GST_PAD_PROBE_OK;
}

/* rtspsrc, souphttpsrc & co. as uridecodebin creates them: the network settings. */
static void on_source_setup(GstElement *dec, GstElement *src, gpointer user)
{
        struct zcp_source_ctx *ctx = user;
        GObjectClass *k = G_OBJECT_GET_CLASS(src);
        const struct zcp_source_config *c = &ctx->cfg;
        GParamSpec *ps;

        (void)dec;
        atomic_store(&ctx->have_source, true);
        if (g_object_class_find_property(k, "latency"))
                g_object_set(src, "latency", (guint)c->latency_ms, NULL);
        if (g_object_class_find_property(k, "protocols") && c->protocol != ZCP_NET_AUTO)
                /* GstRTSPLowerTrans: UDP 1, UDP_MCAST 2, TCP 4 */
                gst_util_set_object_arg(G_OBJECT(src), "protocols", c->protocol == ZCP_NET_TCP ? "tcp" : "udp+udp-mcast");
        if (g_object_class_find_property(k, "tcp-timeout"))
                g_object_set(src, "tcp-timeout", (guint64)c->connect_timeout_ms * 1000, NULL);
        if (g_object_class_find_property(k, "teardown-timeout"))
                g_object_set(src, "teardown-timeout", (guint64)100 * ZCP_NSEC_PER_MSEC, NULL);
        if (g_object_class_find_property(k, "add-reference-timestamp-meta"))
                g_object_set(src, "add-reference-timestamp-meta", TRUE, NULL);
        if (g_object_class_find_property(k, "is-live"))
                g_object_set(src, "is-live", TRUE, NULL);
        if (g_object_class_find_property(k, "do-timestamp"))
                g_object_set(src, "do-timestamp", TRUE, NULL);
        /* souphttpsrc: seconds a blocking read may take (a guint; rtspsrc's and udpsrc's are other things) */
        ps = g_object_class_find_property(k, "timeout");
        if (ps && ps->value_type == G_TYPE_UINT && !g_object_class_find_property(k, "tcp-timeout"))
                g_object_set(src, "timeout", (guint)((c->connect_timeout_ms + 999) / 1000), NULL);
}

static void on_pad_added(GstElement *dec, GstPad *pad, gpointer user)
{
        struct zcp_source_ctx *ctx = user;
        GstPad *sinkpad;
        GstCaps *caps;
        bool video;

        caps = gst_pad_get_current_caps(pad);
        if (!caps)
                caps = gst_pad_query_caps(pad, NULL);
        video = caps && gst_caps_get_size(caps) > 0 &&
                gst_structure_has_name(gst_caps_get_structure(caps, 0), "video/x-raw");
        if (caps)
                gst_caps_unref(caps);
        if (!video || atomic_load(&ctx->linked))
                return;   /* not exposed to the appsink; the demuxer tolerates unlinked pads */

        sinkpad = gst_element_get_static_pad(ctx->conv, "sink");
        if (gst_pad_link(pad, sinkpad) != GST_PAD_LINK_OK)
                GST_ELEMENT_ERROR(dec, CORE, NEGOTIATION, ("cannot link the decoded video to videoconvert"), (NULL));
        else
                atomic_store(&ctx->linked, true);
        gst_object_unref(sinkpad);
}

static void on_no_more_pads(GstElement *dec, gpointer user)
{
        struct zcp_source_ctx *ctx = user;

        if (!atomic_load(&ctx->linked))
                GST_ELEMENT_ERROR(dec, STREAM, WRONG_TYPE, ("no video stream found"), (NULL));
}

/*
 * Network teardown, bounded: GStreamer's own state change runs on a thread
 * of its own; one that does not finish within TEARDOWN_NS (a source element
 * stuck on a dead connection) is left behind, logged, instead of holding the
 * source thread (and SIGTERM) hostage. Its callbacks are cut from ctx first.
 */
struct teardown {
        GstElement *pipeline;
        atomic_int st;   /* 0 running, 1 done, 2 abandoned by the waiter */
};

static void *teardown_run(void *arg)
{
        struct teardown *t = arg;

        gst_element_set_state(t->pipeline, GST_STATE_NULL);
        gst_object_unref(t->pipeline);
        if (atomic_exchange(&t->st, 1) == 2)
                free(t);
        return NULL;
}

/* Takes the pipeline's ref; true when it stopped in time. */
static bool teardown_bounded(struct zcp_source_ctx *ctx, GstElement *pipeline)
{
        struct teardown *t = calloc(1, sizeof(*t));
        uint64_t deadline = zcp_now_ns() + TEARDOWN_NS;
        pthread_t th;

        if (!t || (t->pipeline = pipeline, atomic_init(&t->st, 0), pthread_create(&th, NULL, teardown_run, t) != 0)) {
                free(t);
                gst_element_set_state(pipeline, GST_STATE_NULL);   /* no thread: the plain way */
                gst_object_unref(pipeline);
                return true;
        }
        while (atomic_load(&t->st) == 0 && zcp_now_ns() < deadline) {
                struct timespec ts = { 0, 10 * 1000 * 1000 };

                nanosleep(&ts, NULL);
        }
        if (atomic_load(&t->st) == 1 || atomic_exchange(&t->st, 2) == 1) {
                pthread_join(th, NULL);
                free(t);
                return true;
        }
        pthread_detach(th);
        ctx->abandoned++;
        zcp_err("network %s: GStreamer did not stop the old connection within %llu s: left behind (%u so far)",
                ctx->path, (unsigned long long)(TEARDOWN_NS / ZCP_NSEC_PER_SEC), ctx->abandoned);
        return false;
}

void zcp_gst_pipeline_free(struct zcp_source_ctx *ctx)
{
        if (ctx->pipeline && ctx->network) {
                GstPad *pad = ctx->conv ? gst_element_get_static_pad(ctx->conv, "sink") : NULL;

                /* nothing of the old pipeline may reach ctx (or the next pipeline) any more */
                g_signal_handlers_disconnect_by_data(ctx->pipeline, ctx);
                if (ctx->dec)
                        g_signal_handlers_disconnect_by_data(ctx->dec, ctx);
                if (pad) {
                        gst_pad_remove_probe(pad, ctx->conv_probe);
                        gst_object_unref(pad);
                }
                teardown_bounded(ctx, ctx->pipeline);
                ctx->pipeline = NULL;
        }
        if (ctx->pipeline)
                gst_element_set_state(ctx->pipeline, GST_STATE_NULL);
        if (ctx->pending) {
                gst_sample_unref(ctx->pending);
                ctx->pending = NULL;
        }
        if (ctx->bus)
                gst_object_unref(ctx->bus);
        if (ctx->appsink)
                gst_object_unref(ctx->appsink);
        if (ctx->pipeline)
                gst_object_unref(ctx->pipeline);
        ctx->bus = NULL;
        ctx->appsink = NULL;
        ctx->pipeline = NULL;
        ctx->conv = NULL;
        ctx->dec = NULL;
        atomic_store(&ctx->linked, false);
        atomic_store(&ctx->have_decoder, false);
        atomic_store(&ctx->have_demuxer, false);
        atomic_store(&ctx->video_pad, false);
        atomic_store(&ctx->other_pads, 0);
        atomic_store(&ctx->have_source, false);
        atomic_store(&ctx->demuxed, 0);
        atomic_store(&ctx->decoded_in, 0);
}

/* The element that fills the buffers of an ALLOCATION query reaching the appsink: its factory's name. */
static const char *producer_name(struct zcp_source_ctx *ctx)
{
        const char *name = "";
        GstPad *pad, *p;

        if (!gst_base_transform_is_passthrough(GST_BASE_TRANSFORM(ctx->conv)))
                return "videoconvert";
        pad = gst_element_get_static_pad(ctx->conv, "sink");
        p = gst_pad_get_peer(pad);
        gst_object_unref(pad);
        while (p && GST_IS_GHOST_PAD(p)) {
                GstPad *t = gst_ghost_pad_get_target(GST_GHOST_PAD(p));

                gst_object_unref(p);
                p = t;
        }
        if (p) {
                GstElement *e = gst_pad_get_parent_element(p);
                GstElementFactory *fac = e ? gst_element_get_factory(e) : NULL;

                name = fac ? GST_OBJECT_NAME(fac) : "";   /* factories live as long as the registry */
                if (e)
                        gst_object_unref(e);
                gst_object_unref(p);
        }
        return name;
}

/* The ALLOCATION query at the appsink (streaming thread): the lender answers it where it can (gst_pool.h). */
static GstPadProbeReturn on_allocation(GstPad *pad, GstPadProbeInfo *info, gpointer user)
{
        struct zcp_source_ctx *ctx = user;
        GstQuery *q = GST_PAD_PROBE_INFO_QUERY(info);

        (void)pad;
        if (!q || GST_QUERY_TYPE(q) != GST_QUERY_ALLOCATION)
                return GST_PAD_PROBE_OK;
        return zcp_gst_lender_answer(ctx->lend, q, producer_name(ctx), ctx->kind, ctx->path) ? GST_PAD_PROBE_HANDLED
                                                                                              : GST_PAD_PROBE_OK;
}

int zcp_gst_pipeline_build(struct zcp_source_ctx *ctx)
{
        GstElement *dec = NULL;
        GstCaps *raw = NULL;
        GstClock *clock;
        GstPad *pad;

        ctx->pipeline = gst_pipeline_new(ctx->network ? "zcp-network" : "zcp-file");
        dec = gst_element_factory_make("uridecodebin", NULL);
        ctx->conv = gst_element_factory_make("videoconvert", NULL);
        ctx->appsink = gst_element_factory_make("appsink", NULL);
        if (!ctx->pipeline || !dec || !ctx->appsink || !ctx->conv) {
                zcp_err("%s %s: GStreamer elements missing (%s)", ctx->kind, ctx->path,
                        !dec ? "uridecodebin, from gstreamer1.0-plugins-base"
                        : !ctx->conv ? "videoconvert, from gstreamer1.0-plugins-base" : "appsink");
                if (dec)
                        gst_object_unref(dec);
                if (ctx->conv)
                        gst_object_unref(ctx->conv);
                ctx->conv = NULL;
                return -ENOENT;
        }
        gst_object_ref_sink(ctx->appsink);   /* ours until close, beside the bin's */
        /* arrival times are read on this clock: CLOCK_MONOTONIC, like every other timestamp */
        clock = gst_system_clock_obtain();
        g_object_set(clock, "clock-type", GST_CLOCK_TYPE_MONOTONIC, NULL);
        gst_pipeline_use_clock(GST_PIPELINE(ctx->pipeline), clock);
        gst_object_unref(clock);

        /* "video/x-raw" alone makes decodebin refuse every decoder when other streams are not exposed */
        raw = gst_caps_from_string("video/x-raw(ANY)");
        g_object_set(dec, "uri", ctx->uri, "caps", raw, "expose-all-streams", FALSE, NULL);
        gst_caps_unref(raw);
        /* one thread: a conversion is rare (formats convert does not take), streams are many */
        if (g_object_class_find_property(G_OBJECT_GET_CLASS(ctx->conv), "n-threads"))
                g_object_set(ctx->conv, "n-threads", (guint)1, NULL);
        g_object_set(ctx->appsink,
                     "caps", ctx->allowed,
                     "sync", ctx->sync,
                     "max-buffers", (guint)APPSINK_MAX_BUFFERS,
                     "drop", FALSE,
                     "emit-signals", FALSE,
                     "enable-last-sample", FALSE,
                     "qos", FALSE,
                     "max-lateness", (gint64)-1,
                     NULL);

        g_signal_connect(ctx->pipeline, "deep-element-added", G_CALLBACK(on_deep_element_added), ctx);
        ctx->dec = dec;
        g_signal_connect(dec, "pad-added", G_CALLBACK(on_pad_added), ctx);
        g_signal_connect(dec, "no-more-pads", G_CALLBACK(on_no_more_pads), ctx);
        if (ctx->network)
                g_signal_connect(dec, "source-setup", G_CALLBACK(on_source_setup), ctx);
        gst_bin_add_many(GST_BIN(ctx->pipeline), dec, ctx->conv, ctx->appsink, NULL);
        if (!gst_element_link(ctx->conv, ctx->appsink)) {
                zcp_err("%s %s: cannot link videoconvert to the appsink", ctx->kind, ctx->path);
                return -EINVAL;
        }
        pad = gst_element_get_static_pad(ctx->conv, "sink");
        ctx->conv_probe = gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, on_conv_caps, ctx, NULL);
        gst_object_unref(pad);
        if (!ctx->network) {
                /* files: the decoder may write into ring slots (zcp_gst_lender_bind at start) */
                pad = gst_element_get_static_pad(ctx->appsink, "sink");
                zcp_gst_lender_unref(ctx->lend);
                ctx->lend = zcp_gst_lender_new(pad);
                if (ctx->lend)
                        gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM, on_allocation, ctx, NULL);
                gst_object_unref(pad);
        }
        ctx->bus = gst_element_get_bus(ctx->pipeline);
        return 0;
}

/* True while some pad task (a streaming thread) of the pipeline is running. */
static bool pipeline_streaming(GstElement *pipeline)
{
        GstIterator *it = gst_bin_iterate_recurse(GST_BIN(pipeline));
        GValue v = G_VALUE_INIT;
        bool busy = false, done = false;

        while (!busy && !done) {
                switch (gst_iterator_next(it, &v)) {
                case GST_ITERATOR_OK: {
                        GstIterator *pit = gst_element_iterate_pads(g_value_get_object(&v));
                        GValue pv = G_VALUE_INIT;

                        while (!busy && gst_iterator_next(pit, &pv) == GST_ITERATOR_OK) {
                                busy = gst_pad_get_task_state(g_value_get_object(&pv)) == GST_TASK_STARTED;
                                g_value_reset(&pv);
                        }
                        g_value_unset(&pv);
                        gst_iterator_free(pit);
                        g_value_reset(&v);
                        break;
                }
                case GST_ITERATOR_RESYNC:
                        busy = true;   /* the pipeline is changing: not idle */
                        break;
                default:
                        done = true;
                        break;
                }
        }
        g_value_unset(&v);
        gst_iterator_free(it);
        return busy;
}

/*
 * Waits for the pipeline to preroll (ASYNC_DONE) or fail, at most
 * `timeout_ns`. decodebin drops an error an element posts while it is still
 * setting that element up (a demuxer that finds no index at once, in pull
 * mode): then every streaming thread has stopped and nothing will ever come,
 * so a pipeline with no running task for IDLE_GIVE_UP_NS fails too, instead
 * of waiting for the timeout. zcp_source_cancel_all() ends it (-ECANCELED).
 */
int zcp_gst_preroll(struct zcp_source_ctx *ctx, uint64_t timeout_ns)
{
        GstStateChangeReturn sr;
        uint64_t deadline, idle_since = 0;

        sr = gst_element_set_state(ctx->pipeline, GST_STATE_PAUSED);
        if (sr == GST_STATE_CHANGE_NO_PREROLL) {
                /* live: nothing prerolls in PAUSED; the first frame arrives in PLAYING */
                ctx->info.live = true;
                sr = gst_element_set_state(ctx->pipeline, GST_STATE_PLAYING);
        }
        if (sr == GST_STATE_CHANGE_SUCCESS && !ctx->info.live)
                return 0;

        deadline = zcp_now_ns() + timeout_ns;
        for (;;) {
                uint64_t now = zcp_now_ns();
                GstMessage *msg;
                int r;

                if (zcp_source_cancelled()) {
                        zcp_info("%s %s: opening cancelled (stopping)", ctx->kind, ctx->path);
                        return -ECANCELED;
                }
                if (now >= deadline) {
                        zcp_err("%s %s: no video frame decoded within %.1f s", ctx->kind, ctx->path,
                                (double)timeout_ns / 1e9);
                        return -ETIMEDOUT;
                }
                msg = gst_bus_timed_pop_filtered(ctx->bus, MIN(deadline - now, IDLE_POLL_NS),
                                                 GST_MESSAGE_ASYNC_DONE | GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
                if (!msg) {
                        now = zcp_now_ns();
                        if (ctx->info.live || pipeline_streaming(ctx->pipeline)) {
                                idle_since = 0;
                        } else if (!idle_since) {
                                idle_since = now;
                        } else if (now - idle_since >= IDLE_GIVE_UP_NS) {
                                if (no_video(ctx) < 0)
                                        return -EINVAL;
                                zcp_err("%s %s: %s: decoding stopped before the first frame, without an error from GStreamer (a truncated or damaged file?)",
                                        ctx->kind, ctx->path,
                                        atomic_load(&ctx->linked) ? "cannot decode" : "no decodable video stream");
                                return -EINVAL;
                        }
                        continue;
                }
                if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
                        r = no_video(ctx);
                        if (r == 0)
                                r = log_gst_message(ctx, msg, atomic_load(&ctx->linked) ? "cannot decode"
                                                                                       : "no decodable video stream");
                        gst_message_unref(msg);
                        return r;
                }
                if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS) {
                        zcp_err("%s %s: the stream ended before its first frame", ctx->kind, ctx->path);
                        gst_message_unref(msg);
                        return -EINVAL;
                }
                if (GST_MESSAGE_SRC(msg) == GST_OBJECT(ctx->pipeline)) {
                        gst_message_unref(msg);
                        return 0;
                }
                gst_message_unref(msg);
        }
}

int zcp_gst_play(struct zcp_source_ctx *ctx)
{
        if (gst_element_set_state(ctx->pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
                GstMessage *msg = gst_bus_pop_filtered(ctx->bus, GST_MESSAGE_ERROR);

                if (msg) {
                        log_gst_message(ctx, msg, "cannot play");
                        gst_message_unref(msg);
                } else {
                        zcp_err("%s %s: cannot play", ctx->kind, ctx->path);
                }
                return -EIO;
        }
        return 0;
}

/* Drains the bus: decoder warnings are counted; an ERROR (or, when `eos_fails`, EOS) is -EIO. */
int zcp_gst_check_bus(struct zcp_source_ctx *ctx, bool eos_fails)
{
        GstMessage *msg;
        int r = 0;

        while ((msg = gst_bus_pop(ctx->bus))) {
                switch (GST_MESSAGE_TYPE(msg)) {
                case GST_MESSAGE_ERROR:
                        if (r == 0) {
                                log_gst_message(ctx, msg, "stream failed");
                                r = -EIO;
                        }
                        break;
                case GST_MESSAGE_EOS:
                        if (eos_fails && r == 0) {
                                zcp_warn("%s %s: the server ended the stream", ctx->kind, ctx->path);
                                r = -EPIPE;
                        }
                        break;
                case GST_MESSAGE_WARNING:
                        if (from_video_decoder(msg))
                                ctx->decoder_warnings++;
                        {
                                GError *err = NULL;

                                gst_message_parse_warning(msg, &err, NULL);
                                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_INTERVAL_NS, "%s %s: %s: %s", ctx->kind,
                                                    ctx->path, GST_OBJECT_NAME(GST_MESSAGE_SRC(msg)),
                                                    err ? err->message : "warning");
                                g_clear_error(&err);
                        }
                        break;
                case GST_MESSAGE_QOS:
                        /* a GstVideoDecoder posts one per frame it drops (undecodable input) */
                        if (from_video_decoder(msg))
                                ctx->decoder_drops++;
                        break;
                default:
                        break;
                }
                gst_message_unref(msg);
        }
        return r;
}
