/* SPDX-License-Identifier: MIT */
/*
 * zcpipe: which transfer mode the next frame uses (`gpu.transfer: auto`).
 *
 * The cuda backend gets a frame to the GPU by zero-copy (the kernels read the
 * mapped host memory over PCIe) or copy (a copy engine moves it into device
 * memory first). Zero-copy wins on an idle GPU; with many streams at full rate
 * the copy engines can do better. A start-up test cannot know the load to
 * come, so `auto` starts with its choice and re-decides from the measured time
 * of each completed frame (submit to completion) and the mode it ran in. Pure
 * arithmetic, apart from CUDA, so that the unit test drives it with a made-up
 * GPU whose load changes:
 *
 *   - Frames run in the current mode; the last WINDOW of them are the baseline.
 *   - The first probe comes as soon as the baseline is full, 2 x WINDOW frames
 *     in (the first WINDOW warm-up): the start-up choice is checked against
 *     the load within a second of the streams' start, not PERIOD frames later.
 *     Then every `interval` frames (PERIOD at first), with a full baseline, the
 *     next SETTLE + WINDOW frames run in the other mode (the probe), the first
 *     SETTLE not counted (a change's first frames pay for cold caches).
 *   - The plan switches when the probe's median is lower than the baseline's
 *     by more than HYSTERESIS_PCT % of the current mode's, else it goes back.
 *     One decision per probe, the same evidence needed either way: no thrash.
 *   - A probe that did not switch doubles the interval (up to PERIOD_MAX; the
 *     first probe leaves it at PERIOD); a switch resets it. A stable stream probes 0.75 % of its frames; a changed
 *     load is followed within PERIOD_MAX + 2 x (SETTLE + WINDOW) + WINDOW
 *     frames.
 *
 * The hysteresis (3 %) is what auto may lose against the better fixed mode;
 * PERIOD (300 frames) is 10 s at 30 fps and a fraction of a second at full
 * rate. (With 16 streams of a GPU at 30 fps the first probe came 10 s after
 * their start when it waited for PERIOD x 16 frames; now 1 s.)
 *
 * One plan per GPU (zcp_xferplan_set_users): every auto stream of a GPU feeds
 * and follows the same plan, so a probe moves them all and measures the GPU
 * with all of them in the other mode. (A stream probing alone finds the other
 * mode as it is when the rest stay put: zero-copy among copy streams sees
 * uncontended PCIe reads, and streams end in a mix slower than all in copy.)
 * With n users WINDOW, SETTLE, PERIOD and PERIOD_MAX are n times the constants
 * below, up to USERS_MAX. Frames recorded in the other mode outside a probe
 * and frames of the current mode during one (in flight when the plan decided)
 * are counted and otherwise ignored.
 *
 * Modes are 0 and 1 (cuda.c: 0 = zero-copy, 1 = copy). Deterministic; nothing
 * is allocated; not thread-safe (cuda.c holds the GPU's plan under a mutex).
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
