/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * V4L2 source: the geometry the ring is made for (v4l2_geom.c): the info
 * open returns, whether a renegotiated connection still fits it, and a
 * RECONFIGURE that waits for lent buffers to come back (v4l2.c, "Geometry").
 * Writes the "ring is made for" fields of the context (v4l2_priv.h) except
 * at open and reconfigure(). Calls v4l2_buf.h and v4l2_fmt.h only.
 */
#include "capture/v4l2_priv.h"

/* c->info for the negotiated format (open, before the ring exists). */
void zcp_v4l2_make_info(struct zcp_source_ctx *c, uint32_t fps_num, uint32_t fps_den);
/*
 * After a renegotiation (c->fourcc, size, bpl, sizeimage set for the camera):
 * 0 when the ring still fits (same info), ZCP_SOURCE_RECONFIGURE when the
 * caller handles it (next_info set), else ZCP_ERR_CONFIG (logged).
 */
int zcp_v4l2_renegotiated(struct zcp_source_ctx *c, uint32_t fps_num, uint32_t fps_den);
/* RECONFIGURE is pending: gives lent buffers time to come back, then returns it. */
int zcp_v4l2_pending(struct zcp_source_ctx *c);
