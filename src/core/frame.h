/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Per-frame metadata and the result block the backend writes. Both live in a
 * ring slot (ring.h) and are owned by whichever stage holds the slot.
 */
#include <stdint.h>

#include "core/pixfmt.h"

/* Timestamps, CLOCK_MONOTONIC ns. "enter" = queued for the stage, "start" =
 * the stage took it, "end" = the stage finished with it. */
enum zcp_ts {
        ZCP_TS_CAPTURE,       /* V4L2 buffer time (monotonic) / dequeue / decoded frame landed */
        ZCP_TS_CONVERT_ENTER,
        ZCP_TS_CONVERT_START,
        ZCP_TS_CONVERT_END,
        ZCP_TS_INFER_ENTER,
        ZCP_TS_INFER_START,
        ZCP_TS_INFER_END,     /* results visible to the CPU */
        ZCP_TS_PUBLISH_ENTER,
        ZCP_TS_PUBLISH_START,
        ZCP_TS_PUBLISH_END,   /* result handed to the sink: end of end-to-end */
        ZCP_TS_COUNT
};
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

/*
 * Written by the backend (the GPU through the mapped pointer, or the CPU
 * reference), read by publish. Plain old data, fixed size, 16-byte aligned.
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
        uint32_t pad_[3];
};
