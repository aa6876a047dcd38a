/* SPDX-License-Identifier: MIT */
/* Name tables of the enums in frame.h and metrics.h (logs, JSON, metrics labels). */
#include "core/frame.h"
#include "core/metrics.h"

const char *const zcp_ts_names[ZCP_TS_COUNT] = {
        [ZCP_TS_CAPTURE] = "capture",
        [ZCP_TS_CONVERT_ENTER] = "convert_enter",
        [ZCP_TS_CONVERT_START] = "convert_start",
        [ZCP_TS_CONVERT_END] = "convert_end",
        [ZCP_TS_INFER_ENTER] = "infer_enter",
        [ZCP_TS_INFER_START] = "infer_start",
        [ZCP_TS_INFER_END] = "infer_end",
        [ZCP_TS_PUBLISH_ENTER] = "publish_enter",
        [ZCP_TS_PUBLISH_START] = "publish_start",
        [ZCP_TS_PUBLISH_END] = "publish_end",
};

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

const char *const zcp_stage_names[ZCP_STAGE_COUNT] = {
        [ZCP_STAGE_CONVERT] = "convert",
        [ZCP_STAGE_INFER] = "infer",
        [ZCP_STAGE_PUBLISH] = "publish",
};

const char *const zcp_source_state_names[ZCP_SOURCE_STATE_COUNT] = {
        [ZCP_SOURCE_DOWN] = "down",
        [ZCP_SOURCE_OPENING] = "opening",
        [ZCP_SOURCE_UP] = "up",
        [ZCP_SOURCE_BACKOFF] = "backoff",
        [ZCP_SOURCE_ENDED] = "ended",
};

const char *const zcp_sink_loss_names[ZCP_SINK_LOSS_COUNT] = {
        [ZCP_SINK_LOSS_QUEUE_FULL] = "queue_full",
        [ZCP_SINK_LOSS_WRITE_ERROR] = "write_error",
        [ZCP_SINK_LOSS_TOO_LONG] = "too_long",
};
