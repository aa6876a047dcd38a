/* SPDX-License-Identifier: MIT */
/*
 * The CPU backend's plan executor (cpu_fast.h). For now each op runs as its C reference does;
 * the vectorised kernels replace these calls op kind by op kind, checked against the reference
 * by tests/unit/test_cpu_fast.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/workers.h"
#include "infer/cpu_fast.h"
#include "infer/reference.h"

struct zcp_fast_plan {
        const struct zcp_plan *plan;
        float *arena;
};

int zcp_fast_plan_new(const struct zcp_plan *plan, struct zcp_fast_plan **ret)
{
        struct zcp_fast_plan *fp;
        char why[256];

        if (!plan || zcp_plan_check(plan, why, sizeof(why)) < 0)
                return -EINVAL;
        fp = calloc(1, sizeof(*fp));
        if (!fp)
                return -ENOMEM;
        fp->plan = plan;
        fp->arena = aligned_alloc(64, ((plan->arena_floats ? plan->arena_floats : 1) * sizeof(float) + 63) & ~(size_t)63);
        if (!fp->arena) {
                free(fp);
                return -ENOMEM;
        }
        memset(fp->arena, 0, plan->arena_floats * sizeof(float));
        *ret = fp;
        return 0;
}

void zcp_fast_plan_free(struct zcp_fast_plan *fp)
{
        if (!fp)
                return;
        free(fp->arena);
        free(fp);
}

float *zcp_fast_plan_arena(struct zcp_fast_plan *fp)
{
        return fp->arena;
}

void zcp_fast_plan_run_ops(struct zcp_fast_plan *fp, struct zcp_workers *team, uint32_t first, uint32_t count)
{
        (void)team;
        for (uint32_t i = first; i < first + count && i < fp->plan->op_count; i++)
                zcp_ref_op(fp->plan, i, fp->arena);
}

void zcp_fast_plan_run(struct zcp_fast_plan *fp, struct zcp_workers *team)
{
        zcp_fast_plan_run_ops(fp, team, 0, fp->plan->op_count);
}
