/* SPDX-License-Identifier: MIT */
/*
 * The v4l2 source (src/capture/v4l2.c) against the fake camera
 * (tests/fakecam): the real capture code, unchanged, with libv4l2's entry
 * points replaced through LD_PRELOAD. Each scenario runs in a child process
 * started with its own FAKECAM_* environment (the fake is configured at load);
 * the parent makes the frames and the node files in a temp dir and collects
 * the verdicts. `itest_v4l2 NAME...` runs only the named scenarios.
 *
 * - formats: YUYV, UYVY, YVYU, NV12, NV21, YU12, YV12 (some with padded
 *   rows), RGB24, BGR24, BGRX (XR24 and BGR4), RGBX, GREY bit-exact in the
 *   slot, userptr (direct) and mmap (registered: the driver's buffers lent
 *   to slots and read in place; copy, counted, when the allocator cannot map
 *   them, refuses, or the buffers cannot hold the converted frame), and the
 *   fallback to mmap when the driver refuses USERPTR or the ring's memory
 *   (EFAULT); auto format choice; timestamps (monotonic: the driver's; else
 *   dequeue time);
 * - MJPEG: 4:2:0, 4:2:2, 4:4:4 and grey JPEGs made with libturbojpeg,
 *   decoded into I420 and compared with tjDecompressToYUVPlanes + the
 *   documented chroma reduction; a truncated and a wrong-size JPEG dropped;
 * - every fault of issue 4 §4 (flag error, short, oversize, bad index,
 *   duplicate index, sequence gap, ENODEV, EIO, stall), counters equal to the
 *   fake's injection counts, no protocol violation, frames still bit-exact;
 * - every slot downstream longer than timeout_ms: no reconnect; lost frames
 *   counted as ring-full (userptr) / frames without a slot (mmap);
 * - device absent at start (back-off, next() <= ~100 ms), refused
 *   S_FMT/REQBUFS/STREAMON, impossible configs (ZCP_ERR_CONFIG);
 * - a by-id style symlink re-resolved on reconnect;
 * - lent buffers across a reconnect: retired, still intact while read, never
 *   queued on the new fd, unmapped from the allocator (never while a slot
 *   reads them) and then munmapped once their slots return;
 * - format auto with the camera absent at start, from config/camera.yaml
 *   itself: the provisional ring (BGRX), back-off, one RECONFIGURE when the
 *   YUYV camera appears, then whole frames; a caller without reconfigure
 *   support gets a config error then; a camera in the provisional format
 *   streams into the first ring; an MJPEG-only camera gets its decoder with
 *   the new ring (decoded frames equal the reference decodes);
 * - a source change (resize:WxH, V4L2_EVENT_SOURCE_CHANGE) smaller and
 *   larger, on userptr, mmap read in place (lent buffers returned first, or
 *   held across the change and unmapped at stop), mmap copied and MPLANE:
 *   exactly one RECONFIGURE, whole frames of the new size after it, the
 *   mismatched frames dropped and counted; without reconfigure support:
 *   every later frame dropped, none handed on;
 * - multi-planar only nodes (FAKECAM_MPLANE): YUYV and NV12 (also padded) on
 *   userptr, mmap registered and copied, the faults on mmap, bit-exact, no
 *   single-planar call (the fake counts those as violations);
 * - 1000 disconnect/reconnect cycles (userptr, mmap registered and mmap copy)
 *   with the fd count and RSS flat and never two device fds open at once;
 * - the whole pipeline: YUYV and NV12 frames (userptr; YUYV also mmap,
 *   converted in place in the driver's buffer) through convert and the CPU
 *   backend, each published result equal to the CPU reference run on our own
 *   conversion of the fake's frame;
 * - the daemon: zcpipe on the fake streams and stops on SIGTERM, and a
 *   SIGTERM during back-off exits 0 within 2 s; config/camera.yaml, with only
 *   the device path (and the metrics port) changed, runs against a 1280x720
 *   fake camera: every frame published as a JSON line, exit 0 on SIGTERM;
 *   and with the camera absent throughout, it starts, waits, exits 0;
 * - the hw suite's own checks (tests/hw, meant for vivid or a real camera)
 *   pass against the fake at 640x480, so that a failure on a real node is
 *   the node's.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "json_strict.h"

#if !HAVE_V4L2
int main(void)
{
        printf("SKIP: built without V4L2 support: no v4l2 source\n");
        return ZCP_TEST_SKIP;
}
#else

#include <turbojpeg.h>

#include "capture/source.h"
#include "convert/convert.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/pixfmt.h"
#include "core/ring.h"
#include "infer/backend.h"
#include "model/model.h"
#include "output/publish.h"
#include "pipeline.h"

#define W        64
#define H        48
#define NFRAMES  5
#define NJPEG    6      /* 420, 422, 444, grey, truncated, 32x24 */
#define JPEG_BAD_TRUNC 4
#define JPEG_BAD_SIZE  5

/* ---- shared by parent and child --------------------------------------- */

static uint8_t pattern(size_t i, uint32_t j)
{
        uint32_t h = (uint32_t)i * 2654435761u ^ (j + 1u) * 40503u;

        h ^= h >> 13;
        h *= 0x5bd1e995u;
        h ^= h >> 15;
        return (uint8_t)h;
}

static void make_frame(uint8_t *dst, size_t size, uint32_t j)
{
        for (size_t i = 0; i < size; i++)
                dst[i] = pattern(i, j);
}

static const struct {
        enum zcp_pixfmt fmt;
        const char *fourcc, *name;
} fmt_table[] = {
        { ZCP_PIX_YUYV, "YUYV", "yuyv" },   { ZCP_PIX_UYVY, "UYVY", "uyvy" },   { ZCP_PIX_YVYU, "YVYU", "yvyu" },
        { ZCP_PIX_NV12, "NV12", "nv12" },   { ZCP_PIX_NV21, "NV21", "nv21" },   { ZCP_PIX_I420, "YU12", "i420" },
        { ZCP_PIX_YV12, "YV12", "yv12" },   { ZCP_PIX_RGB24, "RGB3", "rgb24" }, { ZCP_PIX_BGR24, "BGR3", "bgr24" },
        { ZCP_PIX_BGRX, "XR24", "bgrx" },   { ZCP_PIX_RGBX, "XB24", "rgbx" },   { ZCP_PIX_GREY, "GREY", "grey" },
};
#define FMT_COUNT (sizeof(fmt_table) / sizeof(fmt_table[0]))

static void write_file(const char *path, const void *data, size_t len)
{
        FILE *fp = fopen(path, "wb");

        CHECK_MSG(fp, "%s: %s", path, strerror(errno));
        CHECK(fwrite(data, 1, len, fp) == len);
        CHECK(fclose(fp) == 0);
}

/* An RGB picture with smooth content (so the JPEG is realistic) that differs per j. */
static void make_rgb(uint8_t *rgb, uint32_t w, uint32_t h, uint32_t j)
{
        for (uint32_t y = 0; y < h; y++) {
                for (uint32_t x = 0; x < w; x++) {
                        uint8_t *p = rgb + 3 * ((size_t)y * w + x);
                        bool box = x >= 8 + 6 * j && x < 24 + 6 * j && y >= 10 && y < 30;

                        p[0] = (uint8_t)(box ? 230 : x * 4);
                        p[1] = (uint8_t)(box ? 40 : y * 5);
                        p[2] = (uint8_t)((x + y) * 2 + 40 * j);
                }
        }
}

static size_t jpeg_encode(tjhandle tj, uint32_t w, uint32_t h, int samp, uint32_t j, uint8_t *out, size_t cap)
{
        uint8_t *rgb = malloc((size_t)w * h * 3);
        unsigned char *jpeg = NULL;
        unsigned long len = 0;
        int r;

        CHECK(rgb);
        make_rgb(rgb, w, h, j);
        r = tjCompress2(tj, rgb, (int)w, 0, (int)h, TJPF_RGB, &jpeg, &len, samp, 90, 0);
        CHECK_MSG(r == 0, "tjCompress2: %s", tjGetErrorStr2(tj));
        CHECK(len <= cap);
        memcpy(out, jpeg, len);
        tjFree(jpeg);
        free(rgb);
        return len;
}

/* The MJPEG sample: NJPEG concatenated JPEGs. */
static size_t make_mjpeg(uint8_t *out, size_t cap)
{
        static const int samps[4] = { TJSAMP_420, TJSAMP_422, TJSAMP_444, TJSAMP_GRAY };
        tjhandle tj = tjInitCompress();
        size_t len = 0, n;

        CHECK(tj);
        for (int i = 0; i < 4; i++)
                len += jpeg_encode(tj, W, H, samps[i], (uint32_t)i, out + len, cap - len);
        /* Truncated: the first 60 % of a good one, then an end marker. */
        n = jpeg_encode(tj, W, H, TJSAMP_420, 7, out + len, cap - len);
        n = n * 6 / 10;
        out[len + n] = 0xff;
        out[len + n + 1] = 0xd9;
        len += n + 2;
        /* Wrong size for the stream. */
        len += jpeg_encode(tj, 32, 24, TJSAMP_420, 8, out + len, cap - len);
        tjDestroy(tj);
        return len;
}

/* ---- child: helpers ----------------------------------------------------- */

static const char *dir;
static long long (*fake_stat)(const char *name);
static const char *(*fake_last_node)(void);

static long long fstat_(const char *name)
{
        long long v;

        CHECK_MSG(fake_stat, "the fake camera is not loaded (LD_PRELOAD)");
        v = fake_stat(name);
        CHECK_MSG(v >= 0, "fakecam has no counter %s", name);
        return v;
}

static uint64_t now_ms(void)
{
        return zcp_now_ns() / ZCP_NSEC_PER_MSEC;
}

/*
 * The rig's ring allocator: host memory, and map() as TEST_ALLOC says:
 * default, it maps (as the host allocator does) and checks that every mapped
 * buffer is unmapped exactly once and never while a slot still reads it;
 * "nomap": no map() (frames are copied); "failmap": map() refuses.
 */
#define TA_MAX 64
static struct {
        struct zcp_ring *ring;
        void *host[TA_MAX];
        size_t bytes[TA_MAX];
        long maps, unmaps, refused;
        bool fail;
} ta;

static int ta_map(void *ctx, void *host, size_t bytes, void **ret_dev)
{
        int free_i = -1;

        if (ta.fail) {
                ta.refused++;
                return -EOPNOTSUPP;
        }
        CHECK_MSG(((uintptr_t)host & 4095) == 0 && bytes % 4096 == 0 && bytes > 0, "map(%p, %zu)", host, bytes);
        for (int i = 0; i < TA_MAX; i++) {
                CHECK_MSG(ta.host[i] != host, "%p mapped twice", host);
                if (!ta.host[i] && free_i < 0)
                        free_i = i;
        }
        CHECK(free_i >= 0);
        ta.host[free_i] = host;
        ta.bytes[free_i] = bytes;
        ta.maps++;
        *ret_dev = NULL;
        return 0;
}

static void ta_unmap(void *ctx, void *host)
{
        for (int i = 0; i < TA_MAX; i++) {
                if (ta.host[i] != host)
                        continue;
                for (uint32_t j = 0; ta.ring && j < ta.ring->count; j++) {
                        const struct zcp_slot *s = zcp_ring_slot(ta.ring, j);

                        CHECK_MSG(!(s->lent && s->data >= (uint8_t *)host && s->data < (uint8_t *)host + ta.bytes[i]),
                                  "buffer %p unmapped while slot %u reads it", host, j);
                }
                ta.host[i] = NULL;
                ta.unmaps++;
                return;
        }
        CHECK_MSG(0, "unmap(%p): not mapped", host);
}

static struct zcp_allocator rig_allocator(void)
{
        struct zcp_allocator a = zcp_host_allocator;
        const char *kind = getenv("TEST_ALLOC");

        a.name = "test";
        a.map = ta_map;
        a.unmap = ta_unmap;
        if (kind && strcmp(kind, "nomap") == 0) {
                a.map = NULL;
                a.unmap = NULL;
        }
        ta.fail = kind && strcmp(kind, "failmap") == 0;
        return a;
}

struct rig {
        struct zcp_config *config;
        const struct zcp_stream_config *cfg;
        const struct zcp_source_ops *ops;
        struct zcp_source_ctx *src;
        struct zcp_source_info info;
        struct zcp_stream_stats stats;
        struct zcp_ring *ring;
        uint32_t down[256], ndown, hold;   /* slots "downstream" (FIFO), how many to keep */
        uint64_t frames;                   /* frames received */
        uint64_t max_call_ns;
        uint64_t last_seq;
        bool have_seq;
        bool started, opened;
        uint32_t reconfigs;                /* RECONFIGUREs handled */
};

typedef void (*frame_fn)(struct rig *g, struct zcp_slot *s, void *arg);

static void yaml(char *buf, size_t n, const char *device, const char *source_lines, uint32_t slots)
{
        snprintf(buf, n,
                 "streams:\n"
                 "  - name: cam\n"
                 "    source:\n"
                 "      type: v4l2\n"
                 "      device: %s\n"
                 "%s"
                 "    ring:\n"
                 "      slots: %u\n"
                 "    gpu:\n"
                 "      backend: cpu\n"
                 "    output:\n"
                 "      type: none\n"
                 "metrics:\n"
                 "  http:\n"
                 "    enabled: false\n",
                 device, source_lines, slots);
}

static struct rig *rig_new_text(const char *text)
{
        struct rig *g = calloc(1, sizeof(*g));
        char err[512];
        int r;

        CHECK(g);
        r = zcp_config_parse("test.yaml", text, strlen(text), &g->config, err, sizeof(err));
        CHECK_MSG(r == 0, "config: %s", err);
        g->cfg = &g->config->streams[0];
        g->ops = zcp_source_find(ZCP_SOURCE_V4L2);
        CHECK(g->ops);
        zcp_stream_stats_init(&g->stats);
        return g;
}

static struct rig *rig_new(const char *source_lines, uint32_t slots)
{
        struct rig *g = calloc(1, sizeof(*g));
        char text[4096], device[ZCP_PATH_MAX], err[512];
        int r;

        CHECK(g);
        snprintf(device, sizeof(device), "%s/video0", dir);
        yaml(text, sizeof(text), device, source_lines, slots);
        r = zcp_config_parse("test.yaml", text, strlen(text), &g->config, err, sizeof(err));
        CHECK_MSG(r == 0, "config: %s", err);
        g->cfg = &g->config->streams[0];
        g->ops = zcp_source_find(ZCP_SOURCE_V4L2);
        CHECK(g->ops);
        zcp_stream_stats_init(&g->stats);
        return g;
}

static int rig_open(struct rig *g)
{
        int r = g->ops->open(g->cfg, &g->stats, &g->src, &g->info);

        g->opened = r == 0;
        return r;
}

static int rig_start(struct rig *g)
{
        size_t bytes = zcp_pixfmt_slot_size(g->info.fmt, g->info.width, g->info.height, g->info.stride);
        struct zcp_allocator a = rig_allocator();
        int r;

        /* Slots sized as pipeline.c sizes them: the frame as captured or converted, the larger. */
        if (bytes < g->info.frame_bytes)
                bytes = g->info.frame_bytes;
        r = zcp_ring_new(g->cfg->ring.slots, bytes, 0, &a, &g->stats, &g->ring);
        CHECK(r == 0);
        ta.ring = g->ring;
        r = g->ops->start(g->src, g->ring);
        g->started = r == 0;
        return r;
}

static void release_down(struct rig *g, uint32_t keep)
{
        while (g->ndown > keep) {
                uint32_t idx = g->down[0];

                memmove(g->down, g->down + 1, (g->ndown - 1) * sizeof(g->down[0]));
                g->ndown--;
                zcp_ring_move(g->ring, idx, ZCP_SLOT_CONVERT, ZCP_SLOT_FREE);
                CHECK(zcp_spsc_push(&g->ring->q[ZCP_Q_FREE], idx) == 0);
        }
}

/* One next(): times it, hands every submitted frame to fn, keeps `hold` slots downstream. */
static int rig_step(struct rig *g, frame_fn fn, void *arg)
{
        uint64_t t0 = zcp_now_ns(), dt;
        uint32_t idx;
        int r = g->ops->next(g->src, g->ring);

        dt = zcp_now_ns() - t0;
        if (dt > g->max_call_ns)
                g->max_call_ns = dt;
        while (zcp_spsc_pop(&g->ring->q[ZCP_Q_CONVERT], 0, &idx) == 0) {
                struct zcp_slot *s = zcp_ring_slot(g->ring, idx);

                CHECK_MSG(!(s->frame.flags & ZCP_FRAME_DROPPED), "the source handed on a dropped frame");
                CHECK(s->frame.t[ZCP_TS_CAPTURE] != 0 && s->frame.t[ZCP_TS_CAPTURE] <= zcp_now_ns());
                CHECK_MSG(!g->have_seq || s->frame.seq > g->last_seq, "seq %llu after %llu",
                          (unsigned long long)s->frame.seq, (unsigned long long)g->last_seq);
                g->last_seq = s->frame.seq;
                g->have_seq = true;
                if (fn)
                        fn(g, s, arg);
                g->frames++;
                g->down[g->ndown++] = idx;
                release_down(g, g->hold);
        }
        return r;
}

/* Downstream drained, stop(): every slot is free again and reads its own memory. */
static void rig_stop(struct rig *g)
{
        release_down(g, 0);
        g->ops->stop(g->src, g->ring);
        CHECK(zcp_spsc_count(&g->ring->q[ZCP_Q_FREE]) == g->ring->count);
        for (uint32_t i = 0; i < g->ring->count; i++) {
                CHECK(atomic_load(&g->ring->slots[i].state) == ZCP_SLOT_FREE);
                CHECK_MSG(!g->ring->slots[i].lent && g->ring->slots[i].data == g->ring->slots[i].own,
                          "slot %u still reads a driver buffer after stop", i);
        }
        CHECK_MSG(ta.maps == ta.unmaps, "%ld driver buffers mapped, %ld unmapped", ta.maps, ta.unmaps);
}

static int rig_start(struct rig *g);

/*
 * What a caller does with ZCP_SOURCE_RECONFIGURE (v4l2.c, "Geometry"): drain
 * the old ring, stop() the source on it, free it, reconfigure() for the new
 * info, make a ring for that and start() on it.
 */
static void rig_reconfigure(struct rig *g)
{
        struct zcp_source_info info;
        int r;

        rig_stop(g);
        g->started = false;
        ta.ring = NULL;
        zcp_ring_free(g->ring);
        g->ring = NULL;
        r = g->ops->reconfigure(g->src, &info);
        CHECK_MSG(r == 0, "reconfigure: %d", r);
        g->info = info;
        g->reconfigs++;
        CHECK(rig_start(g) == 0);
}

static void rig_free(struct rig *g)
{
        if (g->started)
                rig_stop(g);
        ta.ring = NULL;
        if (g->opened)
                g->ops->close(g->src);
        zcp_ring_free(g->ring);
        zcp_config_free(g->config);
        free(g);
}

/* Steps until `frames` frames arrived or `ms` passed; returns frames received. */
static uint64_t rig_run(struct rig *g, uint64_t frames, uint64_t ms, frame_fn fn, void *arg)
{
        uint64_t end = now_ms() + ms;

        while (g->frames < frames && now_ms() < end) {
                int r = rig_step(g, fn, arg);

                CHECK_MSG(r >= 0, "next() failed: %d", r);
        }
        return g->frames;
}

/* The captured invariant: every frame the source counted was submitted or dropped by it. */
static void check_accounting(struct rig *g)
{
        uint64_t captured = atomic_load(&g->stats.captured), dropped = zcp_stats_dropped_total(&g->stats);

        CHECK_MSG(captured == g->frames + dropped, "captured %llu != received %llu + dropped %llu",
                  (unsigned long long)captured, (unsigned long long)g->frames, (unsigned long long)dropped);
}

static void check_fake_clean(void)
{
        CHECK_MSG(fstat_("violations") == 0, "the source broke the V4L2 protocol (see the fakecam lines above)");
        CHECK_MSG(fstat_("open_fds") == 0, "%lld device fds left open", fstat_("open_fds"));
        CHECK_MSG(fstat_("mmaps") == fstat_("munmaps"), "%lld mmaps, %lld munmaps", fstat_("mmaps"), fstat_("munmaps"));
}

static uint64_t dropped(struct rig *g, enum zcp_drop_reason r)
{
        return atomic_load(&g->stats.dropped[r]);
}

/* ---- raw frame checks --------------------------------------------------- */

struct raw_check {
        enum zcp_pixfmt fmt;
        uint32_t stride;         /* expected in the slot */
        uint8_t *ref[NFRAMES];   /* tight frames */
        bool any_order;          /* faults: any reference frame may come */
        enum { ANY_MEMORY, LENT, OWN } memory; /* where frames must be: a driver buffer lent to the slot, or the slot */
        bool ts_monotonic;
        uint64_t t_before;
};

/* Compares a slot frame with stride against a tight reference (pixfmt.h plane layout). */
static bool same_frame(enum zcp_pixfmt fmt, const uint8_t *data, uint32_t stride, const uint8_t *ref)
{
        uint32_t mb = zcp_pixfmt_min_stride(fmt, W);

        for (uint32_t y = 0; y < H; y++) {
                if (memcmp(data + (size_t)y * stride, ref + (size_t)y * mb, mb) != 0)
                        return false;
        }
        if (fmt == ZCP_PIX_NV12 || fmt == ZCP_PIX_NV21) {
                for (uint32_t y = 0; y < H / 2; y++) {
                        if (memcmp(data + (size_t)stride * H + (size_t)y * stride, ref + (size_t)mb * H + (size_t)y * mb,
                                   mb) != 0)
                                return false;
                }
        } else if (fmt == ZCP_PIX_I420 || fmt == ZCP_PIX_YV12) {
                for (int p = 0; p < 2; p++) {
                        const uint8_t *d = data + (size_t)stride * H + (size_t)p * (stride / 2) * (H / 2);
                        const uint8_t *r = ref + (size_t)mb * H + (size_t)p * (mb / 2) * (H / 2);

                        for (uint32_t y = 0; y < H / 2; y++) {
                                if (memcmp(d + (size_t)y * (stride / 2), r + (size_t)y * (mb / 2), mb / 2) != 0)
                                        return false;
                        }
                }
        }
        return true;
}

static void raw_frame(struct rig *g, struct zcp_slot *s, void *arg)
{
        struct raw_check *k = arg;
        const struct zcp_frame *f = &s->frame;

        CHECK(f->width == W && f->height == H);
        CHECK_MSG(f->fmt == k->fmt, "fmt %s", zcp_pixfmt_name(f->fmt));
        CHECK_MSG(f->stride == k->stride, "stride %u, expected %u", f->stride, k->stride);
        CHECK(f->bytes == zcp_pixfmt_frame_size_stride(k->fmt, k->stride, H));
        if (k->memory != ANY_MEMORY)
                CHECK_MSG((s->lent != 0) == (k->memory == LENT) && (s->data != s->own) == (k->memory == LENT),
                          "frame %llu: lent %u, expected %s", (unsigned long long)g->frames, s->lent,
                          k->memory == LENT ? "a driver buffer" : "the slot's own memory");
        if (k->ts_monotonic)
                CHECK_MSG(f->t[ZCP_TS_CAPTURE] == f->pts_ns, "capture time is not the driver's monotonic time");
        else
                CHECK_MSG(f->t[ZCP_TS_CAPTURE] >= k->t_before && f->t[ZCP_TS_CAPTURE] != f->pts_ns,
                          "capture time is not the dequeue time");
        if (!k->any_order) {
                CHECK_MSG(same_frame(k->fmt, s->data, f->stride, k->ref[g->frames % NFRAMES]),
                          "frame %llu differs from the fake's frame %llu", (unsigned long long)g->frames,
                          (unsigned long long)(g->frames % NFRAMES));
                CHECK(f->seq == g->frames);
        } else {
                bool found = false;

                for (int j = 0; j < NFRAMES && !found; j++)
                        found = same_frame(k->fmt, s->data, f->stride, k->ref[j]);
                CHECK_MSG(found, "frame %llu is none of the fake's frames", (unsigned long long)g->frames);
        }
}

static void raw_refs(struct raw_check *k, enum zcp_pixfmt fmt)
{
        size_t size = zcp_pixfmt_frame_size(fmt, W, H);

        k->fmt = fmt;
        for (int j = 0; j < NFRAMES; j++) {
                k->ref[j] = malloc(size);
                CHECK(k->ref[j]);
                make_frame(k->ref[j], size, (uint32_t)j);
        }
}

static void raw_refs_free(struct raw_check *k)
{
        for (int j = 0; j < NFRAMES; j++)
                free(k->ref[j]);
}

static enum zcp_pixfmt env_fmt(void)
{
        const char *f = getenv("FAKECAM_FORMAT");

        if (getenv("TEST_FMT"))
                return zcp_pixfmt_from_name(getenv("TEST_FMT"));

        for (size_t i = 0; i < FMT_COUNT; i++) {
                if (f && strcmp(f, fmt_table[i].fourcc) == 0)
                        return fmt_table[i].fmt;
        }
        CHECK_MSG(0, "FAKECAM_FORMAT %s", f ? f : "(unset)");
        return ZCP_PIX_NONE;
}

/* ---- scenarios: formats ------------------------------------------------- */

static enum zcp_capture_path env_path(const char *name)
{
        const char *v = getenv(name);

        for (int p = 0; v && p < ZCP_CAPTURE_PATH_COUNT; p++) {
                if (strcmp(v, zcp_capture_path_names[p]) == 0)
                        return (enum zcp_capture_path)p;
        }
        CHECK_MSG(!v, "%s=%s is no capture path", name, v);
        return ZCP_PATH_DIRECT;
}

/*
 * Format from FAKECAM_FORMAT, io from TEST_IO, expected path from TEST_PATH
 * (the one open predicts from TEST_INFO_PATH, default the same), allocator
 * from TEST_ALLOC.
 */
static int sc_format(void)
{
        enum zcp_pixfmt fmt = env_fmt();
        const char *io = getenv("TEST_IO") ? getenv("TEST_IO") : "auto";
        enum zcp_capture_path path = env_path("TEST_PATH");
        enum zcp_capture_path info_path = getenv("TEST_INFO_PATH") ? env_path("TEST_INFO_PATH") : path;
        bool copy = path == ZCP_PATH_COPY, registered = path == ZCP_PATH_REGISTERED;
        uint32_t bpl = getenv("FAKECAM_BPL") ? (uint32_t)atoi(getenv("FAKECAM_BPL")) : zcp_pixfmt_min_stride(fmt, W);
        bool explicit_fmt = getenv("TEST_EXPLICIT") != NULL;
        struct raw_check k = { .stride = bpl, .ts_monotonic = true, .memory = registered ? LENT : OWN };
        char lines[512];
        struct rig *g;

        snprintf(lines, sizeof(lines), "      width: %u\n      height: %u\n      format: %s\n      io: %s\n", W, H,
                 explicit_fmt ? zcp_pixfmt_name(fmt) : "auto", io);
        g = rig_new(lines, 6);
        raw_refs(&k, fmt);
        CHECK(rig_open(g) == 0);
        CHECK(g->info.width == W && g->info.height == H && g->info.fmt == fmt && g->info.live);
        CHECK_MSG(g->info.stride == bpl, "info stride %u", g->info.stride);
        /* Open cannot know whether the driver takes the ring's memory, or the allocator the driver's. */
        CHECK_MSG(g->info.path == info_path, "path %s at open", zcp_capture_path_names[g->info.path]);
        CHECK(g->info.fps_num == 100 && g->info.fps_den == 1);
        CHECK(rig_start(g) == 0);
        CHECK(atomic_load(&g->stats.source_state) == ZCP_SOURCE_UP);
        g->hold = 2;
        CHECK(rig_run(g, 3 * NFRAMES + 2, 10000, raw_frame, &k) == 3 * NFRAMES + 2);
        CHECK(zcp_stats_dropped_total(&g->stats) == 0);
        CHECK_MSG(atomic_load(&g->stats.copies) == (copy ? g->frames : 0), "copies %llu",
                  (unsigned long long)atomic_load(&g->stats.copies));
        /* What the exporters show is the path in use, after any fallback. */
        CHECK_MSG(atomic_load(&g->stats.capture_path) == path, "path in use %s",
                  zcp_capture_path_names[atomic_load(&g->stats.capture_path)]);
        CHECK(fstat_(path == ZCP_PATH_DIRECT ? "userptr_streams" : "mmap_streams") == 1);
        CHECK_MSG(ta.refused == (getenv("TEST_ALLOC") && strcmp(getenv("TEST_ALLOC"), "failmap") == 0),
                  "map() refused %ld times", ta.refused);
        CHECK(atomic_load(&g->stats.reconnects) == 0);
        check_accounting(g);
        rig_free(g);
        raw_refs_free(&k);
        check_fake_clean();
        return 0;
}

/* FAKECAM_TIMESTAMP=unknown: the capture time is the dequeue time. */
static int sc_ts_unknown(void)
{
        struct raw_check k = { .stride = 2 * W, .ts_monotonic = false };
        struct rig *g = rig_new("      width: 64\n      height: 48\n      format: yuyv\n", 4);

        raw_refs(&k, ZCP_PIX_YUYV);
        CHECK(rig_open(g) == 0);
        CHECK(rig_start(g) == 0);
        k.t_before = zcp_now_ns();
        CHECK(rig_run(g, 8, 5000, raw_frame, &k) == 8);
        rig_free(g);
        raw_refs_free(&k);
        check_fake_clean();
        return 0;
}

/* The fake lists NV12 only at 32x24, MJPG and GREY at 64x48, YUYV (the frames) at 64x48. */
static int sc_auto_format(void)
{
        struct raw_check k = { .stride = 2 * W, .ts_monotonic = true };
        struct rig *g = rig_new("      width: 64\n      height: 48\n      format: auto\n", 4);

        raw_refs(&k, ZCP_PIX_YUYV);
        CHECK(rig_open(g) == 0);
        CHECK_MSG(g->info.fmt == ZCP_PIX_YUYV, "auto chose %s", zcp_pixfmt_name(g->info.fmt));
        CHECK(rig_start(g) == 0);
        CHECK(rig_run(g, 6, 5000, raw_frame, &k) == 6);
        rig_free(g);
        raw_refs_free(&k);
        check_fake_clean();
        return 0;
}

/* ---- scenarios: geometry changes ----------------------------------------- */

/*
 * The fake's own pattern (no FAKECAM_FRAMES): byte i of frame s is
 * (i * 7 + s * 31 + (i >> 8)) & 255, so byte 0 tells s modulo 256 (31 * 223
 * is 1 modulo 256) and every other byte must follow.
 */
static bool generated_frame(const uint8_t *data, size_t size)
{
        uint32_t s = (uint32_t)data[0] * 223u & 255u;

        for (size_t i = 0; i < size; i++) {
                if (data[i] != (uint8_t)(i * 7 + s * 31 + (i >> 8)))
                        return false;
        }
        return true;
}

struct gen_check {
        uint32_t width, height;   /* expected now */
        enum zcp_pixfmt fmt;
        uint64_t good;
};

/* A whole frame of the fake's pattern, of the geometry expected now (YUYV or NV12, tight). */
static void gen_frame(struct rig *g, struct zcp_slot *s, void *arg)
{
        struct gen_check *k = arg;
        const struct zcp_frame *f = &s->frame;
        size_t size = zcp_pixfmt_frame_size(k->fmt, k->width, k->height);

        CHECK_MSG(f->width == k->width && f->height == k->height && f->fmt == k->fmt,
                  "frame %llu is %ux%u %s, expected %ux%u %s", (unsigned long long)g->frames, f->width, f->height,
                  zcp_pixfmt_name(f->fmt), k->width, k->height, zcp_pixfmt_name(k->fmt));
        CHECK(f->stride == zcp_pixfmt_min_stride(k->fmt, k->width) && f->bytes == size);
        CHECK(s->cap >= size);
        CHECK_MSG(generated_frame(s->data, size), "frame %llu (%ux%u) is not a whole frame of the fake's pattern",
                  (unsigned long long)g->frames, f->width, f->height);
        k->good++;
}

/* The fake's frames that did not match the buffers' size were all dropped (never a slot's). */
static void check_mismatched(struct rig *g)
{
        uint64_t bad = dropped(g, ZCP_DROP_SHORT) + dropped(g, ZCP_DROP_OVERSIZE) + dropped(g, ZCP_DROP_CORRUPT);

        CHECK_MSG(bad == (uint64_t)fstat_("mismatched"), "short + oversize + corrupt %llu, the fake sent %lld frames "
                  "of another size", (unsigned long long)bad, fstat_("mismatched"));
}

/* config/camera.yaml as shipped, with the device in the test's folder. */
static struct rig *rig_camera_yaml(void)
{
        char path[ZCP_PATH_MAX], device[ZCP_PATH_MAX + 32], *text = malloc(1 << 16), *p;
        struct rig *g;
        size_t len;
        FILE *fp;

        CHECK(text);
        snprintf(path, sizeof(path), "%s/config/camera.yaml", zcp_test_src_root());
        fp = fopen(path, "r");
        CHECK_MSG(fp, "%s: %s", path, strerror(errno));
        len = fread(text, 1, (1 << 16) - 1, fp);
        fclose(fp);
        text[len] = '\0';
        p = strstr(text, "device: /dev/video0 ");
        CHECK_MSG(p && !strstr(p + 1, "device: /dev/video0 "), "camera.yaml: no single 'device: /dev/video0 '");
        snprintf(device, sizeof(device), "device: %s/video0 ", dir);
        CHECK(len + strlen(device) < (1 << 16));
        memmove(p + strlen(device), p + strlen("device: /dev/video0 "), strlen(p + strlen("device: /dev/video0 ")) + 1);
        memcpy(p, device, strlen(device));
        g = rig_new_text(text);
        free(text);
        return g;
}

/*
 * config/camera.yaml (format auto, 1280x720) with the camera absent for
 * 600 ms: open sizes the ring for the largest format auto may pick (BGRX),
 * the stream waits in back-off, and when the camera (YUYV) appears the
 * source asks once for a new ring; then whole YUYV frames flow. Without
 * the caller's reconfigure support (TEST_NO_RECONF): a config error at that
 * time, no frame. A camera that offers the provisional format (FAKECAM_FORMAT
 * XR24) streams into the first ring, no RECONFIGURE.
 */
static int sc_absent_auto(void)
{
        bool reconf = getenv("TEST_NO_RECONF") == NULL;
        enum zcp_pixfmt cam = env_fmt();
        struct gen_check k = { .width = 1280, .height = 720, .fmt = cam };
        struct rig *g = rig_camera_yaml();
        uint64_t end = now_ms() + 20000;
        bool saw_backoff = false;
        int r = 0, reconfigure = 0;

        CHECK(g->cfg->source.format == ZCP_PIX_NONE && g->cfg->source.width == 1280 && g->cfg->source.height == 720);
        CHECK(rig_open(g) == 0);
        CHECK_MSG(g->info.fmt == ZCP_PIX_BGRX && g->info.width == 1280 && g->info.height == 720 &&
                          g->info.stride == 4 * 1280 && g->info.frame_bytes == (size_t)1280 * 720 * 4,
                  "provisional info %s %ux%u stride %u, %zu bytes", zcp_pixfmt_name(g->info.fmt), g->info.width,
                  g->info.height, g->info.stride, g->info.frame_bytes);
        CHECK(atomic_load(&g->stats.source_state) == ZCP_SOURCE_DOWN);
        if (reconf)
                CHECK(g->ops->reconfigure(g->src, NULL) == 0);
        CHECK(rig_start(g) == 0);
        g->hold = 2;
        while (g->frames < 10 && now_ms() < end) {
                r = rig_step(g, gen_frame, &k);
                if (atomic_load(&g->stats.source_state) == ZCP_SOURCE_BACKOFF)
                        saw_backoff = true;
                if (r == ZCP_SOURCE_RECONFIGURE) {
                        CHECK_MSG(reconf, "RECONFIGURE to a caller that did not ask for it");
                        CHECK(g->frames == 0);
                        reconfigure++;
                        rig_reconfigure(g);
                        CHECK(g->info.fmt == cam && g->info.width == 1280 && g->info.height == 720);
                        CHECK(g->info.stride == zcp_pixfmt_min_stride(cam, 1280));
                        continue;
                }
                if (r < 0)
                        break;
        }
        CHECK(saw_backoff);
        CHECK(fstat_("injected_absent") >= 2);
        if (!reconf && cam != ZCP_PIX_BGRX) {
                CHECK_MSG(r == ZCP_ERR_CONFIG, "next() returned %d, expected a config error", r);
                CHECK(g->frames == 0 && fstat_("streamons") == 0);
                rig_free(g);
                check_fake_clean();
                return 0;
        }
        CHECK_MSG(r >= 0, "next() returned %d", r);
        CHECK(g->frames == 10 && k.good == 10);
        CHECK_MSG(reconfigure == (cam == ZCP_PIX_BGRX ? 0 : 1), "%d RECONFIGUREs", reconfigure);
        CHECK(atomic_load(&g->stats.source_state) == ZCP_SOURCE_UP);
        CHECK(atomic_load(&g->stats.reconnects) == 0);
        CHECK(zcp_stats_dropped_total(&g->stats) == 0);
        CHECK(fstat_("streamons") == 1);
        CHECK(fstat_("max_open_fds") == 1);
        check_accounting(g);
        rig_free(g);
        check_fake_clean();
        return 0;
}

/*
 * resize:WxH@20 (TEST_RESIZE=WxH): the camera changes size at its frame 20
 * and raises V4L2_EVENT_SOURCE_CHANGE. The frames before are 64x48, exactly
 * one RECONFIGURE follows, the frames after are whole frames of the new
 * size; the frames of the new size the old buffers got are dropped, counted.
 * TEST_NO_RECONF: the caller cannot re-make its ring: no RECONFIGURE, every
 * frame after the change dropped and counted, none handed on.
 * FAKECAM_NO_EVENTS (a driver that does not report the change): the frames
 * of the new size are dropped until timeout_ms passes without a good one;
 * the reopen finds the new mode and follows it (one reconnect, one
 * RECONFIGURE).
 */
static int sc_resize(void)
{
        bool events = getenv("FAKECAM_NO_EVENTS") == NULL;
        bool reconf = getenv("TEST_NO_RECONF") == NULL, follow = reconf;
        enum zcp_pixfmt fmt = env_fmt();
        uint32_t nw = 0, nh = 0;
        struct gen_check k = { .width = W, .height = H, .fmt = fmt };
        char lines[256];
        struct rig *g;
        uint64_t end = now_ms() + 20000, before = 0;
        int r;

        CHECK(sscanf(getenv("TEST_RESIZE"), "%ux%u", &nw, &nh) == 2);
        snprintf(lines, sizeof(lines), "      width: %u\n      height: %u\n      format: %s\n      io: %s\n"
                 "      timeout_ms: %s\n", W, H,
                 getenv("TEST_EXPLICIT") ? zcp_pixfmt_name(fmt) : "auto",
                 getenv("TEST_IO") ? getenv("TEST_IO") : "auto",
                 getenv("TEST_TIMEOUT_MS") ? getenv("TEST_TIMEOUT_MS") : "2000");
        g = rig_new(lines, 6);
        CHECK(rig_open(g) == 0);
        if (reconf)
                CHECK(g->ops->reconfigure(g->src, NULL) == 0);
        CHECK(rig_start(g) == 0);
        g->hold = 3;   /* frames downstream at the change: mmap buffers still lent */
        while ((fstat_("delivered_total") < 60 || (follow && (g->reconfigs == 0 || g->frames < before + 25))) &&
               now_ms() < end) {
                r = rig_step(g, gen_frame, &k);
                CHECK_MSG(r >= 0, "next() returned %d", r);
                /* Downstream finishes its frames while the source renegotiates (unless TEST_HOLD). */
                if (r == ZCP_SOURCE_AGAIN && !getenv("TEST_HOLD") &&
                    atomic_load(&g->stats.source_state) != ZCP_SOURCE_UP)
                        release_down(g, 0);
                if (r == ZCP_SOURCE_RECONFIGURE) {
                        CHECK_MSG(follow, "RECONFIGURE to a caller that did not ask for it, or without an event");
                        CHECK_MSG(g->reconfigs == 0, "a second RECONFIGURE");
                        CHECK(fstat_("injected_resize") == 1);
                        before = g->frames;
                        rig_reconfigure(g);
                        CHECK_MSG(g->info.width == nw && g->info.height == nh && g->info.fmt == fmt &&
                                          g->info.stride == zcp_pixfmt_min_stride(fmt, nw),
                                  "new info %ux%u %s stride %u", g->info.width, g->info.height,
                                  zcp_pixfmt_name(g->info.fmt), g->info.stride);
                        k.width = nw;
                        k.height = nh;
                }
        }
        CHECK_MSG(fstat_("delivered_total") >= 60, "stuck at frame %lld", fstat_("delivered_total"));
        CHECK(fstat_("injected_resize") == 1);
        CHECK(events ? fstat_("subscriptions") >= 1 && fstat_("events") == 1
                     : fstat_("subscriptions") == 0 && fstat_("events") == 0);
        /* Without events, the change shows as no good frame for timeout_ms (a stalled machine may add one). */
        CHECK_MSG(follow && !events ? atomic_load(&g->stats.reconnects) >= 1 : atomic_load(&g->stats.reconnects) == 0,
                  "reconnects %llu", (unsigned long long)atomic_load(&g->stats.reconnects));
        CHECK(k.good == g->frames);
        check_mismatched(g);
        if (follow) {
                CHECK(g->reconfigs == 1);
                /* 20 frames of 64x48 (some may still have been in the driver at the change), then the new size. */
                CHECK_MSG(before >= 10 && before <= 20 && g->frames > before + 20, "%llu frames before, %llu in all",
                          (unsigned long long)before, (unsigned long long)g->frames);
                CHECK(fstat_("mismatched") >= 1);
                CHECK(events ? fstat_("streamons") == 2 : fstat_("streamons") >= 2);
                CHECK(atomic_load(&g->stats.source_state) == ZCP_SOURCE_UP);
        } else {
                CHECK(g->reconfigs == 0);
                CHECK_MSG(g->frames <= 20 && g->frames >= 10, "%llu frames", (unsigned long long)g->frames);
                CHECK(fstat_("mismatched") >= 30);
                CHECK(fstat_("streamons") == 1);
        }
        check_accounting(g);
        rig_free(g);
        check_fake_clean();
        return 0;
}

/* ---- scenarios: MJPEG --------------------------------------------------- */

struct jpeg_check {
        uint8_t *ref[NJPEG];     /* I420 references (NULL for the bad ones) */
        uint64_t good;
};

/* Independent reference: tjDecompressToYUVPlanes to native planes, then 4:2:0 as mjpeg.h documents. */
static uint8_t *reference_i420(tjhandle tj, const uint8_t *jpeg, size_t len)
{
        int w, h, samp, cs, cw, ch;
        uint8_t *out = malloc((size_t)W * H * 3 / 2), *planes[3];
        int strides[3];

        CHECK(out);
        CHECK(tjDecompressHeader3(tj, jpeg, (unsigned long)len, &w, &h, &samp, &cs) == 0);
        CHECK(w == W && h == H);
        cw = samp == TJSAMP_GRAY ? 0 : tjPlaneWidth(1, w, samp);
        ch = samp == TJSAMP_GRAY ? 0 : tjPlaneHeight(1, h, samp);
        planes[0] = out;
        planes[1] = malloc((size_t)(cw ? cw : 1) * (ch ? ch : 1));
        planes[2] = malloc((size_t)(cw ? cw : 1) * (ch ? ch : 1));
        strides[0] = W;
        strides[1] = strides[2] = cw;
        CHECK(tjDecompressToYUVPlanes(tj, jpeg, (unsigned long)len, planes, w, strides, h, 0) == 0);
        for (int p = 1; p <= 2; p++) {
                uint8_t *d = out + (size_t)W * H + (size_t)(p - 1) * (W / 2) * (H / 2);

                for (int y = 0; y < H / 2; y++) {
                        for (int x = 0; x < W / 2; x++) {
                                const uint8_t *c = planes[p];
                                unsigned v;

                                switch (samp) {
                                case TJSAMP_420:
                                        v = c[y * cw + x];
                                        break;
                                case TJSAMP_422: /* vertical pair, (upper + lower + 1) >> 1 */
                                        v = (c[2 * y * cw + x] + c[(2 * y + 1) * cw + x] + 1u) >> 1;
                                        break;
                                case TJSAMP_444:
                                        v = (c[2 * y * cw + 2 * x] + c[2 * y * cw + 2 * x + 1] + c[(2 * y + 1) * cw + 2 * x] +
                                             c[(2 * y + 1) * cw + 2 * x + 1] + 2u) >> 2;
                                        break;
                                default: /* grey */
                                        v = 128;
                                        break;
                                }
                                d[y * (W / 2) + x] = (uint8_t)v;
                        }
                }
        }
        free(planes[1]);
        free(planes[2]);
        return out;
}

static void jpeg_frame(struct rig *g, struct zcp_slot *s, void *arg)
{
        struct jpeg_check *k = arg;
        const struct zcp_frame *f = &s->frame;
        bool found = false;

        CHECK(f->fmt == ZCP_PIX_I420 && f->stride == W && f->bytes == (uint64_t)W * H * 3 / 2);
        for (int j = 0; j < NJPEG && !found; j++)
                found = k->ref[j] && memcmp(s->data, k->ref[j], (size_t)W * H * 3 / 2) == 0;
        CHECK_MSG(found, "decoded frame %llu matches no reference decode", (unsigned long long)g->frames);
        k->good++;
}

/* Reference decodes of the good JPEGs in the sample (FAKECAM_FRAMES). */
static void jpeg_refs(struct jpeg_check *k)
{
        const char *path = getenv("FAKECAM_FRAMES");
        uint8_t *file;
        size_t len, off = 0;
        FILE *fp;
        tjhandle tj = tjInitDecompress();
        int n = 0;

        fp = fopen(path, "rb");
        CHECK(fp);
        file = malloc(1 << 20);
        len = fread(file, 1, 1 << 20, fp);
        fclose(fp);
        while (off + 1 < len && n < NJPEG) {
                size_t e = off + 2;

                CHECK(file[off] == 0xff && file[off + 1] == 0xd8);
                while (!(file[e] == 0xff && file[e + 1] == 0xd9))
                        e++;
                if (n != JPEG_BAD_TRUNC && n != JPEG_BAD_SIZE)
                        k->ref[n] = reference_i420(tj, file + off, e + 2 - off);
                n++;
                off = e + 2;
        }
        CHECK(n == NJPEG);
        free(file);
        tjDestroy(tj);
}

static int sc_mjpeg(void)
{
        struct jpeg_check k = { 0 };
        struct rig *g;
        uint64_t d_total, cycles, injected_short, end;

        jpeg_refs(&k);
        g = rig_new("      width: 64\n      height: 48\n      format: mjpeg\n      io: userptr\n", 4);
        CHECK(rig_open(g) == 0);
        CHECK(g->info.fmt == ZCP_PIX_I420 && g->info.stride == W && g->info.frame_bytes == (size_t)W * H * 3 / 2);
        CHECK(g->info.path == ZCP_PATH_DIRECT);
        CHECK(rig_start(g) == 0);
        /* 5 rounds of the 6 JPEGs; the fake makes frame 13 (a 4:2:2 one) a zero-byte buffer (short). */
        end = now_ms() + 20000;
        while (fstat_("delivered_total") < 5 * NJPEG) {
                CHECK(rig_step(g, jpeg_frame, &k) >= 0);
                CHECK_MSG(now_ms() < end, "stuck at frame %lld", fstat_("delivered_total"));
        }
        d_total = (uint64_t)fstat_("delivered_total");
        cycles = d_total / NJPEG;
        injected_short = (uint64_t)fstat_("injected_short");
        CHECK(injected_short == 1);
        CHECK_MSG(dropped(g, ZCP_DROP_SHORT) == 1, "short %llu", (unsigned long long)dropped(g, ZCP_DROP_SHORT));
        CHECK_MSG(dropped(g, ZCP_DROP_CORRUPT) == cycles, "corrupt %llu, %llu cycles",
                  (unsigned long long)dropped(g, ZCP_DROP_CORRUPT), (unsigned long long)cycles);
        CHECK_MSG(dropped(g, ZCP_DROP_OVERSIZE) == cycles, "oversize %llu", (unsigned long long)dropped(g, ZCP_DROP_OVERSIZE));
        CHECK(k.good == d_total - 2 * cycles - 1);
        CHECK(atomic_load(&g->stats.copies) == 0);
        CHECK(fstat_("mmap_streams") == 1);
        check_accounting(g);
        rig_free(g);
        check_fake_clean();
        for (int j = 0; j < NJPEG; j++)
                free(k.ref[j]);
        return 0;
}

/*
 * format auto, camera absent at start, and the camera offers MJPEG only:
 * one RECONFIGURE from the provisional BGRX to I420 (decoded), the decoder
 * made for it, then decoded frames equal to the reference decodes; the bad
 * JPEGs of the sample dropped and counted.
 */
static int sc_absent_auto_mjpeg(void)
{
        struct jpeg_check k = { 0 };
        struct rig *g = rig_new("      width: 64\n      height: 48\n      format: auto\n      backoff_max_ms: 100\n", 4);
        uint64_t end = now_ms() + 20000;
        int r;

        jpeg_refs(&k);
        CHECK(rig_open(g) == 0);
        CHECK(g->info.fmt == ZCP_PIX_BGRX);
        CHECK(g->ops->reconfigure(g->src, NULL) == 0);
        CHECK(rig_start(g) == 0);
        while (fstat_("delivered_total") < 3 * NJPEG && now_ms() < end) {
                r = rig_step(g, jpeg_frame, &k);
                CHECK_MSG(r >= 0, "next() returned %d", r);
                if (r == ZCP_SOURCE_RECONFIGURE) {
                        CHECK(g->reconfigs == 0 && g->frames == 0);
                        rig_reconfigure(g);
                        CHECK(g->info.fmt == ZCP_PIX_I420 && g->info.stride == W &&
                              g->info.frame_bytes == (size_t)W * H * 3 / 2);
                }
        }
        CHECK_MSG(fstat_("delivered_total") >= 3 * NJPEG, "stuck at frame %lld", fstat_("delivered_total"));
        CHECK(g->reconfigs == 1);
        CHECK(k.good == g->frames && g->frames >= 3 * (NJPEG - 2));
        CHECK(dropped(g, ZCP_DROP_CORRUPT) + dropped(g, ZCP_DROP_OVERSIZE) + g->frames ==
              (uint64_t)fstat_("delivered_total"));
        check_accounting(g);
        rig_free(g);
        check_fake_clean();
        for (int j = 0; j < NJPEG; j++)
                free(k.ref[j]);
        return 0;
}

/* ---- scenarios: faults -------------------------------------------------- */

/* Every fault, on userptr, mmap read in place (registered) or mmap copied (TEST_ALLOC=nomap). */
static int sc_faults(void)
{
        bool mmap = getenv("FAKECAM_NO_USERPTR") != NULL, copy = mmap && getenv("TEST_ALLOC") != NULL;
        struct raw_check k = {
                .stride = 2 * W, .ts_monotonic = true, .any_order = true, .memory = mmap && !copy ? LENT : OWN,
        };
        struct rig *g = rig_new("      width: 64\n      height: 48\n      format: yuyv\n"
                                "      timeout_ms: 400\n      backoff_max_ms: 100\n", 8);
        uint64_t end = now_ms() + 30000;

        raw_refs(&k, ZCP_PIX_YUYV);
        CHECK(rig_open(g) == 0);
        CHECK(g->info.path == (mmap ? ZCP_PATH_REGISTERED : ZCP_PATH_DIRECT));
        CHECK(rig_start(g) == 0);
        g->hold = 3;   /* the pipeline keeps a few: the driver has indices the app holds (dup; lent at reconnects) */
        while (fstat_("delivered_total") < 120 && now_ms() < end)
                CHECK(rig_step(g, raw_frame, &k) >= 0);
        /* A few more frames: the last fault is fully handled. */
        rig_run(g, g->frames + 5, 5000, raw_frame, &k);
        CHECK_MSG(fstat_("delivered_total") >= 120, "stuck at frame %lld", fstat_("delivered_total"));
        CHECK(atomic_load(&g->stats.source_state) == ZCP_SOURCE_UP);

        CHECK(fstat_("injected_error") == 1 && fstat_("injected_short") == 1 && fstat_("injected_oversize") == 1);
        CHECK(fstat_("injected_badindex") == 1 && fstat_("injected_seqgap") == 1);
        CHECK(fstat_("injected_enodev") == 1 && fstat_("injected_eio") == 1 && fstat_("injected_stall") == 1);
        /* dup waits for an index the app holds: userptr slots, or mmap buffers lent downstream. */
        CHECK(fstat_("injected_dup") == (copy ? 0 : 1));
        CHECK(fstat_("seqgap_frames") == 3);
        CHECK_MSG(dropped(g, ZCP_DROP_CORRUPT) == (uint64_t)fstat_("injected_error"), "corrupt %llu",
                  (unsigned long long)dropped(g, ZCP_DROP_CORRUPT));
        CHECK(dropped(g, ZCP_DROP_SHORT) == (uint64_t)fstat_("injected_short"));
        CHECK(dropped(g, ZCP_DROP_OVERSIZE) == (uint64_t)fstat_("injected_oversize"));
        CHECK_MSG(dropped(g, ZCP_DROP_BAD_INDEX) == (uint64_t)(fstat_("injected_badindex") + fstat_("injected_dup")),
                  "bad index %llu", (unsigned long long)dropped(g, ZCP_DROP_BAD_INDEX));
        CHECK_MSG(dropped(g, ZCP_DROP_SEQ_GAP) == (uint64_t)fstat_("seqgap_frames"), "seq gap %llu",
                  (unsigned long long)dropped(g, ZCP_DROP_SEQ_GAP));
        CHECK(dropped(g, ZCP_DROP_RING_FULL) == 0);
        CHECK_MSG(atomic_load(&g->stats.reconnects) ==
                          (uint64_t)(fstat_("injected_enodev") + fstat_("injected_eio") + fstat_("injected_stall")),
                  "reconnects %llu", (unsigned long long)atomic_load(&g->stats.reconnects));
        CHECK(fstat_("streamons") == 4);
        CHECK(fstat_("max_open_fds") == 1);
        CHECK(atomic_load(&g->stats.copies) == (copy ? g->frames : 0));
        /* Good frames: everything the fake delivered whole. */
        CHECK_MSG(g->frames == (uint64_t)fstat_("delivered"), "received %llu, delivered %lld",
                  (unsigned long long)g->frames, fstat_("delivered"));
        /* next() waits <= 100 ms by design; the bound only has to tell that from blocking through the 1.5 s stall. */
        CHECK_MSG(g->max_call_ns < 1000 * ZCP_NSEC_PER_MSEC, "a next() call took %llu ms",
                  (unsigned long long)(g->max_call_ns / ZCP_NSEC_PER_MSEC));
        check_accounting(g);
        rig_free(g);
        raw_refs_free(&k);
        check_fake_clean();
        return 0;
}

/*
 * Every slot downstream for 300 ms (longer than timeout_ms): no reconnect (a
 * driver without buffers cannot stall). userptr + a lossy camera: the frames
 * it lost meanwhile are ring-full drops (gaps while it had buffers would be
 * seq-gap). mmap: each frame that finds no free slot is a ring-full drop.
 */
static int sc_starved(void)
{
        /*
         * mmap keeps buffers in the driver while every slot is downstream
         * (slots + 2 of them), except with TEST_SLOTS=32: the driver has 32 at
         * most, all lent, and it starves as on userptr.
         */
        uint32_t slots = getenv("TEST_SLOTS") ? (uint32_t)atoi(getenv("TEST_SLOTS")) : 6;
        bool nouserptr = getenv("FAKECAM_NO_USERPTR") != NULL, mmap = nouserptr && slots < 32;
        struct raw_check k = {
                .stride = 2 * W, .ts_monotonic = true, .any_order = true,
                .memory = nouserptr && !getenv("TEST_ALLOC") ? LENT : OWN,
        };
        struct rig *g = rig_new("      width: 64\n      height: 48\n      format: yuyv\n      timeout_ms: 150\n", slots);
        uint64_t end;

        raw_refs(&k, ZCP_PIX_YUYV);
        CHECK(rig_open(g) == 0);
        CHECK(rig_start(g) == 0);
        g->hold = 2;
        CHECK(rig_run(g, 10, 5000, raw_frame, &k) == 10);
        g->hold = g->ring->count;
        end = now_ms() + 300;
        while (now_ms() < end)
                CHECK(rig_step(g, raw_frame, &k) >= 0);
        CHECK(g->ndown == g->ring->count);
        g->hold = 2;
        release_down(g, 2);
        rig_run(g, g->frames + 10, 5000, raw_frame, &k);
        CHECK(atomic_load(&g->stats.reconnects) == 0);
        CHECK_MSG(dropped(g, ZCP_DROP_RING_FULL) > 0, "no ring-full drop while every slot was downstream");
        CHECK_MSG(dropped(g, ZCP_DROP_RING_FULL) + dropped(g, ZCP_DROP_SEQ_GAP) == (uint64_t)fstat_("lost") +
                          (mmap ? dropped(g, ZCP_DROP_RING_FULL) : 0),
                  "ring full %llu + seq gap %llu, the camera lost %lld", (unsigned long long)dropped(g, ZCP_DROP_RING_FULL),
                  (unsigned long long)dropped(g, ZCP_DROP_SEQ_GAP), fstat_("lost"));
        CHECK(zcp_stats_dropped_total(&g->stats) ==
              dropped(g, ZCP_DROP_RING_FULL) + dropped(g, ZCP_DROP_SEQ_GAP));
        check_accounting(g);
        rig_free(g);
        raw_refs_free(&k);
        check_fake_clean();
        return 0;
}

/*
 * Buffers lent downstream when the camera goes away (enodev@20): the frames
 * stay readable and intact (their buffers are retired, not unmapped), are
 * never queued on the new fd (the fake counts that as a violation), and are
 * unmapped, allocator first, once their slots come back; the frames after the
 * reconnect are read in place again.
 */
static int sc_retire(void)
{
        struct raw_check k = { .stride = 2 * W, .ts_monotonic = true, .any_order = true, .memory = LENT };
        struct rig *g = rig_new("      width: 64\n      height: 48\n      format: yuyv\n      io: mmap\n"
                                "      backoff_max_ms: 50\n", 6);
        uint64_t end = now_ms() + 10000;
        long unmaps0, munmaps0;
        uint32_t old;

        raw_refs(&k, ZCP_PIX_YUYV);
        CHECK(rig_open(g) == 0);
        CHECK(rig_start(g) == 0);
        g->hold = 5;
        while (atomic_load(&g->stats.reconnects) == 0 && now_ms() < end)
                CHECK(rig_step(g, raw_frame, &k) >= 0);
        CHECK(atomic_load(&g->stats.reconnects) == 1);
        old = g->ndown;
        CHECK_MSG(old == 5, "%u frames downstream at the teardown", old);
        unmaps0 = ta.unmaps;
        munmaps0 = fstat_("munmaps");
        /* Back-off, reopen, new buffers: the old frames are still there, unchanged. */
        while (atomic_load(&g->stats.source_state) != ZCP_SOURCE_UP && now_ms() < end)
                CHECK(rig_step(g, NULL, NULL) >= 0);
        CHECK(fstat_("streamons") == 2);
        for (uint32_t i = 0; i < old; i++) {
                struct zcp_slot *s = zcp_ring_slot(g->ring, g->down[i]);
                bool found = false;

                CHECK(s->lent != 0);
                for (int j = 0; j < NFRAMES && !found; j++)
                        found = same_frame(ZCP_PIX_YUYV, s->data, 2 * W, k.ref[j]);
                CHECK_MSG(found, "frame in slot %u changed after the teardown", g->down[i]);
        }
        CHECK(ta.unmaps == unmaps0 && fstat_("munmaps") == munmaps0);
        /* New frames push the old ones out: each retired buffer is unmapped as its slot comes back. */
        rig_run(g, g->frames + old + 2, 5000, raw_frame, &k);
        CHECK_MSG(ta.unmaps - unmaps0 == old && fstat_("munmaps") - munmaps0 == old,
                  "%ld unmapped, %lld munmapped after the reconnect, %u retired", ta.unmaps - unmaps0,
                  fstat_("munmaps") - munmaps0, old);
        CHECK(atomic_load(&g->stats.capture_path) == ZCP_PATH_REGISTERED);
        CHECK(atomic_load(&g->stats.copies) == 0);
        check_accounting(g);
        rig_free(g);
        raw_refs_free(&k);
        check_fake_clean();
        return 0;
}

/* ---- scenarios: absent, refusals, impossible configs --------------------- */

static int sc_absent(void)
{
        struct raw_check k = { .stride = 2 * W, .ts_monotonic = true };
        struct rig *g = rig_new("      width: 64\n      height: 48\n      format: yuyv\n      backoff_max_ms: 200\n", 4);
        uint64_t t0 = now_ms();
        bool saw_backoff = false;

        raw_refs(&k, ZCP_PIX_YUYV);
        CHECK(rig_open(g) == 0);   /* absent: geometry from the config */
        CHECK(g->info.fmt == ZCP_PIX_YUYV && g->info.stride == 2 * W && g->info.frame_bytes == (size_t)W * H * 2);
        CHECK(rig_start(g) == 0);
        while (g->frames == 0 && now_ms() < t0 + 10000) {
                CHECK(rig_step(g, raw_frame, &k) >= 0);
                if (atomic_load(&g->stats.source_state) == ZCP_SOURCE_BACKOFF)
                        saw_backoff = true;
        }
        CHECK(g->frames > 0);
        CHECK(saw_backoff);
        CHECK(fstat_("injected_absent") >= 2);
        /* Back-off is waited out across calls: next() returns promptly (SIGTERM stays clean). */
        CHECK_MSG(g->max_call_ns < 1000 * ZCP_NSEC_PER_MSEC, "a next() call took %llu ms",
                  (unsigned long long)(g->max_call_ns / ZCP_NSEC_PER_MSEC));
        CHECK(atomic_load(&g->stats.reconnects) == 0);
        rig_run(g, 10, 5000, raw_frame, &k);
        CHECK(g->frames == 10);
        rig_free(g);
        raw_refs_free(&k);
        check_fake_clean();
        return 0;
}

/* Stop during back-off, straight from the source: prompt, slots back, nothing open. */
static int sc_absent_stop(void)
{
        struct rig *g = rig_new("      width: 64\n      height: 48\n      format: yuyv\n      backoff_max_ms: 5000\n", 4);
        uint64_t t0;

        CHECK(rig_open(g) == 0);
        CHECK(rig_start(g) == 0);
        /*
         * Waits of 50, 100, ... 1600 ms follow each other in the first 3.2 s, then 3.2 and 5 s (the cap): a
         * next() that slept a back-off whole would take over 1 s in every window. A loaded machine (ASan
         * beside a parallel build) once stalled one call for 1.97 s: so the bound must hold in one of three
         * windows, not in the first.
         */
        for (int win = 0; win < 3; win++) {
                g->max_call_ns = 0;
                t0 = now_ms();
                while (now_ms() < t0 + 3200)
                        CHECK(rig_step(g, NULL, NULL) == ZCP_SOURCE_AGAIN);
                if (g->max_call_ns < 1000 * ZCP_NSEC_PER_MSEC)
                        break;
                fprintf(stderr, "absent-stop: window %d: a next() call took %llu ms\n", win,
                        (unsigned long long)(g->max_call_ns / ZCP_NSEC_PER_MSEC));
        }
        CHECK_MSG(g->max_call_ns < 1000 * ZCP_NSEC_PER_MSEC, "a next() call took %llu ms in each of 3 windows",
                  (unsigned long long)(g->max_call_ns / ZCP_NSEC_PER_MSEC));
        CHECK(atomic_load(&g->stats.source_state) == ZCP_SOURCE_BACKOFF);
        rig_free(g);
        check_fake_clean();
        return 0;
}

static int expect_open(const char *lines, int want, const char *what)
{
        struct rig *g = rig_new(lines, 4);
        int r = rig_open(g);

        CHECK_MSG(r == want, "%s: open returned %d, expected %d", what, r, want);
        rig_free(g);
        return 0;
}

static int sc_config_errors(void)
{
        /* The fake is 64x48 YUYV (and nothing else). */
        expect_open("      width: 1280\n      height: 720\n      format: yuyv\n", ZCP_ERR_CONFIG, "size it lacks");
        expect_open("      width: 64\n      height: 48\n      format: nv12\n", ZCP_ERR_CONFIG, "format it lacks");
        expect_open("      width: 64\n      height: 48\n      format: bgrx\n", ZCP_ERR_CONFIG, "nor this one");
        expect_open("      width: 1280\n      height: 720\n      format: auto\n", ZCP_ERR_CONFIG, "auto, no fit");
        CHECK(fstat_("violations") == 0 && fstat_("open_fds") == 0);
        return 0;
}

static int sc_userptr_refused(void)
{
        struct rig *g;

        /* io: userptr on a camera that refuses it: a config error, named. */
        expect_open("      width: 64\n      height: 48\n      format: yuyv\n      io: userptr\n", ZCP_ERR_CONFIG,
                    "userptr refused");
        /* io: auto falls back to mmap. */
        g = rig_new("      width: 64\n      height: 48\n      format: yuyv\n      io: auto\n", 4);
        CHECK(rig_open(g) == 0);
        CHECK(g->info.path == ZCP_PATH_REGISTERED);
        rig_free(g);
        CHECK(fstat_("userptr_refused") == 2);
        check_fake_clean();
        return 0;
}

static int sc_refuse_sfmt(void)
{
        expect_open("      width: 64\n      height: 48\n      format: yuyv\n", ZCP_ERR_CONFIG, "S_FMT refused");
        CHECK(fstat_("injected_refuse_sfmt") == 1);
        check_fake_clean();
        return 0;
}

static int sc_refuse_reqbufs(void)
{
        struct rig *g = rig_new("      width: 64\n      height: 48\n      format: yuyv\n      io: mmap\n", 4);
        int r;

        CHECK(rig_open(g) == 0);
        r = rig_start(g);
        CHECK_MSG(r == ZCP_ERR_CONFIG, "start returned %d", r);
        CHECK(fstat_("injected_refuse_reqbufs") == 1);
        rig_free(g);
        check_fake_clean();
        return 0;
}

/* STREAMON refused twice with EBUSY (another process has the camera): back-off, then it streams. */
static int sc_refuse_streamon_busy(void)
{
        struct raw_check k = { .stride = 2 * W, .ts_monotonic = true };
        struct rig *g = rig_new("      width: 64\n      height: 48\n      format: yuyv\n      backoff_max_ms: 100\n", 4);

        raw_refs(&k, ZCP_PIX_YUYV);
        CHECK(rig_open(g) == 0);
        CHECK(rig_start(g) == 0);
        CHECK(atomic_load(&g->stats.source_state) == ZCP_SOURCE_BACKOFF);
        CHECK(rig_run(g, 5, 5000, raw_frame, &k) == 5);
        CHECK(fstat_("injected_refuse_streamon") == 2);
        CHECK(fstat_("streamons") == 1);
        CHECK(fstat_("max_open_fds") == 1);
        rig_free(g);
        raw_refs_free(&k);
        check_fake_clean();
        return 0;
}

/* The node is a symlink (like /dev/v4l/by-id/...) that points elsewhere after a replug. */
static int sc_symlink(void)
{
        struct raw_check k = { .stride = 2 * W, .ts_monotonic = true, .any_order = true };
        char lines[1024], link[ZCP_PATH_MAX], target[ZCP_PATH_MAX];
        struct rig *g;
        uint64_t end = now_ms() + 10000;
        const char *node;

        snprintf(link, sizeof(link), "%s/by-id-cam", dir);
        snprintf(target, sizeof(target), "%s/video0", dir);
        unlink(link);
        CHECK(symlink(target, link) == 0);
        snprintf(lines, sizeof(lines), "      width: 64\n      height: 48\n      format: yuyv\n      backoff_max_ms: 50\n");
        g = rig_new(lines, 4);
        snprintf(g->config->streams[0].source.device, ZCP_PATH_MAX, "%s", link);
        raw_refs(&k, ZCP_PIX_YUYV);
        CHECK(rig_open(g) == 0);
        CHECK(rig_start(g) == 0);
        /* enodev@20:400: the node goes away for 400 ms; meanwhile the link moves to video1. */
        while (atomic_load(&g->stats.reconnects) == 0 && now_ms() < end)
                CHECK(rig_step(g, raw_frame, &k) >= 0);
        CHECK(atomic_load(&g->stats.reconnects) == 1);
        snprintf(target, sizeof(target), "%s/video1", dir);
        CHECK(unlink(link) == 0 && symlink(target, link) == 0);
        rig_run(g, g->frames + 10, 10000, raw_frame, &k);
        node = fake_last_node();
        CHECK_MSG(strstr(node, "/video1") != NULL, "reopened %s, the link points at video1", node);
        CHECK(atomic_load(&g->stats.source_state) == ZCP_SOURCE_UP);
        rig_free(g);
        raw_refs_free(&k);
        check_fake_clean();
        unlink(link);
        return 0;
}

/* ---- scenario: 1000 disconnect/reconnect cycles -------------------------- */

static long count_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        long n = 0;

        CHECK(d);
        while (readdir(d))
                n++;
        closedir(d);
        return n;
}

static long rss_kb(void)
{
        FILE *fp = fopen("/proc/self/status", "r");
        char line[256];
        long kb = -1;

        CHECK(fp);
        while (fgets(line, sizeof(line), fp)) {
                if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
                        break;
        }
        fclose(fp);
        return kb;
}

static int sc_cycles(void)
{
        const uint64_t cycles = 1000, warm = 50;
        struct rig *g = rig_new("      width: 16\n      height: 16\n      format: yuyv\n      timeout_ms: 500\n"
                                "      backoff_max_ms: 20\n", 4);
        long fds0 = -1, rss0 = -1, fds1, rss1;
        uint64_t t0 = now_ms();

        zcp_log_set_level(ZCP_LOG_ERROR);
        CHECK(rig_open(g) == 0);
        CHECK(rig_start(g) == 0);
        /* Two frames kept downstream: mmap buffers are still lent at every teardown (retired). */
        g->hold = 2;
        while (atomic_load(&g->stats.reconnects) < cycles && now_ms() < t0 + 120000) {
                CHECK(rig_step(g, NULL, NULL) >= 0);
                if (fds0 < 0 && atomic_load(&g->stats.reconnects) == warm &&
                    atomic_load(&g->stats.source_state) == ZCP_SOURCE_UP) {
                        fds0 = count_fds();
                        rss0 = rss_kb();
                }
        }
        /* Back up and streaming, then measure again in the same state. */
        while (atomic_load(&g->stats.source_state) != ZCP_SOURCE_UP && now_ms() < t0 + 125000)
                CHECK(rig_step(g, NULL, NULL) >= 0);
        fds1 = count_fds();
        rss1 = rss_kb();
        zcp_log_set_level(ZCP_LOG_INFO);
        printf("    %llu cycles in %llu ms, %llu frames; fds %ld -> %ld, RSS %ld -> %ld kB\n",
               (unsigned long long)atomic_load(&g->stats.reconnects), (unsigned long long)(now_ms() - t0),
               (unsigned long long)g->frames, fds0, fds1, rss0, rss1);
        CHECK(atomic_load(&g->stats.reconnects) == cycles);
        CHECK(fstat_("injected_enodev") == (long long)cycles);
        CHECK(fds0 > 0 && fds1 == fds0);
        CHECK_MSG(rss1 - rss0 < 2048, "RSS grew by %ld kB over %llu cycles", rss1 - rss0,
                  (unsigned long long)(cycles - warm));
        CHECK(fstat_("max_open_fds") == 1);
        CHECK(g->frames == 2 * cycles || g->frames == 2 * cycles + 1 || g->frames == 2 * cycles + 2);
        check_accounting(g);
        rig_free(g);
        check_fake_clean();
        return 0;
}

/* ---- scenario: the whole pipeline ---------------------------------------- */

/* Our own conversion of the fake's frame to NV12 (convert.h rules: YUV copied, 4:2:2 chroma (a+b+1)>>1). */
static void reference_nv12(enum zcp_pixfmt fmt, const uint8_t *src, uint8_t *nv12)
{
        uint8_t *uv = nv12 + W * H;

        if (fmt == ZCP_PIX_NV12) {
                memcpy(nv12, src, (size_t)W * H * 3 / 2);
                return;
        }
        CHECK(fmt == ZCP_PIX_YUYV);
        for (int y = 0; y < H; y++) {
                for (int x = 0; x < W; x++)
                        nv12[y * W + x] = src[y * 2 * W + 2 * x];
        }
        for (int y = 0; y < H / 2; y++) {
                const uint8_t *r0 = src + (size_t)(2 * y) * 2 * W, *r1 = r0 + 2 * W;

                for (int x = 0; x < W / 2; x++) {
                        uv[y * W + 2 * x] = (uint8_t)((r0[4 * x + 1] + r1[4 * x + 1] + 1) >> 1);
                        uv[y * W + 2 * x + 1] = (uint8_t)((r0[4 * x + 3] + r1[4 * x + 3] + 1) >> 1);
                }
        }
}

static int sc_pipeline(void)
{
        enum zcp_pixfmt fmt = env_fmt();
        const char *io = getenv("TEST_IO") ? getenv("TEST_IO") : "auto";
        enum zcp_capture_path path = env_path("TEST_PATH");
        const uint64_t want = 3 * NFRAMES + 3;
        char text[4096], out[ZCP_PATH_MAX], weights[ZCP_PATH_MAX], err[512], *line = NULL;
        struct zcp_config *config;
        struct zcp_stream *s;
        struct zcp_stream_view v;
        const struct zcp_plan *model;
        const struct zcp_backend_ops *cpu = &zcp_backend_cpu;
        struct zcp_backend_ctx *be;
        struct zcp_ring *ring;
        struct zcp_stream_stats st;
        struct zcp_allocator alloc;
        size_t cap = 0, frame = zcp_pixfmt_frame_size(fmt, W, H);
        uint8_t *ref = malloc(frame);
        uint64_t lines = 0, end;
        int efd = eventfd(0, EFD_CLOEXEC), r;
        FILE *fp;

        CHECK(ref && efd >= 0);
        snprintf(out, sizeof(out), "%s/out-%s-%s.jsonl", dir, zcp_pixfmt_name(fmt), io);
        snprintf(weights, sizeof(weights), "%s", zcp_test_default_weights());
        snprintf(text, sizeof(text),
                 "streams:\n"
                 "  - name: cam\n"
                 "    source:\n"
                 "      type: v4l2\n"
                 "      device: %s/video0\n"
                 "      width: %u\n"
                 "      height: %u\n"
                 "      format: %s\n"
                 "      io: %s\n"
                 "    ring:\n"
                 "      slots: 6\n"
                 "      drop: block\n"
                 "    gpu:\n"
                 "      backend: cpu\n"
                 "    model:\n"
                 "      path: %s\n"
                 "      input_width: 32\n"
                 "      input_height: 32\n"
                 "    motion:\n"
                 "      cell: 8\n"
                 "    output:\n"
                 "      type: file\n"
                 "      path: %s\n"
                 "metrics:\n"
                 "  http:\n"
                 "    enabled: false\n",
                 dir, W, H, zcp_pixfmt_name(fmt), io, weights, out);
        CHECK_MSG(zcp_config_parse("pipeline.yaml", text, strlen(text), &config, err, sizeof(err)) == 0, "%s", err);
        r = zcp_stream_new(&config->streams[0], 0, efd, &s);
        CHECK_MSG(r == 0, "zcp_stream_new: %d", r);
        zcp_stream_view(s, &v);
        CHECK(v.source->fmt == fmt && v.source->path == path);
        CHECK(zcp_stream_start(s) == 0);
        end = now_ms() + 30000;
        while (atomic_load(&v.stats->published) < want && now_ms() < end)
                usleep(2000);
        zcp_stream_stop(s);
        CHECK(zcp_stream_join(s) == 0);
        CHECK_MSG(atomic_load(&v.stats->published) >= want, "published %llu",
                  (unsigned long long)atomic_load(&v.stats->published));
        /* Every capture is accounted for: published, or dropped under one reason. */
        CHECK_MSG(atomic_load(&v.stats->captured) == atomic_load(&v.stats->published) + zcp_stats_dropped_total(v.stats),
                  "captured %llu != published %llu + dropped %llu", (unsigned long long)atomic_load(&v.stats->captured),
                  (unsigned long long)atomic_load(&v.stats->published),
                  (unsigned long long)zcp_stats_dropped_total(v.stats));
        /*
         * drop: block against a camera that keeps its frames until a buffer is
         * queued (the fake without FAKECAM_LOSSY): however slow the pipeline,
         * nothing may be dropped, on every io path. On mmap the source once
         * dequeued a frame with no free slot and dropped it as ring_full.
         */
        for (int why = 0; why < ZCP_DROP_REASON_COUNT; why++)
                CHECK_MSG(atomic_load(&v.stats->dropped[why]) == 0, "dropped %llu as %s under drop: block",
                          (unsigned long long)atomic_load(&v.stats->dropped[why]), zcp_drop_reason_names[why]);
        /* mmap: converted in place in the driver's buffers and read there, never copied. */
        CHECK(atomic_load(&v.stats->capture_path) == path && atomic_load(&v.stats->copies) == 0);
        zcp_stream_free(s);
        close(efd);

        /* The reference: our conversion of the fake's frames, through the CPU backend, in order. */
        r = zcp_model_acquire(&config->streams[0].model, &model, err, sizeof(err));   /* as the pipeline does */
        CHECK_MSG(r == 0, "%s", err);
        zcp_stream_stats_init(&st);
        CHECK(cpu->allocator(0, &alloc) == 0);
        CHECK(zcp_ring_new(1, zcp_nv12_size(W, H), 0, &alloc, &st, &ring) == 0);
        {
                struct zcp_backend_params bp;
                CHECK_MSG(zcp_backend_params_init(&bp, &config->streams[0], model, W, H, "cam", err, sizeof(err)) == 0,
                          "%s", err);
                CHECK(cpu->open(&bp, ring, &be) == 0);
        }
        fp = fopen(out, "r");
        CHECK(fp);
        while (getline(&line, &cap, fp) > 0) {
                struct zcp_slot *slot = zcp_ring_slot(ring, 0);
                const char *bad = zcp_json_line_ok(line, strlen(line));
                char expect[8192];
                const char *got, *exp;
                unsigned long long seq;
                const char *p = strstr(line, "\"seq\":");

                CHECK_MSG(!bad, "%s: not strict JSON (%s): %s", out, bad, line);
                CHECK(p && sscanf(p, "\"seq\":%llu", &seq) == 1);
                CHECK_MSG(seq == lines, "line %llu has seq %llu", (unsigned long long)lines, seq);
                make_frame(ref, frame, (uint32_t)(seq % NFRAMES));
                reference_nv12(fmt, ref, slot->data);
                memset(&slot->frame, 0, sizeof(slot->frame));
                slot->frame.seq = seq;
                slot->frame.width = W;
                slot->frame.height = H;
                slot->frame.fmt = ZCP_PIX_NV12;
                slot->frame.stride = W;
                slot->frame.bytes = zcp_nv12_size(W, H);
                slot->result->valid = 0;
                CHECK(cpu->submit(be, slot) == 0 && cpu->wait(be, slot) == 0 && slot->result->valid);
                CHECK(zcp_publish_format(expect, sizeof(expect), "cam", &slot->frame, slot->result, NULL) > 0);
                got = strstr(line, "\"motion\":");
                exp = strstr(expect, "\"motion\":");
                CHECK(got && exp);
                CHECK_MSG(strcmp(got, exp) == 0, "frame %llu through the pipeline:\n  got      %s  expected %s", seq,
                          got, exp);
                lines++;
        }
        fclose(fp);
        free(line);
        CHECK(lines >= want);
        printf("    %llu published frames equal the reference\n", (unsigned long long)lines);
        cpu->close(be);
        zcp_ring_free(ring);
        zcp_model_release(model);
        zcp_config_free(config);
        free(ref);
        check_fake_clean();
        return 0;
}

/* ---- child dispatch ------------------------------------------------------ */

struct scenario {
        const char *name;
        int (*run)(void);
        const char *env[10];  /* NAME=VALUE, %D stands for the temp dir; NULL-terminated */
};

#define DEV "FAKECAM_DEVICE=%D/video0"
/* Every fault sc_faults() checks, each once, at frames it knows. */
#define EVERY_FAULT \
        "FAKECAM_FAULTS=error@10,short@20,oversize@30,badindex@40,dup@50,seqgap@60:3,eio@70,enodev@80,stall@95:1500"

static const struct scenario scenarios[] = {
        { "yuyv-userptr", sc_format, { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=100" } },
        { "yuyv-mmap", sc_format,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=100", "TEST_IO=mmap",
            "TEST_PATH=registered", "TEST_EXPLICIT=1" } },
        { "yuyv-mmap-nomap", sc_format,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=100", "TEST_IO=mmap",
            "TEST_PATH=copy", "TEST_INFO_PATH=registered", "TEST_ALLOC=nomap" } },
        { "yuyv-mmap-mapfail", sc_format,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=100", "TEST_IO=mmap",
            "TEST_PATH=copy", "TEST_INFO_PATH=registered", "TEST_ALLOC=failmap" } },
        { "grey-mmap-small", sc_format,
          { DEV, "FAKECAM_FORMAT=GREY", "FAKECAM_FRAMES=%D/grey.raw", "FAKECAM_FPS=100", "TEST_IO=mmap",
            "TEST_PATH=copy" } },
        { "nv12-userptr", sc_format, { DEV, "FAKECAM_FORMAT=NV12", "FAKECAM_FRAMES=%D/nv12.raw", "FAKECAM_FPS=100" } },
        { "nv12-no-userptr", sc_format,
          { DEV, "FAKECAM_FORMAT=NV12", "FAKECAM_FRAMES=%D/nv12.raw", "FAKECAM_FPS=100", "FAKECAM_NO_USERPTR=1",
            "TEST_PATH=registered" } },
        { "userptr-efault", sc_format,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=100",
            "FAKECAM_FAULTS=refuse_qbuf:EFAULT", "TEST_PATH=registered", "TEST_INFO_PATH=direct" } },
        { "nv12-padded", sc_format,
          { DEV, "FAKECAM_FORMAT=NV12", "FAKECAM_FRAMES=%D/nv12.raw", "FAKECAM_FPS=100", "FAKECAM_BPL=80",
            "TEST_EXPLICIT=1" } },
        { "uyvy", sc_format, { DEV, "FAKECAM_FORMAT=UYVY", "FAKECAM_FRAMES=%D/uyvy.raw", "FAKECAM_FPS=100" } },
        { "yu12", sc_format,
          { DEV, "FAKECAM_FORMAT=YU12", "FAKECAM_FRAMES=%D/i420.raw", "FAKECAM_FPS=100", "FAKECAM_BPL=96",
            "TEST_EXPLICIT=1" } },
        { "rgb24", sc_format, { DEV, "FAKECAM_FORMAT=RGB3", "FAKECAM_FRAMES=%D/rgb24.raw", "FAKECAM_FPS=100" } },
        { "bgr24-mmap", sc_format,
          { DEV, "FAKECAM_FORMAT=BGR3", "FAKECAM_FRAMES=%D/bgr24.raw", "FAKECAM_FPS=100", "TEST_IO=mmap",
            "TEST_PATH=registered" } },
        { "grey", sc_format, { DEV, "FAKECAM_FORMAT=GREY", "FAKECAM_FRAMES=%D/grey.raw", "FAKECAM_FPS=100" } },
        { "yvyu", sc_format, { DEV, "FAKECAM_FORMAT=YVYU", "FAKECAM_FRAMES=%D/yvyu.raw", "FAKECAM_FPS=100" } },
        { "nv21-padded", sc_format,
          { DEV, "FAKECAM_FORMAT=NV21", "FAKECAM_FRAMES=%D/nv21.raw", "FAKECAM_FPS=100", "FAKECAM_BPL=72" } },
        { "yv12", sc_format, { DEV, "FAKECAM_FORMAT=YV12", "FAKECAM_FRAMES=%D/yv12.raw", "FAKECAM_FPS=100" } },
        { "bgrx-xr24", sc_format,
          { DEV, "FAKECAM_FORMAT=XR24", "FAKECAM_FRAMES=%D/bgrx.raw", "FAKECAM_FPS=100", "TEST_EXPLICIT=1" } },
        { "bgrx-bgr4", sc_format,
          { DEV, "FAKECAM_FORMAT=BGR4", "FAKECAM_FRAMES=%D/bgrx.raw", "FAKECAM_FPS=100", "TEST_EXPLICIT=1",
            "TEST_FMT=bgrx" } },
        { "rgbx-mmap-nomap", sc_format,
          { DEV, "FAKECAM_FORMAT=XB24", "FAKECAM_FRAMES=%D/rgbx.raw", "FAKECAM_FPS=100", "TEST_IO=mmap",
            "TEST_PATH=copy", "TEST_INFO_PATH=registered", "TEST_ALLOC=nomap" } },
        { "timestamp-unknown", sc_ts_unknown,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=200", "FAKECAM_TIMESTAMP=unknown" } },
        { "auto-format", sc_auto_format,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=0",
            "FAKECAM_EXTRA=NV12@32x24,MJPG,GREY" } },
        { "absent-auto-camera-yaml", sc_absent_auto,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_WIDTH=1280", "FAKECAM_HEIGHT=720", "FAKECAM_FPS=100",
            "FAKECAM_FAULTS=absent:600" } },
        { "absent-auto-no-reconfigure", sc_absent_auto,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_WIDTH=1280", "FAKECAM_HEIGHT=720", "FAKECAM_FPS=100",
            "FAKECAM_FAULTS=absent:300", "TEST_NO_RECONF=1" } },
        { "absent-auto-same-format", sc_absent_auto,
          { DEV, "FAKECAM_FORMAT=XR24", "FAKECAM_WIDTH=1280", "FAKECAM_HEIGHT=720", "FAKECAM_FPS=100",
            "FAKECAM_FAULTS=absent:300", "TEST_NO_RECONF=1", "TEST_FMT=bgrx" } },
        { "absent-auto-mjpeg", sc_absent_auto_mjpeg,
          { DEV, "FAKECAM_FORMAT=MJPG", "FAKECAM_FRAMES=%D/frames.mjpg", "FAKECAM_FPS=0",
            "FAKECAM_FAULTS=absent:300" } },
        { "resize-down-userptr", sc_resize,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FPS=0", "FAKECAM_FAULTS=resize:32x24@20", "TEST_RESIZE=32x24" } },
        { "resize-up-userptr", sc_resize,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FPS=0", "FAKECAM_FAULTS=resize:96x64@20", "TEST_RESIZE=96x64" } },
        { "resize-up-mmap", sc_resize,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FPS=0", "FAKECAM_FAULTS=resize:96x64@20", "TEST_RESIZE=96x64",
            "FAKECAM_NO_USERPTR=1" } },
        { "resize-up-mmap-held", sc_resize,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FPS=0", "FAKECAM_FAULTS=resize:96x64@20", "TEST_RESIZE=96x64",
            "FAKECAM_NO_USERPTR=1", "TEST_HOLD=1", "TEST_TIMEOUT_MS=400" } },
        { "resize-down-mmap-nomap", sc_resize,
          { DEV, "FAKECAM_FORMAT=NV12", "FAKECAM_FPS=0", "FAKECAM_FAULTS=resize:32x24@20", "TEST_RESIZE=32x24",
            "TEST_IO=mmap", "TEST_ALLOC=nomap", "TEST_EXPLICIT=1" } },
        { "resize-mplane-mmap", sc_resize,
          { DEV, "FAKECAM_FORMAT=NV12", "FAKECAM_FPS=0", "FAKECAM_FAULTS=resize:96x64@20", "TEST_RESIZE=96x64",
            "TEST_IO=mmap", "FAKECAM_MPLANE=1" } },
        { "resize-no-events-no-reconfigure", sc_resize,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FPS=0", "FAKECAM_FAULTS=resize:32x24@20", "TEST_RESIZE=32x24",
            "FAKECAM_NO_EVENTS=1", "TEST_NO_RECONF=1" } },
        { "resize-no-reconfigure", sc_resize,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FPS=0", "FAKECAM_FAULTS=resize:32x24@20", "TEST_RESIZE=32x24",
            "TEST_NO_RECONF=1" } },
        { "resize-no-events", sc_resize,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FPS=100", "FAKECAM_FAULTS=resize:96x64@20", "TEST_RESIZE=96x64",
            "FAKECAM_NO_EVENTS=1", "TEST_TIMEOUT_MS=400" } },
        { "yuyv-mplane-userptr", sc_format,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=100", "FAKECAM_MPLANE=1" } },
        { "yuyv-mplane-mmap", sc_format,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=100", "FAKECAM_MPLANE=1",
            "TEST_IO=mmap", "TEST_PATH=registered", "TEST_EXPLICIT=1" } },
        { "yuyv-mplane-mmap-nomap", sc_format,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=100", "FAKECAM_MPLANE=1",
            "TEST_IO=mmap", "TEST_PATH=copy", "TEST_INFO_PATH=registered", "TEST_ALLOC=nomap" } },
        { "nv12-mplane-userptr", sc_format,
          { DEV, "FAKECAM_FORMAT=NV12", "FAKECAM_FRAMES=%D/nv12.raw", "FAKECAM_FPS=100", "FAKECAM_MPLANE=1" } },
        { "nv12-mplane-mmap", sc_format,
          { DEV, "FAKECAM_FORMAT=NV12", "FAKECAM_FRAMES=%D/nv12.raw", "FAKECAM_FPS=100", "FAKECAM_MPLANE=1",
            "FAKECAM_NO_USERPTR=1", "TEST_PATH=registered" } },
        { "nv12-mplane-padded", sc_format,
          { DEV, "FAKECAM_FORMAT=NV12", "FAKECAM_FRAMES=%D/nv12.raw", "FAKECAM_FPS=100", "FAKECAM_MPLANE=1",
            "FAKECAM_BPL=80", "TEST_EXPLICIT=1" } },
        { "faults-mplane-mmap", sc_faults,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=0", "FAKECAM_NO_USERPTR=1",
            "FAKECAM_MPLANE=1", EVERY_FAULT } },
        { "mjpeg", sc_mjpeg,
          { DEV, "FAKECAM_FORMAT=MJPG", "FAKECAM_FRAMES=%D/frames.mjpg", "FAKECAM_FPS=0", "FAKECAM_FAULTS=short@13" } },
        { "faults-userptr", sc_faults,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=0", EVERY_FAULT } },
        { "faults-mmap", sc_faults,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=0", "FAKECAM_NO_USERPTR=1",
            EVERY_FAULT } },
        { "faults-mmap-nomap", sc_faults,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=0", "FAKECAM_NO_USERPTR=1",
            "TEST_ALLOC=nomap", EVERY_FAULT } },
        { "retire", sc_retire,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=0",
            "FAKECAM_FAULTS=enodev@20:300" } },
        { "starved-userptr", sc_starved,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=200", "FAKECAM_LOSSY=1" } },
        { "starved-mmap", sc_starved,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=200", "FAKECAM_NO_USERPTR=1" } },
        { "starved-mmap-all-lent", sc_starved,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=200", "FAKECAM_NO_USERPTR=1",
            "FAKECAM_LOSSY=1", "TEST_SLOTS=32" } },
        { "starved-mmap-nomap", sc_starved,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=200", "FAKECAM_NO_USERPTR=1",
            "TEST_ALLOC=nomap" } },
        { "absent-at-start", sc_absent,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=200", "FAKECAM_FAULTS=absent:600" } },
        { "absent-stop", sc_absent_stop, { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FAULTS=absent:60000" } },
        { "config-errors", sc_config_errors, { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw" } },
        { "userptr-refused", sc_userptr_refused,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_NO_USERPTR=1" } },
        { "refuse-sfmt", sc_refuse_sfmt, { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FAULTS=refuse_sfmt" } },
        { "refuse-reqbufs", sc_refuse_reqbufs, { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FAULTS=refuse_reqbufs" } },
        { "refuse-streamon-busy", sc_refuse_streamon_busy,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FAULTS=refuse_streamon:EBUSY#2" } },
        { "symlink", sc_symlink,
          { "FAKECAM_DEVICE=%D/video0:%D/video1", "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=0",
            "FAKECAM_FAULTS=enodev@20:400" } },
        { "cycles-userptr", sc_cycles,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_WIDTH=16", "FAKECAM_HEIGHT=16", "FAKECAM_FPS=0",
            "FAKECAM_FAULTS=enodev@2/3#1000" } },
        { "cycles-mmap", sc_cycles,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_WIDTH=16", "FAKECAM_HEIGHT=16", "FAKECAM_FPS=0",
            "FAKECAM_NO_USERPTR=1", "FAKECAM_FAULTS=enodev@2/3#1000" } },
        { "cycles-mmap-nomap", sc_cycles,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_WIDTH=16", "FAKECAM_HEIGHT=16", "FAKECAM_FPS=0",
            "FAKECAM_NO_USERPTR=1", "TEST_ALLOC=nomap", "FAKECAM_FAULTS=enodev@2/3#1000" } },
        { "pipeline-yuyv", sc_pipeline, { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=300" } },
        { "pipeline-nv12", sc_pipeline, { DEV, "FAKECAM_FORMAT=NV12", "FAKECAM_FRAMES=%D/nv12.raw", "FAKECAM_FPS=300" } },
        { "pipeline-yuyv-mmap", sc_pipeline,
          { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=300", "TEST_IO=mmap",
            "TEST_PATH=registered" } },
};
#define SCENARIO_COUNT (sizeof(scenarios) / sizeof(scenarios[0]))

static int child_main(const char *name)
{
        *(void **)(&fake_stat) = dlsym(RTLD_DEFAULT, "fakecam_stat");
        *(void **)(&fake_last_node) = dlsym(RTLD_DEFAULT, "fakecam_last_node");
        CHECK_MSG(fake_stat && fake_last_node, "libfakecam.so is not preloaded");
        for (size_t i = 0; i < SCENARIO_COUNT; i++) {
                if (strcmp(scenarios[i].name, name) == 0)
                        return scenarios[i].run();
        }
        fprintf(stderr, "no scenario %s\n", name);
        return 2;
}

/* ---- parent --------------------------------------------------------------- */

static char tmpdir[] = "/tmp/zcp-v4l2-XXXXXX";
static char preload[2 * ZCP_PATH_MAX];

static void subst(char *out, size_t n, const char *in)
{
        size_t o = 0;

        for (; *in && o + 1 < n; in++) {
                if (in[0] == '%' && in[1] == 'D') {
                        o += (size_t)snprintf(out + o, n - o, "%s", tmpdir);
                        if (o >= n)
                                o = n - 1;
                        in++;
                } else {
                        out[o++] = *in;
                }
        }
        out[o] = '\0';
}

/* Under ASan the runtime must come first in LD_PRELOAD: find it in our own maps. */
static void find_preload(void)
{
        char fake[ZCP_PATH_MAX], line[1024], asan[ZCP_PATH_MAX] = "";
        FILE *fp = fopen("/proc/self/maps", "r");

        snprintf(fake, sizeof(fake), "%s/tests/fakecam/libfakecam.so", zcp_test_build_root());
        CHECK_MSG(access(fake, R_OK) == 0, "%s: %s (build the tree first)", fake, strerror(errno));
        CHECK(fp);
        while (fgets(line, sizeof(line), fp)) {
                char *p = strchr(line, '/');

                if (p && strstr(p, "libasan.so")) {
                        p[strcspn(p, "\n")] = '\0';
                        snprintf(asan, sizeof(asan), "%s", p);
                        break;
                }
        }
        fclose(fp);
        snprintf(preload, sizeof(preload), "%s%s%s", asan, asan[0] ? ":" : "", fake);
}

static void make_samples(void)
{
        char path[ZCP_PATH_MAX];
        uint8_t *buf = malloc(1 << 20);
        size_t len;

        CHECK(buf);
        for (size_t i = 0; i < FMT_COUNT; i++) {
                size_t size = zcp_pixfmt_frame_size(fmt_table[i].fmt, W, H);

                for (uint32_t j = 0; j < NFRAMES; j++)
                        make_frame(buf + j * size, size, j);
                snprintf(path, sizeof(path), "%s/%s.raw", tmpdir, fmt_table[i].name);
                write_file(path, buf, size * NFRAMES);
        }
        len = make_mjpeg(buf, 1 << 20);
        snprintf(path, sizeof(path), "%s/frames.mjpg", tmpdir);
        write_file(path, buf, len);
        /* The node files (realpath needs them; the fake answers for them). */
        snprintf(path, sizeof(path), "%s/video0", tmpdir);
        write_file(path, "", 0);
        snprintf(path, sizeof(path), "%s/video1", tmpdir);
        write_file(path, "", 0);
        free(buf);
}

/* Runs argv with env (plus LD_PRELOAD); returns the wait status, or -1 after killing it at timeout. */
static int run_child(char *const argv[], const char *const *env, int timeout_s, pid_t *ret_pid, bool wait_it)
{
        pid_t pid = fork();
        int status;
        uint64_t end;

        CHECK(pid >= 0);
        if (pid == 0) {
                char kv[4096];

                for (int i = 0; env[i]; i++) {
                        char *eq;

                        subst(kv, sizeof(kv), env[i]);
                        eq = strchr(kv, '=');
                        CHECK(eq);
                        *eq = '\0';
                        setenv(kv, eq + 1, 1);
                }
                setenv("LD_PRELOAD", preload, 1);
                execv(argv[0], argv);
                fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        if (ret_pid)
                *ret_pid = pid;
        if (!wait_it)
                return 0;
        end = now_ms() + (uint64_t)timeout_s * 1000;
        for (;;) {
                pid_t w = waitpid(pid, &status, WNOHANG);

                if (w == pid)
                        return status;
                if (now_ms() > end) {
                        kill(pid, SIGKILL);
                        waitpid(pid, &status, 0);
                        return -1;
                }
                usleep(5000);
        }
}

static bool scenario_ok(const char *self, const struct scenario *s)
{
        char *argv[] = { (char *)self, (char *)"--child", (char *)s->name, tmpdir, NULL };
        uint64_t t0 = now_ms();
        int status;

        printf("--- %s\n", s->name);
        fflush(stdout);
        status = run_child(argv, s->env, 240, NULL, true);
        if (status == -1) {
                printf("FAIL %s: timed out\n", s->name);
                return false;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                printf("FAIL %s: %s %d\n", s->name, WIFEXITED(status) ? "exit" : "signal",
                       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                return false;
        }
        printf("ok   %s (%llu ms)\n", s->name, (unsigned long long)(now_ms() - t0));
        return true;
}

/*
 * Runs zcpipe (pid) for ms, checks it is still running, sends SIGTERM and
 * waits up to 5 s. Returns the wait status and *ret_waited (ms after
 * SIGTERM), or -1 after killing it when it did not exit.
 */
static int run_then_term(const char *name, pid_t pid, unsigned ms, uint64_t *ret_waited)
{
        int status = 0;
        uint64_t t0;
        pid_t w;

        usleep(ms * 1000);
        CHECK_MSG(waitpid(pid, &status, WNOHANG) == 0, "%s: zcpipe exited early (status 0x%x)", name, status);
        t0 = now_ms();
        kill(pid, SIGTERM);
        while ((w = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() < t0 + 5000)
                usleep(2000);
        *ret_waited = now_ms() - t0;
        if (w == 0) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                printf("FAIL %s: zcpipe still running 5 s after SIGTERM\n", name);
                return -1;
        }
        return status;
}

/* The daemon: streams from the fake and stops on SIGTERM; SIGTERM during back-off exits 0 within 2 s. */
static int daemon_case(const char *name, const char *faults, bool expect_results)
{
        const char *zcpipe = getenv("ZCPIPE");
        char cfgpath[ZCP_PATH_MAX], out[ZCP_PATH_MAX], text[4096], fault_env[256], stats_env[ZCP_PATH_MAX + 32];
        const char *env[] = { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_FRAMES=%D/yuyv.raw", "FAKECAM_FPS=60", fault_env,
                              stats_env, NULL };
        long long delivered = -1, violations = -1, open_fds = -1, absent = -1;
        long n = 0;
        char *argv[] = { NULL, (char *)"--config", cfgpath, NULL };
        uint64_t waited;
        int status = 0;
        pid_t pid;

        printf("--- %s\n", name);
        if (!zcpipe || access(zcpipe, X_OK) != 0) {
                printf("skip %s: no zcpipe binary ($ZCPIPE)\n", name);
                return 77;
        }
        argv[0] = (char *)zcpipe;
        snprintf(fault_env, sizeof(fault_env), "FAKECAM_FAULTS=%s", faults);
        snprintf(stats_env, sizeof(stats_env), "FAKECAM_STATS=%s/%s.stats", tmpdir, name);
        snprintf(cfgpath, sizeof(cfgpath), "%s/%s.yaml", tmpdir, name);
        snprintf(out, sizeof(out), "%s/%s.jsonl", tmpdir, name);
        snprintf(text, sizeof(text),
                 "streams:\n"
                 "  - name: cam\n"
                 "    source:\n"
                 "      type: v4l2\n"
                 "      device: %s/video0\n"
                 "      width: %u\n"
                 "      height: %u\n"
                 "      format: yuyv\n"
                 "      backoff_max_ms: 5000\n"
                 "    gpu:\n"
                 "      backend: cpu\n"
                 "    model:\n"
                 "      enabled: false\n"
                 "    output:\n"
                 "      type: file\n"
                 "      path: %s\n"
                 "metrics:\n"
                 "  http:\n"
                 "    enabled: false\n",
                 tmpdir, W, H, out);
        write_file(cfgpath, text, strlen(text));
        run_child(argv, env, 0, &pid, false);
        /* In back-off that is well into a 3.2 s wait: one long sleep would miss the 2 s. */
        status = run_then_term(name, pid, 3500, &waited);
        if (status == -1)
                return 1;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || waited > 2000) {
                printf("FAIL %s: status 0x%x after %llu ms (expected exit 0 within 2 s)\n", name, status,
                       (unsigned long long)waited);
                return 1;
        }
        {
                char line[8192], path[ZCP_PATH_MAX + 16];
                FILE *fp = fopen(out, "r");

                while (fp && fgets(line, sizeof(line), fp)) {
                        const char *bad = zcp_json_line_ok(line, strlen(line));

                        CHECK_MSG(!bad, "%s: not strict JSON (%s): %s", out, bad, line);
                        n++;
                }
                if (fp)
                        fclose(fp);
                /* The fake's counters, written when zcpipe exited. */
                snprintf(path, sizeof(path), "%s/%s.stats", tmpdir, name);
                fp = fopen(path, "r");
                while (fp && fgets(line, sizeof(line), fp)) {
                        sscanf(line, "delivered %lld", &delivered);
                        sscanf(line, "violations %lld", &violations);
                        sscanf(line, "open_fds %lld", &open_fds);
                        sscanf(line, "injected_absent %lld", &absent);
                }
                if (fp)
                        fclose(fp);
        }
        if (violations != 0 || open_fds != 0) {
                printf("FAIL %s: fakecam stats: %lld violations, %lld device fds open at exit\n", name, violations,
                       open_fds);
                return 1;
        }
        if (expect_results && (n < 10 || delivered < n)) {
                printf("FAIL %s: %ld result lines in 3.5 s at 60 fps, the camera delivered %lld\n", name, n,
                       delivered);
                return 1;
        }
        if (!expect_results && (n != 0 || absent < 3)) {
                printf("FAIL %s: %ld result lines, %lld refused opens while absent\n", name, n, absent);
                return 1;
        }
        printf("ok   %s (exit 0, %llu ms after SIGTERM; %ld results, camera delivered %lld, %lld opens refused)\n",
               name, (unsigned long long)waited, n, delivered, absent);
        return 0;
}

/* A TCP port nothing listens on now (the kernel's pick for port 0). */
static int free_port(void)
{
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

        CHECK(fd >= 0);
        CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
        CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
        port = ntohs(a.sin_port);
        close(fd);
        return port;
}

/* Replaces the one occurrence of `what` in buf (of size n) with `with`. */
static void replace_once(char *buf, size_t n, const char *what, const char *with)
{
        char *p = strstr(buf, what);
        size_t wl = strlen(what), nl = strlen(with), rest;

        CHECK_MSG(p && !strstr(p + wl, what), "config/camera.yaml: '%s' is not there exactly once", what);
        rest = strlen(p + wl) + 1;
        CHECK(strlen(buf) - wl + nl < n);
        memmove(p + nl, p + wl, rest);
        memcpy(p, with, nl);
}

/*
 * The example a user starts from: config/camera.yaml with only the device
 * (and the metrics port, which another test may hold) changed, against a
 * 1280x720 YUYV fake at 30 fps, and its results file moved from
 * /var/lib/zcpipe into the test's folder. It must stream (format auto picks
 * YUYV), write one JSON line per published frame, and exit 0 on SIGTERM.
 * absent: the camera is not there for the whole run: zcpipe must start and
 * wait for it (format auto is no configuration error), and exit 0 on SIGTERM.
 * late: the camera appears 1.5 s after zcpipe started (a USB camera plugged
 * in after boot): the ring made for the provisional geometry is replaced
 * (the source's RECONFIGURE, the supervisor's new ring) and every result
 * line is a whole 1280x720 frame.
 */
enum camera_yaml_mode { CAMERA_PRESENT, CAMERA_ABSENT, CAMERA_LATE };

static int camera_yaml_case(enum camera_yaml_mode mode)
{
        static const char *const names[] = { "daemon-camera-yaml", "daemon-camera-yaml-absent",
                                             "daemon-camera-yaml-late" };
        const char *name = names[mode];
        const bool absent = mode == CAMERA_ABSENT;
        const int run_ms = mode == CAMERA_LATE ? 6000 : 3000;
        const char *zcpipe = getenv("ZCPIPE");
        char cfgpath[ZCP_PATH_MAX], src[ZCP_PATH_MAX], out[ZCP_PATH_MAX], device[ZCP_PATH_MAX + 32], port[64];
        char *text = malloc(1 << 16), line[8192];
        const char *env[] = { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_WIDTH=1280", "FAKECAM_HEIGHT=720", "FAKECAM_FPS=30",
                              absent                ? "FAKECAM_FAULTS=absent:600000"
                              : mode == CAMERA_LATE ? "FAKECAM_FAULTS=absent:1500"
                                                    : NULL,
                              NULL };
        char *argv[] = { NULL, (char *)"--config", cfgpath, NULL };
        long lines = 0, bad = 0;
        int status = 0, ofd;
        size_t len;
        pid_t pid;
        uint64_t waited;
        FILE *fp;

        printf("--- %s\n", name);
        if (!zcpipe || access(zcpipe, X_OK) != 0) {
                printf("skip %s: no zcpipe binary ($ZCPIPE)\n", name);
                free(text);
                return 77;
        }
        argv[0] = (char *)zcpipe;
        CHECK(text);
        snprintf(src, sizeof(src), "%s/config/camera.yaml", zcp_test_src_root());
        fp = fopen(src, "r");
        CHECK_MSG(fp, "%s: %s", src, strerror(errno));
        len = fread(text, 1, (1 << 16) - 1, fp);
        fclose(fp);
        text[len] = '\0';
        snprintf(device, sizeof(device), "device: %s/video0 ", tmpdir);
        replace_once(text, 1 << 16, "device: /dev/video0 ", device);
        snprintf(port, sizeof(port), "port: %d ", free_port());
        replace_once(text, 1 << 16, "port: 9464 ", port);
        snprintf(out, sizeof(out), "%s/%s.jsonl", tmpdir, name);
        snprintf(line, sizeof(line), "path: %s ", out);   /* the service's file, in the test's folder */
        replace_once(text, 1 << 16, "path: /var/lib/zcpipe/camera0.jsonl ", line);
        snprintf(cfgpath, sizeof(cfgpath), "%s/%s.yaml", tmpdir, name);
        write_file(cfgpath, text, strlen(text));
        free(text);
        ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(ofd >= 0);
        /* run_child, with stdout to the same file (output: file in the example appends to it). */
        {
                int saved = dup(STDOUT_FILENO);

                CHECK(saved >= 0 && dup2(ofd, STDOUT_FILENO) >= 0);
                run_child(argv, env, 0, &pid, false);
                CHECK(dup2(saved, STDOUT_FILENO) >= 0);
                close(saved);
                close(ofd);
        }
        status = run_then_term(name, pid, run_ms, &waited);
        if (status == -1)
                return 1;
        fp = fopen(out, "r");
        CHECK(fp);
        while (fgets(line, sizeof(line), fp)) {
                static const char head[] = "{\"stream\":\"camera0\",\"seq\":";

                lines++;
                bad += strncmp(line, head, sizeof(head) - 1) != 0 || zcp_json_line_ok(line, strlen(line)) != NULL ||
                       !strstr(line, "\"width\":1280,\"height\":720,");
        }
        fclose(fp);
        /* The CPU model at 1280x720 under ASan on a busy machine is slow; frames may be dropped (newest). */
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || (absent ? lines != 0 : lines < 5) || bad) {
                printf("FAIL %s: status 0x%x, %ld result lines (%ld malformed or not 1280x720) in %d ms\n", name,
                       status, lines, bad, run_ms);
                return 1;
        }
        printf("ok   %s (exit 0; %ld result lines in %d ms)\n", name, lines, run_ms);
        return 0;
}

/*
 * pinned_budget counts the camera's buffers registered to be read in place:
 * a 1280x720 YUYV camera, 2 ring slots (3.5 MiB), budget 6 MiB. With USERPTR
 * the ring is all that is pinned: it streams. Where the driver refuses
 * USERPTR, its 4 MMAP buffers (7 MiB) are registered too: over the budget,
 * the start fails with exit 78 (a configuration the host cannot hold).
 */
static int budget_registered_case(bool userptr)
{
        const char *name = userptr ? "daemon-budget-userptr" : "daemon-budget-registered";
        const char *zcpipe = getenv("ZCPIPE");
        char cfgpath[ZCP_PATH_MAX], out[ZCP_PATH_MAX], text[4096];
        const char *env[] = { DEV, "FAKECAM_FORMAT=YUYV", "FAKECAM_WIDTH=1280", "FAKECAM_HEIGHT=720", "FAKECAM_FPS=30",
                              userptr ? NULL : "FAKECAM_NO_USERPTR=1", NULL };
        char *argv[] = { NULL, (char *)"--config", cfgpath, NULL };
        uint64_t waited;
        int status;
        pid_t pid;

        printf("--- %s\n", name);
        if (!zcpipe || access(zcpipe, X_OK) != 0) {
                printf("skip %s: no zcpipe binary ($ZCPIPE)\n", name);
                return 77;
        }
        argv[0] = (char *)zcpipe;
        snprintf(cfgpath, sizeof(cfgpath), "%s/%s.yaml", tmpdir, name);
        snprintf(out, sizeof(out), "%s/%s.jsonl", tmpdir, name);
        snprintf(text, sizeof(text),
                 "pinned_budget: 6M\n"
                 "streams:\n"
                 "  - name: cam\n"
                 "    source:\n"
                 "      type: v4l2\n"
                 "      device: %s/video0\n"
                 "      width: 1280\n"
                 "      height: 720\n"
                 "      format: yuyv\n"
                 "    ring:\n"
                 "      slots: 2\n"
                 "    gpu:\n"
                 "      backend: cpu\n"
                 "    model:\n"
                 "      enabled: false\n"
                 "    output:\n"
                 "      type: file\n"
                 "      path: %s\n"
                 "metrics:\n"
                 "  http:\n"
                 "    enabled: false\n",
                 tmpdir, out);
        write_file(cfgpath, text, strlen(text));
        if (!userptr) {
                status = run_child(argv, env, 60, NULL, true);
                if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 78) {
                        printf("FAIL %s: status 0x%x (expected exit 78: ring and registered buffers over "
                               "pinned_budget)\n", name, status);
                        return 1;
                }
                printf("ok   %s (exit 78)\n", name);
                return 0;
        }
        run_child(argv, env, 0, &pid, false);
        status = run_then_term(name, pid, 2000, &waited);
        if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                printf("FAIL %s: status 0x%x (expected it to stream, then exit 0 on SIGTERM)\n", name, status);
                return 1;
        }
        printf("ok   %s (exit 0)\n", name);
        return 0;
}

/* tests/hw/hwtest_vivid pointed at the fake (ZCP_TEST_V4L2_DEVICE). */
static int hw_suite_case(void)
{
        char exe[ZCP_PATH_MAX];
        const char *env[] = { DEV, "ZCP_TEST_V4L2_DEVICE=%D/video0", "FAKECAM_FORMAT=YUYV", "FAKECAM_WIDTH=640",
                              "FAKECAM_HEIGHT=480", "FAKECAM_FPS=60", NULL };
        char *argv[] = { exe, NULL };
        int status;

        printf("--- hw-suite-on-fake\n");
        snprintf(exe, sizeof(exe), "%s/tests/hw/hwtest_vivid", zcp_test_build_root());
        if (access(exe, X_OK) != 0) {
                printf("skip hw-suite-on-fake: %s not built\n", exe);
                return 77;
        }
        status = run_child(argv, env, 60, NULL, true);
        if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                printf("FAIL hw-suite-on-fake: status 0x%x\n", status);
                return 1;
        }
        printf("ok   hw-suite-on-fake\n");
        return 0;
}

static int daemon_stream(void)
{
        return daemon_case("daemon-stream", "", true);
}

static int daemon_sigterm_backoff(void)
{
        return daemon_case("daemon-sigterm-backoff", "absent:600000", false);
}

static int camera_present(void)
{
        return camera_yaml_case(CAMERA_PRESENT);
}

static int camera_absent(void)
{
        return camera_yaml_case(CAMERA_ABSENT);
}

static int camera_late(void)
{
        return camera_yaml_case(CAMERA_LATE);
}

static int budget_mmap(void)
{
        return budget_registered_case(false);
}

static int budget_userptr(void)
{
        return budget_registered_case(true);
}

/*
 * The cases the parent runs itself, after the child scenarios: zcpipe as a
 * process on the fake, and the hw suite's checks. Each returns 0, 1 (failed)
 * or 77 (skipped); a name may stand for several rows.
 */
static const struct {
        const char *name;
        int (*run)(void);
} parent_cases[] = {
        { "daemon-stream", daemon_stream },
        { "daemon-sigterm-backoff", daemon_sigterm_backoff },
        { "daemon-camera-yaml", camera_present },
        { "daemon-camera-yaml-absent", camera_absent },
        { "daemon-camera-yaml-late", camera_late },
        { "daemon-budget", budget_mmap },
        { "daemon-budget", budget_userptr },
        { "hw-suite-on-fake", hw_suite_case },
};
#define PARENT_CASE_COUNT (sizeof(parent_cases) / sizeof(parent_cases[0]))

/* The scenarios' files go, but where one failed (or ZCP_KEEP_TMP is set): then they stay, said where. */
static void cleanup(bool failed)
{
        char cmd[256];

        if (failed || getenv("ZCP_KEEP_TMP")) {
                fprintf(stderr, "kept for inspection: %s\n", tmpdir);
                return;
        }
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
                fprintf(stderr, "cannot remove %s\n", tmpdir);
}

int main(int argc, char **argv)
{
        char self[ZCP_PATH_MAX];
        int failed = 0, ran = 0;
        ssize_t n;

        if (argc >= 4 && strcmp(argv[1], "--child") == 0) {
                dir = argv[3];
                return child_main(argv[2]);
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        CHECK(n > 0);
        self[n] = '\0';
        CHECK(mkdtemp(tmpdir));
        find_preload();
        make_samples();
        for (size_t i = 0; i < SCENARIO_COUNT; i++) {
                bool picked = argc < 2;

                for (int a = 1; a < argc; a++)
                        picked |= strcmp(argv[a], scenarios[i].name) == 0;
                if (!picked)
                        continue;
                ran++;
                failed += !scenario_ok(self, &scenarios[i]);
        }
        for (size_t i = 0; i < PARENT_CASE_COUNT; i++) {
                bool picked = argc < 2;
                int r;

                for (int a = 1; a < argc; a++)
                        picked |= strcmp(argv[a], parent_cases[i].name) == 0;
                if (!picked)
                        continue;
                r = parent_cases[i].run();
                ran += r != 77;
                failed += r == 1;
        }
        cleanup(failed != 0);
        printf("%d of %d scenarios failed\n", failed, ran);
        return failed ? 1 : 0;
}

#endif /* HAVE_V4L2 */
