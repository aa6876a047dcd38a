/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The GStreamer sources' shared state (the `file` and `network` sources,
 * gst.c says what they do): one context that their files work on, each
 * group of fields written by the file named above it. The files call each
 * other in one direction only:
 *
 *   gst_net.c      the network source: reconnect with back-off
 *   gst.c          the file source, and what both sources share: open,
 *                  close, delivering a sample into a slot, geometry changes
 *                  (gst_source.h)
 *   gst_pipe.c     the pipeline: building it, its callbacks, preroll, the
 *                  bus, teardown (gst_pipe.h)
 *   gst_time.c     timestamps: the PTS timeline, the end of a pass through
 *                  a file, arrival and sender times (gst_time.h)
 *   gst_pool.c     ring slots lent to a decoder as its buffer pool
 *                  (gst_pool.h; its state is its own)
 *   gst_layout.c   formats and plane layouts, GStreamer's against the
 *                  slot's (gst_layout.h)
 *
 * Nothing outside src/capture/gst*.c includes it. Threads: as gst.c says.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <gst/gst.h>
#include <gst/video/video.h>

#include "capture/source.h"
#include "core/clock.h"
#include "core/metrics.h"

#define NEXT_TIMEOUT_NS      (100 * ZCP_NSEC_PER_MSEC)   /* the longest next() waits for a sample */
#define IDLE_POLL_NS         (50 * ZCP_NSEC_PER_MSEC)    /* waits look at cancellation this often */
#define LOG_INTERVAL_NS      (5 * ZCP_NSEC_PER_SEC)      /* rate limit of per-frame complaints */
#define RATE_SAMPLES         15          /* PTS steps whose median is the measured frame duration */

struct zcp_gst_lender;

struct zcp_source_ctx {
        /* Fixed at open (gst.c). */
        const char *kind;                 /* "file" or "network", for messages */
        char path[ZCP_PATH_MAX];          /* as configured, for messages */
        gchar *uri;
        int fifo_fd;                      /* a FIFO's read end, handed to GStreamer as fd://; -1 otherwise */
        bool network;
        bool loop;
        bool sync;
        uint32_t want_width, want_height;
        struct zcp_source_config cfg;     /* network settings, timeouts */
        struct zcp_stream_stats *stats;
        uint32_t dec_threads;             /* decoder_threads, auto resolved */

        /* The pipeline and what its callbacks learn (gst_pipe.c). */
        GstElement *pipeline;
        GstElement *appsink;              /* our own ref */
        GstElement *conv;                 /* videoconvert before the appsink (the bin's ref) */
        GstElement *dec;                  /* the uridecodebin (the bin's ref) */
        gulong conv_probe;
        uint32_t abandoned;               /* network: teardowns GStreamer did not finish in time */
        GstBus *bus;
        GstCaps *allowed;                 /* appsink caps */
        atomic_bool linked;               /* a video pad reached the videoconvert */
        atomic_int dec_format;            /* GstVideoFormat the decoder delivers (CAPS event) */
        atomic_uint_fast64_t demuxed;     /* video frames out of the demuxer, this pass */
        atomic_uint_fast64_t decoded_in;  /* compressed frames into the video decoder, this pass */
        atomic_bool have_demuxer, have_decoder;
        atomic_bool video_pad;            /* a demuxer exposed a video stream */
        atomic_uint other_pads;           /* streams a demuxer exposed that are not video (audio, subtitles) */
        atomic_bool have_source;          /* uridecodebin made a source element for the URI (source-setup) */
        atomic_bool threads_said;         /* the bound was logged (once per stream, at info) */
        uint64_t decoder_warnings;        /* WARNING messages from decoders */
        uint64_t decoder_drops;           /* frames decoders reported dropped (QoS messages) */
        struct zcp_gst_lender *lend;      /* files: ring slots lent to the decoder (gst_pool.h; NULL: network) */

        /* The samples and the slots they go to (gst.c). */
        struct zcp_source_info info;
        GstCaps *caps;                    /* caps of the samples being copied (ref) */
        GstVideoInfo vinfo;               /* parsed `caps` */
        enum zcp_pixfmt cur_fmt;          /* ZCP_PIX_NONE: `caps` unusable */
        bool converted;                   /* `caps` come out of videoconvert, not the decoder */
        bool geometry_warned;
        bool reconfigure_ok;              /* the caller handles ZCP_SOURCE_RECONFIGURE */
        GstSample *pending;               /* pulled, waiting for a free slot */
        uint64_t seq;
        bool stopped;                     /* stop() ran: start() begins a new pass */
        uint64_t corrupt_frames;
        uint64_t direct_refused;          /* samples in slot memory that had to be copied all the same */

        /* The timeline, raw = the buffer's own PTS (gst_time.c; gst.c starts passes). */
        uint64_t frame_ns;                /* measured frame duration; 0 = not known yet */
        uint64_t deltas[RATE_SAMPLES];
        uint32_t n_deltas;
        bool have_last;
        uint64_t last_raw_pts, last_duration;
        bool have_first;
        uint64_t first_raw_pts;
        uint64_t loop_base_ns;
        uint64_t passes;
        uint64_t pass_delivered;          /* frames of this pass that reached the ring */
        uint64_t progress_ns;             /* file: last sample or position change (monotonic) */
        gint64 progress_pos;              /* file: the pipeline's position then */
        bool rewound;                     /* loop: seeked to the start, no frame of the new pass yet */
        uint64_t pass_repeats;            /* frames of this pass whose pts did not advance */
        bool rate_said;

        /* The network connection (gst_net.c; source thread). */
        enum zcp_source_state state;
        uint32_t failures;                /* failed attempts since the last connection that delivered */
        uint64_t retry_at_ns, opening_since_ns, last_frame_ns, down_since_ns;
        bool delivered_since_up;
        int last_fail;
};

/* The state, and why it is not up (the last failed attempt's error) for /stats. */
static inline void zcp_gst_set_state(struct zcp_source_ctx *ctx, enum zcp_source_state st)
{
        ctx->state = st;
        atomic_store(&ctx->stats->source_error, st == ZCP_SOURCE_UP ? 0 : ctx->last_fail);
        atomic_store(&ctx->stats->source_state, st);
}
