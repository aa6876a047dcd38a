/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The stages a frame goes through after its source, in order: the one list
 * that names them. Everything that is per stage derives from it: the stage
 * enum and its names (metrics.h), the three timestamps of each stage and
 * their names (frame.h), the queue into each stage and the slot state of a
 * frame queued for or held by it (ring.h), the thread of each stage and the
 * ops table it runs (pipeline.c). Adding a stage is one row here and one
 * file defining `const struct zcp_stage_ops zcp_stage_<name>` (stage.h).
 *
 *   X(ID, name, thread)   ID: ZCP_STAGE_<ID>, ZCP_TS_<ID>_ENTER/_START/_END,
 *                             ZCP_Q_<ID>, ZCP_SLOT_<ID>;
 *                         name: metrics label, timestamp prefix, ops symbol;
 *                         thread: thread name prefix (with the stream's
 *                             name, at most 15 characters).
 *
 * The last stage hands results out: after it, the frame is retired (counted,
 * logged) and its slot goes back to the free queue.
 */
#include <stdint.h>

#define ZCP_STAGE_LIST(X)                          \
        X(CONVERT, convert, "zcp-cvt-")            \
        X(INFER, infer, "zcp-inf-")                \
        X(PUBLISH, publish, "zcp-pub-")

#define ZCP_STAGE_ENUM_(ID, name, thread) ZCP_STAGE_##ID,
enum zcp_stage { ZCP_STAGE_LIST(ZCP_STAGE_ENUM_) ZCP_STAGE_COUNT };
#undef ZCP_STAGE_ENUM_

/* Timestamps of stage `st` in zcp_frame.t[] (enum zcp_ts, frame.h): the capture comes first. */
static inline uint32_t zcp_stage_ts_enter(enum zcp_stage st) { return 1 + 3 * (uint32_t)st; }
static inline uint32_t zcp_stage_ts_start(enum zcp_stage st) { return 2 + 3 * (uint32_t)st; }
static inline uint32_t zcp_stage_ts_end(enum zcp_stage st) { return 3 + 3 * (uint32_t)st; }
