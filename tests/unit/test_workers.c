/* SPDX-License-Identifier: MIT */
/*
 * workers.h: every share of every job runs exactly once with the right index
 * and count, the caller sees what the shares wrote and the shares see what the
 * caller wrote before run; jobs back to back (spinning workers) and after a
 * pause (sleeping workers); teams of 1 and NULL run on the caller; bad counts.
 * Open jobs (zcp_workers_run_open): share 0 on the caller, no index twice,
 * every queued item done once and visible to the caller, whichever members
 * were awake, mixed with classic jobs. Jobs at a cadence with the
 * wake-ahead on and off (test_ahead).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "core/workers.h"

struct job {
        uint32_t count;
        uint64_t round;                 /* written by the caller before each run */
        uint64_t seen[ZCP_WORKERS_MAX]; /* share i writes round + i */
        _Atomic uint32_t calls;
        pthread_t caller;
        _Atomic uint32_t on_caller;     /* shares that ran on the calling thread */
};

static void share(void *arg, uint32_t i, uint32_t n)
{
        struct job *j = arg;

        CHECK(n == j->count && i < n);
        j->seen[i] = j->round + i;
        atomic_fetch_add(&j->calls, 1);
        if (pthread_equal(pthread_self(), j->caller))
                atomic_fetch_add(&j->on_caller, 1);
}

static void run_rounds(struct zcp_workers *w, struct job *j, uint32_t rounds, long pause_ns)
{
        for (uint32_t r = 0; r < rounds; r++) {
                j->round = (uint64_t)r * 1000;
                memset(j->seen, 0xff, sizeof(j->seen));
                zcp_workers_run(w, share, j);
                for (uint32_t i = 0; i < j->count; i++)
                        CHECK_MSG(j->seen[i] == j->round + i, "round %u share %u of %u", r, i, j->count);
                if (pause_ns) {
                        struct timespec ts = { 0, pause_ns };
                        nanosleep(&ts, NULL);
                }
        }
}

#define OPEN_ITEMS 512

struct open_job {
        pthread_t caller;
        _Atomic uint32_t next;
        uint32_t items[OPEN_ITEMS];     /* item k gets round + k from whoever takes it */
        uint64_t round;
        _Atomic uint32_t ran[ZCP_WORKERS_MAX];
        _Atomic uint32_t shares, on_caller;
};

static void open_share(void *arg, uint32_t i, uint32_t n)
{
        struct open_job *j = arg;
        uint32_t k;

        CHECK(i < n);
        CHECK(atomic_fetch_add(&j->ran[i], 1) == 0);
        if (pthread_equal(pthread_self(), j->caller))
                atomic_fetch_add(&j->on_caller, 1);
        CHECK((i == 0) == pthread_equal(pthread_self(), j->caller));
        atomic_fetch_add(&j->shares, 1);
        while ((k = atomic_fetch_add(&j->next, 1)) < OPEN_ITEMS) {
                j->items[k] = (uint32_t)(j->round + k);
                for (volatile int spin = 0; spin < 200; spin++)
                        ;
        }
}

static void run_open_rounds(struct zcp_workers *w, uint32_t count, uint32_t rounds, long pause_ns)
{
        static struct open_job j;
        struct job classic = { .count = count, .caller = pthread_self() };

        for (uint32_t r = 0; r < rounds; r++) {
                memset(&j, 0, sizeof(j));
                j.caller = pthread_self();
                j.round = 1000ull * r;
                zcp_workers_run_open(w, open_share, &j);
                CHECK(atomic_load(&j.on_caller) == 1 && atomic_load(&j.ran[0]) == 1);
                CHECK(atomic_load(&j.shares) >= 1 && atomic_load(&j.shares) <= count);
                for (uint32_t i = 0; i < ZCP_WORKERS_MAX; i++)
                        CHECK(atomic_load(&j.ran[i]) <= (i < count ? 1u : 0u));
                for (uint32_t k = 0; k < OPEN_ITEMS; k++)
                        CHECK(j.items[k] == (uint32_t)(j.round + k));
                if (r % 4 == 3)
                        run_rounds(w, &classic, 1, 0); /* a classic job still runs every share */
                if (pause_ns) {
                        struct timespec ts = { 0, pause_ns };
                        nanosleep(&ts, NULL);
                }
        }
        CHECK(atomic_load(&classic.calls) == rounds / 4 * count);
}

/*
 * Jobs at a cadence (2 ms apart, longer than the members' spin): every share
 * runs, with the wake-ahead on (a team that fits the CPUs) and off
 * (ZCP_WORKERS_AHEAD=0, or more members than CPUs). Off, the members sleep
 * between jobs, so some share is run by a member its job woke; on, how many
 * is printed (it depends on the machine's timers, not asserted).
 */
static void test_ahead(void)
{
        const uint32_t cpus = zcp_workers_cpus(), count = cpus >= 2 ? 2 : 1;
        const uint32_t rounds = 60;

        for (int off = 0; off < 2; off++) {
                struct job j = { .count = count, .caller = pthread_self() };
                struct zcp_workers *w = NULL;

                if (off)
                        CHECK(setenv("ZCP_WORKERS_AHEAD", "0", 1) == 0);
                CHECK(zcp_workers_new(count, "zcp-test-a", &w) == 0);
                CHECK(zcp_workers_ahead(w) == (count > 1 && !off));
                run_rounds(w, &j, rounds, 2000 * 1000);
                CHECK(atomic_load(&j.calls) == rounds * count && atomic_load(&j.on_caller) == rounds);
                CHECK(zcp_workers_woken(w) <= rounds * (count - 1));
                if (off && count > 1)
                        CHECK_MSG(zcp_workers_woken(w) >= 1, "no member was woken in %u rounds 2 ms apart", rounds);
                printf("cadence 2 ms, team of %u, wake-ahead %s: %llu of %u shares by a member its job woke\n",
                       count, zcp_workers_ahead(w) ? "on" : "off", (unsigned long long)zcp_workers_woken(w),
                       rounds * (count - 1));
                zcp_workers_free(w);
                CHECK(unsetenv("ZCP_WORKERS_AHEAD") == 0);
        }
        /* More members than CPUs: off whatever the environment says. */
        struct zcp_workers *w = NULL;
        CHECK(zcp_workers_new(cpus + 1 > ZCP_WORKERS_MAX ? ZCP_WORKERS_MAX : cpus + 1, "zcp-test-a", &w) == 0);
        CHECK(!zcp_workers_ahead(w) || cpus + 1 > ZCP_WORKERS_MAX);
        zcp_workers_free(w);
        CHECK(!zcp_workers_ahead(NULL) && zcp_workers_woken(NULL) == 0);
}

int main(void)
{
        static const uint32_t teams[] = { 1, 2, 3, 4, 8 };
        struct zcp_workers *w = NULL;

        setvbuf(stdout, NULL, _IOLBF, 0);
        CHECK(zcp_workers_new(0, "t", &w) == -EINVAL && w == NULL);
        CHECK(zcp_workers_new(ZCP_WORKERS_MAX + 1, "t", &w) == -EINVAL && w == NULL);
        CHECK(zcp_workers_count(NULL) == 1);
        CHECK(zcp_workers_critical_ns(NULL) == 0);
        CHECK(zcp_workers_busy_ns(NULL) == 0);
        CHECK(zcp_workers_cpus() >= 1);
        zcp_workers_free(NULL);

        for (size_t t = 0; t < sizeof(teams) / sizeof(teams[0]); t++) {
                struct job j = { .count = teams[t], .caller = pthread_self() };

                CHECK(zcp_workers_new(teams[t], "zcp-test-w", &w) == 0);
                CHECK(zcp_workers_count(w) == teams[t]);
                CHECK(zcp_workers_critical_ns(w) == 0);
                run_rounds(w, &j, 300, 0);            /* back to back */
                run_rounds(w, &j, 20, 200 * 1000);   /* workers fall asleep in between */
                CHECK(atomic_load(&j.calls) == 320 * teams[t]);
                CHECK(atomic_load(&j.on_caller) == 320);
                /* Shares take time (at least the clock's resolution) only when there are threads. */
                CHECK(teams[t] == 1 || zcp_workers_critical_ns(w) > 0);
                /* Every share's time is in the sum, the longest of each job among them. */
                CHECK(zcp_workers_busy_ns(w) >= zcp_workers_critical_ns(w));
                run_open_rounds(w, teams[t], 200, 0);
                run_open_rounds(w, teams[t], 20, 200 * 1000);
                zcp_workers_free(w);
                printf("team of %u: %u shares, %u on the caller\n", teams[t], atomic_load(&j.calls),
                       atomic_load(&j.on_caller));
        }
        {
                struct job j = { .count = 1, .caller = pthread_self() };
                run_rounds(NULL, &j, 3, 0);
                CHECK(atomic_load(&j.calls) == 3 && atomic_load(&j.on_caller) == 3);
                run_open_rounds(NULL, 1, 4, 0);
        }
        test_ahead();
        return 0;
}
