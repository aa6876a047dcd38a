/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * When a worker team's next job comes, so that its members are awake for it
 * (workers.c's wake-ahead).
 *
 * A member asleep in futex_wait runs tens of microseconds after the owner's
 * wake-up call, more on an idle virtual CPU; a 1080p frame that 4 threads
 * convert in about 0.2 ms then has its helpers arrive when much of the work
 * is done. Frames come at a cadence (a camera's period, a decoder's pace),
 * and so do the jobs of the stage that splits them: the team predicts the
 * next one and its idle members wake by themselves shortly before it, spin
 * until it comes, and sleep as before when it does not come in time.
 *
 * Pure arithmetic on times (ns, one clock), kept apart from the threads so
 * that the unit tests drive it with made-up cadences:
 *
 *   burst   a job that starts more than ZCP_CADENCE_GAP_NS after the last
 *           one ended (one frame's several jobs follow each other closely;
 *           the members spin that long after every job anyway)
 *   two estimates of the next burst, each an average (weight 1/4) of its
 *   intervals, each interval clamped to [average / 2, 2 x average] first so
 *   that a missed frame or a pause moves it by a quarter at most, and each
 *   with the average deviation of its intervals from it (weight 1/4):
 *     period  between burst starts: a camera's clock, whatever the work took
 *     gap     from a burst's end to the next start: a producer that waits for
 *             the last frame's work, then makes the next (a benchmark's loop)
 *   next    the steadier of the two (the smaller deviation): last burst
 *           start + period, or last job's end + gap; none before two bursts,
 *           or for an estimate above ZCP_CADENCE_PERIOD_MAX_NS
 *   lead    how long before `next` the members wake: 2 x the recent wake-up
 *           lateness (average, weight 1/8, of how late members woken by a
 *           job or by their own timer ran) + 2 x that deviation + 20 us,
 *           within [20 us, 500 us]
 *   window  members spin from next - lead to next + lead + period / 32
 *           (that tail at most 1 ms), then sleep until woken
 *
 * CPU: a member spins about `lead` per frame when the prediction holds (on
 * the GPU machine's host about 0.25 ms a frame, 0.75% of a core at 30 fps:
 * bench_cpu --only wake, docs/performance.md), at most the window when it
 * does not.
 */
#include <stdint.h>

#define ZCP_CADENCE_GAP_NS 50000ull              /* also the members' spin after a job (workers.c) */
#define ZCP_CADENCE_PERIOD_MAX_NS 1000000000ull  /* 1 s */
#define ZCP_CADENCE_LEAD_MIN_NS 20000ull
#define ZCP_CADENCE_LEAD_MAX_NS 500000ull

struct zcp_cadence_est {
        uint64_t mean, dev; /* mean 0: no interval yet */
};

struct zcp_cadence {
        uint64_t last_burst; /* start of the last burst; 0 = none yet */
        uint64_t last_end;   /* end of the last job; 0 = none yet */
        struct zcp_cadence_est period, gap;
        uint64_t late;       /* average wake-up lateness */
        uint64_t bursts;
};

void zcp_cadence_init(struct zcp_cadence *c);

/* A job starts at `now`. */
void zcp_cadence_start(struct zcp_cadence *c, uint64_t now);

/* The job ends at `now`. */
void zcp_cadence_end(struct zcp_cadence *c, uint64_t now);

/* A member woke `late` ns after it was due (the job's wake-up call, or its timer). */
void zcp_cadence_lateness(struct zcp_cadence *c, uint64_t late);

/* The predicted start of the next burst; 0 when there is none. */
uint64_t zcp_cadence_next(const struct zcp_cadence *c);

/* How long before next() the members wake. */
uint64_t zcp_cadence_lead(const struct zcp_cadence *c);

/* Until when a member woken for next() spins before it sleeps (0 when next() is 0). */
uint64_t zcp_cadence_spin_until(const struct zcp_cadence *c);
