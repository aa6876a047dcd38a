/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Source ops: where frames come from. One source instance per stream, driven
 * by the stream's source thread (every op below is called from that thread,
 * except open/close which the main thread calls before start / after stop).
 *
 * A source writes pixels into ring slot memory it is given; it owns no frame
 * memory of its own in the hot path. It takes free slots from the ring's free
 * queue (the source thread is that queue's only consumer) and hands filled
 * ones on with zcp_ring_submit().
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "core/err.h"
#include "core/pixfmt.h"
#include "core/ring.h"

/* How a source gets pixels into the slot (exported as an info label). */
enum zcp_capture_path {
        ZCP_PATH_DIRECT,       /* the producer writes straight into slot memory (USERPTR, pool) */
        ZCP_PATH_REGISTERED,   /* driver buffers registered with the GPU and read in place */
        ZCP_PATH_COPY,         /* copied into the slot (each copy counted) */
        ZCP_CAPTURE_PATH_COUNT
};
extern const char *const zcp_capture_path_names[ZCP_CAPTURE_PATH_COUNT];  /* "direct", "registered", "copy" */

struct zcp_source_info {
        uint32_t width, height;   /* geometry the ring is made for */
        enum zcp_pixfmt fmt;      /* format of the bytes written into the slot */
        uint32_t stride;          /* bytes per row of the first plane */
        size_t frame_bytes;       /* bytes one frame occupies in the slot */
        size_t pinned_bytes;      /* driver memory the source registers with the GPU to read in place
                                     (besides the ring): counted against pinned_budget; 0 none */
        uint32_t fps_num, fps_den;/* nominal rate, 0/1 when unknown */
        bool live;                /* camera-like: drop policy "newest" by default */
        enum zcp_capture_path path;
};

/* Returned by next() besides 0 and negative errno. */
enum {
        ZCP_SOURCE_FRAME = 0,   /* *ret_idx holds a filled slot, already submitted or to submit */
        ZCP_SOURCE_AGAIN = 1,   /* nothing this time (timeout, dropped frame): call again */
        ZCP_SOURCE_EOS   = 2,   /* the end: no more frames ever */
        /*
         * The frame geometry changed (a file made by concatenation, a camera
         * reconfigured): the frame is kept; the caller calls reconfigure()
         * for the new info, re-allocates the ring, then next() again. Only
         * returned to a caller that said it handles it (reconfigure(ctx,
         * NULL)); otherwise frames of another geometry are dropped as
         * ZCP_DROP_OVERSIZE, as before.
         */
        ZCP_SOURCE_RECONFIGURE = 3,
};

struct zcp_source_ctx;   /* each implementation defines its own */

struct zcp_source_ops {
        const char *name;     /* matches zcp_source_type_names */
        /*
         * Opens the source and learns the geometry. Returns 0, -ENOENT & co.
         * for a bad path (log names the file), -EINVAL for content the source
         * cannot handle, or ZCP_ERR_CONFIG (see below) when the config asks for
         * what the device cannot do.
         */
        int (*open)(const struct zcp_stream_config *cfg, struct zcp_stream_stats *stats,
                    struct zcp_source_ctx **ret_ctx, struct zcp_source_info *ret_info);
        /* Binds to the ring (e.g. queues USERPTR slots) and starts producing. */
        int (*start)(struct zcp_source_ctx *ctx, struct zcp_ring *ring);
        /*
         * Produces at most one frame: fills a slot (frame fields and
         * ZCP_TS_CAPTURE set) and submits it with zcp_ring_submit() or
         * zcp_ring_submit_dropped(). Blocks at most ~100 ms so the thread
         * sees `stop` promptly. Returns ZCP_SOURCE_FRAME, ZCP_SOURCE_AGAIN,
         * ZCP_SOURCE_EOS, or a negative errno for a fatal error.
         */
        int (*next)(struct zcp_source_ctx *ctx, struct zcp_ring *ring);
        /* Stops producing; slots held (e.g. queued in a driver) are returned to the free queue. */
        void (*stop)(struct zcp_source_ctx *ctx, struct zcp_ring *ring);
        /* Accepts NULL. */
        void (*close)(struct zcp_source_ctx *ctx);
        /*
         * Optional (NULL: the source never changes geometry). With ret_info
         * NULL: the caller handles ZCP_SOURCE_RECONFIGURE from now on (the
         * stream says so at open, main thread). Else, after next() returned
         * it: the geometry next() delivers from now on (written only on
         * success; -EINVAL for one the ring cannot hold: odd or zero size, a
         * format convert does not take).
         *
         * What the pipeline does around it (pipeline.c, zcp_stream_new_from):
         * the source thread ends at ZCP_SOURCE_RECONFIGURE, the frames in
         * flight drain and the stream is joined WITHOUT stop(); then, on the
         * main thread with no source thread running, reconfigure(ctx, &info)
         * is called while the old ring still exists, a new ring is made for
         * the info, start(ctx, new_ring) binds the source to it (it must
         * accept a start without a stop before), and only then is the old
         * ring freed. A source that holds slots of the old ring (buffers
         * queued to a driver) lets go of them in reconfigure() or start(). If
         * the new stream cannot be made, the source is stopped on the old
         * ring and closed.
         */
        int (*reconfigure)(struct zcp_source_ctx *ctx, struct zcp_source_info *ret_info);
};

/*
 * Any thread (main, on SIGINT/SIGTERM): every source that is opening or
 * reconnecting gives up within ~50 ms (open returns -ECANCELED) and none
 * starts to wait again. Not undone: the process is stopping.
 */
void zcp_source_cancel_all(void);
bool zcp_source_cancelled(void);

/* A source that cannot do what the config asks returns ZCP_ERR_CONFIG (core/err.h): main exits 78. */

/* All built sources, in one table; NULL for a type this build lacks. */
const struct zcp_source_ops *zcp_source_find(enum zcp_source_type type);

extern const struct zcp_source_ops zcp_source_synthetic;
#if HAVE_GSTREAMER
extern const struct zcp_source_ops zcp_source_file;
extern const struct zcp_source_ops zcp_source_network;
#endif
#if HAVE_V4L2
extern const struct zcp_source_ops zcp_source_v4l2;
#endif
