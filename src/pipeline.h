/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * One stream: its source, ring, backend, sink and four named threads
 *
 *   zcp-src-<name> -> zcp-cvt-<name> -> zcp-inf-<name> -> zcp-pub-<name>
 *
 * Lifecycle (main thread): zcp_stream_new() opens everything and allocates
 * the ring; zcp_stream_start() starts the threads; zcp_stream_stop() asks
 * them to finish (frames in flight complete or are dropped as SHUTDOWN);
 * zcp_stream_join() waits; zcp_stream_free() releases. The stream signals
 * `done_fd` (an eventfd given at new) when its source ended or failed, so
 * the main loop can poll it with its signalfd.
 */
#include <stdbool.h>
#include <stdint.h>

#include "capture/source.h"
#include "core/config.h"
#include "core/err.h"
#include "core/metrics.h"
#include "core/ring.h"

struct zcp_stream;
struct zcp_snapshot;

/* Read-only view for exporters (metrics, STATUS=, summaries). Valid until zcp_stream_free(). */
struct zcp_stream_view {
        const char *name;
        uint32_t index;
        const struct zcp_stream_stats *stats;
        const struct zcp_source_info *source;   /* geometry, format, capture path */
        const char *source_type;                /* "file", "v4l2", "synthetic" */
        const char *backend;                    /* "cuda", "cpu" */
        int gpu_device;                         /* the GPU it runs on; -1 on the cpu backend */
        const char *backend_reason;             /* why that backend (zcp_backend_choice.why) */
        bool backend_degraded;                  /* auto fell back to cpu from a GPU it cannot use */
        const char *transfer;                   /* "zero-copy", "copy", "host": the mode in use now */
        uint64_t transfer_switches;             /* times `transfer: auto` changed it while running (this open) */
        uint32_t ring_slots;
        const char *sink;                       /* results sink: "stdout", "file", "unix", "none" */
        struct zcp_snapshot *snapshot;          /* the live page's (output/snapshot.h); NULL without */
        const char *last_error;                 /* the supervisor's: why it last failed ("" none) */
        char *const *labels;                    /* the model's class names, NULL: none (or no model) */
        uint32_t classes;                       /* the model's classes, 0: no model */
};

/* How a stream's source thread ended (zcp_stream_end_reason()). */
enum zcp_stream_end {
        ZCP_STREAM_END_NONE,          /* running, or stopped from outside (zcp_stream_stop) */
        ZCP_STREAM_END_EOS,           /* the source ended normally (end of a file, synthetic frames done) */
        ZCP_STREAM_END_RECONFIGURE,   /* the source's geometry changed: zcp_stream_new_from() continues it */
        ZCP_STREAM_END_FAILED,        /* the source failed (zcp_stream_join() returns why) */
};

/* What the caller gives a stream besides its config. */
struct zcp_stream_params {
        uint32_t index;
        int done_fd;                        /* eventfd written when the stream ends by itself, or -1 */
        struct zcp_stream_stats *stats;     /* counters that outlive the stream (a supervisor's); NULL: its own */
        uint64_t ring_budget;               /* bytes its ring may take (pinned_budget), 0 = no limit */
        uint32_t gpu_device;                /* the GPU of gpu.device: auto (the supervisor's placement); 0 default */
};

/*
 * Opens the source, chooses the backend, allocates the ring from its
 * allocator and opens the stages on it (each opens what it uses: infer the
 * backend, publish the sink and the snapshot), with its own copy of `cfg` (the caller may free cfg afterwards). When the source
 * can change geometry (ops->reconfigure), the stream asks it to report
 * changes: such a change ends the stream like an end of stream
 * (ZCP_STREAM_END_RECONFIGURE) and zcp_stream_new_from() continues with the
 * same source. A ring over p->ring_budget is ZCP_ERR_CONFIG. `p->stats` is
 * initialised by the caller (zcp_stream_stats_init) and must outlive the
 * stream. Returns 0, ZCP_ERR_CONFIG, ZCP_ERR_INPUT or a negative errno; logs
 * the reason.
 */
int zcp_stream_open(const struct zcp_stream_config *cfg, const struct zcp_stream_params *p,
                    struct zcp_stream **ret_stream);
/*
 * After `old` ended with ZCP_STREAM_END_RECONFIGURE and was joined: a new
 * stream (p) on the same opened source, with a ring and backend for the
 * geometry the source reports now. The source moves to the new stream (also
 * when this fails: it is then closed with the new one); free `old`
 * afterwards as usual.
 */
int zcp_stream_new_from(struct zcp_stream *old, const struct zcp_stream_params *p, struct zcp_stream **ret_stream);
enum zcp_stream_end zcp_stream_end_reason(const struct zcp_stream *s);
/*
 * Bytes of one slot for frames of `info`, and the cells of each slot's moving mask for a
 * width x height frame under `cfg` (0 with motion off): what a ring of them pins is
 * zcp_ring_bytes() (core/ring.h).
 */
size_t zcp_stream_slot_bytes(const struct zcp_source_info *info);
uint32_t zcp_stream_mask_cells(const struct zcp_stream_config *cfg, uint32_t width, uint32_t height);

/*
 * zcp_stream_open() with its own counters and no ring budget, for stream `index`,
 * with its own copy of `cfg` (the caller may free cfg afterwards). `done_fd`
 * (eventfd, may be -1) is written when the stream ends by itself. Returns 0,
 * ZCP_ERR_CONFIG, or a negative errno; logs the reason.
 */
int zcp_stream_new(const struct zcp_stream_config *cfg, uint32_t index, int done_fd,
                   struct zcp_stream **ret_stream);
int zcp_stream_start(struct zcp_stream *s);
/* Any thread; idempotent. */
void zcp_stream_stop(struct zcp_stream *s);
/*
 * Waits for the threads, then closes the results sink (it writes what it
 * still holds, for a bounded time), so the sink's counts are final. Returns
 * 0 when the stream ended normally (EOS or stop), or the first fatal error
 * (negative errno, ZCP_ERR_GPU_STICKY).
 */
int zcp_stream_join(struct zcp_stream *s);
/* True once the source ended (EOS or fatal error) and everything drained. */
bool zcp_stream_finished(const struct zcp_stream *s);
void zcp_stream_free(struct zcp_stream *s);

struct zcp_framelog;
/*
 * Per-frame log (output/framelog.h) the publish thread writes every frame
 * to, dropped ones included; NULL for none. Main thread, before
 * zcp_stream_start(); `fl` must outlive the stream's threads.
 */
void zcp_stream_set_framelog(struct zcp_stream *s, struct zcp_framelog *fl);

void zcp_stream_view(const struct zcp_stream *s, struct zcp_stream_view *ret_view);
/* The stream's own copy of its config, valid until zcp_stream_free(). */
const struct zcp_stream_config *zcp_stream_config(const struct zcp_stream *s);

/* zcp_stream_new() fails with a negative errno, ZCP_ERR_CONFIG or ZCP_ERR_INPUT (core/err.h). */
