/* SPDX-License-Identifier: MIT */
/* Name tables of the enums in frame.h, metrics.h and stages.h (logs, JSON, metrics labels). */
#include "core/frame.h"
#include "core/metrics.h"

#define TS_NAMES(ID, name, thread) #name "_enter", #name "_start", #name "_end",
const char *const zcp_ts_names[ZCP_TS_COUNT] = { "capture", ZCP_STAGE_LIST(TS_NAMES) };
#undef TS_NAMES

const char *const zcp_drop_reason_names[ZCP_DROP_REASON_COUNT] = {
        [ZCP_DROP_RING_FULL] = "ring_full",
        [ZCP_DROP_STALE] = "stale",
        [ZCP_DROP_CORRUPT] = "corrupt",
        [ZCP_DROP_SHORT] = "short",
        [ZCP_DROP_OVERSIZE] = "oversize",
        [ZCP_DROP_SEQ_GAP] = "seq_gap",
        [ZCP_DROP_BAD_INDEX] = "bad_index",
        [ZCP_DROP_CONVERT] = "convert",
        [ZCP_DROP_INFER] = "infer",
        [ZCP_DROP_SHUTDOWN] = "shutdown",
};

#define STAGE_NAMES(ID, name, thread) [ZCP_STAGE_##ID] = #name,
const char *const zcp_stage_names[ZCP_STAGE_COUNT] = { ZCP_STAGE_LIST(STAGE_NAMES) };
#undef STAGE_NAMES

const char *const zcp_source_state_names[ZCP_SOURCE_STATE_COUNT] = {
        [ZCP_SOURCE_DOWN] = "down",
        [ZCP_SOURCE_OPENING] = "opening",
        [ZCP_SOURCE_UP] = "up",
        [ZCP_SOURCE_BACKOFF] = "backoff",
        [ZCP_SOURCE_ENDED] = "ended",
};

const char *const zcp_stream_state_names[ZCP_STREAM_STATE_COUNT] = {
        [ZCP_STREAM_UP] = "up",
        [ZCP_STREAM_BACKOFF] = "backoff",
        [ZCP_STREAM_FAILED] = "failed",
        [ZCP_STREAM_ENDED] = "ended",
};

const char *const zcp_sink_loss_names[ZCP_SINK_LOSS_COUNT] = {
        [ZCP_SINK_LOSS_QUEUE_FULL] = "queue_full",
        [ZCP_SINK_LOSS_WRITE_ERROR] = "write_error",
        [ZCP_SINK_LOSS_TOO_LONG] = "too_long",
        [ZCP_SINK_LOSS_NO_READER] = "no_reader",
        [ZCP_SINK_LOSS_SLOW_READER] = "slow_reader",
};
