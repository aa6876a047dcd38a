/* SPDX-License-Identifier: MIT */
/*
 * The convert stage (core/stage.h): the frame in its slot, converted in place
 * to tightly packed NV12.
 *
 * In: frames as the source delivered them. Out: NV12 frames of the ring's
 * geometry. Blocks: never (CPU work only). Drops: a frame whose geometry or
 * size does not fit the ring (oversize), a frame the conversion refuses
 * (convert); under the live policy, the runner drops a frame that has a
 * newer one queued behind it (stale).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "convert/convert.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"
#include "core/ring.h"
#include "core/stage.h"
#include "core/workers.h"

struct convert_stage {
        uint8_t *scratch;          /* zcp_convert_scratch_size_mt() bytes, this thread's */
        size_t scratch_size;
        struct zcp_workers *team;  /* band helpers for large frames; NULL: the stage converts alone */
};

static int convert_open(const struct zcp_stage_env *env, void **ret_ctx)
{
        struct convert_stage *c = calloc(1, sizeof(*c));

        uint32_t threads;
        int r;

        if (!c)
                return -ENOMEM;
        /* convert.threads: 0 = by frame size and the CPUs there are (convert.h). */
        threads = env->cfg->convert.threads ? env->cfg->convert.threads
                                            : zcp_convert_auto_threads(env->width, env->height, zcp_workers_cpus());
        threads = zcp_convert_team_size(env->fmt, env->width, env->height, env->stride, threads);
        if (threads > 1) {
                r = zcp_workers_new(threads, "zcp-cvw-", &c->team);
                if (r < 0) {
                        zcp_err("%s: cannot start %u conversion threads: %s", env->stream, threads, zcp_strerror(r));
                        free(c);
                        return r;
                }
        }
        c->scratch_size = zcp_convert_scratch_size_mt(env->fmt, env->width, env->height, env->stride, threads);
        c->scratch = malloc(c->scratch_size ? c->scratch_size : 1);
        if (!c->scratch) {
                zcp_workers_free(c->team);
                free(c);
                return -ENOMEM;
        }
        if (threads > 1)
                zcp_info("%s: %ux%u %s converted in %u row bands", env->stream, env->width, env->height,
                         zcp_pixfmt_name(env->fmt), threads);
        *ret_ctx = c;
        return 0;
}

static void convert_close(void *ctx)
{
        struct convert_stage *c = ctx;

        if (!c)
                return;
        zcp_workers_free(c->team);
        free(c->scratch);
        free(c);
}

static int convert_process(void *ctx, const struct zcp_stage_env *env, struct zcp_slot *slot)
{
        struct convert_stage *c = ctx;
        struct zcp_frame *f = &slot->frame;
        int r;

        if (f->width != env->width || f->height != env->height || f->bytes > slot->cap) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC,
                                    "%s: frame %ux%u (%llu bytes) does not fit the ring (%ux%u, %zu bytes per slot)",
                                    env->stream, f->width, f->height, (unsigned long long)f->bytes, env->width,
                                    env->height, slot->cap);
                zcp_frame_drop(env->ring, f, ZCP_DROP_OVERSIZE);
                return 0;
        }
        if (f->fmt == ZCP_PIX_NV12 && f->stride == f->width)
                return 0;
        r = zcp_convert_to_nv12_mt(c->team, f->fmt, slot->data, slot->cap, f->width, f->height, f->stride,
                                   c->scratch, c->scratch_size);
        if (r < 0) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC, "%s: cannot convert %s %ux%u stride %u: %s",
                                    env->stream, zcp_pixfmt_name(f->fmt), f->width, f->height, f->stride,
                                    zcp_strerror(r));
                zcp_frame_drop(env->ring, f, ZCP_DROP_CONVERT);
                return 0;
        }
        f->fmt = ZCP_PIX_NV12;
        f->stride = f->width;
        f->bytes = zcp_nv12_size(f->width, f->height);
        return 0;
}

const struct zcp_stage_ops zcp_stage_convert = {
        .name = "convert",
        .drop_stale = true,
        .open = convert_open,
        .close = convert_close,
        .process = convert_process,
};
