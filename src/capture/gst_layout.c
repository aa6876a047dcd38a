/* SPDX-License-Identifier: MIT */
/* The GStreamer sources: formats and plane layouts (gst_layout.h). */
#include <string.h>

#include "capture/gst_layout.h"

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

enum zcp_pixfmt zcp_gst_pixfmt(GstVideoFormat f)
{
        for (size_t i = 0; i < G_N_ELEMENTS(format_map); i++)
                if (format_map[i].gst == f)
                        return format_map[i].zcp;
        return ZCP_PIX_NONE;
}

GstVideoFormat zcp_gst_format(enum zcp_pixfmt f)
{
        for (size_t i = 0; i < G_N_ELEMENTS(format_map); i++)
                if (format_map[i].zcp == f)
                        return format_map[i].gst;
        return GST_VIDEO_FORMAT_UNKNOWN;
}

GstCaps *zcp_gst_raw_caps_new(void)
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

bool zcp_gst_layout_tight(const GstVideoInfo *vi)
{
        enum zcp_pixfmt fmt = zcp_gst_pixfmt(GST_VIDEO_INFO_FORMAT(vi));
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

bool zcp_gst_same_geometry(const GstVideoInfo *a, const GstVideoInfo *b)
{
        return GST_VIDEO_INFO_FORMAT(a) == GST_VIDEO_INFO_FORMAT(b) && GST_VIDEO_INFO_WIDTH(a) == GST_VIDEO_INFO_WIDTH(b) &&
               GST_VIDEO_INFO_HEIGHT(a) == GST_VIDEO_INFO_HEIGHT(b);
}

size_t zcp_gst_copy_planes(const GstVideoFrame *vf, enum zcp_pixfmt fmt, uint32_t w, uint32_t h, uint8_t *dst)
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
