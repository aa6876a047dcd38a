/* SPDX-License-Identifier: MIT */
/*
 * Log-linear histograms and stream counters (metrics.h). Bucket b covers
 * octave k = b / 128 ([1 us * 2^k, 1 us * 2^(k+1))) split into 128 equal
 * sub-buckets; a reported value is the bucket midpoint, within 1/256 of any
 * value in it.
 */
#include <string.h>

#include "core/metrics.h"

#define SUB (1u << ZCP_HIST_SUB_BITS)

void zcp_hist_init(struct zcp_hist *h)
{
        for (uint32_t b = 0; b < ZCP_HIST_BUCKETS; b++)
                atomic_init(&h->bucket[b], 0);
        atomic_init(&h->count, 0);
        atomic_init(&h->sum_ns, 0);
        atomic_init(&h->max_ns, 0);
        atomic_init(&h->min_ns, UINT64_MAX);
}

uint32_t zcp_hist_bucket_of(uint64_t ns)
{
        uint64_t q, base;
        uint32_t k, sub;

        if (ns < ZCP_HIST_MIN_NS)
                return 0;
        q = ns / ZCP_HIST_MIN_NS;
        k = 63u - (uint32_t)__builtin_clzll(q);
        if (k >= ZCP_HIST_OCTAVES)
                return ZCP_HIST_BUCKETS - 1;
        base = ZCP_HIST_MIN_NS << k;
        sub = (uint32_t)(((ns - base) << ZCP_HIST_SUB_BITS) / base);
        return k * SUB + sub;
}

uint64_t zcp_hist_bucket_low(uint32_t b)
{
        uint32_t k = b / SUB, sub = b % SUB;
        uint64_t base;

        if (k >= ZCP_HIST_OCTAVES)
                return ZCP_HIST_MIN_NS << ZCP_HIST_OCTAVES;
        base = ZCP_HIST_MIN_NS << k;
        /* Smallest ns with bucket_of(ns) == b. */
        return (base * (SUB + sub) + SUB - 1) / SUB;
}

uint64_t zcp_hist_bucket_high(uint32_t b)
{
        return zcp_hist_bucket_low(b + 1);
}

void zcp_hist_record(struct zcp_hist *h, uint64_t ns)
{
        uint32_t b = zcp_hist_bucket_of(ns);

        atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
        /* Single writer: plain load/compare/store is enough for max/min. */
        if (ns > atomic_load_explicit(&h->max_ns, memory_order_relaxed))
                atomic_store_explicit(&h->max_ns, ns, memory_order_relaxed);
        if (ns < atomic_load_explicit(&h->min_ns, memory_order_relaxed))
                atomic_store_explicit(&h->min_ns, ns, memory_order_relaxed);
        /* count last, released: a reader that sees count sees the bucket. */
        atomic_fetch_add_explicit(&h->count, 1, memory_order_release);
}

void zcp_hist_snapshot(const struct zcp_hist *h, struct zcp_hist_snapshot *ret)
{
        uint64_t total = 0;

        ret->count = atomic_load_explicit(&h->count, memory_order_acquire);
        for (uint32_t b = 0; b < ZCP_HIST_BUCKETS; b++) {
                ret->bucket[b] = atomic_load_explicit(&h->bucket[b], memory_order_relaxed);
                total += ret->bucket[b];
        }
        /* Buckets may run ahead of count while the writer records: use their sum. */
        ret->count = total;
        ret->sum_ns = atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
        ret->max_ns = atomic_load_explicit(&h->max_ns, memory_order_relaxed);
        ret->min_ns = atomic_load_explicit(&h->min_ns, memory_order_relaxed);
        if (ret->count == 0)
                ret->min_ns = 0;
}

uint64_t zcp_hist_quantile(const struct zcp_hist_snapshot *s, double q)
{
        uint64_t rank, seen = 0, v;

        if (s->count == 0)
                return 0;
        if (q <= 0)
                return s->min_ns;
        if (q >= 1)
                return s->max_ns;
        /* Nearest-rank: the smallest value with at least q * count values <= it. */
        rank = (uint64_t)(q * (double)s->count);
        if ((double)rank < q * (double)s->count)
                rank++;
        if (rank == 0)
                rank = 1;
        for (uint32_t b = 0; b < ZCP_HIST_BUCKETS; b++) {
                seen += s->bucket[b];
                if (seen >= rank) {
                        v = (zcp_hist_bucket_low(b) + zcp_hist_bucket_high(b)) / 2;
                        if (v < s->min_ns)
                                v = s->min_ns;
                        if (v > s->max_ns)
                                v = s->max_ns;
                        return v;
                }
        }
        return s->max_ns;
}

void zcp_stream_stats_init(struct zcp_stream_stats *s)
{
        memset(s, 0, sizeof(*s));
        for (int i = 0; i < ZCP_STAGE_COUNT; i++) {
                zcp_hist_init(&s->wait[i]);
                zcp_hist_init(&s->busy[i]);
        }
        zcp_hist_init(&s->e2e);
}

void zcp_stats_detections(struct zcp_stream_stats *s, const struct zcp_detection *det, uint32_t n)
{
        uint32_t now[ZCP_STATS_CLASSES] = { 0 }, other = 0;

        for (uint32_t i = 0; i < n && i < ZCP_DET_MAX; i++) {
                if (det[i].cls < ZCP_STATS_CLASSES)
                        now[det[i].cls]++;
                else
                        other++;
        }
        for (uint32_t c = 0; c < ZCP_STATS_CLASSES; c++) {
                if (now[c])
                        atomic_fetch_add_explicit(&s->detections[c], now[c], memory_order_relaxed);
                if (now[c] || atomic_load_explicit(&s->objects[c], memory_order_relaxed))
                        atomic_store_explicit(&s->objects[c], now[c], memory_order_relaxed);
        }
        if (other)
                atomic_fetch_add_explicit(&s->detections_other, other, memory_order_relaxed);
        atomic_store_explicit(&s->objects_other, other, memory_order_relaxed);
}

void zcp_stats_drop(struct zcp_stream_stats *s, enum zcp_drop_reason reason)
{
        atomic_fetch_add_explicit(&s->dropped[reason], 1, memory_order_relaxed);
}

uint64_t zcp_stats_dropped_total(const struct zcp_stream_stats *s)
{
        uint64_t n = 0;

        for (int i = 0; i < ZCP_DROP_REASON_COUNT; i++)
                n += atomic_load_explicit(&s->dropped[i], memory_order_relaxed);
        return n;
}

void zcp_sink_stats_lose(struct zcp_sink_stats *s, enum zcp_sink_loss reason)
{
        atomic_fetch_add_explicit(&s->lost[reason], 1, memory_order_relaxed);
}

uint64_t zcp_sink_stats_lost_total(const struct zcp_sink_stats *s)
{
        uint64_t n = 0;

        for (int i = 0; i < ZCP_SINK_LOSS_COUNT; i++)
                n += atomic_load_explicit(&s->lost[i], memory_order_relaxed);
        return n;
}
