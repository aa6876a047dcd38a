/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Log-linear latency histograms and per-stream counters.
 *
 * A histogram covers 1 us .. 10 s with 128 linear sub-buckets per power of
 * two (relative error of a reported value <= 1/256 < 1 %); values below the
 * range land in the first bucket, above it in the last (max is kept
 * exactly). One thread records into a histogram (relaxed atomics, no locks);
 * any thread may read it.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/frame.h"
#include "core/stages.h"

#define ZCP_HIST_SUB_BITS 7                       /* 128 sub-buckets per octave */
#define ZCP_HIST_MIN_NS   1000ULL                 /* 1 us */
#define ZCP_HIST_MAX_NS   10000000000ULL          /* 10 s */
#define ZCP_HIST_OCTAVES  24                      /* 1 us * 2^24 > 10 s */
#define ZCP_HIST_BUCKETS  (ZCP_HIST_OCTAVES << ZCP_HIST_SUB_BITS)

struct zcp_hist {
        _Atomic uint64_t bucket[ZCP_HIST_BUCKETS];
        _Atomic uint64_t count;
        _Atomic uint64_t sum_ns;
        _Atomic uint64_t max_ns;
        _Atomic uint64_t min_ns;   /* UINT64_MAX when empty */
};

void zcp_hist_init(struct zcp_hist *h);
/* Recording thread only. */
void zcp_hist_record(struct zcp_hist *h, uint64_t ns);

/* Bucket math, exposed for exporters and tests. */
uint32_t zcp_hist_bucket_of(uint64_t ns);
uint64_t zcp_hist_bucket_low(uint32_t b);    /* smallest value in bucket b */
uint64_t zcp_hist_bucket_high(uint32_t b);   /* one past the largest value in bucket b */

/* A consistent-enough copy for reporting (any thread). */
struct zcp_hist_snapshot {
        uint64_t bucket[ZCP_HIST_BUCKETS];
        uint64_t count, sum_ns, max_ns, min_ns;
};
void zcp_hist_snapshot(const struct zcp_hist *h, struct zcp_hist_snapshot *ret);

/* q in [0,1]. Returns the midpoint of the bucket holding the q-quantile,
 * clamped to [min, max]; 0 when empty. */
uint64_t zcp_hist_quantile(const struct zcp_hist_snapshot *s, double q);

/* enum zcp_stage: core/stages.h. */
extern const char *const zcp_stage_names[ZCP_STAGE_COUNT];

enum zcp_source_state { ZCP_SOURCE_DOWN, ZCP_SOURCE_OPENING, ZCP_SOURCE_UP, ZCP_SOURCE_BACKOFF, ZCP_SOURCE_ENDED, ZCP_SOURCE_STATE_COUNT };
extern const char *const zcp_source_state_names[ZCP_SOURCE_STATE_COUNT];

/*
 * A configured stream as the supervisor (daemon/supervisor.h) runs it: up
 * (its threads run; the source may itself be re-connecting), backoff (it
 * failed and waits to be re-opened), failed (given up), ended (finished
 * normally). Not the source's own state above.
 */
enum zcp_stream_state { ZCP_STREAM_UP, ZCP_STREAM_BACKOFF, ZCP_STREAM_FAILED, ZCP_STREAM_ENDED, ZCP_STREAM_STATE_COUNT };
extern const char *const zcp_stream_state_names[ZCP_STREAM_STATE_COUNT];   /* "up", "backoff", "failed", "ended" */

/*
 * A results sink's accounting (the contract of output/sink.h; declared here
 * so that a stream's stats can hold it). A line is `written` once the sink
 * handed all of it to its reader (the file, the pipe, the socket buffer of
 * every client connected then, at least one; the broker); `queued` is a
 * gauge of whole lines accepted but not yet written; a line that never will
 * be is counted once in `lost` by reason. `reconnects`: times an output
 * re-established its connection (MQTT) or re-created its file after it was
 * deleted. `error`: 0 while results leave, else the errno of why they do
 * not (the file's directory is gone, the broker is unreachable): /healthz
 * says so. Written by the sink's own threads, read by any.
 */
enum zcp_sink_loss {
        ZCP_SINK_LOSS_QUEUE_FULL,    /* the sink's bounded queue was full (a slow or stopped reader) */
        ZCP_SINK_LOSS_WRITE_ERROR,   /* write failed: disk full, file gone, reader gone, connection lost */
        ZCP_SINK_LOSS_TOO_LONG,      /* the line does not fit the line buffer */
        ZCP_SINK_LOSS_NO_READER,     /* unix: no client was connected to take it */
        ZCP_SINK_LOSS_SLOW_READER,   /* unix: a connected client did not take it and was cut for not reading */
        ZCP_SINK_LOSS_COUNT
};
extern const char *const zcp_sink_loss_names[ZCP_SINK_LOSS_COUNT];

struct zcp_sink_stats {
        _Atomic uint64_t written;
        _Atomic uint64_t queued;
        _Atomic uint64_t lost[ZCP_SINK_LOSS_COUNT];
        _Atomic uint64_t reconnects;
        _Atomic int error;                       /* 0: results leave; else the positive errno of why not */
};

/* Per stream. Counters are written by one thread each, read by any. */
/* Classes whose detections are counted one by one (COCO has 80); the rest are counted together. */
#define ZCP_STATS_CLASSES 256

struct zcp_stream_stats {
        struct zcp_hist wait[ZCP_STAGE_COUNT];   /* enter -> start */
        struct zcp_hist busy[ZCP_STAGE_COUNT];   /* start -> end */
        struct zcp_hist e2e;                     /* capture -> publish end */
        _Atomic uint64_t captured;               /* frames the source produced (incl. dropped later) */
        _Atomic uint64_t published;              /* frames with results handed to the sink */
        _Atomic uint64_t dropped[ZCP_DROP_REASON_COUNT];
        _Atomic uint64_t decode_gaps;            /* frames missing from a file's timeline */
        _Atomic uint64_t copies;                 /* frames copied into a slot (not zero copy) */
        _Atomic uint64_t slot_direct;            /* files: frames the decoder wrote straight into their slot
                                                    (copies + slot_direct = frames filled by the source) */
        _Atomic uint64_t reconnects;             /* source re-inits after a fault */
        _Atomic uint64_t conversions;            /* frames converted by the source before the ring (videoconvert) */
        _Atomic uint64_t pts_repeats;            /* frames whose pts did not advance (flagged in the JSON line) */
        _Atomic uint64_t file_frames_expected;   /* files, at each end: frames the container holds */
        _Atomic uint64_t file_frames_delivered;  /* files, at each end: frames that reached the ring */
        _Atomic uint64_t outage_ns;              /* network: time without a connection (ended outages) */
        _Atomic uint64_t outage_frames;          /* network: frames those outages cost, at the stream's rate */
        _Atomic uint32_t source_state;           /* enum zcp_source_state */
        _Atomic int32_t source_error;            /* why the source is not up: its last failed attempt's
                                                    negative errno; 0 while up (the source's thread writes) */
        _Atomic uint32_t capture_path;           /* enum zcp_capture_path now in use (a source may fall back) */
        _Atomic uint64_t first_capture_ns, last_publish_ns;
        _Atomic uint64_t ring_in_flight;         /* slots not free (gauge) */
        struct zcp_sink_stats sink;              /* the results sink's own counts */
        /* The supervisor's (main thread writes; zero without one = up): */
        _Atomic uint32_t stream_state;           /* enum zcp_stream_state */
        _Atomic uint64_t state_since_ns;         /* CLOCK_MONOTONIC of the last state change, 0 = never changed */
        _Atomic uint64_t restarts;               /* re-opens after a failure (or an end with restart: always) */
        _Atomic uint64_t reconfigures;           /* new rings for a changed source geometry */
        /* Detectors (publish thread writes): objects per class, in all and in the latest published frame. */
        _Atomic uint64_t detections[ZCP_STATS_CLASSES];
        _Atomic uint32_t objects[ZCP_STATS_CLASSES];
        _Atomic uint64_t detections_other;       /* classes ZCP_STATS_CLASSES and up, in all */
        _Atomic uint32_t objects_other;
};

void zcp_stream_stats_init(struct zcp_stream_stats *s);
/* The publish thread, once per published frame of a detector: counts its n detections by class. */
void zcp_stats_detections(struct zcp_stream_stats *s, const struct zcp_detection *det, uint32_t n);
/* Any thread that decides a drop. */
void zcp_stats_drop(struct zcp_stream_stats *s, enum zcp_drop_reason reason);
uint64_t zcp_stats_dropped_total(const struct zcp_stream_stats *s);
/* The sink's thread that decides a loss. */
void zcp_sink_stats_lose(struct zcp_sink_stats *s, enum zcp_sink_loss reason);
uint64_t zcp_sink_stats_lost_total(const struct zcp_sink_stats *s);
