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
 *
 * Wake-ahead (core/cadence.h): the owner times its jobs and, after each,
 * publishes the window in which it expects the next frame's job. A member
 * whose spin after a job ran out sleeps until the window opens (a futex wait
 * with a deadline, on the same word, so a job that comes early still wakes
 * it), spins through the window, and only then sleeps until woken. Members
 * report how late they ran after their wake-up (the job's or their timer's),
 * which sets how early the window opens. The owner sets the window after the
 * job has joined (it may be waking up meanwhile): a member waits for it on a
 * second futex word (`ahead_gen`, the same announce-then-check protocol). Off
 * where the team has more members than the process has CPUs (spinning
 * members would take the owner's CPU), and with ZCP_WORKERS_AHEAD=0 in the
 * environment (to measure without it).
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

#include "core/cadence.h"
#include "core/workers.h"

#define SPIN_NS ZCP_CADENCE_GAP_NS /* 50 us: a frame's next band job comes well within this */
#define AHEAD_WAIT_NS 10000000 /* for the owner to set the next window after a job */
#define TICKET_CLOSED (1ull << 31)
#define TICKET_COUNT (TICKET_CLOSED - 1)

struct member {
        struct zcp_workers *team;
        uint32_t index;
        pthread_t thread;
        uint64_t share_ns; /* last share's duration (0: not entered), set before `finished` moves */
        _Atomic uint64_t late; /* 1 + the last wake-up lateness this member measured; 0: none since read */
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
        _Atomic uint64_t pub_ns;  /* when the current job was published */
        _Atomic uint64_t ahead_from, ahead_until; /* the next job's window (0: none) */
        _Atomic uint32_t ahead_gen;     /* futex word: the job whose end the window follows */
        _Atomic uint32_t ahead_waiters; /* workers inside futex_wait(ahead_gen) */
        _Atomic uint64_t woken;   /* shares run by a member the job's wake-up call woke */
        bool ahead;               /* wake-ahead on */
        struct zcp_cadence cadence; /* user thread only */
        uint64_t critical_ns; /* user thread only */
        uint64_t busy_ns;     /* user thread only */
        struct member members[]; /* [count]; members[0] is the owner */
};

static void futex_wait(_Atomic uint32_t *word, uint32_t val)
{
        /* EINTR, EAGAIN (the word changed): the caller re-checks. */
        syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

/* futex_wait with a deadline on CLOCK_MONOTONIC (ns). */
static void futex_wait_until(_Atomic uint32_t *word, uint32_t val, uint64_t deadline)
{
        struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000000u), .tv_nsec = (long)(deadline % 1000000000u) };

        syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET_PRIVATE, val, &ts, NULL, FUTEX_BITSET_MATCH_ANY);
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

/* Spins while *word == val until `until` (0: SPIN_NS from the first look at the clock); true if it changed. */
static bool spin_until(_Atomic uint32_t *word, uint32_t val, uint64_t until)
{
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

static bool spin_while(_Atomic uint32_t *word, uint32_t val)
{
        return spin_until(word, val, 0);
}

static void note_late(struct member *m, uint64_t late)
{
        atomic_store_explicit(&m->late, late + 1, memory_order_relaxed);
}

/* A job's wake-up call woke the member: how long after the job's publication it runs. */
static void note_job_wake(struct zcp_workers *w, struct member *m)
{
        uint64_t now = mono_ns(), pub = atomic_load_explicit(&w->pub_ns, memory_order_relaxed);

        note_late(m, now > pub ? now - pub : 0);
}

/* Sleeps on gen until woken; true if a job's wake-up call woke it (lateness noted). */
static bool sleep_for_job(struct zcp_workers *w, struct member *m, uint32_t seen)
{
        atomic_fetch_add(&w->sleepers, 1);
        futex_wait(&w->gen, seen);
        atomic_fetch_sub(&w->sleepers, 1);
        if (atomic_load_explicit(&w->gen, memory_order_acquire) == seen)
                return false;
        if (w->ahead)
                note_job_wake(w, m);
        return true;
}

/*
 * The wake-ahead window (the file's top comment): sleeps until it opens, then
 * spins through it. True if a job came meanwhile; false when there is no
 * window or it passed without one.
 */
static bool wait_ahead(struct zcp_workers *w, struct member *m, uint32_t seen, bool *woken)
{
        /*
         * The owner sets the window after job `seen` has joined; it may still be waking up from
         * its own wait for the last share. It sets the window before it can publish another job.
         */
        uint32_t ag = atomic_load_explicit(&w->ahead_gen, memory_order_acquire);
        if (ag != seen) {
                atomic_fetch_add(&w->ahead_waiters, 1);
                futex_wait_until(&w->ahead_gen, ag, mono_ns() + AHEAD_WAIT_NS);
                atomic_fetch_sub(&w->ahead_waiters, 1);
                if (atomic_load_explicit(&w->ahead_gen, memory_order_acquire) != seen)
                        return false;
        }
        uint64_t from = atomic_load_explicit(&w->ahead_from, memory_order_relaxed);
        uint64_t until = atomic_load_explicit(&w->ahead_until, memory_order_relaxed), now = mono_ns();

        if (!until || now >= until)
                return false;
        if (from > now) {
                atomic_fetch_add(&w->sleepers, 1);
                futex_wait_until(&w->gen, seen, from);
                atomic_fetch_sub(&w->sleepers, 1);
                if (atomic_load_explicit(&w->gen, memory_order_acquire) != seen) {
                        /* The job came before the window: woken by its call, as without the window. */
                        note_job_wake(w, m);
                        *woken = true;
                        return true;
                }
                now = mono_ns();
                note_late(m, now > from ? now - from : 0);
        }
        return spin_until(&w->gen, seen, until);
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
                bool woken = false;
                uint32_t g;

                while ((g = atomic_load_explicit(&w->gen, memory_order_acquire)) == seen) {
                        if (spin_while(&w->gen, seen))
                                continue;
                        if (w->ahead && wait_ahead(w, m, seen, &woken))
                                continue;
                        woken = sleep_for_job(w, m, seen);
                }
                seen = g;
                if (atomic_load_explicit(&w->quit, memory_order_acquire))
                        return NULL;
                if (!enter(w, g))
                        continue;
                if (woken)
                        atomic_fetch_add_explicit(&w->woken, 1, memory_order_relaxed);
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
        zcp_cadence_init(&w->cadence);
        const char *ahead = getenv("ZCP_WORKERS_AHEAD");
        w->ahead = count <= zcp_workers_cpus() && !(ahead && strcmp(ahead, "0") == 0);
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
        if (w->ahead) {
                uint64_t t0 = mono_ns();
                atomic_store_explicit(&w->pub_ns, t0, memory_order_relaxed);
                zcp_cadence_start(&w->cadence, t0);
        }
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
        if (w->ahead) {
                for (uint32_t i = 1; i < w->count; i++) {
                        uint64_t late = atomic_exchange_explicit(&w->members[i].late, 0, memory_order_relaxed);
                        if (late)
                                zcp_cadence_lateness(&w->cadence, late - 1);
                }
                zcp_cadence_end(&w->cadence, mono_ns());
                uint64_t next = zcp_cadence_next(&w->cadence), lead = zcp_cadence_lead(&w->cadence);
                atomic_store_explicit(&w->ahead_from, next > lead ? next - lead : next, memory_order_relaxed);
                atomic_store_explicit(&w->ahead_until, zcp_cadence_spin_until(&w->cadence), memory_order_relaxed);
                /* seq_cst: the window before the new value, which is before reading ahead_waiters. */
                atomic_store(&w->ahead_gen, atomic_load_explicit(&w->gen, memory_order_relaxed));
                if (atomic_load(&w->ahead_waiters))
                        futex_wake(&w->ahead_gen);
        }
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

uint64_t zcp_workers_woken(const struct zcp_workers *w)
{
        return w ? atomic_load_explicit(&w->woken, memory_order_relaxed) : 0;
}

bool zcp_workers_ahead(const struct zcp_workers *w)
{
        return w && w->ahead;
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
