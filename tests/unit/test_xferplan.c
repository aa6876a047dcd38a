/* SPDX-License-Identifier: MIT */
/*
 * The transfer-mode plan of `gpu.transfer: auto` (src/infer/xferplan.c)
 * against a simulated GPU whose cost per mode changes with the load: idle
 * (zero-copy 6 % faster, as measured on the H200 at 1080p), loaded (copy 25 %
 * more throughput, i.e. 20 % less time per frame, as measured with 16 streams
 * of 1080p), idle again. Each frame's GPU time is made up by the test (a few
 * percent of noise and the odd frame stuck behind other work) and fed back as
 * cuda.c does after wait().
 *
 * What must hold: the plan ends in the better mode within a bounded number of
 * frames after each change and stays there; probes cost at most
 * (SETTLE + WINDOW) / PERIOD of the frames; modes that differ by less than the
 * hysteresis are never switched between, whatever the noise; the time spent
 * per frame once settled is within 5 % of the better fixed mode's (the issue's
 * target); frames recorded a frame late (one more in flight) change none of
 * that; the counts add up.
 */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "infer/xferplan.h"

#define US 1000ull
#define ZC 0u
#define COPY 1u
#define PROBE_LEN (ZCP_XFERPLAN_SETTLE + ZCP_XFERPLAN_WINDOW)
/* After a change: the worst case is a probe that straddles it, a full interval, then the deciding probe. */
#define BOUND (ZCP_XFERPLAN_WINDOW + PROBE_LEN + ZCP_XFERPLAN_PERIOD_MAX + PROBE_LEN)

struct gpu {
        uint64_t cost[2];      /* ns per frame in each mode */
        uint32_t noise_pct;    /* uniform +- this share */
        uint32_t outlier_every;/* every n-th frame (about) takes 4x: stuck behind other work; 0: none */
        uint64_t rng;
};

static uint64_t next_rand(struct gpu *g)
{
        g->rng ^= g->rng << 13;
        g->rng ^= g->rng >> 7;
        g->rng ^= g->rng << 17;
        return g->rng;
}

static uint64_t gpu_time(struct gpu *g, uint32_t mode)
{
        const uint64_t base = g->cost[mode], r = next_rand(g);
        const uint64_t span = base * g->noise_pct / 100;
        uint64_t t = base - span + (span ? r % (2 * span + 1) : 0);

        if (g->outlier_every && (r >> 32) % g->outlier_every == 0)
                t *= 4;
        return t;
}

static void check_counts(const struct zcp_xferplan *p)
{
        CHECK(p->frames == p->mode_frames[0] + p->mode_frames[1]);
        CHECK(p->frames == p->steady + p->probe_frames + p->stray);
        CHECK(p->switches <= p->probes);
        CHECK(p->probe_frames <= p->probes * PROBE_LEN);
        /* Every probe but an unfinished last one ran its whole length. */
        CHECK(p->probe_frames + PROBE_LEN > p->probes * PROBE_LEN);
}

struct phase_out {
        uint64_t settled_at;   /* frames after the phase began when the plan was last seen entering `want` */
        uint32_t switches;
        uint64_t probe_frames; /* of this phase */
        uint64_t time_after;   /* GPU time spent after BOUND frames of the phase */
        uint64_t fixed_after;  /* the same frames of the better fixed mode on a GPU alike */
        uint64_t n_after;
};

/*
 * Runs n frames on g; `lag` 1 records each frame one submit later (two in
 * flight). Checks that the plan is in `want` from BOUND frames on.
 */
static struct phase_out phase(struct zcp_xferplan *p, struct gpu *g, uint32_t n, uint32_t want, uint32_t lag,
                              const char *name)
{
        struct phase_out o = { 0 };
        struct gpu fixed = *g;
        const uint64_t probe0 = p->probe_frames, sw0 = p->switches;
        uint32_t pend_mode = 0;
        uint64_t pend_ns = 0;
        bool pending = false;

        for (uint32_t i = 0; i < n; i++) {
                const uint32_t mode = zcp_xferplan_next(p);
                const uint64_t t = gpu_time(g, mode);

                if (lag) {
                        if (pending)
                                (void)zcp_xferplan_record(p, pend_mode, pend_ns);
                        pend_mode = mode;
                        pend_ns = t;
                        pending = true;
                } else {
                        (void)zcp_xferplan_record(p, mode, t);
                }
                if (p->cur != want)
                        o.settled_at = i + 1;
                if (i >= BOUND) {
                        CHECK_MSG(p->cur == want, "%s: frame %u (bound %u): plan in mode %u, the better is %u", name,
                                  i, BOUND, p->cur, want);
                        o.time_after += t;
                        o.fixed_after += gpu_time(&fixed, want);
                        o.n_after++;
                }
        }
        if (pending)
                (void)zcp_xferplan_record(p, pend_mode, pend_ns);
        o.switches = (uint32_t)(p->switches - sw0);
        o.probe_frames = p->probe_frames - probe0;
        check_counts(p);
        printf("%-16s %6u frames: in the better mode after %5llu, switches %u, probe frames %llu (%.2f %%)\n", name,
               n, (unsigned long long)o.settled_at, o.switches, (unsigned long long)o.probe_frames,
               100.0 * (double)o.probe_frames / n);
        return o;
}

/* Idle -> loaded -> idle: the better mode within BOUND frames of each change, within 5 % of it after. */
static void test_load_changes(uint32_t lag)
{
        struct gpu idle = { .cost = { 126 * US, 134 * US }, .noise_pct = 2, .outlier_every = 200, .rng = 0x1234567 };
        struct gpu loaded = { .cost = { 500 * US, 400 * US }, .noise_pct = 5, .outlier_every = 50, .rng = 0x7654321 };
        struct zcp_xferplan p;
        struct phase_out a, b, c;
        const uint32_t n = 20000;

        printf("load changes%s:\n", lag ? " (a frame in flight)" : "");
        zcp_xferplan_init(&p, ZC);   /* the start-up test on the idle GPU chose zero-copy */
        CHECK(zcp_xferplan_next(&p) == ZC);
        a = phase(&p, &idle, n, ZC, lag, "idle");
        CHECK(a.switches == 0 && a.settled_at == 0);
        b = phase(&p, &loaded, n, COPY, lag, "loaded");
        CHECK(b.switches == 1);
        CHECK(b.settled_at <= BOUND);
        c = phase(&p, &idle, n, ZC, lag, "idle again");
        CHECK(c.switches == 1);
        CHECK(c.settled_at <= BOUND);

        /* Probes cost at most (SETTLE + WINDOW) / PERIOD of the frames (plus one probe). */
        CHECK(p.probes >= 3);
        CHECK_MSG(p.probe_frames * ZCP_XFERPLAN_PERIOD <= (p.frames + ZCP_XFERPLAN_PERIOD) * PROBE_LEN,
                  "probe frames %llu of %llu", (unsigned long long)p.probe_frames, (unsigned long long)p.frames);
        /* Once settled: within 5 % of the better fixed mode on a GPU with the same noise and outliers. */
        CHECK(a.n_after && b.n_after && c.n_after);
        CHECK(a.time_after * 100 <= a.fixed_after * 105);
        CHECK(b.time_after * 100 <= b.fixed_after * 105);
        CHECK(c.time_after * 100 <= c.fixed_after * 105);
        printf("  once settled, time per frame / the better fixed mode's: idle %.4f, loaded %.4f, idle again %.4f\n",
               (double)a.time_after / a.fixed_after, (double)b.time_after / b.fixed_after,
               (double)c.time_after / c.fixed_after);
        if (lag)
                CHECK(p.stray > 0);
        else
                CHECK(p.stray == 0);
        check_counts(&p);
        printf("  totals: %llu frames (zero-copy %llu, copy %llu), %llu probes, %llu switches, %llu stray\n",
               (unsigned long long)p.frames, (unsigned long long)p.mode_frames[ZC],
               (unsigned long long)p.mode_frames[COPY], (unsigned long long)p.probes,
               (unsigned long long)p.switches, (unsigned long long)p.stray);
}

/*
 * Noise below the hysteresis: with a steady GPU's noise (+-2 %) and frames
 * stuck behind other work, two equal modes are never switched between, nor is
 * a mode left for one 1 % slower; from the one 1 % slower the plan may move
 * to the faster (harmless, and once), never back.
 */
static void test_noise(void)
{
        static const struct {
                uint64_t cost[2];
                uint32_t start, max_switches;
                const char *what;
        } cases[] = {
                { { 200 * US, 200 * US }, ZC, 0, "equal, from zero-copy" },
                { { 200 * US, 200 * US }, COPY, 0, "equal, from copy" },
                { { 200 * US, 202 * US }, ZC, 0, "from the 1 % faster" },
                { { 202 * US, 200 * US }, COPY, 0, "from the 1 % faster" },
                { { 202 * US, 200 * US }, ZC, 1, "from the 1 % slower" },
        };

        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
                struct gpu g = { .cost = { cases[c].cost[0], cases[c].cost[1] }, .noise_pct = 2, .outlier_every = 20,
                                 .rng = 0xabcdef + c };
                const uint32_t faster = g.cost[1] < g.cost[0] ? COPY : ZC;
                struct zcp_xferplan p;
                uint64_t probes = 0;

                zcp_xferplan_init(&p, cases[c].start);
                for (uint32_t i = 0; i < 200000; i++) {
                        const uint32_t mode = zcp_xferplan_next(&p);
                        const enum zcp_xferplan_event ev = zcp_xferplan_record(&p, mode, gpu_time(&g, mode));

                        if (ev == ZCP_XFERPLAN_SWITCHED)
                                CHECK_MSG(p.switches <= cases[c].max_switches && p.cur == faster,
                                          "%s: frame %u: switch %llu to %u on medians %llu -> %llu", cases[c].what, i,
                                          (unsigned long long)p.switches, p.cur, (unsigned long long)p.med_cur,
                                          (unsigned long long)p.med_other);
                        probes += ev == ZCP_XFERPLAN_PROBE;
                }
                CHECK(p.switches <= cases[c].max_switches);
                CHECK(probes == p.probes && p.probes >= 80);
                /* Kept probes back off: a stable stream probes every PERIOD_MAX frames. */
                CHECK(p.interval == ZCP_XFERPLAN_PERIOD_MAX);
                check_counts(&p);
                printf("noise (%s): 200000 frames, %llu probes, %llu switches\n", cases[c].what,
                       (unsigned long long)p.probes, (unsigned long long)p.switches);
        }
}

/* The decision is the hysteresis: 2 % better stays, 4 % better switches (exact times, no noise). */
static void test_threshold(void)
{
        static const struct {
                uint64_t other;
                bool switch_;
        } cases[] = { { 98 * US, false }, { 97 * US + 1, false }, { 96 * US, true }, { 50 * US, true },
                      { 100 * US, false }, { 150 * US, false } };

        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
                struct zcp_xferplan p;
                enum zcp_xferplan_event ev = ZCP_XFERPLAN_NONE;
                uint32_t i = 0, probe_at = 0;

                zcp_xferplan_init(&p, COPY);
                for (; i < 10000 && ev != ZCP_XFERPLAN_KEPT && ev != ZCP_XFERPLAN_SWITCHED; i++) {
                        const uint32_t mode = zcp_xferplan_next(&p);

                        ev = zcp_xferplan_record(&p, mode, mode == COPY ? 100 * US : cases[c].other);
                        if (ev == ZCP_XFERPLAN_PROBE) {
                                CHECK(probe_at == 0);
                                probe_at = i + 1;
                                CHECK(zcp_xferplan_next(&p) == ZC);
                        }
                }
                /* The first probe after PERIOD frames, the decision after SETTLE + WINDOW more. */
                CHECK(probe_at == ZCP_XFERPLAN_PERIOD);
                CHECK(i == ZCP_XFERPLAN_PERIOD + PROBE_LEN);
                CHECK(ev == (cases[c].switch_ ? ZCP_XFERPLAN_SWITCHED : ZCP_XFERPLAN_KEPT));
                CHECK(p.cur == (cases[c].switch_ ? ZC : COPY));
                CHECK(zcp_xferplan_next(&p) == p.cur);
                CHECK(p.med_cur == 100 * US && p.med_other == cases[c].other);
                CHECK(p.interval == (cases[c].switch_ ? ZCP_XFERPLAN_PERIOD : 2 * ZCP_XFERPLAN_PERIOD));
                check_counts(&p);
        }
        printf("threshold: 2 %% and 2.999 %% better kept, 4 %% and 50 %% better switched\n");
}

/* A switch back needs the same evidence: alternating costs switch once per change, never in between. */
static void test_no_thrash(void)
{
        struct gpu g = { .cost = { 100 * US, 200 * US }, .noise_pct = 3, .rng = 99 };
        struct zcp_xferplan p;
        uint32_t switches = 0;

        zcp_xferplan_init(&p, ZC);
        for (uint32_t round = 0; round < 10; round++) {
                const uint64_t sw0 = p.switches;

                /* Each round the other mode becomes the better one by 2x. */
                g.cost[0] = round % 2 ? 100 * US : 200 * US;
                g.cost[1] = round % 2 ? 200 * US : 100 * US;
                for (uint32_t i = 0; i < 2 * BOUND; i++) {
                        const uint32_t mode = zcp_xferplan_next(&p);
                        (void)zcp_xferplan_record(&p, mode, gpu_time(&g, mode));
                }
                CHECK(p.switches == sw0 + 1);
                CHECK(p.cur == (round % 2 ? ZC : COPY));
                switches++;
        }
        check_counts(&p);
        printf("no thrash: %u load changes, %llu switches, %llu probes\n", switches,
               (unsigned long long)p.switches, (unsigned long long)p.probes);
}

/*
 * Epochs: two plans fed by one clock at different frame rates (30 and 47 frames per epoch, as two
 * streams of one GPU at different rates) start every probe on the first frame of an epoch; a plan
 * whose probe is due waits for the next epoch; check_counts still adds up.
 */
static void test_epochs(void)
{
        static const uint32_t rate[2] = { 30, 47 };
        struct zcp_xferplan p[2];
        uint64_t probe_epoch[2][64];
        uint32_t probes[2] = { 0, 0 };

        for (int k = 0; k < 2; k++) {
                zcp_xferplan_init(&p[k], 0);
                for (uint64_t f = 0; f < 40ull * rate[k] && probes[k] < 64; f++) {
                        const uint64_t epoch = f / rate[k];

                        zcp_xferplan_set_epoch(&p[k], epoch);
                        if (zcp_xferplan_record(&p[k], zcp_xferplan_next(&p[k]), 1000) == ZCP_XFERPLAN_PROBE) {
                                /* The first frame of its epoch, never earlier in one. */
                                CHECK_MSG(f % rate[k] == 0, "plan %d probed at frame %llu, inside epoch %llu", k,
                                          (unsigned long long)f, (unsigned long long)epoch);
                                CHECK(p[k].since == 0 || p[k].probing);
                                probe_epoch[k][probes[k]++] = epoch;
                        }
                }
                check_counts(&p[k]);
        }
        /* The first probe is due after 300 frames: at 30 a frame epoch 9's last frame, so epoch 10's first;
         * at 47, inside epoch 6, so epoch 7's first. Plans due in the same epoch thus start together. */
        CHECK(probes[0] >= 1 && probes[1] >= 1);
        CHECK_MSG(probe_epoch[0][0] == 10 && probe_epoch[1][0] == 7, "first probes in epochs %llu and %llu",
                  (unsigned long long)probe_epoch[0][0], (unsigned long long)probe_epoch[1][0]);
        printf("epochs: probes start on an epoch's first frame (first in epochs %llu and %llu at 30 and 47 "
               "frames an epoch)\n", (unsigned long long)probe_epoch[0][0], (unsigned long long)probe_epoch[1][0]);
}

int main(void)
{
        test_threshold();
        test_load_changes(0);
        test_load_changes(1);
        test_noise();
        test_no_thrash();
        test_epochs();
        printf("xferplan: all checks passed\n");
        return 0;
}
