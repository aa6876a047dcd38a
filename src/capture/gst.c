/* SPDX-License-Identifier: MIT */
/*
 * The `file` and `network` sources: a local file, or a live stream (rtsp://,
 * udp://, http:// MJPEG...), decoded by GStreamer.
 *
 *   uridecodebin (caps video/x-raw(ANY), other streams not exposed)
 *     -> videoconvert (passthrough unless the decoder's format is none of ours)
 *     -> appsink (caps: the raw formats convert takes; sync = pace realtime)
 *
 * open() (main thread) checks a local path (missing, directory, device,
 * unreadable, empty; a FIFO waits at most 10 s for a writer's first bytes and
 * goes to GStreamer as fd://, see open_fifo), builds the pipeline and prerolls it (PAUSED, at
 * most 10 s; a network stream is set PLAYING and waits at most
 * connect_timeout_ms for its first frame) to learn the negotiated geometry,
 * format and rate; anything GStreamer cannot decode fails there with the path
 * and GStreamer's own message. zcp_source_cancel_all() (SIGTERM) ends the
 * wait within 50 ms. start() sets PLAYING. next() (source thread) pulls one
 * decoded sample (100 ms timeout), takes a free slot, copies the planes into
 * the slot in the tight layout of pixfmt.h (counted in stats->copies) and
 * submits it. Files: where the decoder is one that keeps nothing in its
 * output buffers (an allowlist: openh264dec, jpegdec...) and GStreamer's
 * layout of the ring's geometry is the slot's, the appsink offers it a
 * buffer pool of ring slots from start() on: the frame is decoded straight
 * into its slot and next() submits that slot without a copy (counted in
 * stats->slot_direct; capture path "direct" while they flow; see "files:
 * decoders that write into ring slots" below). Every decoder's worker threads
 * are bounded by decoder_threads (auto: the CPUs / the streams that decode
 * with GStreamer), videoconvert runs on one thread.
 *
 * Formats: a decoder whose output is none of the formats convert takes
 * (4:4:4, 4:2:2, 10-bit, GIF's RGBA...) is converted to I420 by the
 * videoconvert, which otherwise passes buffers through untouched; the log
 * names the decoder's format and every converted frame counts in
 * stats->conversions.
 *
 * Files (block: a file never drops for lack of a slot):
 * - Every GstVideoDecoder gets max-errors = -1, so undecodable input costs
 *   frames, not the stream. A bus ERROR while playing ends the source with
 *   -EIO and a log line naming the file.
 * - Accounting is based on what the demuxer and the decoder report, never on
 *   a nominal rate: a probe counts the compressed frames the demuxer hands to
 *   the video decoder; at each end of the file, expected = those frames + the
 *   frames the container's duration still covers after the last one (a
 *   recording cut short: (duration - end of last frame) / frame duration,
 *   the frame duration measured from the timestamps), delivered = frames that
 *   reached the ring. expected - delivered is added to stats->decode_gaps
 *   (frames lost before the first decodable keyframe included) and both go
 *   to stats->file_frames_expected/_delivered and one log line.
 * - A frame whose PTS does not advance past the previous one is counted in
 *   stats->pts_repeats and flagged ZCP_FRAME_PTS_REPEAT (pts_repeat in the
 *   JSON line); pts_ns is published as the decoder gave it.
 * - The rate in the log is the caps' unless they carry none or 25/1 (a
 *   common default) that the timestamps contradict: then the timestamps'.
 * - A buffer the decoder flagged GST_BUFFER_FLAG_CORRUPTED (concealed,
 *   known-bad pixels) takes a seq and a slot but travels as a drop with
 *   ZCP_DROP_CORRUPT.
 * - A sample whose caps changed to another geometry: next() keeps it and
 *   returns ZCP_SOURCE_RECONFIGURE when the caller said it re-allocates the
 *   ring (reconfigure(ctx, NULL)); reconfigure() then gives the new info.
 *   Otherwise it (and one that needs more bytes than a slot holds) is dropped
 *   as ZCP_DROP_OVERSIZE, counted, the change said once; one the frame map
 *   refuses (buffer shorter than its caps) as ZCP_DROP_SHORT. Nothing is
 *   ever written past the slot.
 * - EOS: with loop, a flushing seek to 0 and the stream goes on; seq and
 *   pts_ns keep increasing (pts_ns = media time + the length of the passes
 *   before). Without loop, next() returns ZCP_SOURCE_EOS.
 *
 * Network (live, drop policy newest; a frame with no free slot is dropped as
 * ring_full):
 * - The server going away (bus ERROR, EOS, connect_timeout_ms without a
 *   first frame, timeout_ms without a frame) tears the pipeline down: state
 *   backoff, stats->reconnects + 1, then a new pipeline after a capped
 *   exponential back-off (50 ms doubling to backoff_max_ms; at once after a
 *   connection that delivered), next() returning ZCP_SOURCE_AGAIN meanwhile.
 *   When frames flow again, the outage (last frame to first frame) is added
 *   to stats->outage_ns and, at the stream's measured rate, outage_frames.
 * - Capture time (ZCP_TS_CAPTURE) is the arrival time: the buffer's running
 *   time + the pipeline's base time on the monotonic system clock, which for
 *   rtspsrc is when the frame's packets were received (jitter-corrected).
 *   The sender's clock, where RTCP sender reports have synchronised it
 *   (rtspsrc add-reference-timestamp-meta, caps timestamp/x-ntp), goes to
 *   frame.sender_ns (Unix-epoch ns). docs/network.md.
 *
 * Opening never hangs: errors, 10 s without a first frame, or 1 s with no
 * streaming thread left running (decodebin loses errors that elements post
 * while it sets them up, e.g. a demuxer that finds no index) end it; a FIFO
 * without a writer waits 10 s at most and a device node is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gst/app/gstappsink.h>
#include <gst/base/gstbasetransform.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include "capture/source.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/workers.h"

#define PREROLL_TIMEOUT_NS   (10 * ZCP_NSEC_PER_SEC)
#define IDLE_POLL_NS         (50 * ZCP_NSEC_PER_MSEC)
#define IDLE_GIVE_UP_NS      (1 * ZCP_NSEC_PER_SEC)
#define NEXT_TIMEOUT_NS      (100 * ZCP_NSEC_PER_MSEC)
#define LOG_INTERVAL_NS      (5 * ZCP_NSEC_PER_SEC)
#define APPSINK_MAX_BUFFERS  2
#define TEARDOWN_NS          (2 * ZCP_NSEC_PER_SEC)   /* network: stopping an old connection */
#define STALL_NS             (5 * ZCP_NSEC_PER_SEC)   /* file: no frame, no progress, no EOS = the end */
#define RATE_SAMPLES         15          /* PTS steps whose median is the measured frame duration */
#define BACKOFF_FIRST_MS     50
#define NTP_UNIX_OFFSET_S    2208988800ull   /* 1900-01-01 to 1970-01-01 */
#define LEND_WAIT_NS         (10 * ZCP_NSEC_PER_MSEC)   /* a decoder waiting for a free slot looks at flushing this often */
#define DIRECT_WAIT_NS       (2 * ZCP_NSEC_PER_MSEC)    /* a decoder's last ref to a pushed frame goes within this */

/* The raw formats convert takes, GStreamer's name -> ours. */
static const struct {
        GstVideoFormat gst;
        enum zcp_pixfmt zcp;
} format_map[] = {
        { GST_VIDEO_FORMAT_I420, ZCP_PIX_I420 },
        { GST_VIDEO_FORMAT_NV12, ZCP_PIX_NV12 },
        { GST_VIDEO_FORMAT_NV21, ZCP_PIX_NV21 },
        { GST_VIDEO_FORMAT_YV12, ZCP_PIX_YV12 },
        { GST_VIDEO_FORMAT_YUY2, ZCP_PIX_YUYV },
        { GST_VIDEO_FORMAT_UYVY, ZCP_PIX_UYVY },
        { GST_VIDEO_FORMAT_YVYU, ZCP_PIX_YVYU },
        { GST_VIDEO_FORMAT_RGB, ZCP_PIX_RGB24 },
        { GST_VIDEO_FORMAT_BGR, ZCP_PIX_BGR24 },
        { GST_VIDEO_FORMAT_RGBx, ZCP_PIX_RGBX },
        { GST_VIDEO_FORMAT_BGRx, ZCP_PIX_BGRX },
        { GST_VIDEO_FORMAT_GRAY8, ZCP_PIX_GREY },
};

struct zcp_source_ctx {
        const char *kind;                 /* "file" or "network", for messages */
        char path[ZCP_PATH_MAX];          /* as configured, for messages */
        gchar *uri;
        int fifo_fd;                      /* a FIFO's read end, handed to GStreamer as fd://; -1 otherwise */
        bool network;
        bool loop;
        bool sync;
        uint32_t want_width, want_height;
        struct zcp_source_config cfg;     /* network settings, timeouts */
        struct zcp_stream_stats *stats;

        GstElement *pipeline;
        GstElement *appsink;              /* our own ref */
        GstElement *conv;                 /* videoconvert before the appsink (the bin's ref) */
        GstElement *dec;                  /* the uridecodebin (the bin's ref) */
        gulong conv_probe;
        uint32_t abandoned;               /* network: teardowns GStreamer did not finish in time */
        GstBus *bus;
        GstCaps *allowed;                 /* appsink caps */
        atomic_bool linked;               /* a video pad reached the videoconvert */
        atomic_int dec_format;            /* GstVideoFormat the decoder delivers (CAPS event) */
        atomic_uint_fast64_t demuxed;     /* video frames out of the demuxer, this pass */
        atomic_uint_fast64_t decoded_in;  /* compressed frames into the video decoder, this pass */
        atomic_bool have_demuxer, have_decoder;
        bool stopped;                     /* stop() ran: start() begins a new pass */
        uint32_t dec_threads;             /* decoder_threads, auto resolved */
        atomic_bool threads_said;         /* the bound was logged (once per stream, at info) */
        struct lender *lend;              /* files: ring slots lent to the decoder (NULL: network) */
        GstPad *sinkpad;                  /* the appsink's sink pad (our ref): the ALLOCATION probe */
        uint64_t direct_refused;          /* samples in slot memory that had to be copied all the same */

        struct zcp_source_info info;
        GstCaps *caps;                    /* caps of the samples being copied (ref) */
        GstVideoInfo vinfo;               /* parsed `caps` */
        enum zcp_pixfmt cur_fmt;          /* ZCP_PIX_NONE: `caps` unusable */
        bool converted;                   /* `caps` come out of videoconvert, not the decoder */
        bool geometry_warned;
        bool reconfigure_ok;              /* the caller handles ZCP_SOURCE_RECONFIGURE */

        GstSample *pending;               /* pulled, waiting for a free slot */
        uint64_t seq;

        /* timeline (raw = the buffer's own PTS) */
        uint64_t frame_ns;                /* measured frame duration; 0 = not known yet */
        uint64_t deltas[RATE_SAMPLES];
        uint32_t n_deltas;
        bool have_last;
        uint64_t last_raw_pts, last_duration;
        bool have_first;
        uint64_t first_raw_pts;
        uint64_t loop_base_ns;
        uint64_t passes;
        uint64_t pass_delivered;          /* frames of this pass that reached the ring */
        uint64_t progress_ns;             /* file: last sample or position change (monotonic) */
        gint64 progress_pos;              /* file: the pipeline's position then */
        bool rewound;                     /* loop: seeked to the start, no frame of the new pass yet */
        uint64_t pass_repeats;            /* frames of this pass whose pts did not advance */
        bool rate_said;

        uint64_t decoder_warnings;        /* WARNING messages from decoders */
        uint64_t decoder_drops;           /* frames decoders reported dropped (QoS messages) */
        uint64_t corrupt_frames;

        /* network connection state (source thread) */
        enum zcp_source_state state;
        uint32_t failures;                /* failed attempts since the last connection that delivered */
        uint64_t retry_at_ns, opening_since_ns, last_frame_ns, down_since_ns;
        bool delivered_since_up;
        int last_fail;
};

static int parse_caps(struct zcp_source_ctx *ctx, GstCaps *caps);

static pthread_once_t gst_once = PTHREAD_ONCE_INIT;
static int gst_init_result;

static void gst_init_once(void)
{
        GError *err = NULL;

        if (!gst_init_check(NULL, NULL, &err)) {
                zcp_err("gstreamer: initialisation failed: %s", err ? err->message : "unknown error");
                g_clear_error(&err);
                gst_init_result = -EIO;
        }
}

static enum zcp_pixfmt pixfmt_from_gst(GstVideoFormat f)
{
        for (size_t i = 0; i < G_N_ELEMENTS(format_map); i++)
                if (format_map[i].gst == f)
                        return format_map[i].zcp;
        return ZCP_PIX_NONE;
}

static GstCaps *allowed_caps_new(void)
{
        GstCaps *caps = gst_caps_new_empty_simple("video/x-raw");
        GValue list = G_VALUE_INIT, v = G_VALUE_INIT;

        g_value_init(&list, GST_TYPE_LIST);
        g_value_init(&v, G_TYPE_STRING);
        for (size_t i = 0; i < G_N_ELEMENTS(format_map); i++) {
                g_value_set_string(&v, gst_video_format_to_string(format_map[i].gst));
                gst_value_list_append_value(&list, &v);
        }
        gst_caps_set_value(caps, "format", &list);
        g_value_unset(&v);
        g_value_unset(&list);
        return caps;
}

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

/* Counts compressed frames: out of the demuxer (when there is one), into the video decoder. */
static GstPadProbeReturn on_compressed(GstPad *pad, GstPadProbeInfo *info, gpointer user)
{
        atomic_uint_fast64_t *count = user;
        GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER(info);

        (void)pad;
        /* codec headers travel as buffers of their own in some containers: not frames */
        if (buf && gst_buffer_get_size(buf) > 0 && !GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_HEADER))
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

/* A demuxer's new pad: a video one is counted (what the container holds, parser losses included). */
static void on_demux_pad(GstElement *demux, GstPad *pad, gpointer user)
{
        struct zcp_source_ctx *ctx = user;
        GstCaps *caps = gst_pad_get_current_caps(pad);
        const gchar *name;

        (void)demux;
        if (!caps)
                caps = gst_pad_query_caps(pad, NULL);
        name = caps && gst_caps_get_size(caps) > 0 ? gst_structure_get_name(gst_caps_get_structure(caps, 0)) : "";
        if (g_str_has_prefix(name, "video/") || g_str_has_prefix(name, "image/")) {
                count_on(pad, &ctx->demuxed);
                atomic_store(&ctx->have_demuxer, true);
        }
        if (caps)
                gst_caps_unref(caps);
}

/*
 * decoder_threads: a decoder's own worker threads, bounded. avdec_* (libav)
 * starts max-threads = 0 = one per CPU, per stream: 16 streams of 1080p on
 * 16 CPUs then run 16 x 16 decoding threads beside GStreamer's streaming
 * threads and the stages (issue 15). The first of max-threads (avdec_*),
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
        if (pixfmt_from_gst(GST_VIDEO_INFO_FORMAT(&vi)) != ZCP_PIX_NONE)
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
 * Local path checks, so that the common mistakes get errno-precise messages.
 * A regular file or a FIFO (a stream piped in, e.g. YUV4MPEG): a device or a
 * socket is refused. *ret_fifo says which.
 */
static int check_local_file(const char *path, bool *ret_fifo)
{
        struct stat st;
        int fd;

        if (stat(path, &st) < 0) {
                int r = -errno;
                zcp_err("file %s: %s", path, zcp_strerror(r));
                return r;
        }
        if (S_ISDIR(st.st_mode)) {
                zcp_err("file %s: is a directory", path);
                return -EISDIR;
        }
        if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
                zcp_err("file %s: not a regular file or a FIFO (%s): for a camera use type v4l2, for a live stream type network",
                        path, S_ISSOCK(st.st_mode) ? "a socket" : "a device");
                return -EINVAL;
        }
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);   /* a FIFO must not block here */
        if (fd < 0) {
                int r = -errno;
                zcp_err("file %s: cannot open: %s", path, zcp_strerror(r));
                return r;
        }
        close(fd);
        if (S_ISREG(st.st_mode) && st.st_size == 0) {
                zcp_err("file %s: is empty", path);
                return -EINVAL;
        }
        *ret_fifo = S_ISFIFO(st.st_mode);
        return 0;
}

/*
 * A FIFO: GStreamer's filesrc would block in open() until a writer comes
 * (forever, deaf to SIGTERM). Opened here without blocking, it waits for the
 * first bytes at most `timeout_ns` (cancellable), then goes to GStreamer as
 * fd://N (fdsrc polls it, so a writer that goes quiet never blocks a stop).
 */
static int open_fifo(struct zcp_source_ctx *ctx, uint64_t timeout_ns)
{
        uint64_t deadline = zcp_now_ns() + timeout_ns;
        struct pollfd pfd;
        int fd, flags;

        fd = open(ctx->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) {
                int r = -errno;
                zcp_err("file %s: cannot open: %s", ctx->path, strerror(-r));
                return r;
        }
        pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
        for (;;) {
                int n = poll(&pfd, 1, (int)(IDLE_POLL_NS / ZCP_NSEC_PER_MSEC));

                if (n > 0 && (pfd.revents & POLLIN))
                        break;
                if (zcp_source_cancelled()) {
                        zcp_info("file %s: opening cancelled (stopping)", ctx->path);
                        close(fd);
                        return -ECANCELED;
                }
                if (zcp_now_ns() >= deadline || (n > 0 && (pfd.revents & (POLLHUP | POLLERR)))) {
                        zcp_err("file %s: a FIFO with no data from a writer within %.1f s", ctx->path,
                                (double)timeout_ns / 1e9);
                        close(fd);
                        return -ETIMEDOUT;
                }
        }
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        ctx->fifo_fd = fd;
        g_free(ctx->uri);
        ctx->uri = g_strdup_printf("fd://%d", fd);
        return 0;
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

static void pipeline_free(struct zcp_source_ctx *ctx)
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
        atomic_store(&ctx->demuxed, 0);
        atomic_store(&ctx->decoded_in, 0);
}

/* Rows and bytes per row of each plane in the tight slot layout (pixfmt.h). */
struct plane {
        size_t row_bytes;
        uint32_t rows;
};

static uint32_t plane_layout(enum zcp_pixfmt fmt, uint32_t w, uint32_t h, struct plane pl[3])
{
        switch (fmt) {
        case ZCP_PIX_I420:
        case ZCP_PIX_YV12:
                pl[0] = (struct plane){ w, h };
                pl[1] = (struct plane){ w / 2, h / 2 };
                pl[2] = (struct plane){ w / 2, h / 2 };
                return 3;
        case ZCP_PIX_NV12:
        case ZCP_PIX_NV21:
                pl[0] = (struct plane){ w, h };
                pl[1] = (struct plane){ w, h / 2 };
                return 2;
        default:
                pl[0] = (struct plane){ zcp_pixfmt_min_stride(fmt, w), h };
                return 1;
        }
}

/* ---- files: decoders that write into ring slots ------------------------- */

/*
 * A decoder allocates its output frames from the buffer pool the ALLOCATION
 * query downstream offers. For a file, the appsink's pad answers it (a probe)
 * with a pool whose buffers are ring slots when
 *   - start() bound a ring (not while opening: the preroll frames are copied),
 *   - the caps are the ring's geometry and format, progressive, and GStreamer's
 *     own layout of them is the slot's tight one (pixfmt.h: no padded rows),
 *   - the element that will fill the buffers is on the allowlist below.
 * The frame then lands in the slot: next() recognises the sample's buffer as
 * a slot's and submits that slot without copying (stats->slot_direct; copies
 * + slot_direct = the frames that reached the ring).
 *
 * The allowlist: convert works on the slot in place (NV12 in the same
 * memory) and the next frame is written into it again, so the producer must
 * keep nothing in its output buffers once it has pushed them. openh264dec
 * copies each picture out of the library's own buffers (its references stay
 * there); jpegdec and pngdec decode every frame on its own; videoconvert
 * (when it converts) writes every pixel of each frame; videotestsrc draws
 * each frame whole. Not on it: avdec_* (libav decodes into the pool's
 * buffers and keeps them as reference pictures for later frames), the
 * H.264/H.265/VP8/VP9 decoders that do the same, and anything unknown. A raw
 * stream out of a demuxer has no producer that asks for a pool: it is copied.
 * On top of the list, a buffer is taken as the slot only when nothing else
 * holds it or its memory (refcounts 1: the sample's); else it is copied into
 * another slot (a preroll after a seek, when appsink keeps a second ref).
 *
 * Ownership: the pool takes free slots from the ring (FREE -> SOURCE ->
 * DRIVER, the state the v4l2 USERPTR path uses for slots queued in a
 * driver), at most ring slots - 1 at once so that a frame to copy always
 * finds one. The free queue then has two consumers, the source thread and
 * the decoder's streaming thread: pop_lock makes them take turns. A buffer
 * that comes back to the pool unpublished (flushed by the loop's seek,
 * dropped, copied instead) keeps its slot DRIVER on the `back` stack, given
 * out again first (and to the copy path); a published one's slot went
 * DRIVER -> SOURCE -> the stages. appsink keeps the last sample it handed
 * out until the next pull, so each slot has two buffers: the one still held
 * and one to fill. stop() (every stage and streaming thread gone) gives the
 * slots on the back stack, and any still held by GStreamer, back to the
 * free queue; after it the pool hands out nothing (start() binds again).
 * A pool of an older binding still in a decoder's hands (a geometry change
 * went by) hands out plain memory, copied like any other.
 */
static const char *const direct_producers[] = { "openh264dec", "jpegdec", "pngdec", "videoconvert", "videotestsrc" };

#define NO_SLOT UINT32_MAX

struct wrap {                     /* a GstBuffer over one slot's frame memory */
        GstBuffer *buf;           /* the lender's ref while idle, GStreamer's while out */
        GstMemory *mem;           /* the buffer's one memory (its ref): recognises it */
        uint8_t *data;
        size_t cap;
        uint32_t slot;
        bool out;                 /* handed to GStreamer */
        bool published;           /* its slot went to the ring with the frame in it */
};

struct lender {
        atomic_uint refs;         /* the source and each pool */
        pthread_mutex_t lock;     /* all below */
        pthread_cond_t returned;  /* a buffer came back */
        pthread_mutex_t pop_lock; /* the free queue's two consumers take turns; taken before lock */
        struct zcp_ring *ring;    /* bound by start(); NULL: nothing lent */
        uint32_t gen;             /* bindings so far: a pool serves the one it was made for */
        bool closing;             /* stop(): every wait says flushing */
        GstVideoInfo vinfo;       /* the ring's geometry as GStreamer lays it out */
        size_t bytes;             /* frame bytes in a slot */
        uint32_t limit, taken;    /* slots GStreamer may hold / holds (DRIVER) */
        uint32_t nwraps;          /* 2 per slot */
        struct wrap *wraps;
        uint32_t *back, nback;    /* DRIVER slots back unused, given out first */
        uint32_t said_gen;        /* the binding whose producer was said */
        GstPad *sinkpad;          /* appsink's (ref): flushing there ends a wait */
};

typedef struct {
        GstBufferPool parent;
        struct lender *l;
        uint32_t gen;
} ZcpSlotPool;

typedef struct {
        GstBufferPoolClass parent_class;
} ZcpSlotPoolClass;

GType zcp_slot_pool_get_type(void);
G_DEFINE_TYPE(ZcpSlotPool, zcp_slot_pool, GST_TYPE_BUFFER_POOL)

static struct lender *lender_new(GstPad *sinkpad)
{
        struct lender *l = calloc(1, sizeof(*l));
        pthread_condattr_t ca;

        if (!l)
                return NULL;
        atomic_init(&l->refs, 1);
        pthread_mutex_init(&l->lock, NULL);
        pthread_mutex_init(&l->pop_lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&l->returned, &ca);
        pthread_condattr_destroy(&ca);
        l->sinkpad = gst_object_ref(sinkpad);
        return l;
}

static struct lender *lender_ref(struct lender *l)
{
        atomic_fetch_add(&l->refs, 1);
        return l;
}

/* The last ref: nothing is bound any more (unbind ran). */
static void lender_unref(struct lender *l)
{
        if (!l || atomic_fetch_sub(&l->refs, 1) != 1)
                return;
        free(l->wraps);
        free(l->back);
        gst_object_unref(l->sinkpad);
        pthread_cond_destroy(&l->returned);
        pthread_mutex_destroy(&l->pop_lock);
        pthread_mutex_destroy(&l->lock);
        free(l);
}

static GstVideoFormat gst_from_pixfmt(enum zcp_pixfmt f)
{
        for (size_t i = 0; i < G_N_ELEMENTS(format_map); i++)
                if (format_map[i].zcp == f)
                        return format_map[i].gst;
        return GST_VIDEO_FORMAT_UNKNOWN;
}

/* GStreamer lays `vi` out exactly as the slot's tight layout (plane offsets, strides, size). */
static bool layout_tight(const GstVideoInfo *vi)
{
        enum zcp_pixfmt fmt = pixfmt_from_gst(GST_VIDEO_INFO_FORMAT(vi));
        struct plane pl[3];
        uint32_t n;
        size_t off = 0;

        if (fmt == ZCP_PIX_NONE || GST_VIDEO_INFO_INTERLACE_MODE(vi) != GST_VIDEO_INTERLACE_MODE_PROGRESSIVE)
                return false;
        n = plane_layout(fmt, (uint32_t)GST_VIDEO_INFO_WIDTH(vi), (uint32_t)GST_VIDEO_INFO_HEIGHT(vi), pl);
        if (GST_VIDEO_INFO_N_PLANES(vi) != n)
                return false;
        for (uint32_t p = 0; p < n; p++) {
                if (GST_VIDEO_INFO_PLANE_OFFSET(vi, p) != off || (size_t)GST_VIDEO_INFO_PLANE_STRIDE(vi, p) != pl[p].row_bytes)
                        return false;
                off += pl[p].row_bytes * pl[p].rows;
        }
        return GST_VIDEO_INFO_SIZE(vi) == off;
}

static bool same_geometry(const GstVideoInfo *a, const GstVideoInfo *b)
{
        return GST_VIDEO_INFO_FORMAT(a) == GST_VIDEO_INFO_FORMAT(b) && GST_VIDEO_INFO_WIDTH(a) == GST_VIDEO_INFO_WIDTH(b) &&
               GST_VIDEO_INFO_HEIGHT(a) == GST_VIDEO_INFO_HEIGHT(b);
}

static struct wrap *wrap_of(struct lender *l, GstBuffer *buf)
{
        for (uint32_t i = 0; i < l->nwraps; i++)
                if (l->wraps[i].buf == buf)
                        return &l->wraps[i];
        return NULL;
}

/* An idle buffer over slot `idx`, or NULL when both are out. Lock held. */
static struct wrap *idle_wrap(struct lender *l, uint32_t idx)
{
        for (uint32_t i = 2 * idx; i < 2 * idx + 2; i++)
                if (!l->wraps[i].out)
                        return &l->wraps[i];
        return NULL;
}

/* Plain memory from a pool that cannot lend (another binding, none): copied like any frame. */
static GstFlowReturn plain_buffer(size_t bytes, GstBuffer **ret)
{
        *ret = gst_buffer_new_allocate(NULL, bytes, NULL);
        return *ret ? GST_FLOW_OK : GST_FLOW_ERROR;
}

/* Decoder's streaming thread: a slot to decode into, waiting (LEND_WAIT_NS at a time) while none is free. */
static GstFlowReturn pool_acquire(GstBufferPool *bp, GstBuffer **ret, GstBufferPoolAcquireParams *params)
{
        ZcpSlotPool *p = (ZcpSlotPool *)bp;
        struct lender *l = p->l;

        for (;;) {
                uint32_t idx = NO_SLOT;
                bool reserved = false, stale;
                struct wrap *w = NULL;
                int r;

                pthread_mutex_lock(&l->pop_lock);
                pthread_mutex_lock(&l->lock);
                if (l->closing) {
                        pthread_mutex_unlock(&l->lock);
                        pthread_mutex_unlock(&l->pop_lock);
                        return GST_FLOW_FLUSHING;
                }
                stale = !l->ring || l->gen != p->gen;
                if (!stale && l->nback)
                        idx = l->back[--l->nback];
                else if (!stale && l->taken < l->limit)
                        reserved = true, l->taken++;
                pthread_mutex_unlock(&l->lock);
                if (stale) {
                        pthread_mutex_unlock(&l->pop_lock);
                        return plain_buffer(l->bytes, ret);
                }
                if (reserved) {
                        /* l->ring stays: unbinding takes pop_lock first */
                        r = zcp_ring_acquire(l->ring, LEND_WAIT_NS, &idx);
                        if (r == 0)
                                zcp_ring_move(l->ring, idx, ZCP_SLOT_SOURCE, ZCP_SLOT_DRIVER);
                        pthread_mutex_lock(&l->lock);
                        if (r < 0)
                                l->taken--;
                        pthread_mutex_unlock(&l->lock);
                        if (r == -EPIPE) {
                                pthread_mutex_unlock(&l->pop_lock);
                                return GST_FLOW_FLUSHING;
                        }
                }
                if (idx != NO_SLOT) {
                        pthread_mutex_lock(&l->lock);
                        w = idle_wrap(l, idx);
                        if (w) {
                                w->out = true;
                                w->published = false;
                                *ret = w->buf;
                        } else {
                                l->back[l->nback++] = idx;   /* both held (not expected): kept, plain memory instead */
                        }
                        pthread_mutex_unlock(&l->lock);
                }
                pthread_mutex_unlock(&l->pop_lock);
                if (w)
                        return GST_FLOW_OK;
                if (idx != NO_SLOT)
                        return plain_buffer(l->bytes, ret);
                if (!reserved) {
                        /* GStreamer holds `limit` slots: wait for one to come back */
                        struct timespec ts;
                        uint64_t until = zcp_now_ns() + LEND_WAIT_NS;

                        ts.tv_sec = (time_t)(until / ZCP_NSEC_PER_SEC);
                        ts.tv_nsec = (long)(until % ZCP_NSEC_PER_SEC);
                        pthread_mutex_lock(&l->lock);
                        if (!l->closing && !l->nback && l->taken >= l->limit)
                                pthread_cond_timedwait(&l->returned, &l->lock, &ts);
                        pthread_mutex_unlock(&l->lock);
                }
                if (GST_BUFFER_POOL_IS_FLUSHING(bp) || GST_PAD_IS_FLUSHING(l->sinkpad))
                        return GST_FLOW_FLUSHING;
                if (params && (params->flags & GST_BUFFER_POOL_ACQUIRE_FLAG_DONTWAIT))
                        return GST_FLOW_EOS;
        }
}

/* The buffer's last ref went (any thread): idle again; unpublished, its slot is given out again first. */
static void pool_release(GstBufferPool *bp, GstBuffer *buf)
{
        struct lender *l = ((ZcpSlotPool *)bp)->l;
        struct wrap *w;

        pthread_mutex_lock(&l->lock);
        w = wrap_of(l, buf);
        if (w) {
                gsize off = 0;

                /* an element that replaced or trimmed the memory: the slot's, whole, again */
                if (gst_buffer_n_memory(buf) != 1 || gst_buffer_peek_memory(buf, 0) != w->mem ||
                    gst_memory_get_sizes(w->mem, &off, NULL) != l->bytes || off != 0) {
                        gst_buffer_remove_all_memory(buf);
                        w->mem = gst_memory_new_wrapped(0, w->data, w->cap, 0, l->bytes, NULL, NULL);
                        gst_buffer_append_memory(buf, w->mem);
                }
                GST_BUFFER_FLAG_UNSET(buf, GST_BUFFER_FLAG_TAG_MEMORY);
                if (!w->published)
                        l->back[l->nback++] = w->slot;
                w->out = false;
                w->published = false;
                pthread_cond_broadcast(&l->returned);
        }
        pthread_mutex_unlock(&l->lock);
        if (!w)
                gst_buffer_unref(buf);   /* plain memory, or a buffer of an older binding */
}

static gboolean pool_set_config(GstBufferPool *bp, GstStructure *config)
{
        struct lender *l = ((ZcpSlotPool *)bp)->l;
        GstCaps *caps = NULL;
        GstVideoInfo vi;
        guint size = 0;
        bool ok;

        if (!gst_buffer_pool_config_get_params(config, &caps, &size, NULL, NULL) || !caps ||
            !gst_video_info_from_caps(&vi, caps))
                return FALSE;
        pthread_mutex_lock(&l->lock);
        ok = l->ring && same_geometry(&vi, &l->vinfo) && layout_tight(&vi) && size <= l->bytes;
        pthread_mutex_unlock(&l->lock);
        return ok && GST_BUFFER_POOL_CLASS(zcp_slot_pool_parent_class)->set_config(bp, config);
}

/* Nothing is allocated ahead: slots are taken as frames are decoded. */
static gboolean pool_start(GstBufferPool *bp)
{
        (void)bp;
        return TRUE;
}

static gboolean pool_stop(GstBufferPool *bp)
{
        (void)bp;
        return TRUE;
}

static void pool_finalize(GObject *obj)
{
        lender_unref(((ZcpSlotPool *)obj)->l);
        G_OBJECT_CLASS(zcp_slot_pool_parent_class)->finalize(obj);
}

static void zcp_slot_pool_class_init(ZcpSlotPoolClass *klass)
{
        GstBufferPoolClass *pc = GST_BUFFER_POOL_CLASS(klass);

        G_OBJECT_CLASS(klass)->finalize = pool_finalize;
        pc->start = pool_start;
        pc->stop = pool_stop;
        pc->set_config = pool_set_config;
        pc->acquire_buffer = pool_acquire;
        pc->release_buffer = pool_release;
}

static void zcp_slot_pool_init(ZcpSlotPool *p)
{
        p->l = NULL;
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

/* The ALLOCATION query at the appsink (streaming thread): ring slots as the pool where it is safe. */
static GstPadProbeReturn on_allocation(GstPad *pad, GstPadProbeInfo *info, gpointer user)
{
        struct zcp_source_ctx *ctx = user;
        struct lender *l = ctx->lend;
        GstQuery *q = GST_PAD_PROBE_INFO_QUERY(info);
        const char *producer, *why = NULL;
        GstCaps *caps = NULL;
        GstStructure *config;
        GstVideoInfo vi;
        ZcpSlotPool *pool;
        uint32_t gen, limit;
        guint bytes;
        bool say;

        (void)pad;
        if (!q || GST_QUERY_TYPE(q) != GST_QUERY_ALLOCATION)
                return GST_PAD_PROBE_OK;
        gst_query_parse_allocation(q, &caps, NULL);
        producer = producer_name(ctx);
        pthread_mutex_lock(&l->lock);
        if (!l->ring)
                why = "no ring yet (opening)";
        else if (!caps || !gst_video_info_from_caps(&vi, caps) || !same_geometry(&vi, &l->vinfo))
                why = "not the ring's geometry and format";
        else if (!layout_tight(&vi))
                why = "GStreamer pads its rows";
        for (size_t i = 0; !why && i < G_N_ELEMENTS(direct_producers); i++)
                if (strcmp(producer, direct_producers[i]) == 0)
                        break;
                else if (i + 1 == G_N_ELEMENTS(direct_producers))
                        why = "not known to leave its output buffers alone (reference frames)";
        gen = l->gen;
        limit = l->limit;
        bytes = (guint)l->bytes;
        say = l->ring && l->said_gen != gen;
        if (say)
                l->said_gen = gen;
        pthread_mutex_unlock(&l->lock);
        if (why) {
                zcp_log(say ? ZCP_LOG_INFO : ZCP_LOG_DEBUG, "%s %s: %s decodes into its own buffers, copied into the slots: %s",
                        ctx->kind, ctx->path, producer[0] ? producer : "the producer", why);
                return GST_PAD_PROBE_OK;   /* the appsink answers as it always does */
        }
        pool = g_object_new(zcp_slot_pool_get_type(), NULL);
        gst_object_ref_sink(pool);
        pool->l = lender_ref(l);
        pool->gen = gen;
        config = gst_buffer_pool_get_config(GST_BUFFER_POOL(pool));
        gst_buffer_pool_config_set_params(config, caps, bytes, 0, limit);
        gst_buffer_pool_set_config(GST_BUFFER_POOL(pool), config);
        gst_query_add_allocation_pool(q, GST_BUFFER_POOL(pool), bytes, 0, limit);
        gst_object_unref(pool);
        zcp_log(say ? ZCP_LOG_INFO : ZCP_LOG_DEBUG,
                "%s %s: %s decodes straight into the ring's slots (at most %u at a time; counted in slot_direct)",
                ctx->kind, ctx->path, producer, limit);
        return GST_PAD_PROBE_HANDLED;
}

/*
 * start(): lends slots of `ring` from now on (files whose ring layout
 * GStreamer shares), and asks upstream to negotiate its allocation again.
 * Main thread, no streaming thread in the pool (open prerolled without it).
 */
static void lend_bind(struct zcp_source_ctx *ctx, struct zcp_ring *ring)
{
        struct lender *l = ctx->lend;
        GstVideoFormat gf = gst_from_pixfmt(ctx->info.fmt);
        GstVideoInfo vi;
        bool ok;

        if (!l || l->ring == ring)
                return;
        pthread_mutex_lock(&l->lock);
        l->closing = false;   /* a stop before: pools of that binding hand out plain memory, not "flushing" */
        pthread_mutex_unlock(&l->lock);
        gst_video_info_init(&vi);
        ok = gf != GST_VIDEO_FORMAT_UNKNOWN && gst_video_info_set_format(&vi, gf, ctx->info.width, ctx->info.height) &&
             layout_tight(&vi) && ring->slot_size >= ctx->info.frame_bytes;
        if (!ok) {
                zcp_debug("%s %s: %ux%u %s: GStreamer's layout is not the slot's: every frame is copied", ctx->kind,
                          ctx->path, ctx->info.width, ctx->info.height, zcp_pixfmt_name(ctx->info.fmt));
                return;
        }
        pthread_mutex_lock(&l->pop_lock);
        pthread_mutex_lock(&l->lock);
        l->wraps = calloc(2 * (size_t)ring->count, sizeof(*l->wraps));
        l->back = calloc(ring->count, sizeof(*l->back));
        if (!l->wraps || !l->back) {
                free(l->wraps);
                free(l->back);
                l->wraps = NULL;
                l->back = NULL;
                goto out;
        }
        l->nwraps = 2 * ring->count;
        for (uint32_t i = 0; i < l->nwraps; i++) {
                struct wrap *w = &l->wraps[i];
                struct zcp_slot *s = zcp_ring_slot(ring, i / 2);

                *w = (struct wrap){ .buf = gst_buffer_new(), .data = s->data, .cap = s->cap, .slot = i / 2 };
                w->mem = gst_memory_new_wrapped(0, s->data, s->cap, 0, ctx->info.frame_bytes, NULL, NULL);
                gst_buffer_append_memory(w->buf, w->mem);
        }
        l->vinfo = vi;
        l->bytes = ctx->info.frame_bytes;
        l->limit = ring->count > 1 ? ring->count - 1 : 1;
        l->taken = 0;
        l->nback = 0;
        l->closing = false;
        l->gen++;
        l->ring = ring;
out:
        pthread_mutex_unlock(&l->lock);
        pthread_mutex_unlock(&l->pop_lock);
        if (l->ring == ring)
                gst_pad_push_event(l->sinkpad, gst_event_new_reconfigure());
}

/*
 * Every slot GStreamer or the back stack holds goes back to the free queue
 * (no stage runs: the queue has no other producer now) and the buffers not
 * out are freed; those still out are freed when GStreamer lets them go.
 * Main thread, after the streaming threads stopped (stop) or with none in
 * the pool (a geometry change: the decoder renegotiated away from it).
 */
static void lend_unbind(struct zcp_source_ctx *ctx)
{
        struct lender *l = ctx->lend;
        uint32_t held = 0;

        if (!l || !l->ring)
                return;
        pthread_mutex_lock(&l->pop_lock);
        pthread_mutex_lock(&l->lock);
        for (uint32_t i = 0; i < l->nwraps; i++) {
                struct wrap *w = &l->wraps[i];

                if (!w->out) {
                        gst_buffer_unref(w->buf);
                        continue;
                }
                if (!w->published) {
                        /* held by GStreamer (appsink's last sample): nobody writes it any more */
                        l->back[l->nback++] = w->slot;
                        held++;
                }
        }
        for (uint32_t i = 0; i < l->nback; i++) {
                zcp_ring_move(l->ring, l->back[i], ZCP_SLOT_DRIVER, ZCP_SLOT_FREE);
                zcp_spsc_push(&l->ring->q[ZCP_Q_FREE], l->back[i]);
        }
        if (l->nback != l->taken)
                zcp_err("%s %s: slot accounting: %u slots lent to GStreamer, %u came back", ctx->kind, ctx->path,
                        l->taken, l->nback);
        if (held)
                zcp_debug("%s %s: %u slots still in GStreamer's hands at stop: back to the ring", ctx->kind, ctx->path,
                          held);
        free(l->wraps);
        free(l->back);
        l->wraps = NULL;
        l->back = NULL;
        l->nwraps = 0;
        l->nback = 0;
        l->taken = 0;
        l->ring = NULL;
        pthread_mutex_unlock(&l->lock);
        pthread_mutex_unlock(&l->pop_lock);
}

/*
 * Source thread: the pending sample's buffer is slot memory that nothing
 * else holds and that holds a frame of the ring's geometry: that slot
 * (DRIVER -> SOURCE, frame cleared) is the frame's, *ret_idx.
 */
static bool lent_slot(struct zcp_source_ctx *ctx, struct zcp_ring *ring, uint32_t *ret_idx)
{
        struct lender *l = ctx->lend;
        GstBuffer *buf = gst_sample_get_buffer(ctx->pending);
        GstCaps *caps = gst_sample_get_caps(ctx->pending);
        struct wrap *w;
        bool ok = false;

        if (!l || !l->ring || !buf || !buf->pool || G_OBJECT_TYPE(buf->pool) != zcp_slot_pool_get_type())
                return false;
        if (caps && caps != ctx->caps && !gst_caps_is_equal(caps, ctx->caps))
                parse_caps(ctx, caps);
        /*
         * A GstVideoDecoder subclass may hold the frame (and through it the
         * output buffer) a moment after pushing it, until its handle_frame
         * returns (openh264dec does): up to DIRECT_WAIT_NS for that ref to go.
         */
        for (uint64_t t0 = 0; GST_MINI_OBJECT_REFCOUNT_VALUE(buf) > 1;) {
                struct timespec ts = { 0, 20 * 1000 };

                if (!t0)
                        t0 = zcp_now_ns();
                else if (zcp_now_ns() - t0 > DIRECT_WAIT_NS)
                        break;
                nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&l->lock);
        w = l->ring == ring ? wrap_of(l, buf) : NULL;
        if (w && w->out && !w->published) {
                GstMemory *mem = gst_buffer_n_memory(buf) == 1 ? gst_buffer_peek_memory(buf, 0) : NULL;
                gsize off = 1;

                ok = mem == w->mem && GST_MINI_OBJECT_REFCOUNT_VALUE(buf) == 1 &&
                     GST_MINI_OBJECT_REFCOUNT_VALUE(mem) == 1 && gst_memory_get_sizes(mem, &off, NULL) == l->bytes &&
                     off == 0 && ctx->cur_fmt != ZCP_PIX_NONE && same_geometry(&ctx->vinfo, &l->vinfo) &&
                     layout_tight(&ctx->vinfo);
                if (ok) {
                        w->published = true;
                        l->taken--;
                }
        }
        pthread_mutex_unlock(&l->lock);
        if (!ok) {
                if (w)
                        ctx->direct_refused++;
                return false;
        }
        zcp_ring_move(ring, w->slot, ZCP_SLOT_DRIVER, ZCP_SLOT_SOURCE);
        memset(&zcp_ring_slot(ring, w->slot)->frame, 0, sizeof(struct zcp_frame));
        *ret_idx = w->slot;
        return true;
}

/* Source thread: a slot to copy a frame into, the ones back from GStreamer first. As zcp_ring_acquire(). */
static int take_slot(struct zcp_source_ctx *ctx, struct zcp_ring *ring, int64_t timeout_ns, uint32_t *ret_idx)
{
        struct lender *l = ctx->lend;
        uint32_t idx = NO_SLOT;
        int r;

        if (!l || l->ring != ring)
                return zcp_ring_acquire(ring, timeout_ns, ret_idx);
        pthread_mutex_lock(&l->lock);
        if (l->nback) {
                idx = l->back[--l->nback];
                l->taken--;
        }
        pthread_mutex_unlock(&l->lock);
        if (idx != NO_SLOT) {
                zcp_ring_move(ring, idx, ZCP_SLOT_DRIVER, ZCP_SLOT_SOURCE);
                memset(&zcp_ring_slot(ring, idx)->frame, 0, sizeof(struct zcp_frame));
                *ret_idx = idx;
                return 0;
        }
        pthread_mutex_lock(&l->pop_lock);
        r = zcp_ring_acquire(ring, timeout_ns, ret_idx);
        pthread_mutex_unlock(&l->pop_lock);
        return r;
}

static int build_pipeline(struct zcp_source_ctx *ctx)
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
                /* files: the decoder may write into ring slots (lend_bind at start) */
                pad = gst_element_get_static_pad(ctx->appsink, "sink");
                lender_unref(ctx->lend);
                ctx->lend = lender_new(pad);
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

/* Copies a mapped frame plane by plane into `dst` (tight layout); returns bytes written. */
static size_t copy_planes(const GstVideoFrame *vf, enum zcp_pixfmt fmt, uint32_t w, uint32_t h, uint8_t *dst)
{
        struct plane pl[3];
        uint32_t n = plane_layout(fmt, w, h, pl);
        size_t off = 0;

        for (uint32_t p = 0; p < n; p++) {
                const uint8_t *src = GST_VIDEO_FRAME_PLANE_DATA(vf, p);
                size_t sstride = (size_t)GST_VIDEO_FRAME_PLANE_STRIDE(vf, p);

                if (sstride == pl[p].row_bytes) {
                        memcpy(dst + off, src, pl[p].row_bytes * pl[p].rows);
                        off += pl[p].row_bytes * pl[p].rows;
                        continue;
                }
                for (uint32_t y = 0; y < pl[p].rows; y++) {
                        memcpy(dst + off, src + (size_t)y * sstride, pl[p].row_bytes);
                        off += pl[p].row_bytes;
                }
        }
        return off;
}

/*
 * Reads new sample caps. The decoder's own format (recorded by on_conv_caps)
 * differs from them when videoconvert converts: said once per change.
 */
static int parse_caps(struct zcp_source_ctx *ctx, GstCaps *caps)
{
        GstVideoFormat dec;
        bool was = ctx->converted;

        gst_caps_replace(&ctx->caps, caps);
        ctx->cur_fmt = ZCP_PIX_NONE;
        if (!caps || !gst_video_info_from_caps(&ctx->vinfo, caps))
                return -EINVAL;
        ctx->cur_fmt = pixfmt_from_gst(GST_VIDEO_INFO_FORMAT(&ctx->vinfo));
        dec = (GstVideoFormat)atomic_load(&ctx->dec_format);
        ctx->converted = dec != GST_VIDEO_FORMAT_UNKNOWN && dec != GST_VIDEO_INFO_FORMAT(&ctx->vinfo);
        if (ctx->converted && !was)
                zcp_info("%s %s: the decoder delivers %s, which convert does not take: converted to %s by videoconvert (each frame counted in conversions)",
                         ctx->kind, ctx->path, gst_video_format_to_string(dec),
                         gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&ctx->vinfo)));
        return ctx->cur_fmt == ZCP_PIX_NONE ? -EINVAL : 0;
}

/*
 * Waits for the pipeline to preroll (ASYNC_DONE) or fail, at most
 * `timeout_ns`. decodebin drops an error an element posts while it is still
 * setting that element up (a demuxer that finds no index at once, in pull
 * mode): then every streaming thread has stopped and nothing will ever come,
 * so a pipeline with no running task for IDLE_GIVE_UP_NS fails too, instead
 * of waiting for the timeout. zcp_source_cancel_all() ends it (-ECANCELED).
 */
static int preroll(struct zcp_source_ctx *ctx, uint64_t timeout_ns)
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
                                zcp_err("%s %s: %s: decoding stopped before the first frame, without an error from GStreamer (a truncated or damaged file?)",
                                        ctx->kind, ctx->path,
                                        atomic_load(&ctx->linked) ? "cannot decode" : "no decodable video stream");
                                return -EINVAL;
                        }
                        continue;
                }
                if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
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

static void clear(struct zcp_source_ctx *ctx)
{
        pipeline_free(ctx);
        if (ctx->abandoned) {
                /* a pipeline left behind may still count frames into ctx: it stays, on purpose */
                zcp_warn("%s %s: %u old connection(s) never stopped: their memory is kept", ctx->kind, ctx->path,
                         ctx->abandoned);
                return;
        }
        if (ctx->lend) {
                /* stop() unbound it; a ring still bound is not ours to touch any more */
                if (ctx->lend->ring)
                        zcp_err("%s %s: closed with ring slots still lent to GStreamer", ctx->kind, ctx->path);
                lender_unref(ctx->lend);
                ctx->lend = NULL;
        }
        if (ctx->caps)
                gst_caps_unref(ctx->caps);
        if (ctx->allowed)
                gst_caps_unref(ctx->allowed);
        g_free(ctx->uri);
        if (ctx->fifo_fd >= 0)
                close(ctx->fifo_fd);
        free(ctx);
}

static void set_state(struct zcp_source_ctx *ctx, enum zcp_source_state st)
{
        ctx->state = st;
        atomic_store(&ctx->stats->source_state, st);
}

static int gst_open(const struct zcp_stream_config *cfg, struct zcp_stream_stats *stats, bool network,
                    struct zcp_source_ctx **ret_ctx, struct zcp_source_info *ret_info)
{
        const struct zcp_source_config *sc = &cfg->source;
        const char *kind = network ? "network" : "file";
        struct zcp_source_ctx *ctx = NULL;
        GstPad *pad = NULL;
        GstCaps *caps = NULL;
        GError *err = NULL;
        uint32_t w, h;
        bool fifo = false;
        int r;

        if (sc->path[0] == '\0') {
                zcp_err("%s source: no path configured", kind);
                return ZCP_ERR_CONFIG;
        }
        pthread_once(&gst_once, gst_init_once);
        if (gst_init_result < 0)
                return gst_init_result;

        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
                return -ENOMEM;
        ctx->kind = kind;
        ctx->fifo_fd = -1;
        ctx->network = network;
        ctx->cfg = *sc;
        snprintf(ctx->path, sizeof(ctx->path), "%s", sc->path);
        ctx->loop = !network && sc->loop;
        ctx->sync = !network && sc->pace == ZCP_PACE_REALTIME;
        ctx->want_width = sc->width;
        ctx->want_height = sc->height;
        ctx->stats = stats;
        /* auto: the CPUs shared among the streams that decode with GStreamer, at least one each */
        ctx->dec_threads = sc->decoder_threads ? sc->decoder_threads
                                               : MAX(1u, zcp_workers_cpus() / MAX(1u, sc->gst_streams));
        atomic_init(&ctx->threads_said, false);
        atomic_init(&ctx->linked, false);
        atomic_init(&ctx->have_decoder, false);
        atomic_init(&ctx->demuxed, 0);
        atomic_init(&ctx->decoded_in, 0);
        atomic_init(&ctx->have_demuxer, false);
        atomic_init(&ctx->dec_format, GST_VIDEO_FORMAT_UNKNOWN);
        ctx->allowed = allowed_caps_new();

        if (strstr(sc->path, "://")) {
                ctx->uri = g_strdup(sc->path);
        } else if (network) {
                zcp_err("network %s: not a URL (rtsp://, udp://, http://...)", ctx->path);
                r = ZCP_ERR_CONFIG;
                goto fail;
        } else {
                r = check_local_file(sc->path, &fifo);
                if (r < 0)
                        goto fail;
                ctx->uri = gst_filename_to_uri(sc->path, &err);
                if (!ctx->uri) {
                        zcp_err("file %s: not a usable path: %s", ctx->path, err ? err->message : "?");
                        g_clear_error(&err);
                        r = -EINVAL;
                        goto fail;
                }
        }
        if (!network && g_str_has_prefix(ctx->uri, "file:") && strstr(sc->path, "://")) {
                /* file:///a/fifo takes the same checks as the plain path */
                gchar *local = g_filename_from_uri(ctx->uri, NULL, NULL);

                r = local ? check_local_file(local, &fifo) : 0;
                if (r == 0 && local)
                        snprintf(ctx->path, sizeof(ctx->path), "%s", local);
                g_free(local);
                if (r < 0)
                        goto fail;
        }
        if (fifo) {
                r = open_fifo(ctx, PREROLL_TIMEOUT_NS);
                if (r < 0)
                        goto fail;
        }

        r = build_pipeline(ctx);
        if (r < 0)
                goto fail;
        set_state(ctx, ZCP_SOURCE_OPENING);
        r = preroll(ctx, network ? (uint64_t)sc->connect_timeout_ms * ZCP_NSEC_PER_MSEC : PREROLL_TIMEOUT_NS);
        if (r < 0)
                goto fail;

        pad = gst_element_get_static_pad(ctx->appsink, "sink");
        caps = gst_pad_get_current_caps(pad);
        gst_object_unref(pad);
        if (!caps) {
                zcp_err("%s %s: no decodable video frame", ctx->kind, ctx->path);
                r = -EINVAL;
                goto fail;
        }
        r = parse_caps(ctx, caps);
        gst_caps_unref(caps);
        if (r < 0) {
                gchar *s = gst_caps_to_string(ctx->caps);
                zcp_err("%s %s: unusable decoded caps %s", ctx->kind, ctx->path, s);
                g_free(s);
                goto fail;
        }

        w = (uint32_t)GST_VIDEO_INFO_WIDTH(&ctx->vinfo);
        h = (uint32_t)GST_VIDEO_INFO_HEIGHT(&ctx->vinfo);
        if ((ctx->want_width && ctx->want_width != w) || (ctx->want_height && ctx->want_height != h)) {
                zcp_err("%s %s: video is %ux%u but the config asks for %ux%u (leave width/height out to take the stream's)",
                        ctx->kind, ctx->path, w, h, ctx->want_width, ctx->want_height);
                r = ZCP_ERR_CONFIG;
                goto fail;
        }
        if (w == 0 || h == 0 || (w & 1) || (h & 1)) {
                zcp_err("%s %s: video is %ux%u; width and height must be even and non-zero", ctx->kind, ctx->path, w, h);
                r = -EINVAL;
                goto fail;
        }

        ctx->info.width = w;
        ctx->info.height = h;
        ctx->info.fmt = ctx->cur_fmt;
        ctx->info.stride = zcp_pixfmt_min_stride(ctx->cur_fmt, w);
        ctx->info.frame_bytes = zcp_pixfmt_frame_size(ctx->cur_fmt, w, h);
        ctx->info.fps_num = GST_VIDEO_INFO_FPS_D(&ctx->vinfo) > 0 ? (uint32_t)GST_VIDEO_INFO_FPS_N(&ctx->vinfo) : 0;
        ctx->info.fps_den = ctx->info.fps_num ? (uint32_t)GST_VIDEO_INFO_FPS_D(&ctx->vinfo) : 1;
        ctx->info.path = ZCP_PATH_COPY;
        ctx->info.live = ctx->info.live || network;
        if (ctx->info.frame_bytes == 0) {
                zcp_err("%s %s: no frame size for %s %ux%u", ctx->kind, ctx->path, zcp_pixfmt_name(ctx->cur_fmt), w, h);
                r = -EINVAL;
                goto fail;
        }

        zcp_info("%s %s: %ux%u %s (%s), %u/%u fps (caps), %s%s%s", ctx->kind, ctx->path, w, h,
                 zcp_pixfmt_name(ctx->cur_fmt), gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&ctx->vinfo)),
                 ctx->info.fps_num, ctx->info.fps_den,
                 network ? "live" : ctx->sync ? "pace realtime" : "pace fast", ctx->loop ? ", loop" : "",
                 ctx->converted ? ", through videoconvert" : "");
        *ret_info = ctx->info;
        *ret_ctx = ctx;
        return 0;
fail:
        clear(ctx);
        return r;
}

static int file_open(const struct zcp_stream_config *cfg, struct zcp_stream_stats *stats,
                     struct zcp_source_ctx **ret_ctx, struct zcp_source_info *ret_info)
{
        return gst_open(cfg, stats, false, ret_ctx, ret_info);
}

/* Drains the bus: decoder warnings are counted; an ERROR (or, when `eos_fails`, EOS) is -EIO. */
static int check_bus(struct zcp_source_ctx *ctx, bool eos_fails)
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

/*
 * End of one pass through a file: what the container holds against what
 * reached the ring. Expected = the compressed frames the decoder was given
 * (frames it could not decode, e.g. before the first keyframe, included)
 * plus the frames the container's duration still covers after the last
 * one (a recording cut short), at the measured frame duration.
 */
static void account_pass(struct zcp_source_ctx *ctx)
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
static void new_pass(struct zcp_source_ctx *ctx)
{
        if (ctx->have_last)
                ctx->loop_base_ns += ctx->last_raw_pts + (ctx->frame_ns ? ctx->frame_ns : 1) - ctx->first_raw_pts;
        ctx->have_last = false;
        ctx->passes++;
}

static int rewind_to_start(struct zcp_source_ctx *ctx)
{
        account_pass(ctx);
        if (!gst_element_seek_simple(ctx->pipeline, GST_FORMAT_TIME,
                                     GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_KEY_UNIT, 0)) {
                zcp_err("file %s: loop: seeking back to the start failed", ctx->path);
                return -EIO;
        }
        new_pass(ctx);
        ctx->rewound = true;
        zcp_debug("file %s: loop, pass %llu", ctx->path, (unsigned long long)ctx->passes + 1);
        return 0;
}

static int play(struct zcp_source_ctx *ctx)
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

static int file_start(struct zcp_source_ctx *ctx, struct zcp_ring *ring)
{
        int r;

        if (ctx->stopped) {
                new_pass(ctx);
                ctx->pass_delivered = 0;
                ctx->pass_repeats = 0;
                ctx->stopped = false;
        }
        lend_bind(ctx, ring);
        r = play(ctx);
        if (r < 0)
                return r;
        set_state(ctx, ZCP_SOURCE_UP);
        return 0;
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
static uint64_t track_pts(struct zcp_source_ctx *ctx, GstBuffer *buf, bool *ret_repeat)
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

/* Network: when the frame's packets arrived (monotonic ns), else now. */
static uint64_t arrival_ns(struct zcp_source_ctx *ctx, GstSample *sample, uint64_t now)
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
static uint64_t sender_ns(GstBuffer *buf)
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

/*
 * Fills slot `idx` from the pending sample and submits it (or submits it
 * dropped). direct: the sample's memory is that slot (lent_slot): no copy.
 */
static void deliver(struct zcp_source_ctx *ctx, struct zcp_ring *ring, uint32_t idx, bool direct)
{
        struct zcp_slot *slot = zcp_ring_slot(ring, idx);
        struct zcp_frame *f = &slot->frame;
        GstBuffer *buf = gst_sample_get_buffer(ctx->pending);
        GstCaps *caps = gst_sample_get_caps(ctx->pending);
        GstVideoFrame vf;
        uint32_t w, h;
        size_t bytes;
        bool repeat = false;

        if (caps && caps != ctx->caps && !gst_caps_is_equal(caps, ctx->caps))
                parse_caps(ctx, caps);
        w = ctx->cur_fmt ? (uint32_t)GST_VIDEO_INFO_WIDTH(&ctx->vinfo) : 0;
        h = ctx->cur_fmt ? (uint32_t)GST_VIDEO_INFO_HEIGHT(&ctx->vinfo) : 0;
        bytes = ctx->cur_fmt ? zcp_pixfmt_frame_size(ctx->cur_fmt, w, h) : 0;

        f->seq = ctx->seq++;
        f->width = w;
        f->height = h;
        f->fmt = ctx->cur_fmt;
        f->stride = ctx->cur_fmt ? zcp_pixfmt_min_stride(ctx->cur_fmt, w) : 0;
        f->bytes = bytes;
        f->pts_ns = buf ? track_pts(ctx, buf, &repeat) : 0;
        f->sender_ns = buf && ctx->network ? sender_ns(buf) : 0;
        f->flags = repeat ? ZCP_FRAME_PTS_REPEAT : 0;
        ctx->pass_delivered++;
        atomic_fetch_add_explicit(&ctx->stats->captured, 1, memory_order_relaxed);

        if (!buf || bytes == 0 || w != ctx->info.width || h != ctx->info.height || bytes > slot->cap) {
                f->bytes = 0;
                f->t[ZCP_TS_CAPTURE] = zcp_now_ns();
                if (!ctx->geometry_warned && w && h && (w != ctx->info.width || h != ctx->info.height)) {
                        /* the ring cannot be re-allocated from here yet: frames of the new size are dropped */
                        zcp_warn("%s %s: the frame size changed from %ux%u to %ux%u at frame %llu: the ring holds %ux%u, these frames are dropped as oversize",
                                 ctx->kind, ctx->path, ctx->info.width, ctx->info.height, w, h,
                                 (unsigned long long)f->seq, ctx->info.width, ctx->info.height);
                        ctx->geometry_warned = true;
                }
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, LOG_INTERVAL_NS,
                                    "%s %s: frame %llu is %ux%u %s (%zu bytes), the ring holds %ux%u (%zu bytes a slot): dropped",
                                    ctx->kind, ctx->path, (unsigned long long)f->seq, w, h,
                                    zcp_pixfmt_name(ctx->cur_fmt), bytes, ctx->info.width, ctx->info.height, slot->cap);
                zcp_ring_submit_dropped(ring, idx, ZCP_DROP_OVERSIZE);
                return;
        }
        if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_CORRUPTED)) {
                ctx->corrupt_frames++;
                f->t[ZCP_TS_CAPTURE] = zcp_now_ns();
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_INTERVAL_NS,
                                    "%s %s: frame %llu decoded with errors: dropped as corrupt", ctx->kind,
                                    ctx->path, (unsigned long long)f->seq);
                zcp_ring_submit_dropped(ring, idx, ZCP_DROP_CORRUPT);
                return;
        }
        if (direct) {
                atomic_fetch_add_explicit(&ctx->stats->slot_direct, 1, memory_order_relaxed);
                if (atomic_load_explicit(&ctx->stats->capture_path, memory_order_relaxed) != ZCP_PATH_DIRECT)
                        atomic_store(&ctx->stats->capture_path, ZCP_PATH_DIRECT);
                goto done;
        }
        if (!gst_video_frame_map(&vf, &ctx->vinfo, buf, GST_MAP_READ)) {
                f->t[ZCP_TS_CAPTURE] = zcp_now_ns();
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, LOG_INTERVAL_NS,
                                    "%s %s: frame %llu: buffer of %zu bytes does not hold a %ux%u %s frame: dropped",
                                    ctx->kind, ctx->path, (unsigned long long)f->seq, gst_buffer_get_size(buf), w, h,
                                    zcp_pixfmt_name(ctx->cur_fmt));
                zcp_ring_submit_dropped(ring, idx, ZCP_DROP_SHORT);
                return;
        }
        copy_planes(&vf, ctx->cur_fmt, w, h, slot->data);
        gst_video_frame_unmap(&vf);
        atomic_fetch_add_explicit(&ctx->stats->copies, 1, memory_order_relaxed);
        if (atomic_load_explicit(&ctx->stats->capture_path, memory_order_relaxed) != ZCP_PATH_COPY)
                atomic_store(&ctx->stats->capture_path, ZCP_PATH_COPY);
done:
        if (ctx->converted)
                atomic_fetch_add_explicit(&ctx->stats->conversions, 1, memory_order_relaxed);
        f->t[ZCP_TS_CAPTURE] = zcp_now_ns();
        if (ctx->network)
                f->t[ZCP_TS_CAPTURE] = arrival_ns(ctx, ctx->pending, f->t[ZCP_TS_CAPTURE]);
        zcp_ring_submit(ring, idx);
}

/*
 * A file that gives neither frames nor EOS while its position stands still
 * for STALL_NS has ended without saying so (gst-libav's GIF demuxer spins at
 * the end of the file forever): its end, with a warning. A realtime pause
 * in the file moves the position, a slow frame gives a frame: neither is it.
 */
static bool stalled(struct zcp_source_ctx *ctx)
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

/* The pending sample has another geometry than the ring's, and the caller re-allocates for it. */
static bool wants_reconfigure(struct zcp_source_ctx *ctx)
{
        GstCaps *caps = gst_sample_get_caps(ctx->pending);

        if (!ctx->reconfigure_ok)
                return false;
        if (caps && caps != ctx->caps && !gst_caps_is_equal(caps, ctx->caps))
                parse_caps(ctx, caps);
        return ctx->cur_fmt != ZCP_PIX_NONE &&
               ((uint32_t)GST_VIDEO_INFO_WIDTH(&ctx->vinfo) != ctx->info.width ||
                (uint32_t)GST_VIDEO_INFO_HEIGHT(&ctx->vinfo) != ctx->info.height || ctx->cur_fmt != ctx->info.fmt);
}

static int gst_reconfigure(struct zcp_source_ctx *ctx, struct zcp_source_info *ret_info)
{
        uint32_t w, h;
        size_t bytes;

        if (!ret_info) {
                ctx->reconfigure_ok = true;
                return 0;
        }
        if (!ctx->pending || !wants_reconfigure(ctx))
                return -EINVAL;
        w = (uint32_t)GST_VIDEO_INFO_WIDTH(&ctx->vinfo);
        h = (uint32_t)GST_VIDEO_INFO_HEIGHT(&ctx->vinfo);
        bytes = zcp_pixfmt_frame_size(ctx->cur_fmt, w, h);
        if (w == 0 || h == 0 || (w & 1) || (h & 1) || bytes == 0) {
                zcp_err("%s %s: the video is now %ux%u: width and height must be even and non-zero", ctx->kind,
                        ctx->path, w, h);
                return -EINVAL;
        }
        /* the old ring's slots go back to it (its threads are gone); start() lends the new one's */
        lend_unbind(ctx);
        zcp_info("%s %s: frame %llu: the geometry changes from %ux%u %s to %ux%u %s", ctx->kind, ctx->path,
                 (unsigned long long)ctx->seq, ctx->info.width, ctx->info.height, zcp_pixfmt_name(ctx->info.fmt), w, h,
                 zcp_pixfmt_name(ctx->cur_fmt));
        ctx->info.width = w;
        ctx->info.height = h;
        ctx->info.fmt = ctx->cur_fmt;
        ctx->info.stride = zcp_pixfmt_min_stride(ctx->cur_fmt, w);
        ctx->info.frame_bytes = bytes;
        ctx->geometry_warned = false;
        *ret_info = ctx->info;
        return 0;
}

static int file_next(struct zcp_source_ctx *ctx, struct zcp_ring *ring)
{
        uint64_t t0 = zcp_now_ns(), spent;
        uint32_t idx;
        bool direct;
        int r;

        if (!ctx->pending) {
                r = check_bus(ctx, false);
                if (r < 0)
                        return r;
                ctx->pending = gst_app_sink_try_pull_sample(GST_APP_SINK(ctx->appsink), NEXT_TIMEOUT_NS);
                if (!ctx->pending) {
                        /* an ERROR is often followed by EOS: look at the bus first */
                        r = check_bus(ctx, false);
                        if (r < 0)
                                return r;
                        /* after a rewind the appsink may still say EOS until the flush reaches it */
                        if ((ctx->rewound || !gst_app_sink_is_eos(GST_APP_SINK(ctx->appsink))) && !stalled(ctx))
                                return ZCP_SOURCE_AGAIN;
                        if (!ctx->loop) {
                                account_pass(ctx);
                                set_state(ctx, ZCP_SOURCE_ENDED);
                                return ZCP_SOURCE_EOS;
                        }
                        r = rewind_to_start(ctx);
                        return r < 0 ? r : ZCP_SOURCE_AGAIN;
                }
        }

        if (wants_reconfigure(ctx))
                return ZCP_SOURCE_RECONFIGURE;   /* the sample stays pending for the new ring */
        direct = lent_slot(ctx, ring, &idx);
        if (!direct) {
                spent = zcp_now_ns() - t0;
                r = take_slot(ctx, ring, spent < NEXT_TIMEOUT_NS ? (int64_t)(NEXT_TIMEOUT_NS - spent) : 0, &idx);
                if (r == -EAGAIN)
                        return ZCP_SOURCE_AGAIN;   /* back-pressure: keep the sample, never drop */
                if (r < 0)
                        return r;                  /* -EPIPE: the ring was closed, the stream is stopping */
        }
        deliver(ctx, ring, idx, direct);
        gst_sample_unref(ctx->pending);
        ctx->pending = NULL;
        ctx->progress_ns = 0;
        ctx->rewound = false;
        return ZCP_SOURCE_FRAME;
}

static void file_stop(struct zcp_source_ctx *ctx, struct zcp_ring *ring)
{
        (void)ring;
        if (!ctx)
                return;
        if (ctx->lend) {
                /* a decoder waiting for a slot gives up at once: the state change below waits for it */
                pthread_mutex_lock(&ctx->lend->lock);
                ctx->lend->closing = true;
                pthread_cond_broadcast(&ctx->lend->returned);
                pthread_mutex_unlock(&ctx->lend->lock);
        }
        gst_element_set_state(ctx->pipeline, GST_STATE_NULL);
        /* in NULL uridecodebin removed its pads: a restart links anew */
        atomic_store(&ctx->linked, false);
        if (ctx->pending) {
                gst_sample_unref(ctx->pending);
                ctx->pending = NULL;
        }
        lend_unbind(ctx);
        if (ctx->direct_refused)
                zcp_debug("%s %s: %llu frames in slot memory were copied all the same (held elsewhere too)", ctx->kind,
                          ctx->path, (unsigned long long)ctx->direct_refused);
        gst_bus_set_flushing(ctx->bus, TRUE);   /* drops what is left */
        gst_bus_set_flushing(ctx->bus, FALSE);
        atomic_store(&ctx->demuxed, 0);
        atomic_store(&ctx->decoded_in, 0);
        ctx->stopped = true;
}

static void file_close(struct zcp_source_ctx *ctx)
{
        if (!ctx)
                return;
        clear(ctx);
}

const struct zcp_source_ops zcp_source_file = {
        .name = "file",
        .open = file_open,
        .start = file_start,
        .next = file_next,
        .stop = file_stop,
        .close = file_close,
        .reconfigure = gst_reconfigure,
};

/* ---- network: reconnect with back-off ------------------------------------ */

static int network_open(const struct zcp_stream_config *cfg, struct zcp_stream_stats *stats,
                        struct zcp_source_ctx **ret_ctx, struct zcp_source_info *ret_info)
{
        return gst_open(cfg, stats, true, ret_ctx, ret_info);
}

static int network_start(struct zcp_source_ctx *ctx, struct zcp_ring *ring)
{
        int r;

        (void)ring;
        if (!ctx->pipeline) {
                /* stopped before: connect again, through next() */
                ctx->retry_at_ns = 0;
                set_state(ctx, ZCP_SOURCE_BACKOFF);
                return 0;
        }
        r = play(ctx);
        if (r < 0)
                return r;
        ctx->last_frame_ns = zcp_now_ns();
        ctx->delivered_since_up = false;
        set_state(ctx, ZCP_SOURCE_UP);
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

        pipeline_free(ctx);
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
        set_state(ctx, ZCP_SOURCE_BACKOFF);
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
        set_state(ctx, ZCP_SOURCE_OPENING);
        ctx->opening_since_ns = now;
        r = build_pipeline(ctx);
        if (r == 0)
                r = play(ctx);
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
        set_state(ctx, ZCP_SOURCE_UP);
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
        r = check_bus(ctx, true);
        if (r < 0)
                return fault(ctx, r, ctx->state == ZCP_SOURCE_UP ? "the stream failed" : "cannot connect");
        sample = gst_app_sink_try_pull_sample(GST_APP_SINK(ctx->appsink), NEXT_TIMEOUT_NS);
        now = zcp_now_ns();
        if (!sample) {
                r = check_bus(ctx, true);
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
        if (wants_reconfigure(ctx))
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
        deliver(ctx, ring, idx, false);
        gst_sample_unref(ctx->pending);
        ctx->pending = NULL;
        return ZCP_SOURCE_FRAME;
}

static void network_stop(struct zcp_source_ctx *ctx, struct zcp_ring *ring)
{
        (void)ring;
        if (!ctx)
                return;
        pipeline_free(ctx);
        set_state(ctx, ZCP_SOURCE_DOWN);
}

const struct zcp_source_ops zcp_source_network = {
        .name = "network",
        .open = network_open,
        .start = network_start,
        .next = network_next,
        .stop = network_stop,
        .close = file_close,
        .reconfigure = gst_reconfigure,
};
