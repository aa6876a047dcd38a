/* SPDX-License-Identifier: MIT */
/*
 * The `file` source: a local file or a URI decoded by GStreamer.
 *
 *   uridecodebin (caps video/x-raw(ANY), other streams not exposed)
 *     -> [videoconvert, only when the decoder offers none of our formats]
 *     -> appsink (caps: the raw formats convert takes; sync = pace realtime)
 *
 * open() (main thread) checks a local path (missing, directory, unreadable,
 * empty), builds the pipeline and prerolls it (PAUSED, at most 10 s) to learn
 * the negotiated geometry, format and rate; anything GStreamer cannot decode
 * fails there with the file name and GStreamer's own message. start() sets
 * PLAYING. next() (source thread) pulls one decoded sample (100 ms timeout),
 * takes a free slot (back-pressure: a file never drops for lack of a slot),
 * copies the planes into the slot in the tight layout of pixfmt.h (counted in
 * stats->copies; capture path "copy": no buffer pool is offered to the
 * decoder) and submits it.
 *
 * Faults:
 * - Every GstVideoDecoder gets max-errors = -1, so undecodable input costs
 *   frames, not the stream (the decoder then reports nothing on the bus;
 *   QoS drops and warnings it posts are counted and logged at the end).
 *   A bus ERROR while playing (read error, demuxer gives up) ends the
 *   source with -EIO and a log line naming the file.
 * - GStreamer does not tell about frames lost to corruption: they are found
 *   from the PTS. With d the frame duration (from the caps' rate, else the
 *   buffer duration, else the median of the first deltas), a PTS step above
 *   1.5 d adds round(step / d) - 1 to stats->decode_gaps.
 * - A buffer the decoder flagged GST_BUFFER_FLAG_CORRUPTED (concealed,
 *   known-bad pixels) takes a seq and a slot but travels as a drop with
 *   ZCP_DROP_CORRUPT: it is part of the timeline (not a gap), yet its pixels
 *   are not handed to analysis, where they would read as motion.
 * - A sample whose caps changed to another geometry, or that needs more bytes
 *   than a slot holds, is dropped as ZCP_DROP_OVERSIZE; one the frame map
 *   refuses (buffer shorter than its caps) as ZCP_DROP_SHORT. Nothing is
 *   ever written past the slot.
 *
 * EOS: with loop, a flushing seek to 0 and the stream goes on; seq and pts_ns
 * keep increasing (pts_ns = media time + the length of the passes before).
 * Without loop, next() returns ZCP_SOURCE_EOS (no slot is used for it).
 *
 * Opening never hangs: errors, 10 s without a first frame, or 1 s with no
 * streaming thread left running (decodebin loses errors that elements post
 * while it sets them up, e.g. a demuxer that finds no index) end it.
 * A URI whose source is live (NO_PREROLL: rtsp://...) is started while
 * opening to learn its caps and reported as live.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include "capture/source.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/metrics.h"

#define PREROLL_TIMEOUT_NS   (10 * ZCP_NSEC_PER_SEC)
#define IDLE_POLL_NS         (50 * ZCP_NSEC_PER_MSEC)
#define IDLE_GIVE_UP_NS      (1 * ZCP_NSEC_PER_SEC)
#define NEXT_TIMEOUT_NS      (100 * ZCP_NSEC_PER_MSEC)
#define LOG_INTERVAL_NS      (5 * ZCP_NSEC_PER_SEC)
#define APPSINK_MAX_BUFFERS  2
#define DELTA_SAMPLES        5

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
        char path[ZCP_PATH_MAX];          /* as configured, for messages */
        gchar *uri;
        bool loop;
        bool sync;
        uint32_t want_width, want_height;
        struct zcp_stream_stats *stats;

        GstElement *pipeline;
        GstElement *appsink;              /* our own ref */
        GstBus *bus;
        GstCaps *allowed;                 /* appsink caps */
        atomic_bool linked;               /* a video pad reached the appsink */
        atomic_bool converting;           /* videoconvert was needed */
        GstElement *conv;                 /* that videoconvert, kept across restarts */
        bool stopped;                     /* stop() ran: start() begins a new pass */

        struct zcp_source_info info;
        GstCaps *caps;                    /* caps of the samples being copied (ref) */
        GstVideoInfo vinfo;               /* parsed `caps` */
        enum zcp_pixfmt cur_fmt;          /* ZCP_PIX_NONE: `caps` unusable */

        GstSample *pending;               /* pulled, waiting for a free slot */
        uint64_t seq;

        /* gap detection and loop timeline (raw = the buffer's own PTS) */
        uint64_t frame_ns;                /* d; 0 = not known yet */
        uint64_t deltas[DELTA_SAMPLES];
        uint32_t n_deltas;
        bool have_last;
        uint64_t last_raw_pts;
        bool have_first;
        uint64_t first_raw_pts;
        uint64_t loop_base_ns;
        uint64_t passes;

        uint64_t decoder_warnings;        /* WARNING messages from decoders */
        uint64_t decoder_drops;           /* frames decoders reported dropped (QoS messages) */
        uint64_t corrupt_frames;
};

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

/* Logs an ERROR/WARNING message with the file name; returns the GError's -errno. */
static int log_gst_message(struct zcp_source_ctx *ctx, GstMessage *msg, const char *what)
{
        GError *err = NULL;
        gchar *dbg = NULL;
        int r;

        if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR)
                gst_message_parse_error(msg, &err, &dbg);
        else
                gst_message_parse_warning(msg, &err, &dbg);
        zcp_err("file %s: %s: %s (%s: %s)", ctx->path, what, err ? err->message : "unknown error",
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

/* Decoders keep going on corrupt input instead of failing the stream. */
static void on_deep_element_added(GstBin *bin, GstBin *sub_bin, GstElement *element, gpointer user)
{
        GParamSpec *ps;

        if (!GST_IS_VIDEO_DECODER(element))
                return;
        ps = g_object_class_find_property(G_OBJECT_GET_CLASS(element), "max-errors");
        if (!ps || ps->value_type != G_TYPE_INT)
                return;
        g_object_set(element, "max-errors", -1, NULL);
        zcp_debug("file %s: decoder %s, max-errors -1", ((struct zcp_source_ctx *)user)->path,
                  GST_OBJECT_NAME(element));
}

static void on_pad_added(GstElement *dec, GstPad *pad, gpointer user)
{
        struct zcp_source_ctx *ctx = user;
        GstPad *sinkpad = NULL;
        GstCaps *caps;
        GstElement *conv;
        bool video, direct;

        caps = gst_pad_get_current_caps(pad);
        if (!caps)
                caps = gst_pad_query_caps(pad, NULL);
        video = caps && gst_caps_get_size(caps) > 0 &&
                gst_structure_has_name(gst_caps_get_structure(caps, 0), "video/x-raw");
        if (caps)
                gst_caps_unref(caps);
        if (!video || atomic_load(&ctx->linked))
                return;   /* not exposed to the appsink; the demuxer tolerates unlinked pads */

        caps = gst_pad_query_caps(pad, NULL);
        direct = caps && gst_caps_can_intersect(caps, ctx->allowed);
        if (!direct) {
                gchar *s = caps ? gst_caps_to_string(caps) : NULL;
                GstCaps *i420 = gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "I420", NULL);

                zcp_info("file %s: the decoder offers none of the formats convert takes (%s): adding videoconvert to I420",
                         ctx->path, s ? s : "no caps");
                g_free(s);
                g_object_set(ctx->appsink, "caps", i420, NULL);
                gst_caps_unref(i420);
                if (!ctx->conv) {
                        conv = gst_element_factory_make("videoconvert", NULL);
                        if (!conv) {
                                GST_ELEMENT_ERROR(dec, CORE, MISSING_PLUGIN, ("videoconvert is not installed"), (NULL));
                                goto out;
                        }
                        gst_bin_add(GST_BIN(ctx->pipeline), conv);
                        if (!gst_element_link(conv, ctx->appsink)) {
                                GST_ELEMENT_ERROR(dec, CORE, NEGOTIATION, ("cannot link videoconvert to appsink"), (NULL));
                                goto out;
                        }
                        ctx->conv = conv;
                }
                gst_element_sync_state_with_parent(ctx->conv);
                sinkpad = gst_element_get_static_pad(ctx->conv, "sink");
                atomic_store(&ctx->converting, true);
        } else {
                sinkpad = gst_element_get_static_pad(ctx->appsink, "sink");
        }
        if (gst_pad_link(pad, sinkpad) != GST_PAD_LINK_OK) {
                GST_ELEMENT_ERROR(dec, CORE, NEGOTIATION, ("cannot link the decoded video to the appsink"), (NULL));
                goto out;
        }
        atomic_store(&ctx->linked, true);
out:
        if (sinkpad)
                gst_object_unref(sinkpad);
        if (caps)
                gst_caps_unref(caps);
}

static void on_no_more_pads(GstElement *dec, gpointer user)
{
        struct zcp_source_ctx *ctx = user;

        if (!atomic_load(&ctx->linked))
                GST_ELEMENT_ERROR(dec, STREAM, WRONG_TYPE, ("no video stream found"), (NULL));
}

/* Local path checks, so that the common mistakes get errno-precise messages. */
static int check_local_file(const char *path)
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
        return 0;
}

static int build_pipeline(struct zcp_source_ctx *ctx)
{
        GstElement *dec = NULL;
        GstCaps *raw = NULL;

        ctx->pipeline = gst_pipeline_new("zcp-file");
        dec = gst_element_factory_make("uridecodebin", NULL);
        ctx->appsink = gst_element_factory_make("appsink", NULL);
        if (!ctx->pipeline || !dec || !ctx->appsink) {
                zcp_err("file %s: GStreamer elements missing (%s)", ctx->path,
                        !dec ? "uridecodebin, from gstreamer1.0-plugins-base" : "appsink");
                if (dec)
                        gst_object_unref(dec);
                return -ENOENT;
        }
        gst_object_ref_sink(ctx->appsink);   /* ours until close, beside the bin's */

        ctx->allowed = allowed_caps_new();
        /* "video/x-raw" alone makes decodebin refuse every decoder when other streams are not exposed */
        raw = gst_caps_from_string("video/x-raw(ANY)");
        g_object_set(dec, "uri", ctx->uri, "caps", raw, "expose-all-streams", FALSE, NULL);
        gst_caps_unref(raw);
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
        g_signal_connect(dec, "pad-added", G_CALLBACK(on_pad_added), ctx);
        g_signal_connect(dec, "no-more-pads", G_CALLBACK(on_no_more_pads), ctx);
        gst_bin_add_many(GST_BIN(ctx->pipeline), dec, ctx->appsink, NULL);
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
 * Waits for the pipeline to preroll (ASYNC_DONE) or fail. decodebin drops an
 * error an element posts while it is still setting that element up (a
 * demuxer that finds no index at once, in pull mode): then every streaming
 * thread has stopped and nothing will ever come, so a pipeline with no
 * running task for IDLE_GIVE_UP_NS fails too, instead of waiting for the
 * timeout.
 */
static int preroll(struct zcp_source_ctx *ctx)
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

        deadline = zcp_now_ns() + PREROLL_TIMEOUT_NS;
        for (;;) {
                uint64_t now = zcp_now_ns();
                GstMessage *msg;
                int r;

                if (now >= deadline) {
                        zcp_err("file %s: no video frame decoded within %llu s", ctx->path,
                                (unsigned long long)(PREROLL_TIMEOUT_NS / ZCP_NSEC_PER_SEC));
                        return -ETIMEDOUT;
                }
                msg = gst_bus_timed_pop_filtered(ctx->bus, MIN(deadline - now, IDLE_POLL_NS),
                                                 GST_MESSAGE_ASYNC_DONE | GST_MESSAGE_ERROR);
                if (!msg) {
                        now = zcp_now_ns();
                        if (pipeline_streaming(ctx->pipeline)) {
                                idle_since = 0;
                        } else if (!idle_since) {
                                idle_since = now;
                        } else if (now - idle_since >= IDLE_GIVE_UP_NS) {
                                zcp_err("file %s: %s: decoding stopped before the first frame, without an error from GStreamer (a truncated or damaged file?)",
                                        ctx->path, atomic_load(&ctx->linked) ? "cannot decode" : "no decodable video stream");
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
                if (GST_MESSAGE_SRC(msg) == GST_OBJECT(ctx->pipeline)) {
                        gst_message_unref(msg);
                        return 0;
                }
                gst_message_unref(msg);
        }
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

static int parse_caps(struct zcp_source_ctx *ctx, GstCaps *caps)
{
        gst_caps_replace(&ctx->caps, caps);
        ctx->cur_fmt = ZCP_PIX_NONE;
        if (!caps || !gst_video_info_from_caps(&ctx->vinfo, caps))
                return -EINVAL;
        ctx->cur_fmt = pixfmt_from_gst(GST_VIDEO_INFO_FORMAT(&ctx->vinfo));
        return ctx->cur_fmt == ZCP_PIX_NONE ? -EINVAL : 0;
}

static void clear(struct zcp_source_ctx *ctx)
{
        if (ctx->pipeline)
                gst_element_set_state(ctx->pipeline, GST_STATE_NULL);
        if (ctx->pending)
                gst_sample_unref(ctx->pending);
        if (ctx->caps)
                gst_caps_unref(ctx->caps);
        if (ctx->allowed)
                gst_caps_unref(ctx->allowed);
        if (ctx->bus)
                gst_object_unref(ctx->bus);
        if (ctx->appsink)
                gst_object_unref(ctx->appsink);
        if (ctx->pipeline)
                gst_object_unref(ctx->pipeline);
        g_free(ctx->uri);
        free(ctx);
}

static int file_open(const struct zcp_stream_config *cfg, struct zcp_stream_stats *stats,
                     struct zcp_source_ctx **ret_ctx, struct zcp_source_info *ret_info)
{
        const struct zcp_source_config *sc = &cfg->source;
        struct zcp_source_ctx *ctx = NULL;
        GstPad *pad = NULL;
        GstCaps *caps = NULL;
        GError *err = NULL;
        uint32_t w, h;
        int r;

        if (sc->path[0] == '\0') {
                zcp_err("file source: no path configured");
                return ZCP_ERR_CONFIG;
        }
        pthread_once(&gst_once, gst_init_once);
        if (gst_init_result < 0)
                return gst_init_result;

        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
                return -ENOMEM;
        snprintf(ctx->path, sizeof(ctx->path), "%s", sc->path);
        ctx->loop = sc->loop;
        ctx->sync = sc->pace == ZCP_PACE_REALTIME;
        ctx->want_width = sc->width;
        ctx->want_height = sc->height;
        ctx->stats = stats;
        atomic_init(&ctx->linked, false);
        atomic_init(&ctx->converting, false);

        if (strstr(sc->path, "://")) {
                ctx->uri = g_strdup(sc->path);
        } else {
                r = check_local_file(sc->path);
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

        r = build_pipeline(ctx);
        if (r < 0)
                goto fail;
        r = preroll(ctx);
        if (r < 0)
                goto fail;

        pad = gst_element_get_static_pad(ctx->appsink, "sink");
        caps = gst_pad_get_current_caps(pad);
        gst_object_unref(pad);
        if (!caps) {
                zcp_err("file %s: no decodable video frame", ctx->path);
                r = -EINVAL;
                goto fail;
        }
        r = parse_caps(ctx, caps);
        gst_caps_unref(caps);
        if (r < 0) {
                gchar *s = gst_caps_to_string(ctx->caps);
                zcp_err("file %s: unusable decoded caps %s", ctx->path, s);
                g_free(s);
                goto fail;
        }

        w = (uint32_t)GST_VIDEO_INFO_WIDTH(&ctx->vinfo);
        h = (uint32_t)GST_VIDEO_INFO_HEIGHT(&ctx->vinfo);
        if ((ctx->want_width && ctx->want_width != w) || (ctx->want_height && ctx->want_height != h)) {
                zcp_err("file %s: video is %ux%u but the config asks for %ux%u (leave width/height out to take the file's)",
                        ctx->path, w, h, ctx->want_width, ctx->want_height);
                r = ZCP_ERR_CONFIG;
                goto fail;
        }
        if (w == 0 || h == 0 || (w & 1) || (h & 1)) {
                zcp_err("file %s: video is %ux%u; width and height must be even and non-zero", ctx->path, w, h);
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
        if (ctx->info.fps_num)
                ctx->frame_ns = gst_util_uint64_scale(ZCP_NSEC_PER_SEC, ctx->info.fps_den, ctx->info.fps_num);
        if (ctx->info.frame_bytes == 0) {
                zcp_err("file %s: no frame size for %s %ux%u", ctx->path, zcp_pixfmt_name(ctx->cur_fmt), w, h);
                r = -EINVAL;
                goto fail;
        }

        zcp_info("file %s: %ux%u %s (%s), %u/%u fps, pace %s%s%s", ctx->path, w, h,
                 zcp_pixfmt_name(ctx->cur_fmt), gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&ctx->vinfo)),
                 ctx->info.fps_num, ctx->info.fps_den, ctx->sync ? "realtime" : "fast",
                 ctx->loop ? ", loop" : "", atomic_load(&ctx->converting) ? ", through videoconvert" : "");
        *ret_info = ctx->info;
        *ret_ctx = ctx;
        return 0;
fail:
        clear(ctx);
        return r;
}

/* Drains the bus: decoder warnings are counted, any ERROR is fatal (-EIO). */
static int check_bus(struct zcp_source_ctx *ctx)
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
                case GST_MESSAGE_WARNING:
                        if (from_video_decoder(msg))
                                ctx->decoder_warnings++;
                        {
                                GError *err = NULL;

                                gst_message_parse_warning(msg, &err, NULL);
                                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_INTERVAL_NS, "file %s: %s: %s",
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

/* The file plays again from its start: pts_ns continues after the last frame. */
static void new_pass(struct zcp_source_ctx *ctx)
{
        if (ctx->have_last)
                ctx->loop_base_ns += ctx->last_raw_pts + ctx->frame_ns - ctx->first_raw_pts;
        ctx->have_last = false;
        ctx->passes++;
}

static int rewind_to_start(struct zcp_source_ctx *ctx)
{
        if (!gst_element_seek_simple(ctx->pipeline, GST_FORMAT_TIME,
                                     GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_KEY_UNIT, 0)) {
                zcp_err("file %s: loop: seeking back to the start failed", ctx->path);
                return -EIO;
        }
        new_pass(ctx);
        zcp_debug("file %s: loop, pass %llu", ctx->path, (unsigned long long)ctx->passes + 1);
        return 0;
}

static int file_start(struct zcp_source_ctx *ctx, struct zcp_ring *ring)
{
        if (ctx->stopped) {
                new_pass(ctx);
                ctx->stopped = false;
        }
        if (gst_element_set_state(ctx->pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
                GstMessage *msg = gst_bus_pop_filtered(ctx->bus, GST_MESSAGE_ERROR);

                if (msg) {
                        log_gst_message(ctx, msg, "cannot play");
                        gst_message_unref(msg);
                } else {
                        zcp_err("file %s: cannot play", ctx->path);
                }
                return -EIO;
        }
        atomic_store(&ctx->stats->source_state, ZCP_SOURCE_UP);
        return 0;
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

/* Timeline bookkeeping for one sample: returns pts_ns, counts gaps. */
static uint64_t track_pts(struct zcp_source_ctx *ctx, GstBuffer *buf)
{
        GstClockTime pts = GST_BUFFER_PTS(buf);

        if (!GST_CLOCK_TIME_IS_VALID(pts)) {
                /* no timestamp: assume the next frame in line */
                pts = ctx->have_last ? ctx->last_raw_pts + ctx->frame_ns : (ctx->have_first ? ctx->first_raw_pts : 0);
        }
        if (!ctx->frame_ns && GST_CLOCK_TIME_IS_VALID(GST_BUFFER_DURATION(buf)) && GST_BUFFER_DURATION(buf) > 0)
                ctx->frame_ns = GST_BUFFER_DURATION(buf);
        if (!ctx->have_first) {
                ctx->first_raw_pts = pts;
                ctx->have_first = true;
        }
        if (ctx->have_last && pts > ctx->last_raw_pts) {
                uint64_t step = pts - ctx->last_raw_pts;

                if (!ctx->frame_ns) {
                        ctx->deltas[ctx->n_deltas++] = step;
                        if (ctx->n_deltas == DELTA_SAMPLES)
                                ctx->frame_ns = median(ctx->deltas, ctx->n_deltas);
                } else if (2 * step > 3 * ctx->frame_ns) {
                        uint64_t lost = (step + ctx->frame_ns / 2) / ctx->frame_ns - 1;

                        atomic_fetch_add_explicit(&ctx->stats->decode_gaps, lost, memory_order_relaxed);
                        ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_INTERVAL_NS,
                                            "file %s: %llu frame(s) missing before pts %.3f s (lost to corruption)",
                                            ctx->path, (unsigned long long)lost, (double)pts / 1e9);
                }
        }
        ctx->last_raw_pts = pts;
        ctx->have_last = true;
        return ctx->loop_base_ns + pts;
}

/* Fills slot `idx` from the pending sample and submits it (or submits it dropped). */
static void deliver(struct zcp_source_ctx *ctx, struct zcp_ring *ring, uint32_t idx)
{
        struct zcp_slot *slot = zcp_ring_slot(ring, idx);
        struct zcp_frame *f = &slot->frame;
        GstBuffer *buf = gst_sample_get_buffer(ctx->pending);
        GstCaps *caps = gst_sample_get_caps(ctx->pending);
        GstVideoFrame vf;
        uint32_t w, h;
        size_t bytes;

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
        f->pts_ns = buf ? track_pts(ctx, buf) : 0;
        atomic_fetch_add_explicit(&ctx->stats->captured, 1, memory_order_relaxed);

        if (!buf || bytes == 0 || w != ctx->info.width || h != ctx->info.height || bytes > slot->cap) {
                f->bytes = 0;
                f->t[ZCP_TS_CAPTURE] = zcp_now_ns();
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, LOG_INTERVAL_NS,
                                    "file %s: frame %llu is %ux%u %s (%zu bytes), the ring holds %ux%u (%zu bytes a slot): dropped",
                                    ctx->path, (unsigned long long)f->seq, w, h, zcp_pixfmt_name(ctx->cur_fmt),
                                    bytes, ctx->info.width, ctx->info.height, slot->cap);
                zcp_ring_submit_dropped(ring, idx, ZCP_DROP_OVERSIZE);
                return;
        }
        if (GST_BUFFER_FLAG_IS_SET(buf, GST_BUFFER_FLAG_CORRUPTED)) {
                ctx->corrupt_frames++;
                f->t[ZCP_TS_CAPTURE] = zcp_now_ns();
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_INTERVAL_NS,
                                    "file %s: frame %llu decoded with errors: dropped as corrupt",
                                    ctx->path, (unsigned long long)f->seq);
                zcp_ring_submit_dropped(ring, idx, ZCP_DROP_CORRUPT);
                return;
        }
        if (!gst_video_frame_map(&vf, &ctx->vinfo, buf, GST_MAP_READ)) {
                f->t[ZCP_TS_CAPTURE] = zcp_now_ns();
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, LOG_INTERVAL_NS,
                                    "file %s: frame %llu: buffer of %zu bytes does not hold a %ux%u %s frame: dropped",
                                    ctx->path, (unsigned long long)f->seq, gst_buffer_get_size(buf), w, h,
                                    zcp_pixfmt_name(ctx->cur_fmt));
                zcp_ring_submit_dropped(ring, idx, ZCP_DROP_SHORT);
                return;
        }
        copy_planes(&vf, ctx->cur_fmt, w, h, slot->data);
        gst_video_frame_unmap(&vf);
        atomic_fetch_add_explicit(&ctx->stats->copies, 1, memory_order_relaxed);
        f->t[ZCP_TS_CAPTURE] = zcp_now_ns();
        zcp_ring_submit(ring, idx);
}

static int file_next(struct zcp_source_ctx *ctx, struct zcp_ring *ring)
{
        uint64_t t0 = zcp_now_ns(), spent;
        uint32_t idx;
        int r;

        if (!ctx->pending) {
                r = check_bus(ctx);
                if (r < 0)
                        return r;
                ctx->pending = gst_app_sink_try_pull_sample(GST_APP_SINK(ctx->appsink), NEXT_TIMEOUT_NS);
                if (!ctx->pending) {
                        /* an ERROR is often followed by EOS: look at the bus first */
                        r = check_bus(ctx);
                        if (r < 0)
                                return r;
                        if (!gst_app_sink_is_eos(GST_APP_SINK(ctx->appsink)))
                                return ZCP_SOURCE_AGAIN;
                        if (!ctx->loop) {
                                zcp_info("file %s: end of file after %llu frames; %llu missing (decode gaps), %llu corrupt, decoders: %llu dropped, %llu warnings",
                                         ctx->path, (unsigned long long)ctx->seq,
                                         (unsigned long long)atomic_load(&ctx->stats->decode_gaps),
                                         (unsigned long long)ctx->corrupt_frames,
                                         (unsigned long long)ctx->decoder_drops,
                                         (unsigned long long)ctx->decoder_warnings);
                                return ZCP_SOURCE_EOS;
                        }
                        r = rewind_to_start(ctx);
                        return r < 0 ? r : ZCP_SOURCE_AGAIN;
                }
        }

        spent = zcp_now_ns() - t0;
        r = zcp_ring_acquire(ring, spent < NEXT_TIMEOUT_NS ? (int64_t)(NEXT_TIMEOUT_NS - spent) : 0, &idx);
        if (r == -EAGAIN)
                return ZCP_SOURCE_AGAIN;   /* back-pressure: keep the sample, never drop */
        if (r < 0)
                return r;                  /* -EPIPE: the ring was closed, the stream is stopping */

        deliver(ctx, ring, idx);
        gst_sample_unref(ctx->pending);
        ctx->pending = NULL;
        return ZCP_SOURCE_FRAME;
}

static void file_stop(struct zcp_source_ctx *ctx, struct zcp_ring *ring)
{
        if (!ctx)
                return;
        gst_element_set_state(ctx->pipeline, GST_STATE_NULL);
        /* in NULL uridecodebin removed its pads: a restart links anew */
        atomic_store(&ctx->linked, false);
        if (ctx->pending) {
                gst_sample_unref(ctx->pending);
                ctx->pending = NULL;
        }
        gst_bus_set_flushing(ctx->bus, TRUE);   /* drops what is left */
        gst_bus_set_flushing(ctx->bus, FALSE);
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
};
