/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Recent latency for the live page's charts (/api/latency): per stream, a
 * ring of per-second points, each the frames published in that second and
 * the p50 and p99 of end-to-end latency and of every stage's wait and busy
 * time over that second.
 *
 * A point is the difference of two successive copies of the stream's
 * cumulative histograms (metrics.h), so the pipeline does nothing for it:
 * its threads keep recording into the histograms they always record into.
 * Quantiles carry the histograms' < 1 % error.
 *
 * Memory: one allocation at new (rings and the previous copies of the
 * histograms of ZCP_CONFIG_MAX_STREAMS streams); nothing afterwards except
 * the JSON text handed out. A stream is known by its name; a stream
 * re-created under the same name (reload, restart) continues its ring.
 *
 * Threads: zcp_latency_sample() from one thread (the page's ticker, once a
 * second); zcp_latency_json() from any; both take the internal lock.
 */
#include <stddef.h>
#include <stdint.h>

#include "core/metrics.h"
#include "daemon/registry.h"

#define ZCP_LATENCY_POINTS 300   /* seconds kept per stream */

enum zcp_latency_series {
        ZCP_LAT_E2E,
        ZCP_LAT_CONVERT_WAIT,
        ZCP_LAT_CONVERT_BUSY,
        ZCP_LAT_INFER_WAIT,
        ZCP_LAT_INFER_BUSY,
        ZCP_LAT_PUBLISH_WAIT,
        ZCP_LAT_PUBLISH_BUSY,
        ZCP_LAT_SERIES_COUNT
};
/* "e2e", "convert_wait", "convert_busy", ... */
extern const char *const zcp_latency_series_names[ZCP_LAT_SERIES_COUNT];

struct zcp_latency;

/* Returns 0 or -ENOMEM. The caller frees with zcp_latency_free() (accepts NULL). */
int zcp_latency_new(struct zcp_latency **ret_latency);
void zcp_latency_free(struct zcp_latency *l);

/*
 * Adds one point per stream of `registry`: what it published since the
 * previous call (its first call: since the stream started). `now_ns` is the
 * point's time. Holds the registry lock while it copies the histograms.
 */
void zcp_latency_sample(struct zcp_latency *l, struct zcp_registry *registry, uint64_t now_ns);

/*
 * The same for one stream (what sample() does per stream; tests). `stats`
 * identifies the stream object: another pointer under a known name is a new
 * stream whose histograms start from zero. With ZCP_CONFIG_MAX_STREAMS names
 * known, a new name takes the place of the one listed longest ago, if it
 * was not listed at this `now_ns`; otherwise it is not kept.
 */
void zcp_latency_add(struct zcp_latency *l, const char *name, const struct zcp_stream_stats *stats, uint64_t now_ns);

/*
 * The rings as JSON (malloc'd, caller frees), times relative to `now_ns`:
 *   {"period_s":1,"points":300,"streams":[{"name":"a","t":[-2.0,-1.0,...],
 *    "frames":[10,10,...],"p50":{"e2e":[0.512,...],"convert_wait":[...],...},
 *    "p99":{...}}]}
 * Values in milliseconds, null for a second without frames. Streams not
 * seen for longer than the ring are left out. Returns 0 or -ENOMEM.
 */
int zcp_latency_json(struct zcp_latency *l, uint64_t now_ns, char **ret_json, size_t *ret_len);
