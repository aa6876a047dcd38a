/* SPDX-License-Identifier: MIT */
/*
 * The CPU backend's plan executor (cpu_fast.h). At zcp_fast_plan_new it picks the kernels of the
 * best instruction set the CPU runs (cpu_kern.h) and each op of the plan becomes a struct
 * zcp_fk_op: the convolutions' weights repacked for that set's register tiles
 * (cpu_conv_tmpl.c), the resizes' source tables (here), and the op's work cut into units
 * (output rows, chunks of pixels, channel blocks). Per frame, op after op, the op's units go to
 * the worker team through a shared counter, each member taking the next few until none are
 * left (zcp_workers_run_open: a member still waking up takes none, the others do its part), so
 * a member that the machine's other work delays costs the op little more than its own share.
 * An op of under 64 Ki multiply-adds or elements (microseconds: what a fork-join costs) runs on
 * the caller alone.
 * One fork-join per op; nothing is allocated per frame.
 *
 * A 1x1 convolution whose whole output only the next op, a depthwise convolution, reads runs
 * inside it when both are run together (a whole plan): each share makes the 1x1's output rows
 * as its depthwise rows need them, into a ring of rows in scratch of its own, so that output
 * (16 MiB in CenterNet's first block) never goes to memory and back.
 *
 * An op whose output tensor is also its residual or input scale runs as the C reference does
 * (the kernels read those while they write).
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/workers.h"
#include "infer/cpu_fast.h"
#include "infer/cpu_kern.h"
#include "infer/reference.h"

/* Work under which an op runs on the caller alone (multiply-adds or elements). */
#define TEAM_MIN_COST 65536
/* The smallest 1x1 output made inside the depthwise convolution that reads it (fuse()). */
#define FUSE_MIN_FLOATS (1u << 20)
/* Team members with scratch of their own; the others take no units of the ops that need it. */
#define SCRATCH_SHARES 8

struct zcp_fast_plan {
        const struct zcp_plan *plan;
        float *arena;
        struct zcp_fk_op *ops;   /* [plan->op_count] */
        const struct zcp_fk_isa *isa; /* the kernels of the best level the CPU runs */
        float *scratch[SCRATCH_SHARES]; /* per team member (struct zcp_fk_run's) */
};

static float *falloc(size_t n)
{
        size_t bytes = ((n ? n : 1) * sizeof(float) + 63) & ~(size_t)63;
        float *p = aligned_alloc(64, bytes);

        if (p)
                memset(p, 0, bytes);
        return p;
}

/* The level's instructions all run on this CPU. */
static bool cpu_runs(const struct zcp_fk_isa *isa)
{
#if ZCP_FK_X86
        __builtin_cpu_init();
        if (isa == &zcp_fk_v4)
                return __builtin_cpu_supports("x86-64-v4");
        if (isa == &zcp_fk_v3)
                return __builtin_cpu_supports("x86-64-v3");
#endif
        return isa == &zcp_fk_base;
}

/*
 * The best kernels the CPU runs; ZCP_FAST_ISA in the environment (a level's name) asks for a
 * lower one (tests, benchmarks), where the CPU runs it.
 */
static const struct zcp_fk_isa *pick_isa(void)
{
        static const struct zcp_fk_isa *const levels[] = {
#if ZCP_FK_X86
                &zcp_fk_v4,
                &zcp_fk_v3,
#endif
                &zcp_fk_base,
        };
        const char *want = getenv("ZCP_FAST_ISA");
        const size_t n = sizeof(levels) / sizeof(levels[0]);

        for (size_t i = 0; want && i < n; i++)
                if (strcmp(want, levels[i]->name) == 0 && cpu_runs(levels[i]))
                        return levels[i];
        for (size_t i = 0; i < n; i++)
                if (cpu_runs(levels[i]))
                        return levels[i];
        return &zcp_fk_base;
}

/* A resize's source columns and rows with their weights. 0 or -ENOMEM. */
static int resize_new(const struct zcp_plan *p, struct zcp_fk_op *k)
{
        const struct zcp_plan_op *op = k->op;
        const struct zcp_plan_resize *rz = &op->u.resize;
        const struct zcp_plan_tensor *ti = &p->tensors[op->in.t], *to = &p->tensors[op->out.t];
        const float sy = zcp_plan_resize_scale(ti->h, to->h, rz->align_corners);
        const float sx = zcp_plan_resize_scale(ti->w, to->w, rz->align_corners);

        k->xlo = malloc(sizeof(uint32_t) * to->w);
        k->xhi = malloc(sizeof(uint32_t) * to->w);
        k->fx = malloc(sizeof(float) * to->w);
        k->ylo = malloc(sizeof(uint32_t) * to->h);
        k->yhi = malloc(sizeof(uint32_t) * to->h);
        k->fy = malloc(sizeof(float) * to->h);
        if (!k->xlo || !k->xhi || !k->fx || !k->ylo || !k->yhi || !k->fy)
                return -ENOMEM;
        for (uint32_t x = 0; x < to->w; x++)
                zcp_ref_resize_axis(x, ti->w, sx, rz->half_pixel, &k->xlo[x], &k->xhi[x], &k->fx[x]);
        for (uint32_t y = 0; y < to->h; y++)
                zcp_ref_resize_axis(y, ti->h, sy, rz->half_pixel, &k->ylo[y], &k->yhi[y], &k->fy[y]);
        return 0;
}

/* Pixels per unit for work along pixels: about 4096 floats per unit. */
static uint32_t pixel_chunk(uint32_t c)
{
        uint32_t px = 4096 / (c ? c : 1);

        return px ? px : 1;
}

/* Whether tensor t is read by any op but `reader`, or is the input or a head's view. */
static bool read_elsewhere(const struct zcp_plan *p, uint32_t t, uint32_t reader)
{
        if (t == p->input.t || t == p->head.scores.t || (p->head.kind == ZCP_HEAD_CENTERNET && t == p->head.sizes.t))
                return true;
        for (uint32_t i = 0; i < p->op_count; i++) {
                struct zcp_plan_view r[4];
                const uint32_t nr = zcp_plan_op_reads(&p->ops[i], r);

                for (uint32_t k = i == reader ? 1 : 0; k < nr; k++)   /* the reader's own input aside */
                        if (r[k].t == t)
                                return true;
        }
        return false;
}

/*
 * Op i + 1 runs op i inside it in a whole run when op i is a plain 1x1 GEMM (no input scale, no
 * residual) writing all of a tensor of FUSE_MIN_FLOATS or more that only op i + 1, a depthwise
 * convolution, reads (as its input). Sets the depthwise op's pw and fused_floats. Smaller
 * tensors stay in the caches between the two ops anyway: made row by row, they gain nothing
 * (CenterNet on x86-64-v4: 3.1 -> 1.8 ms for 16 MiB, the same for 4.5 MiB, a few percent slower
 * at 32x32 and under).
 */
static void fuse(const struct zcp_plan *p, struct zcp_fk_op *ops, uint32_t i, size_t min_floats)
{
        const struct zcp_plan_op *a = &p->ops[i], *b = &p->ops[i + 1];
        const struct zcp_plan_tensor *t = &p->tensors[a->out.t];

        if (ops[i].how != ZCP_FK_GEMM || ops[i + 1].how != ZCP_FK_DW || a->u.conv.has_scale ||
            (size_t)t->h * t->w * t->c < min_floats ||
            a->u.conv.has_residual || b->in.t != a->out.t || b->in.c0 != a->out.c0 || b->in.c != a->out.c ||
            a->out.c0 != 0 || a->out.c != t->c || read_elsewhere(p, a->out.t, i + 1))
                return;
        ops[i + 1].pw = &ops[i];
        ops[i + 1].fused_floats = (size_t)b->u.conv.kh * t->w * t->c;
}

/* Fills k for op: how, units, cost, and what the kernels need. 0 or -ENOMEM. */
static int op_new(const struct zcp_plan *p, const struct zcp_fk_isa *isa, const struct zcp_plan_op *op,
                  struct zcp_fk_op *k)
{
        const struct zcp_plan_tensor *ti = &p->tensors[op->in.t], *to = &p->tensors[op->out.t];
        const uint64_t in_px = (uint64_t)ti->h * ti->w, out_px = (uint64_t)to->h * to->w;

        memset(k, 0, sizeof(*k));
        k->op = op;
        k->units = 1;
        k->unit_px = 1;
        switch (op->kind) {
        case ZCP_OP_CONV:
                if ((op->u.conv.has_residual && op->u.conv.residual.t == op->out.t) ||
                    (op->u.conv.has_scale && op->u.conv.scale.t == op->out.t))
                        break;
                return isa->conv_new(p, k);
        case ZCP_OP_ELTWISE:
        case ZCP_OP_COPY:
                k->how = op->kind == ZCP_OP_ELTWISE ? ZCP_FK_ELT : ZCP_FK_COPY;
                k->unit_px = pixel_chunk(op->in.c);
                k->units = (uint32_t)((in_px + k->unit_px - 1) / k->unit_px);
                k->cost = in_px * op->in.c;
                return 0;
        case ZCP_OP_MEAN:
                k->how = ZCP_FK_MEAN;
                k->units = (op->in.c + isa->vl - 1) / isa->vl;
                k->cost = in_px * op->in.c;
                return 0;
        case ZCP_OP_RESIZE:
                k->how = ZCP_FK_RESIZE;
                k->units = to->h;
                k->cost = out_px * op->in.c * 4;
                return resize_new(p, k);
        case ZCP_OP_MAXPOOL:
                k->how = ZCP_FK_POOL;
                k->units = to->h;
                k->cost = out_px * op->in.c * op->u.pool.kh * op->u.pool.kw;
                return 0;
        default:
                break;
        }
        k->how = ZCP_FK_REF;
        return 0;
}

static void op_done(struct zcp_fk_op *k)
{
        free(k->w);
        free(k->bias);
        free(k->xlo);
        free(k->xhi);
        free(k->fx);
        free(k->ylo);
        free(k->yhi);
        free(k->fy);
        memset(k, 0, sizeof(*k));
}

static void run_units(const struct zcp_fast_plan *fp, const struct zcp_fk_run *r, uint32_t u0, uint32_t u1)
{
        switch (r->k->how) {
        case ZCP_FK_REF:
                zcp_ref_op(r->plan, (uint32_t)(r->k->op - r->plan->ops), r->arena);
                break;
        case ZCP_FK_GEMM:
        case ZCP_FK_DENSE:
        case ZCP_FK_DW:
                fp->isa->conv_units(r, u0, u1);
                break;
        default:
                fp->isa->ops_units(r, u0, u1);
                break;
        }
}

int zcp_fast_plan_new(const struct zcp_plan *plan, struct zcp_fast_plan **ret)
{
        /* ZCP_FAST_FUSE in the environment: "all" fuses every pair it can, "none" none (tests). */
        const char *fuse_env = getenv("ZCP_FAST_FUSE");
        const size_t fuse_min = !fuse_env ? FUSE_MIN_FLOATS : strcmp(fuse_env, "all") == 0 ? 0
                                : strcmp(fuse_env, "none") == 0 ? SIZE_MAX : FUSE_MIN_FLOATS;
        struct zcp_fast_plan *fp;
        size_t scratch = 0;
        char why[256];
        int r = -ENOMEM;

        if (!plan || zcp_plan_check(plan, why, sizeof(why)) < 0)
                return -EINVAL;
        fp = calloc(1, sizeof(*fp));
        if (!fp)
                return -ENOMEM;
        fp->plan = plan;
        fp->isa = pick_isa();
        fp->arena = falloc(plan->arena_floats);
        fp->ops = calloc(plan->op_count ? plan->op_count : 1, sizeof(*fp->ops));
        if (!fp->arena || !fp->ops)
                goto fail;
        for (uint32_t i = 0; i < plan->op_count; i++) {
                const struct zcp_plan_op *op = &plan->ops[i];

                r = op_new(plan, fp->isa, op, &fp->ops[i]);
                if (r < 0)
                        goto fail;
                scratch = fp->ops[i].scratch_floats > scratch ? fp->ops[i].scratch_floats : scratch;
        }
        for (uint32_t i = 0; i + 1 < plan->op_count; i++) {
                fuse(plan, fp->ops, i, fuse_min);
                scratch = fp->ops[i + 1].fused_floats > scratch ? fp->ops[i + 1].fused_floats : scratch;
        }
        for (uint32_t i = 0; i < SCRATCH_SHARES && scratch; i++) {
                fp->scratch[i] = falloc(scratch);
                if (!fp->scratch[i]) {
                        r = -ENOMEM;
                        goto fail;
                }
        }
        *ret = fp;
        return 0;
fail:
        zcp_fast_plan_free(fp);
        return r;
}

void zcp_fast_plan_free(struct zcp_fast_plan *fp)
{
        if (!fp)
                return;
        for (uint32_t i = 0; fp->ops && i < fp->plan->op_count; i++)
                op_done(&fp->ops[i]);
        free(fp->ops);
        for (uint32_t i = 0; i < SCRATCH_SHARES; i++)
                free(fp->scratch[i]);
        free(fp->arena);
        free(fp);
}

float *zcp_fast_plan_arena(struct zcp_fast_plan *fp)
{
        return fp->arena;
}

const char *zcp_fast_plan_isa(const struct zcp_fast_plan *fp)
{
        return fp->isa->name;
}

/* One op's units shared by the team: each member takes `grain` units at a time until none are left. */
struct job {
        const struct zcp_fast_plan *fp;
        struct zcp_fk_run run;
        uint32_t grain;
        _Atomic uint32_t next;
};

static void job_share(void *arg, uint32_t index, uint32_t count)
{
        struct job *j = arg;
        struct zcp_fk_run run = j->run;
        const uint32_t units = run.k->units;

        (void)count;
        run.scratch = index < SCRATCH_SHARES ? j->fp->scratch[index] : NULL;
        if ((run.fused ? run.k->fused_floats : run.k->scratch_floats) && !run.scratch)
                return;
        for (;;) {
                uint32_t u0 = atomic_fetch_add_explicit(&j->next, j->grain, memory_order_relaxed);
                if (u0 >= units)
                        break;
                run_units(j->fp, &run, u0, units - u0 < j->grain ? units : u0 + j->grain);
        }
}

void zcp_fast_plan_run_ops(struct zcp_fast_plan *fp, struct zcp_workers *team, uint32_t first, uint32_t count)
{
        const uint32_t members = zcp_workers_count(team);
        const uint32_t end = first + count < fp->plan->op_count ? first + count : fp->plan->op_count;

        for (uint32_t i = first; i < end; i++) {
                /* A 1x1 convolution and the depthwise one that alone reads it, together (fuse()). */
                const bool fused = i + 1 < end && fp->ops[i + 1].pw == &fp->ops[i];
                const struct zcp_fk_op *k = &fp->ops[fused ? ++i : i];
                const uint64_t cost = k->cost + (fused ? k->pw->cost : 0);
                struct job j = {
                        .fp = fp,
                        .run = { .plan = fp->plan, .k = k, .arena = fp->arena, .scratch = fp->scratch[0],
                                 .fused = fused },
                };

                if (members < 2 || k->units < 2 || cost < TEAM_MIN_COST || k->how == ZCP_FK_REF) {
                        run_units(fp, &j.run, 0, k->units);
                        continue;
                }
                /*
                 * Units small enough that a late member still finds work: about 8 takes per member
                 * (4 for a fused pair: each take makes its first rows of the 1x1's output anew).
                 */
                j.grain = k->units / (members * (fused ? 4 : 8));
                j.grain = j.grain ? j.grain : 1;
                atomic_init(&j.next, 0);
                zcp_workers_run_open(team, job_share, &j);
        }
}

void zcp_fast_plan_run(struct zcp_fast_plan *fp, struct zcp_workers *team)
{
        zcp_fast_plan_run_ops(fp, team, 0, fp->plan->op_count);
}
