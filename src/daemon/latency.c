/* SPDX-License-Identifier: MIT */
/*
 * Per-second latency points of every stream (latency.h): each point is the
 * bucket-wise difference of the stream's cumulative histograms between two
 * samples, reduced to its frame count and p50/p99.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/metrics.h"
#include "daemon/latency.h"
#include "daemon/prom.h"

const char *const zcp_latency_series_names[ZCP_LAT_SERIES_COUNT] = {
        [ZCP_LAT_E2E] = "e2e",
        [ZCP_LAT_CONVERT_WAIT] = "convert_wait",
        [ZCP_LAT_CONVERT_BUSY] = "convert_busy",
        [ZCP_LAT_INFER_WAIT] = "infer_wait",
        [ZCP_LAT_INFER_BUSY] = "infer_busy",
        [ZCP_LAT_PUBLISH_WAIT] = "publish_wait",
        [ZCP_LAT_PUBLISH_BUSY] = "publish_busy",
};

struct point {
        uint64_t t_ns;
        uint32_t frames;
        float p50[ZCP_LAT_SERIES_COUNT], p99[ZCP_LAT_SERIES_COUNT];   /* ms; NAN: no value that second */
};

struct entry {
        char name[ZCP_NAME_MAX];
        bool used;
        const void *id;                  /* the stats the previous copies came from */
        uint64_t seen_ns;                /* last sample that listed the stream */
        uint32_t head, len;              /* ring of points, head = newest */
        struct point points[ZCP_LATENCY_POINTS];
        struct zcp_hist_snapshot prev[ZCP_LAT_SERIES_COUNT];
};

struct zcp_latency {
        pthread_mutex_t lock;
        uint64_t now_ns;                 /* time of the sample in progress */
        struct zcp_hist_snapshot cur;    /* scratch */
        struct entry entries[ZCP_CONFIG_MAX_STREAMS];
};

int zcp_latency_new(struct zcp_latency **ret_latency)
{
        struct zcp_latency *l = calloc(1, sizeof(*l));

        if (!l)
                return -ENOMEM;
        pthread_mutex_init(&l->lock, NULL);
        *ret_latency = l;
        return 0;
}

void zcp_latency_free(struct zcp_latency *l)
{
        if (!l)
                return;
        pthread_mutex_destroy(&l->lock);
        free(l);
}

static const struct zcp_hist *series_hist(const struct zcp_stream_stats *st, int series)
{
        int stage = (series - 1) / 2;

        if (series == ZCP_LAT_E2E)
                return &st->e2e;
        return (series - 1) % 2 ? &st->busy[stage] : &st->wait[stage];
}

static struct entry *find_entry(struct zcp_latency *l, const char *name)
{
        struct entry *free_e = NULL, *oldest = NULL;

        for (int i = 0; i < ZCP_CONFIG_MAX_STREAMS; i++) {
                struct entry *e = &l->entries[i];

                if (e->used && strcmp(e->name, name) == 0)
                        return e;
                if (!e->used) {
                        if (!free_e)
                                free_e = e;
                } else if (e->seen_ns < l->now_ns && (!oldest || e->seen_ns < oldest->seen_ns)) {
                        oldest = e;   /* not in this sample: a stream that is gone */
                }
        }
        if (!free_e)
                free_e = oldest;
        if (free_e) {
                memset(free_e, 0, offsetof(struct entry, points));
                free_e->used = true;
                snprintf(free_e->name, sizeof(free_e->name), "%s", name);
        }
        return free_e;
}

/* Quantile q of cur - prev (nearest rank, bucket midpoint), in ms; NAN when empty. */
static float delta_quantile(const struct zcp_hist_snapshot *cur, const struct zcp_hist_snapshot *prev, uint64_t total,
                            double q)
{
        uint64_t rank, seen = 0;

        if (total == 0)
                return NAN;
        rank = (uint64_t)ceil(q * (double)total);
        if (rank == 0)
                rank = 1;
        for (uint32_t b = 0; b < ZCP_HIST_BUCKETS; b++) {
                seen += cur->bucket[b] - (prev ? prev->bucket[b] : 0);
                if (seen >= rank)
                        return (float)((double)(zcp_hist_bucket_low(b) + zcp_hist_bucket_high(b)) / 2e6);
        }
        return NAN;
}

/* Under the lock, l->now_ns set. */
static void add_locked(struct zcp_latency *l, const char *name, const struct zcp_stream_stats *stats)
{
        struct entry *e = find_entry(l, name);
        struct point *p;
        bool same;

        if (!e)
                return;
        /* A stream re-created under this name starts its histograms again: difference from zero. */
        same = e->id == (const void *)stats;
        e->id = stats;
        e->seen_ns = l->now_ns;
        e->head = (e->head + 1) % ZCP_LATENCY_POINTS;
        if (e->len < ZCP_LATENCY_POINTS)
                e->len++;
        p = &e->points[e->head];
        p->t_ns = l->now_ns;
        for (int i = 0; i < ZCP_LAT_SERIES_COUNT; i++) {
                const struct zcp_hist_snapshot *prev = same ? &e->prev[i] : NULL;
                uint64_t total = 0;

                zcp_hist_snapshot(series_hist(stats, i), &l->cur);
                for (uint32_t b = 0; prev && b < ZCP_HIST_BUCKETS; b++)
                        if (l->cur.bucket[b] < prev->bucket[b])
                                prev = NULL;   /* went backwards: not the same histogram */
                total = l->cur.count - (prev ? prev->count : 0);
                p->p50[i] = delta_quantile(&l->cur, prev, total, 0.5);
                p->p99[i] = delta_quantile(&l->cur, prev, total, 0.99);
                if (i == ZCP_LAT_E2E)
                        p->frames = (uint32_t)total;
                e->prev[i] = l->cur;
        }
}

static void sample_one(const struct zcp_stream_view *view, void *userdata)
{
        add_locked(userdata, view->name, view->stats);
}

void zcp_latency_add(struct zcp_latency *l, const char *name, const struct zcp_stream_stats *stats, uint64_t now_ns)
{
        pthread_mutex_lock(&l->lock);
        l->now_ns = now_ns;
        add_locked(l, name, stats);
        pthread_mutex_unlock(&l->lock);
}

void zcp_latency_sample(struct zcp_latency *l, struct zcp_registry *registry, uint64_t now_ns)
{
        pthread_mutex_lock(&l->lock);
        l->now_ns = now_ns;
        zcp_registry_foreach(registry, sample_one, l);
        pthread_mutex_unlock(&l->lock);
}

static void json_floats(struct zcp_prom_buf *b, const struct entry *e, uint32_t first, bool p99, int series)
{
        for (uint32_t k = 0; k < e->len; k++) {
                const struct point *p = &e->points[(first + k) % ZCP_LATENCY_POINTS];
                float v = p99 ? p->p99[series] : p->p50[series];

                if (isnan(v))
                        zcp_prom_buf_printf(b, "%snull", k ? "," : "");
                else
                        zcp_prom_buf_printf(b, "%s%.3f", k ? "," : "", (double)v);
        }
}

int zcp_latency_json(struct zcp_latency *l, uint64_t now_ns, char **ret_json, size_t *ret_len)
{
        const uint64_t horizon = (uint64_t)ZCP_LATENCY_POINTS * 1000000000ULL;
        struct zcp_prom_buf b = { 0 };
        bool first_stream = true;

        pthread_mutex_lock(&l->lock);
        zcp_prom_buf_printf(&b, "{\"period_s\":1,\"points\":%d,\"streams\":[", ZCP_LATENCY_POINTS);
        for (int i = 0; i < ZCP_CONFIG_MAX_STREAMS; i++) {
                const struct entry *e = &l->entries[i];
                uint32_t first;

                if (!e->used || e->len == 0 || (now_ns > e->seen_ns && now_ns - e->seen_ns > horizon))
                        continue;
                first = (e->head + ZCP_LATENCY_POINTS + 1 - e->len) % ZCP_LATENCY_POINTS;
                zcp_prom_buf_printf(&b, "%s{\"name\":", first_stream ? "" : ",");
                first_stream = false;
                zcp_prom_buf_json_string(&b, e->name);
                zcp_prom_buf_printf(&b, ",\"t\":[");
                for (uint32_t k = 0; k < e->len; k++) {
                        const struct point *p = &e->points[(first + k) % ZCP_LATENCY_POINTS];

                        zcp_prom_buf_printf(&b, "%s%.1f", k ? "," : "", ((double)p->t_ns - (double)now_ns) / 1e9);
                }
                zcp_prom_buf_printf(&b, "],\"frames\":[");
                for (uint32_t k = 0; k < e->len; k++)
                        zcp_prom_buf_printf(&b, "%s%u", k ? "," : "",
                                            e->points[(first + k) % ZCP_LATENCY_POINTS].frames);
                zcp_prom_buf_printf(&b, "]");
                for (int q = 0; q < 2; q++) {
                        zcp_prom_buf_printf(&b, ",\"%s\":{", q ? "p99" : "p50");
                        for (int s = 0; s < ZCP_LAT_SERIES_COUNT; s++) {
                                zcp_prom_buf_printf(&b, "%s\"%s\":[", s ? "," : "", zcp_latency_series_names[s]);
                                json_floats(&b, e, first, q == 1, s);
                                zcp_prom_buf_printf(&b, "]");
                        }
                        zcp_prom_buf_printf(&b, "}");
                }
                zcp_prom_buf_printf(&b, "}");
        }
        zcp_prom_buf_printf(&b, "]}\n");
        pthread_mutex_unlock(&l->lock);
        if (b.failed) {
                zcp_prom_buf_done(&b);
                return -ENOMEM;
        }
        *ret_json = zcp_prom_buf_steal(&b, ret_len);
        return 0;
}
