/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The ring: a fixed array of slots allocated once per stream, and the four
 * single-producer/single-consumer queues of slot indices that move them:
 *
 *   free --(source)--> convert --> infer --> publish --(back to)--> free
 *
 * (the stages of core/stages.h, in its order).
 *
 * A slot is in exactly one place at a time; its state is checked on every
 * transition when built without NDEBUG. Dropped frames keep travelling (with
 * ZCP_FRAME_DROPPED set) so that every queue keeps one producer and one
 * consumer; stages skip them and publish counts and frees them.
 *
 * Memory: frame bytes, the result block and the moving mask (frame.h) of
 * each slot come from an allocator (mapped pinned memory from the CUDA
 * backend, page-aligned host memory otherwise). The masks are sized for the
 * motion grid the ring is made for; a geometry change makes a new ring.
 * Nothing is allocated after zcp_ring_new().
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/frame.h"
#include "core/spsc.h"

struct zcp_stream_stats;

/*
 * Where frame memory comes from. alloc() returns host memory aligned to at
 * least the page size, and its device alias (or NULL if there is none).
 *
 * map() makes memory someone else allocated (a capture driver's mmap
 * buffers) readable by the backend in place, as alloc()'s memory is: it
 * returns the device alias (NULL for host memory) or a negative errno with
 * the reason logged; unmap() undoes it and must come before the memory goes
 * away. `host` is page aligned and `bytes` a page multiple. NULL map: the
 * allocator cannot do it (frames are copied instead). Any thread; never
 * while the backend may still read the memory.
 */
struct zcp_allocator {
        const char *name;
        void *ctx;
        int (*alloc)(void *ctx, size_t bytes, void **ret_host, void **ret_dev);
        void (*free)(void *ctx, void *host);
        int (*map)(void *ctx, void *host, size_t bytes, void **ret_dev);
        void (*unmap)(void *ctx, void *host);
};

/* Page-aligned host memory, no device alias. */
extern const struct zcp_allocator zcp_host_allocator;

/* Where a slot is: the source side, then one state per stage of stages.h. */
#define ZCP_SLOT_ENUM_(ID, name, thread) ZCP_SLOT_##ID, /* queued for / held by the stage */
enum zcp_slot_state {
        ZCP_SLOT_FREE,      /* in the free queue */
        ZCP_SLOT_SOURCE,    /* held by the source thread (being filled) */
        ZCP_SLOT_DRIVER,    /* queued in a capture driver (V4L2 USERPTR) */
        ZCP_STAGE_LIST(ZCP_SLOT_ENUM_)
        ZCP_SLOT_STATE_COUNT
};
#undef ZCP_SLOT_ENUM_
extern const char *const zcp_slot_state_names[ZCP_SLOT_STATE_COUNT];

struct zcp_slot {
        uint8_t *data;              /* frame memory, `cap` bytes, page aligned: own or lent */
        void *dev;                  /* device alias of data, or NULL */
        size_t cap;
        uint32_t lent;              /* 0, or the lender's tag while data is a lent buffer */
        uint8_t *own;               /* the slot's own frame memory (ring->slot_size bytes) */
        void *own_dev;
        struct zcp_result *result;  /* result block (allocator memory) */
        void *result_dev;           /* device alias of result, or NULL */
        uint32_t *mask;             /* moving mask, mask_words words (allocator memory); NULL: none */
        void *mask_dev;             /* device alias of mask, or NULL */
        uint32_t mask_words;
        struct zcp_frame frame;
        _Atomic uint32_t state;     /* enum zcp_slot_state */
        uint32_t index;
};

/* The free queue (last stage -> source), then the queue into each stage of stages.h. */
#define ZCP_Q_ENUM_(ID, name, thread) ZCP_Q_##ID,
enum zcp_queue {
        ZCP_Q_FREE,
        ZCP_STAGE_LIST(ZCP_Q_ENUM_)
        ZCP_Q_COUNT
};
#undef ZCP_Q_ENUM_

/* The queue into stage st, and the state of a slot queued for or held by it. */
static inline enum zcp_queue zcp_stage_queue(enum zcp_stage st) { return (enum zcp_queue)(ZCP_Q_FREE + 1 + st); }
static inline enum zcp_slot_state zcp_stage_slot(enum zcp_stage st)
{
        return (enum zcp_slot_state)(ZCP_SLOT_DRIVER + 1 + st);
}

struct zcp_ring {
        uint32_t count;
        size_t slot_size;           /* bytes of frame memory per slot (page multiple) */
        struct zcp_slot *slots;
        struct zcp_result *results;       /* one allocation holding every slot's result block, then masks */
        uint32_t mask_cells;              /* cells of each slot's moving mask; 0: no masks */
        struct zcp_spsc q[ZCP_Q_COUNT];
        struct zcp_allocator alloc;
        struct zcp_stream_stats *stats;   /* not owned */
};

/*
 * Allocates `count` slots of at least `frame_bytes` each (rounded up to the
 * page size) plus a result block each and, with mask_cells > 0, a moving
 * mask of that many cells each (the motion grid: grid_w * grid_h), from
 * `alloc`; all slots start free. On failure logs the bytes and geometry
 * asked for and returns -ENOMEM (or the allocator's error). Main thread.
 * Caller owns the ring: zcp_ring_free().
 */
int zcp_ring_new(uint32_t count, size_t frame_bytes, uint32_t mask_cells, const struct zcp_allocator *alloc,
                 struct zcp_stream_stats *stats, struct zcp_ring **ret_ring);
void zcp_ring_free(struct zcp_ring *ring);

/* The bytes zcp_ring_new() asks its allocator for, in all (slots, result blocks, masks). */
uint64_t zcp_ring_bytes(uint32_t count, size_t frame_bytes, uint32_t mask_cells);

/* Makes every slot free again and reopens the queues (after a stream stops). Main thread, no stage running. */
void zcp_ring_reset(struct zcp_ring *ring);

/* Closes every queue so that blocked stages wake up and drain. Any thread. */
void zcp_ring_close(struct zcp_ring *ring);

/*
 * State transition with a debug check that the slot was in `from`.
 * Compiled to a plain store under NDEBUG.
 */
void zcp_ring_move(struct zcp_ring *ring, uint32_t idx, enum zcp_slot_state from, enum zcp_slot_state to);

/*
 * Source thread: takes a free slot (FREE -> SOURCE) and clears its frame
 * metadata. timeout_ns as zcp_spsc_pop(). Returns 0, -EAGAIN, -EPIPE.
 * The free queue has one consumer at a time: a source that lets another
 * thread take slots (the file source's decoder, capture/gst.c) makes the
 * two take turns under a lock.
 */
int zcp_ring_acquire(struct zcp_ring *ring, int64_t timeout_ns, uint32_t *ret_idx);

/*
 * Source thread: hands a filled slot to the first stage (SOURCE -> its state,
 * into its queue), stamping its enter time. The source must have set frame
 * fields and ZCP_TS_CAPTURE.
 */
void zcp_ring_submit(struct zcp_ring *ring, uint32_t idx);

/*
 * Source thread: marks the frame dropped for `reason` (counted once, here)
 * and hands it on so it returns to the free queue through publish.
 */
void zcp_ring_submit_dropped(struct zcp_ring *ring, uint32_t idx, enum zcp_drop_reason reason);

/* Marks a held frame dropped and counts it (any stage thread holding it). */
void zcp_frame_drop(struct zcp_ring *ring, struct zcp_frame *f, enum zcp_drop_reason reason);

/*
 * Lending (V4L2 mmap buffers read in place): the frame of this slot lives in
 * `data` (mapped with the ring allocator's map(), `cap` >= ring->slot_size,
 * so convert works in place there as in the slot's own memory) until the
 * slot comes back to the source through the free queue, where the source
 * takes the buffer back with zcp_ring_unlend(). `tag` (non-zero) names the
 * buffer for the lender. Source thread, slot held by the source.
 */
void zcp_ring_lend(struct zcp_ring *ring, uint32_t idx, uint8_t *data, void *dev, size_t cap, uint32_t tag);
/* Restores slot idx's own memory; returns the tag it was lent with (0: it was not lent). */
uint32_t zcp_ring_unlend(struct zcp_ring *ring, uint32_t idx);

static inline struct zcp_slot *zcp_ring_slot(struct zcp_ring *ring, uint32_t idx)
{
        return &ring->slots[idx];
}
