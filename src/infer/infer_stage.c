/* SPDX-License-Identifier: MIT */
/*
 * The infer stage (core/stage.h): the backend's submit and wait on the slot;
 * the results land in the slot's result block.
 *
 * In: NV12 frames. Out: frames with a valid result block. Blocks: in the
 * backend's wait (the GPU, or the CPU reference on this thread). Drops: a
 * frame the backend failed on, wrote no result for, or gave non-finite
 * scores for (infer); under the live
 * policy, the runner drops a frame that has a newer one queued behind it
 * (stale). A sticky GPU error is fatal: the stream stops with it and the
 * runner drops every later frame (shutdown).
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/exitcode.h"
#include "core/log.h"
#include "core/ring.h"
#include "core/stage.h"
#include "infer/backend.h"

/* Every number publish will print is finite. */
static bool result_finite(const struct zcp_result *res)
{
        if (!isfinite(res->moving_fraction))
                return false;
        for (uint32_t i = 0; i < res->topk_count && i < ZCP_TOPK_MAX; i++)
                if (!isfinite(res->topk_prob[i]))
                        return false;
        return true;
}

static int infer_process(void *ctx, const struct zcp_stage_env *env, struct zcp_slot *slot)
{
        struct zcp_frame *f = &slot->frame;
        int r;

        slot->result->valid = 0;
        r = env->backend->submit(env->backend_ctx, slot);
        if (r == 0)
                r = env->backend->wait(env->backend_ctx, slot);
        if (r == ZCP_ERR_GPU_STICKY) {
                zcp_err("%s: fatal GPU error at frame %llu: stopping (the process exits %d)", env->stream,
                        (unsigned long long)f->seq, ZCP_EXIT_GPU_FATAL);
                zcp_frame_drop(env->ring, f, ZCP_DROP_INFER);
                return r;
        }
        if (r < 0 || !slot->result->valid) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC, "%s: inference failed on frame %llu: %s",
                                    env->stream, (unsigned long long)f->seq,
                                    r < 0 ? zcp_strerror(r) : "no result written");
                zcp_frame_drop(env->ring, f, ZCP_DROP_INFER);
        } else if (!result_finite(slot->result)) {
                /* NaN/inf is not JSON and not a result: weights that overflow float. */
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC,
                                    "%s: inference gave non-finite scores on frame %llu "
                                    "(weights too large for float?): frame dropped",
                                    env->stream, (unsigned long long)f->seq);
                zcp_frame_drop(env->ring, f, ZCP_DROP_INFER);
        }
        return 0;
}

const struct zcp_stage_ops zcp_stage_infer = {
        .name = "infer",
        .drop_stale = true,
        .process = infer_process,
};
