/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * What the metrics endpoint serves, as plain functions with no HTTP in them
 * (so they are built and tested without libmicrohttpd):
 *
 *   zcp_prom_collect()        copies the running streams' numbers out of the
 *                             registry (under its lock, briefly) into a scrape;
 *   zcp_prom_rates_update()   fills each stream's fps from a small rate state;
 *   zcp_prom_format_metrics() Prometheus text format 0.0.4 (/metrics);
 *   zcp_prom_format_stats()   percentiles as JSON (/stats);
 *   zcp_prom_health()         the /healthz verdict.
 *
 * Histograms are exported with fixed `le` bounds (zcp_prom_le_ns) derived
 * from the log-linear buckets of metrics.h: a log-linear bucket is counted
 * under a bound only when every value it can hold is <= the bound, so the
 * count reported for `le` is exact for some bound in [le * (1 - 1/128), le]
 * (at most 0.8 % low). +Inf always equals _count.
 *
 * Any thread (the HTTP thread in zcpipe). Only the zcp_prom_buf functions
 * allocate; a scrape struct is large (keep it on the heap).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/gpuinfo.h"
#include "core/metrics.h"
#include "daemon/registry.h"
#include "pipeline.h"

#define ZCP_PROM_LE_COUNT 22
/* Upper bounds of the exported buckets (ns), ascending; +Inf is implied. */
extern const uint64_t zcp_prom_le_ns[ZCP_PROM_LE_COUNT];

#define ZCP_PROM_QUANTILE_COUNT 4
/* 0.5, 0.9, 0.99, 0.999 and their names "p50", "p90", "p99", "p99.9". */
extern const double zcp_prom_quantiles[ZCP_PROM_QUANTILE_COUNT];
extern const char *const zcp_prom_quantile_names[ZCP_PROM_QUANTILE_COUNT];

/* One histogram, reduced for export. */
struct zcp_prom_hist {
        uint64_t le[ZCP_PROM_LE_COUNT];          /* cumulative: values <= zcp_prom_le_ns[i] */
        uint64_t count, sum_ns, min_ns, max_ns;
        uint64_t q[ZCP_PROM_QUANTILE_COUNT];     /* zcp_hist_quantile() of each quantile, ns */
};

/* One stream's numbers at scrape time. */
/* Detected classes listed one by one per stream on /metrics and /stats. */
#define ZCP_PROM_CLASSES 32

struct zcp_prom_stream {
        char name[ZCP_NAME_MAX];
        char source[32], backend[32], transfer[32], capture_path[32], format[32];
        int gpu_device;                          /* the GPU it runs on; -1: cpu backend, or not running */
        char backend_reason[384];
        uint32_t width, height, ring_slots;
        uint32_t fps_num, fps_den;               /* nominal rate, 0/1 unknown */
        struct zcp_prom_hist wait[ZCP_STAGE_COUNT], busy[ZCP_STAGE_COUNT], e2e;
        uint64_t captured, published, dropped[ZCP_DROP_REASON_COUNT];
        uint64_t decode_gaps, copies, slot_direct, reconnects, ring_in_flight;
        uint64_t conversions, pts_repeats, file_expected, file_delivered, outage_ns, outage_frames;
        uint32_t source_state;                   /* enum zcp_source_state */
        int32_t source_error;                    /* why the source is not up: -errno, 0 none */
        uint64_t first_capture_ns, last_publish_ns;
        double fps;                              /* zcp_prom_rates_update(); 0 before */
        char sink[32];                           /* results sink type */
        uint32_t stream_state;                   /* enum zcp_stream_state (the supervisor's) */
        uint64_t state_since_ns, restarts, reconfigures;
        uint64_t transfer_switches;              /* transfer auto's mode changes since the stream opened */
        char last_error[256];                    /* why it last failed, "" none */
        uint64_t sink_written, sink_queued, sink_lost[ZCP_SINK_LOSS_COUNT], sink_reconnects;
        int sink_error;                          /* 0: results leave the output; else why not (errno) */
        /* Detectors: the classes seen so far (the first ZCP_PROM_CLASSES of them), then the rest together. */
        uint32_t class_count;
        struct zcp_prom_class {
                char label[64];                  /* the model's label (cut), else the class number */
                uint64_t total;                  /* objects detected in all */
                uint32_t now;                    /* in the latest published frame */
        } classes[ZCP_PROM_CLASSES];
        uint64_t other_total;                    /* the classes past those */
        uint32_t other_now;
};

struct zcp_prom_scrape {
        uint64_t now_ns;                         /* CLOCK_MONOTONIC at collection */
        uint32_t count;
        struct zcp_prom_stream streams[ZCP_CONFIG_MAX_STREAMS];
        struct zcp_hist_snapshot snap;           /* scratch for collection */
        bool frame_log;                          /* metrics.frame_log is on: its counters below */
        uint64_t frame_log_written, frame_log_lost, frame_log_rotate_failed;
        uint32_t gpu_count;                      /* GPUs the CUDA backend uses (core/gpuinfo.h) */
        struct zcp_gpu_info gpus[ZCP_GPU_INFO_MAX];
};

/* Reduces a snapshot to the exported form. */
void zcp_prom_hist_from_snapshot(const struct zcp_hist_snapshot *snap, struct zcp_prom_hist *ret);

/* Copies one stream's view; `scratch` is working memory. */
void zcp_prom_stream_from_view(const struct zcp_stream_view *view, struct zcp_hist_snapshot *scratch,
                               struct zcp_prom_stream *ret);

/* Fills `scrape` from every stream of the registry, now_ns = zcp_now_ns(). */
void zcp_prom_collect(struct zcp_registry *registry, struct zcp_prom_scrape *scrape);

/*
 * Published frames per second over the last ~5 s (or since the previous
 * scrape when scrapes are farther apart), per stream name, from the
 * published counter seen at successive scrapes. Before a second sample
 * exists, the stream's average rate since its first frame. Not thread-safe:
 * one caller at a time.
 */
#define ZCP_PROM_RATE_SAMPLES 8
struct zcp_prom_rate {
        char name[ZCP_NAME_MAX];
        uint64_t t_ns[ZCP_PROM_RATE_SAMPLES], published[ZCP_PROM_RATE_SAMPLES];
        uint32_t head, len;                      /* ring of samples, head = newest */
        uint64_t seen_ns;                        /* last scrape that listed the stream */
};
struct zcp_prom_rates {
        struct zcp_prom_rate entry[2 * ZCP_CONFIG_MAX_STREAMS];
};
void zcp_prom_rates_update(struct zcp_prom_rates *rates, struct zcp_prom_scrape *scrape);

/* A growing output buffer; `failed` once an allocation failed (contents unusable). */
struct zcp_prom_buf {
        char *data;
        size_t len, cap;
        bool failed;
};
void zcp_prom_buf_printf(struct zcp_prom_buf *b, const char *fmt, ...) ZCP_PRINTF(2, 3);
void zcp_prom_buf_putc(struct zcp_prom_buf *b, char c);
/* Appends `s` escaped as a Prometheus label value (backslash, double quote, newline). */
void zcp_prom_buf_label_value(struct zcp_prom_buf *b, const char *s);
/* Appends `s` as a JSON string, quotes included. */
void zcp_prom_buf_json_string(struct zcp_prom_buf *b, const char *s);
/* Hands the data over (caller frees with free()); the buffer is empty afterwards. */
char *zcp_prom_buf_steal(struct zcp_prom_buf *b, size_t *ret_len);
void zcp_prom_buf_done(struct zcp_prom_buf *b);

/*
 * Appends the per-GPU families of /metrics (prom_gpu.c): zcpipe_gpu_info,
 * zcpipe_gpu_streams (each GPU's share of the running streams) and
 * zcpipe_gpu_sticky_error, each sample labelled device="N".
 */
void zcp_prom_format_gpus(const struct zcp_prom_scrape *scrape, struct zcp_prom_buf *out);

/* Appends /metrics. Returns 0, or -ENOMEM when the buffer failed. */
int zcp_prom_format_metrics(const struct zcp_prom_scrape *scrape, struct zcp_prom_buf *out);
/* Appends /stats (one JSON object and a newline). Returns 0 or -ENOMEM. */
int zcp_prom_format_stats(const struct zcp_prom_scrape *scrape, struct zcp_prom_buf *out);

/*
 * /healthz: a stream is up while the supervisor has it up and it published
 * a frame within max(2 s, 3 nominal frame periods) of now_ns. `reason` says
 * "ok", or lists each stream that is not up and why, "; "-separated
 * ("no streams running", "stream a: no frame published yet", "stream a: no
 * frame for 3.2 s (source ended)", "stream a: backoff for 2.0 s (source
 * failed: ...)", "stream a: results are not leaving (output mqtt: ...)":
 * a stream whose output cannot deliver is not up either). The verdict by `policy`: any-down: true only when every
 * stream is up; all-down: true while any stream is up.
 * zcp_prom_health() is any-down.
 */
#define ZCP_PROM_HEALTH_MIN_NS (2 * 1000000000ULL)
bool zcp_prom_health(const struct zcp_prom_scrape *scrape, char *reason, size_t size);
bool zcp_prom_health_policy(const struct zcp_prom_scrape *scrape, enum zcp_healthz policy, char *reason, size_t size);
/* The window above for one stream, ns. */
uint64_t zcp_prom_health_window_ns(const struct zcp_prom_stream *s);
