/* SPDX-License-Identifier: MIT */
/*
 * One stream (pipeline.h): a source thread and one thread per stage of
 * core/stages.h, joined by the ring's SPSC queues.
 *
 *   source  : ops->next() fills free slots and submits them to the first
 *             stage. Blocks in the source (<= 100 ms at a time) and on the
 *             free queue (file: back-pressure) or not at all (live: no free
 *             slot = drop).
 *   stages  : convert (in place to NV12), infer (backend submit + wait),
 *             publish (one JSON line to the sink), each a const ops table
 *             (core/stage.h) run by the same loop, stage_thread() below.
 *             Live streams drop a frame that already has a newer one queued
 *             behind it (STALE) in the stages that allow it. A fatal stage
 *             error (sticky GPU) stops the stream.
 *   retire  : after the last stage, latency histograms and counters, the
 *             frame log, and the slot back to the free queue.
 *
 * Dropped frames travel on (flagged) so each queue keeps one producer and one
 * consumer; the last stage's thread frees them. The end of the source closes
 * the first stage's queue, each stage closes the next one when its input is
 * drained, and the last stage's thread signals done_fd last.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert/convert.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/stage.h"
#include "infer/backend.h"
#include "model/model.h"
#include "output/framelog.h"
#include "pipeline.h"

/* The stage table: ops, thread names, in the order of core/stages.h. */
static const struct {
        const struct zcp_stage_ops *ops;
        const char *thread;
} stages[ZCP_STAGE_COUNT] = {
#define STAGE_ROW(ID, name, thread) [ZCP_STAGE_##ID] = { &zcp_stage_##name, thread },
        ZCP_STAGE_LIST(STAGE_ROW)
#undef STAGE_ROW
};

struct zcp_stream;

/* One stage thread's state. */
struct stage_run {
        struct zcp_stream *s;
        enum zcp_stage id;
        void *ctx;                 /* the ops' open() */
};

struct zcp_stream {
        struct zcp_stream_config cfg;   /* a copy: the stream outlives the config it came from */
        uint32_t index;
        int done_fd;

        const struct zcp_source_ops *src_ops;
        struct zcp_source_ctx *src;
        struct zcp_source_info info;

        const struct zcp_plan *model;   /* shared (zcp_model_acquire) */
        const struct zcp_backend_ops *be_ops;   /* the ring's memory is for it; the infer stage opens it */
        struct zcp_backend_choice backend;   /* which backend and why (STATUS=, /stats) */

        struct zcp_ring *ring;
        uint64_t ring_budget;           /* bytes the ring may take, 0 = no limit (zcp_stream_params) */
        struct zcp_stream_stats *stats; /* the caller's (zcp_stream_params), else own_stats */
        struct zcp_stream_stats *own_stats;
        struct zcp_framelog *framelog;   /* per-frame log, NULL for none */
        bool drop_stale;           /* live policy: keep the newest frame */

        struct zcp_stage_env env;  /* what the stages see */
        struct stage_run run[ZCP_STAGE_COUNT];

        pthread_t source_thread;
        pthread_t threads[ZCP_STAGE_COUNT];
        bool started;
        bool source_stopped;
        bool source_running;       /* started (here, or by the stream it came from) and not stopped */
        _Atomic bool stop;
        _Atomic int fatal;         /* first fatal error of any thread, 0 if none */
        _Atomic bool finished;
        _Atomic int end;           /* enum zcp_stream_end, set by the source thread */
};

static void set_fatal(struct zcp_stream *s, int err)
{
        int expected = 0;

        atomic_compare_exchange_strong(&s->fatal, &expected, err);
        atomic_store(&s->stop, true);
}

static void *source_thread(void *arg)
{
        struct zcp_stream *s = arg;

        while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
                int r = s->src_ops->next(s->src, s->ring);

                if (r == ZCP_SOURCE_EOS) {
                        atomic_store(&s->stats->source_state, ZCP_SOURCE_ENDED);
                        atomic_store(&s->end, ZCP_STREAM_END_EOS);
                        zcp_info("%s: source ended", s->cfg.name);
                        break;
                }
                if (r == ZCP_SOURCE_RECONFIGURE) {
                        /* Like an end: what is in flight drains in the old geometry; no frame of the new one enters this ring. */
                        atomic_store(&s->end, ZCP_STREAM_END_RECONFIGURE);
                        zcp_info("%s: the source's frame geometry changes: draining the ring for a new one", s->cfg.name);
                        break;
                }
                if (r < 0) {
                        zcp_err("%s: source failed: %s", s->cfg.name, zcp_strerror(r));
                        atomic_store(&s->end, ZCP_STREAM_END_FAILED);
                        set_fatal(s, r);
                        break;
                }
        }
        zcp_spsc_close(&s->ring->q[zcp_stage_queue(0)]);
        return NULL;
}

/* After the last stage: latency and counters of a published frame, the frame log, the slot back to free. */
static void retire(struct zcp_stream *s, uint32_t idx, const struct zcp_frame *f)
{
        struct zcp_ring *ring = s->ring;
        uint64_t end = f->t[zcp_stage_ts_end(ZCP_STAGE_COUNT - 1)];

        if (!(f->flags & ZCP_FRAME_DROPPED)) {
                zcp_hist_record(&s->stats->e2e, end - f->t[ZCP_TS_CAPTURE]);
                if (atomic_load_explicit(&s->stats->first_capture_ns, memory_order_relaxed) == 0)
                        atomic_store(&s->stats->first_capture_ns, f->t[ZCP_TS_CAPTURE]);
                atomic_store(&s->stats->last_publish_ns, end);
                atomic_fetch_add_explicit(&s->stats->published, 1, memory_order_release);
        }
        if (s->framelog)
                zcp_framelog_write(s->framelog, s->cfg.name, f);
        zcp_ring_move(ring, idx, zcp_stage_slot(ZCP_STAGE_COUNT - 1), ZCP_SLOT_FREE);
        zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx);
        atomic_store_explicit(&s->stats->ring_in_flight, ring->count - zcp_spsc_count(&ring->q[ZCP_Q_FREE]),
                              memory_order_relaxed);
}

/* The one loop every stage runs (core/stage.h says what it does). */
static void *stage_thread(void *arg)
{
        struct stage_run *run = arg;
        struct zcp_stream *s = run->s;
        const struct zcp_stage_ops *ops = stages[run->id].ops;
        struct zcp_ring *ring = s->ring;
        struct zcp_spsc *in = &ring->q[zcp_stage_queue(run->id)];
        bool last = run->id == ZCP_STAGE_COUNT - 1, broken = false;
        uint32_t t_start = zcp_stage_ts_start(run->id), t_end = zcp_stage_ts_end(run->id);
        uint32_t idx;

        while (zcp_spsc_pop(in, -1, &idx) == 0) {
                struct zcp_slot *slot = zcp_ring_slot(ring, idx);
                struct zcp_frame *f = &slot->frame;

                if (run->id == 0)
                        f->stream = s->index;
                f->t[t_start] = zcp_now_ns();
                if (!(f->flags & ZCP_FRAME_DROPPED)) {
                        if (broken) {
                                zcp_frame_drop(ring, f, ZCP_DROP_SHUTDOWN);
                        } else if (ops->drop_stale && s->drop_stale && zcp_spsc_count(in) > 0) {
                                zcp_frame_drop(ring, f, ZCP_DROP_STALE);
                        } else {
                                int r = ops->process(run->ctx, &s->env, slot);

                                if (r < 0) {
                                        set_fatal(s, r);
                                        broken = true;
                                }
                        }
                }
                f->t[t_end] = zcp_now_ns();
                if (!(f->flags & ZCP_FRAME_DROPPED)) {
                        zcp_hist_record(&s->stats->wait[run->id], f->t[t_start] - f->t[t_start - 1]);
                        zcp_hist_record(&s->stats->busy[run->id], f->t[t_end] - f->t[t_start]);
                }
                if (last) {
                        retire(s, idx, f);
                        continue;
                }
                zcp_ring_move(ring, idx, zcp_stage_slot(run->id), zcp_stage_slot(run->id + 1));
                f->t[zcp_stage_ts_enter(run->id + 1)] = zcp_now_ns();
                zcp_spsc_push(&ring->q[zcp_stage_queue(run->id + 1)], idx);
        }
        if (!last) {
                zcp_spsc_close(&ring->q[zcp_stage_queue(run->id + 1)]);
                return NULL;
        }
        atomic_store(&s->finished, true);
        if (s->done_fd >= 0) {
                uint64_t one = 1;
                if (write(s->done_fd, &one, sizeof(one)) < 0)
                        zcp_warn("%s: cannot signal the main loop: %s", s->cfg.name, strerror(errno));
        }
        return NULL;
}

static int open_model(struct zcp_stream *s)
{
        char err[512];
        int r;

        if (!s->cfg.model.enabled)
                return 0;
        r = zcp_model_acquire(&s->cfg.model, &s->model, err, sizeof(err));
        if (r < 0) {
                zcp_err("%s: %s", s->cfg.name, err);
                return ZCP_ERR_CONFIG;   /* a model that cannot be loaded is part of the configuration */
        }
        if (zcp_model_unused_keys(&s->cfg.model, s->model, err, sizeof(err)))
                zcp_warn("%s: %s", s->cfg.name, err);
        return 0;
}

/* Geometry and format the ring and convert can take. */
static int check_info(const struct zcp_stream *s)
{
        const struct zcp_source_info *in = &s->info;

        if (in->width == 0 || in->height == 0 || in->width % 2 || in->height % 2) {
                zcp_err("%s: frames of %ux%u are not supported (width and height must be even and non-zero)",
                        s->cfg.name, in->width, in->height);
                return ZCP_ERR_INPUT;
        }
        if (!zcp_convert_supported(in->fmt)) {
                zcp_err("%s: the source delivers %s, which zcpipe cannot convert", s->cfg.name,
                        zcp_pixfmt_name(in->fmt));
                return ZCP_ERR_INPUT;
        }
        return 0;
}

static int open_source(struct zcp_stream *s)
{
        int r;

        s->src_ops = zcp_source_find(s->cfg.source.type);
        if (!s->src_ops) {
                zcp_err("%s: source type '%s' is not built into this zcpipe (see meson summary)", s->cfg.name,
                        zcp_source_type_names[s->cfg.source.type]);
                return ZCP_ERR_CONFIG;
        }
        r = s->src_ops->open(&s->cfg, s->stats, &s->src, &s->info);
        if (r < 0) {
                s->src = NULL;
                return r == ZCP_ERR_CONFIG ? r : ZCP_ERR_INPUT;
        }
        r = check_info(s);
        if (r < 0)
                return r;
        /* A geometry change ends this ring (ZCP_SOURCE_RECONFIGURE) and zcp_stream_new_from() makes the next. */
        if (s->src_ops->reconfigure) {
                r = s->src_ops->reconfigure(s->src, NULL);
                if (r < 0) {
                        zcp_err("%s: the source cannot report geometry changes: %s", s->cfg.name, zcp_strerror(r));
                        return ZCP_ERR_INPUT;
                }
        }
        return 0;
}

/* The ring from the chosen backend's allocator; left for zcp_stream_free() on failure. */
static int open_ring(struct zcp_stream *s, size_t slot_bytes, struct zcp_allocator *alloc)
{
        const struct zcp_stream_config *cfg = &s->cfg;
        uint32_t mask_cells;
        int r;

        r = s->be_ops->allocator(cfg->gpu.device, alloc);
        if (r < 0)
                return r;
        /* A moving mask per slot for the motion grid of this geometry (frame.h). */
        mask_cells = zcp_stream_mask_cells(cfg, s->info.width, s->info.height);
        r = zcp_ring_new(cfg->ring.slots, slot_bytes, mask_cells, alloc, s->stats, &s->ring);
        if (r < 0)
                zcp_err("%s: cannot allocate the ring: %u slots of %zu bytes for %ux%u %s", cfg->name, cfg->ring.slots,
                        slot_bytes, s->info.width, s->info.height, zcp_pixfmt_name(s->info.fmt));
        return r;
}

/* Closes every stage opened so far (each closes what it opened: the backend, the sink...). */
static void close_stages(struct zcp_stream *s)
{
        for (int i = 0; i < ZCP_STAGE_COUNT; i++) {
                if (stages[i].ops->close)
                        stages[i].ops->close(s->run[i].ctx);
                s->run[i].ctx = NULL;
        }
}

/*
 * Opens the stages in order on the ring; *ret_failed is the one that
 * failed. Those opened before stay open for close_stages().
 */
static int open_stages(struct zcp_stream *s, enum zcp_stage *ret_failed)
{
        const struct zcp_stream_config *cfg = &s->cfg;

        s->env = (struct zcp_stage_env){
                .stream = cfg->name,
                .index = s->index,
                .cfg = cfg,
                .width = s->info.width,
                .height = s->info.height,
                .fmt = s->info.fmt,
                .stride = s->info.stride,
                .ring = s->ring,
                .stats = s->stats,
                .model = s->model,
                .backend = s->be_ops,
        };
        for (int i = 0; i < ZCP_STAGE_COUNT; i++) {
                const struct zcp_stage_ops *ops = stages[i].ops;
                int r;

                s->run[i] = (struct stage_run){ .s = s, .id = (enum zcp_stage)i };
                if (!ops->open)
                        continue;
                r = ops->open(&s->env, &s->run[i].ctx);
                if (r < 0) {
                        s->run[i].ctx = NULL;
                        zcp_err("%s: cannot open the %s stage: %s", cfg->name, ops->name, zcp_strerror(r));
                        *ret_failed = (enum zcp_stage)i;
                        return r;
                }
        }
        return 0;
}

/* What the stages show of what they opened (core/stage.h). */
static struct zcp_stage_facts stage_facts(const struct zcp_stream *s)
{
        struct zcp_stage_facts facts = { .transfer = "", .sink = "" };

        for (int i = 0; i < ZCP_STAGE_COUNT; i++)
                if (stages[i].ops->facts && s->run[i].ctx)
                        stages[i].ops->facts(s->run[i].ctx, &facts);
        return facts;
}

/*
 * `backend: auto` on a GPU that ran out of memory while the stream was being
 * opened: the stream runs on the CPU backend instead, with a warning naming
 * the cause and the fix. False (nothing changed) for any other case.
 */
static bool cpu_fallback(struct zcp_stream *s, const char *what)
{
        if (s->cfg.gpu.backend != ZCP_BACKEND_AUTO || s->be_ops == &zcp_backend_cpu)
                return false;
        s->backend = (struct zcp_backend_choice){ .ops = &zcp_backend_cpu, .degraded = true };
        snprintf(s->backend.why, sizeof(s->backend.why),
                 "GPU %u cannot be used: out of memory %s; fix: stop what holds the GPU (nvidia-smi lists it), "
                 "use fewer or smaller ring slots, or choose another gpu.device",
                 s->cfg.gpu.device, what);
        zcp_warn("%s: backend: auto -> cpu, %s", s->cfg.name, s->backend.why);
        s->be_ops = &zcp_backend_cpu;
        return true;
}

static struct zcp_stream *stream_alloc(const struct zcp_stream_config *cfg, const struct zcp_stream_params *p)
{
        struct zcp_stream *s = calloc(1, sizeof(*s));

        if (!s)
                return NULL;
        s->cfg = *cfg;
        if (s->cfg.gpu.device == ZCP_GPU_DEVICE_AUTO)
                s->cfg.gpu.device = p->gpu_device;
        s->index = p->index;
        s->done_fd = p->done_fd;
        s->ring_budget = p->ring_budget;
        s->stats = p->stats;
        if (!s->stats) {
                s->own_stats = malloc(sizeof(*s->own_stats));
                if (!s->own_stats) {
                        free(s);
                        return NULL;
                }
                zcp_stream_stats_init(s->own_stats);
                s->stats = s->own_stats;
        }
        atomic_init(&s->end, ZCP_STREAM_END_NONE);
        return s;
}

size_t zcp_stream_slot_bytes(const struct zcp_source_info *info)
{
        size_t slot_bytes = zcp_pixfmt_slot_size(info->fmt, info->width, info->height, info->stride);

        return slot_bytes < info->frame_bytes ? info->frame_bytes : slot_bytes;
}

uint32_t zcp_stream_mask_cells(const struct zcp_stream_config *cfg, uint32_t width, uint32_t height)
{
        return cfg->motion.enabled ? zcp_grid_w(width, cfg->motion.cell) * zcp_grid_h(height, cfg->motion.cell) : 0;
}


/* Everything after the source: model, the backend's choice, ring, stages (each opens what it uses). */
static int open_rest(struct zcp_stream *s)
{
        const struct zcp_stream_config *cfg = &s->cfg;
        enum zcp_stage failed = ZCP_STAGE_COUNT;
        struct zcp_stage_facts facts;
        struct zcp_allocator alloc;
        size_t slot_bytes;
        uint64_t need;
        int r;

        if (!s->model) {
                r = open_model(s);
                if (r < 0)
                        return r;
        }
        r = zcp_backend_choose(cfg->gpu.backend, cfg->gpu.device, &s->backend);
        if (r < 0)
                return r;
        s->be_ops = s->backend.ops;
        atomic_store(&s->stats->capture_path, s->info.path);

        switch (cfg->ring.drop) {
        case ZCP_DROP_POLICY_NEWEST:
                s->drop_stale = true;
                break;
        case ZCP_DROP_POLICY_BLOCK:
                s->drop_stale = false;
                break;
        default:
                s->drop_stale = s->info.live;
                break;
        }

        slot_bytes = zcp_stream_slot_bytes(&s->info);
        need = zcp_ring_bytes(cfg->ring.slots, slot_bytes,
                                     zcp_stream_mask_cells(cfg, s->info.width, s->info.height)) +
               s->info.pinned_bytes;
        if (s->ring_budget && need > s->ring_budget) {
                char extra[96] = "";

                if (s->info.pinned_bytes)
                        snprintf(extra, sizeof(extra), ", and %.1f MiB of camera buffers registered to be read in place",
                                 (double)s->info.pinned_bytes / (1 << 20));
                zcp_err("%s: the ring for %ux%u %s needs %.1f MiB (%u slots of %zu bytes%s), over what pinned_budget "
                        "leaves for this stream (%.1f MiB); fix: raise pinned_budget, use fewer ring.slots, or a smaller "
                        "frame size",
                        cfg->name, s->info.width, s->info.height, zcp_pixfmt_name(s->info.fmt),
                        (double)need / (1 << 20), cfg->ring.slots, slot_bytes, extra, (double)s->ring_budget / (1 << 20));
                return ZCP_ERR_CONFIG;
        }
        r = open_ring(s, slot_bytes, &alloc);
        if (r == 0)
                r = open_stages(s, &failed);
        if (r == -ENOMEM && (!s->ring || failed == ZCP_STAGE_INFER) &&
            cpu_fallback(s, "allocating its ring and GPU buffers")) {
                close_stages(s);
                zcp_ring_free(s->ring);
                s->ring = NULL;
                r = open_ring(s, slot_bytes, &alloc);
                if (r == 0)
                        r = open_stages(s, &failed);
        }
        if (r < 0)
                return r;

        facts = stage_facts(s);
        zcp_info("%s: %s source %ux%u %s (%s), ring %u x %zu bytes (%s), backend %s (%s), "
                 "drop policy %s, output %s",
                 cfg->name, s->src_ops->name, s->info.width, s->info.height, zcp_pixfmt_name(s->info.fmt),
                 zcp_capture_path_names[s->info.path], s->ring->count,
                 s->ring->slot_size, alloc.name,
                 s->be_ops->name, facts.transfer, s->drop_stale ? "newest" : "block", facts.sink);
        return 0;
}

int zcp_stream_open(const struct zcp_stream_config *cfg, const struct zcp_stream_params *p,
                    struct zcp_stream **ret_stream)
{
        struct zcp_stream *s = stream_alloc(cfg, p);
        int r;

        if (!s)
                return -ENOMEM;
        r = open_model(s);
        if (r < 0)
                goto fail;
        r = open_source(s);
        if (r < 0)
                goto fail;
        r = open_rest(s);
        if (r < 0)
                goto fail;
        *ret_stream = s;
        return 0;

fail:
        zcp_stream_free(s);
        return r;
}

int zcp_stream_new(const struct zcp_stream_config *cfg, uint32_t index, int done_fd, struct zcp_stream **ret_stream)
{
        const struct zcp_stream_params p = { .index = index, .done_fd = done_fd };

        return zcp_stream_open(cfg, &p, ret_stream);
}

int zcp_stream_new_from(struct zcp_stream *old, const struct zcp_stream_params *p, struct zcp_stream **ret_stream)
{
        struct zcp_stream *s;
        int r;

        if (atomic_load(&old->end) != ZCP_STREAM_END_RECONFIGURE || !old->src || old->started)
                return -EINVAL;
        s = stream_alloc(&old->cfg, p);
        if (!s)
                return -ENOMEM;
        /* The opened source moves over; the old stream no longer stops or closes it. */
        s->src_ops = old->src_ops;
        s->src = old->src;
        s->info = old->info;
        s->source_running = true;
        old->src = NULL;
        s->model = old->model;
        old->model = NULL;
        r = s->src_ops->reconfigure(s->src, &s->info);
        if (r < 0) {
                zcp_err("%s: the source's new geometry cannot be used: %s", s->cfg.name, zcp_strerror(r));
                r = ZCP_ERR_INPUT;
                goto fail;
        }
        r = check_info(s);
        if (r < 0)
                goto fail;
        r = open_rest(s);
        if (r < 0)
                goto fail;
        *ret_stream = s;
        return 0;

fail:
        /* The source still holds what it holds of the old ring (still allocated): it stops there. */
        if (s->src) {
                s->src_ops->stop(s->src, old->ring);
                s->source_stopped = true;
        }
        zcp_stream_free(s);
        return r;
}

/* Linux thread names hold 15 characters: the prefix and the start of the stream name. */
static void name_thread(pthread_t t, const char *prefix, const char *stream)
{
        char name[16];

        snprintf(name, sizeof(name), "%s%.*s", prefix, (int)(sizeof(name) - 1 - strlen(prefix)), stream);
        pthread_setname_np(t, name);
}

int zcp_stream_start(struct zcp_stream *s)
{
        int r;

        r = s->src_ops->start(s->src, s->ring);
        if (r < 0) {
                zcp_err("%s: cannot start the source: %s", s->cfg.name, zcp_strerror(r));
                return r;
        }
        s->source_running = true;
        /* Consumers first, the last stage first, so the source never runs without them. */
        for (int i = ZCP_STAGE_COUNT; i >= 0; i--) {
                pthread_t *t = i == 0 ? &s->source_thread : &s->threads[i - 1];

                r = -pthread_create(t, NULL, i == 0 ? source_thread : stage_thread, i == 0 ? (void *)s : &s->run[i - 1]);
                if (r < 0) {
                        zcp_err("%s: cannot start a thread: %s", s->cfg.name, zcp_strerror(r));
                        /* Unwind: close everything so the started threads drain out. */
                        zcp_ring_close(s->ring);
                        for (int j = ZCP_STAGE_COUNT; j > i; j--)
                                pthread_join(s->threads[j - 1], NULL);
                        return r;
                }
                name_thread(*t, i == 0 ? "zcp-src-" : stages[i - 1].thread, s->cfg.name);
        }
        s->started = true;
        return 0;
}

void zcp_stream_stop(struct zcp_stream *s)
{
        atomic_store(&s->stop, true);
}

int zcp_stream_join(struct zcp_stream *s)
{
        if (s->started) {
                pthread_join(s->source_thread, NULL);
                for (int i = 0; i < ZCP_STAGE_COUNT; i++)
                        pthread_join(s->threads[i], NULL);
                s->started = false;
        }
        if (!s->source_stopped && s->src && atomic_load(&s->end) != ZCP_STREAM_END_RECONFIGURE) {
                /* No stage runs now: the source may hand back the slots it holds. */
                s->src_ops->stop(s->src, s->ring);
                s->source_stopped = true;
        }
        if (!s->started) {
                /* No stage runs any more: what they still hold goes out (the sink drains, its counts are final). */
                for (int i = 0; i < ZCP_STAGE_COUNT; i++)
                        if (stages[i].ops->drain && s->run[i].ctx)
                                stages[i].ops->drain(s->run[i].ctx);
        }
        return atomic_load(&s->fatal);
}

bool zcp_stream_finished(const struct zcp_stream *s)
{
        return atomic_load(&s->finished);
}

void zcp_stream_free(struct zcp_stream *s)
{
        if (!s)
                return;
        if (s->started) {
                zcp_stream_stop(s);
                zcp_stream_join(s);
        }
        if (s->src && s->source_running && !s->source_stopped && s->ring)
                s->src_ops->stop(s->src, s->ring);   /* a source kept for a new ring that nobody took */
        close_stages(s);                             /* the backend, the sink and the snapshot with them */
        if (s->src)
                s->src_ops->close(s->src);
        zcp_ring_free(s->ring);
        zcp_model_release(s->model);
        free(s->own_stats);
        free(s);
}

enum zcp_stream_end zcp_stream_end_reason(const struct zcp_stream *s)
{
        return (enum zcp_stream_end)atomic_load(&s->end);
}

void zcp_stream_view(const struct zcp_stream *s, struct zcp_stream_view *ret_view)
{
        struct zcp_stage_facts facts = stage_facts(s);

        *ret_view = (struct zcp_stream_view){
                .name = s->cfg.name,
                .index = s->index,
                .stats = s->stats,
                .source = &s->info,
                .source_type = s->src_ops->name,
                .backend = s->be_ops->name,
                .gpu_device = s->be_ops == &zcp_backend_cpu ? -1 : (int)s->cfg.gpu.device,
                .backend_reason = s->backend.why,
                .backend_degraded = s->backend.degraded,
                .transfer = facts.transfer,
                .transfer_switches = facts.transfer_switches,
                .ring_slots = s->ring->count,
                .sink = facts.sink,
                .snapshot = facts.snapshot,
                .last_error = "",
                .labels = s->model ? s->model->labels : NULL,
                .classes = s->model ? s->model->head.classes : 0,
        };
}

void zcp_stream_set_framelog(struct zcp_stream *s, struct zcp_framelog *fl)
{
        s->framelog = fl;
}

const struct zcp_stream_config *zcp_stream_config(const struct zcp_stream *s)
{
        return &s->cfg;
}
