/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * A fixed team of worker threads that runs one function on every member at
 * once (fork-join), for splitting one frame's work into bands: the
 * conversion's row bands, the CPU backend's convolution rows.
 *
 * The threads are created once (zcp_workers_new, at stream start) and live
 * until zcp_workers_free; zcp_workers_run allocates nothing. An idle worker
 * spins for a few tens of microseconds after each job (so the several jobs of
 * one frame follow each other without a wake-up), then blocks on a futex until
 * the next job: nothing sleeps to poll. Where the jobs come at a cadence (one
 * per frame), the team predicts the next one and its idle members wake by
 * themselves shortly before it and spin until it comes (core/cadence.h), so
 * that a frame's helpers are not still waking up when its job starts; off
 * where the team has more members than the process has CPUs, or with
 * ZCP_WORKERS_AHEAD=0. The calling thread does share 0 of every job itself.
 *
 * Threads: new/free on one owner thread; run from one thread at a time (the
 * user: e.g. created by the main thread, run by the stream's convert thread,
 * freed by the main thread after that thread has been joined). A team of 1 starts no thread; a NULL team behaves as a team of 1.
 */
#include <stdbool.h>
#include <stdint.h>

struct zcp_workers;

/* One share of a job: index in [0, count). */
typedef void (*zcp_workers_fn)(void *arg, uint32_t index, uint32_t count);

#define ZCP_WORKERS_MAX 64

/*
 * Starts count - 1 threads (count in 1..ZCP_WORKERS_MAX), named
 * "<name><index>" (truncated to 15 bytes). Returns 0 and *ret_workers (owned
 * by the caller, freed with zcp_workers_free), -EINVAL for a bad count, or the
 * negative errno of a failed allocation or pthread_create (nothing left
 * running). Logs nothing.
 */
int zcp_workers_new(uint32_t count, const char *name, struct zcp_workers **ret_workers);

/* Stops and joins the threads. Accepts NULL. No job running. */
void zcp_workers_free(struct zcp_workers *w);

/* Members of the team (the caller included); 1 for NULL. */
uint32_t zcp_workers_count(const struct zcp_workers *w);

/*
 * Calls fn(arg, i, n) once for every i in [0, n), n = zcp_workers_count(w),
 * i = 0 on the calling thread, and returns when all have returned. What the
 * shares wrote is visible to the caller afterwards, and what the caller wrote
 * before is visible to every share. Allocates nothing. The user thread only.
 */
void zcp_workers_run(struct zcp_workers *w, zcp_workers_fn fn, void *arg);

/*
 * Like zcp_workers_run, for work that the shares take from a queue of their
 * own in arg: fn(arg, 0, n) runs on the calling thread, and fn(arg, i, n)
 * (each i in [1, n) at most once) on every member that starts its share
 * before the caller's share has returned; a member still waking up by then
 * never runs it. Returns when every share that started has returned. So a
 * worker's wake-up (tens of microseconds from a futex) delays nothing: the
 * members awake take the work. fn must not leave work undone when share 0
 * returns, and must not assume any other share runs.
 */
void zcp_workers_run_open(struct zcp_workers *w, zcp_workers_fn fn, void *arg);

/*
 * Sum over the jobs run so far (teams of 2 or more) of each job's longest
 * share, timed by the member that ran it (open jobs: of the shares that ran,
 * each share's own waits for other shares' work included): what the jobs
 * would have taken with every member on a CPU of its own, without the
 * wake-ups and the owner's wait for the last share.
 * Benchmarks compare it with wall time on a busy machine. 0 for NULL. The
 * user thread.
 */
uint64_t zcp_workers_critical_ns(const struct zcp_workers *w);

/*
 * Sum over the jobs run so far (teams of 2 or more) of every share's
 * duration, as its member timed it: the work done, waits inside shares
 * included. Against one thread's time for the same work it shows what
 * running side by side costs each member (shared caches, memory bandwidth,
 * SMT siblings). 0 for NULL. The user thread.
 */
uint64_t zcp_workers_busy_ns(const struct zcp_workers *w);

/*
 * Shares run so far by a member that was asleep when its job came (the job's
 * wake-up call woke it), against the members that were awake: spinning after
 * the last job or inside the wake-ahead window. 0 for NULL. Any thread.
 */
uint64_t zcp_workers_woken(const struct zcp_workers *w);

/* True when the team wakes ahead of predicted jobs (the top comment). */
bool zcp_workers_ahead(const struct zcp_workers *w);

/* Threads this process may run on (sched_getaffinity), at least 1. Any thread. */
uint32_t zcp_workers_cpus(void);
