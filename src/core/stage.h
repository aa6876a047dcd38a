/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * A stage: what one thread of a stream does to each frame between the source
 * and the free queue, as a const ops table. The stages and their order are
 * listed once, in core/stages.h; pipeline.c runs every one of them with the
 * same loop:
 *
 *   pop a slot from the stage's queue, stamp its start;
 *   unless the frame is already dropped: drop it as `shutdown` if this stage
 *   failed fatally before, as `stale` under the live policy when a newer
 *   frame waits behind it (stages with drop_stale), else process() it;
 *   stamp its end, record wait and busy times of frames not dropped;
 *   hand it to the next stage's queue (or retire it after the last stage:
 *   count, frame log, back to the free queue).
 *
 * Every queue keeps one producer and one consumer: dropped frames travel on,
 * flagged, and only the runner moves slots between queues.
 */
#include <stdbool.h>
#include <stdint.h>

#include "core/pixfmt.h"
#include "core/stages.h"

struct zcp_backend_ops;
struct zcp_plan;
struct zcp_ring;
struct zcp_slot;
struct zcp_snapshot;
struct zcp_stream_config;
struct zcp_stream_stats;

/*
 * What a stage sees of its stream. Filled by pipeline.c before the stage is
 * opened and constant while the stream runs; owned by the stream. What a
 * stage uses besides (the backend's context, the results sink, the live
 * page's snapshot) it opens and closes itself.
 */
struct zcp_stage_env {
        const char *stream;                      /* stream name, for logs */
        uint32_t index;                          /* stream index in the config */
        const struct zcp_stream_config *cfg;
        uint32_t width, height;                  /* geometry the ring was made for */
        enum zcp_pixfmt fmt;                     /* as the source delivers it */
        uint32_t stride;
        struct zcp_ring *ring;
        struct zcp_stream_stats *stats;
        const struct zcp_plan *model;            /* NULL when the model is disabled */
        const struct zcp_backend_ops *backend;   /* the one the ring's memory was allocated for */
};

/*
 * What a stage shows of what it opened, for the stream's view and start-up
 * line (pipeline.h): each stage fills the fields that are its own and
 * leaves the others alone.
 */
struct zcp_stage_facts {
        const char *transfer;                    /* infer: the backend's transfer mode now ("zero-copy", ...) */
        uint64_t transfer_switches;              /* infer: times `transfer: auto` changed it while running */
        const char *sink;                        /* publish: the results sink ("stdout", "file", ...) */
        struct zcp_snapshot *snapshot;           /* publish: the live page's latest frame (borrowed); NULL without */
};

struct zcp_stage_ops {
        const char *name;                        /* the stage's name in core/stages.h */
        bool drop_stale;                         /* the live policy applies (keep the newest frame) */
        /*
         * Main thread, before the stage's thread starts: allocates what the
         * stage needs per frame (scratch, buffers) and opens what it uses
         * (infer: the backend on the ring; publish: the results sink and
         * the snapshot) into *ret_ctx. Optional. Returns 0 or a negative
         * errno (ZCP_ERR_CONFIG: what the config asks cannot be done); the
         * runner logs it.
         */
        int (*open)(const struct zcp_stage_env *env, void **ret_ctx);
        /*
         * Main thread, once the stage's thread has exited, when the stream
         * is joined: hands over what the stage still holds before the stream
         * reports its end (publish: the sink drains, bounded, so that its
         * counts are final). close() follows later. Optional.
         */
        void (*drain)(void *ctx);
        /* Main thread, after the stage's thread exited. Accepts NULL. Optional. */
        void (*close)(void *ctx);
        /*
         * The stage's thread, one frame not dropped, held by the stage. It
         * may drop the frame (zcp_frame_drop(), a counted reason). Returns 0,
         * or a negative error that no later frame can survive (e.g.
         * ZCP_ERR_GPU_STICKY): the stream stops with it as its fatal error
         * and this stage drops every later frame as `shutdown`. Allocates
         * nothing; never blocks except on the work itself.
         */
        int (*process)(void *ctx, const struct zcp_stage_env *env, struct zcp_slot *slot);
        /* Any thread, while the stage is open: fills its part of *facts. Optional. */
        void (*facts)(const void *ctx, struct zcp_stage_facts *facts);
};

/* The ops table of every stage of core/stages.h: `zcp_stage_<name>`. */
#define ZCP_STAGE_OPS_DECL_(ID, name, thread) extern const struct zcp_stage_ops zcp_stage_##name;
ZCP_STAGE_LIST(ZCP_STAGE_OPS_DECL_)
#undef ZCP_STAGE_OPS_DECL_
