/* SPDX-License-Identifier: MIT */
/*
 * V4L2 source: opening a node and negotiating its format, size, rate and io
 * mode (v4l2.c says what the source does as a whole). Main thread at open;
 * the source thread on a reconnect.
 * A node that is multi-planar only (V4L2_CAP_VIDEO_CAPTURE_MPLANE without
 * V4L2_CAP_VIDEO_CAPTURE, as many SoC drivers are) is driven with the MPLANE
 * buffer type and struct v4l2_pix_format_mplane, in single-plane formats only
 * (NV12 as one plane, YUYV...): a format the driver splits into several
 * planes (NM12) is refused, so that a frame is always one contiguous slot.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "capture/v4l2_fmt.h"
#include "core/err.h"

/*
 * The formats zcpipe captures, in the order `format: auto` prefers them (the
 * cheapest conversions to NV12 first, MJPEG last: decoding costs the most).
 * V4L2 names byte orders its own way: XR24 is B G R X in memory, XB24 R G B X.
 */
static const struct {
        uint32_t fourcc;
        enum zcp_pixfmt fmt;
} formats[] = {
        { V4L2_PIX_FMT_NV12, ZCP_PIX_NV12 },   { V4L2_PIX_FMT_NV21, ZCP_PIX_NV21 },
        { V4L2_PIX_FMT_YUYV, ZCP_PIX_YUYV },   { V4L2_PIX_FMT_UYVY, ZCP_PIX_UYVY },
        { V4L2_PIX_FMT_YVYU, ZCP_PIX_YVYU },   { V4L2_PIX_FMT_YUV420, ZCP_PIX_I420 },
        { V4L2_PIX_FMT_YVU420, ZCP_PIX_YV12 }, { V4L2_PIX_FMT_RGB24, ZCP_PIX_RGB24 },
        { V4L2_PIX_FMT_BGR24, ZCP_PIX_BGR24 }, { V4L2_PIX_FMT_XBGR32, ZCP_PIX_BGRX },
        { V4L2_PIX_FMT_BGR32, ZCP_PIX_BGRX },  { V4L2_PIX_FMT_RGBX32, ZCP_PIX_RGBX },
        { V4L2_PIX_FMT_GREY, ZCP_PIX_GREY },   { V4L2_PIX_FMT_MJPEG, ZCP_PIX_MJPEG },
        { V4L2_PIX_FMT_JPEG, ZCP_PIX_MJPEG },
};
#define FORMAT_COUNT (sizeof(formats) / sizeof(formats[0]))

uint32_t zcp_v4l2_fourcc_of(enum zcp_pixfmt fmt)
{
        for (size_t i = 0; i < FORMAT_COUNT; i++) {
                if (formats[i].fmt == fmt)
                        return formats[i].fourcc;
        }
        return 0;
}

enum zcp_pixfmt zcp_v4l2_pixfmt_of(uint32_t fourcc)
{
        for (size_t i = 0; i < FORMAT_COUNT; i++) {
                if (formats[i].fourcc == fourcc)
                        return formats[i].fmt;
        }
        return ZCP_PIX_NONE;
}

/* The format `format: auto` could pick that needs the largest slot at w x h (sizing a ring without the camera). */
enum zcp_pixfmt zcp_v4l2_largest_auto(uint32_t w, uint32_t h)
{
        enum zcp_pixfmt best = ZCP_PIX_NONE;
        size_t most = 0;

        for (size_t i = 0; i < FORMAT_COUNT; i++) {
                size_t n = formats[i].fmt == ZCP_PIX_MJPEG
                                   ? 0
                                   : zcp_pixfmt_slot_size(formats[i].fmt, w, h, zcp_pixfmt_min_stride(formats[i].fmt, w));

                if (n > most) {
                        most = n;
                        best = formats[i].fmt;
                }
        }
        return best;
}

/* What a refusal means: a config the camera cannot do (before the first success), else a retryable error. */
int zcp_v4l2_refusal(const struct zcp_source_ctx *c, int err)
{
        if (!c->ever_up && (err == -EINVAL || err == -ERANGE || err == -ENOSPC || err == -ENOTTY))
                return ZCP_ERR_CONFIG;
        return err;
}

int zcp_v4l2_refused(struct zcp_source_ctx *c, const char *what, int err)
{
        zcp_log(fail_level(c), "%s: %s: %s for %s %ux%u, io %s, refused: %s (%s)", c->name, c->node, what,
                fourcc_text(c->fourcc).s, c->width, c->height, io_names[c->io], errname(err), zcp_strerror(err));
        return zcp_v4l2_refusal(c, err);
}

int zcp_v4l2_dev_open(struct zcp_source_ctx *c)
{
        char node[PATH_MAX];
        struct v4l2_capability cap;
        uint32_t caps;
        int fd, r;

        /* Links such as /dev/v4l/by-id/... may point elsewhere after a replug. */
        if (!realpath(c->cfg.device, node))
                return -errno;
        fd = open(node, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        errno = 0;
        if (v4l2_fd_open(fd, V4L2_DISABLE_CONVERSION) < 0) {
                r = errno ? -errno : -ENOTTY;
                close(fd);
                zcp_log(fail_level(c), "%s: %s: libv4l2 does not take it as a V4L2 device: %s", c->name, node,
                        zcp_strerror(r));
                return r == -ENODEV ? r : -ENOTTY;
        }
        c->fd = fd;
        if (strcmp(node, c->node) != 0) {
                if (c->node[0] || strcmp(node, c->cfg.device) != 0)
                        zcp_info("%s: %s is %s", c->name, c->cfg.device, node);
                snprintf(c->node, sizeof(c->node), "%s", node);
        }
        memset(&cap, 0, sizeof(cap));
        r = xioctl(fd, VIDIOC_QUERYCAP, &cap);
        if (r < 0) {
                zcp_log(fail_level(c), "%s: %s: VIDIOC_QUERYCAP failed: %s", c->name, node, zcp_strerror(r));
                return r == -ENOTTY || r == -EINVAL ? -ENOTTY : r;
        }
        caps = (cap.capabilities & V4L2_CAP_DEVICE_CAPS) ? cap.device_caps : cap.capabilities;
        if (!(caps & (V4L2_CAP_VIDEO_CAPTURE | V4L2_CAP_VIDEO_CAPTURE_MPLANE)) || !(caps & V4L2_CAP_STREAMING)) {
                zcp_log(fail_level(c),
                        "%s: %s ('%.32s', driver %.16s) is not a streaming video capture node "
                        "(capabilities 0x%08x)",
                        c->name, node, (const char *)cap.card, (const char *)cap.driver, caps);
                return -ENOTTY;
        }
        /* Single-planar where the node offers it (every format zcpipe takes is one plane there too). */
        c->mplane = !(caps & V4L2_CAP_VIDEO_CAPTURE);
        c->buf_type = c->mplane ? V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE : V4L2_BUF_TYPE_VIDEO_CAPTURE;
        if (!c->card_logged) {
                zcp_info("%s: %s: '%.32s' (driver %.16s, %.32s%s)", c->name, node, (const char *)cap.card,
                         (const char *)cap.driver, (const char *)cap.bus_info, c->mplane ? ", multi-planar" : "");
                c->card_logged = true;
        }
        return 0;
}

/* The fields of a struct v4l2_format zcpipe uses, for either buffer type. */
struct pix {
        uint32_t fourcc, width, height, field, bpl, sizeimage, planes;
};

static void pix_put(const struct zcp_source_ctx *c, struct v4l2_format *f, const struct pix *x)
{
        memset(f, 0, sizeof(*f));
        f->type = c->buf_type;
        if (c->mplane) {
                f->fmt.pix_mp.pixelformat = x->fourcc;
                f->fmt.pix_mp.width = x->width;
                f->fmt.pix_mp.height = x->height;
                f->fmt.pix_mp.field = x->field;
                f->fmt.pix_mp.num_planes = 1;
                f->fmt.pix_mp.plane_fmt[0].bytesperline = x->bpl;
        } else {
                f->fmt.pix.pixelformat = x->fourcc;
                f->fmt.pix.width = x->width;
                f->fmt.pix.height = x->height;
                f->fmt.pix.field = x->field;
                f->fmt.pix.bytesperline = x->bpl;
        }
}

static struct pix pix_get(const struct zcp_source_ctx *c, const struct v4l2_format *f)
{
        if (c->mplane)
                return (struct pix){
                        .fourcc = f->fmt.pix_mp.pixelformat,
                        .width = f->fmt.pix_mp.width,
                        .height = f->fmt.pix_mp.height,
                        .field = f->fmt.pix_mp.field,
                        .bpl = f->fmt.pix_mp.plane_fmt[0].bytesperline,
                        .sizeimage = f->fmt.pix_mp.plane_fmt[0].sizeimage,
                        .planes = f->fmt.pix_mp.num_planes,
                };
        return (struct pix){
                .fourcc = f->fmt.pix.pixelformat,
                .width = f->fmt.pix.width,
                .height = f->fmt.pix.height,
                .field = f->fmt.pix.field,
                .bpl = f->fmt.pix.bytesperline,
                .sizeimage = f->fmt.pix.sizeimage,
                .planes = 1,
        };
}

static uint32_t enum_formats(const struct zcp_source_ctx *c, uint32_t *out, uint32_t max)
{
        uint32_t n = 0;

        for (uint32_t i = 0; i < 64 && n < max; i++) {
                struct v4l2_fmtdesc d = { .index = i, .type = c->buf_type };

                if (xioctl(c->fd, VIDIOC_ENUM_FMT, &d) < 0)
                        break;
                out[n++] = d.pixelformat;
        }
        return n;
}

static bool listed(const uint32_t *list, uint32_t n, uint32_t f)
{
        for (uint32_t i = 0; i < n; i++) {
                if (list[i] == f)
                        return true;
        }
        return false;
}

/* Does the device keep fourcc at w x h? TRY_FMT, else ENUM_FRAMESIZES, else "maybe" (S_FMT decides). */
static bool size_ok(const struct zcp_source_ctx *c, uint32_t fourcc, uint32_t w, uint32_t h)
{
        struct pix want = { .fourcc = fourcc, .width = w, .height = h, .field = V4L2_FIELD_ANY }, got;
        struct v4l2_format f;
        int fd = c->fd, r;

        pix_put(c, &f, &want);
        r = xioctl(fd, VIDIOC_TRY_FMT, &f);
        got = pix_get(c, &f);
        if (r == 0)
                return got.fourcc == fourcc && got.width == w && got.height == h && got.planes == 1;
        if (r != -ENOTTY)
                return false;
        for (uint32_t i = 0; i < 256; i++) {
                struct v4l2_frmsizeenum s = { .index = i, .pixel_format = fourcc };

                if (xioctl(fd, VIDIOC_ENUM_FRAMESIZES, &s) < 0)
                        return i == 0;
                if (s.type == V4L2_FRMSIZE_TYPE_DISCRETE) {
                        if (s.discrete.width == w && s.discrete.height == h)
                                return true;
                        continue;
                }
                return w >= s.stepwise.min_width && w <= s.stepwise.max_width && h >= s.stepwise.min_height &&
                       h <= s.stepwise.max_height &&
                       (s.stepwise.step_width == 0 || (w - s.stepwise.min_width) % s.stepwise.step_width == 0) &&
                       (s.stepwise.step_height == 0 || (h - s.stepwise.min_height) % s.stepwise.step_height == 0);
        }
        return false;
}

static bool reaches(const struct v4l2_fract *interval, uint32_t fps)
{
        return interval->numerator && (uint64_t)interval->denominator >= (uint64_t)fps * interval->numerator;
}

/* 1: the device lists a rate >= fps for this mode, 0: it lists only slower ones, -1: it does not say. */
static int rate_ok(int fd, uint32_t fourcc, uint32_t w, uint32_t h, uint32_t fps)
{
        struct v4l2_frmivalenum fi = { .index = 0, .pixel_format = fourcc, .width = w, .height = h };

        if (xioctl(fd, VIDIOC_ENUM_FRAMEINTERVALS, &fi) < 0)
                return -1;
        if (fi.type != V4L2_FRMIVAL_TYPE_DISCRETE)
                return reaches(&fi.stepwise.min, fps) ? 1 : 0;
        for (uint32_t i = 1; i < 256; i++) {
                if (reaches(&fi.discrete, fps))
                        return 1;
                fi.index = i;
                if (xioctl(fd, VIDIOC_ENUM_FRAMEINTERVALS, &fi) < 0)
                        break;
        }
        return 0;
}

static void format_list(const uint32_t *list, uint32_t n, char *buf, size_t size)
{
        size_t len = 0;

        buf[0] = '\0';
        for (uint32_t i = 0; i < n && len < size; i++) {
                int w = snprintf(buf + len, size - len, "%s%s", i ? " " : "", fourcc_text(list[i]).s);

                if (w < 0)
                        break;
                len += (size_t)w;
        }
        if (n == 0)
                snprintf(buf, size, "none listed");
}

/* Picks the V4L2 format: the configured one (it must be listed), or the best listed one that fits. */
int zcp_v4l2_choose_format(struct zcp_source_ctx *c)
{
        uint32_t list[64], n = enum_formats(c, list, 64), fallback = 0;
        char names[400];

        format_list(list, n, names, sizeof(names));
        if (c->cfg.format != ZCP_PIX_NONE) {
                uint32_t want = zcp_v4l2_fourcc_of(c->cfg.format);

                if (want == 0) {
                        zcp_err("%s: format %s is not one zcpipe captures from V4L2 (nv12 nv21 yuyv uyvy yvyu i420 "
                                "yv12 rgb24 bgr24 bgrx rgbx grey mjpeg)",
                                c->name, zcp_pixfmt_name(c->cfg.format));
                        return ZCP_ERR_CONFIG;
                }
                /* Some formats have two V4L2 codes (MJPG/JPEG, XR24/BGR4): the one the camera lists. */
                for (size_t i = 0; i < FORMAT_COUNT && n > 0; i++) {
                        if (formats[i].fmt == c->cfg.format && listed(list, n, formats[i].fourcc)) {
                                c->fourcc = formats[i].fourcc;
                                return 0;
                        }
                }
                if (n > 0) {
                        zcp_err("%s: %s does not offer %s (it offers: %s)", c->name, c->node, fourcc_text(want).s,
                                names);
                        return ZCP_ERR_CONFIG;
                }
                c->fourcc = want;
                return 0;
        }
        for (size_t i = 0; i < FORMAT_COUNT; i++) {
                uint32_t f = formats[i].fourcc;

                if (!listed(list, n, f) || !size_ok(c, f, c->width, c->height))
                        continue;
                if (rate_ok(c->fd, f, c->width, c->height, c->cfg.fps) != 0) {
                        c->fourcc = f;
                        return 0;
                }
                if (!fallback)
                        fallback = f;
        }
        if (fallback) {
                zcp_warn("%s: %s: no format reaches %u fps at %ux%u; using %s", c->name, c->node, c->cfg.fps,
                         c->width, c->height, fourcc_text(fallback).s);
                c->fourcc = fallback;
                return 0;
        }
        zcp_err("%s: %s offers no format zcpipe takes at %ux%u (it offers: %s; zcpipe takes NV12 NV21 YUYV UYVY "
                "YVYU YU12 YV12 RGB3 BGR3 XR24 BGR4 XB24 GREY MJPG JPEG)",
                c->name, c->node, c->width, c->height, names);
        return ZCP_ERR_CONFIG;
}

/*
 * S_FMT with the fixed fourcc and size. `first`: learn bytesperline and
 * sizeimage; else they must suit the ring made at open.
 */
int zcp_v4l2_set_format(struct zcp_source_ctx *c, bool first)
{
        bool compressed = c->cap_fmt == ZCP_PIX_MJPEG;
        uint32_t min_bpl = compressed ? 0 : zcp_pixfmt_min_stride(c->cap_fmt, c->width);
        struct pix want = {
                .fourcc = c->fourcc,
                .width = c->width,
                .height = c->height,
                .field = V4L2_FIELD_ANY,
                .bpl = first || compressed ? 0 : c->info.stride,
        }, got;
        struct v4l2_format f;
        uint32_t bpl;
        int r;

        pix_put(c, &f, &want);
        r = xioctl(c->fd, VIDIOC_S_FMT, &f);
        if (r < 0)
                return zcp_v4l2_refused(c, "VIDIOC_S_FMT", r);
        got = pix_get(c, &f);
        c->moved = !first && (got.fourcc != c->fourcc || got.width != c->width || got.height != c->height);
        if (got.fourcc != c->fourcc || got.width != c->width || got.height != c->height) {
                zcp_log(fail_level(c),
                        "%s: %s: asked for %s %ux%u, the driver set %s %ux%u: the camera cannot deliver that "
                        "(choose a mode it lists, e.g. with v4l2-ctl --list-formats-ext)",
                        c->name, c->node, fourcc_text(c->fourcc).s, c->width, c->height,
                        fourcc_text(got.fourcc).s, got.width, got.height);
                return zcp_v4l2_refusal(c, -EINVAL);
        }
        if (got.planes != 1) {
                zcp_log(fail_level(c), "%s: %s: the driver delivers %s in %u planes: zcpipe takes one-plane formats",
                        c->name, c->node, fourcc_text(c->fourcc).s, got.planes);
                return zcp_v4l2_refusal(c, -EINVAL);
        }
        switch (got.field) {
        case V4L2_FIELD_TOP:
        case V4L2_FIELD_BOTTOM:
        case V4L2_FIELD_ALTERNATE:
        case V4L2_FIELD_SEQ_TB:
        case V4L2_FIELD_SEQ_BT:
                zcp_log(fail_level(c), "%s: %s: the driver delivers %ux%u as separate fields (field %u): not supported",
                        c->name, c->node, c->width, c->height, got.field);
                return zcp_v4l2_refusal(c, -EINVAL);
        default:
                break;
        }
        bpl = compressed ? 0 : (got.bpl ? got.bpl : min_bpl);
        if (!compressed) {
                size_t needed = zcp_pixfmt_frame_size_stride(c->cap_fmt, bpl, c->height);

                if (bpl < min_bpl || needed == 0) {
                        zcp_log(fail_level(c), "%s: %s: %s %ux%u with %u bytes per line cannot be captured", c->name,
                                c->node, fourcc_text(c->fourcc).s, c->width, c->height, bpl);
                        return zcp_v4l2_refusal(c, -EINVAL);
                }
                if (!first && bpl != c->info.stride) {
                        zcp_log(fail_level(c), "%s: %s: the driver now uses %u bytes per line, the stream was "
                                "made for %u", c->name, c->node, bpl, c->info.stride);
                        return zcp_v4l2_refusal(c, -EINVAL);
                }
                c->needed = needed;
        } else {
                c->needed = 0;   /* a JPEG's size varies; the decoder checks its geometry */
        }
        c->bpl = bpl;
        c->sizeimage = got.sizeimage;
        if (!compressed && c->sizeimage < c->needed)
                c->sizeimage = (uint32_t)c->needed;
        if (compressed && c->sizeimage == 0) {
                zcp_log(fail_level(c), "%s: %s: the driver reports no buffer size for %s", c->name, c->node,
                        fourcc_text(c->fourcc).s);
                return zcp_v4l2_refusal(c, -EINVAL);
        }
        return 0;
}

/* Asks for cfg fps; returns the rate the driver settled on as num / den (0/1 when it does not say). */
void zcp_v4l2_set_rate(struct zcp_source_ctx *c, uint32_t *ret_num, uint32_t *ret_den)
{
        struct v4l2_streamparm p = { .type = c->buf_type };
        struct v4l2_fract *tpf = &p.parm.capture.timeperframe;
        int r;

        *ret_num = 0;
        *ret_den = 1;
        if (xioctl(c->fd, VIDIOC_G_PARM, &p) < 0 || !(p.parm.capture.capability & V4L2_CAP_TIMEPERFRAME))
                return;
        tpf->numerator = 1;
        tpf->denominator = c->cfg.fps;
        r = xioctl(c->fd, VIDIOC_S_PARM, &p);
        if (r < 0) {
                zcp_log(c->quiet ? ZCP_LOG_DEBUG : ZCP_LOG_WARN, "%s: %s: cannot set %u fps: %s", c->name, c->node,
                        c->cfg.fps, zcp_strerror(r));
                if (xioctl(c->fd, VIDIOC_G_PARM, &p) < 0)
                        return;
        }
        if (tpf->numerator && tpf->denominator) {
                *ret_num = tpf->denominator;
                *ret_den = tpf->numerator;
        }
}

/* userptr unless the config says mmap, the format is MJPEG, or the driver refuses USERPTR. */
int zcp_v4l2_decide_io(struct zcp_source_ctx *c)
{
        struct v4l2_requestbuffers req = {
                .count = 0,
                .type = c->buf_type,
                .memory = V4L2_MEMORY_USERPTR,
        };
        int r;

        if (c->cap_fmt == ZCP_PIX_MJPEG) {
                if (c->cfg.io == ZCP_IO_USERPTR)
                        zcp_info("%s: MJPEG is captured into mmap buffers and decoded into the slot (io: userptr "
                                 "does not apply)", c->name);
                c->io = IO_MMAP;
        } else if (c->cfg.io == ZCP_IO_MMAP) {
                c->io = IO_MMAP;
        } else {
                r = xioctl(c->fd, VIDIOC_REQBUFS, &req);
                if (r == -EINVAL) {
                        if (c->cfg.io == ZCP_IO_USERPTR) {
                                c->io = IO_USERPTR;
                                return zcp_v4l2_refused(c, "USERPTR buffers (io: userptr; use io: mmap or auto)", r);
                        }
                        zcp_info("%s: %s refuses USERPTR buffers: capturing into mmap buffers, one copy per frame",
                                 c->name, c->node);
                        c->io = IO_MMAP;
                } else if (r < 0) {
                        zcp_log(fail_level(c), "%s: %s: VIDIOC_REQBUFS (probe) failed: %s", c->name, c->node,
                                zcp_strerror(r));
                        return r;
                } else {
                        c->io = IO_USERPTR;
                }
        }
        c->io_known = true;
        return 0;
}

/*
 * After a source change: the size the driver delivers now (HDMI receivers:
 * the detected DV timings are applied first, where the node has them).
 */
int zcp_v4l2_source_size(struct zcp_source_ctx *c, uint32_t *ret_w, uint32_t *ret_h)
{
        struct v4l2_format f = { .type = c->buf_type };
        struct v4l2_dv_timings t;
        struct pix got;
        int r;

        /* A receiver reports new timings; G_FMT follows once they are set (ENOTTY: not such a node). */
        memset(&t, 0, sizeof(t));
        r = xioctl(c->fd, VIDIOC_QUERY_DV_TIMINGS, &t);
        if (r == 0) {
                r = xioctl(c->fd, VIDIOC_S_DV_TIMINGS, &t);
                if (r < 0)
                        zcp_warn("%s: %s: VIDIOC_S_DV_TIMINGS (%ux%u): %s", c->name, c->node, t.bt.width,
                                 t.bt.height, zcp_strerror(r));
        } else if (r != -ENOTTY && r != -EINVAL) {
                zcp_log(fail_level(c), "%s: %s: VIDIOC_QUERY_DV_TIMINGS: %s (no signal?)", c->name, c->node,
                        zcp_strerror(r));
        }
        r = xioctl(c->fd, VIDIOC_G_FMT, &f);
        if (r < 0)
                return r;
        got = pix_get(c, &f);
        *ret_w = got.width;
        *ret_h = got.height;
        return 0;
}
