/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Lock-free single-producer/single-consumer queue of uint32_t slot indices.
 * Exactly one thread pushes and one thread pops. Push never blocks (the ring
 * sizes every queue to hold all slots). Pop blocks on a futex, never polls.
 * zcp_spsc_close() wakes a blocked consumer; after it, pop drains what is
 * left and then returns -EPIPE.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct zcp_spsc {
        _Alignas(64) _Atomic uint32_t head;   /* next index to write (producer) */
        _Alignas(64) _Atomic uint32_t tail;   /* next index to read (consumer) */
        _Alignas(64) _Atomic uint32_t seq;    /* futex word: bumped on push and close */
        _Atomic uint32_t waiting;             /* consumer is (about to be) asleep */
        _Atomic bool closed;
        uint32_t mask;                        /* capacity - 1 (power of two) */
        uint32_t *items;
};

/* capacity is rounded up to a power of two. Returns 0 or -ENOMEM. */
int zcp_spsc_init(struct zcp_spsc *q, uint32_t capacity);
void zcp_spsc_done(struct zcp_spsc *q);

/* Producer. Returns 0, or -ENOSPC when full (a programming error with ring-sized queues). */
int zcp_spsc_push(struct zcp_spsc *q, uint32_t item);

/*
 * Consumer. timeout_ns < 0 waits forever. Returns 0 and writes *ret_item,
 * -EAGAIN on timeout (or immediately with timeout_ns == 0 and nothing queued),
 * -EPIPE when closed and drained.
 */
int zcp_spsc_pop(struct zcp_spsc *q, int64_t timeout_ns, uint32_t *ret_item);

/* Number of items queued (exact for the consumer, a snapshot for others). */
uint32_t zcp_spsc_count(const struct zcp_spsc *q);

/* Any thread. Idempotent. */
void zcp_spsc_close(struct zcp_spsc *q);
void zcp_spsc_reopen(struct zcp_spsc *q);
