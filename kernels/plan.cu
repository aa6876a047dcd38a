/* SPDX-License-Identifier: MIT */
/*
 * The plan executor's state (zcp_kernels.h "plans"): a plan's weights on a device, uploaded
 * once and shared by every net of that plan on that device (a list under a mutex, references
 * counted); and a net, one stream's arena in device memory with one launch record per op
 * (plan.cuh), made once at open and replayed for every frame, plus the head's operands and
 * scratch. The kernels are in conv.cu, ops.cu and heads.cu.
 */
#include <pthread.h>

#include "plan.cuh"

const char *const zcp_k_gemm_names[ZCP_K_GEMM_COUNT] = { "auto", "ffma", "tf32x3" };

struct zcp_k_model {
        struct zcp_k_model *next;
        const struct zcp_plan *plan;
        int device;
        uint32_t refs;
        float *weights;          /* plan->weight_floats, device memory */
        size_t dev_bytes;
        /* Per engine, the measured tiling of each whole-K gemm op (tune_gemms; -1: the model's
         * pick stands), set by the first net of the engine, NULL until then; under models_lock. */
        int8_t *tiles[ZCP_K_GEMM_COUNT];
};

static pthread_mutex_t models_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zcp_k_model *models;

struct zcp_k_net {
        struct zcp_k_model *model;
        const struct zcp_plan *plan;
        float *arena;
        float *scratch;          /* the means' and split-K gemms' partial sums, then their counters */
        void *head_scratch;
        klaunch_rec *recs;       /* [op_count] */
        const char **names;      /* [op_count] the kernels' names */
        char (*split_names)[40]; /* [op_count] a split-K gemm's name with its splits ("/k8") */
        khead head;
        bool pdl;
        size_t dev_bytes;
        /* The plan's lane 1 (zcp_k_net_forward): its stream (NULL: every op is in lane 0), the
         * event lane 1 starts after, and ev[i] for each op the other lane waits for. */
        cudaStream_t side;
        cudaEvent_t start;
        cudaEvent_t *ev;         /* [op_count] */
};

int zcp_k_model_acquire(const struct zcp_plan *plan, struct zcp_k_model **ret_model, char *errbuf, size_t errlen)
{
        struct zcp_k_model *m;
        cudaError_t e;
        int dev = 0;

        if (!plan || !ret_model)
                return cudaErrorInvalidValue;
        if ((e = cudaGetDevice(&dev)) != cudaSuccess) {
                kerr(errbuf, errlen, "plan weights: no current device: %s", cudaGetErrorString(e));
                return e;
        }
        pthread_mutex_lock(&models_lock);
        for (m = models; m; m = m->next)
                if (m->plan == plan && m->device == dev)
                        break;
        if (m) {
                m->refs++;
                pthread_mutex_unlock(&models_lock);
                *ret_model = m;
                return cudaSuccess;
        }
        m = (struct zcp_k_model *)calloc(1, sizeof(*m));
        if (!m) {
                pthread_mutex_unlock(&models_lock);
                kerr(errbuf, errlen, "out of host memory");
                return cudaErrorMemoryAllocation;
        }
        m->plan = plan;
        m->device = dev;
        m->refs = 1;
        m->dev_bytes = sizeof(float) * (plan->weight_floats ? plan->weight_floats : 1);
        if ((e = kmalloc((void **)&m->weights, m->dev_bytes, "plan weights", errbuf, errlen)) != cudaSuccess ||
            (plan->weight_floats &&
             (e = kupload(m->weights, plan->weights, sizeof(float) * plan->weight_floats, "plan weights", errbuf,
                          errlen)) != cudaSuccess)) {
                pthread_mutex_unlock(&models_lock);
                cudaFree(m->weights);
                free(m);
                return e;
        }
        m->next = models;
        models = m;
        pthread_mutex_unlock(&models_lock);
        *ret_model = m;
        return cudaSuccess;
}

void zcp_k_model_release(struct zcp_k_model *m)
{
        struct zcp_k_model **pp;

        if (!m)
                return;
        pthread_mutex_lock(&models_lock);
        if (--m->refs == 0) {
                for (pp = &models; *pp != m; pp = &(*pp)->next)
                        ;
                *pp = m->next;
                cudaFree(m->weights);
                for (int g = 0; g < ZCP_K_GEMM_COUNT; g++)
                        free(m->tiles[g]);
                free(m);
        }
        pthread_mutex_unlock(&models_lock);
}

size_t zcp_k_model_device_bytes(const struct zcp_k_model *m)
{
        return m ? m->dev_bytes : 0;
}

/* ------------------------------------------------------------------- nets */

static kact act_of(const struct zcp_plan_act *a)
{
        kact k = { (int)a->kind, a->a, a->b };
        return k;
}

static float *view_ptr(const struct zcp_k_net *n, struct zcp_plan_view v)
{
        return n->arena + n->plan->tensors[v.t].off + v.c0;
}

static uint32_t view_stride(const struct zcp_k_net *n, struct zcp_plan_view v)
{
        return n->plan->tensors[v.t].c;
}

/* Whether a view the op reads shares floats with what it writes (refused: the kernels read neighbours). */
static bool overlaps(const struct zcp_plan *p, struct zcp_plan_view r, struct zcp_plan_view w)
{
        const struct zcp_plan_tensor *a = &p->tensors[r.t], *b = &p->tensors[w.t];
        const size_t a0 = a->off, a1 = a->off + (size_t)a->h * a->w * a->c;
        const size_t b0 = b->off, b1 = b->off + (size_t)b->h * b->w * b->c;

        if (r.t == w.t)
                return r.c0 < w.c0 + w.c && w.c0 < r.c0 + r.c;
        return a0 < b1 && b0 < a1;
}

/*
 * Fills net->recs[i] for op i. The scratch a mean or a split-K gemm needs is counted, not yet
 * placed: its partial sums at float *scratch_floats and its counters at word *ret_counters
 * (both advanced), kept in the record as offsets until scratch_place() (the scratch is
 * allocated once every op is planned).
 */
static const char *plan_op(struct zcp_k_net *n, uint32_t i, int gemm, int sms, size_t *scratch_floats,
                           size_t *ret_counters)
{
        const struct zcp_plan *p = n->plan;
        const struct zcp_plan_op *op = &p->ops[i];
        const struct zcp_plan_tensor *ti = &p->tensors[op->in.t], *to = &p->tensors[op->out.t];
        klaunch_rec *r = &n->recs[i];

        memset(r, 0, sizeof(*r));
        switch (op->kind) {
        case ZCP_OP_CONV: {
                const struct zcp_plan_conv *c = &op->u.conv;
                kconv *a = &r->u.conv;
                a->in = view_ptr(n, op->in);
                a->in_stride = view_stride(n, op->in);
                a->ih = ti->h;
                a->iw = ti->w;
                a->cin = op->in.c;
                a->out = view_ptr(n, op->out);
                a->out_stride = view_stride(n, op->out);
                a->oh = to->h;
                a->ow = to->w;
                a->cout = op->out.c;
                a->w = n->model->weights + c->weight;
                a->bias = c->bias != SIZE_MAX ? n->model->weights + c->bias : NULL;
                a->scale = c->has_scale ? view_ptr(n, c->scale) : NULL;
                a->res = c->has_residual ? view_ptr(n, c->residual) : NULL;
                a->res_stride = c->has_residual ? view_stride(n, c->residual) : 0;
                a->kh = c->kh;
                a->kw = c->kw;
                a->sh = c->sh;
                a->sw = c->sw;
                a->pad_t = c->pad_t;
                a->pad_l = c->pad_l;
                a->act = act_of(&op->act);
                {
                        const char *name = kconv_plan(r, c->groups != 1, gemm, sms);
                        if (r->kind == KK_GEMM && a->splits > 1) {
                                const size_t tiles = (size_t)r->grid.x * r->grid.y;
                                a->partial = (float *)(uintptr_t)*scratch_floats;
                                *scratch_floats += tiles * a->splits * a->tile;
                                a->done = (uint32_t *)(uintptr_t)*ret_counters;
                                *ret_counters += tiles;
                        }
                        return name;
                }
        }
        case ZCP_OP_ELTWISE:
        case ZCP_OP_COPY: {
                kelt *a = &r->u.elt;
                r->kind = op->kind == ZCP_OP_COPY ? KK_COPY : KK_ELT;
                a->a = view_ptr(n, op->in);
                a->a_stride = view_stride(n, op->in);
                a->out = view_ptr(n, op->out);
                a->out_stride = view_stride(n, op->out);
                a->pixels = ti->h * ti->w;
                a->c = op->in.c;
                a->act = act_of(&op->act);
                if (op->kind == ZCP_OP_ELTWISE) {
                        a->mul = op->u.elt.mul;
                        a->scalar = op->u.elt.scalar;
                        if (op->u.elt.bcast != ZCP_BCAST_SCALAR) {
                                a->b = view_ptr(n, op->u.elt.b);
                                a->b_stride = op->u.elt.bcast == ZCP_BCAST_NONE ? view_stride(n, op->u.elt.b) : 0;
                        }
                }
                return kops_plan(r, sms);
        }
        case ZCP_OP_MEAN: {
                kmean *a = &r->u.mean;
                r->kind = KK_MEAN;
                a->in = view_ptr(n, op->in);
                a->in_stride = view_stride(n, op->in);
                a->out = view_ptr(n, op->out);
                a->pixels = ti->h * ti->w;
                a->c = op->in.c;
                a->act = act_of(&op->act);
                {
                        const char *name = kops_plan(r, sms);
                        a->partial = (float *)(uintptr_t)*scratch_floats;
                        *scratch_floats += (size_t)a->splits * a->c;
                        a->done = (uint32_t *)(uintptr_t)*ret_counters;
                        *ret_counters += r->grid.x;
                        return name;
                }
        }
        case ZCP_OP_RESIZE: {
                kresize *a = &r->u.resize;
                r->kind = KK_RESIZE;
                a->in = view_ptr(n, op->in);
                a->in_stride = view_stride(n, op->in);
                a->out = view_ptr(n, op->out);
                a->out_stride = view_stride(n, op->out);
                a->ih = ti->h;
                a->iw = ti->w;
                a->oh = to->h;
                a->ow = to->w;
                a->c = op->in.c;
                a->half_pixel = op->u.resize.half_pixel;
                /* zcp_plan_resize_scale(), as reference_plan.c computes it */
                if (op->u.resize.align_corners) {
                        a->sy = to->h > 1 ? (float)(ti->h - 1) / (float)(to->h - 1) : 0.0f;
                        a->sx = to->w > 1 ? (float)(ti->w - 1) / (float)(to->w - 1) : 0.0f;
                } else {
                        a->sy = (float)ti->h / (float)to->h;
                        a->sx = (float)ti->w / (float)to->w;
                }
                a->act = act_of(&op->act);
                return kops_plan(r, sms);
        }
        case ZCP_OP_MAXPOOL: {
                kpool *a = &r->u.pool;
                r->kind = KK_POOL;
                a->in = view_ptr(n, op->in);
                a->in_stride = view_stride(n, op->in);
                a->out = view_ptr(n, op->out);
                a->out_stride = view_stride(n, op->out);
                a->ih = ti->h;
                a->iw = ti->w;
                a->oh = to->h;
                a->ow = to->w;
                a->c = op->in.c;
                a->kh = op->u.pool.kh;
                a->kw = op->u.pool.kw;
                a->sh = op->u.pool.sh;
                a->sw = op->u.pool.sw;
                a->pad_t = op->u.pool.pad_t;
                a->pad_l = op->u.pool.pad_l;
                a->act = act_of(&op->act);
                return kops_plan(r, sms);
        }
        default:
                return NULL;
        }
}

/* The scratch's offsets in the records (plan_op) made pointers: partial sums, then counters. */
static void scratch_place(struct zcp_k_net *n, size_t floats)
{
        uint32_t *const counter0 = (uint32_t *)(n->scratch + floats);

        for (uint32_t i = 0; i < n->plan->op_count; i++) {
                klaunch_rec *r = &n->recs[i];
                if (r->kind == KK_MEAN) {
                        r->u.mean.partial = n->scratch + (uintptr_t)r->u.mean.partial;
                        r->u.mean.done = counter0 + (uintptr_t)r->u.mean.done;
                } else if (r->kind == KK_GEMM && r->u.conv.splits > 1) {
                        r->u.conv.partial = n->scratch + (uintptr_t)r->u.conv.partial;
                        r->u.conv.done = counter0 + (uintptr_t)r->u.conv.done;
                }
        }
}

void zcp_k_net_free(struct zcp_k_net *n)
{
        if (!n)
                return;
        cudaFree(n->arena);
        cudaFree(n->scratch);
        cudaFree(n->head_scratch);
        for (uint32_t i = 0; n->ev && i < n->plan->op_count; i++)
                if (n->ev[i])
                        cudaEventDestroy(n->ev[i]);
        free(n->ev);
        if (n->start)
                cudaEventDestroy(n->start);
        if (n->side)
                cudaStreamDestroy(n->side);
        free(n->recs);
        free(n->names);
        free(n->split_names);
        zcp_k_model_release(n->model);
        free(n);
}

static cudaError_t net_alloc(struct zcp_k_net *n, void **ret, size_t bytes, const char *what, char *errbuf,
                             size_t errlen)
{
        cudaError_t e = kmalloc(ret, bytes, what, errbuf, errlen);

        if (e == cudaSuccess)
                n->dev_bytes += bytes;
        return e;
}

/* Lane 1's stream and the events the lanes wait for, when the plan has a lane 1: an event after
 * each op the other lane waits for, and after lane 1's last op (the join before the head). */
static cudaError_t lanes_new(struct zcp_k_net *n, char *errbuf, size_t errlen)
{
        const struct zcp_plan *p = n->plan;
        uint32_t last = UINT32_MAX;
        cudaError_t e;

        for (uint32_t i = 0; i < p->op_count; i++)
                if (p->ops[i].lane == 1)
                        last = i;
        if (last == UINT32_MAX)
                return cudaSuccess;
        if (!(n->ev = (cudaEvent_t *)calloc(p->op_count, sizeof(*n->ev)))) {
                kerr(errbuf, errlen, "out of host memory");
                return cudaErrorMemoryAllocation;
        }
        if ((e = cudaStreamCreateWithFlags(&n->side, cudaStreamNonBlocking)) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&n->start, cudaEventDisableTiming)) != cudaSuccess)
                goto fail;
        for (uint32_t i = 0; i < p->op_count; i++) {
                const uint32_t a = p->ops[i].after;
                if (a && !n->ev[a - 1] && (e = cudaEventCreateWithFlags(&n->ev[a - 1], cudaEventDisableTiming)) !=
                                                  cudaSuccess)
                        goto fail;
        }
        if (!n->ev[last] && (e = cudaEventCreateWithFlags(&n->ev[last], cudaEventDisableTiming)) != cudaSuccess)
                goto fail;
        return cudaSuccess;
fail:
        kerr(errbuf, errlen, "plan: the second lane's stream and events: %s", cudaGetErrorString(e));
        return e;
}

/* What the kernels need of a plan beyond zcp_plan_check's; the reason in errbuf. */
static cudaError_t net_check(const struct zcp_plan *p, char *errbuf, size_t errlen)
{
        const struct zcp_plan_head *h = &p->head;

        for (uint32_t i = 0; i < p->op_count; i++) {
                const struct zcp_plan_op *op = &p->ops[i];
                bool bad = overlaps(p, op->in, op->out);
                if (op->kind == ZCP_OP_CONV && op->u.conv.has_residual)
                        bad = bad || (overlaps(p, op->u.conv.residual, op->out) &&
                                      !(op->u.conv.residual.t == op->out.t && op->u.conv.residual.c0 == op->out.c0));
                if (op->kind == ZCP_OP_CONV && op->u.conv.has_scale)
                        bad = bad || overlaps(p, op->u.conv.scale, op->out);
                if (op->kind == ZCP_OP_ELTWISE && op->u.elt.bcast != ZCP_BCAST_SCALAR)
                        bad = bad || overlaps(p, op->u.elt.b, op->out);
                if (bad) {
                        kerr(errbuf, errlen, "op %u (%s): writes memory it reads", i, op->name);
                        return cudaErrorNotSupported;
                }
        }
        if (h->kind == ZCP_HEAD_CENTERNET) {
                const struct zcp_plan_tensor *s = &p->tensors[h->scores.t], *z = &p->tensors[h->sizes.t];
                if (h->candidates == 0 || h->candidates > ZCP_K_CANDIDATES_MAX || h->classes > ZCP_DET_CLASSES_MAX ||
                    s->h != z->h || s->w != z->w || (uint64_t)s->h * s->w * h->classes >= 0xffffffffull) {
                        kerr(errbuf, errlen,
                             "the CenterNet head (%u candidates, %u classes, maps %ux%u and %ux%u): the GPU takes "
                             "1..%u candidates, at most %u classes and maps of one size",
                             h->candidates, h->classes, s->w, s->h, z->w, z->h, ZCP_K_CANDIDATES_MAX,
                             ZCP_DET_CLASSES_MAX);
                        return cudaErrorNotSupported;
                }
        }
        return cudaSuccess;
}

/*
 * Measured tilings. kconv_plan picks a gemm's tiling by a model of its waves, which misjudges
 * some shapes by 1.6x (CenterNet's class head on an H100: 52 us as the model first had it, 36 us
 * at the tiling it now picks, 32 us at the one measured). So the first net
 * of a model and engine on a device times every whole-K tiling of each whole-K gemm op on its
 * arena (TUNE_RUNS launches, the best of TUNE_ROUNDS rounds) and keeps the fastest where it beats
 * the model's pick by TUNE_MARGIN; every later net of that model and engine takes the same
 * tilings. A tiling changes only the time, never a bit of the result (plan.cuh, kconv_retile), so
 * which one wins (a busy GPU may time them differently) cannot change what a frame detects.
 * Split-K gemms keep the model's plan: their sums are in another order. ZCP_GEMM_TUNE=0: the
 * model's picks (benchmarks compare the two).
 */
#define TUNE_RUNS   4
#define TUNE_ROUNDS 3
#define TUNE_MARGIN 0.97f

static float tune_time(const klaunch_rec *r, cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1, cudaError_t *err)
{
        float best = 0.0f;

        for (int round = 0; round < TUNE_ROUNDS && *err == cudaSuccess; round++) {
                float ms = 0.0f;
                *err = kconv_launch(r, false, st);   /* the first round's: warms caches and code */
                if (*err == cudaSuccess)
                        *err = cudaEventRecord(e0, st);
                for (int i = 0; i < TUNE_RUNS && *err == cudaSuccess; i++)
                        *err = kconv_launch(r, false, st);
                if (*err == cudaSuccess && (*err = cudaEventRecord(e1, st)) == cudaSuccess &&
                    (*err = cudaEventSynchronize(e1)) == cudaSuccess &&
                    (*err = cudaEventElapsedTime(&ms, e0, e1)) == cudaSuccess && (round == 0 || ms < best))
                        best = ms;
        }
        return best;
}

/* Fills tiles[op] (-1 where the model's pick stands) by timing n's whole-K gemms. */
static cudaError_t tune_gemms(struct zcp_k_net *n, int8_t *tiles, char *errbuf, size_t errlen)
{
        cudaStream_t st = NULL;
        cudaEvent_t e0 = NULL, e1 = NULL;
        cudaError_t e;

        if ((e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)) == cudaSuccess &&
            (e = cudaEventCreate(&e0)) == cudaSuccess)
                e = cudaEventCreate(&e1);
        for (uint32_t i = 0; e == cudaSuccess && i < n->plan->op_count; i++) {
                const klaunch_rec *r = &n->recs[i];
                float best;
                tiles[i] = -1;
                if (r->kind != KK_GEMM || r->u.conv.splits > 1)
                        continue;
                best = TUNE_MARGIN * tune_time(r, st, e0, e1, &e);
                for (int t = 0; e == cudaSuccess && t < kconv_tilings(); t++) {
                        klaunch_rec c = *r;
                        float ms;
                        if (t == r->variant / 4 || !kconv_retile(&c, t))
                                continue;
                        ms = tune_time(&c, st, e0, e1, &e);
                        if (e == cudaSuccess && ms < best) {
                                best = ms;
                                tiles[i] = (int8_t)t;
                        }
                }
        }
        if (e != cudaSuccess)
                kerr(errbuf, errlen, "plan: timing the convolutions' tilings: %s", cudaGetErrorString(e));
        if (e1)
                cudaEventDestroy(e1);
        if (e0)
                cudaEventDestroy(e0);
        if (st)
                cudaStreamDestroy(st);
        return e;
}

/* The model's tilings for this engine, measured by the first net that asks (tune_gemms). */
static cudaError_t net_tiles(struct zcp_k_net *n, enum zcp_k_gemm gemm, char *errbuf, size_t errlen)
{
        const uint32_t ops = n->plan->op_count ? n->plan->op_count : 1;
        const char *env = getenv("ZCP_GEMM_TUNE");
        int8_t *tiles, *mine = NULL;
        cudaError_t e;

        if (env && strcmp(env, "0") == 0)
                return cudaSuccess;
        pthread_mutex_lock(&models_lock);
        tiles = n->model->tiles[gemm];
        pthread_mutex_unlock(&models_lock);
        if (!tiles) {
                if (!(mine = (int8_t *)malloc(ops))) {
                        kerr(errbuf, errlen, "out of host memory");
                        return cudaErrorMemoryAllocation;
                }
                if ((e = tune_gemms(n, mine, errbuf, errlen)) != cudaSuccess) {
                        free(mine);
                        return e;
                }
                pthread_mutex_lock(&models_lock);   /* another net may have measured them meanwhile */
                if (!n->model->tiles[gemm]) {
                        n->model->tiles[gemm] = mine;
                        mine = NULL;
                }
                tiles = n->model->tiles[gemm];
                pthread_mutex_unlock(&models_lock);
                free(mine);
        }
        for (uint32_t i = 0; i < n->plan->op_count; i++)
                if (tiles[i] >= 0 && kconv_retile(&n->recs[i], tiles[i]))
                        n->names[i] = kconv_name(&n->recs[i]);
        return cudaSuccess;
}

int zcp_k_net_new(struct zcp_k_model *model, enum zcp_k_gemm gemm, struct zcp_k_net **ret_net, char *errbuf,
                  size_t errlen)
{
        const struct zcp_plan *p;
        struct zcp_k_net *n;
        size_t scratch_floats = 0, counters = 0, scratch_bytes, head_bytes;
        cudaError_t e;
        int dev = 0, sms = 0;

        if (!model || !ret_net || (int)gemm < 0 || gemm >= ZCP_K_GEMM_COUNT)
                return cudaErrorInvalidValue;
        p = model->plan;
        if ((e = net_check(p, errbuf, errlen)) != cudaSuccess)
                return e;
        if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) {
                kerr(errbuf, errlen, "plan: reading the device's attributes: %s", cudaGetErrorString(e));
                return e;
        }
        if (gemm == ZCP_K_GEMM_AUTO)
                gemm = ZCP_K_GEMM_DEFAULT;
        n = (struct zcp_k_net *)calloc(1, sizeof(*n));
        if (!n) {
                kerr(errbuf, errlen, "out of host memory");
                return cudaErrorMemoryAllocation;
        }
        n->model = model;   /* a reference of its own from here on success (below) */
        n->plan = p;
        n->pdl = kpdl_enabled();
        n->recs = (klaunch_rec *)calloc(p->op_count ? p->op_count : 1, sizeof(*n->recs));
        n->names = (const char **)calloc(p->op_count ? p->op_count : 1, sizeof(*n->names));
        n->split_names = (char (*)[40])calloc(p->op_count ? p->op_count : 1, sizeof(*n->split_names));
        if (!n->recs || !n->names || !n->split_names) {
                kerr(errbuf, errlen, "out of host memory");
                e = cudaErrorMemoryAllocation;
                goto fail;
        }
        if ((e = net_alloc(n, (void **)&n->arena, sizeof(float) * (p->arena_floats ? p->arena_floats : 1),
                           "activations (arena)", errbuf, errlen)) != cudaSuccess)
                goto fail;
        for (uint32_t i = 0; i < p->op_count; i++) {
                n->names[i] = plan_op(n, i, (int)gemm, sms, &scratch_floats, &counters);
                if (!n->names[i]) {
                        kerr(errbuf, errlen, "op %u (%s): kind %d has no kernel", i, p->ops[i].name,
                             (int)p->ops[i].kind);
                        e = cudaErrorNotSupported;
                        goto fail;
                }
                if (n->recs[i].kind == KK_GEMM && n->recs[i].u.conv.splits > 1) {
                        snprintf(n->split_names[i], sizeof(n->split_names[i]), "%s/k%u", n->names[i],
                                 n->recs[i].u.conv.splits);
                        n->names[i] = n->split_names[i];
                }
        }
        scratch_bytes = sizeof(float) * scratch_floats + sizeof(uint32_t) * counters;
        if ((e = net_alloc(n, (void **)&n->scratch, scratch_bytes ? scratch_bytes : 16, "ops' scratch", errbuf,
                           errlen)) != cudaSuccess)
                goto fail;
        if ((e = cudaMemset(n->arena, 0, sizeof(float) * p->arena_floats)) != cudaSuccess ||
            (e = cudaMemset(n->scratch, 0, scratch_bytes ? scratch_bytes : 16)) != cudaSuccess) {
                kerr(errbuf, errlen, "plan: clearing the arena: %s", cudaGetErrorString(e));
                goto fail;
        }
        scratch_place(n, scratch_floats);
        if ((e = net_tiles(n, gemm, errbuf, errlen)) != cudaSuccess ||
            (e = cudaMemset(n->arena, 0, sizeof(float) * p->arena_floats)) != cudaSuccess)
                goto fail;
        if ((e = lanes_new(n, errbuf, errlen)) != cudaSuccess)
                goto fail;
        {
                const struct zcp_plan_head *h = &p->head;
                khead *k = &n->head;
                k->kind = (int)h->kind;
                k->scores = view_ptr(n, h->scores);
                k->scores_stride = view_stride(n, h->scores);
                k->classes = h->classes;
                if (h->kind == ZCP_HEAD_CENTERNET) {
                        k->sizes = view_ptr(n, h->sizes);
                        k->sizes_stride = view_stride(n, h->sizes);
                        k->h = p->tensors[h->scores.t].h;
                        k->w = p->tensors[h->scores.t].w;
                        k->k = h->candidates;
                        k->stride = h->stride;
                }
                head_bytes = khead_plan(k, sms);
                if ((e = net_alloc(n, &n->head_scratch, head_bytes, "head scratch", errbuf, errlen)) != cudaSuccess)
                        goto fail;
                k->lists = (unsigned long long *)n->head_scratch;
                k->probs = (float *)n->head_scratch;
        }
        pthread_mutex_lock(&models_lock);
        model->refs++;
        pthread_mutex_unlock(&models_lock);
        *ret_net = n;
        return cudaSuccess;
fail:
        n->model = NULL;
        zcp_k_net_free(n);
        return e;
}

size_t zcp_k_net_device_bytes(const struct zcp_k_net *n)
{
        return n ? n->dev_bytes : 0;
}

const struct zcp_plan *zcp_k_net_plan(const struct zcp_k_net *n)
{
        return n->plan;
}

float *zcp_k_net_arena(const struct zcp_k_net *n)
{
        return n->arena;
}

float *zcp_k_net_input(const struct zcp_k_net *n)
{
        return n->arena + n->plan->tensors[n->plan->input.t].off;
}

uint32_t zcp_k_net_launches(const struct zcp_k_net *n, uint32_t first, uint32_t count)
{
        uint32_t end = first + count < n->plan->op_count ? first + count : n->plan->op_count;
        return end > first ? end - first : 0;
}

int zcp_k_net_tilings(void)
{
        return kconv_tilings();
}

uint32_t zcp_k_net_retile(struct zcp_k_net *n, int tile)
{
        uint32_t count = 0;

        for (uint32_t i = 0; i < n->plan->op_count; i++)
                if (kconv_retile(&n->recs[i], tile)) {
                        n->names[i] = kconv_name(&n->recs[i]);
                        count++;
                }
        return count;
}

const char *zcp_k_net_op_kernel(const struct zcp_k_net *n, uint32_t i)
{
        return i < n->plan->op_count ? n->names[i] : "?";
}

int zcp_k_net_ops(const struct zcp_k_net *n, uint32_t first, uint32_t count, void *stream)
{
        cudaStream_t st = (cudaStream_t)stream;

        if (!n)
                return cudaErrorInvalidValue;
        for (uint32_t i = first; i < first + count && i < n->plan->op_count; i++) {
                const klaunch_rec *r = &n->recs[i];
                cudaError_t e = r->kind == KK_GEMM || r->kind == KK_MATVEC || r->kind == KK_DW
                                        ? kconv_launch(r, n->pdl, st)
                                        : kops_launch(r, n->pdl, st);
                if (e != cudaSuccess)
                        return e;
        }
        return cudaSuccess;
}

int zcp_k_net_forward(const struct zcp_k_net *n, void *stream)
{
        const cudaStream_t st = (cudaStream_t)stream;
        uint32_t joined = 0, last = 0;   /* 1 + lane 1's last op lane 0 waited for; 1 + its last op */
        cudaError_t e;

        if (!n)
                return cudaErrorInvalidValue;
        if (!n->side)
                return zcp_k_net_ops(n, 0, n->plan->op_count, stream);
        if ((e = cudaEventRecord(n->start, st)) != cudaSuccess ||
            (e = cudaStreamWaitEvent(n->side, n->start, 0)) != cudaSuccess)
                return e;
        for (uint32_t i = 0; i < n->plan->op_count; i++) {
                const struct zcp_plan_op *op = &n->plan->ops[i];
                const cudaStream_t s = op->lane ? n->side : st;
                if (op->after && (e = cudaStreamWaitEvent(s, n->ev[op->after - 1], 0)) != cudaSuccess)
                        return e;
                if (op->after && op->lane == 0)
                        joined = op->after;
                if ((e = (cudaError_t)zcp_k_net_ops(n, i, 1, s)) != cudaSuccess)
                        return e;
                if (n->ev[i] && (e = cudaEventRecord(n->ev[i], s)) != cudaSuccess)
                        return e;
                if (op->lane)
                        last = i + 1;
        }
        if (last > joined && (e = cudaStreamWaitEvent(st, n->ev[last - 1], 0)) != cudaSuccess)
                return e;
        return cudaSuccess;
}

int zcp_k_net_head(const struct zcp_k_net *n, uint32_t top_k, const struct zcp_det_params *det,
                   struct zcp_result *stage_dev, struct zcp_result *publish_dev, void *stream)
{
        if (!n || !stage_dev)
                return cudaErrorInvalidValue;
        return khead_launch(&n->head, top_k, det, stage_dev, publish_dev, n->pdl, (cudaStream_t)stream);
}
