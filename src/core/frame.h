/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Per-frame metadata and the result block the backend writes. Both live in a
 * ring slot (ring.h) and are owned by whichever stage holds the slot.
 */
#include <stdint.h>

#include "core/pixfmt.h"
#include "core/stages.h"

/*
 * Timestamps, CLOCK_MONOTONIC ns: the capture, then three per stage of
 * stages.h, in its order. "enter" = queued for the stage, "start" = the stage
 * took it, "end" = the stage finished with it. The last stage's end is the
 * end of end-to-end (result handed to the sink); the infer end is the moment
 * results are visible to the CPU.
 */
#define ZCP_TS_ENUM_(ID, name, thread) ZCP_TS_##ID##_ENTER, ZCP_TS_##ID##_START, ZCP_TS_##ID##_END,
enum zcp_ts {
        ZCP_TS_CAPTURE,       /* V4L2 buffer time (monotonic) / dequeue / decoded frame landed */
        ZCP_STAGE_LIST(ZCP_TS_ENUM_)
        ZCP_TS_COUNT
};
#undef ZCP_TS_ENUM_
extern const char *const zcp_ts_names[ZCP_TS_COUNT];

enum zcp_frame_flags {
        ZCP_FRAME_DROPPED = 1u << 0, /* pass through the remaining stages untouched; counted */
        ZCP_FRAME_PTS_REPEAT = 1u << 1, /* pts_ns did not advance past the previous frame's ("pts_repeat") */
};

/* Why a frame was dropped. Every drop is counted under one of these. */
enum zcp_drop_reason {
        ZCP_DROP_RING_FULL,   /* live source found no free slot */
        ZCP_DROP_STALE,       /* live policy: a newer frame was queued behind it */
        ZCP_DROP_CORRUPT,     /* driver flagged an error / decoder reported corruption */
        ZCP_DROP_SHORT,       /* fewer bytes than the format needs */
        ZCP_DROP_OVERSIZE,    /* more bytes / larger geometry than the slot was made for */
        ZCP_DROP_SEQ_GAP,     /* driver sequence numbers skipped (frames lost before us) */
        ZCP_DROP_BAD_INDEX,   /* driver returned an index out of range or already held */
        ZCP_DROP_CONVERT,     /* conversion refused the frame */
        ZCP_DROP_INFER,       /* backend failed on this frame (non-sticky) */
        ZCP_DROP_SHUTDOWN,    /* in flight when the stream stopped */
        ZCP_DROP_REASON_COUNT
};
extern const char *const zcp_drop_reason_names[ZCP_DROP_REASON_COUNT];

struct zcp_frame {
        uint32_t stream;        /* index of the stream in the config */
        uint32_t flags;         /* enum zcp_frame_flags */
        uint64_t seq;           /* per stream, from 0, counts every captured frame */
        uint32_t width, height;
        enum zcp_pixfmt fmt;    /* as captured; ZCP_PIX_NV12 after convert */
        uint32_t stride;        /* bytes per row of the first plane as captured */
        uint64_t bytes;         /* bytes of pixel data in the slot */
        uint64_t pts_ns;        /* media time for files, driver time for cameras */
        uint64_t sender_ns;     /* network: the sender's clock (RTCP/NTP) as Unix-epoch ns; 0 = unknown */
        enum zcp_drop_reason drop_reason; /* valid when ZCP_FRAME_DROPPED */
        uint64_t t[ZCP_TS_COUNT];
};

#define ZCP_TOPK_MAX 16
#define ZCP_DET_MAX  100

/* One detected object: class index, score, box x0, y0, x1, y1 (frame pixels, x1/y1 exclusive). */
struct zcp_detection {
        uint32_t cls;
        float score;
        float box[4];
};

/*
 * Written by the backend (the GPU through the mapped pointer, or the CPU
 * reference), read by publish. Plain old data, fixed size, in 4-byte words
 * (the kernels copy it a word at a time; kcommon.cuh checks the layout).
 *
 * The moving mask: which cells moved, beside the result rather than in it
 * (its size follows the grid, up to 1920x1080 cells for 4K at cell 2). The
 * ring sizes it at creation (ring.h: slot->mask, slot->mask_words); the
 * motion stage writes it with the other motion fields, complete before
 * `valid`. Cell (gx, gy) is bit i % 32 of word i / 32, i = gy * grid_w + gx
 * (row-major, least significant bit first); bits past the last cell are 0.
 * Its popcount is moving_cells and every set cell lies inside bbox.
 * mask_words = 0: no mask for this frame (motion off, or a ring made
 * without room for it); a frame that sets the background writes zeros.
 */
struct zcp_result {
        uint32_t valid;          /* non-zero once the backend wrote it for this frame */
        uint32_t moving_cells;
        uint32_t total_cells;
        float moving_fraction;
        int32_t bbox[4];         /* x0, y0, x1, y1 in pixels (x1/y1 exclusive); all -1 if no motion */
        uint32_t topk_count;
        uint32_t topk_class[ZCP_TOPK_MAX];
        float topk_prob[ZCP_TOPK_MAX];
        uint32_t grid_w, grid_h; /* motion grid (cells); 0 when motion is off */
        uint32_t mask_words;     /* words of the slot's mask written for this frame; 0: none */
        uint32_t det_count;      /* detector: entries of det, best score first */
        struct zcp_detection det[ZCP_DET_MAX];
};

/* 32-bit words of a moving mask of `cells` cells. */
static inline uint32_t zcp_mask_words(uint64_t cells)
{
        return (uint32_t)((cells + 31) / 32);
}
