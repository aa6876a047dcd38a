/* SPDX-License-Identifier: MIT */
/* Pixel format names and frame geometry (pixfmt.h). */
#include <strings.h>

#include "core/pixfmt.h"

const char *const zcp_pixfmt_names[ZCP_PIX_COUNT] = {
        [ZCP_PIX_NONE] = "auto",
        [ZCP_PIX_YUYV] = "yuyv",
        [ZCP_PIX_UYVY] = "uyvy",
        [ZCP_PIX_YVYU] = "yvyu",
        [ZCP_PIX_NV12] = "nv12",
        [ZCP_PIX_NV21] = "nv21",
        [ZCP_PIX_I420] = "i420",
        [ZCP_PIX_YV12] = "yv12",
        [ZCP_PIX_RGB24] = "rgb24",
        [ZCP_PIX_BGR24] = "bgr24",
        [ZCP_PIX_RGBX] = "rgbx",
        [ZCP_PIX_BGRX] = "bgrx",
        [ZCP_PIX_GREY] = "grey",
        [ZCP_PIX_MJPEG] = "mjpeg",
};

enum zcp_pixfmt zcp_pixfmt_from_name(const char *name)
{
        for (int i = 1; i < ZCP_PIX_COUNT; i++)
                if (strcasecmp(name, zcp_pixfmt_names[i]) == 0)
                        return (enum zcp_pixfmt)i;
        /* V4L2's name for I420. */
        if (strcasecmp(name, "yu12") == 0)
                return ZCP_PIX_I420;
        return ZCP_PIX_NONE;
}

const char *zcp_pixfmt_name(enum zcp_pixfmt fmt)
{
        return (unsigned)fmt < ZCP_PIX_COUNT ? zcp_pixfmt_names[fmt] : "?";
}

static int is_420(enum zcp_pixfmt fmt)
{
        return fmt == ZCP_PIX_NV12 || fmt == ZCP_PIX_NV21 || fmt == ZCP_PIX_I420 || fmt == ZCP_PIX_YV12;
}

uint32_t zcp_pixfmt_min_stride(enum zcp_pixfmt fmt, uint32_t width)
{
        switch (fmt) {
        case ZCP_PIX_YUYV:
        case ZCP_PIX_UYVY:
        case ZCP_PIX_YVYU:
                return width * 2;
        case ZCP_PIX_RGB24:
        case ZCP_PIX_BGR24:
                return width * 3;
        case ZCP_PIX_RGBX:
        case ZCP_PIX_BGRX:
                return width * 4;
        case ZCP_PIX_NV12:
        case ZCP_PIX_NV21:
        case ZCP_PIX_I420:
        case ZCP_PIX_YV12:
        case ZCP_PIX_GREY:
                return width;
        default:
                return 0;
        }
}

size_t zcp_pixfmt_frame_size_stride(enum zcp_pixfmt fmt, uint32_t stride, uint32_t height)
{
        size_t luma = (size_t)stride * height;

        if (fmt == ZCP_PIX_NONE || fmt == ZCP_PIX_MJPEG || fmt >= ZCP_PIX_COUNT)
                return 0;
        if (is_420(fmt)) {
                if (height % 2 || stride % 2)
                        return 0;
                return luma + luma / 2;
        }
        return luma;
}

size_t zcp_pixfmt_frame_size(enum zcp_pixfmt fmt, uint32_t width, uint32_t height)
{
        if ((is_420(fmt) || fmt == ZCP_PIX_YUYV || fmt == ZCP_PIX_UYVY || fmt == ZCP_PIX_YVYU) && width % 2)
                return 0;
        return zcp_pixfmt_frame_size_stride(fmt, zcp_pixfmt_min_stride(fmt, width), height);
}

size_t zcp_pixfmt_slot_size(enum zcp_pixfmt fmt, uint32_t width, uint32_t height, uint32_t stride)
{
        const uint32_t max_dim = 1u << 28;
        size_t in, out;

        if (fmt == ZCP_PIX_NONE || fmt == ZCP_PIX_MJPEG || fmt >= ZCP_PIX_COUNT)
                return 0;
        if (width == 0 || height == 0 || width % 2 || height % 2 || stride > max_dim || height > max_dim)
                return 0;
        /* The minimum stride in 64 bits: width * 4 may not fit in 32. */
        if ((uint64_t)zcp_pixfmt_min_stride(fmt, 1) * width > stride)
                return 0;
        if (is_420(fmt) && stride % 2)
                return 0;
        in = zcp_pixfmt_frame_size_stride(fmt, stride, height);
        out = zcp_nv12_size(width, height);
        return in > out ? in : out;
}
