/* SPDX-License-Identifier: MIT */
/*
 * The v4l2 source on a real capture node: vivid (modprobe vivid) or a camera.
 * The node is $ZCP_TEST_V4L2_DEVICE, else the first /dev/video* that is a
 * single-planar streaming capture device; none: exit 77 ("no V4L2 device").
 *
 * For io auto (userptr where the driver takes it) and io mmap: open with
 * format auto at 640x480 (else at the node's current size), 30 frames within
 * 10 s, each of the negotiated geometry with a capture time that never goes
 * backwards and is not in the future, frames not all one byte value (a
 * picture arrived), drops accounted (captured = received + dropped), the
 * path in use kept (registered: every frame read in place in a driver
 * buffer, no copy; copy: one copy per frame), every slot free and back on
 * its own memory after stop, and no fd left open after close. The frames'
 * content cannot be known in advance on real hardware; the fake-camera
 * integration test checks it bit-exactly.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#if !HAVE_V4L2
int main(void)
{
        printf("SKIP: built without V4L2 support\n");
        return ZCP_TEST_SKIP;
}
#else

#include <libv4l2.h>
#include <linux/videodev2.h>

#include "capture/source.h"
#include "convert/convert.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/ring.h"

#define FRAMES 30

static bool is_capture_node(const char *path, uint32_t *ret_w, uint32_t *ret_h)
{
        struct v4l2_capability cap;
        struct v4l2_format f = { .type = V4L2_BUF_TYPE_VIDEO_CAPTURE };
        uint32_t caps;
        int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        bool ok = false;

        if (fd < 0)
                return false;
        /* Through libv4l2 like the source (so the fake camera can stand in to test this test). */
        if (v4l2_fd_open(fd, V4L2_DISABLE_CONVERSION) < 0) {
                close(fd);
                return false;
        }
        memset(&cap, 0, sizeof(cap));
        if (v4l2_ioctl(fd, VIDIOC_QUERYCAP, &cap) == 0) {
                caps = (cap.capabilities & V4L2_CAP_DEVICE_CAPS) ? cap.device_caps : cap.capabilities;
                ok = (caps & V4L2_CAP_VIDEO_CAPTURE) && (caps & V4L2_CAP_STREAMING);
                if (ok && v4l2_ioctl(fd, VIDIOC_G_FMT, &f) == 0) {
                        *ret_w = f.fmt.pix.width;
                        *ret_h = f.fmt.pix.height;
                }
                if (ok)
                        printf("using %s: '%.32s' (driver %.16s)\n", path, (const char *)cap.card,
                               (const char *)cap.driver);
        }
        v4l2_close(fd);
        return ok;
}

static bool find_node(char *path, size_t n, uint32_t *ret_w, uint32_t *ret_h)
{
        const char *env = getenv("ZCP_TEST_V4L2_DEVICE");
        DIR *d;
        struct dirent *e;
        bool found = false;

        if (env && *env) {
                snprintf(path, n, "%s", env);
                return is_capture_node(path, ret_w, ret_h);
        }
        d = opendir("/dev");
        if (!d)
                return false;
        /* Lowest number first: video0 before video10. */
        for (int i = 0; i < 64 && !found; i++) {
                rewinddir(d);
                while ((e = readdir(d))) {
                        if (strncmp(e->d_name, "video", 5) == 0 && atoi(e->d_name + 5) == i &&
                            e->d_name[5] >= '0' && e->d_name[5] <= '9') {
                                snprintf(path, n, "/dev/%s", e->d_name);
                                if (is_capture_node(path, ret_w, ret_h)) {
                                        found = true;
                                        break;
                                }
                        }
                }
        }
        closedir(d);
        return found;
}

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

static int open_source(const char *node, uint32_t w, uint32_t h, const char *io, struct zcp_config **ret_config,
                       struct zcp_stream_stats *stats, struct zcp_source_ctx **ret_src, struct zcp_source_info *info)
{
        char text[2048], err[512];
        int r;

        snprintf(text, sizeof(text),
                 "streams:\n  - name: hw\n    source:\n      type: v4l2\n      device: %s\n      width: %u\n"
                 "      height: %u\n      format: auto\n      io: %s\n      timeout_ms: 3000\n"
                 "    ring:\n      slots: 6\n    output:\n      type: none\n",
                 node, w, h, io);
        r = zcp_config_parse("hw.yaml", text, strlen(text), ret_config, err, sizeof(err));
        CHECK_MSG(r == 0, "%s", err);
        r = zcp_source_v4l2.open(&(*ret_config)->streams[0], stats, ret_src, info);
        if (r < 0)
                zcp_config_free(*ret_config);
        return r;
}

static void capture(const char *node, uint32_t w, uint32_t h, const char *io)
{
        static struct zcp_stream_stats stats;
        struct zcp_config *config;
        struct zcp_source_ctx *src;
        struct zcp_source_info info;
        struct zcp_ring *ring;
        uint64_t received = 0, last_t = 0, end = zcp_now_ns() + 10 * ZCP_NSEC_PER_SEC, max_call = 0;
        long fds0 = count_fds();
        bool picture = false;
        int r;

        zcp_stream_stats_init(&stats);
        r = open_source(node, 640, 480, io, &config, &stats, &src, &info);
        if (r == ZCP_ERR_CONFIG && (w != 640 || h != 480)) {
                printf("640x480 not offered; using the node's %ux%u\n", w, h);
                r = open_source(node, w, h, io, &config, &stats, &src, &info);
        }
        CHECK_MSG(r == 0, "open %s (io %s): %d", node, io, r);
        printf("io %s: %ux%u %s, stride %u, %zu bytes, path %s, %u/%u fps\n", io, info.width, info.height,
               zcp_pixfmt_name(info.fmt), info.stride, info.frame_bytes, zcp_capture_path_names[info.path],
               info.fps_num, info.fps_den);
        if (strcmp(io, "mmap") == 0)
                CHECK(info.path != ZCP_PATH_DIRECT || info.fmt == ZCP_PIX_I420);
        /* Slots sized as pipeline.c sizes them. */
        {
                size_t bytes = zcp_pixfmt_slot_size(info.fmt, info.width, info.height, info.stride);

                CHECK(zcp_ring_new(6, bytes > info.frame_bytes ? bytes : info.frame_bytes, 0, &zcp_host_allocator,
                                   &stats, &ring) == 0);
        }
        CHECK(zcp_source_v4l2.start(src, ring) == 0);
        while (received < FRAMES && zcp_now_ns() < end) {
                uint64_t t0 = zcp_now_ns();
                uint32_t idx;

                r = zcp_source_v4l2.next(src, ring);
                CHECK_MSG(r >= 0, "next: %d", r);
                if (zcp_now_ns() - t0 > max_call)
                        max_call = zcp_now_ns() - t0;
                while (zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], 0, &idx) == 0) {
                        struct zcp_slot *s = zcp_ring_slot(ring, idx);
                        const struct zcp_frame *f = &s->frame;

                        CHECK(f->width == info.width && f->height == info.height && f->fmt == info.fmt);
                        CHECK(f->stride == info.stride && f->bytes <= s->cap);
                        CHECK((s->lent != 0) == (atomic_load(&stats.capture_path) == ZCP_PATH_REGISTERED));
                        CHECK(f->t[ZCP_TS_CAPTURE] >= last_t && f->t[ZCP_TS_CAPTURE] <= zcp_now_ns());
                        last_t = f->t[ZCP_TS_CAPTURE];
                        for (uint64_t i = 1; i < f->bytes && !picture; i++)
                                picture = s->data[i] != s->data[0];
                        received++;
                        zcp_ring_move(ring, idx, ZCP_SLOT_CONVERT, ZCP_SLOT_FREE);
                        CHECK(zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx) == 0);
                }
        }
        CHECK_MSG(received >= FRAMES, "%llu frames in 10 s", (unsigned long long)received);
        CHECK(picture);
        CHECK(max_call < 3500 * ZCP_NSEC_PER_MSEC);
        CHECK(atomic_load(&stats.captured) == received + zcp_stats_dropped_total(&stats));
        if (atomic_load(&stats.capture_path) == ZCP_PATH_COPY)
                CHECK(atomic_load(&stats.copies) == received);
        else
                CHECK(atomic_load(&stats.copies) == 0);
        printf("io %s: %llu frames (path %s), %llu dropped, %llu reconnects, longest next() %.1f ms\n", io,
               (unsigned long long)received, zcp_capture_path_names[atomic_load(&stats.capture_path)], (unsigned long long)zcp_stats_dropped_total(&stats),
               (unsigned long long)atomic_load(&stats.reconnects), (double)max_call / 1e6);
        zcp_source_v4l2.stop(src, ring);
        CHECK(zcp_spsc_count(&ring->q[ZCP_Q_FREE]) == ring->count);
        for (uint32_t i = 0; i < ring->count; i++)
                CHECK(!ring->slots[i].lent && ring->slots[i].data == ring->slots[i].own);
        zcp_source_v4l2.close(src);
        zcp_ring_free(ring);
        zcp_config_free(config);
        CHECK_MSG(count_fds() == fds0, "fds %ld before, %ld after", fds0, count_fds());
}

int main(void)
{
        char node[ZCP_PATH_MAX];
        uint32_t w = 640, h = 480;

        if (!find_node(node, sizeof(node), &w, &h)) {
                printf("SKIP: no V4L2 device (no /dev/video* capture node; try modprobe vivid, or set "
                       "ZCP_TEST_V4L2_DEVICE)\n");
                return ZCP_TEST_SKIP;
        }
        capture(node, w, h, "auto");
        capture(node, w, h, "mmap");
        printf("ok\n");
        return 0;
}

#endif /* HAVE_V4L2 */
