/* SPDX-License-Identifier: MIT */
/*
 * One stream (pipeline.h): four threads joined by the ring's SPSC queues.
 *
 *   source  : ops->next() fills free slots and submits them. Blocks in the
 *             source (<= 100 ms at a time) and on the free queue (file:
 *             back-pressure) or not at all (live: no free slot = drop).
 *   convert : in place to NV12 (scratch per thread). Live streams drop a
 *             frame that already has a newer one queued behind it (STALE).
 *   infer   : backend submit + wait; results land in the slot's result block.
 *             Same STALE rule. A sticky GPU error stops the stream.
 *   publish : one JSON line to the sink, latency histograms, slot back to free.
 *
 * Dropped frames travel on (flagged) so each queue keeps one producer and one
 * consumer; publish frees them. The end of the source closes the convert
 * queue, each stage closes the next one when its input is drained, and the
 * publish thread signals done_fd last.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert/convert.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/workers.h"
#include "infer/backend.h"
#include "infer/weights.h"
#include "output/framelog.h"
#include "output/publish.h"
#include "output/sink.h"
#include "output/snapshot.h"
#include "pipeline.h"

#define LINE_MAX_BYTES 8192

enum { TH_SOURCE, TH_CONVERT, TH_INFER, TH_PUBLISH, TH_COUNT };
static const char *const thread_prefix[TH_COUNT] = { "zcp-src-", "zcp-cvt-", "zcp-inf-", "zcp-pub-" };

struct zcp_stream {
        const struct zcp_stream_config *cfg;
        uint32_t index;
        int done_fd;

        const struct zcp_source_ops *src_ops;
        struct zcp_source_ctx *src;
        struct zcp_source_info info;

        struct zcp_model *model;
        const struct zcp_backend_ops *be_ops;
        struct zcp_backend_ctx *be;
        struct zcp_backend_choice backend;   /* which backend and why (STATUS=, /stats) */

        const struct zcp_sink_ops *sink_ops;
        struct zcp_sink_ctx *sink;

        struct zcp_ring *ring;
        struct zcp_stream_stats stats;
        struct zcp_framelog *framelog;   /* per-frame log, NULL for none */
        struct zcp_snapshot *snapshot;   /* latest frame for the live page (NULL without) */
        bool drop_stale;           /* live policy: keep the newest frame */

        uint8_t *scratch;          /* convert thread */
        size_t scratch_size;
        struct zcp_workers *cvt_team; /* convert thread's band helpers; NULL: it converts alone */
        char *line;                /* publish thread */

        pthread_t threads[TH_COUNT];
        bool started;
        bool source_stopped;
        _Atomic bool stop;
        _Atomic int fatal;         /* first fatal error of any thread, 0 if none */
        _Atomic bool finished;
};

static void set_fatal(struct zcp_stream *s, int err)
{
        int expected = 0;

        atomic_compare_exchange_strong(&s->fatal, &expected, err);
        atomic_store(&s->stop, true);
}

static void stage_times(struct zcp_stream *s, enum zcp_stage stage, const struct zcp_frame *f, enum zcp_ts enter)
{
        zcp_hist_record(&s->stats.wait[stage], f->t[enter + 1] - f->t[enter]);
        zcp_hist_record(&s->stats.busy[stage], f->t[enter + 2] - f->t[enter + 1]);
}

static void *source_thread(void *arg)
{
        struct zcp_stream *s = arg;

        while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
                int r = s->src_ops->next(s->src, s->ring);

                if (r == ZCP_SOURCE_EOS) {
                        atomic_store(&s->stats.source_state, ZCP_SOURCE_ENDED);
                        zcp_info("%s: source ended", s->cfg->name);
                        break;
                }
                if (r < 0) {
                        zcp_err("%s: source failed: %s", s->cfg->name,
                                r == ZCP_ERR_CONFIG ? "the device cannot do what the configuration asks" : strerror(-r));
                        set_fatal(s, r);
                        break;
                }
        }
        zcp_spsc_close(&s->ring->q[ZCP_Q_CONVERT]);
        return NULL;
}

static void *convert_thread(void *arg)
{
        struct zcp_stream *s = arg;
        struct zcp_ring *ring = s->ring;
        uint32_t idx;

        while (zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], -1, &idx) == 0) {
                struct zcp_slot *slot = zcp_ring_slot(ring, idx);
                struct zcp_frame *f = &slot->frame;

                f->stream = s->index;
                f->t[ZCP_TS_CONVERT_START] = zcp_now_ns();
                if (!(f->flags & ZCP_FRAME_DROPPED)) {
                        if (s->drop_stale && zcp_spsc_count(&ring->q[ZCP_Q_CONVERT]) > 0) {
                                zcp_frame_drop(ring, f, ZCP_DROP_STALE);
                        } else if (f->width != s->info.width || f->height != s->info.height || f->bytes > slot->cap) {
                                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC,
                                                    "%s: frame %ux%u (%llu bytes) does not fit the ring (%ux%u, %zu bytes per slot)",
                                                    s->cfg->name, f->width, f->height, (unsigned long long)f->bytes,
                                                    s->info.width, s->info.height, slot->cap);
                                zcp_frame_drop(ring, f, ZCP_DROP_OVERSIZE);
                        } else if (f->fmt != ZCP_PIX_NV12 || f->stride != f->width) {
                                int r = zcp_convert_to_nv12_mt(s->cvt_team, f->fmt, slot->data, slot->cap, f->width,
                                                               f->height, f->stride, s->scratch, s->scratch_size);
                                if (r < 0) {
                                        ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC,
                                                            "%s: cannot convert %s %ux%u stride %u: %s",
                                                            s->cfg->name, zcp_pixfmt_name(f->fmt), f->width,
                                                            f->height, f->stride, strerror(-r));
                                        zcp_frame_drop(ring, f, ZCP_DROP_CONVERT);
                                } else {
                                        f->fmt = ZCP_PIX_NV12;
                                        f->stride = f->width;
                                        f->bytes = zcp_nv12_size(f->width, f->height);
                                }
                        }
                }
                f->t[ZCP_TS_CONVERT_END] = zcp_now_ns();
                if (!(f->flags & ZCP_FRAME_DROPPED))
                        stage_times(s, ZCP_STAGE_CONVERT, f, ZCP_TS_CONVERT_ENTER);
                zcp_ring_move(ring, idx, ZCP_SLOT_CONVERT, ZCP_SLOT_INFER);
                f->t[ZCP_TS_INFER_ENTER] = zcp_now_ns();
                zcp_spsc_push(&ring->q[ZCP_Q_INFER], idx);
        }
        zcp_spsc_close(&ring->q[ZCP_Q_INFER]);
        return NULL;
}

/* Every number publish will print is finite. */
static bool result_finite(const struct zcp_result *res)
{
        if (!isfinite(res->moving_fraction))
                return false;
        for (uint32_t i = 0; i < res->topk_count && i < ZCP_TOPK_MAX; i++)
                if (!isfinite(res->topk_prob[i]))
                        return false;
        return true;
}

static void *infer_thread(void *arg)
{
        struct zcp_stream *s = arg;
        struct zcp_ring *ring = s->ring;
        bool broken = false;
        uint32_t idx;

        while (zcp_spsc_pop(&ring->q[ZCP_Q_INFER], -1, &idx) == 0) {
                struct zcp_slot *slot = zcp_ring_slot(ring, idx);
                struct zcp_frame *f = &slot->frame;

                f->t[ZCP_TS_INFER_START] = zcp_now_ns();
                if (!(f->flags & ZCP_FRAME_DROPPED)) {
                        if (broken) {
                                zcp_frame_drop(ring, f, ZCP_DROP_SHUTDOWN);
                        } else if (s->drop_stale && zcp_spsc_count(&ring->q[ZCP_Q_INFER]) > 0) {
                                zcp_frame_drop(ring, f, ZCP_DROP_STALE);
                        } else {
                                int r;

                                slot->result->valid = 0;
                                r = s->be_ops->submit(s->be, slot);
                                if (r == 0)
                                        r = s->be_ops->wait(s->be, slot);
                                if (r == ZCP_ERR_GPU_STICKY) {
                                        zcp_err("%s: fatal GPU error at frame %llu: stopping (the process exits %d)",
                                                s->cfg->name, (unsigned long long)f->seq, 86);
                                        set_fatal(s, r);
                                        broken = true;
                                        zcp_frame_drop(ring, f, ZCP_DROP_INFER);
                                } else if (r < 0 || !slot->result->valid) {
                                        ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC,
                                                            "%s: inference failed on frame %llu: %s", s->cfg->name,
                                                            (unsigned long long)f->seq,
                                                            r < 0 ? strerror(-r) : "no result written");
                                        zcp_frame_drop(ring, f, ZCP_DROP_INFER);
                                } else if (!result_finite(slot->result)) {
                                        /* NaN/inf is not JSON and not a result: weights that overflow float. */
                                        ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC,
                                                            "%s: inference gave non-finite scores on frame %llu "
                                                            "(weights too large for float?): frame dropped",
                                                            s->cfg->name, (unsigned long long)f->seq);
                                        zcp_frame_drop(ring, f, ZCP_DROP_INFER);
                                }
                        }
                }
                f->t[ZCP_TS_INFER_END] = zcp_now_ns();
                if (!(f->flags & ZCP_FRAME_DROPPED))
                        stage_times(s, ZCP_STAGE_INFER, f, ZCP_TS_INFER_ENTER);
                zcp_ring_move(ring, idx, ZCP_SLOT_INFER, ZCP_SLOT_PUBLISH);
                f->t[ZCP_TS_PUBLISH_ENTER] = zcp_now_ns();
                zcp_spsc_push(&ring->q[ZCP_Q_PUBLISH], idx);
        }
        zcp_spsc_close(&ring->q[ZCP_Q_PUBLISH]);
        return NULL;
}

static void *publish_thread(void *arg)
{
        struct zcp_stream *s = arg;
        struct zcp_ring *ring = s->ring;
        char *const *labels = s->model ? s->model->labels : NULL;
        uint32_t idx;

        while (zcp_spsc_pop(&ring->q[ZCP_Q_PUBLISH], -1, &idx) == 0) {
                struct zcp_slot *slot = zcp_ring_slot(ring, idx);
                struct zcp_frame *f = &slot->frame;

                f->t[ZCP_TS_PUBLISH_START] = zcp_now_ns();
                if (!(f->flags & ZCP_FRAME_DROPPED)) {
                        int n = zcp_publish_format(s->line, LINE_MAX_BYTES, s->cfg->name, f, slot->result, labels);

                        if (n < 0) {
                                zcp_sink_stats_lose(&s->stats.sink, ZCP_SINK_LOSS_TOO_LONG);
                                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC,
                                                    "%s: a result line is longer than %d bytes (long labels?): not written",
                                                    s->cfg->name, LINE_MAX_BYTES);
                        } else if (s->sink_ops->write(s->sink, s->line, (size_t)n) < 0)
                                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC,
                                                    "%s: cannot write results to %s output", s->cfg->name,
                                                    s->sink_ops->name);
                        f->t[ZCP_TS_PUBLISH_END] = zcp_now_ns();
                        stage_times(s, ZCP_STAGE_PUBLISH, f, ZCP_TS_PUBLISH_ENTER);
                        zcp_hist_record(&s->stats.e2e, f->t[ZCP_TS_PUBLISH_END] - f->t[ZCP_TS_CAPTURE]);
                        if (atomic_load_explicit(&s->stats.first_capture_ns, memory_order_relaxed) == 0)
                                atomic_store(&s->stats.first_capture_ns, f->t[ZCP_TS_CAPTURE]);
                        atomic_store(&s->stats.last_publish_ns, f->t[ZCP_TS_PUBLISH_END]);
                        atomic_fetch_add_explicit(&s->stats.published, 1, memory_order_release);
                        zcp_snapshot_offer(s->snapshot, slot, labels);
                } else {
                        f->t[ZCP_TS_PUBLISH_END] = zcp_now_ns();
                }
                if (s->framelog)
                        zcp_framelog_write(s->framelog, s->cfg->name, f);
                zcp_ring_move(ring, idx, ZCP_SLOT_PUBLISH, ZCP_SLOT_FREE);
                zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx);
                atomic_store_explicit(&s->stats.ring_in_flight, ring->count - zcp_spsc_count(&ring->q[ZCP_Q_FREE]),
                                      memory_order_relaxed);
        }
        atomic_store(&s->finished, true);
        if (s->done_fd >= 0) {
                uint64_t one = 1;
                if (write(s->done_fd, &one, sizeof(one)) < 0)
                        zcp_warn("%s: cannot signal the main loop: %s", s->cfg->name, strerror(errno));
        }
        return NULL;
}

static int open_model(struct zcp_stream *s)
{
        char err[512];
        int r;

        if (!s->cfg->model.enabled)
                return 0;
        r = zcp_model_load(s->cfg->model.weights, &s->model, err, sizeof(err));
        if (r < 0) {
                zcp_err("%s", err);
                return ZCP_ERR_CONFIG;
        }
        if (s->cfg->model.labels[0]) {
                r = zcp_model_load_labels(s->model, s->cfg->model.labels, err, sizeof(err));
                if (r < 0) {
                        zcp_err("%s", err);
                        return ZCP_ERR_CONFIG;
                }
        }
        return 0;
}

static int open_source(struct zcp_stream *s)
{
        const struct zcp_source_info *in = &s->info;
        int r;

        s->src_ops = zcp_source_find(s->cfg->source.type);
        if (!s->src_ops) {
                zcp_err("%s: source type '%s' is not built into this zcpipe (see meson summary)", s->cfg->name,
                        zcp_source_type_names[s->cfg->source.type]);
                return ZCP_ERR_CONFIG;
        }
        r = s->src_ops->open(s->cfg, &s->stats, &s->src, &s->info);
        if (r < 0) {
                s->src = NULL;
                return r == ZCP_ERR_CONFIG ? r : ZCP_ERR_INPUT;
        }
        if (in->width == 0 || in->height == 0 || in->width % 2 || in->height % 2) {
                zcp_err("%s: frames of %ux%u are not supported (width and height must be even and non-zero)",
                        s->cfg->name, in->width, in->height);
                return ZCP_ERR_INPUT;
        }
        if (!zcp_convert_supported(in->fmt)) {
                zcp_err("%s: the source delivers %s, which zcpipe cannot convert", s->cfg->name,
                        zcp_pixfmt_name(in->fmt));
                return ZCP_ERR_INPUT;
        }
        return 0;
}

/*
 * The ring from the backend's allocator, then the backend on it. Both are
 * left for zcp_stream_free() on failure; *alloc is the allocator used.
 */
static int open_ring_backend(struct zcp_stream *s, size_t slot_bytes, struct zcp_allocator *alloc)
{
        const struct zcp_stream_config *cfg = s->cfg;
        struct zcp_backend_params bp;
        int r;

        r = s->be_ops->allocator(cfg->gpu.device, alloc);
        if (r < 0)
                return r;
        r = zcp_ring_new(cfg->ring.slots, slot_bytes, alloc, &s->stats, &s->ring);
        if (r < 0) {
                zcp_err("%s: cannot allocate the ring: %u slots of %zu bytes for %ux%u %s", cfg->name, cfg->ring.slots,
                        slot_bytes, s->info.width, s->info.height, zcp_pixfmt_name(s->info.fmt));
                return r;
        }
        bp = (struct zcp_backend_params){
                .cfg = cfg,
                .model = s->model,
                .width = s->info.width,
                .height = s->info.height,
                .stream_name = cfg->name,
        };
        r = s->be_ops->open(&bp, s->ring, &s->be);
        if (r < 0)
                s->be = NULL;
        return r;
}

/*
 * `backend: auto` on a GPU that ran out of memory while the stream was being
 * opened: the stream runs on the CPU backend instead, with a warning naming
 * the cause and the fix. False (nothing changed) for any other case.
 */
static bool cpu_fallback(struct zcp_stream *s, const char *what)
{
        if (s->cfg->gpu.backend != ZCP_BACKEND_AUTO || s->be_ops == &zcp_backend_cpu)
                return false;
        s->backend = (struct zcp_backend_choice){ .ops = &zcp_backend_cpu, .degraded = true };
        snprintf(s->backend.why, sizeof(s->backend.why),
                 "GPU %u cannot be used: out of memory %s; fix: stop what holds the GPU (nvidia-smi lists it), "
                 "use fewer or smaller ring slots, or choose another gpu.device",
                 s->cfg->gpu.device, what);
        zcp_warn("%s: backend: auto -> cpu, %s", s->cfg->name, s->backend.why);
        s->be_ops = &zcp_backend_cpu;
        return true;
}

int zcp_stream_new(const struct zcp_stream_config *cfg, uint32_t index, int done_fd, struct zcp_stream **ret_stream)
{
        struct zcp_allocator alloc;
        struct zcp_stream *s;
        size_t slot_bytes;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->cfg = cfg;
        s->index = index;
        s->done_fd = done_fd;
        zcp_stream_stats_init(&s->stats);

        r = open_model(s);
        if (r < 0)
                goto fail;
        r = zcp_backend_choose(cfg->gpu.backend, cfg->gpu.device, &s->backend);
        if (r < 0)
                goto fail;
        s->be_ops = s->backend.ops;
        r = open_source(s);
        if (r < 0)
                goto fail;
        atomic_store(&s->stats.capture_path, s->info.path);

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

        slot_bytes = zcp_pixfmt_slot_size(s->info.fmt, s->info.width, s->info.height, s->info.stride);
        if (slot_bytes < s->info.frame_bytes)
                slot_bytes = s->info.frame_bytes;
        r = open_ring_backend(s, slot_bytes, &alloc);
        if (r == -ENOMEM && cpu_fallback(s, "allocating its ring and GPU buffers")) {
                zcp_ring_free(s->ring);
                s->ring = NULL;
                r = open_ring_backend(s, slot_bytes, &alloc);
        }
        if (r < 0)
                goto fail;

        s->sink_ops = zcp_sink_find(cfg->output.type);
        r = s->sink_ops->open(&cfg->output, &s->stats.sink, &s->sink);
        if (r < 0) {
                s->sink = NULL;
                r = ZCP_ERR_CONFIG;
                goto fail;
        }

        uint32_t cvt_threads = cfg->convert.threads ? cfg->convert.threads
                                                    : zcp_convert_auto_threads(s->info.width, s->info.height,
                                                                               zcp_workers_cpus());
        cvt_threads = zcp_convert_team_size(s->info.fmt, s->info.width, s->info.height, s->info.stride, cvt_threads);
        if (cvt_threads > 1) {
                r = zcp_workers_new(cvt_threads, "zcp-cvw-", &s->cvt_team);
                if (r < 0) {
                        zcp_err("%s: cannot start %u conversion threads: %s", cfg->name, cvt_threads, strerror(-r));
                        goto fail;
                }
        }
        s->scratch_size = zcp_convert_scratch_size_mt(s->info.fmt, s->info.width, s->info.height, s->info.stride,
                                                      cvt_threads);
        s->scratch = malloc(s->scratch_size ? s->scratch_size : 1);
        s->line = malloc(LINE_MAX_BYTES);
        if (!s->scratch || !s->line || zcp_snapshot_new(cfg, &s->snapshot) < 0) {
                r = -ENOMEM;
                goto fail;
        }

        zcp_info("%s: %s source %ux%u %s (%s), convert threads %u, ring %u x %zu bytes (%s), backend %s (%s), "
                 "drop policy %s, output %s",
                 cfg->name, s->src_ops->name, s->info.width, s->info.height, zcp_pixfmt_name(s->info.fmt),
                 zcp_capture_path_names[s->info.path], zcp_workers_count(s->cvt_team), s->ring->count,
                 s->ring->slot_size, alloc.name,
                 s->be_ops->name, s->be_ops->transfer_mode(s->be), s->drop_stale ? "newest" : "block",
                 s->sink_ops->name);
        *ret_stream = s;
        return 0;

fail:
        zcp_stream_free(s);
        return r;
}

int zcp_stream_start(struct zcp_stream *s)
{
        static void *(*const fns[TH_COUNT])(void *) = { source_thread, convert_thread, infer_thread, publish_thread };
        int r;

        r = s->src_ops->start(s->src, s->ring);
        if (r < 0) {
                zcp_err("%s: cannot start the source: %s", s->cfg->name, strerror(-r));
                return r;
        }
        /* Consumers first, so the source never runs without them. */
        for (int i = TH_COUNT - 1; i >= 0; i--) {
                char name[16];

                r = -pthread_create(&s->threads[i], NULL, fns[i], s);
                if (r < 0) {
                        zcp_err("%s: cannot start a thread: %s", s->cfg->name, strerror(-r));
                        /* Unwind: close everything so the started threads drain out. */
                        zcp_ring_close(s->ring);
                        for (int j = TH_COUNT - 1; j > i; j--)
                                pthread_join(s->threads[j], NULL);
                        return r;
                }
                /* Linux thread names hold 15 characters: the prefix and the start of the stream name. */
                snprintf(name, sizeof(name), "%s%.7s", thread_prefix[i], s->cfg->name);
                pthread_setname_np(s->threads[i], name);
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
                for (int i = 0; i < TH_COUNT; i++)
                        pthread_join(s->threads[i], NULL);
                s->started = false;
        }
        if (!s->source_stopped && s->src) {
                /* No stage runs now: the source may hand back the slots it holds. */
                s->src_ops->stop(s->src, s->ring);
                s->source_stopped = true;
        }
        if (!s->started && s->sink) {
                /* Nothing publishes any more: the sink drains (bounded) and its counts are final. */
                s->sink_ops->close(s->sink);
                s->sink = NULL;
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
        if (s->sink)
                s->sink_ops->close(s->sink);
        if (s->be)
                s->be_ops->close(s->be);
        if (s->src)
                s->src_ops->close(s->src);
        zcp_snapshot_unref(s->snapshot);
        zcp_ring_free(s->ring);
        zcp_model_free(s->model);
        zcp_workers_free(s->cvt_team);
        free(s->scratch);
        free(s->line);
        free(s);
}

void zcp_stream_view(const struct zcp_stream *s, struct zcp_stream_view *ret_view)
{
        *ret_view = (struct zcp_stream_view){
                .name = s->cfg->name,
                .index = s->index,
                .stats = &s->stats,
                .source = &s->info,
                .source_type = s->src_ops->name,
                .backend = s->be_ops->name,
                .backend_reason = s->backend.why,
                .backend_degraded = s->backend.degraded,
                .transfer = s->be_ops->transfer_mode(s->be),
                .ring_slots = s->ring->count,
                .sink = s->sink_ops ? s->sink_ops->name : "",
                .snapshot = s->snapshot,
        };
}

void zcp_stream_set_framelog(struct zcp_stream *s, struct zcp_framelog *fl)
{
        s->framelog = fl;
}

const struct zcp_stream_config *zcp_stream_config(const struct zcp_stream *s)
{
        return s->cfg;
}
