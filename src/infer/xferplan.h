/* SPDX-License-Identifier: MIT */
/*
 * zcpipe: which transfer mode the next frame uses (`gpu.transfer: auto`).
 *
 * The cuda backend has two ways to get a frame to the GPU: zero-copy (the
 * kernels read the mapped host memory over PCIe) and copy (a copy engine
 * moves it into device memory first). On an idle GPU zero-copy is faster
 * (6-15 % on the H200); with many streams at full rate the zero-copy kernels
 * stall the SMs on PCIe reads while copies overlap on the copy engines, and
 * copy gave 25 % more throughput with 16 streams of 1080p. A start-up test on
 * the idle GPU cannot know the load to come, so `auto` starts with that
 * test's choice and re-decides from what it measures while it runs.
 *
 * The plan is pure arithmetic on each completed frame's measured time (the
 * cuda backend: submit to completion as its wait sees it) and the mode it
 * ran in, kept apart from CUDA so that the unit test can drive it with a
 * made-up GPU whose load changes (constants per stream; see "One plan per
 * GPU" below for n streams):
 *
 *   - Frames run in the current mode. The last ZCP_XFERPLAN_WINDOW of them
 *     (the baseline) are kept.
 *   - Every `interval` frames of the current mode (ZCP_XFERPLAN_PERIOD at
 *     first), with a full baseline, the other mode is probed: the next
 *     ZCP_XFERPLAN_SETTLE + ZCP_XFERPLAN_WINDOW frames run in it, the first
 *     SETTLE not counted (the first frames after a change pay for the other
 *     graph's first launch and caches).
 *   - Then the median of the probe is compared with the median of the
 *     baseline: the plan switches when the other mode took less time by more
 *     than ZCP_XFERPLAN_HYSTERESIS_PCT percent of the current mode's time,
 *     and goes back to the current mode otherwise. Medians ignore the odd
 *     frame that waited behind something else. A switch back needs the same
 *     evidence in the other direction, and a decision is made at most once a
 *     probe, so the plan cannot thrash.
 *   - A probe that did not switch doubles the interval (at most
 *     ZCP_XFERPLAN_PERIOD_MAX); a switch sets it back to PERIOD. A stable
 *     stream thus probes (SETTLE + WINDOW) / PERIOD_MAX = 0.75 % of its
 *     frames, below what a p99 sees, and a load that changes is followed
 *     within PERIOD_MAX + 2 x (SETTLE + WINDOW) + WINDOW frames (a probe
 *     or a baseline that straddles the change may miss it; 82 s at 30 fps,
 *     a few seconds at full rate), the test's bound.
 *
 * Constants: the hysteresis, 3 %, must stay under the 5 % (within 5 %
 * of the better fixed mode): a mode that is better by less than the
 * hysteresis is not switched to, so the hysteresis is what auto may lose; the
 * median of 16 frames of a steady GPU varies by well under 1 %. PERIOD 300
 * frames is 10 s at 30 fps (a real-time stream barely probes) and a fraction
 * of a second at full rate (a loaded GPU is found within the first second).
 *
 * One plan per GPU (zcp_xferplan_set_users): every auto stream of a GPU
 * follows the same plan and feeds it, so that a probe moves them all to the
 * other mode and measures what the GPU does when all of them use it. Plans of
 * their own failed on the H200 (run 12b, and run 13 with probes gated to the
 * same second): a stream that tried zero-copy among copy streams found the
 * SMs' PCIe reads uncontended (416 us against copy's 670) and went back,
 * although all in copy were 18 % faster than all in zero-copy; what is best
 * for one stream given the others is not what is best for the GPU. With
 * n users the window, settle, period and maximum period are n times the
 * constants below (the same frames per stream, the same share of probes), up
 * to ZCP_XFERPLAN_USERS_MAX; the window's frames come from all streams, in the
 * same mix in the baseline and the probe, so their medians compare.
 *
 * Frames recorded in the other mode outside a probe (submitted before the
 * plan decided: one per stream in flight) and frames of the current mode
 * during a probe are counted and otherwise ignored, so that callers with
 * frames in flight cannot skew a window.
 *
 * Modes are 0 and 1 (the caller's: cuda.c uses 0 = zero-copy, 1 = copy).
 * Deterministic; nothing is allocated; not thread-safe (cuda.c holds the
 * GPU's plan under a mutex).
 */
#ifndef ZCP_XFERPLAN_H
#define ZCP_XFERPLAN_H

#include <stdbool.h>
#include <stdint.h>

#define ZCP_XFERPLAN_WINDOW 16
#define ZCP_XFERPLAN_SETTLE 2
#define ZCP_XFERPLAN_PERIOD 300u
#define ZCP_XFERPLAN_PERIOD_MAX 2400u
#define ZCP_XFERPLAN_HYSTERESIS_PCT 3u
#define ZCP_XFERPLAN_USERS_MAX 32u
#define ZCP_XFERPLAN_WINDOW_MAX (ZCP_XFERPLAN_WINDOW * ZCP_XFERPLAN_USERS_MAX)

enum zcp_xferplan_event {
        ZCP_XFERPLAN_NONE,        /* nothing decided */
        ZCP_XFERPLAN_PROBE,       /* a probe starts: next() now answers the other mode */
        ZCP_XFERPLAN_KEPT,        /* a probe ended, the current mode stays */
        ZCP_XFERPLAN_SWITCHED,    /* a probe ended, the other mode is now the current one */
};

struct zcp_xferplan {
        uint32_t cur;                            /* the mode in use: 0 or 1 */
        bool probing;                            /* next() answers the other mode */
        uint32_t settle;                         /* probe frames still to discard */
        uint32_t users, users_next;              /* streams sharing the plan: now, after the probe */
        uint32_t window, settle_len;             /* WINDOW and SETTLE x users */
        uint64_t period, period_max;             /* PERIOD and PERIOD_MAX x users */
        uint64_t base[ZCP_XFERPLAN_WINDOW_MAX];  /* the current mode's last frames, ns */
        uint32_t nbase, ibase;
        uint64_t probe[ZCP_XFERPLAN_WINDOW_MAX]; /* the probe's counted frames, ns */
        uint32_t nprobe;
        uint64_t since;                          /* current-mode frames since the last decision */
        uint64_t interval;                       /* frames between probes now */
        /* The last probe's medians (ns), for the log: the current mode's then, the other's. */
        uint64_t med_cur, med_other;
        /* Counters: frames = mode_frames[0] + mode_frames[1] = steady + probe_frames + stray. */
        uint64_t frames, mode_frames[2];
        uint64_t steady;                         /* run in the current mode outside a probe */
        uint64_t probe_frames;                   /* run in the other mode as part of a probe */
        uint64_t stray;                          /* recorded outside their window (frames in flight) */
        uint64_t probes, switches;
};

void zcp_xferplan_init(struct zcp_xferplan *p, uint32_t initial);

/*
 * n streams (at least 1, at most ZCP_XFERPLAN_USERS_MAX counted) share the
 * plan from now on: the window, settle, period and maximum period scale by n.
 * During a probe the change waits for its decision; otherwise it applies at
 * once and the baseline starts again (its frames came from another mix).
 */
void zcp_xferplan_set_users(struct zcp_xferplan *p, uint32_t n);

/* The mode the next frame is to run in. */
uint32_t zcp_xferplan_next(const struct zcp_xferplan *p);

/*
 * A frame completed: it ran in `mode` and its GPU stage took `ns`. Returns
 * what the plan decided on it; after ZCP_XFERPLAN_SWITCHED, p->cur is the new
 * mode and med_cur / med_other the medians that decided (old mode, new mode).
 */
enum zcp_xferplan_event zcp_xferplan_record(struct zcp_xferplan *p, uint32_t mode, uint64_t ns);

#endif
