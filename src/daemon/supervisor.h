/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The supervisor: one slot per configured stream name, and the one state
 * machine every source type goes through when its stream ends by itself.
 *
 *   up       the stream's threads run (its source may re-connect on its own:
 *            a camera or network source waits for its device itself)
 *   backoff  it failed at run time and was freed; it is re-opened alone
 *            after 1 s, 2 s, 4 s ... up to restart_backoff_max_ms (the delay
 *            starts again at 1 s once a run lasted longer than that cap)
 *   failed   given up: restart: never, a re-open that cannot heal (the file
 *            is gone: ZCP_ERR_INPUT of a source that is not live; ZCP_ERR_CONFIG),
 *            a new geometry whose ring is over pinned_budget
 *   ended    finished normally (end of a file); restart: always re-opens it
 *            after the back-off instead
 *
 * A source whose frame geometry changes ends its stream like an end of
 * stream (ZCP_STREAM_END_RECONFIGURE); the slot then builds the next stream
 * at once on the same opened source (zcp_stream_new_from), with a ring for
 * the new size: counted in stats->reconfigures, no back-off, the state stays up.
 *
 * A slot owns its stream's counters (struct zcp_stream_stats), so they stay
 * monotonic across restarts: every loss of every run is counted where users
 * look (/metrics, /stats). restarts, reconfigures, the state and its time
 * are counters there too; the last error is text in the slot.
 *
 * Each stream's GPU is placed (daemon/placement.h) every time it opens:
 * gpu.device: auto goes to the usable GPU with the fewest running streams,
 * so a stream re-opened after a failure may move to another GPU (its new
 * ring is portable pinned memory, the backend opens on the GPU it is given).
 * A geometry change keeps the stream's GPU.
 *
 * Process exit policy (zcp_sup_poll): a sticky GPU error (the process must
 * restart: 86, whichever GPU it hit, docs/design.md says why),
 * ZCP_ERR_CONFIG when re-opening (78), a stream with restart: never that
 * ended or failed, or nothing left to run (every slot ended or failed: 0 if
 * all ended, else the first failure).
 *
 * Start-up (zcp_sup_start) and reloads (zcp_sup_apply) go through the same
 * state machine: a stream that cannot open at start is in `backoff` (or
 * `failed`, for an input that does not heal) like one whose re-open failed,
 * while the others run.
 *
 * Main thread only (the control loop, like SIGHUP reloads: a reload and a
 * restart never run at the same time). Exporter threads see the slots
 * through the registry (daemon/registry.h); the slot's stream pointer and
 * its texts change under the registry lock.
 */
#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "core/metrics.h"
#include "daemon/placement.h"
#include "daemon/registry.h"
#include "pipeline.h"

#define ZCP_SUP_BACKOFF_FIRST_MS 1000
#define ZCP_SUP_WD_FRESH         UINT64_MAX   /* wd_mark of a stream (re-)opened since the last watchdog check */
#define ZCP_SUP_RATE_SAMPLES     6    /* one a second: the current rate is over the last 5 s */

struct zcp_framelog;

struct zcp_sup_slot {
        struct zcp_stream_config cfg;       /* the stream's current config */
        uint32_t index;
        struct zcp_stream_stats *stats;     /* owned: outlives every stream of the slot */
        struct zcp_stream *stream;          /* NULL in backoff and failed; ended: the joined stream stays */
        enum zcp_stream_state state;        /* mirrored in stats->stream_state */
        bool opened;                        /* a stream of the slot ever started (else its state reads "start") */
        uint32_t backoff_ms;                /* the next delay */
        uint64_t retry_at_ns;               /* backoff: when to re-open */
        uint64_t up_since_ns;
        int failure;                        /* error of the last failure (0 none) */
        char last_error[256];               /* "" none; changes under the registry lock */
        /* What the last stream showed, for the view while there is none. */
        struct zcp_source_info info;
        const char *source_type, *backend, *transfer, *sink;
        char backend_reason[384];
        uint64_t ring_bytes;                /* of its current stream's ring, 0 without */
        int gpu_device;                     /* the GPU its current stream runs on; -1: none, or the cpu backend */
        /* Published frames, one sample a tick: the current rate (zcp_sup_slot_fps). */
        uint64_t rate_t[ZCP_SUP_RATE_SAMPLES], rate_n[ZCP_SUP_RATE_SAMPLES];
        uint32_t rate_head, rate_len;
        /* The watchdog's (main.c): published at its last ping (ZCP_SUP_WD_FRESH: (re-)opened since),
         * and restarts + reconfigures at its last check. */
        uint64_t wd_mark, wd_runs;
};

struct zcp_sup {
        struct zcp_registry *registry;
        int done_fd;
        struct zcp_framelog *framelog;
        uint64_t pinned_budget;             /* bytes; 0 = no limit, one budget for the host (all GPUs) */
        struct zcp_gpu_host gpus;           /* the host's GPUs (daemon/placement.h), known at the first open */
        bool gpus_known, gpus_probed;       /* ... and whether each was probed for gpu.device: auto */
        uint32_t gpu_streams[ZCP_GPU_MAX];  /* streams running on each GPU: what auto placement balances */
        struct zcp_sup_slot *slots[ZCP_CONFIG_MAX_STREAMS];
        uint32_t count;
};

void zcp_sup_init(struct zcp_sup *sup, struct zcp_registry *registry, int done_fd, struct zcp_framelog *framelog,
                  uint64_t pinned_budget);

/* A slot for `cfg` (state up, no stream yet). */
int zcp_sup_slot_new(const struct zcp_stream_config *cfg, uint32_t index, struct zcp_sup_slot **ret_slot);
/* Its stream must be closed. Accepts NULL. */
void zcp_sup_slot_free(struct zcp_sup_slot *slot);

/* Opens the slot's stream (not started); a failure is the caller's (start-up, reload). */
int zcp_sup_slot_create(struct zcp_sup *sup, struct zcp_sup_slot *slot);
int zcp_sup_slot_start(struct zcp_sup *sup, struct zcp_sup_slot *slot);
/* Create and start; on failure nothing is left behind. The state becomes up (logged with `why`). */
int zcp_sup_slot_open(struct zcp_sup *sup, struct zcp_sup_slot *slot, const char *why);
/* Asks the stream to stop (any state; idempotent). */
void zcp_sup_slot_stop(struct zcp_sup_slot *slot);
/* Stops, joins and frees the stream, logging `why` and its summary; returns zcp_stream_join()'s result. */
int zcp_sup_slot_close(struct zcp_sup *sup, struct zcp_sup_slot *slot, const char *why);

/*
 * Start-up: a slot per stream of `cfg`, each opened, then each started. A
 * stream that cannot open or start is handled as a failed re-open at run
 * time: `failed` for an input that does not heal (ZCP_ERR_INPUT of a source
 * that is not live: a missing, unreadable or broken file), else `backoff`;
 * the other streams start regardless. Stops opening once the sources are
 * cancelled (zcp_source_cancel_all: SIGTERM during start-up). Returns 0, or
 * what ends the process before anything runs, as at a re-open:
 * ZCP_ERR_CONFIG (78), -ENODEV (backend: cuda without a usable GPU, 69),
 * -ENOMEM. The slots are then exported (zcp_sup_set_slots).
 */
int zcp_sup_start(struct zcp_sup *sup, const struct zcp_config *cfg);

/* What zcp_sup_apply() did. */
struct zcp_sup_apply {
        uint32_t kept, stopped, started;    /* streams kept running untouched, stopped, (re-)opened */
        char failed[ZCP_NAME_MAX];          /* the stream that could not start ("" none): rolled back */
        int failed_err;
        int fatal;                          /* the rollback could not restore a stream: stop with this error */
};

/*
 * SIGHUP: makes the running set what `next` says (`next` is validated and
 * stays the caller's). Streams are matched by name; one whose effective
 * config did not change (zcp_sup_same_config) keeps running untouched, with
 * its state, counters and back-off. Changed and removed streams stop first
 * (so they release their camera, socket or file), then changed and new ones
 * open; a changed stream keeps its slot (its counters carry on). Their models
 * load before anything stops: one that cannot load, lines too long for the
 * stream's output (zcp_publish_check_fits) or an output path that cannot be
 * written (zcp_preflight_output) refuse the reload with nothing touched (ret->failed names the stream, kept/stopped/started 0). If one of
 * them cannot open or start, everything is rolled back: the streams the
 * apply started stop, and those it stopped come back with their previous
 * config. Returns 0 (applied) or the error of the stream that could not start
 * (rolled back); ret says which and counts what was done.
 */
int zcp_sup_apply(struct zcp_sup *sup, const struct zcp_config *next, struct zcp_sup_apply *ret);

/*
 * True when the two stream configs run the same: equal but for what the
 * parser derives from the rest of the file (source.gst_streams: how many
 * GStreamer streams the whole config has, which only sizes decoder_threads:
 * auto when a stream opens).
 */
bool zcp_sup_same_config(const struct zcp_stream_config *a, const struct zcp_stream_config *b);

/* The slots exporters see from now on (the array is copied). Slots no longer listed may then be freed. */
void zcp_sup_set_slots(struct zcp_sup *sup, struct zcp_sup_slot *const *slots, uint32_t count);

/*
 * Streams that ended by themselves, and re-opens that are due. Returns true
 * when the process must stop, with *ret_err the failure to exit with (0:
 * everything ended normally).
 */
bool zcp_sup_poll(struct zcp_sup *sup, uint64_t now_ns, int *ret_err);
/* Milliseconds until the next re-open is due, -1 when none waits. */
int zcp_sup_timeout_ms(const struct zcp_sup *sup, uint64_t now_ns);

/* Once a second: samples each slot's published counter. */
void zcp_sup_tick(struct zcp_sup *sup, uint64_t now_ns);
/* Published frames a second over the last few seconds (0 when not up). */
double zcp_sup_slot_fps(const struct zcp_sup_slot *slot);

/*
 * pinned_budget: `cfg->pinned_budget`, or 10% of MemTotal for 0; `why`
 * says which ("pinned_budget", "10% of 24.0 GiB RAM"). 0 when unknown.
 */
uint64_t zcp_sup_pinned_budget(const struct zcp_config *cfg, char *why, size_t size);
/*
 * The rings the config asks for against the budget: the bytes of each
 * stream's ring as far as the config fixes its geometry (a file or network
 * stream of its own size counts at open). Returns 0, or ZCP_ERR_CONFIG with
 * the figures and a fix in `msg`.
 */
int zcp_sup_check_budget(const struct zcp_config *cfg, char *msg, size_t size);
