/* SPDX-License-Identifier: MIT */
/*
 * The `file` source's decoders writing straight into ring slots
 * (src/capture/gst_pool.c), run with avdec_h264 and avdec_mjpeg ranked out
 * (meson sets GST_PLUGIN_FEATURE_RANK) so that the allowlisted openh264dec
 * and jpegdec decode, as on a machine without gst-libav (the GPU bundle):
 *
 * - H.264 (samples/vtest-h264.mp4, openh264dec) looping over 2 rewinds
 *   through a 4-slot ring: every frame byte-equal to what an explicitly built
 *   pipeline decodes, seq in order, copies + slot_direct = frames delivered,
 *   most of them direct; after stop() every slot is free and in the free
 *   queue (no slot leaked, none queued twice);
 * - the same with a 2-slot ring held full (back-pressure), then stop with a
 *   sample pending and slots lent: all slots back;
 * - stop() and start() again on the same ring: direct again, counts add up;
 * - MJPEG in AVI (jpegdec), made here by gst-launch: bytes equal, direct;
 * - decoder_threads: the bound line is said.
 * A missing decoder or encoder skips that case; none available: exit 77.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
#include "core/metrics.h"
#include "core/pixfmt.h"
#include "core/ring.h"

#define MAX_REF      256
#define CASE_ALARM_S 30

static char tmpdir[] = "/tmp/zcp-filedirect-XXXXXX";
static struct zcp_stream_stats stats;

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
        uint64_t h = 14695981039346656037ULL;

        for (size_t i = 0; i < n; i++) {
                h ^= p[i];
                h *= 1099511628211ULL;
        }
        return h;
}

/*
 * Checksums of each frame `desc` (ending in "appsink name=s") decodes, its
 * planes packed tightly (pixfmt.h's layout): what a slot must hold.
 */
static uint32_t reference(const char *desc, uint64_t sums[MAX_REF])
{
        GError *err = NULL;
        GstElement *pipe = gst_parse_launch(desc, &err), *sink;
        uint32_t n = 0;

        CHECK_MSG(pipe && !err, "%s: %s", desc, err ? err->message : "?");
        sink = gst_bin_get_by_name(GST_BIN(pipe), "s");
        CHECK(gst_element_set_state(pipe, GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE);
        for (GstSample *s; n < MAX_REF && (s = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND));) {
                GstVideoInfo vi;
                GstVideoFrame vf;
                static uint8_t tight[4096 * 2160 * 3];
                size_t off = 0;

                CHECK(gst_video_info_from_caps(&vi, gst_sample_get_caps(s)));
                CHECK(gst_video_frame_map(&vf, &vi, gst_sample_get_buffer(s), GST_MAP_READ));
                for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(&vf); p++) {
                        size_t row = (size_t)GST_VIDEO_FRAME_COMP_WIDTH(&vf, p) * GST_VIDEO_FRAME_COMP_PSTRIDE(&vf, p);

                        if (GST_VIDEO_FORMAT_INFO_IS_YUV(vi.finfo) && GST_VIDEO_FRAME_N_PLANES(&vf) == 2 && p == 1)
                                row = (size_t)GST_VIDEO_FRAME_WIDTH(&vf);   /* NV12's interleaved chroma */
                        for (int y = 0; y < GST_VIDEO_FRAME_COMP_HEIGHT(&vf, p); y++, off += row)
                                memcpy(tight + off,
                                       (const uint8_t *)GST_VIDEO_FRAME_PLANE_DATA(&vf, p) +
                                               (size_t)y * GST_VIDEO_FRAME_PLANE_STRIDE(&vf, p),
                                       row);
                }
                gst_video_frame_unmap(&vf);
                sums[n++] = fnv1a(tight, off);
                gst_sample_unref(s);
        }
        gst_element_set_state(pipe, GST_STATE_NULL);
        gst_object_unref(sink);
        gst_object_unref(pipe);
        return n;
}

static bool have(const char *factory)
{
        GstElementFactory *f = gst_element_factory_find(factory);

        if (f)
                gst_object_unref(f);
        return f != NULL;
}

static void gst_run(const char *desc)
{
        GError *err = NULL;
        GstElement *pipe = gst_parse_launch(desc, &err);
        GstMessage *msg;

        CHECK_MSG(pipe && !err, "%s: %s", desc, err ? err->message : "?");
        CHECK(gst_element_set_state(pipe, GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE);
        msg = gst_bus_timed_pop_filtered(GST_ELEMENT_BUS(pipe), 20 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
        CHECK_MSG(msg && GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS, "%s did not finish", desc);
        gst_message_unref(msg);
        gst_element_set_state(pipe, GST_STATE_NULL);
        gst_object_unref(pipe);
}

/* Every slot free and queued once in the free queue: nothing leaked, nothing twice. */
static void check_all_free(struct zcp_ring *ring, const char *when)
{
        bool seen[256] = { false };
        uint32_t n = zcp_spsc_count(&ring->q[ZCP_Q_FREE]);

        CHECK_MSG(n == ring->count, "%s: %u of %u slots in the free queue", when, n, ring->count);
        for (uint32_t i = 0; i < ring->count; i++) {
                uint32_t idx;

                CHECK_MSG(atomic_load(&ring->slots[i].state) == ZCP_SLOT_FREE, "%s: slot %u is %s", when, i,
                          zcp_slot_state_names[atomic_load(&ring->slots[i].state)]);
                CHECK(zcp_spsc_pop(&ring->q[ZCP_Q_FREE], 0, &idx) == 0 && idx < ring->count && !seen[idx]);
                seen[idx] = true;
                CHECK(zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx) == 0);
        }
}

static struct zcp_stream_config make_cfg(const char *path, bool loop)
{
        struct zcp_stream_config c;

        memset(&c, 0, sizeof(c));
        snprintf(c.name, sizeof(c.name), "direct-test");
        c.source.type = ZCP_SOURCE_FILE;
        snprintf(c.source.path, sizeof(c.source.path), "%s", path);
        c.source.pace = ZCP_PACE_FAST;
        c.source.loop = loop;
        c.source.decoder_threads = 1;
        return c;
}

struct result {
        uint32_t frames, bad_bytes, bad_seq;
};

/* Takes every frame the source gives into "convert" and frees it at once, as the stages would. */
static int drain(const struct zcp_source_ops *ops, struct zcp_source_ctx *src, struct zcp_ring *ring,
                 const uint64_t *ref, uint32_t nref, uint32_t max, struct result *res)
{
        const uint32_t base = res->frames;   /* a start after a stop plays the file from its start */

        for (;;) {
                int r = ops->next(src, ring);
                uint32_t idx;
                struct zcp_slot *s;

                if (r == ZCP_SOURCE_AGAIN)
                        continue;
                if (r != ZCP_SOURCE_FRAME)
                        return r;
                CHECK(zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], 0, &idx) == 0);
                s = zcp_ring_slot(ring, idx);
                CHECK(!(s->frame.flags & ZCP_FRAME_DROPPED) && s->frame.bytes > 0);
                if (s->frame.seq != res->frames)
                        res->bad_seq++;
                if (fnv1a(s->data, s->frame.bytes) != ref[(s->frame.seq - base) % nref]) {
                        if (!res->bad_bytes)
                                fprintf(stderr, "frame %llu (%u bytes, %s): %016llx, the reference %016llx\n",
                                        (unsigned long long)s->frame.seq, (unsigned)s->frame.bytes,
                                        zcp_pixfmt_name(s->frame.fmt),
                                        (unsigned long long)fnv1a(s->data, s->frame.bytes),
                                        (unsigned long long)ref[(s->frame.seq - base) % nref]);
                        res->bad_bytes++;
                }
                zcp_ring_move(ring, idx, ZCP_SLOT_CONVERT, ZCP_SLOT_FREE);
                CHECK(zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx) == 0);
                if (++res->frames == max)
                        return ZCP_SOURCE_FRAME;
        }
}

/* Plays `path` (loop) for `want` frames through a `slots`-slot ring; checks bytes, order, counts, slots. */
static void play_direct(const char *what, const char *path, const uint64_t *ref, uint32_t nref, uint32_t slots,
                        uint32_t want)
{
        struct zcp_stream_config cfg = make_cfg(path, true);
        const struct zcp_source_ops *ops = &zcp_source_file;
        struct zcp_source_ctx *src = NULL;
        struct zcp_source_info info;
        struct zcp_ring *ring = NULL;
        struct result res = { 0 };
        uint64_t direct, copies;
        int r;

        zcp_stream_stats_init(&stats);
        alarm(CASE_ALARM_S);
        CHECK(ops->open(&cfg, &stats, &src, &info) == 0);
        CHECK(zcp_ring_new(slots, info.frame_bytes, 0, &zcp_host_allocator, &stats, &ring) == 0);
        for (int pass = 0; pass < 2; pass++) {
                CHECK(ops->start(src, ring) == 0);
                r = drain(ops, src, ring, ref, nref, want * (pass + 1), &res);
                CHECK_MSG(r == ZCP_SOURCE_FRAME, "%s: ended with %d after %u frames", what, r, res.frames);
                ops->stop(src, ring);
                check_all_free(ring, what);
        }
        ops->close(src);
        zcp_ring_free(ring);
        alarm(0);
        direct = atomic_load(&stats.slot_direct);
        copies = atomic_load(&stats.copies);
        CHECK_MSG(res.bad_bytes == 0 && res.bad_seq == 0, "%s: %u frames differ, %u out of order", what,
                  res.bad_bytes, res.bad_seq);
        CHECK_MSG(copies + direct == res.frames && atomic_load(&stats.captured) == res.frames,
                  "%s: %llu copies + %llu direct != %u frames", what, (unsigned long long)copies,
                  (unsigned long long)direct, res.frames);
        /* the preroll and the first frame after each rewind may be copied; the rest land in their slot */
        CHECK_MSG(direct >= res.frames / 2, "%s: only %llu of %u frames direct", what, (unsigned long long)direct,
                  res.frames);
        printf("ok %s: %u frames through %u slots (stop/start once), bytes equal, %llu direct + %llu copied, all "
               "slots free after each stop\n",
               what, res.frames, slots, (unsigned long long)direct, (unsigned long long)copies);
}

/* A 2-slot ring held full: next() keeps its sample, lent slots stay accounted; stop with it pending. */
static void held_full(const char *path)
{
        struct zcp_stream_config cfg = make_cfg(path, false);
        const struct zcp_source_ops *ops = &zcp_source_file;
        struct zcp_source_ctx *src = NULL;
        struct zcp_source_info info;
        struct zcp_ring *ring = NULL;
        uint32_t got = 0, again = 0;

        zcp_stream_stats_init(&stats);
        alarm(CASE_ALARM_S);
        CHECK(ops->open(&cfg, &stats, &src, &info) == 0);
        CHECK(zcp_ring_new(2, info.frame_bytes, 0, &zcp_host_allocator, &stats, &ring) == 0);
        CHECK(ops->start(src, ring) == 0);
        while (again < 5) {
                int r = ops->next(src, ring);

                CHECK(r == ZCP_SOURCE_FRAME || r == ZCP_SOURCE_AGAIN);
                if (r == ZCP_SOURCE_FRAME)
                        got++;
                else if (got == 2)
                        again++;
        }
        CHECK(got == 2 && zcp_stats_dropped_total(&stats) == 0);
        /* the stages give both back: the source (and the decoder) go on */
        for (int i = 0; i < 2; i++) {
                uint32_t idx;

                CHECK(zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], 0, &idx) == 0);
                CHECK(zcp_ring_slot(ring, idx)->frame.seq == (uint64_t)i);
                zcp_ring_move(ring, idx, ZCP_SLOT_CONVERT, ZCP_SLOT_FREE);
                CHECK(zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx) == 0);
        }
        while (ops->next(src, ring) != ZCP_SOURCE_FRAME)
                ;
        /* one slot in convert, the other lent to the decoder or waiting: a few more tries, then stop */
        for (int i = 0; i < 3; i++) {
                int r = ops->next(src, ring);

                CHECK(r == ZCP_SOURCE_FRAME || r == ZCP_SOURCE_AGAIN);
        }
        /* the stages drain before the source stops (pipeline.c) */
        for (uint32_t idx; zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], 0, &idx) == 0;) {
                zcp_ring_move(ring, idx, ZCP_SLOT_CONVERT, ZCP_SLOT_FREE);
                CHECK(zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx) == 0);
        }
        ops->stop(src, ring);
        check_all_free(ring, "held full");
        ops->close(src);
        zcp_ring_free(ring);
        alarm(0);
        printf("ok held full: AGAIN with both slots held, nothing dropped; stop with slots lent: all free\n");
}

static void on_alarm(int sig)
{
        (void)sig;
        fprintf(stderr, "a case took more than %d s (hung?)\n", CASE_ALARM_S);
        abort();
}

int main(void)
{
        static uint64_t ref[MAX_REF];
        char sample[ZCP_PATH_MAX], path[sizeof(tmpdir) + 32], desc[2 * ZCP_PATH_MAX];
        uint32_t n, cases = 0;
        struct stat st;

        signal(SIGALRM, on_alarm);
        snprintf(sample, sizeof(sample), "%s/samples/vtest-h264.mp4", zcp_test_src_root());
        if (sample[0] != '/') {
                char cwd[512];

                CHECK(getcwd(cwd, sizeof(cwd)));
                snprintf(sample, sizeof(sample), "%s/%s/samples/vtest-h264.mp4", cwd, zcp_test_src_root());
        }
        CHECK_MSG(stat(sample, &st) == 0, "%s: %s", sample, strerror(errno));
        CHECK(mkdtemp(tmpdir));
        gst_init(NULL, NULL);

        if (have("openh264dec")) {
                GstElementFactory *av = gst_element_factory_find("avdec_h264");

                /* decodebin must pick openh264dec: avdec_h264 ranked out (or absent) */
                if (!av || gst_plugin_feature_get_rank(GST_PLUGIN_FEATURE(av)) < GST_RANK_MARGINAL) {
                        snprintf(desc, sizeof(desc),
                                 "filesrc location=\"%s\" ! qtdemux ! h264parse ! openh264dec ! appsink name=s sync=false",
                                 sample);
                        n = reference(desc, ref);
                        CHECK(n == 150);
                        play_direct("h264 (openh264dec)", sample, ref, n, 4, 2 * n + 60);
                        held_full(sample);
                        cases++;
                } else {
                        printf("skip h264: avdec_h264 not ranked out (run through meson: GST_PLUGIN_FEATURE_RANK)\n");
                }
                if (av)
                        gst_object_unref(av);
        } else {
                printf("skip h264: no openh264dec\n");
        }
        if (have("jpegenc") && have("jpegdec") && have("avimux") && have("avidemux")) {
                snprintf(path, sizeof(path), "%s/mjpeg.avi", tmpdir);
                snprintf(desc, sizeof(desc),
                         "videotestsrc pattern=ball num-buffers=40 ! video/x-raw,format=I420,width=320,height=240,"
                         "framerate=30/1 ! jpegenc ! avimux ! filesink location=\"%s\"", path);
                gst_run(desc);
                snprintf(desc, sizeof(desc), "filesrc location=\"%s\" ! avidemux ! jpegdec ! appsink name=s sync=false",
                         path);
                n = reference(desc, ref);
                CHECK(n == 40);
                play_direct("mjpeg (jpegdec)", path, ref, n, 4, 100);
                unlink(path);
                cases++;
        } else {
                printf("skip mjpeg: no jpegenc/jpegdec/avimux/avidemux\n");
        }
        rmdir(tmpdir);
        if (!cases) {
                printf("SKIP: no allowlisted decoder to test\n");
                return ZCP_TEST_SKIP;
        }
        printf("test_file_direct: all passed (%u formats)\n", cases);
        return 0;
}
#endif
