/* SPDX-License-Identifier: MIT */
/*
 * The `file` source (src/capture/gst.c) through its ops table, on the real
 * sample samples/vtest-h264.mp4 (150 frames, 768x576, 10 fps) and on broken
 * copies of it made at run time in a temp dir:
 *
 * - pace fast: exactly 150 frames then EOS, seq 0..149, pts 100 ms apart,
 *   the luma of every frame equal to what an explicitly built pipeline
 *   (filesrc ! qtdemux ! h264parse ! avdec_h264 or openh264dec) decodes;
 * - loop: seq and pts go on past the end, and frame 150 is frame 0 again;
 * - pace realtime: 10 frames take about 0.9 s;
 * - back-pressure: with every slot held, next() keeps its sample and says
 *   AGAIN, nothing is dropped; stop/close with a sample pending;
 * - bad inputs (missing, directory, empty, random bytes, cut before the
 *   index, no video stream, wrong configured width): a clear error naming
 *   the file, within an alarm(20);
 * - raw video in Matroska (RGB, I420, YUY2, GRAY8, BGR at 86x50, whose rows
 *   GStreamer pads): every slot byte-equal to videotestsrc's frame packed
 *   tightly; AYUV goes through videoconvert to I420; odd width refused;
 * - an H.264 stream that turns from 96x64 into 64x48: the later frames are
 *   dropped as oversize; a caller that handles ZCP_SOURCE_RECONFIGURE gets
 *   it once, the new geometry from reconfigure(), and all 10 frames;
 * - garbage written over the mdat at 40 % and 60 %: plays to the end, and
 *   frames delivered + decode_gaps = the 150 frames the container holds
 *   (file_frames_expected), delivered = file_frames_delivered.
 *
 * The temp dir goes at exit when the test passes or skips; a failed CHECK
 * aborts, past atexit: it stays, and a line on stderr says where.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#if !HAVE_GSTREAMER
int main(void)
{
        printf("SKIP: built without GStreamer: no file source\n");
        return ZCP_TEST_SKIP;
}
#else

#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include "capture/source.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/ring.h"
#include "core/workers.h"

#define SAMPLE_FRAMES 150
#define SAMPLE_W      768
#define SAMPLE_H      576
#define FRAME_NS      (100 * ZCP_NSEC_PER_MSEC)
#define CASE_ALARM_S  20

static char sample[ZCP_PATH_MAX];
static char tmpdir[] = "/tmp/zcp-filesrc-XXXXXX";
static char kept_line[sizeof(tmpdir) + 32];   /* "kept for inspection: <tmpdir>\n", once made */
static pid_t main_pid;   /* the forked children (unreadable_as_nobody) neither remove nor name it */
static uint64_t ref_luma[SAMPLE_FRAMES];
static struct zcp_stream_stats stats;

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                h ^= p[i];
                h *= 1099511628211ULL;
        }
        return h;
}

#define FNV_INIT 14695981039346656037ULL

static uint64_t luma_sum(const uint8_t *y, uint32_t stride, uint32_t w, uint32_t h)
{
        uint64_t s = FNV_INIT;

        for (uint32_t r = 0; r < h; r++)
                s = fnv1a(s, y + (size_t)r * stride, w);
        return s;
}

/* Decodes the sample with an explicit pipeline (not the source's uridecodebin) into ref_luma. */
static void reference_decode(void)
{
        static const char *const decoders[] = { "avdec_h264", "openh264dec" };
        GstElement *pipe = NULL, *sink;
        GError *err = NULL;
        char desc[ZCP_PATH_MAX + 256];
        uint32_t n = 0;

        for (size_t i = 0; i < G_N_ELEMENTS(decoders); i++) {
                GstElementFactory *f = gst_element_factory_find(decoders[i]);

                if (!f)
                        continue;
                gst_object_unref(f);
                snprintf(desc, sizeof(desc),
                         "filesrc location=\"%s\" ! qtdemux ! h264parse ! %s ! video/x-raw,format=I420 ! appsink name=s sync=false",
                         sample, decoders[i]);
                pipe = gst_parse_launch(desc, &err);
                CHECK_MSG(pipe && !err, "%s: %s", desc, err ? err->message : "?");
                printf("reference: %s\n", desc);
                break;
        }
        if (!pipe) {
                printf("SKIP: neither avdec_h264 nor openh264dec is installed\n");
                exit(ZCP_TEST_SKIP);
        }
        sink = gst_bin_get_by_name(GST_BIN(pipe), "s");
        CHECK(gst_element_set_state(pipe, GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE);
        for (;;) {
                GstSample *s = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND);
                GstVideoFrame vf;
                GstVideoInfo vi;

                if (!s)
                        break;
                CHECK(n < SAMPLE_FRAMES);
                CHECK(gst_video_info_from_caps(&vi, gst_sample_get_caps(s)));
                CHECK(gst_video_frame_map(&vf, &vi, gst_sample_get_buffer(s), GST_MAP_READ));
                CHECK(GST_VIDEO_INFO_WIDTH(&vi) == SAMPLE_W && GST_VIDEO_INFO_HEIGHT(&vi) == SAMPLE_H);
                ref_luma[n++] = luma_sum(GST_VIDEO_FRAME_PLANE_DATA(&vf, 0),
                                         (uint32_t)GST_VIDEO_FRAME_PLANE_STRIDE(&vf, 0), SAMPLE_W, SAMPLE_H);
                gst_video_frame_unmap(&vf);
                gst_sample_unref(s);
        }
        CHECK(gst_app_sink_is_eos(GST_APP_SINK(sink)));
        CHECK_MSG(n == SAMPLE_FRAMES, "reference decoded %u frames", n);
        gst_element_set_state(pipe, GST_STATE_NULL);
        gst_object_unref(sink);
        gst_object_unref(pipe);
}

static struct zcp_stream_config make_cfg(const char *path, enum zcp_pace pace, bool loop)
{
        struct zcp_stream_config c;

        memset(&c, 0, sizeof(c));
        snprintf(c.name, sizeof(c.name), "file-test");
        c.source.type = ZCP_SOURCE_FILE;
        snprintf(c.source.path, sizeof(c.source.path), "%s", path);
        c.source.pace = pace;
        c.source.loop = loop;
        return c;
}

/* stderr (where zcp_log writes) into a file while a case runs. */
static int saved_stderr = -1;
static char errlog[sizeof(tmpdir) + 16];

static void capture_begin(void)
{
        int fd;

        snprintf(errlog, sizeof(errlog), "%s/stderr", tmpdir);
        fd = open(errlog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        CHECK(fd >= 0);
        fflush(stderr);
        saved_stderr = dup(STDERR_FILENO);
        CHECK(saved_stderr >= 0);
        CHECK(dup2(fd, STDERR_FILENO) == STDERR_FILENO);
        close(fd);
}

/* Ends the capture, echoes it, returns it (static buffer). */
static const char *capture_end(void)
{
        static char text[8192];
        ssize_t n;
        int fd;

        fflush(stderr);
        CHECK(dup2(saved_stderr, STDERR_FILENO) == STDERR_FILENO);
        close(saved_stderr);
        saved_stderr = -1;
        fd = open(errlog, O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0);
        n = read(fd, text, sizeof(text) - 1);
        close(fd);
        text[n > 0 ? n : 0] = '\0';
        fputs(text, stderr);
        unlink(errlog);
        return text;
}

struct run {
        int open_rc;
        int end_rc;                   /* EOS, negative errno, or FRAME when stopped at max */
        struct zcp_source_info info;
        uint32_t frames;              /* slots that came out of the convert queue */
        uint32_t dropped;             /* of those, marked dropped */
        uint64_t first_pts, last_pts;
        bool pts_regular;             /* every step exactly FRAME_NS */
        bool seq_ok;                  /* seq 0, 1, 2, ... */
        bool luma_ok;                 /* every delivered frame matches ref_luma[seq % 150] */
        bool capture_ts_ok;           /* t[CAPTURE] set and not decreasing */
        uint64_t ns_to_10th;          /* from start() to the 10th frame */
};

/* Opens, plays up to max_frames (0: to the end) through a 4-slot ring, closes. */
static void play(const struct zcp_stream_config *cfg, uint32_t max_frames, bool check_luma, struct run *ret)
{
        const struct zcp_source_ops *ops = &zcp_source_file;
        struct zcp_source_ctx *src = NULL;
        struct zcp_ring *ring = NULL;
        uint64_t t0, last_cap = 0;
        int r;

        memset(ret, 0, sizeof(*ret));
        ret->pts_regular = ret->seq_ok = ret->luma_ok = ret->capture_ts_ok = true;
        zcp_stream_stats_init(&stats);
        alarm(CASE_ALARM_S);
        ret->open_rc = ops->open(cfg, &stats, &src, &ret->info);
        if (ret->open_rc < 0) {
                alarm(0);
                return;
        }
        CHECK(zcp_ring_new(4, ret->info.frame_bytes, 0, &zcp_host_allocator, &stats, &ring) == 0);
        t0 = zcp_now_ns();
        CHECK(ops->start(src, ring) == 0);
        for (;;) {
                uint32_t idx;
                struct zcp_frame *f;

                r = ops->next(src, ring);
                if (r == ZCP_SOURCE_AGAIN)
                        continue;
                if (r != ZCP_SOURCE_FRAME) {
                        ret->end_rc = r;
                        break;
                }
                CHECK(zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], 0, &idx) == 0);
                f = &zcp_ring_slot(ring, idx)->frame;
                if (f->seq != ret->frames)
                        ret->seq_ok = false;
                if (ret->frames == 0)
                        ret->first_pts = f->pts_ns;
                else if (f->pts_ns - ret->last_pts != FRAME_NS)
                        ret->pts_regular = false;
                ret->last_pts = f->pts_ns;
                if (f->t[ZCP_TS_CAPTURE] == 0 || f->t[ZCP_TS_CAPTURE] < last_cap)
                        ret->capture_ts_ok = false;
                last_cap = f->t[ZCP_TS_CAPTURE];
                if (f->flags & ZCP_FRAME_DROPPED) {
                        ret->dropped++;
                } else {
                        CHECK(f->width == ret->info.width && f->height == ret->info.height);
                        CHECK(f->fmt == ret->info.fmt && f->bytes == ret->info.frame_bytes);
                        CHECK(f->stride == ret->info.stride);
                        if (check_luma &&
                            luma_sum(zcp_ring_slot(ring, idx)->data, f->stride, f->width, f->height) !=
                                    ref_luma[f->seq % SAMPLE_FRAMES]) {
                                if (ret->luma_ok)
                                        fprintf(stderr, "luma of frame %llu differs from the reference\n",
                                                (unsigned long long)f->seq);
                                ret->luma_ok = false;
                        }
                }
                zcp_ring_move(ring, idx, ZCP_SLOT_CONVERT, ZCP_SLOT_FREE);
                CHECK(zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx) == 0);
                ret->frames++;
                if (ret->frames == 10)
                        ret->ns_to_10th = zcp_now_ns() - t0;
                if (max_frames && ret->frames == max_frames) {
                        ret->end_rc = ZCP_SOURCE_FRAME;
                        break;
                }
        }
        ops->stop(src, ring);
        ops->close(src);
        zcp_ring_free(ring);
        alarm(0);
}

static void test_fast(void)
{
        struct zcp_stream_config cfg = make_cfg(sample, ZCP_PACE_FAST, false);
        struct run r;
        uint64_t t0 = zcp_now_ns();

        play(&cfg, 0, true, &r);
        CHECK_MSG(r.open_rc == 0, "open: %s", strerror(-r.open_rc));
        CHECK(r.info.width == SAMPLE_W && r.info.height == SAMPLE_H);
        CHECK(r.info.fps_num == 10 && r.info.fps_den == 1);
        CHECK(!r.info.live && r.info.path == ZCP_PATH_COPY);
        CHECK(r.info.fmt == ZCP_PIX_I420 || r.info.fmt == ZCP_PIX_NV12 || r.info.fmt == ZCP_PIX_YV12 ||
              r.info.fmt == ZCP_PIX_NV21);
        CHECK(r.info.frame_bytes == zcp_pixfmt_frame_size(r.info.fmt, SAMPLE_W, SAMPLE_H));
        CHECK_MSG(r.end_rc == ZCP_SOURCE_EOS, "ended with %d", r.end_rc);
        CHECK_MSG(r.frames == SAMPLE_FRAMES, "%u frames", r.frames);
        CHECK(r.seq_ok && r.pts_regular && r.capture_ts_ok);
        CHECK(r.first_pts == 0 && r.last_pts == (SAMPLE_FRAMES - 1) * FRAME_NS);
        CHECK(r.luma_ok);
        CHECK(r.dropped == 0 && zcp_stats_dropped_total(&stats) == 0);
        CHECK(atomic_load(&stats.captured) == SAMPLE_FRAMES);
        CHECK(atomic_load(&stats.copies) + atomic_load(&stats.slot_direct) == SAMPLE_FRAMES);
        CHECK(atomic_load(&stats.decode_gaps) == 0);
        printf("ok fast: %u frames %s, luma equal to the reference, %.2f s\n", r.frames,
               zcp_pixfmt_name(r.info.fmt), (double)(zcp_now_ns() - t0) / 1e9);
}

/* decoder_threads: the bound is set on the decoder and said once; the frames still add up. */
static void test_decoder_threads(void)
{
        struct zcp_stream_config cfg = make_cfg(sample, ZCP_PACE_FAST, true);
        const char *log;
        struct run r;

        cfg.source.decoder_threads = 1;
        capture_begin();
        play(&cfg, SAMPLE_FRAMES + 20, true, &r);
        log = capture_end();
        CHECK(r.open_rc == 0 && r.frames == SAMPLE_FRAMES + 20 && r.seq_ok && r.luma_ok && r.dropped == 0);
        CHECK(atomic_load(&stats.captured) == SAMPLE_FRAMES + 20);
        /* avdec_h264 takes max-threads; openh264dec has no setting and says so */
        CHECK_MSG(strstr(log, ": max-threads 1 (decoder_threads 1)") ||
                          strstr(log, ": no thread setting, it decodes on its streaming thread (decoder_threads 1)"),
                  "no decoder_threads line in:\n%s", log);
        /* libav keeps reference frames in its output buffers: never given ring slots */
        if (strstr(log, "decoder avdec_h264"))
                CHECK_MSG(atomic_load(&stats.slot_direct) == 0 &&
                                  strstr(log, "avdec_h264 decodes into its own buffers, copied into the slots"),
                          "avdec_h264 got slots (%llu direct)", (unsigned long long)atomic_load(&stats.slot_direct));
        /* said once (at info; a later decoder of the stream would say it at debug) */
        CHECK(!strstr(strstr(log, "(decoder_threads 1)") + 1, "(decoder_threads 1)"));
        /* auto with 16 streams of GStreamer: one thread each on any machine of 16 CPUs or fewer */
        cfg = make_cfg(sample, ZCP_PACE_FAST, false);
        cfg.source.gst_streams = 16;
        capture_begin();
        play(&cfg, 5, false, &r);
        log = capture_end();
        CHECK(r.open_rc == 0 && r.frames == 5);
        if (zcp_workers_cpus() < 32)
                CHECK_MSG(strstr(log, "(decoder_threads 1, auto)"), "no auto line in:\n%s", log);
        printf("ok decoder_threads: bound set and said once, %u frames in order\n", SAMPLE_FRAMES + 20);
}

static void test_uri(void)
{
        char uri[ZCP_PATH_MAX + 8];
        struct zcp_stream_config cfg;
        struct run r;

        snprintf(uri, sizeof(uri), "file://%s", sample);
        cfg = make_cfg(uri, ZCP_PACE_FAST, false);
        play(&cfg, 3, true, &r);
        CHECK_MSG(r.open_rc == 0, "open %s: %s", uri, strerror(-r.open_rc));
        CHECK(r.info.width == SAMPLE_W && r.frames == 3 && r.luma_ok && r.seq_ok);
        printf("ok uri: %s\n", uri);
}

static void test_loop(void)
{
        struct zcp_stream_config cfg = make_cfg(sample, ZCP_PACE_FAST, true);
        const uint32_t want = 2 * SAMPLE_FRAMES + 60;
        struct run r;

        play(&cfg, want, true, &r);
        CHECK(r.open_rc == 0);
        CHECK_MSG(r.end_rc == ZCP_SOURCE_FRAME && r.frames == want, "end %d after %u frames", r.end_rc, r.frames);
        CHECK(r.seq_ok);         /* seq goes on across the seek */
        CHECK(r.pts_regular);    /* and so does the timeline */
        CHECK(r.luma_ok);        /* frame 150 is frame 0 again, 300 too */
        CHECK(atomic_load(&stats.decode_gaps) == 0 && zcp_stats_dropped_total(&stats) == 0);
        printf("ok loop: %u frames, seq and pts continuous over 2 rewinds\n", r.frames);
}

static void test_realtime(void)
{
        struct zcp_stream_config cfg = make_cfg(sample, ZCP_PACE_REALTIME, false);
        struct run r;
        double s;

        play(&cfg, 10, false, &r);
        CHECK(r.open_rc == 0 && r.frames == 10 && r.seq_ok && r.pts_regular);
        s = (double)r.ns_to_10th / 1e9;
        /* frame 9 is due 0.9 s after frame 0; loose upper bound for loaded/sanitized runs */
        CHECK_MSG(s >= 0.85 && s <= 2.5, "10 frames in %.3f s", s);
        printf("ok realtime: 10 frames in %.3f s\n", s);
}

/* All slots held by "convert": next() must keep its sample (AGAIN), never drop; then stop with it pending. */
static void test_backpressure(void)
{
        struct zcp_stream_config cfg = make_cfg(sample, ZCP_PACE_FAST, false);
        const struct zcp_source_ops *ops = &zcp_source_file;
        struct zcp_source_ctx *src = NULL;
        struct zcp_source_info info;
        struct zcp_ring *ring = NULL;
        uint32_t got = 0, again = 0, idx;
        uint64_t seq = 0;

        zcp_stream_stats_init(&stats);
        alarm(CASE_ALARM_S);
        CHECK(ops->open(&cfg, &stats, &src, &info) == 0);
        CHECK(zcp_ring_new(2, info.frame_bytes, 0, &zcp_host_allocator, &stats, &ring) == 0);
        CHECK(ops->start(src, ring) == 0);
        while (again < 3) {
                int r = ops->next(src, ring);

                CHECK(r == ZCP_SOURCE_FRAME || r == ZCP_SOURCE_AGAIN);
                if (r == ZCP_SOURCE_FRAME)
                        got++;
                else if (got == 2)
                        again++;
        }
        CHECK(got == 2 && zcp_stats_dropped_total(&stats) == 0);
        /* free one slot: the kept sample is the next frame, nothing was skipped */
        CHECK(zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], 0, &idx) == 0);
        CHECK(zcp_ring_slot(ring, idx)->frame.seq == seq);
        zcp_ring_move(ring, idx, ZCP_SLOT_CONVERT, ZCP_SLOT_FREE);
        CHECK(zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx) == 0);
        while (ops->next(src, ring) != ZCP_SOURCE_FRAME)
                ;
        CHECK(zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], 0, &idx) == 0);
        CHECK(zcp_ring_slot(ring, idx)->frame.seq == 1);
        CHECK(zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], 0, &idx) == 0);
        CHECK(zcp_ring_slot(ring, idx)->frame.seq == 2);
        CHECK(zcp_ring_slot(ring, idx)->frame.pts_ns == 2 * FRAME_NS);
        /* ring full again, a sample pending: stop and close must release it (ASan leak check) */
        CHECK(ops->next(src, ring) == ZCP_SOURCE_AGAIN);
        ops->stop(src, ring);
        ops->close(src);
        zcp_ring_free(ring);
        alarm(0);
        printf("ok back-pressure: AGAIN with all slots held, no frame lost or dropped\n");
}

/* stop() then start() again: the file plays from its start, seq and pts go on. */
static void test_restart(void)
{
        struct zcp_stream_config cfg = make_cfg(sample, ZCP_PACE_FAST, false);
        const struct zcp_source_ops *ops = &zcp_source_file;
        struct zcp_source_ctx *src = NULL;
        struct zcp_source_info info;
        struct zcp_ring *ring = NULL;
        uint32_t n = 0, idx;

        zcp_stream_stats_init(&stats);
        alarm(CASE_ALARM_S);
        CHECK(ops->open(&cfg, &stats, &src, &info) == 0);
        CHECK(zcp_ring_new(4, info.frame_bytes, 0, &zcp_host_allocator, &stats, &ring) == 0);
        for (int pass = 0; pass < 2; pass++) {
                CHECK(ops->start(src, ring) == 0);
                for (uint32_t got = 0; got < 3;) {
                        int r = ops->next(src, ring);
                        struct zcp_slot *slot;

                        CHECK(r == ZCP_SOURCE_FRAME || r == ZCP_SOURCE_AGAIN);
                        if (r != ZCP_SOURCE_FRAME)
                                continue;
                        CHECK(zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], 0, &idx) == 0);
                        slot = zcp_ring_slot(ring, idx);
                        CHECK(slot->frame.seq == n && slot->frame.pts_ns == n * FRAME_NS);
                        /* the second pass starts at the file's first frame again */
                        CHECK(luma_sum(slot->data, slot->frame.stride, slot->frame.width, slot->frame.height) ==
                              ref_luma[got]);
                        zcp_ring_move(ring, idx, ZCP_SLOT_CONVERT, ZCP_SLOT_FREE);
                        CHECK(zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx) == 0);
                        got++;
                        n++;
                }
                ops->stop(src, ring);
        }
        ops->close(src);
        zcp_ring_free(ring);
        alarm(0);
        printf("ok restart: stop/start replays from the start, seq and pts continue\n");
}

static void write_file(const char *path, const void *data, size_t n)
{
        FILE *f = fopen(path, "wbe");

        CHECK(f);
        CHECK(n == 0 || fwrite(data, 1, n, f) == n);
        CHECK(fclose(f) == 0);
}

static uint8_t *read_sample(size_t *ret_n)
{
        FILE *f = fopen(sample, "rbe");
        uint8_t *buf;
        long n;

        CHECK(f);
        CHECK(fseek(f, 0, SEEK_END) == 0);
        n = ftell(f);
        CHECK(n > 0);
        rewind(f);
        buf = malloc((size_t)n);
        CHECK(buf);
        CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
        fclose(f);
        *ret_n = (size_t)n;
        return buf;
}

static uint64_t xorshift(uint64_t *s)
{
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

/* A case that must fail: returns the error and the log it wrote; never hangs (alarm). */
static int expect_failure(const char *what, const struct zcp_stream_config *cfg, const char **ret_log)
{
        struct run r;
        uint64_t t0 = zcp_now_ns();
        int rc;

        capture_begin();
        play(cfg, 0, false, &r);
        *ret_log = capture_end();
        rc = r.open_rc < 0 ? r.open_rc : r.end_rc;
        CHECK_MSG(rc < 0, "%s: open %d, ended %d after %u frames", what, r.open_rc, r.end_rc, r.frames);
        CHECK_MSG(strstr(*ret_log, cfg->source.path), "%s: the log does not name %s", what, cfg->source.path);
        printf("ok %s: %s in %s after %.2f s\n", what, strerror(-rc), r.open_rc < 0 ? "open" : "next",
               (double)(zcp_now_ns() - t0) / 1e9);
        return rc;
}

/*
 * Root reads anything: open the unreadable file in a child that became
 * nobody. The child fails in the path checks, before any GStreamer call.
 */
static void unreadable_as_nobody(const struct zcp_stream_config *cfg)
{
        struct zcp_source_ctx *src = NULL;
        struct zcp_source_info info;
        const char *log;
        pid_t pid;
        int status;

        CHECK(chmod(tmpdir, 0711) == 0);
        capture_begin();
        pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
                alarm(CASE_ALARM_S);
                if (setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(3);
                _exit(zcp_source_file.open(cfg, &stats, &src, &info) == -EACCES ? 0 : 1);
        }
        CHECK(waitpid(pid, &status, 0) == pid);
        log = capture_end();
        CHECK(chmod(tmpdir, 0700) == 0);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "unreadable file as nobody: status 0x%x", status);
        CHECK_MSG(strstr(log, cfg->source.path), "the log does not name %s", cfg->source.path);
        printf("ok unreadable file (as nobody): Permission denied in open\n");
}

static void test_bad_inputs(void)
{
        char path[sizeof(tmpdir) + 64];
        struct zcp_stream_config cfg;
        const char *log;
        uint8_t *buf;
        size_t n;
        uint64_t s = 0x9e3779b97f4a7c15ULL;
        int rc;

        snprintf(path, sizeof(path), "%s/missing.mp4", tmpdir);
        cfg = make_cfg(path, ZCP_PACE_FAST, false);
        CHECK(expect_failure("missing file", &cfg, &log) == -ENOENT);

        snprintf(path, sizeof(path), "%s/dir.mp4", tmpdir);
        CHECK(mkdir(path, 0700) == 0);
        cfg = make_cfg(path, ZCP_PACE_FAST, false);
        CHECK(expect_failure("directory", &cfg, &log) == -EISDIR);
        rmdir(path);

        snprintf(path, sizeof(path), "%s/empty.mp4", tmpdir);
        write_file(path, "", 0);
        cfg = make_cfg(path, ZCP_PACE_FAST, false);
        CHECK(expect_failure("empty file", &cfg, &log) == -EINVAL);
        CHECK(strstr(log, "is empty"));
        unlink(path);

        snprintf(path, sizeof(path), "%s/unreadable.mp4", tmpdir);
        write_file(path, "x", 1);
        CHECK(chmod(path, 0) == 0);
        cfg = make_cfg(path, ZCP_PACE_FAST, false);
        if (geteuid() != 0)
                CHECK(expect_failure("unreadable file", &cfg, &log) == -EACCES);
        else
                unreadable_as_nobody(&cfg);
        unlink(path);

        buf = malloc(64 * 1024);
        CHECK(buf);
        for (size_t i = 0; i < 64 * 1024; i++)
                buf[i] = (uint8_t)(xorshift(&s) >> 24);
        snprintf(path, sizeof(path), "%s/random.mp4", tmpdir);
        write_file(path, buf, 64 * 1024);
        free(buf);
        cfg = make_cfg(path, ZCP_PACE_FAST, false);
        CHECK(expect_failure("random bytes", &cfg, &log) == -EINVAL);
        unlink(path);

        /* the sample's moov index is at its end: the first half has none */
        buf = read_sample(&n);
        snprintf(path, sizeof(path), "%s/cut.mp4", tmpdir);
        write_file(path, buf, n / 2);
        free(buf);
        cfg = make_cfg(path, ZCP_PACE_FAST, false);
        rc = expect_failure("cut at 50%", &cfg, &log);
        CHECK(rc == -EINVAL || rc == -EIO);
        unlink(path);

        /* the sample says 768x576 */
        cfg = make_cfg(sample, ZCP_PACE_FAST, false);
        cfg.source.width = 640;
        cfg.source.height = 480;
        CHECK(expect_failure("configured 640x480", &cfg, &log) == ZCP_ERR_CONFIG);
        CHECK(strstr(log, "768x576") && strstr(log, "640x480"));
}

/* A file with no video: a WAV made by GStreamer. */
static void test_no_video(void)
{
        char path[sizeof(tmpdir) + 64], desc[sizeof(path) + 128];
        struct zcp_stream_config cfg;
        GstElement *pipe;
        GstMessage *msg;
        GError *err = NULL;
        const char *log;

        snprintf(path, sizeof(path), "%s/audio.wav", tmpdir);
        snprintf(desc, sizeof(desc), "audiotestsrc num-buffers=20 ! wavenc ! filesink location=\"%s\"", path);
        pipe = gst_parse_launch(desc, &err);
        if (!pipe || err) {
                printf("skip no video: cannot make a WAV (%s)\n", err ? err->message : "?");
                g_clear_error(&err);
                if (pipe)
                        gst_object_unref(pipe);
                return;
        }
        CHECK(gst_element_set_state(pipe, GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE);
        msg = gst_bus_timed_pop_filtered(GST_ELEMENT_BUS(pipe), 10 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
        CHECK(msg && GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS);
        gst_message_unref(msg);
        gst_element_set_state(pipe, GST_STATE_NULL);
        gst_object_unref(pipe);

        cfg = make_cfg(path, ZCP_PACE_FAST, false);
        CHECK(expect_failure("no video stream", &cfg, &log) == -EINVAL);
        unlink(path);
}

/* Runs a gst-launch style description to its EOS (fixture writer). */
static void gst_run(const char *desc)
{
        GError *err = NULL;
        GstElement *pipe = gst_parse_launch(desc, &err);
        GstMessage *msg;

        CHECK_MSG(pipe && !err, "%s: %s", desc, err ? err->message : "?");
        CHECK(gst_element_set_state(pipe, GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE);
        msg = gst_bus_timed_pop_filtered(GST_ELEMENT_BUS(pipe), 10 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
        CHECK_MSG(msg && GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS, "%s did not finish", desc);
        gst_message_unref(msg);
        gst_element_set_state(pipe, GST_STATE_NULL);
        gst_object_unref(pipe);
}

#define RAW_FRAMES 5

/*
 * Checksums of the frames `src_caps` describes, each packed tightly (rows of
 * component width x pixel stride, planes one after the other: pixfmt.h's
 * layout), computed from GStreamer's own frame description.
 */
static void raw_reference(const char *src_caps, uint64_t sums[RAW_FRAMES])
{
        char desc[512];
        GstElement *pipe, *sink;
        GError *err = NULL;

        snprintf(desc, sizeof(desc), "videotestsrc pattern=ball num-buffers=%d ! %s ! appsink name=s sync=false",
                 RAW_FRAMES, src_caps);
        pipe = gst_parse_launch(desc, &err);
        CHECK_MSG(pipe && !err, "%s", desc);
        sink = gst_bin_get_by_name(GST_BIN(pipe), "s");
        CHECK(gst_element_set_state(pipe, GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE);
        for (int n = 0; n < RAW_FRAMES; n++) {
                GstSample *smp = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND);
                GstVideoFrame vf;
                GstVideoInfo vi;
                uint64_t h = FNV_INIT;

                CHECK(smp);
                CHECK(gst_video_info_from_caps(&vi, gst_sample_get_caps(smp)));
                CHECK(gst_video_frame_map(&vf, &vi, gst_sample_get_buffer(smp), GST_MAP_READ));
                for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(&vf); p++) {
                        size_t row = (size_t)GST_VIDEO_FRAME_COMP_WIDTH(&vf, p) * GST_VIDEO_FRAME_COMP_PSTRIDE(&vf, p);
                        const uint8_t *d = GST_VIDEO_FRAME_PLANE_DATA(&vf, p);

                        for (int y = 0; y < GST_VIDEO_FRAME_COMP_HEIGHT(&vf, p); y++)
                                h = fnv1a(h, d + (size_t)y * GST_VIDEO_FRAME_PLANE_STRIDE(&vf, p), row);
                }
                sums[n] = h;
                gst_video_frame_unmap(&vf);
                gst_sample_unref(smp);
        }
        gst_element_set_state(pipe, GST_STATE_NULL);
        gst_object_unref(sink);
        gst_object_unref(pipe);
}

/*
 * Raw video in Matroska, 86x50: rows of GStreamer's buffers are padded to 4
 * bytes (RGB 258 -> 260, I420 chroma 43 -> 44), the slot layout is tight, so
 * the copy goes row by row. AYUV is none of convert's formats: videoconvert
 * to I420 is added. An odd width is refused.
 */
static void test_raw_formats(void)
{
        static const struct {
                const char *gst;
                enum zcp_pixfmt fmt;
        } cases[] = {
                { "RGB", ZCP_PIX_RGB24 }, { "I420", ZCP_PIX_I420 }, { "YUY2", ZCP_PIX_YUYV },
                { "GRAY8", ZCP_PIX_GREY }, { "BGR", ZCP_PIX_BGR24 },
        };
        const struct zcp_source_ops *ops = &zcp_source_file;
        char path[sizeof(tmpdir) + 64], caps[128], desc[sizeof(path) + 256];
        struct zcp_stream_config cfg;
        const char *log;

        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
                struct zcp_source_ctx *src = NULL;
                struct zcp_source_info info;
                struct zcp_ring *ring = NULL;
                uint64_t sums[RAW_FRAMES];
                uint32_t n = 0, idx;
                int r;

                snprintf(caps, sizeof(caps), "video/x-raw,format=%s,width=86,height=50,framerate=10/1", cases[c].gst);
                snprintf(path, sizeof(path), "%s/raw-%s.mkv", tmpdir, cases[c].gst);
                snprintf(desc, sizeof(desc), "videotestsrc pattern=ball num-buffers=%d ! %s ! matroskamux ! filesink location=\"%s\"",
                         RAW_FRAMES, caps, path);
                gst_run(desc);
                raw_reference(caps, sums);

                cfg = make_cfg(path, ZCP_PACE_FAST, false);
                zcp_stream_stats_init(&stats);
                alarm(CASE_ALARM_S);
                CHECK_MSG(ops->open(&cfg, &stats, &src, &info) == 0, "%s", cases[c].gst);
                CHECK(info.width == 86 && info.height == 50 && info.fmt == cases[c].fmt);
                CHECK(info.stride == zcp_pixfmt_min_stride(cases[c].fmt, 86));
                CHECK(info.frame_bytes == zcp_pixfmt_frame_size(cases[c].fmt, 86, 50));
                CHECK(zcp_ring_new(2, info.frame_bytes, 0, &zcp_host_allocator, &stats, &ring) == 0);
                CHECK(ops->start(src, ring) == 0);
                while ((r = ops->next(src, ring)) != ZCP_SOURCE_EOS) {
                        struct zcp_slot *slot;

                        CHECK(r == ZCP_SOURCE_FRAME || r == ZCP_SOURCE_AGAIN);
                        if (r != ZCP_SOURCE_FRAME)
                                continue;
                        CHECK(zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], 0, &idx) == 0);
                        slot = zcp_ring_slot(ring, idx);
                        CHECK(n < RAW_FRAMES && slot->frame.seq == n && !(slot->frame.flags & ZCP_FRAME_DROPPED));
                        CHECK(slot->frame.bytes == info.frame_bytes);
                        CHECK_MSG(fnv1a(FNV_INIT, slot->data, slot->frame.bytes) == sums[n],
                                  "%s frame %u differs from videotestsrc's", cases[c].gst, n);
                        zcp_ring_move(ring, idx, ZCP_SLOT_CONVERT, ZCP_SLOT_FREE);
                        CHECK(zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx) == 0);
                        n++;
                }
                CHECK(n == RAW_FRAMES);
                ops->stop(src, ring);
                ops->close(src);
                zcp_ring_free(ring);
                alarm(0);
                unlink(path);
                printf("ok raw %s 86x50: %u frames equal to videotestsrc's, stride %u\n", cases[c].gst, n, info.stride);
        }

        /* AYUV: through videoconvert, said in the log */
        snprintf(path, sizeof(path), "%s/raw-AYUV.mkv", tmpdir);
        snprintf(desc, sizeof(desc),
                 "videotestsrc num-buffers=3 ! video/x-raw,format=AYUV,width=86,height=50,framerate=10/1 ! matroskamux ! filesink location=\"%s\"",
                 path);
        gst_run(desc);
        {
                struct run r;

                cfg = make_cfg(path, ZCP_PACE_FAST, false);
                capture_begin();
                play(&cfg, 0, false, &r);
                log = capture_end();
                CHECK(r.open_rc == 0 && r.end_rc == ZCP_SOURCE_EOS && r.frames == 3 && r.dropped == 0);
                CHECK(r.info.fmt == ZCP_PIX_I420 && r.info.width == 86 && r.info.height == 50);
                CHECK(strstr(log, "videoconvert"));
                printf("ok raw AYUV: converted to I420 by videoconvert, %u frames\n", r.frames);
        }
        unlink(path);

        /* odd width */
        snprintf(path, sizeof(path), "%s/odd.mkv", tmpdir);
        snprintf(desc, sizeof(desc),
                 "videotestsrc num-buffers=2 ! video/x-raw,format=I420,width=85,height=50,framerate=10/1 ! matroskamux ! filesink location=\"%s\"",
                 path);
        gst_run(desc);
        cfg = make_cfg(path, ZCP_PACE_FAST, false);
        CHECK(expect_failure("odd width 85x50", &cfg, &log) == -EINVAL);
        CHECK(strstr(log, "85x50"));
        unlink(path);
}

/*
 * The same file to a caller that re-allocates: one ZCP_SOURCE_RECONFIGURE at
 * frame 5, reconfigure() says 64x48, a new ring, and every frame arrives.
 */
static void geometry_reconfigure(const struct zcp_stream_config *cfg)
{
        const struct zcp_source_ops *ops = &zcp_source_file;
        struct zcp_source_ctx *src = NULL;
        struct zcp_source_info info;
        struct zcp_ring *ring = NULL;
        uint32_t frames = 0, reconfigs = 0, idx;
        int r;

        zcp_stream_stats_init(&stats);
        alarm(CASE_ALARM_S);
        CHECK(ops->open(cfg, &stats, &src, &info) == 0 && info.width == 96 && info.height == 64);
        CHECK(ops->reconfigure && ops->reconfigure(src, NULL) == 0);
        CHECK(ops->reconfigure(src, &info) == -EINVAL);   /* nothing changed yet */
        CHECK(zcp_ring_new(4, info.frame_bytes, 0, &zcp_host_allocator, &stats, &ring) == 0);
        CHECK(ops->start(src, ring) == 0);
        while ((r = ops->next(src, ring)) != ZCP_SOURCE_EOS) {
                struct zcp_frame *f;

                CHECK_MSG(r >= 0, "next: %d", r);
                if (r == ZCP_SOURCE_RECONFIGURE) {
                        CHECK(frames == 5 && reconfigs++ == 0);
                        CHECK(ops->reconfigure(src, &info) == 0 && info.width == 64 && info.height == 48);
                        zcp_ring_free(ring);   /* every slot is back in the free queue */
                        CHECK(zcp_ring_new(4, info.frame_bytes, 0, &zcp_host_allocator, &stats, &ring) == 0);
                        continue;
                }
                if (r != ZCP_SOURCE_FRAME)
                        continue;
                CHECK(zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], 0, &idx) == 0);
                f = &zcp_ring_slot(ring, idx)->frame;
                CHECK(!(f->flags & ZCP_FRAME_DROPPED) && f->seq == frames);
                CHECK(f->width == (frames < 5 ? 96u : 64u) && f->bytes == info.frame_bytes);
                zcp_ring_move(ring, idx, ZCP_SLOT_CONVERT, ZCP_SLOT_FREE);
                CHECK(zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx) == 0);
                frames++;
        }
        CHECK_MSG(frames == 10 && reconfigs == 1, "%u frames, %u reconfigures", frames, reconfigs);
        CHECK(zcp_stats_dropped_total(&stats) == 0);
        ops->stop(src, ring);
        ops->close(src);
        zcp_ring_free(ring);
        alarm(0);
}

/*
 * An H.264 elementary stream whose second half is 64x48 after 96x64: the
 * ring is made for 96x64, so the later frames are dropped as OVERSIZE
 * (counted, never written into the slot), and the stream still ends cleanly.
 */
static void test_geometry_change(void)
{
        static const char *const encoders[] = { "openh264enc", "x264enc" };
        char a[sizeof(tmpdir) + 64], b[sizeof(a)], path[sizeof(a)], desc[sizeof(a) + 256];
        const char *enc = NULL;
        struct zcp_stream_config cfg;
        struct run r;
        uint8_t *buf;
        size_t na, nb;
        FILE *f;

        for (size_t i = 0; i < G_N_ELEMENTS(encoders) && !enc; i++) {
                GstElementFactory *fac = gst_element_factory_find(encoders[i]);

                if (fac) {
                        enc = encoders[i];
                        gst_object_unref(fac);
                }
        }
        if (!enc) {
                printf("skip geometry change: no H.264 encoder (openh264enc, x264enc) to make the fixture\n");
                return;
        }
        snprintf(a, sizeof(a), "%s/a.h264", tmpdir);
        snprintf(b, sizeof(b), "%s/b.h264", tmpdir);
        snprintf(path, sizeof(path), "%s/resize.h264", tmpdir);
        snprintf(desc, sizeof(desc), "videotestsrc num-buffers=5 ! video/x-raw,width=96,height=64,framerate=10/1 ! %s ! "
                 "h264parse ! video/x-h264,stream-format=byte-stream ! filesink location=\"%s\"", enc, a);
        gst_run(desc);
        snprintf(desc, sizeof(desc), "videotestsrc num-buffers=5 ! video/x-raw,width=64,height=48,framerate=10/1 ! %s ! "
                 "h264parse ! video/x-h264,stream-format=byte-stream ! filesink location=\"%s\"", enc, b);
        gst_run(desc);
        /* concatenate a and b */
        f = fopen(a, "rbe");
        CHECK(f && fseek(f, 0, SEEK_END) == 0);
        na = (size_t)ftell(f);
        fclose(f);
        f = fopen(b, "rbe");
        CHECK(f && fseek(f, 0, SEEK_END) == 0);
        nb = (size_t)ftell(f);
        fclose(f);
        buf = malloc(na + nb);
        CHECK(buf);
        f = fopen(a, "rbe");
        CHECK(f && fread(buf, 1, na, f) == na);
        fclose(f);
        f = fopen(b, "rbe");
        CHECK(f && fread(buf + na, 1, nb, f) == nb);
        fclose(f);
        write_file(path, buf, na + nb);
        free(buf);
        unlink(a);
        unlink(b);

        cfg = make_cfg(path, ZCP_PACE_FAST, false);
        play(&cfg, 0, false, &r);
        CHECK_MSG(r.open_rc == 0, "open: %s", strerror(-r.open_rc));
        CHECK(r.info.width == 96 && r.info.height == 64);
        CHECK_MSG(r.end_rc == ZCP_SOURCE_EOS && r.frames == 10 && r.seq_ok, "end %d, %u frames", r.end_rc, r.frames);
        CHECK_MSG(r.dropped == 5 && atomic_load(&stats.dropped[ZCP_DROP_OVERSIZE]) == 5, "%u dropped", r.dropped);
        CHECK(atomic_load(&stats.captured) == 10 && atomic_load(&stats.copies) + atomic_load(&stats.slot_direct) == 5);
        geometry_reconfigure(&cfg);
        unlink(path);
        printf("ok geometry change (%s): 5 frames 96x64, then 5 of 64x48 dropped as oversize; with "
               "reconfigure: 5 + 5 frames, one RECONFIGURE, nothing dropped\n", enc);
}

/* Garbage over the mdat at 40 % and 60 %: the decoder goes on, losses show in decode_gaps. */
static void test_corrupt(void)
{
        char path[sizeof(tmpdir) + 64];
        struct zcp_stream_config cfg;
        struct run r;
        uint8_t *buf;
        size_t n;
        uint64_t s = 42, gaps, corrupt, timeline;
        double t;
        uint64_t t0;

        buf = read_sample(&n);
        for (int k = 0; k < 2; k++) {
                size_t at = n * (k == 0 ? 40 : 60) / 100;

                CHECK(at + 4096 < n - 2000);   /* inside mdat: moov is the last ~1.4 KB */
                for (size_t i = 0; i < 4096; i++)
                        buf[at + i] = (uint8_t)(xorshift(&s) >> 24);
        }
        snprintf(path, sizeof(path), "%s/corrupt.mp4", tmpdir);
        write_file(path, buf, n);
        free(buf);

        cfg = make_cfg(path, ZCP_PACE_FAST, false);
        t0 = zcp_now_ns();
        play(&cfg, 0, false, &r);
        t = (double)(zcp_now_ns() - t0) / 1e9;
        CHECK_MSG(r.open_rc == 0, "open: %s", strerror(-r.open_rc));
        CHECK_MSG(r.end_rc == ZCP_SOURCE_EOS, "corrupt file ended with %d after %u frames", r.end_rc, r.frames);
        gaps = atomic_load(&stats.decode_gaps);
        corrupt = atomic_load(&stats.dropped[ZCP_DROP_CORRUPT]);
        CHECK(r.seq_ok && r.capture_ts_ok);
        CHECK(atomic_load(&stats.captured) == r.frames);
        /* played to the end: the last frame of the file came out */
        CHECK_MSG(r.last_pts == (SAMPLE_FRAMES - 1) * FRAME_NS, "last pts %llu", (unsigned long long)r.last_pts);
        /*
         * The container holds 150 frames (the demuxer hands out every one,
         * damaged or not): each is either delivered (maybe dropped as
         * corrupt) or counted as a gap, and expected/delivered say so.
         */
        timeline = (r.last_pts - r.first_pts) / FRAME_NS + 1;
        CHECK_MSG(r.frames + gaps == SAMPLE_FRAMES, "%u frames + %llu gaps != %u", r.frames,
                  (unsigned long long)gaps, SAMPLE_FRAMES);
        CHECK(atomic_load(&stats.file_frames_expected) == SAMPLE_FRAMES);
        CHECK(atomic_load(&stats.file_frames_delivered) == r.frames);
        /* and the damage was noticed: frames lost (gaps) or flagged corrupt */
        CHECK_MSG(gaps + corrupt > 0, "%u frames, no gap and no corrupt frame reported", r.frames);
        printf("ok corrupt: %u frames (%u dropped as corrupt), decode_gaps %llu, timeline %llu, %.2f s\n",
               r.frames, r.dropped, (unsigned long long)gaps, (unsigned long long)timeline, t);
        unlink(path);
}

static void on_alarm(int sig)
{
        static const char msg[] = "test_file_source: a case hung (alarm)\n";

        (void)sig;
        if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
                _exit(1);
        abort();
}

/* A failed CHECK (or the alarm) aborts: the temp dir stays; say where, on the real stderr even
 * while a case captures it. */
static void on_abort(int sig)
{
        int fd = saved_stderr >= 0 ? saved_stderr : STDERR_FILENO;

        (void)sig;
        if (getpid() == main_pid && kept_line[0]) {
                ssize_t n = write(fd, kept_line, strlen(kept_line));

                (void)n;   /* nothing to do about it: the abort goes on */
        }
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)flag;
        (void)ftw;
        return remove(path);
}

/* At exit: passed or skipped (exit 77), nothing to inspect; whatever a case left goes too. */
static void remove_tmpdir(void)
{
        if (getpid() == main_pid && nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
                fprintf(stderr, "cannot remove %s: %s\n", tmpdir, strerror(errno));
}

int main(void)
{
        struct stat st;
        uint64_t t0 = zcp_now_ns();

        signal(SIGALRM, on_alarm);
        snprintf(sample, sizeof(sample), "%s/samples/vtest-h264.mp4", zcp_test_src_root());
        if (sample[0] != '/') {
                char cwd[512];

                CHECK(getcwd(cwd, sizeof(cwd)));
                snprintf(sample, sizeof(sample), "%s/%s/samples/vtest-h264.mp4", cwd, zcp_test_src_root());
        }
        CHECK_MSG(stat(sample, &st) == 0, "%s: %s", sample, strerror(errno));
        main_pid = getpid();
        CHECK(mkdtemp(tmpdir));
        snprintf(kept_line, sizeof(kept_line), "kept for inspection: %s\n", tmpdir);
        signal(SIGABRT, on_abort);
        CHECK(atexit(remove_tmpdir) == 0);
        gst_init(NULL, NULL);

        reference_decode();
        test_fast();
        test_uri();
        test_decoder_threads();
        test_loop();
        test_realtime();
        test_backpressure();
        test_restart();
        test_bad_inputs();
        test_no_video();
        test_raw_formats();
        test_geometry_change();
        test_corrupt();

        printf("test_file_source: all passed in %.1f s\n", (double)(zcp_now_ns() - t0) / 1e9);
        return 0;
}
#endif
