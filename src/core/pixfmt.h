/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Pixel formats a source may deliver into a slot, and their geometry.
 * Pure functions; any thread.
 */
#include <stddef.h>
#include <stdint.h>

enum zcp_pixfmt {
        ZCP_PIX_NONE = 0,
        ZCP_PIX_YUYV,   /* packed 4:2:2 Y0 U Y1 V */
        ZCP_PIX_UYVY,   /* packed 4:2:2 U Y0 V Y1 */
        ZCP_PIX_YVYU,   /* packed 4:2:2 Y0 V Y1 U */
        ZCP_PIX_NV12,   /* Y plane, then interleaved U V at half resolution */
        ZCP_PIX_NV21,   /* Y plane, then interleaved V U */
        ZCP_PIX_I420,   /* Y, U, V planes (V4L2 YU12) */
        ZCP_PIX_YV12,   /* Y, V, U planes */
        ZCP_PIX_RGB24,  /* R G B bytes in memory order */
        ZCP_PIX_BGR24,  /* B G R */
        ZCP_PIX_RGBX,   /* R G B x */
        ZCP_PIX_BGRX,   /* B G R x */
        ZCP_PIX_GREY,   /* Y only */
        ZCP_PIX_MJPEG,  /* compressed; decoded by the source into I420/NV12 */
        ZCP_PIX_COUNT
};

/* Name table (config and logs): "yuyv", "nv12", ..., index = enum value. */
extern const char *const zcp_pixfmt_names[ZCP_PIX_COUNT];

/* Returns the enum for a (case-insensitive) name, or ZCP_PIX_NONE. */
enum zcp_pixfmt zcp_pixfmt_from_name(const char *name);
const char *zcp_pixfmt_name(enum zcp_pixfmt fmt);

/*
 * Tightly packed byte size of one frame (stride = minimal), 0 for NONE/MJPEG
 * or odd dimensions where the format needs even ones.
 */
size_t zcp_pixfmt_frame_size(enum zcp_pixfmt fmt, uint32_t width, uint32_t height);

/* Minimal bytes per row of the first plane. */
uint32_t zcp_pixfmt_min_stride(enum zcp_pixfmt fmt, uint32_t width);

/*
 * Byte size of a frame whose first plane has `stride` bytes per row. Planar
 * 4:2:0 formats have chroma planes of stride/2 (I420, YV12) or stride (NV12/21)
 * following the luma plane directly.
 */
size_t zcp_pixfmt_frame_size_stride(enum zcp_pixfmt fmt, uint32_t stride, uint32_t height);

/*
 * Bytes a ring slot must hold for a frame of this input geometry and for its
 * NV12 result (the convert stage works in place): the larger of
 * zcp_pixfmt_frame_size_stride(fmt, stride, height) and zcp_nv12_size(width,
 * height) (GREY needs 1.5 * width * height). Returns 0 for a geometry that
 * cannot be converted: NONE or MJPEG, zero or odd dimensions, a stride below
 * the format's minimum or above 2^28 (odd for the planar 4:2:0 formats), a
 * height above 2^28.
 */
size_t zcp_pixfmt_slot_size(enum zcp_pixfmt fmt, uint32_t width, uint32_t height, uint32_t stride);

/* NV12 bytes for width x height: w*h + w*h/2 (both must be even). */
static inline size_t zcp_nv12_size(uint32_t width, uint32_t height)
{
        return (size_t)width * height + (size_t)width * height / 2;
}
