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
 * frames after each change and stays there; the first probe comes 2 x
 * WINDOW frames in, the next PERIOD later; probes cost at most
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

        /* Probes cost at most (SETTLE + WINDOW) / PERIOD of the frames (plus the early first probe and one
         * more). */
        CHECK(p.probes >= 3);
        CHECK_MSG(p.probe_frames * ZCP_XFERPLAN_PERIOD <= (p.frames + 2 * ZCP_XFERPLAN_PERIOD) * PROBE_LEN,
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
                /* The first probe after 2 x WINDOW frames (a window of warm-up, one of baseline), the
                 * decision after SETTLE + WINDOW more. */
                CHECK(probe_at == 2 * ZCP_XFERPLAN_WINDOW);
                CHECK(i == 2 * ZCP_XFERPLAN_WINDOW + PROBE_LEN);
                CHECK(ev == (cases[c].switch_ ? ZCP_XFERPLAN_SWITCHED : ZCP_XFERPLAN_KEPT));
                CHECK(p.cur == (cases[c].switch_ ? ZC : COPY));
                CHECK(zcp_xferplan_next(&p) == p.cur);
                CHECK(p.med_cur == 100 * US && p.med_other == cases[c].other);
                /* The early probe does not double the interval, kept or not. */
                CHECK(p.interval == ZCP_XFERPLAN_PERIOD);
                check_counts(&p);
                /* Then the next probe PERIOD frames after that decision; kept, it doubles the interval. */
                {
                        const uint32_t cur = p.cur;
                        uint32_t since = 0;
                        ev = ZCP_XFERPLAN_NONE;
                        while (ev != ZCP_XFERPLAN_PROBE && since < 10000) {
                                ev = zcp_xferplan_record(&p, cur, 100 * US);
                                since++;
                        }
                        CHECK(ev == ZCP_XFERPLAN_PROBE && since == ZCP_XFERPLAN_PERIOD);
                        for (uint32_t k = 0; k < PROBE_LEN; k++)
                                ev = zcp_xferplan_record(&p, 1 - cur, 100 * US);
                        CHECK(ev == ZCP_XFERPLAN_KEPT && p.cur == cur && p.interval == 2 * ZCP_XFERPLAN_PERIOD);
                        check_counts(&p);
                }
        }
        printf("threshold: 2 %% and 2.999 %% better kept, 4 %% and 50 %% better switched; the first probe after "
               "%u frames, the next %u after it\n", 2 * ZCP_XFERPLAN_WINDOW, ZCP_XFERPLAN_PERIOD);
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
 * One plan for a GPU's streams. A made-up GPU of n streams at full rate where
 * what is best for one stream is not best for all (as on the H200 with 4-16
 * streams of 1080p): with a share c of the streams in copy, a zero-copy frame takes
 * 500 - 200 c us (the fewer streams read over PCIe from the SMs, the faster
 * they do) and a copy frame 800 - 400 c us (the zero-copy streams' PCIe reads
 * slow the copies). All in zero-copy: 500 us a frame; all in copy: 400, the
 * better; every mix in between is worse than all in copy. Yet one stream
 * trying copy among zero-copy streams sees 750 against 475 and stays, and one
 * trying zero-copy among copy streams sees 325 against 450 and leaves.
 * Shared by all n streams (set_users(n)), the plan moves them all together
 * and ends in copy; plans of their own (opened at different times) stay in
 * zero-copy, 20 % slower. Then the load goes (zero-copy 126 us and copy
 * 134 us, whatever the mix) and the shared plan comes back to zero-copy.
 * Streams take turns, each with a frame in flight (recorded when its next is
 * submitted, a round later); the counts add up; streams that leave rescale
 * the plan without breaking a probe.
 */
struct mixgpu {
        uint32_t n, in_copy;     /* streams, of which in copy now */
        bool loaded;
        struct gpu noise;        /* noise and outliers only (cost set per frame) */
};

static uint64_t mix_time(struct mixgpu *m, uint32_t mode)
{
        const uint64_t c1000 = 1000ull * m->in_copy / m->n;   /* share in copy, per mille */

        if (!m->loaded)
                m->noise.cost[mode] = mode == COPY ? 134 * US : 126 * US;
        else
                m->noise.cost[mode] = mode == COPY ? 800 * US - 400 * US * c1000 / 1000 : 500 * US - 200 * US * c1000 / 1000;
        return gpu_time(&m->noise, mode);
}

/* Runs `rounds` rounds of n streams (plans[k] for stream k: all the same one when shared). Returns ns per round. */
static uint64_t mix_rounds(struct zcp_xferplan **plans, struct mixgpu *m, uint32_t rounds, uint32_t *mode_of,
                           uint64_t *ns_of)
{
        uint64_t total = 0;

        for (uint32_t r = 0; r < rounds; r++) {
                /* Each stream in turn: its frame in flight completes, it submits the next. */
                for (uint32_t k = 0; k < m->n; k++) {
                        if (ns_of[k])
                                (void)zcp_xferplan_record(plans[k], mode_of[k], ns_of[k]);
                        mode_of[k] = zcp_xferplan_next(plans[k]);
                        m->in_copy = 0;
                        for (uint32_t j = 0; j < m->n; j++)
                                m->in_copy += mode_of[j] == COPY;
                        ns_of[k] = mix_time(m, mode_of[k]);
                        total += ns_of[k];
                }
        }
        return total / rounds;
}

static void test_shared(void)
{
        enum { N = 8 };
        struct zcp_xferplan shared, own[N], *plans[N];
        struct mixgpu m = { .n = N, .loaded = true, .noise = { .noise_pct = 3, .outlier_every = 100, .rng = 77 } };
        uint32_t mode_of[N] = { 0 }, own_copy = 0;
        uint64_t ns_of[N] = { 0 }, loaded_ns, own_ns, idle_ns;
        /* Per stream as many frames as the single-stream bound allows, twice. */
        const uint32_t rounds = 2 * BOUND;

        /* Plans of their own, for contrast: the GPU is slower than all in copy. */
        for (uint32_t k = 0; k < N; k++) {
                zcp_xferplan_init(&own[k], ZC);
                plans[k] = &own[k];
                /* Streams opened at different times probe at different times: each past its early first
                 * probe (copy alone among zero-copy streams: 750 us against 475, kept), then staggered. */
                for (uint32_t i = 0; i < 2 * ZCP_XFERPLAN_WINDOW + PROBE_LEN + k * ZCP_XFERPLAN_PERIOD / N; i++) {
                        const uint32_t mode = zcp_xferplan_next(&own[k]);
                        (void)zcp_xferplan_record(&own[k], mode, mode == COPY ? 750 * US : 475 * US);
                }
                CHECK(own[k].probes == 1 && own[k].switches == 0 && !own[k].probing);
        }
        (void)mix_rounds(plans, &m, rounds, mode_of, ns_of);
        own_ns = mix_rounds(plans, &m, BOUND, mode_of, ns_of);
        for (uint32_t k = 0; k < N; k++)
                own_copy += own[k].cur == COPY;
        CHECK(own_ns >= N * 450 * US);   /* why the plan is shared */

        /* One plan for the GPU: all move to copy within the bound (in frames per stream) and stay. */
        memset(ns_of, 0, sizeof(ns_of));
        zcp_xferplan_init(&shared, ZC);
        zcp_xferplan_set_users(&shared, N);
        CHECK(shared.window == N * ZCP_XFERPLAN_WINDOW && shared.settle_len == N * ZCP_XFERPLAN_SETTLE);
        CHECK(shared.period == N * ZCP_XFERPLAN_PERIOD && shared.interval == N * ZCP_XFERPLAN_PERIOD);
        for (uint32_t k = 0; k < N; k++)
                plans[k] = &shared;
        /* The start-up choice corrected by the early first probe: 2 x WINDOW + SETTLE + WINDOW frames a
         * stream, and the frames in flight when the probe began and ended. */
        (void)mix_rounds(plans, &m, 2 * ZCP_XFERPLAN_WINDOW + PROBE_LEN + 3, mode_of, ns_of);
        CHECK_MSG(shared.cur == COPY && shared.switches == 1 && shared.probes == 1,
                  "shared plan in %u after %llu probes", shared.cur, (unsigned long long)shared.probes);
        (void)mix_rounds(plans, &m, rounds, mode_of, ns_of);
        CHECK_MSG(shared.cur == COPY && shared.switches == 1, "shared plan in %u after %llu switches", shared.cur,
                  (unsigned long long)shared.switches);
        loaded_ns = mix_rounds(plans, &m, BOUND, mode_of, ns_of);
        CHECK(shared.cur == COPY && shared.switches == 1);
        /* Within 5 % of all in copy (400 us a frame, N frames a round), probes included. */
        CHECK_MSG(loaded_ns * 100 <= N * 400 * US * 105, "%.1f us a frame", (double)loaded_ns / N / 1e3);

        /* The load goes: back to zero-copy within the bound. */
        m.loaded = false;
        (void)mix_rounds(plans, &m, rounds, mode_of, ns_of);
        CHECK(shared.cur == ZC && shared.switches == 2);
        idle_ns = mix_rounds(plans, &m, BOUND, mode_of, ns_of);
        CHECK(idle_ns * 100 <= N * 126 * US * 105);

        /* Streams leave (8 -> 3) in the middle of a probe: the change waits for the decision. */
        m.loaded = true;
        for (uint32_t r = 0; !shared.probing && r < 10 * BOUND; r++)
                (void)mix_rounds(plans, &m, 1, mode_of, ns_of);
        CHECK(shared.probing);
        zcp_xferplan_set_users(&shared, 3);
        CHECK(shared.users == N && shared.window == N * ZCP_XFERPLAN_WINDOW);
        m.n = 3;
        while (shared.probing)
                (void)mix_rounds(plans, &m, 1, mode_of, ns_of);
        CHECK(shared.users == 3 && shared.window == 3 * ZCP_XFERPLAN_WINDOW && shared.nbase == 0);
        CHECK(shared.period == 3 * ZCP_XFERPLAN_PERIOD);
        CHECK(shared.interval >= shared.period && shared.interval <= shared.period_max);
        (void)mix_rounds(plans, &m, rounds, mode_of, ns_of);
        CHECK(shared.cur == COPY);
        CHECK(shared.frames == shared.mode_frames[0] + shared.mode_frames[1]);
        CHECK(shared.frames == shared.steady + shared.probe_frames + shared.stray);
        CHECK(shared.stray > 0);   /* a frame in flight per stream at each change */
        printf("shared plan, %d streams: all in copy under load (%.1f us a frame, all in copy 400), back to "
               "zero-copy when idle (%.1f us, 126); plans of their own: %u of %d in copy, %.1f us a frame\n",
               N, (double)loaded_ns / N / 1e3, (double)idle_ns / N / 1e3, own_copy, N, (double)own_ns / N / 1e3);
}

int main(void)
{
        test_threshold();
        test_load_changes(0);
        test_load_changes(1);
        test_noise();
        test_no_thrash();
        test_shared();
        printf("xferplan: all checks passed\n");
        return 0;
}
