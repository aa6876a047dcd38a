/* SPDX-License-Identifier: MIT */
/*
 * Ring of slots and its queues (ring.h). All memory is taken in
 * zcp_ring_new(); the hot-path functions below only move indices and stamp
 * times. The result blocks and the moving masks share one allocation: the
 * blocks first, then one mask per slot, each starting on 16 bytes.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/ring.h"

#define SLOT_NAMES(ID, name, thread) [ZCP_SLOT_##ID] = #name,
const char *const zcp_slot_state_names[ZCP_SLOT_STATE_COUNT] = {
        [ZCP_SLOT_FREE] = "free",
        [ZCP_SLOT_SOURCE] = "source",
        [ZCP_SLOT_DRIVER] = "driver",
        ZCP_STAGE_LIST(SLOT_NAMES)
};
#undef SLOT_NAMES

static size_t page_size(void)
{
        long p = sysconf(_SC_PAGESIZE);
        return p > 0 ? (size_t)p : 4096;
}

static size_t round_up(size_t n, size_t to)
{
        return (n + to - 1) / to * to;
}

static int host_alloc(void *ctx, size_t bytes, void **ret_host, void **ret_dev)
{
        void *p = NULL;
        int r = posix_memalign(&p, page_size(), round_up(bytes, page_size()));

        if (r != 0)
                return -r;
        *ret_host = p;
        *ret_dev = NULL;
        return 0;
}

static void host_free(void *ctx, void *host)
{
        free(host);
}

/* Host memory is usable in place as it is: nothing to register. */
static int host_map(void *ctx, void *host, size_t bytes, void **ret_dev)
{
        *ret_dev = NULL;
        return 0;
}

static void host_unmap(void *ctx, void *host)
{
}

const struct zcp_allocator zcp_host_allocator = {
        .name = "host",
        .alloc = host_alloc,
        .free = host_free,
        .map = host_map,
        .unmap = host_unmap,
};

static void ring_release(struct zcp_ring *ring)
{
        if (ring->slots) {
                for (uint32_t i = 0; i < ring->count; i++) {
                        if (ring->slots[i].own)
                                ring->alloc.free(ring->alloc.ctx, ring->slots[i].own);
                }
        }
        if (ring->results)
                ring->alloc.free(ring->alloc.ctx, ring->results);
        for (int q = 0; q < ZCP_Q_COUNT; q++)
                zcp_spsc_done(&ring->q[q]);
        free(ring->slots);
        free(ring);
}

/* The one allocation beside the slots: `count` result blocks, then a mask of `mask_cells` bits each. */
static void result_layout(uint32_t count, uint32_t mask_cells, size_t *ret_blocks, size_t *ret_mask_stride,
                          size_t *ret_bytes)
{
        *ret_blocks = round_up(sizeof(struct zcp_result) * count, 16);
        *ret_mask_stride = round_up((size_t)zcp_mask_words(mask_cells) * sizeof(uint32_t), 16);
        *ret_bytes = round_up(*ret_blocks + *ret_mask_stride * count, page_size());
}

uint64_t zcp_ring_bytes(uint32_t count, size_t frame_bytes, uint32_t mask_cells)
{
        size_t blocks, mask_stride, res_bytes;

        result_layout(count, mask_cells, &blocks, &mask_stride, &res_bytes);
        return (uint64_t)count * round_up(frame_bytes, page_size()) + res_bytes;
}

int zcp_ring_new(uint32_t count, size_t frame_bytes, uint32_t mask_cells, const struct zcp_allocator *alloc,
                 struct zcp_stream_stats *stats, struct zcp_ring **ret_ring)
{
        struct zcp_ring *ring;
        void *res_host = NULL, *res_dev = NULL;
        const uint32_t mask_words = zcp_mask_words(mask_cells);
        size_t blocks, mask_stride, res_bytes;
        int r;

        if (count < 1 || frame_bytes == 0)
                return -EINVAL;
        ring = calloc(1, sizeof(*ring));
        if (!ring)
                return -ENOMEM;
        ring->count = count;
        ring->slot_size = round_up(frame_bytes, page_size());
        ring->alloc = *alloc;
        ring->stats = stats;
        ring->mask_cells = mask_cells;
        ring->slots = calloc(count, sizeof(*ring->slots));
        if (!ring->slots) {
                r = -ENOMEM;
                goto fail;
        }
        for (int q = 0; q < ZCP_Q_COUNT; q++) {
                r = zcp_spsc_init(&ring->q[q], count);
                if (r < 0)
                        goto fail;
        }

        result_layout(count, mask_cells, &blocks, &mask_stride, &res_bytes);
        r = alloc->alloc(alloc->ctx, res_bytes, &res_host, &res_dev);
        if (r < 0) {
                zcp_err("ring: cannot allocate %zu bytes of %s memory for %u result blocks and masks of %u cells: %s",
                        res_bytes, alloc->name, count, mask_cells, zcp_strerror(r));
                goto fail;
        }
        memset(res_host, 0, res_bytes);
        ring->results = res_host;

        for (uint32_t i = 0; i < count; i++) {
                struct zcp_slot *s = &ring->slots[i];
                void *dev = NULL;

                r = alloc->alloc(alloc->ctx, ring->slot_size, (void **)&s->own, &dev);
                if (r < 0) {
                        s->own = NULL;
                        zcp_err("ring: cannot allocate slot %u of %u: %zu bytes of %s memory (ring of %u x %zu = %zu bytes): %s",
                                i, count, ring->slot_size, alloc->name, count, ring->slot_size,
                                (size_t)count * ring->slot_size, zcp_strerror(r));
                        goto fail;
                }
                s->own_dev = dev;
                s->data = s->own;
                s->dev = dev;
                s->cap = ring->slot_size;
                s->index = i;
                s->result = (struct zcp_result *)res_host + i;
                s->result_dev = res_dev ? (void *)((struct zcp_result *)res_dev + i) : NULL;
                if (mask_words) {
                        s->mask = (uint32_t *)((uint8_t *)res_host + blocks + mask_stride * i);
                        s->mask_dev = res_dev ? (void *)((uint8_t *)res_dev + blocks + mask_stride * i) : NULL;
                        s->mask_words = mask_words;
                }
        }
        zcp_ring_reset(ring);
        *ret_ring = ring;
        return 0;

fail:
        ring_release(ring);
        return r;
}

void zcp_ring_free(struct zcp_ring *ring)
{
        if (ring)
                ring_release(ring);
}

void zcp_ring_reset(struct zcp_ring *ring)
{
        for (int q = 0; q < ZCP_Q_COUNT; q++) {
                atomic_store(&ring->q[q].head, 0);
                atomic_store(&ring->q[q].tail, 0);
                zcp_spsc_reopen(&ring->q[q]);
        }
        for (uint32_t i = 0; i < ring->count; i++) {
                /* The source gives every lent buffer back in stop(); one still lent is a lender's bug. */
                assert(!ring->slots[i].lent);
                if (ring->slots[i].lent) {
                        zcp_err("ring: slot %u still reads lent buffer %u at reset: back to its own memory", i,
                                ring->slots[i].lent);
                        zcp_ring_unlend(ring, i);
                }
                atomic_store(&ring->slots[i].state, ZCP_SLOT_FREE);
                memset(&ring->slots[i].frame, 0, sizeof(ring->slots[i].frame));
                zcp_spsc_push(&ring->q[ZCP_Q_FREE], i);
        }
}

void zcp_ring_close(struct zcp_ring *ring)
{
        for (int q = 0; q < ZCP_Q_COUNT; q++)
                zcp_spsc_close(&ring->q[q]);
}

void zcp_ring_lend(struct zcp_ring *ring, uint32_t idx, uint8_t *data, void *dev, size_t cap, uint32_t tag)
{
        struct zcp_slot *s = &ring->slots[idx];

        assert(tag != 0 && !s->lent && cap >= ring->slot_size);
        assert(atomic_load(&s->state) == ZCP_SLOT_SOURCE);
        s->data = data;
        s->dev = dev;
        s->cap = cap;
        s->lent = tag;
}

uint32_t zcp_ring_unlend(struct zcp_ring *ring, uint32_t idx)
{
        struct zcp_slot *s = &ring->slots[idx];
        uint32_t tag = s->lent;

        s->data = s->own;
        s->dev = s->own_dev;
        s->cap = ring->slot_size;
        s->lent = 0;
        return tag;
}

void zcp_ring_move(struct zcp_ring *ring, uint32_t idx, enum zcp_slot_state from, enum zcp_slot_state to)
{
        struct zcp_slot *s = &ring->slots[idx];
#ifndef NDEBUG
        uint32_t expected = from;

        if (idx >= ring->count || !atomic_compare_exchange_strong(&s->state, &expected, to)) {
                zcp_err("ring: slot %u moved %s -> %s but was %s", idx, zcp_slot_state_names[from],
                        zcp_slot_state_names[to],
                        expected < ZCP_SLOT_STATE_COUNT ? zcp_slot_state_names[expected] : "?");
                abort();
        }
#else
        (void)from;
        atomic_store_explicit(&s->state, to, memory_order_relaxed);
#endif
}

int zcp_ring_acquire(struct zcp_ring *ring, int64_t timeout_ns, uint32_t *ret_idx)
{
        uint32_t idx;
        int r = zcp_spsc_pop(&ring->q[ZCP_Q_FREE], timeout_ns, &idx);

        if (r < 0)
                return r;
        zcp_ring_move(ring, idx, ZCP_SLOT_FREE, ZCP_SLOT_SOURCE);
        memset(&ring->slots[idx].frame, 0, sizeof(ring->slots[idx].frame));
        *ret_idx = idx;
        return 0;
}

void zcp_ring_submit(struct zcp_ring *ring, uint32_t idx)
{
        struct zcp_slot *s = &ring->slots[idx];
        int r;

        zcp_ring_move(ring, idx, ZCP_SLOT_SOURCE, zcp_stage_slot(0));
        s->frame.t[zcp_stage_ts_enter(0)] = zcp_now_ns();
        r = zcp_spsc_push(&ring->q[zcp_stage_queue(0)], idx);
        /* Every queue holds the whole ring: a full one means a slot is in two places. */
        if (r < 0) {
                zcp_err("ring: convert queue full pushing slot %u (slot accounting broken)", idx);
                abort();
        }
}

void zcp_frame_drop(struct zcp_ring *ring, struct zcp_frame *f, enum zcp_drop_reason reason)
{
        if (f->flags & ZCP_FRAME_DROPPED)
                return;
        f->flags |= ZCP_FRAME_DROPPED;
        f->drop_reason = reason;
        if (ring->stats)
                zcp_stats_drop(ring->stats, reason);
}

void zcp_ring_submit_dropped(struct zcp_ring *ring, uint32_t idx, enum zcp_drop_reason reason)
{
        zcp_frame_drop(ring, &ring->slots[idx].frame, reason);
        zcp_ring_submit(ring, idx);
}
