/* SPDX-License-Identifier: MIT */
/*
 * SPSC queue of slot indices (spsc.h). The fast path is two atomics; a
 * consumer that finds the queue empty sleeps on a futex word (`seq`) that
 * the producer bumps after every push. `waiting` and `head` form a Dekker
 * pair (both seq_cst) so a push can never slip between the consumer's last
 * check and its sleep: the futex compares `seq` against the value read
 * before the check and returns at once if it moved.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/spsc.h"

static int futex_wait_until(_Atomic uint32_t *word, uint32_t expected, const struct timespec *abs_deadline)
{
        /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline. */
        long r = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected,
                         abs_deadline, NULL, FUTEX_BITSET_MATCH_ANY);
        return r < 0 ? -errno : 0;
}

static void futex_wake(_Atomic uint32_t *word, int count)
{
        syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, count, NULL, NULL, 0);
}

int zcp_spsc_init(struct zcp_spsc *q, uint32_t capacity)
{
        uint32_t cap = 1;

        if (capacity == 0 || capacity > (1u << 30))
                return -EINVAL;
        while (cap < capacity)
                cap <<= 1;
        q->items = calloc(cap, sizeof(*q->items));
        if (!q->items)
                return -ENOMEM;
        q->mask = cap - 1;
        atomic_init(&q->head, 0);
        atomic_init(&q->tail, 0);
        atomic_init(&q->seq, 0);
        atomic_init(&q->waiting, 0);
        atomic_init(&q->closed, false);
        return 0;
}

void zcp_spsc_done(struct zcp_spsc *q)
{
        free(q->items);
        q->items = NULL;
}

int zcp_spsc_push(struct zcp_spsc *q, uint32_t item)
{
        uint32_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
        uint32_t t = atomic_load_explicit(&q->tail, memory_order_acquire);

        if (h - t > q->mask)
                return -ENOSPC;
        q->items[h & q->mask] = item;
        atomic_store_explicit(&q->head, h + 1, memory_order_seq_cst);
        atomic_fetch_add_explicit(&q->seq, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&q->waiting, memory_order_seq_cst))
                futex_wake(&q->seq, 1);
        return 0;
}

static void deadline_from_now(int64_t timeout_ns, struct timespec *ret)
{
        uint64_t at = zcp_now_ns() + (uint64_t)timeout_ns;

        ret->tv_sec = (time_t)(at / ZCP_NSEC_PER_SEC);
        ret->tv_nsec = (long)(at % ZCP_NSEC_PER_SEC);
}

int zcp_spsc_pop(struct zcp_spsc *q, int64_t timeout_ns, uint32_t *ret_item)
{
        struct timespec deadline;
        bool have_deadline = false;

        for (;;) {
                uint32_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
                uint32_t h = atomic_load_explicit(&q->head, memory_order_acquire);
                uint32_t s;
                int r;

                if (h != t) {
                        *ret_item = q->items[t & q->mask];
                        atomic_store_explicit(&q->tail, t + 1, memory_order_release);
                        return 0;
                }
                if (atomic_load_explicit(&q->closed, memory_order_acquire))
                        return -EPIPE;
                if (timeout_ns == 0)
                        return -EAGAIN;
                if (timeout_ns > 0 && !have_deadline) {
                        deadline_from_now(timeout_ns, &deadline);
                        have_deadline = true;
                }

                s = atomic_load_explicit(&q->seq, memory_order_seq_cst);
                atomic_store_explicit(&q->waiting, 1, memory_order_seq_cst);
                if (atomic_load_explicit(&q->head, memory_order_seq_cst) != t ||
                    atomic_load_explicit(&q->closed, memory_order_seq_cst)) {
                        atomic_store_explicit(&q->waiting, 0, memory_order_relaxed);
                        continue;
                }
                r = futex_wait_until(&q->seq, s, have_deadline ? &deadline : NULL);
                atomic_store_explicit(&q->waiting, 0, memory_order_relaxed);
                if (r == -ETIMEDOUT) {
                        /* One last look: a push may have landed right at the deadline. */
                        if (atomic_load_explicit(&q->head, memory_order_acquire) != t)
                                continue;
                        return -EAGAIN;
                }
        }
}

uint32_t zcp_spsc_count(const struct zcp_spsc *q)
{
        uint32_t h = atomic_load_explicit(&q->head, memory_order_acquire);
        uint32_t t = atomic_load_explicit(&q->tail, memory_order_acquire);

        return h - t;
}

void zcp_spsc_close(struct zcp_spsc *q)
{
        atomic_store_explicit(&q->closed, true, memory_order_seq_cst);
        atomic_fetch_add_explicit(&q->seq, 1, memory_order_seq_cst);
        futex_wake(&q->seq, INT_MAX);
}

void zcp_spsc_reopen(struct zcp_spsc *q)
{
        atomic_store_explicit(&q->closed, false, memory_order_seq_cst);
}
