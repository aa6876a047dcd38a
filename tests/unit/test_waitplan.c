/* SPDX-License-Identifier: MIT */
/*
 * The hybrid wait's plan (src/infer/waitplan.c) against a simulated GPU and
 * scheduler: each frame's GPU time and each sleep's lateness are made up by
 * the test, and wait_hybrid()'s steps (cuda.c) are replayed on those times.
 * What must hold: once a prediction exists, a frame is seen complete within a
 * poll of its completion (spin's latency) unless it overslept, oversleeping
 * is rare and followed by a faster GPU within a few frames, the spin per frame
 * stays near the guard (a few microseconds, not the whole GPU time), a GPU
 * that became slower costs spin time for at most a window, and a frame far
 * later than predicted ends in a block, counted.
 */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "infer/waitplan.h"

#define US 1000ull
#define POLL (1 * US)          /* one cudaEventQuery */
#define BLOCK_WAKE (60 * US)   /* a blocking-sync event's wake-up */

struct outcome {
        uint64_t late;         /* seen complete this long after it completed */
        uint64_t spin;         /* CPU spent spinning */
        bool slept, overslept, blocked;
};

/* One frame: submitted at `t`, the GPU takes `gpu`, a sleep wakes `lateness` after asked. */
static struct outcome frame(struct zcp_waitplan *p, uint64_t t, uint64_t gpu, uint64_t lateness)
{
        const uint64_t complete = t + gpu, asked = zcp_waitplan_wake_at(p, t);
        uint64_t now = t + 2 * US, woke = 0, until, done;
        struct outcome o = { 0 };
        bool busy = false;

        if (asked > now + 2000 && complete > now) {
                now = woke = asked + lateness;
                o.slept = true;
        }
        until = zcp_waitplan_spin_until(p, t, now);
        if (complete <= now) {
                done = now;
                o.overslept = o.slept;
        } else if (complete <= until) {
                busy = true;
                done = complete + POLL / 2;
                o.spin = done - now;
        } else {
                busy = true;
                o.blocked = true;
                o.spin = until - now;
                done = complete + BLOCK_WAKE;
        }
        o.late = done - complete;
        zcp_waitplan_record(p, t, asked, woke, done, busy, o.blocked);
        return o;
}

struct tally {
        uint32_t n, overslept, blocked, late_over_poll;
        uint64_t spin_sum, spin_max;
};

static void add(struct tally *t, struct outcome o)
{
        t->n++;
        t->overslept += o.overslept;
        t->blocked += o.blocked;
        t->late_over_poll += o.late > POLL;
        t->spin_sum += o.spin;
        if (o.spin > t->spin_max)
                t->spin_max = o.spin;
}

/* A steady GPU and a scheduler that wakes 3-11 us late: spin's latency for ~the guard of CPU. */
static void test_steady(void)
{
        struct zcp_waitplan p;
        struct tally t = { 0 };
        uint64_t clock = 1000000 * US;
        struct outcome first;

        zcp_waitplan_init(&p);
        CHECK(zcp_waitplan_wake_at(&p, clock) == 0);
        first = frame(&p, clock, 120 * US, 0);
        CHECK(!first.slept && !first.blocked && first.late <= POLL);
        for (uint32_t i = 1; i < 1000; i++) {
                const uint64_t gpu = (118 + i % 5) * US, lateness = (3 + (i * 7) % 9) * US;
                struct outcome o;

                clock += 33 * 1000 * US;
                o = frame(&p, clock, gpu, lateness);
                if (i >= 20)
                        add(&t, o);
        }
        printf("steady: %u frames, overslept %u, blocked %u, seen late %u, spin mean %.1f us max %.1f us, guard %.1f us\n",
               t.n, t.overslept, t.blocked, t.late_over_poll, (double)t.spin_sum / t.n / US, (double)t.spin_max / US,
               (double)zcp_waitplan_guard(&p) / US);
        CHECK(t.blocked == 0);
        CHECK_MSG(t.overslept * 20 <= t.n, "overslept %u of %u", t.overslept, t.n);
        CHECK(t.late_over_poll <= t.overslept);
        /* The spin covers the guard (5 us + 1.5 x the worst lateness 11 us) and the GPU's 4 us spread. */
        CHECK_MSG(t.spin_sum / t.n <= 30 * US, "spin mean %llu ns", (unsigned long long)(t.spin_sum / t.n));
        CHECK(t.spin_max <= 40 * US);
        CHECK(p.frames == 1000 && p.slept >= 990);
}

/* The GPU becomes faster, then slower: followed within a few frames, then within a window. */
static void test_changes(void)
{
        struct zcp_waitplan p;
        uint64_t clock = 5000000 * US;
        uint32_t late_after_faster = 0, long_spins = 0;

        zcp_waitplan_init(&p);
        for (uint32_t i = 0; i < 100; i++, clock += 10000 * US)
                (void)frame(&p, clock, 150 * US, 5 * US);
        for (uint32_t i = 0; i < 100; i++, clock += 10000 * US) {
                const struct outcome o = frame(&p, clock, 80 * US, 5 * US);

                CHECK(!o.blocked);
                if (o.late > POLL) {
                        late_after_faster++;
                        CHECK_MSG(i < 4, "frame %u after the GPU got faster still seen %llu ns late", i,
                                  (unsigned long long)o.late);
                }
        }
        CHECK(late_after_faster >= 1);  /* the first faster frame was overslept: the change was seen */
        for (uint32_t i = 0; i < 100; i++, clock += 10000 * US) {
                const struct outcome o = frame(&p, clock, 150 * US, 5 * US);

                /* Slower than predicted: spinning catches it at once, never a block. */
                CHECK(!o.blocked && o.late <= POLL);
                if (o.spin > 40 * US) {
                        long_spins++;
                        CHECK_MSG(i < ZCP_WAITPLAN_WINDOW, "frame %u after the GPU got slower spun %llu ns", i,
                                  (unsigned long long)o.spin);
                }
        }
        CHECK(long_spins >= 1 && long_spins <= ZCP_WAITPLAN_WINDOW);
        printf("changes: faster seen late on %u frames, slower spun long on %u frames\n", late_after_faster,
               long_spins);
}

/* A late wake-up widens the guard for a window; a frame stuck behind other work blocks. */
static void test_outliers(void)
{
        struct zcp_waitplan p;
        uint64_t clock = 9000000 * US, g0, g1;
        struct outcome o;

        zcp_waitplan_init(&p);
        for (uint32_t i = 0; i < 40; i++, clock += 10000 * US)
                (void)frame(&p, clock, 100 * US, 4 * US);
        g0 = zcp_waitplan_guard(&p);
        CHECK(g0 >= ZCP_WAITPLAN_GUARD_MIN_NS && g0 <= ZCP_WAITPLAN_GUARD_MIN_NS + 6 * US + 1);
        (void)frame(&p, clock, 100 * US, 70 * US);
        clock += 10000 * US;
        g1 = zcp_waitplan_guard(&p);
        CHECK(g1 >= 100 * US);
        for (uint32_t i = 0; i < ZCP_WAITPLAN_WINDOW; i++, clock += 10000 * US) {
                o = frame(&p, clock, 100 * US, 4 * US);
                CHECK(!o.blocked && o.late <= POLL);
        }
        CHECK_MSG(zcp_waitplan_guard(&p) <= g0, "guard %llu g0 %llu", (unsigned long long)zcp_waitplan_guard(&p), (unsigned long long)g0);

        /* 3 ms of other streams' work ahead of this frame: spin up to the bound, then block. */
        const uint64_t blocked0 = p.blocked;
        o = frame(&p, clock, 3000 * US, 4 * US);
        clock += 10000 * US;
        CHECK(o.blocked && p.blocked == blocked0 + 1);
        CHECK(o.spin <= ZCP_WAITPLAN_SPIN_MIN_NS);
        o = frame(&p, clock, 100 * US, 4 * US);
        CHECK(!o.blocked && o.late <= POLL);
        printf("outliers: guard %.1f -> %.1f us after one 70 us late wake-up, back after a window; one block\n",
               (double)g0 / US, (double)g1 / US);
}

/* A GPU slower than the first spin's bound (a 4K frame's first launch): a block, then the plan learns. */
static void test_slow_start(void)
{
        struct zcp_waitplan p;
        uint64_t clock = 20000000 * US;
        struct outcome o;

        zcp_waitplan_init(&p);
        o = frame(&p, clock, 5000 * US, 4 * US);
        CHECK(o.blocked);
        uint32_t late = 0;
        for (uint32_t i = 0; i < 50; i++) {
                clock += 33000 * US;
                o = frame(&p, clock, 300 * US, 4 * US);
                CHECK(!o.blocked);
                late += o.late > POLL;
        }
        printf("slow start: 5 ms first frame, then 300 us: %u frames seen late while the prediction came down\n",
               late);
        CHECK(late <= 12);
        CHECK(o.late <= POLL && o.spin <= 30 * US);
}

int main(void)
{
        test_steady();
        test_changes();
        test_outliers();
        test_slow_start();
        printf("waitplan: all checks passed\n");
        return 0;
}
