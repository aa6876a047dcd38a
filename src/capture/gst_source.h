/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * What the file and network sources share (gst.c): opening (path checks,
 * the pipeline prerolled, the geometry learnt), closing, one sample into a
 * slot, and geometry changes. Writes the sample fields of the context
 * (gst_priv.h). Threads: as source.h says for the ops they serve.
 */
#include <stdbool.h>
#include <stdint.h>

#include "capture/gst_priv.h"

/* The `file` (network false) or `network` source's open(): as source.h's. */
int zcp_gst_open(const struct zcp_stream_config *cfg, struct zcp_stream_stats *stats, bool network,
                 struct zcp_source_ctx **ret_ctx, struct zcp_source_info *ret_info);
/* Both sources' close(). Accepts NULL. */
void zcp_gst_close(struct zcp_source_ctx *ctx);
/*
 * Fills slot `idx` from the pending sample and submits it (or submits it
 * dropped: another geometry, corrupt, short). direct: the sample's memory is
 * that slot (gst_pool.h): no copy. The sample stays pending.
 */
void zcp_gst_deliver(struct zcp_source_ctx *ctx, struct zcp_ring *ring, uint32_t idx, bool direct);
/* The pending sample has another geometry than the ring's, and the caller re-allocates for it. */
bool zcp_gst_wants_reconfigure(struct zcp_source_ctx *ctx);
/* Both sources' reconfigure(): as source.h's. */
int zcp_gst_reconfigure(struct zcp_source_ctx *ctx, struct zcp_source_info *ret_info);
