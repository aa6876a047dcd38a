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
 * stats->slot_direct; capture path "direct" while they flow; gst_pool.c
 * says when and how). Every decoder's worker threads are bounded by
 * decoder_threads (auto: the CPUs / the streams that decode with
 * GStreamer), videoconvert runs on one thread.
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
 * - A server that cannot be reached at open (down, refusing, no frame within
 *   connect_timeout_ms) is waited for the same way instead of failing the
 *   start: open() succeeds in state backoff with a ring for the configured
 *   size (else 640x480) in NV12, and the first frame's own geometry makes a
 *   new ring (ZCP_SOURCE_RECONFIGURE). Only a URL GStreamer has no element
 *   for fails at open.
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
 *
 * This file is the file source and what both sources share; gst_priv.h
 * lists the others (the network source, the pipeline, timestamps, the slot
 * pool, layouts) and the order in which they call each other.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gst/app/gstappsink.h>

#include "capture/gst_source.h"
#include "capture/gst_layout.h"
#include "capture/gst_pipe.h"
#include "capture/gst_pool.h"
#include "capture/gst_time.h"
#include "core/err.h"
#include "core/log.h"
#include "core/workers.h"

#define PREROLL_TIMEOUT_NS   (10 * ZCP_NSEC_PER_SEC)

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
        ctx->cur_fmt = zcp_gst_pixfmt(GST_VIDEO_INFO_FORMAT(&ctx->vinfo));
        dec = (GstVideoFormat)atomic_load(&ctx->dec_format);
        ctx->converted = dec != GST_VIDEO_FORMAT_UNKNOWN && dec != GST_VIDEO_INFO_FORMAT(&ctx->vinfo);
        if (ctx->converted && !was)
                zcp_info("%s %s: the decoder delivers %s, which convert does not take: converted to %s by videoconvert (each frame counted in conversions)",
                         ctx->kind, ctx->path, gst_video_format_to_string(dec),
                         gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&ctx->vinfo)));
        return ctx->cur_fmt == ZCP_PIX_NONE ? -EINVAL : 0;
}

/*
 * Source thread: the pending sample's buffer is slot memory that nothing
 * else holds and that holds a frame of the ring's geometry: that slot
 * (DRIVER -> SOURCE, frame cleared) is the frame's, *ret_idx.
 */
static bool lent_slot(struct zcp_source_ctx *ctx, struct zcp_ring *ring, uint32_t *ret_idx)
{
        GstBuffer *buf = gst_sample_get_buffer(ctx->pending);
        GstCaps *caps = gst_sample_get_caps(ctx->pending);

        if (!zcp_gst_lender_lent(ctx->lend, buf))
                return false;
        if (caps && caps != ctx->caps && !gst_caps_is_equal(caps, ctx->caps))
                parse_caps(ctx, caps);
        return zcp_gst_lender_claim(ctx->lend, ring, buf, ctx->cur_fmt != ZCP_PIX_NONE ? &ctx->vinfo : NULL, ret_idx,
                                    &ctx->direct_refused);
}

static void clear(struct zcp_source_ctx *ctx)
{
        zcp_gst_pipeline_free(ctx);
        if (ctx->abandoned) {
                /* a pipeline left behind may still count frames into ctx: it stays, on purpose */
                zcp_warn("%s %s: %u old connection(s) never stopped: their memory is kept", ctx->kind, ctx->path,
                         ctx->abandoned);
                return;
        }
        /* stop() unbound it; a ring still bound is not ours to touch any more */
        if (zcp_gst_lender_bound(ctx->lend))
                zcp_err("%s %s: closed with ring slots still lent to GStreamer", ctx->kind, ctx->path);
        zcp_gst_lender_unref(ctx->lend);
        ctx->lend = NULL;
        if (ctx->caps)
                gst_caps_unref(ctx->caps);
        if (ctx->allowed)
                gst_caps_unref(ctx->allowed);
        g_free(ctx->uri);
        if (ctx->fifo_fd >= 0)
                close(ctx->fifo_fd);
        free(ctx);
}

/*
 * A network source whose server cannot be reached at open waits for it, as a
 * camera that is absent does: failing the start would exit the process, and
 * systemd's start limit ends a service that exits five times in five
 * minutes. The ring is made for the configured size (else 640x480) in NV12
 * until the first frame brings the stream's own (zcp_gst_wants_reconfigure);
 * next() connects after the back-off.
 */
static int wait_for_server(struct zcp_source_ctx *ctx, int err)
{
        uint32_t w = ctx->want_width ? ctx->want_width : 640, h = ctx->want_height ? ctx->want_height : 480;

        zcp_gst_pipeline_free(ctx);
        if (!gst_video_info_set_format(&ctx->vinfo, GST_VIDEO_FORMAT_NV12, w, h))
                return -EINVAL;
        gst_caps_replace(&ctx->caps, NULL);
        ctx->caps = gst_video_info_to_caps(&ctx->vinfo);
        ctx->cur_fmt = ZCP_PIX_NV12;
        ctx->info.width = w;
        ctx->info.height = h;
        ctx->info.fmt = ZCP_PIX_NV12;
        ctx->info.stride = zcp_pixfmt_min_stride(ZCP_PIX_NV12, w);
        ctx->info.frame_bytes = zcp_pixfmt_frame_size(ZCP_PIX_NV12, w, h);
        ctx->info.fps_num = 0;
        ctx->info.fps_den = 1;
        ctx->info.path = ZCP_PATH_COPY;
        ctx->info.live = true;
        ctx->failures = 1;
        ctx->last_fail = err;
        zcp_gst_set_state(ctx, ZCP_SOURCE_BACKOFF);
        zcp_warn("network %s: cannot connect (%s): waiting for it, connecting again at most every %u ms "
                 "(the ring is made for %ux%u until its first frame)",
                 ctx->path, zcp_strerror(err), ctx->cfg.backoff_max_ms, w, h);
        return 0;
}

int zcp_gst_open(const struct zcp_stream_config *cfg, struct zcp_stream_stats *stats, bool network,
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
        atomic_init(&ctx->video_pad, false);
        atomic_init(&ctx->other_pads, 0);
        atomic_init(&ctx->have_source, false);
        atomic_init(&ctx->dec_format, GST_VIDEO_FORMAT_UNKNOWN);
        ctx->allowed = zcp_gst_raw_caps_new();

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

        r = zcp_gst_pipeline_build(ctx);
        if (r < 0)
                goto fail;
        zcp_gst_set_state(ctx, ZCP_SOURCE_OPENING);
        r = zcp_gst_preroll(ctx, network ? (uint64_t)sc->connect_timeout_ms * ZCP_NSEC_PER_MSEC : PREROLL_TIMEOUT_NS);
        if (r < 0 && network && r != -ECANCELED && r != -ENOMEM && atomic_load(&ctx->have_source)) {
                r = wait_for_server(ctx, r);
                if (r < 0)
                        goto fail;
                goto opened;
        }
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
opened:
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
        return zcp_gst_open(cfg, stats, false, ret_ctx, ret_info);
}

static int rewind_to_start(struct zcp_source_ctx *ctx)
{
        zcp_gst_account_pass(ctx);
        if (!gst_element_seek_simple(ctx->pipeline, GST_FORMAT_TIME,
                                     GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_KEY_UNIT, 0)) {
                zcp_err("file %s: loop: seeking back to the start failed", ctx->path);
                return -EIO;
        }
        zcp_gst_new_pass(ctx);
        ctx->rewound = true;
        zcp_debug("file %s: loop, pass %llu", ctx->path, (unsigned long long)ctx->passes + 1);
        return 0;
}

static int file_start(struct zcp_source_ctx *ctx, struct zcp_ring *ring)
{
        int r;

        if (ctx->stopped) {
                zcp_gst_new_pass(ctx);
                ctx->pass_delivered = 0;
                ctx->pass_repeats = 0;
                ctx->stopped = false;
        }
        zcp_gst_lender_bind(ctx->lend, ring, &ctx->info, ctx->kind, ctx->path);
        r = zcp_gst_play(ctx);
        if (r < 0)
                return r;
        zcp_gst_set_state(ctx, ZCP_SOURCE_UP);
        return 0;
}

/*
 * Fills slot `idx` from the pending sample and submits it (or submits it
 * dropped). direct: the sample's memory is that slot (lent_slot): no copy.
 */
void zcp_gst_deliver(struct zcp_source_ctx *ctx, struct zcp_ring *ring, uint32_t idx, bool direct)
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
        f->pts_ns = buf ? zcp_gst_track_pts(ctx, buf, &repeat) : 0;
        f->sender_ns = buf && ctx->network ? zcp_gst_sender_ns(buf) : 0;
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
        zcp_gst_copy_planes(&vf, ctx->cur_fmt, w, h, slot->data);
        gst_video_frame_unmap(&vf);
        atomic_fetch_add_explicit(&ctx->stats->copies, 1, memory_order_relaxed);
        if (atomic_load_explicit(&ctx->stats->capture_path, memory_order_relaxed) != ZCP_PATH_COPY)
                atomic_store(&ctx->stats->capture_path, ZCP_PATH_COPY);
done:
        if (ctx->converted)
                atomic_fetch_add_explicit(&ctx->stats->conversions, 1, memory_order_relaxed);
        f->t[ZCP_TS_CAPTURE] = zcp_now_ns();
        if (ctx->network)
                f->t[ZCP_TS_CAPTURE] = zcp_gst_arrival_ns(ctx, ctx->pending, f->t[ZCP_TS_CAPTURE]);
        zcp_ring_submit(ring, idx);
}

/* The pending sample has another geometry than the ring's, and the caller re-allocates for it. */
bool zcp_gst_wants_reconfigure(struct zcp_source_ctx *ctx)
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

int zcp_gst_reconfigure(struct zcp_source_ctx *ctx, struct zcp_source_info *ret_info)
{
        uint32_t w, h;
        size_t bytes;

        if (!ret_info) {
                ctx->reconfigure_ok = true;
                return 0;
        }
        if (!ctx->pending || !zcp_gst_wants_reconfigure(ctx))
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
        zcp_gst_lender_unbind(ctx->lend, ctx->kind, ctx->path);
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
                r = zcp_gst_check_bus(ctx, false);
                if (r < 0)
                        return r;
                ctx->pending = gst_app_sink_try_pull_sample(GST_APP_SINK(ctx->appsink), NEXT_TIMEOUT_NS);
                if (!ctx->pending) {
                        /* an ERROR is often followed by EOS: look at the bus first */
                        r = zcp_gst_check_bus(ctx, false);
                        if (r < 0)
                                return r;
                        /* after a rewind the appsink may still say EOS until the flush reaches it */
                        if ((ctx->rewound || !gst_app_sink_is_eos(GST_APP_SINK(ctx->appsink))) && !zcp_gst_stalled(ctx))
                                return ZCP_SOURCE_AGAIN;
                        if (!ctx->loop) {
                                zcp_gst_account_pass(ctx);
                                zcp_gst_set_state(ctx, ZCP_SOURCE_ENDED);
                                return ZCP_SOURCE_EOS;
                        }
                        r = rewind_to_start(ctx);
                        return r < 0 ? r : ZCP_SOURCE_AGAIN;
                }
        }

        if (zcp_gst_wants_reconfigure(ctx))
                return ZCP_SOURCE_RECONFIGURE;   /* the sample stays pending for the new ring */
        direct = lent_slot(ctx, ring, &idx);
        if (!direct) {
                spent = zcp_now_ns() - t0;
                r = zcp_gst_lender_take(ctx->lend, ring, spent < NEXT_TIMEOUT_NS ? (int64_t)(NEXT_TIMEOUT_NS - spent) : 0,
                                        &idx);
                if (r == -EAGAIN)
                        return ZCP_SOURCE_AGAIN;   /* back-pressure: keep the sample, never drop */
                if (r < 0)
                        return r;                  /* -EPIPE: the ring was closed, the stream is stopping */
        }
        zcp_gst_deliver(ctx, ring, idx, direct);
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
        /* a decoder waiting for a slot gives up at once: the state change below waits for it */
        zcp_gst_lender_close(ctx->lend);
        gst_element_set_state(ctx->pipeline, GST_STATE_NULL);
        /* in NULL uridecodebin removed its pads: a restart links anew */
        atomic_store(&ctx->linked, false);
        if (ctx->pending) {
                gst_sample_unref(ctx->pending);
                ctx->pending = NULL;
        }
        zcp_gst_lender_unbind(ctx->lend, ctx->kind, ctx->path);
        if (ctx->direct_refused)
                zcp_debug("%s %s: %llu frames in slot memory were copied all the same (held elsewhere too)", ctx->kind,
                          ctx->path, (unsigned long long)ctx->direct_refused);
        gst_bus_set_flushing(ctx->bus, TRUE);   /* drops what is left */
        gst_bus_set_flushing(ctx->bus, FALSE);
        atomic_store(&ctx->demuxed, 0);
        atomic_store(&ctx->decoded_in, 0);
        ctx->stopped = true;
}

void zcp_gst_close(struct zcp_source_ctx *ctx)
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
        .close = zcp_gst_close,
        .reconfigure = zcp_gst_reconfigure,
};
