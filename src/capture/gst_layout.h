/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The GStreamer sources: the raw formats convert takes, by GStreamer's name
 * and ours, and the slot's tight plane layout (pixfmt.h) against
 * GStreamer's (gst_layout.c). Pure functions; any thread.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gst/gst.h>
#include <gst/video/video.h>

#include "core/pixfmt.h"

/* Ours for GStreamer's format; ZCP_PIX_NONE for one convert does not take. */
enum zcp_pixfmt zcp_gst_pixfmt(GstVideoFormat f);
/* GStreamer's for ours; GST_VIDEO_FORMAT_UNKNOWN for none. */
GstVideoFormat zcp_gst_format(enum zcp_pixfmt f);
/* video/x-raw in every format convert takes (the caller's ref). */
GstCaps *zcp_gst_raw_caps_new(void);
/* GStreamer lays `vi` out exactly as the slot's tight layout (plane offsets, strides, size). */
bool zcp_gst_layout_tight(const GstVideoInfo *vi);
/* Same format, width and height. */
bool zcp_gst_same_geometry(const GstVideoInfo *a, const GstVideoInfo *b);
/* Copies a mapped frame plane by plane into `dst` (tight layout); returns bytes written. */
size_t zcp_gst_copy_planes(const GstVideoFrame *vf, enum zcp_pixfmt fmt, uint32_t w, uint32_t h, uint8_t *dst);
