/* SPDX-License-Identifier: MIT */
/*
 * The infer stage (core/stage.h): the backend's submit and wait on the slot;
 * the results land in the slot's result block. The stage opens the backend
 * the stream chose (env->backend, the one whose allocator made the ring) on
 * the ring at open and closes it at close.
 *
 * In: NV12 frames. Out: frames with a valid result block. Blocks: in the
 * backend's wait (the GPU, or the CPU reference on this thread). Drops: a
 * frame the backend failed on, wrote no result for, or gave non-finite
 * scores for (infer); under the live
 * policy, the runner drops a frame that has a newer one queued behind it
 * (stale). A sticky GPU error is fatal: the stream stops with it and the
 * runner drops every later frame (shutdown).
 *
 * Fault injection (tests): ZCP_FAULT_STICKY=[stream:]N makes the backend's
 * verdict on frame N (of that stream, or of every stream) a sticky GPU
 * error, whichever backend runs, so that what follows it (the stream's end,
 * the supervisor, exit 86) is tested without breaking a GPU. Said at open.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/exitcode.h"
#include "core/log.h"
#include "core/ring.h"
#include "core/stage.h"
#include "infer/backend.h"

struct infer_stage {
        const struct zcp_backend_ops *ops;
        struct zcp_backend_ctx *be;
        uint64_t sticky_at;        /* ZCP_FAULT_STICKY: frame seq + 1 whose verdict is sticky; 0 none */
};

/* ZCP_FAULT_STICKY=[stream:]N for this stream: N + 1, else 0. */
static uint64_t injected_sticky(const char *stream)
{
        const char *v = getenv("ZCP_FAULT_STICKY"), *colon;
        unsigned long long n;
        char *end;

        if (!v || !v[0])
                return 0;
        colon = strrchr(v, ':');
        if (colon && ((size_t)(colon - v) != strlen(stream) || strncmp(v, stream, (size_t)(colon - v)) != 0))
                return 0;
        n = strtoull(colon ? colon + 1 : v, &end, 10);
        if (*end || end == (colon ? colon + 1 : v)) {
                zcp_warn("%s: ZCP_FAULT_STICKY=%s: not [stream:]frame, ignored", stream, v);
                return 0;
        }
        zcp_warn("%s: ZCP_FAULT_STICKY: frame %llu will fail as a sticky GPU error (fault injection)", stream, n);
        return (uint64_t)n + 1;
}

static int infer_open(const struct zcp_stage_env *env, void **ret_ctx)
{
        struct zcp_backend_params bp;
        struct infer_stage *in;
        char err[512];
        int r;

        r = zcp_backend_params_init(&bp, env->cfg, env->model, env->width, env->height, env->stream, err,
                                    sizeof(err));
        if (r < 0) {
                zcp_err("%s: %s", env->stream, err);
                return ZCP_ERR_CONFIG;
        }
        in = calloc(1, sizeof(*in));
        if (!in)
                return -ENOMEM;
        in->ops = env->backend;
        in->sticky_at = injected_sticky(env->stream);
        r = in->ops->open(&bp, env->ring, &in->be);
        if (r < 0) {
                free(in);
                return r;
        }
        *ret_ctx = in;
        return 0;
}

static void infer_close(void *ctx)
{
        struct infer_stage *in = ctx;

        if (!in)
                return;
        in->ops->close(in->be);
        free(in);
}

static void infer_facts(const void *ctx, struct zcp_stage_facts *facts)
{
        const struct infer_stage *in = ctx;

        facts->transfer = in->ops->transfer_mode(in->be);
        facts->transfer_switches = in->ops->transfer_switches ? in->ops->transfer_switches(in->be) : 0;
}

/* Every number publish will print is finite. */
static bool result_finite(const struct zcp_result *res)
{
        if (!isfinite(res->moving_fraction))
                return false;
        for (uint32_t i = 0; i < res->topk_count && i < ZCP_TOPK_MAX; i++)
                if (!isfinite(res->topk_prob[i]))
                        return false;
        for (uint32_t i = 0; i < res->det_count && i < ZCP_DET_MAX; i++)
                if (!isfinite(res->det[i].score) || !isfinite(res->det[i].box[0]) || !isfinite(res->det[i].box[1]) ||
                    !isfinite(res->det[i].box[2]) || !isfinite(res->det[i].box[3]))
                        return false;
        return true;
}

static int infer_process(void *ctx, const struct zcp_stage_env *env, struct zcp_slot *slot)
{
        struct infer_stage *in = ctx;
        struct zcp_frame *f = &slot->frame;
        int r;

        slot->result->valid = 0;
        r = in->ops->submit(in->be, slot);
        if (r == 0)
                r = in->ops->wait(in->be, slot);
        if (in->sticky_at && f->seq + 1 >= in->sticky_at)
                r = ZCP_ERR_GPU_STICKY;
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
        .open = infer_open,
        .close = infer_close,
        .process = infer_process,
        .facts = infer_facts,
};
