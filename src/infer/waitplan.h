/* SPDX-License-Identifier: MIT */
/*
 * zcpipe: when to wake up for a GPU result (the `sync: hybrid` default).
 *
 * Spinning on the completion event answers within a microsecond of the GPU
 * finishing but burns a core; a blocking-sync event costs nothing while
 * waiting but wakes 50-130 us late (the driver's interrupt and the scheduler).
 * The hybrid wait sleeps until just before the predicted completion and then
 * spins, so it gets spin's latency for a few microseconds of CPU per frame.
 *
 * The plan is pure arithmetic on times, kept apart from CUDA so that the unit
 * tests can drive it with made-up GPUs and schedulers:
 *
 *   predicted = the shortest of the last ZCP_WAITPLAN_WINDOW measured
 *               submit -> complete durations (a frame that waited behind other
 *               work is slower, never faster, so the minimum is the safe guess)
 *   wake at   = submit + predicted - guard, where guard covers the sleep's own
 *               lateness: 5 us + 1.5 x the worst lateness of the last window
 *               of frames (a frame that did not sleep counts as on time)
 *
 * Measured durations come from frames where the spin saw the work unfinished
 * at least once (the completion time is then known to a poll). A frame found
 * already complete at wake-up was overslept: its duration is only known to be
 * shorter, so the plan records the smaller of (found - submit - guard) and
 * three quarters of (found - submit) instead, which pulls the prediction down
 * until spinning measures it again. A GPU that became
 * faster is thus followed within a frame or two, one that became slower within
 * a window (the old minimum ages out; meanwhile the spin is longer).
 *
 * The spin is bounded: past `spin_until` the caller blocks on the event
 * instead (a GPU shared with other streams, a preempted context), and that
 * frame's duration is not recorded as exact.
 */
#ifndef ZCP_WAITPLAN_H
#define ZCP_WAITPLAN_H

#include <stdbool.h>
#include <stdint.h>

#define ZCP_WAITPLAN_WINDOW 16
#define ZCP_WAITPLAN_GUARD_MIN_NS 5000u        /* the guard's floor */
#define ZCP_WAITPLAN_SPIN_MIN_NS 250000u       /* spin at least this long before blocking */

struct zcp_waitplan {
        uint64_t dur[ZCP_WAITPLAN_WINDOW];      /* recent submit -> complete, ns */
        uint64_t late[ZCP_WAITPLAN_WINDOW];     /* recent wake-up lateness, ns */
        uint32_t ndur, idur, nlate, ilate;
        /* Counters (for the benchmark and the tests). */
        uint64_t frames, slept, overslept, blocked;
};

void zcp_waitplan_init(struct zcp_waitplan *p);

/* The guard subtracted from the predicted completion, ns. */
uint64_t zcp_waitplan_guard(const struct zcp_waitplan *p);

/*
 * When to wake for work submitted at `submit`: 0 when there is no prediction
 * yet (spin from the start), else the absolute time to sleep until (which may
 * already be past: then the caller spins at once).
 */
uint64_t zcp_waitplan_wake_at(const struct zcp_waitplan *p, uint64_t submit);

/* The time past which the caller stops spinning and blocks. */
uint64_t zcp_waitplan_spin_until(const struct zcp_waitplan *p, uint64_t submit, uint64_t spin_start);

/*
 * After the wait: `woke` = when the sleep returned (0 if the caller did not
 * sleep), `asked` = the wake_at it slept until, `done` = when the caller saw the
 * work complete, `polled_busy` = the spin saw it unfinished at least once,
 * `blocked` = the caller gave up spinning and blocked.
 */
void zcp_waitplan_record(struct zcp_waitplan *p, uint64_t submit, uint64_t asked, uint64_t woke, uint64_t done,
                         bool polled_busy, bool blocked);

#endif
