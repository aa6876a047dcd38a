/* SPDX-License-Identifier: MIT */
/*
 * The supervisor (supervisor.h): per-slot state machine, restarts with
 * capped exponential back-off, new rings for geometry changes, the process
 * exit policy and the pinned memory budget.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/source.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/pixfmt.h"
#include "core/ring.h"
#include "daemon/preflight.h"
#include "daemon/summary.h"
#include "daemon/supervisor.h"
#include "model/model.h"
#include "output/publish.h"

void zcp_sup_init(struct zcp_sup *sup, struct zcp_registry *registry, int done_fd, struct zcp_framelog *framelog,
                  uint64_t pinned_budget)
{
        *sup = (struct zcp_sup){
                .registry = registry,
                .done_fd = done_fd,
                .framelog = framelog,
                .pinned_budget = pinned_budget,
        };
}

int zcp_sup_slot_new(const struct zcp_stream_config *cfg, uint32_t index, struct zcp_sup_slot **ret_slot)
{
        struct zcp_sup_slot *slot = calloc(1, sizeof(*slot));

        if (!slot)
                return -ENOMEM;
        slot->stats = malloc(sizeof(*slot->stats));
        if (!slot->stats) {
                free(slot);
                return -ENOMEM;
        }
        zcp_stream_stats_init(slot->stats);
        atomic_store(&slot->stats->state_since_ns, zcp_now_ns());   /* up since now: time in state counts from here */
        slot->cfg = *cfg;
        slot->index = index;
        slot->state = ZCP_STREAM_UP;
        slot->backoff_ms = ZCP_SUP_BACKOFF_FIRST_MS;
        slot->wd_mark = ZCP_SUP_WD_FRESH;
        slot->source_type = zcp_source_type_names[cfg->source.type];
        slot->backend = slot->transfer = slot->sink = "";
        slot->gpu_device = -1;
        *ret_slot = slot;
        return 0;
}

void zcp_sup_slot_free(struct zcp_sup_slot *slot)
{
        if (!slot)
                return;
        free(slot->stats);
        free(slot);
}

/* ---- state ---------------------------------------------------------------------- */

static void set_error(struct zcp_sup *sup, struct zcp_sup_slot *slot, const char *fmt, ...) ZCP_PRINTF(3, 4);

static void set_error(struct zcp_sup *sup, struct zcp_sup_slot *slot, const char *fmt, ...)
{
        va_list ap;

        zcp_registry_lock(sup->registry);
        va_start(ap, fmt);
        vsnprintf(slot->last_error, sizeof(slot->last_error), fmt, ap);
        va_end(ap);
        zcp_registry_unlock(sup->registry);
}

/* One log line per change: "<stream>: up -> backoff (<detail>)"; "start -> ..." before its first start. */
static void set_state(struct zcp_sup_slot *slot, enum zcp_stream_state state, uint64_t now, const char *detail)
{
        enum zcp_log_level level = state == ZCP_STREAM_UP || state == ZCP_STREAM_ENDED ? ZCP_LOG_INFO : ZCP_LOG_WARN;
        const char *from = !slot->opened && slot->state == ZCP_STREAM_UP ? "start" : zcp_stream_state_names[slot->state];

        if (state == ZCP_STREAM_FAILED)
                level = ZCP_LOG_ERROR;
        zcp_log(level, "%s: %s -> %s (%s)", slot->cfg.name, from, zcp_stream_state_names[state], detail);
        slot->state = state;
        if (state == ZCP_STREAM_UP)
                slot->up_since_ns = now;
        atomic_store(&slot->stats->stream_state, (uint32_t)state);
        atomic_store(&slot->stats->state_since_ns, now);
}

/* ---- exporters ------------------------------------------------------------------ */

static void slot_view(const void *obj, struct zcp_stream_view *v)
{
        const struct zcp_sup_slot *slot = obj;

        if (slot->stream) {
                zcp_stream_view(slot->stream, v);
        } else {
                *v = (struct zcp_stream_view){
                        .name = slot->cfg.name,
                        .index = slot->index,
                        .source = &slot->info,
                        .source_type = slot->source_type,
                        .backend = slot->backend,
                        .gpu_device = -1,
                        .backend_reason = slot->backend_reason,
                        .transfer = slot->transfer,
                        .sink = slot->sink,
                };
        }
        v->stats = slot->stats;
        v->last_error = slot->last_error;
}

void zcp_sup_set_slots(struct zcp_sup *sup, struct zcp_sup_slot *const *slots, uint32_t count)
{
        const void *objs[ZCP_CONFIG_MAX_STREAMS];

        for (uint32_t i = 0; i < count && i < ZCP_CONFIG_MAX_STREAMS; i++) {
                sup->slots[i] = slots[i];
                objs[i] = slots[i];
        }
        sup->count = count;
        zcp_registry_set_objects(sup->registry, objs, count, slot_view);
}

/* ---- streams --------------------------------------------------------------------- */

struct gpus_text {
        char s[ZCP_GPU_MAX * 12];
};

/* " 0: 3, 1: 2": the streams on each GPU of the host. */
static struct gpus_text streams_text(const struct zcp_sup *sup)
{
        struct gpus_text t = { "" };
        size_t n = 0;

        for (uint32_t d = 0; d < sup->gpus.count && d < ZCP_GPU_MAX && n < sizeof(t.s); d++)
                n += (size_t)snprintf(t.s + n, sizeof(t.s) - n, "%s %u: %u", d ? "," : "", d, sup->gpu_streams[d]);
        return t;
}

static uint64_t other_rings(const struct zcp_sup *sup, const struct zcp_sup_slot *except)
{
        uint64_t sum = 0;

        for (uint32_t i = 0; i < sup->count; i++)
                if (sup->slots[i] != except && sup->slots[i]->stream)
                        sum += sup->slots[i]->ring_bytes;
        return sum;
}

/* The host's GPUs, counted once, probed once where a stream of `cfg` is placed by gpu.device: auto. */
static void know_gpus(struct zcp_sup *sup, const struct zcp_config *cfg)
{
        bool probe = zcp_place_needs_probe(cfg);

        if (sup->gpus_known && (sup->gpus_probed || !probe))
                return;
        zcp_gpu_host_probe(probe, &sup->gpus);
        sup->gpus_known = true;
        sup->gpus_probed = probe;
}

/*
 * The GPU of the slot's next stream under gpu.device: auto (a pinned number
 * is the config's own; zcp_place_check refused those the host lacks).
 */
static uint32_t place(const struct zcp_sup *sup, const struct zcp_sup_slot *slot)
{
        uint32_t device = 0;
        char why[192];

        /* A pinned number is the config's own; a geometry change (slot->stream still set) keeps the GPU. */
        if (slot->cfg.gpu.device != ZCP_GPU_DEVICE_AUTO || slot->cfg.gpu.backend == ZCP_BACKEND_CPU || slot->stream)
                return 0;
        if (zcp_place(ZCP_GPU_DEVICE_AUTO, &sup->gpus, sup->gpu_streams, &device, why, sizeof(why)) < 0)
                return 0;
        if (sup->gpus.count > 1)
                zcp_info("%s: gpu.device auto -> GPU %u (streams on each GPU before it:%s)", slot->cfg.name, device,
                         streams_text(sup).s);
        return device;
}

static struct zcp_stream_params params(const struct zcp_sup *sup, const struct zcp_sup_slot *slot)
{
        uint64_t others = other_rings(sup, slot);
        struct zcp_stream_params p = {
                .index = slot->index,
                .done_fd = sup->done_fd,
                .stats = slot->stats,
        };

        if (sup->pinned_budget)
                p.ring_budget = others < sup->pinned_budget ? sup->pinned_budget - others : 1;
        p.gpu_device = place(sup, slot);
        return p;
}

/* A new stream of the slot: remember what its view shows, then publish it. */
static void adopt(struct zcp_sup *sup, struct zcp_sup_slot *slot, struct zcp_stream *s)
{
        struct zcp_stream_view v;

        zcp_stream_view(s, &v);
        zcp_registry_lock(sup->registry);
        slot->stream = s;
        slot->info = *v.source;
        slot->source_type = v.source_type;
        slot->backend = v.backend;
        slot->transfer = v.transfer;
        slot->sink = v.sink;
        snprintf(slot->backend_reason, sizeof(slot->backend_reason), "%s", v.backend_reason ? v.backend_reason : "");
        zcp_registry_unlock(sup->registry);
        slot->gpu_device = v.gpu_device;
        if (v.gpu_device >= 0 && v.gpu_device < ZCP_GPU_MAX)
                sup->gpu_streams[v.gpu_device]++;
        slot->ring_bytes = zcp_ring_bytes(v.ring_slots, zcp_stream_slot_bytes(v.source),
                                                 zcp_stream_mask_cells(&slot->cfg, v.source->width, v.source->height)) +
                           v.source->pinned_bytes;
        zcp_stream_set_framelog(s, sup->framelog);
}

/* The slot's stream no longer runs on its GPU (it ended or is freed): auto placement stops counting it. */
static void leave_gpu(struct zcp_sup *sup, struct zcp_sup_slot *slot)
{
        if (slot->gpu_device >= 0 && slot->gpu_device < ZCP_GPU_MAX && sup->gpu_streams[slot->gpu_device])
                sup->gpu_streams[slot->gpu_device]--;
        slot->gpu_device = -1;
}

/* Takes the stream away from exporters (under the lock), then frees it. */
static void drop_stream(struct zcp_sup *sup, struct zcp_sup_slot *slot)
{
        struct zcp_stream *s = slot->stream;

        zcp_registry_lock(sup->registry);
        slot->stream = NULL;
        zcp_registry_unlock(sup->registry);
        slot->ring_bytes = 0;
        leave_gpu(sup, slot);
        atomic_store(&slot->stats->ring_in_flight, 0);   /* a per-run gauge */
        zcp_stream_free(s);
}

int zcp_sup_slot_create(struct zcp_sup *sup, struct zcp_sup_slot *slot)
{
        struct zcp_stream_params p = params(sup, slot);
        struct zcp_stream *s = NULL;
        int r;

        r = zcp_stream_open(&slot->cfg, &p, &s);
        if (r < 0)
                return r;
        adopt(sup, slot, s);
        return 0;
}

int zcp_sup_slot_start(struct zcp_sup *sup, struct zcp_sup_slot *slot)
{
        int r = zcp_stream_start(slot->stream);

        if (r < 0) {
                drop_stream(sup, slot);
                return r;
        }
        slot->up_since_ns = zcp_now_ns();
        slot->rate_len = 0;
        slot->opened = true;
        slot->wd_mark = ZCP_SUP_WD_FRESH;
        return 0;
}

int zcp_sup_slot_open(struct zcp_sup *sup, struct zcp_sup_slot *slot, const char *why)
{
        int r = zcp_sup_slot_create(sup, slot);

        if (r < 0)
                return r;
        r = zcp_sup_slot_start(sup, slot);
        if (r < 0)
                return r;
        if (slot->state != ZCP_STREAM_UP)
                set_state(slot, ZCP_STREAM_UP, zcp_now_ns(), why);   /* last_error stays: the last one */
        return 0;
}

void zcp_sup_slot_stop(struct zcp_sup_slot *slot)
{
        if (slot->stream)
                zcp_stream_stop(slot->stream);
}

int zcp_sup_slot_close(struct zcp_sup *sup, struct zcp_sup_slot *slot, const char *why)
{
        char line[320];
        int r;

        if (!slot->stream)
                return 0;
        zcp_stream_stop(slot->stream);
        r = zcp_stream_join(slot->stream);
        zcp_summary_counts(line, sizeof(line), slot->stats, zcp_sup_slot_fps(slot));
        zcp_info("%s: stopped (%s)%s%s: %s", slot->cfg.name, why, r < 0 ? ", it had failed: " : "",
                 r < 0 ? zcp_strerror(r) : "", line);
        drop_stream(sup, slot);
        return r;
}

/* ---- the state machine ------------------------------------------------------------ */

static void to_backoff(struct zcp_sup *sup, struct zcp_sup_slot *slot, uint64_t now, const char *what)
{
        uint32_t cap = slot->cfg.restart_backoff_max_ms;
        char detail[400];

        (void)sup;
        /* A run that lasted longer than the cap was a success: the back-off starts again. */
        if (slot->up_since_ns && now - slot->up_since_ns > (uint64_t)cap * ZCP_NSEC_PER_MSEC)
                slot->backoff_ms = ZCP_SUP_BACKOFF_FIRST_MS;
        if (slot->backoff_ms > cap)
                slot->backoff_ms = cap;
        slot->retry_at_ns = now + (uint64_t)slot->backoff_ms * ZCP_NSEC_PER_MSEC;
        snprintf(detail, sizeof(detail), "%s; retry in %.3g s, restart %" PRIu64, what,
                 (double)slot->backoff_ms / 1000.0, (uint64_t)atomic_load(&slot->stats->restarts) + 1);
        set_state(slot, ZCP_STREAM_BACKOFF, now, detail);
        slot->backoff_ms = slot->backoff_ms >= cap / 2 ? cap : slot->backoff_ms * 2;
}

/* restart: never ends the process with the stream; else nothing more to do here. */
static bool never(const struct zcp_sup_slot *slot)
{
        return slot->cfg.restart == ZCP_RESTART_NEVER;
}

/* The stream of `slot` finished by itself: what next. Returns true when the process must stop. */
static bool on_finished(struct zcp_sup *sup, struct zcp_sup_slot *slot, uint64_t now, int *ret_err)
{
        struct zcp_stream *old = slot->stream;
        enum zcp_stream_end end;
        char what[320];
        int r, gpu;

        r = zcp_stream_join(old);
        end = zcp_stream_end_reason(old);

        if (r == 0 && end == ZCP_STREAM_END_RECONFIGURE) {
                struct zcp_source_info was = slot->info;
                struct zcp_stream_params p = params(sup, slot);
                struct zcp_stream *s = NULL;

                r = zcp_stream_new_from(old, &p, &s);
                drop_stream(sup, slot);
                if (r == 0) {
                        adopt(sup, slot, s);
                        r = zcp_sup_slot_start(sup, slot);
                }
                if (r == 0) {
                        atomic_fetch_add(&slot->stats->reconfigures, 1);
                        zcp_info("%s: new ring for the new geometry: %ux%u %s -> %ux%u %s (reconfigure %" PRIu64 ")",
                                 slot->cfg.name, was.width, was.height, zcp_pixfmt_name(was.fmt), slot->info.width,
                                 slot->info.height, zcp_pixfmt_name(slot->info.fmt),
                                 (uint64_t)atomic_load(&slot->stats->reconfigures));
                        return false;
                }
                slot->failure = r == ZCP_ERR_CONFIG ? ZCP_ERR_CONFIG : ZCP_ERR_INPUT;
                set_error(sup, slot, "the geometry changed and no ring could be made for it: %s%s", zcp_strerror(r),
                          r == ZCP_ERR_CONFIG ? " (over pinned_budget?)" : "");
                set_state(slot, ZCP_STREAM_FAILED, now, slot->last_error);
                if (never(slot)) {
                        *ret_err = slot->failure;
                        return true;
                }
                return false;
        }

        gpu = slot->gpu_device;
        /* Ended normally and not restarted: the joined stream stays (its last frame on the live page, its view). */
        if (r == 0 && slot->cfg.restart != ZCP_RESTART_ALWAYS) {
                leave_gpu(sup, slot);
                set_state(slot, ZCP_STREAM_ENDED, now, "the source ended");
                if (never(slot)) {
                        *ret_err = 0;
                        return true;
                }
                return false;
        }
        drop_stream(sup, slot);
        if (r == ZCP_ERR_GPU_STICKY) {
                slot->failure = r;
                if (gpu >= 0)
                        set_error(sup, slot, "sticky GPU error on GPU %d: the process must restart", gpu);
                else
                        set_error(sup, slot, "sticky GPU error: the process must restart");
                set_state(slot, ZCP_STREAM_FAILED, now, slot->last_error);
                *ret_err = r;
                return true;
        }
        if (r < 0) {
                slot->failure = r;
                set_error(sup, slot, "%s failed: %s", end == ZCP_STREAM_END_FAILED ? "source" : "a stage",
                          zcp_strerror(r));
                if (never(slot)) {
                        set_state(slot, ZCP_STREAM_FAILED, now, "restart: never");
                        *ret_err = r;
                        return true;
                }
                to_backoff(sup, slot, now, slot->last_error);
                return false;
        }
        /* Ended normally, restart: always. */
        snprintf(what, sizeof(what), "the source ended; restart: always");
        to_backoff(sup, slot, now, what);
        return false;
}

/* A source that waits for its device or server by itself: a camera, a network stream. */
static bool live_source(const struct zcp_sup_slot *slot)
{
        return slot->info.live || slot->cfg.source.type == ZCP_SOURCE_V4L2 || slot->cfg.source.type == ZCP_SOURCE_NETWORK;
}

/*
 * A stream of the slot could not open (`verb`: "open" at start, "re-open" when
 * due): failed for what does not heal, else the next back-off. Returns true
 * when the process must stop (ZCP_ERR_CONFIG; restart: never), with *ret_err.
 */
static bool open_failed(struct zcp_sup *sup, struct zcp_sup_slot *slot, uint64_t now, int r, const char *verb,
                        int *ret_err)
{
        slot->failure = r;
        set_error(sup, slot, "cannot %s: %s", verb, zcp_strerror(r));
        if (r == ZCP_ERR_CONFIG) {
                set_state(slot, ZCP_STREAM_FAILED, now, slot->last_error);
                *ret_err = r;
                return true;
        }
        /* A file that is gone, unreadable or broken does not heal; a camera or network source would have waited itself. */
        if ((r == ZCP_ERR_INPUT && !live_source(slot)) || never(slot)) {
                set_state(slot, ZCP_STREAM_FAILED, now, slot->last_error);
                if (never(slot)) {
                        *ret_err = r;
                        return true;
                }
                return false;
        }
        slot->up_since_ns = 0;
        to_backoff(sup, slot, now, slot->last_error);
        return false;
}

/* A re-open that is due. Returns true when the process must stop. */
static bool retry(struct zcp_sup *sup, struct zcp_sup_slot *slot, uint64_t now, int *ret_err)
{
        char detail[400];
        int r;

        atomic_fetch_add(&slot->stats->restarts, 1);
        snprintf(detail, sizeof(detail), "re-opened, restart %" PRIu64, (uint64_t)atomic_load(&slot->stats->restarts));
        r = zcp_sup_slot_open(sup, slot, detail);
        if (r == 0)
                return false;
        if (zcp_source_cancelled())
                return false;   /* stopping: the source gave up because it was asked to */
        return open_failed(sup, slot, now, r, "re-open", ret_err);
}

bool zcp_sup_poll(struct zcp_sup *sup, uint64_t now, int *ret_err)
{
        uint32_t done = 0;
        int first = 0;

        for (uint32_t i = 0; i < sup->count; i++) {
                struct zcp_sup_slot *slot = sup->slots[i];

                if (slot->state == ZCP_STREAM_UP && slot->stream && zcp_stream_finished(slot->stream) &&
                    on_finished(sup, slot, now, ret_err))
                        return true;
                if (slot->state == ZCP_STREAM_BACKOFF && now >= slot->retry_at_ns && retry(sup, slot, now, ret_err))
                        return true;
        }
        /* Nothing left to run: every slot ended or failed. */
        for (uint32_t i = 0; i < sup->count; i++) {
                const struct zcp_sup_slot *slot = sup->slots[i];

                if (slot->state != ZCP_STREAM_ENDED && slot->state != ZCP_STREAM_FAILED)
                        return false;
                if (slot->state == ZCP_STREAM_FAILED && !first)
                        first = slot->failure ? slot->failure : -EIO;
                done++;
        }
        if (done == 0)
                return false;
        *ret_err = first;
        return true;
}

int zcp_sup_timeout_ms(const struct zcp_sup *sup, uint64_t now)
{
        int best = -1;

        for (uint32_t i = 0; i < sup->count; i++) {
                const struct zcp_sup_slot *slot = sup->slots[i];
                uint64_t ms;

                if (slot->state != ZCP_STREAM_BACKOFF)
                        continue;
                ms = slot->retry_at_ns > now ? (slot->retry_at_ns - now + ZCP_NSEC_PER_MSEC - 1) / ZCP_NSEC_PER_MSEC : 0;
                if (ms > 3600000)
                        ms = 3600000;
                if (best < 0 || (int)ms < best)
                        best = (int)ms;
        }
        return best;
}

/* ---- start-up and reloads ---------------------------------------------------------- */

/* A stream that cannot open at start, handled as a failed re-open. Returns true when the process must stop. */
static bool start_failed(struct zcp_sup *sup, struct zcp_sup_slot *slot, int r)
{
        int err = 0;

        if (zcp_source_cancelled())
                return false;   /* SIGTERM during start-up: the source gave up because it was asked to */
        if (r == -ENODEV || r == ZCP_ERR_GPU_STICKY) {
                /* backend: cuda and no usable GPU: a process restart may find the driver (69) */
                slot->failure = r;
                set_error(sup, slot, "cannot open: %s", zcp_strerror(r));
                set_state(slot, ZCP_STREAM_FAILED, zcp_now_ns(), slot->last_error);
                return true;
        }
        return open_failed(sup, slot, zcp_now_ns(), r, "open", &err);
}

int zcp_sup_start(struct zcp_sup *sup, const struct zcp_config *cfg)
{
        int r = 0;

        know_gpus(sup, cfg);
        /* Every source opens first (a file prerolls, a camera is found), then every stream starts. */
        for (uint32_t i = 0; i < cfg->stream_count && i < ZCP_CONFIG_MAX_STREAMS; i++) {
                struct zcp_sup_slot *slot = NULL;

                r = zcp_sup_slot_new(&cfg->streams[i], i, &slot);
                if (r < 0)
                        goto out;
                sup->slots[sup->count++] = slot;
                if (zcp_source_cancelled())
                        continue;
                r = zcp_sup_slot_create(sup, slot);
                if (r < 0 && start_failed(sup, slot, r))
                        goto out;
        }
        for (uint32_t i = 0; i < sup->count; i++) {
                struct zcp_sup_slot *slot = sup->slots[i];

                if (!slot->stream || zcp_source_cancelled())
                        continue;
                r = zcp_sup_slot_start(sup, slot);
                if (r < 0 && start_failed(sup, slot, r))
                        goto out;
        }
        r = 0;
out:
        zcp_sup_set_slots(sup, sup->slots, sup->count);
        return r;
}

bool zcp_sup_same_config(const struct zcp_stream_config *a, const struct zcp_stream_config *b)
{
        /* Copied with memcpy, padding included: configs are calloc'ed, their strings' tails zeroed. */
        static struct zcp_stream_config x, y;   /* main thread only (too large for the stack twice) */

        memcpy(&x, a, sizeof(x));
        memcpy(&y, b, sizeof(y));
        x.source.gst_streams = y.source.gst_streams = 0;
        return !zcp_stream_config_changed(&x, &y);   /* a default spelled out changes nothing */
}

/* What an apply changes, kept for its rollback. */
struct apply_plan {
        struct zcp_sup_slot *old[ZCP_CONFIG_MAX_STREAMS];     /* the running set, in order */
        struct zcp_stream_config old_cfg[ZCP_CONFIG_MAX_STREAMS];
        uint32_t old_index[ZCP_CONFIG_MAX_STREAMS], old_count;
        enum zcp_stream_state old_state[ZCP_CONFIG_MAX_STREAMS];
        bool keep[ZCP_CONFIG_MAX_STREAMS];                      /* old[j] runs on untouched */
        bool seen[ZCP_CONFIG_MAX_STREAMS];                      /* old[j] is in the new set */
        bool was_open[ZCP_CONFIG_MAX_STREAMS];                  /* old[j] had a stream the apply stopped */
        int from_old[ZCP_CONFIG_MAX_STREAMS];                   /* new stream i: its old slot j, or -1 */
        struct zcp_sup_slot *slots[ZCP_CONFIG_MAX_STREAMS];   /* the new set, in order */
};

/* Rolls a failed apply back: the streams it started stop, the ones it stopped come back as they were. */
static void roll_back(struct zcp_sup *sup, const struct zcp_config *next, struct apply_plan *p,
                      struct zcp_sup_apply *ret)
{
        for (uint32_t i = 0; i < next->stream_count; i++) {
                if (!p->slots[i] || (p->from_old[i] >= 0 && p->keep[p->from_old[i]]))
                        continue;
                zcp_sup_slot_close(sup, p->slots[i], "reload rolled back");
        }
        zcp_sup_set_slots(sup, p->old, p->old_count);
        for (uint32_t i = 0; i < next->stream_count; i++)
                if (p->slots[i] && p->from_old[i] < 0)
                        zcp_sup_slot_free(p->slots[i]);
        for (uint32_t j = 0; j < p->old_count; j++) {
                struct zcp_sup_slot *slot = p->old[j];
                int r;

                if (p->keep[j])
                        continue;
                zcp_registry_lock(sup->registry);
                slot->cfg = p->old_cfg[j];
                slot->index = p->old_index[j];
                zcp_registry_unlock(sup->registry);
                if (!p->was_open[j]) {
                        /* it was in back-off, failed or ended: it stays so */
                        slot->state = p->old_state[j];
                        atomic_store(&slot->stats->stream_state, (uint32_t)p->old_state[j]);
                        continue;
                }
                r = zcp_sup_slot_open(sup, slot, "reload rolled back");
                if (r < 0) {
                        zcp_err("%s: cannot restart it with the previous configuration either", slot->cfg.name);
                        if (!ret->fatal)
                                ret->fatal = r;
                }
        }
}

/*
 * What the streams the apply will (re)open need from files, checked before any stream stops: a
 * model that does not load (read afresh, as the open will once the old stream has let go of its
 * copy: a model file replaced in place is read again), result lines their output cannot carry
 * (MQTT's message limit) or an output path that cannot be written refuse the reload with nothing
 * touched (a file stream stopped and rolled back would play its file again from the start).
 */
static int prepare_opens(const struct zcp_config *next, const struct apply_plan *p, struct zcp_sup_apply *ret)
{
        for (uint32_t i = 0; i < next->stream_count; i++) {
                const struct zcp_stream_config *sc = &next->streams[i];
                struct zcp_plan *model = NULL;
                char err[ZCP_PATH_MAX + 512];
                int r = 0;

                if (p->from_old[i] >= 0 && p->keep[p->from_old[i]])
                        continue;
                if (sc->model.enabled && (r = zcp_model_load_config(&sc->model, &model, err, sizeof(err))) < 0)
                        zcp_err("%s: %s", sc->name, err);
                else if ((r = zcp_publish_check_fits(sc, model, err, sizeof(err))) < 0 ||
                         (r = zcp_preflight_output(sc, err, sizeof(err))) < 0)
                        zcp_err("%s", r == ZCP_ERR_CONFIG ? err : zcp_strerror(r));
                zcp_plan_free(model);
                if (r < 0) {
                        snprintf(ret->failed, sizeof(ret->failed), "%s", sc->name);
                        ret->failed_err = r;
                        zcp_err("reload refused: stream %s cannot start; still running the previous configuration",
                                sc->name);
                        return r;
                }
        }
        return 0;
}

int zcp_sup_apply(struct zcp_sup *sup, const struct zcp_config *next, struct zcp_sup_apply *ret)
{
        static struct apply_plan plan;   /* main thread only; large (every old config) */
        struct apply_plan *p = &plan;
        int r = 0;

        memset(p, 0, sizeof(*p));
        *ret = (struct zcp_sup_apply){ .failed = "" };
        know_gpus(sup, next);
        p->old_count = sup->count;
        for (uint32_t j = 0; j < p->old_count; j++) {
                p->old[j] = sup->slots[j];
                p->old_cfg[j] = p->old[j]->cfg;
                p->old_index[j] = p->old[j]->index;
                p->old_state[j] = p->old[j]->state;
        }
        /* Match by name: an unchanged stream keeps running (or waiting) with its old config. */
        for (uint32_t i = 0; i < next->stream_count; i++) {
                p->from_old[i] = -1;
                for (uint32_t j = 0; j < p->old_count; j++) {
                        if (strcmp(p->old_cfg[j].name, next->streams[i].name) != 0)
                                continue;
                        p->from_old[i] = (int)j;
                        p->seen[j] = true;
                        p->keep[j] = zcp_sup_same_config(&p->old_cfg[j], &next->streams[i]);
                        break;
                }
        }

        /* Models and outputs first: a reload that cannot open one of them touches no stream. */
        if ((r = prepare_opens(next, p, ret)) < 0)
                return r;

        /* Changed and removed streams leave first: they release their devices, sockets and files. */
        for (uint32_t j = 0; j < p->old_count; j++) {
                if (p->keep[j]) {
                        ret->kept++;
                        continue;
                }
                p->was_open[j] = p->old[j]->stream != NULL;
                zcp_sup_slot_stop(p->old[j]);
        }
        for (uint32_t j = 0; j < p->old_count; j++)
                if (!p->keep[j] && p->was_open[j]) {
                        zcp_sup_slot_close(sup, p->old[j], "reload");
                        ret->stopped++;
                }

        for (uint32_t i = 0; i < next->stream_count; i++) {
                struct zcp_sup_slot *slot;
                int j = p->from_old[i];

                if (j >= 0 && p->keep[j]) {
                        p->slots[i] = p->old[j];
                        continue;
                }
                if (j >= 0) {
                        /* Same name, new config: the slot (and its counters) carries on. Exporters read cfg. */
                        slot = p->old[j];
                        zcp_registry_lock(sup->registry);
                        slot->cfg = next->streams[i];
                        zcp_registry_unlock(sup->registry);
                } else {
                        r = zcp_sup_slot_new(&next->streams[i], i, &slot);
                        if (r < 0) {
                                snprintf(ret->failed, sizeof(ret->failed), "%s", next->streams[i].name);
                                break;
                        }
                }
                p->slots[i] = slot;
                r = zcp_sup_slot_open(sup, slot, "reload");
                if (r < 0) {
                        snprintf(ret->failed, sizeof(ret->failed), "%s", next->streams[i].name);
                        break;
                }
                ret->started++;
        }
        if (r < 0) {
                ret->failed_err = r;
                zcp_err("reload failed: stream %s cannot start; going back to the previous configuration",
                        ret->failed);
                roll_back(sup, next, p, ret);
                return r;
        }
        zcp_sup_set_slots(sup, p->slots, next->stream_count);
        /* Removed streams: exporters no longer list them. */
        for (uint32_t j = 0; j < p->old_count; j++)
                if (!p->seen[j])
                        zcp_sup_slot_free(p->old[j]);
        return 0;
}

/* ---- the current rate ---------------------------------------------------------------- */

void zcp_sup_tick(struct zcp_sup *sup, uint64_t now)
{
        for (uint32_t i = 0; i < sup->count; i++) {
                struct zcp_sup_slot *slot = sup->slots[i];

                slot->rate_head = slot->rate_len ? (slot->rate_head + 1) % ZCP_SUP_RATE_SAMPLES : 0;
                slot->rate_t[slot->rate_head] = now;
                slot->rate_n[slot->rate_head] = atomic_load(&slot->stats->published);
                if (slot->rate_len < ZCP_SUP_RATE_SAMPLES)
                        slot->rate_len++;
        }
}

double zcp_sup_slot_fps(const struct zcp_sup_slot *slot)
{
        uint32_t oldest;
        uint64_t dt;

        if (slot->state != ZCP_STREAM_UP || slot->rate_len < 2)
                return 0.0;
        oldest = (slot->rate_head + ZCP_SUP_RATE_SAMPLES + 1 - slot->rate_len) % ZCP_SUP_RATE_SAMPLES;
        dt = slot->rate_t[slot->rate_head] - slot->rate_t[oldest];
        if (dt == 0 || slot->rate_n[slot->rate_head] < slot->rate_n[oldest])
                return 0.0;
        return (double)(slot->rate_n[slot->rate_head] - slot->rate_n[oldest]) * 1e9 / (double)dt;
}

/* ---- pinned memory budget -------------------------------------------------------------- */

static uint64_t mem_total(void)
{
        FILE *f = fopen("/proc/meminfo", "re");
        char line[256];
        unsigned long long kb = 0;

        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
                        break;
        fclose(f);
        return (uint64_t)kb * 1024;
}

static double gib(uint64_t bytes)
{
        return (double)bytes / (double)(1ull << 30);
}

/* "2.35 GiB", or "95.0 MiB" below 1 GiB. */
static const char *size_text(char *buf, size_t size, uint64_t bytes)
{
        if (bytes >= (1ull << 30))
                snprintf(buf, size, "%.2f GiB", gib(bytes));
        else
                snprintf(buf, size, "%.1f MiB", (double)bytes / (double)(1ull << 20));
        return buf;
}

uint64_t zcp_sup_pinned_budget(const struct zcp_config *cfg, char *why, size_t size)
{
        uint64_t total;

        if (cfg->pinned_budget) {
                snprintf(why, size, "pinned_budget");
                return cfg->pinned_budget;
        }
        total = mem_total();
        snprintf(why, size, "10%% of %.1f GiB RAM", gib(total));
        return total / 10;
}

/* The ring a stream's config fixes: 0 when its size is only known at open (a file, a network stream). */
static uint64_t config_ring_bytes(const struct zcp_stream_config *sc)
{
        const struct zcp_source_config *src = &sc->source;
        struct zcp_source_info info = { 0 };

        info.width = src->width ? src->width : 640;
        info.height = src->height ? src->height : 480;
        switch (src->type) {
        case ZCP_SOURCE_SYNTHETIC:
                info.fmt = ZCP_PIX_NV12;
                break;
        case ZCP_SOURCE_V4L2:
                /* format: auto (or MJPEG, decoded): counted as YUYV, the usual camera format; checked again at open */
                info.fmt = src->format == ZCP_PIX_NONE || src->format == ZCP_PIX_MJPEG ? ZCP_PIX_YUYV : src->format;
                break;
        default:
                if (!src->width || !src->height)
                        return 0;
                info.fmt = ZCP_PIX_NV12;
                break;
        }
        info.stride = zcp_pixfmt_min_stride(info.fmt, info.width);
        return zcp_ring_bytes(sc->ring.slots, zcp_stream_slot_bytes(&info),
                                     zcp_stream_mask_cells(sc, info.width, info.height));
}

int zcp_sup_check_budget(const struct zcp_config *cfg, char *msg, size_t size)
{
        uint64_t need[ZCP_CONFIG_MAX_STREAMS], sum = 0, budget;
        char why[96], list[1024] = "", a[32], b[32];
        size_t n = 0;

        budget = zcp_sup_pinned_budget(cfg, why, sizeof(why));
        for (uint32_t i = 0; i < cfg->stream_count; i++) {
                need[i] = config_ring_bytes(&cfg->streams[i]);
                sum += need[i];
        }
        if (budget == 0 || sum <= budget)
                return 0;
        for (uint32_t i = 0; i < cfg->stream_count && n < sizeof(list); i++) {
                int k;

                if (!need[i])
                        continue;
                k = snprintf(list + n, sizeof(list) - n, "%s%s %s", n ? ", " : "", cfg->streams[i].name,
                             size_text(a, sizeof(a), need[i]));
                n += k > 0 ? (size_t)k : 0;
        }
        snprintf(msg, size,
                 "%s: rings need %s (%s), over pinned_budget %s (%s); fix: use fewer ring.slots or "
                 "smaller frames, or raise pinned_budget (bytes, or e.g. 8G)",
                 cfg->source_path, size_text(a, sizeof(a), sum), list, size_text(b, sizeof(b), budget), why);
        return ZCP_ERR_CONFIG;
}
