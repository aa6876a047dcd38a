/* SPDX-License-Identifier: MIT */
/*
 * A worker team's job cadence (src/core/cadence.c) against made-up job
 * times: a camera's clock (jobs at a fixed period, whatever the work took),
 * a producer that waits for each frame's work before making the next (a
 * benchmark's loop), a frame split into several jobs, a missed frame, a
 * pause, a stream that stops. What must hold: no window before two bursts;
 * once the cadence is learnt, the next job starts inside the window
 * [next - lead, spin_until] nearly always, and the spin before it (window
 * open to job) stays near the lead, not the period; the lead follows the
 * measured wake-up lateness within its bounds; a missed frame or a pause
 * moves the estimate by a quarter at most.
 */
#include <stdio.h>

#include "common.h"
#include "core/cadence.h"

#define US 1000ull
#define MS (1000 * US)

struct tally {
        uint32_t n, inside, early, late;
        uint64_t spin_sum, spin_max;
};

/* One burst at `start` lasting `dur`; first tallies how the last window placed it. */
static void job(struct zcp_cadence *c, struct tally *t, uint64_t start, uint64_t dur)
{
        uint64_t next = zcp_cadence_next(c), from = next - zcp_cadence_lead(c), until = zcp_cadence_spin_until(c);

        if (t && next) {
                t->n++;
                if (start < from) {
                        t->early++;
                } else if (start > until) {
                        t->late++;
                } else {
                        t->inside++;
                        t->spin_sum += start - from;
                        t->spin_max = start - from > t->spin_max ? start - from : t->spin_max;
                }
        }
        zcp_cadence_start(c, start);
        zcp_cadence_end(c, start + dur);
}

/* Deterministic jitter in [-a, a]. */
static int64_t jitter(uint32_t i, int64_t a)
{
        return (int64_t)((i * 2654435761u) % (uint32_t)(2 * a + 1)) - a;
}

static void report(const char *what, const struct tally *t)
{
        printf("%s: %u jobs, %u inside the window, %u before it, %u after it, spin mean %.1f us max %.1f us\n", what,
               t->n, t->inside, t->early, t->late, t->n ? (double)t->spin_sum / t->n / US : 0.0,
               (double)t->spin_max / US);
}

/* A 30 fps camera: starts 33.3 ms apart +-40 us, the work 0.2-0.6 ms. The period is the steadier. */
static void test_camera(void)
{
        struct zcp_cadence c;
        struct tally t = { 0 };

        zcp_cadence_init(&c);
        CHECK(zcp_cadence_next(&c) == 0 && zcp_cadence_spin_until(&c) == 0);
        for (uint32_t i = 0; i < 600; i++) {
                uint64_t start = 1000 * MS + i * 33333 * US + (uint64_t)(40 * US + jitter(i, 40 * US));
                uint64_t dur = 200 * US + (i * 7919u) % (400 * US);

                if (i < 2)
                        CHECK(zcp_cadence_next(&c) == 0); /* none before two bursts */
                if (i % 8 == 0)
                        zcp_cadence_lateness(&c, 30 * US); /* members woken by their timers, 30 us late */
                job(&c, i >= 20 ? &t : NULL, start, dur);
        }
        report("camera 30 fps", &t);
        CHECK_MSG(t.inside >= t.n * 99 / 100, "inside %u of %u", t.inside, t.n);
        CHECK(t.spin_sum / t.n <= zcp_cadence_lead(&c) + 40 * US);
        CHECK(t.spin_max <= ZCP_CADENCE_LEAD_MAX_NS + 80 * US);
        CHECK(c.bursts == 600);
}

/* A loop that makes the next frame 3 ms after the last one's work ended (+-20 us); the work 0.1-0.9 ms. */
static void test_loop(void)
{
        struct zcp_cadence c;
        struct tally t = { 0 };
        uint64_t clock = 5000 * MS;

        zcp_cadence_init(&c);
        for (uint32_t i = 0; i < 600; i++) {
                uint64_t dur = 100 * US + (i * 104729u) % (800 * US);

                job(&c, i >= 20 ? &t : NULL, clock, dur);
                clock += dur + 3 * MS + (uint64_t)(20 * US + jitter(i, 20 * US));
        }
        report("loop, 3 ms between frames", &t);
        /* Start to start varies by the work (0.8 ms); end to start by 40 us: the gap predicts. */
        CHECK(c.gap.dev < c.period.dev);
        CHECK_MSG(t.inside >= t.n * 99 / 100, "inside %u of %u", t.inside, t.n);
        CHECK(t.spin_sum / t.n <= 200 * US);
}

/* One frame's four jobs 10 us apart are one burst; the windows follow the frames. */
static void test_bursts(void)
{
        struct zcp_cadence c;
        struct tally t = { 0 };

        zcp_cadence_init(&c);
        for (uint32_t i = 0; i < 200; i++) {
                uint64_t frame = 9000 * MS + i * 10 * MS;

                for (uint32_t k = 0; k < 4; k++)
                        job(&c, i >= 10 && k == 0 ? &t : NULL, frame + k * 60 * US, 50 * US);
        }
        report("4 jobs per frame", &t);
        CHECK(c.bursts == 200);
        CHECK(c.period.mean >= 9990 * US && c.period.mean <= 10010 * US);
        CHECK(t.inside == t.n);
}

/* A missed frame, a pause, a stop, lateness: bounded moves, bounded lead. */
static void test_changes(void)
{
        struct zcp_cadence c;
        uint64_t clock = 20000 * MS, p;

        zcp_cadence_init(&c);
        CHECK(zcp_cadence_lead(&c) >= ZCP_CADENCE_LEAD_MIN_NS && zcp_cadence_lead(&c) <= ZCP_CADENCE_LEAD_MAX_NS);
        for (uint32_t i = 0; i < 100; i++, clock += 20 * MS)
                job(&c, NULL, clock, 100 * US);
        p = c.period.mean;
        CHECK(p >= 19990 * US && p <= 20010 * US);
        clock += 20 * MS; /* one frame missed: 40 ms */
        job(&c, NULL, clock, 100 * US);
        CHECK(c.period.mean <= p + p / 4 + US);
        p = c.period.mean;
        clock += 10 * 1000 * MS; /* a 10 s pause: clamped to twice the estimate, a quarter of that */
        job(&c, NULL, clock, 100 * US);
        CHECK(c.period.mean <= p + p / 4 + US);
        /* Back at 20 ms: the estimate returns. */
        for (uint32_t i = 0; i < 60; i++) {
                clock += 20 * MS;
                job(&c, NULL, clock, 100 * US);
        }
        CHECK(c.period.mean >= 19900 * US && c.period.mean <= 20100 * US);
        /* Wake-ups 300 us late: the lead grows to its bound; back to 10 us: it comes down. */
        for (uint32_t i = 0; i < 64; i++)
                zcp_cadence_lateness(&c, 300 * US);
        CHECK(zcp_cadence_lead(&c) == ZCP_CADENCE_LEAD_MAX_NS);
        for (uint32_t i = 0; i < 64; i++)
                zcp_cadence_lateness(&c, 10 * US);
        CHECK(zcp_cadence_lead(&c) < 100 * US);
        /* Frames 2 s apart: no window (nothing worth a spin). */
        zcp_cadence_init(&c);
        for (uint32_t i = 0; i < 10; i++, clock += 2000 * MS)
                job(&c, NULL, clock, 100 * US);
        CHECK(zcp_cadence_next(&c) == 0 && zcp_cadence_spin_until(&c) == 0);
}

int main(void)
{
        setvbuf(stdout, NULL, _IOLBF, 0);
        test_camera();
        test_loop();
        test_bursts();
        test_changes();
        printf("cadence: ok\n");
        return 0;
}
