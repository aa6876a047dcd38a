/* SPDX-License-Identifier: MIT */
/*
 * Fork-join worker team (workers.h). One job at a time: the owner publishes
 * fn/arg and the job's `ticket` (its generation, no member in), then bumps
 * `gen`; each worker that sees a new generation enters the job (one CAS on
 * the ticket: counts itself in unless the job is closed or gone), runs its
 * share and bumps `finished`, waking the owner if it sleeps. A classic job
 * waits for every member; an open job (zcp_workers_run_open) is closed by
 * the owner when its own share returns, and waits only for those inside:
 * a worker that was still asleep then never touches the job.
 *
 * Waiting (workers for a job, the owner for the last share) spins for up to
 * SPIN_NS checking the word, then sleeps in futex_wait on that same word. A
 * waker only makes the wake syscall when someone announced that it sleeps
 * (`sleepers`, `owner_sleeps`); the announcement is a seq_cst store made
 * before the futex re-checks the word, and the waker's change of the word is
 * a seq_cst operation before it reads the announcement, so one of the two
 * always sees the other.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/workers.h"

#define SPIN_NS 50000 /* a frame's next band job comes well within this */
#define TICKET_CLOSED (1ull << 31)
#define TICKET_COUNT (TICKET_CLOSED - 1)

struct member {
        struct zcp_workers *team;
        uint32_t index;
        pthread_t thread;
        uint64_t share_ns; /* last share's duration (0: not entered), set before `finished` moves */
};

struct zcp_workers {
        uint32_t count;
        _Atomic uint32_t gen;          /* futex word: bumped per job (and at exit) */
        _Atomic uint64_t ticket;       /* gen << 32 | TICKET_CLOSED | members inside */
        _Atomic uint32_t finished;     /* futex word: shares of this job finished (the owner's not counted) */
        _Atomic uint32_t sleepers;     /* workers inside futex_wait(gen) */
        _Atomic uint32_t owner_sleeps; /* owner inside futex_wait(finished) */
        _Atomic bool quit;
        zcp_workers_fn fn;
        void *arg;
        uint64_t critical_ns; /* user thread only */
        uint64_t busy_ns;     /* user thread only */
        struct member members[]; /* [count]; members[0] is the owner */
};

static void futex_wait(_Atomic uint32_t *word, uint32_t val)
{
        /* EINTR, EAGAIN (the word changed): the caller re-checks. */
        syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
        syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
}

static uint64_t mono_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins while *word == val for up to SPIN_NS; true if it changed. */
static bool spin_while(_Atomic uint32_t *word, uint32_t val)
{
        uint64_t until = 0;

        for (uint32_t i = 1;; i++) {
                if (atomic_load_explicit(word, memory_order_acquire) != val)
                        return true;
                cpu_relax();
                if (i % 64 == 0) {
                        uint64_t now = mono_ns();
                        if (!until)
                                until = now + SPIN_NS;
                        else if (now >= until)
                                return false;
                }
        }
}

static void run_share(struct zcp_workers *w, struct member *m)
{
        uint64_t t0 = mono_ns();

        w->fn(w->arg, m->index, w->count);
        m->share_ns = mono_ns() - t0;
}

/* Counts the caller into job g; false if that job is closed or over. */
static bool enter(struct zcp_workers *w, uint32_t g)
{
        uint64_t t = atomic_load_explicit(&w->ticket, memory_order_acquire);

        do {
                if ((uint32_t)(t >> 32) != g || (t & TICKET_CLOSED))
                        return false;
        } while (!atomic_compare_exchange_weak_explicit(&w->ticket, &t, t + 1, memory_order_acq_rel,
                                                        memory_order_acquire));
        return true;
}

static void *worker_main(void *p)
{
        struct member *m = p;
        struct zcp_workers *w = m->team;
        uint32_t seen = 0;

        for (;;) {
                uint32_t g;

                while ((g = atomic_load_explicit(&w->gen, memory_order_acquire)) == seen) {
                        if (spin_while(&w->gen, seen))
                                continue;
                        atomic_fetch_add(&w->sleepers, 1);
                        futex_wait(&w->gen, seen);
                        atomic_fetch_sub(&w->sleepers, 1);
                }
                seen = g;
                if (atomic_load_explicit(&w->quit, memory_order_acquire))
                        return NULL;
                if (!enter(w, g))
                        continue;
                run_share(w, m);
                atomic_fetch_add(&w->finished, 1); /* seq_cst: before reading owner_sleeps */
                if (atomic_load(&w->owner_sleeps))
                        futex_wake(&w->finished);
        }
}

static void publish(struct zcp_workers *w)
{
        atomic_fetch_add(&w->gen, 1); /* seq_cst: orders fn/arg/ticket/finished before, sleepers after */
        if (atomic_load(&w->sleepers))
                futex_wake(&w->gen);
}

static void stop_threads(struct zcp_workers *w, uint32_t started)
{
        atomic_store(&w->quit, true);
        publish(w);
        for (uint32_t i = 1; i <= started; i++)
                pthread_join(w->members[i].thread, NULL);
}

int zcp_workers_new(uint32_t count, const char *name, struct zcp_workers **ret_workers)
{
        struct zcp_workers *w;
        uint32_t started = 0;
        int r = 0;

        if (count < 1 || count > ZCP_WORKERS_MAX)
                return -EINVAL;
        w = calloc(1, sizeof(*w) + count * sizeof(w->members[0]));
        if (!w)
                return -ENOMEM;
        w->count = count;
        for (uint32_t i = 0; i < count; i++)
                w->members[i] = (struct member){ .team = w, .index = i };
        for (uint32_t i = 1; i < count; i++) {
                char tname[16];

                r = -pthread_create(&w->members[i].thread, NULL, worker_main, &w->members[i]);
                if (r < 0)
                        break;
                started = i;
                snprintf(tname, sizeof(tname), "%s%u", name ? name : "zcp-w", i);
                pthread_setname_np(w->members[i].thread, tname);
        }
        if (r < 0) {
                stop_threads(w, started);
                free(w);
                return r;
        }
        *ret_workers = w;
        return 0;
}

void zcp_workers_free(struct zcp_workers *w)
{
        if (!w)
                return;
        stop_threads(w, w->count - 1);
        free(w);
}

uint32_t zcp_workers_count(const struct zcp_workers *w)
{
        return w ? w->count : 1;
}

static void run_job(struct zcp_workers *w, zcp_workers_fn fn, void *arg, bool open)
{
        uint32_t target, f;

        w->fn = fn;
        w->arg = arg;
        for (uint32_t i = 0; i < w->count; i++)
                w->members[i].share_ns = 0;
        atomic_store_explicit(&w->finished, 0, memory_order_relaxed);
        atomic_store_explicit(&w->ticket, (uint64_t)(atomic_load_explicit(&w->gen, memory_order_relaxed) + 1) << 32,
                              memory_order_relaxed);
        publish(w); /* seq_cst: the stores above before the new generation */
        run_share(w, &w->members[0]);
        if (open)
                target = (uint32_t)(atomic_fetch_or(&w->ticket, TICKET_CLOSED) & TICKET_COUNT);
        else
                target = w->count - 1;
        while ((f = atomic_load_explicit(&w->finished, memory_order_acquire)) != target) {
                if (spin_while(&w->finished, f))
                        continue;
                atomic_store(&w->owner_sleeps, 1);
                futex_wait(&w->finished, f);
                atomic_store(&w->owner_sleeps, 0);
        }
        uint64_t longest = 0;
        for (uint32_t i = 0; i < w->count; i++) {
                longest = w->members[i].share_ns > longest ? w->members[i].share_ns : longest;
                w->busy_ns += w->members[i].share_ns;
        }
        w->critical_ns += longest;
}

void zcp_workers_run(struct zcp_workers *w, zcp_workers_fn fn, void *arg)
{
        if (!w || w->count == 1) {
                fn(arg, 0, 1);
                return;
        }
        run_job(w, fn, arg, false);
}

void zcp_workers_run_open(struct zcp_workers *w, zcp_workers_fn fn, void *arg)
{
        if (!w || w->count == 1) {
                fn(arg, 0, 1);
                return;
        }
        run_job(w, fn, arg, true);
}

uint64_t zcp_workers_critical_ns(const struct zcp_workers *w)
{
        return w ? w->critical_ns : 0;
}

uint64_t zcp_workers_busy_ns(const struct zcp_workers *w)
{
        return w ? w->busy_ns : 0;
}

uint32_t zcp_workers_cpus(void)
{
        cpu_set_t set;
        int n;

        if (sched_getaffinity(0, sizeof(set), &set) < 0)
                return 1;
        n = CPU_COUNT(&set);
        return n > 0 ? (uint32_t)n : 1;
}
