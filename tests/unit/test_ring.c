/* SPDX-License-Identifier: MIT */
/*
 * The SPSC queue and the ring under two threads: every index pushed arrives
 * once, in order; blocking pop wakes on push and on close; timeouts expire;
 * slots cycle through the four queues with their state checked; the stage
 * list drives the timestamps, queues, slot states and names; the moving
 * masks are one per slot, of the cells asked for, apart from each other and
 * from the result blocks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "core/ring.h"
#include "core/spsc.h"
#include "core/stage.h"

#define N_ITEMS 300000u

struct pc {
        struct zcp_spsc *q;
        uint32_t n;
};

static void *producer(void *arg)
{
        struct pc *pc = arg;

        for (uint32_t i = 0; i < pc->n; i++) {
                while (zcp_spsc_push(pc->q, i) == -ENOSPC)
                        ; /* test only: spin until the consumer catches up */
        }
        zcp_spsc_close(pc->q);
        return NULL;
}

static void test_spsc_two_threads(void)
{
        struct zcp_spsc q;
        struct pc pc = { &q, N_ITEMS };
        pthread_t th;
        uint32_t expect = 0, v;
        int r;

        CHECK(zcp_spsc_init(&q, 8) == 0);
        CHECK(pthread_create(&th, NULL, producer, &pc) == 0);
        while ((r = zcp_spsc_pop(&q, -1, &v)) == 0) {
                CHECK_MSG(v == expect, "got %u, expected %u", v, expect);
                expect++;
        }
        CHECK(r == -EPIPE);
        CHECK(expect == N_ITEMS);
        pthread_join(th, NULL);
        zcp_spsc_done(&q);
}

static void test_spsc_basics(void)
{
        struct zcp_spsc q;
        uint32_t v;
        uint64_t t0;

        CHECK(zcp_spsc_init(&q, 5) == 0);
        CHECK(q.mask == 7);
        CHECK(zcp_spsc_pop(&q, 0, &v) == -EAGAIN);
        t0 = zcp_now_ns();
        CHECK(zcp_spsc_pop(&q, 20 * 1000000, &v) == -EAGAIN);
        CHECK(zcp_now_ns() - t0 >= 20 * 1000000ull);
        for (uint32_t i = 0; i < 8; i++)
                CHECK(zcp_spsc_push(&q, i) == 0);
        CHECK(zcp_spsc_push(&q, 99) == -ENOSPC);
        CHECK(zcp_spsc_count(&q) == 8);
        CHECK(zcp_spsc_pop(&q, 0, &v) == 0 && v == 0);
        zcp_spsc_close(&q);
        /* Closed: drains what is left, then -EPIPE. */
        for (uint32_t i = 1; i < 8; i++)
                CHECK(zcp_spsc_pop(&q, -1, &v) == 0 && v == i);
        CHECK(zcp_spsc_pop(&q, -1, &v) == -EPIPE);
        zcp_spsc_done(&q);
}

struct closer {
        struct zcp_spsc *q;
};

static void *close_later(void *arg)
{
        struct closer *c = arg;
        struct timespec ts = { 0, 30 * 1000000 };

        nanosleep(&ts, NULL);
        zcp_spsc_close(c->q);
        return NULL;
}

static void test_spsc_close_wakes(void)
{
        struct zcp_spsc q;
        struct closer c = { &q };
        pthread_t th;
        uint32_t v;

        CHECK(zcp_spsc_init(&q, 4) == 0);
        CHECK(pthread_create(&th, NULL, close_later, &c) == 0);
        CHECK(zcp_spsc_pop(&q, -1, &v) == -EPIPE);
        pthread_join(th, NULL);
        zcp_spsc_done(&q);
}

/* Slots cycle free -> source -> convert -> infer -> publish -> free, with a
 * second thread playing all downstream stages. */
struct downstream {
        struct zcp_ring *ring;
        uint64_t seen;
};

static void *downstream_thread(void *arg)
{
        struct downstream *d = arg;
        struct zcp_ring *ring = d->ring;
        uint32_t idx;

        while (zcp_spsc_pop(&ring->q[ZCP_Q_CONVERT], -1, &idx) == 0) {
                struct zcp_slot *s = zcp_ring_slot(ring, idx);

                CHECK(s->data[0] == (uint8_t)s->frame.seq);
                CHECK(s->frame.seq == d->seen);
                d->seen++;
                zcp_ring_move(ring, idx, ZCP_SLOT_CONVERT, ZCP_SLOT_INFER);
                zcp_ring_move(ring, idx, ZCP_SLOT_INFER, ZCP_SLOT_PUBLISH);
                zcp_ring_move(ring, idx, ZCP_SLOT_PUBLISH, ZCP_SLOT_FREE);
                CHECK(zcp_spsc_push(&ring->q[ZCP_Q_FREE], idx) == 0);
        }
        return NULL;
}

static void test_ring_cycle(void)
{
        struct zcp_stream_stats *stats = malloc(sizeof(*stats));
        struct downstream d = { 0 };
        struct zcp_ring *ring;
        pthread_t th;
        const uint64_t frames = 100000;

        CHECK(stats);
        zcp_stream_stats_init(stats);
        CHECK(zcp_ring_new(4, 1000, 0, &zcp_host_allocator, stats, &ring) == 0);
        CHECK(ring->slot_size >= 1000 && ring->slot_size % 4096 == 0);
        for (uint32_t i = 0; i < ring->count; i++) {
                CHECK(((uintptr_t)ring->slots[i].data & 4095) == 0);
                CHECK(ring->slots[i].result != NULL);
        }
        d.ring = ring;
        CHECK(pthread_create(&th, NULL, downstream_thread, &d) == 0);
        for (uint64_t seq = 0; seq < frames; seq++) {
                uint32_t idx;

                CHECK(zcp_ring_acquire(ring, -1, &idx) == 0);
                CHECK(ring->slots[idx].frame.seq == 0 && ring->slots[idx].frame.flags == 0);
                ring->slots[idx].frame.seq = seq;
                ring->slots[idx].data[0] = (uint8_t)seq;
                if (seq % 1000 == 999)
                        zcp_ring_submit_dropped(ring, idx, ZCP_DROP_CORRUPT);
                else
                        zcp_ring_submit(ring, idx);
        }
        zcp_spsc_close(&ring->q[ZCP_Q_CONVERT]);
        pthread_join(th, NULL);
        CHECK(d.seen == frames);
        CHECK(atomic_load(&stats->dropped[ZCP_DROP_CORRUPT]) == frames / 1000);
        CHECK(zcp_stats_dropped_total(stats) == frames / 1000);
        /* Every slot is back. */
        CHECK(zcp_spsc_count(&ring->q[ZCP_Q_FREE]) == ring->count);
        zcp_ring_reset(ring);
        CHECK(zcp_spsc_count(&ring->q[ZCP_Q_FREE]) == ring->count);
        zcp_ring_free(ring);
        free(stats);
}

static int fail_alloc(void *ctx, size_t bytes, void **ret_host, void **ret_dev)
{
        int *left = ctx;

        if ((*left)-- <= 0)
                return -ENOMEM;
        return zcp_host_allocator.alloc(NULL, bytes, ret_host, ret_dev);
}

static void test_ring_alloc_failure(void)
{
        /*
         * Fail at every allocation in turn, the last one included: nothing
         * leaks (ASan), the error comes back and no ring. The ring asks the
         * allocator for its result blocks and for each slot (1 + 4 calls), so
         * the first budget that succeeds is 5: the loop runs until success
         * instead of stopping at a guessed count (it used to stop one short,
         * never failing the last slot's allocation).
         */
        int budget;

        for (budget = 0; budget < 16; budget++) {
                int left = budget;
                struct zcp_allocator a = {
                        .name = "failing", .ctx = &left, .alloc = fail_alloc, .free = zcp_host_allocator.free,
                };
                struct zcp_ring *ring = NULL;
                int r = zcp_ring_new(4, 4096, 0, &a, NULL, &ring);

                if (r == 0) {
                        CHECK(ring && left == 0);
                        zcp_ring_free(ring);
                        break;
                }
                CHECK(r == -ENOMEM);
                CHECK(ring == NULL);
        }
        CHECK_MSG(budget == 1 + 4, "the ring succeeded after %d allocations", budget);
}

static void test_ring_lend(void)
{
        static uint8_t lent_a[8192] __attribute__((aligned(4096)));
        struct zcp_ring *ring;
        uint8_t *own;
        void *dev = (void *)1;
        uint32_t idx;

        CHECK(zcp_ring_new(2, 5000, 0, &zcp_host_allocator, NULL, &ring) == 0);
        CHECK(ring->slot_size == 8192);
        /* The host allocator maps foreign memory as it is. */
        CHECK(ring->alloc.map && ring->alloc.map(ring->alloc.ctx, lent_a, sizeof(lent_a), &dev) == 0 && !dev);
        CHECK(zcp_ring_acquire(ring, 0, &idx) == 0);
        own = ring->slots[idx].data;
        CHECK(own == ring->slots[idx].own && ring->slots[idx].lent == 0);
        zcp_ring_lend(ring, idx, lent_a, NULL, sizeof(lent_a), 7);
        CHECK(ring->slots[idx].data == lent_a && ring->slots[idx].cap == sizeof(lent_a) && ring->slots[idx].lent == 7);
        /* A lent slot travels like any other; acquire does not take the buffer back. */
        zcp_ring_submit(ring, idx);
        {
                static const struct {
                        enum zcp_queue from, to;
                        enum zcp_slot_state was, now;
                } hop[] = {
                        { ZCP_Q_CONVERT, ZCP_Q_INFER, ZCP_SLOT_CONVERT, ZCP_SLOT_INFER },
                        { ZCP_Q_INFER, ZCP_Q_PUBLISH, ZCP_SLOT_INFER, ZCP_SLOT_PUBLISH },
                        { ZCP_Q_PUBLISH, ZCP_Q_FREE, ZCP_SLOT_PUBLISH, ZCP_SLOT_FREE },
                };

                for (size_t h = 0; h < sizeof(hop) / sizeof(hop[0]); h++) {
                        uint32_t got;

                        CHECK(zcp_spsc_pop(&ring->q[hop[h].from], 0, &got) == 0 && got == idx);
                        zcp_ring_move(ring, idx, hop[h].was, hop[h].now);
                        CHECK(zcp_spsc_push(&ring->q[hop[h].to], idx) == 0);
                }
        }
        /* The other slot comes first, then ours, still lent. */
        CHECK(zcp_ring_acquire(ring, 0, &idx) == 0 && ring->slots[idx].lent == 0);
        CHECK(zcp_ring_acquire(ring, 0, &idx) == 0 && ring->slots[idx].lent == 7 && ring->slots[idx].data == lent_a);
        CHECK(zcp_ring_unlend(ring, idx) == 7);
        CHECK(ring->slots[idx].data == own && ring->slots[idx].cap == ring->slot_size && ring->slots[idx].lent == 0);
        CHECK(zcp_ring_unlend(ring, idx) == 0);
        zcp_ring_free(ring);
}

/*
 * The stage list (core/stages.h) drives the timestamps, queues, slot states
 * and names: each stage's three timestamps are named after it and follow
 * each other, its queue and slot state are named after it, and the pipeline
 * has an ops table of that name for it.
 */
static void test_stage_table(void)
{
        char want[64];

        CHECK(ZCP_TS_COUNT == 1 + 3 * ZCP_STAGE_COUNT);
        CHECK(ZCP_Q_COUNT == 1 + ZCP_STAGE_COUNT);
        CHECK(strcmp(zcp_ts_names[ZCP_TS_CAPTURE], "capture") == 0);
        for (int st = 0; st < ZCP_STAGE_COUNT; st++) {
                const char *name = zcp_stage_names[st];
                const char *suffix[3] = { "enter", "start", "end" };
                uint32_t ts[3] = { zcp_stage_ts_enter(st), zcp_stage_ts_start(st), zcp_stage_ts_end(st) };
                const struct zcp_stage_ops *ops[ZCP_STAGE_COUNT] = {
#define OPS(ID, n, thread) &zcp_stage_##n,
                        ZCP_STAGE_LIST(OPS)
#undef OPS
                };

                CHECK(name && name[0]);
                for (int k = 0; k < 3; k++) {
                        snprintf(want, sizeof(want), "%s_%s", name, suffix[k]);
                        CHECK_MSG(ts[k] < ZCP_TS_COUNT && strcmp(zcp_ts_names[ts[k]], want) == 0, "stage %s: %s", name,
                                  want);
                }
                CHECK(ts[0] == (st == 0 ? 1u : zcp_stage_ts_end(st - 1) + 1));
                CHECK(strcmp(zcp_slot_state_names[zcp_stage_slot(st)], name) == 0);
                CHECK(zcp_stage_queue(st) > ZCP_Q_FREE && zcp_stage_queue(st) < ZCP_Q_COUNT);
                CHECK(ops[st]->name && strcmp(ops[st]->name, name) == 0 && ops[st]->process);
        }
        CHECK(zcp_stage_ts_end(ZCP_STAGE_COUNT - 1) == ZCP_TS_COUNT - 1);
        /* The names the exporters and the JSON lines have always used. */
        CHECK(ZCP_TS_INFER_END == zcp_stage_ts_end(ZCP_STAGE_INFER));
        CHECK(strcmp(zcp_ts_names[ZCP_TS_PUBLISH_END], "publish_end") == 0);
        CHECK(ZCP_SLOT_CONVERT == zcp_stage_slot(ZCP_STAGE_CONVERT) && ZCP_Q_PUBLISH == zcp_stage_queue(ZCP_STAGE_PUBLISH));
}

/* Masks of 0, 1, 32, 33 and 1920 * 1080 (4K at cell 2) cells: words, alignment, no overlap, zeroed. */
static void test_ring_masks(void)
{
        static const uint32_t cells[] = { 0, 1, 32, 33, 1920u * 1080u };

        for (size_t c = 0; c < sizeof(cells) / sizeof(cells[0]); c++) {
                struct zcp_ring *ring;
                const uint32_t words = (cells[c] + 31) / 32;

                CHECK(zcp_ring_new(3, 4096, cells[c], &zcp_host_allocator, NULL, &ring) == 0);
                CHECK(ring->mask_cells == cells[c]);
                for (uint32_t i = 0; i < ring->count; i++) {
                        const struct zcp_slot *s = &ring->slots[i];

                        CHECK(s->mask_words == words && zcp_mask_words(cells[c]) == words);
                        CHECK(!s->mask_dev);
                        if (!words) {
                                CHECK(!s->mask);
                                continue;
                        }
                        CHECK(s->mask && ((uintptr_t)s->mask & 15) == 0);
                        for (uint32_t w = 0; w < words; w++)
                                CHECK(s->mask[w] == 0);
                        /* After every result block, before the next slot's mask. */
                        CHECK((const uint8_t *)s->mask >= (const uint8_t *)(ring->results + ring->count));
                        if (i + 1 < ring->count)
                                CHECK((const uint8_t *)(s->mask + words) <= (const uint8_t *)ring->slots[i + 1].mask);
                        memset(s->mask, 0xFF, (size_t)words * 4);   /* ASan: all of it is ours */
                }
                for (uint32_t i = 0; i < ring->count; i++)
                        CHECK(ring->slots[i].result->valid == 0);
                zcp_ring_free(ring);
        }
}

static int count_alloc(void *ctx, size_t bytes, void **ret_host, void **ret_dev)
{
        *(uint64_t *)ctx += bytes;
        return zcp_host_allocator.alloc(NULL, bytes, ret_host, ret_dev);
}

/*
 * zcp_ring_bytes() (what pinned_budget counts) is what zcp_ring_new() asks its
 * allocator for, result blocks and masks included: summed by a counting
 * allocator over slot counts, frame sizes and mask geometries (1080p and 4K
 * motion grids at cells 16 and 2).
 */
static void test_ring_bytes(void)
{
        static const uint32_t counts[] = { 1, 3, 8, 32 };
        static const size_t frames[] = { 1, 4096, 4097, 3110400 };
        static const uint32_t cells[] = { 0, 1, 33, 120 * 68, 960 * 540, 1920 * 1080 };

        for (size_t a = 0; a < sizeof(counts) / sizeof(counts[0]); a++)
                for (size_t b = 0; b < sizeof(frames) / sizeof(frames[0]); b++)
                        for (size_t c = 0; c < sizeof(cells) / sizeof(cells[0]); c++) {
                                uint64_t asked = 0;
                                struct zcp_allocator al = { .name = "counting", .ctx = &asked,
                                                            .alloc = count_alloc, .free = zcp_host_allocator.free };
                                struct zcp_ring *ring;

                                CHECK(zcp_ring_new(counts[a], frames[b], cells[c], &al, NULL, &ring) == 0);
                                CHECK_MSG(asked == zcp_ring_bytes(counts[a], frames[b], cells[c]),
                                          "%u slots of %zu bytes, %u cells: allocated %llu, counted %llu", counts[a],
                                          frames[b], cells[c], (unsigned long long)asked,
                                          (unsigned long long)zcp_ring_bytes(counts[a], frames[b], cells[c]));
                                /* More than the slots alone whenever there are masks or results at all. */
                                CHECK(asked > (uint64_t)counts[a] * frames[b]);
                                zcp_ring_free(ring);
                        }
}

int main(void)
{
        test_spsc_basics();
        test_spsc_close_wakes();
        test_spsc_two_threads();
        test_ring_cycle();
        test_ring_alloc_failure();
        test_ring_lend();
        test_ring_masks();
        test_ring_bytes();
        test_stage_table();
        printf("ring: ok\n");
        return 0;
}
