/* SPDX-License-Identifier: MIT */
/*
 * Packed formats (4:2:2, RGB) to NV12 in place (convert_packed.h): which row
 * pairs go where in which order so that no output overwrites unread input,
 * on one thread or split across a team. The rows themselves are
 * convert_rows.c's. Keeps no state; allocates nothing.
 */
#include <assert.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "convert/convert_packed.h"
#include "core/workers.h"

/* ---- packed formats: driver ---- */

/*
 * Chroma row j may be written in place as soon as it lies in front of row
 * pair j's input: w*h + (j+1)*w <= 2*j*stride. Rows before the first such j
 * wait in scratch. Always >= 1 (pair 0 never qualifies).
 */
static uint32_t packed_deferred_pairs(const struct geom *g)
{
        uint64_t num = (uint64_t)g->w * (g->h + 1ull), den = 2ull * g->s - g->w;
        uint64_t first = (num + den - 1) / den;

        return (uint32_t)min_sz(first, g->h / 2);
}

static size_t packed_tmp_offset(const struct zcp_convert_rows *d, const struct geom *g)
{
        size_t deferred = (size_t)packed_deferred_pairs(g) * g->w;

        return d->simd_tmp ? align64(deferred) : deferred;
}

/*
 * The vector rows are used where libyuv's buffers for 2 rows fit beside the
 * deferred chroma in half a frame, whether or not this CPU needs them (AVX2
 * does not): which frames go wholly through C does not depend on the CPU.
 */
static bool packed_use_simd(const struct zcp_convert_rows *d, const struct geom *g)
{
        return !d->simd_tmp || packed_tmp_offset(d, g) + d->simd_tmp(g->w, 2) <= g->in_size / 2;
}

/*
 * Rows per libyuv call (RGB): as many as TMP_ROWS_MAX (a row pair per call
 * cost about a tenth of the frame in libyuv's per-call setup) while the row
 * buffers still fit there; at least 2. The bytes do not depend on it.
 */
#define TMP_ROWS_MAX 4

static uint32_t packed_tmp_rows(const struct zcp_convert_rows *d, const struct geom *g)
{
        uint32_t k = TMP_ROWS_MAX;

        if (!d->simd_tmp)
                return 2;
        while (k > 2 && packed_tmp_offset(d, g) + d->simd_tmp(g->w, k) > g->in_size / 2)
                k /= 2;
        return k;
}

static size_t packed_tmp_size(const struct zcp_convert_rows *d, const struct geom *g)
{
        return d->simd_tmp ? d->simd_tmp(g->w, packed_tmp_rows(d, g)) : 0;
}

size_t zcp_convert_packed_scratch(const struct zcp_convert_rows *d, const struct geom *g)
{
        if (packed_use_simd(d, g))
                return packed_tmp_offset(d, g) + packed_tmp_size(d, g);
        return (size_t)packed_deferred_pairs(g) * g->w;
}

/*
 * Pairs [a, b) of the input at buf: luma to rows 2a.. of the plane at y (buf
 * itself, or scratch), chroma to uv (b - a rows of w).
 */
static void packed_chunk(const struct zcp_convert_rows *d, const struct geom *g, uint8_t *buf, uint8_t *y, uint8_t *uv,
                         uint8_t *tmp, int tmp_rows, bool simd, uint32_t a, uint32_t b)
{
        const size_t w = g->w, s = g->s;

        if (simd) {
                d->simd(buf + 2 * a * s, (int)s, y + 2 * a * w, uv, (int)w, (int)(2 * (b - a)), tmp, tmp_rows);
                return;
        }
        for (uint32_t j = a; j < b; j++)
                d->c_pair(d, buf + 2 * j * s, s, y + 2 * j * w, y + (2 * j + 1) * w, uv + (j - a) * w, g->w);
}

/*
 * Pairs [from, to) top-down on one thread; every row of the pairs before
 * `from` has been read. Chroma row j goes to its place when j >= direct_from,
 * else to chroma_tmp + j * w; with `flush`, those waiting rows are copied to
 * their place as soon as the input there has been read (while they are still
 * in cache). Returns how many waiting rows (from row 0) are in place.
 */
static uint32_t packed_serial(const struct zcp_convert_rows *d, const struct geom *g, uint8_t *buf, uint8_t *chroma_tmp,
                              uint8_t *tmp, int tmp_rows, bool simd, uint32_t from, uint32_t to, uint32_t direct_from,
                              bool flush)
{
        const size_t w = g->w, s = g->s, wh = w * g->h;
        uint32_t flushed = 0;

        for (uint32_t a = from, b; a < to; a = b) {
                const bool direct = a >= direct_from;
                /* Luma of pairs [a, b) ends in front of pair a's input: b*w <= a*s. */
                size_t end = (size_t)a * s / w;

                if (direct)
                        end = min_sz(end, (2 * a * s - wh) / w); /* chroma too */
                else
                        end = min_sz(end, direct_from);
                if (!simd)
                        end = (size_t)a + 1;
                assert(end > a);
                b = (uint32_t)min_sz(end, to);
                packed_chunk(d, g, buf, buf, direct ? buf + wh + a * w : chroma_tmp + a * w, tmp, tmp_rows, simd,
                             a, b);
                if (flush && 2 * b * s > wh) {
                        /* Rows whose place lies wholly in the input read so far, none past direct_from. */
                        uint32_t k = (uint32_t)min_sz((2 * b * s - wh) / w, min_sz(direct_from, b));
                        if (k > flushed) {
                                memcpy(buf + wh + flushed * w, chroma_tmp + flushed * w, (k - flushed) * w);
                                flushed = k;
                        }
                }
        }
        return flushed;
}

void zcp_convert_packed(const struct zcp_convert_rows *d, const struct geom *g, uint8_t *buf, uint8_t *scratch)
{
        const size_t w = g->w;
        const uint32_t deferred = packed_deferred_pairs(g);
        uint32_t done;

        d->first_pair(d, buf, g->s, buf, buf + w, scratch, g->w);
        done = packed_serial(d, g, buf, scratch, scratch + packed_tmp_offset(d, g), (int)packed_tmp_rows(d, g),
                             packed_use_simd(d, g), 1, g->h / 2, deferred, true);
        memcpy(buf + w * g->h + (size_t)done * w, scratch + (size_t)done * w, (size_t)(deferred - done) * w);
}

/*
 * ---- packed formats: several threads ----
 *
 * One open fork-join per frame (zcp_workers_run_open): the pairs are cut into
 * chunks of c pairs, and a fixed list of tasks (made per frame, on the stack)
 * is taken in order by whichever member is free, through one atomic counter:
 *   - chunk k (pairs [a, b)), in order: luma of pairs [0, first) to scratch
 *     (pair 0 overlaps its own input); from `first` on, in place. Chroma to
 *     scratch up to pair `direct`, then in place.
 *   - copies from scratch to their places: first's luma, the chroma rows
 *     before `direct`, in chunks, each listed as soon as the chunks it waits
 *     for are `lag` pairs behind the chunk being listed.
 * A task waits (spinning) until every chunk whose input its outputs overlap
 * is done: pair p's input is [2ps, 2(p+1)s); luma of pairs [a, b) lands in
 * [2aw, 2bw), chroma rows [a, b) in [wh + aw, wh + bw). Chunks done are
 * flagged (release) and waiters read the flags (acquire), so a task's writes
 * follow the reads of the chunks it waited for. Tasks wait only for earlier
 * tasks, so the first undone task can always run: no deadlock, and a worker
 * still waking up (a futex wake-up costs ~10-50 us) only means the others
 * take its share. Nothing runs on one thread alone and nothing has to wait
 * for a step.
 *
 * `first` and `direct` are where a chunk's requirement falls `lag` = T*c
 * pairs (T members) behind its own start: with every member on a core, the
 * chunks in flight are the T - 1 before it, so it does not wait. For s = 2w
 * (4:2:2 at minimal stride) luma needs prefix >= (a + c)/2: first ~ (2T-1)c;
 * chroma needs (wh + bw)/(2s) = (h + b)/4 pairs: direct ~ (h + c + 4L)/3,
 * against one thread's (h + 1)/3. The work on paper, in bytes of w*h
 * (4:2:2): read 2, write 1.5, and the copies: first's luma 2*2*first/h,
 * chroma 2*direct/h, twice each (to scratch, back; its final write counted).
 * At 1080p YUYV, T = 4, c = 8: first = 72 (0.27), direct = 408 (0.76):
 * 4.52 wh, against one thread's 4.17 (its deferred chroma: 0.67); RGB24
 * 5.18 against 4.90, RGBX 6.03 against 5.79. Spread evenly over 4 cores that
 * is 4.52 / 4.17 / 4 = 0.27 of one thread's time (RGB 0.26): 1/3 is in
 * reach where the cores' combined cache bandwidth scales (a server's L2 and
 * L3 do; a captured frame was just written, so it is in cache), plus the
 * latency until the other members are awake (the caller works meanwhile)
 * and, at the end, imbalance of up to one chunk (1/68 of the frame). Were the
 * conversion bound by one shared bandwidth (DRAM) instead, no split could
 * beat 4.52 / 4.17 = 1.08 of one thread's traffic time; the copies are why
 * no in-place split reaches the 1/T of an out-of-place one. 2 threads:
 * 0.55, 3: 0.36, 8: 0.135 by the same count.
 */
#define MT_MIN_PAIRS 16   /* per thread: below, one thread does it all */
#define MT_MAX_CHUNKS 256 /* chunks per frame (the task list lives on the stack) */
#define MT_MAX_TASKS (3 * MT_MAX_CHUNKS)

struct mt_plan {
        uint32_t c, chunks;  /* pairs per chunk; chunks (the last may be short) */
        uint32_t lag;        /* pairs */
        uint32_t first;      /* pairs [0, first): luma to scratch (at 0); a multiple of c, >= 1 chunk */
        uint32_t direct;     /* chroma rows [0, direct) to scratch (at `chroma`); a multiple of c */
        size_t chroma;       /* scratch offset of the waiting chroma rows */
        size_t tmp, tmp_stride;
        int tmp_rows;
        size_t size;         /* scratch bytes for the team */
};

/* Pairs whose input overlaps [0, end) bytes: those p with 2ps < end. */
static uint32_t pairs_under(const struct geom *g, size_t end)
{
        return (uint32_t)min_sz((end + 2 * (size_t)g->s - 1) / (2 * (size_t)g->s), g->h / 2);
}

static struct mt_plan mt_plan(const struct zcp_convert_rows *d, const struct geom *g, uint32_t threads)
{
        const uint32_t pairs = g->h / 2;
        const size_t w = g->w, wh = w * g->h;
        struct mt_plan p = { 0 };
        uint32_t c = pairs / (16 * threads);

        c = c < 4 ? 4 : c;
        c = c < (pairs + MT_MAX_CHUNKS - 1) / MT_MAX_CHUNKS ? (pairs + MT_MAX_CHUNKS - 1) / MT_MAX_CHUNKS : c;
        p.c = c;
        p.chunks = (pairs + c - 1) / c;
        p.lag = threads * c;
        p.first = pairs;
        p.direct = pairs;
        for (uint32_t a = c; a < pairs; a += c) {
                uint32_t b = a + c < pairs ? a + c : pairs;
                if (p.first == pairs && a >= p.lag && pairs_under(g, 2 * b * w) <= a - p.lag)
                        p.first = a;
                if (p.direct == pairs && a >= p.lag && pairs_under(g, wh + b * w) <= a - p.lag) {
                        p.direct = a;
                        break;
                }
        }
        if (p.direct < p.first)
                p.direct = p.first; /* chunks before `first` wait for nothing */
        p.chroma = (size_t)p.first * 2 * w;
        p.tmp_rows = (int)packed_tmp_rows(d, g);
        p.tmp_stride = align64(packed_tmp_size(d, g));
        p.tmp = p.tmp_stride ? align64(p.chroma + (size_t)p.direct * w) : p.chroma + (size_t)p.direct * w;
        p.size = p.tmp + threads * p.tmp_stride;
        return p;
}

/*
 * True when `threads` threads split this frame (else it goes through the
 * one-thread code); only where one thread would use the vector/libyuv rows
 * too, so that both give the same bytes.
 */
bool zcp_convert_packed_mt_eligible(const struct zcp_convert_rows *d, const struct geom *g, uint32_t threads)
{
        return threads > 1 && g->h / 2 >= MT_MIN_PAIRS * threads &&
               packed_use_simd(d, g) && mt_plan(d, g, threads).size <= g->in_size / 2;
}

enum mt_kind { MT_CHUNK, MT_COPY_LUMA, MT_COPY_CHROMA };

struct mt_task {
        uint8_t kind;
        uint32_t a, b; /* pairs (chunk, luma copy) or chroma rows */
        uint32_t need; /* chunks [0, need) must be done first */
};

struct mt_job {
        const struct zcp_convert_rows *d;
        const struct geom *g;
        struct mt_plan plan;
        uint8_t *buf, *scratch;
        uint32_t n_tasks;
        _Atomic uint32_t next;    /* next task to take */
        _Atomic uint32_t done_to; /* chunks [0, done_to) known done (a hint: flags are the truth) */
        _Atomic uint8_t done[MT_MAX_CHUNKS];
        struct mt_task tasks[MT_MAX_TASKS];
};

static inline void mt_relax(uint32_t spins)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if (spins > 4096)
                sched_yield(); /* the chunk's owner may not be running (more threads than free CPUs) */
}

static void mt_wait(struct mt_job *job, uint32_t need)
{
        /* Acquire: whoever moved done_to had acquired the flags it passed, then released. */
        uint32_t p = atomic_load_explicit(&job->done_to, memory_order_acquire), spins = 0;

        while (p < need) {
                if (atomic_load_explicit(&job->done[p], memory_order_acquire))
                        p++;
                else
                        mt_relax(++spins);
        }
        uint32_t cur = atomic_load_explicit(&job->done_to, memory_order_relaxed);
        while (cur < p && !atomic_compare_exchange_weak_explicit(&job->done_to, &cur, p, memory_order_release,
                                                                 memory_order_relaxed))
                ;
}

/* Chunks whose pairs all lie below `pairs` are done once chunk ceil(pairs / c) - 1 is. */
static uint32_t chunks_for(const struct mt_plan *p, uint32_t pairs)
{
        return (pairs + p->c - 1) / p->c;
}

static void mt_add(struct mt_job *job, enum mt_kind kind, uint32_t a, uint32_t b, uint32_t need)
{
        assert(job->n_tasks < MT_MAX_TASKS);
        job->tasks[job->n_tasks++] = (struct mt_task){ .kind = (uint8_t)kind, .a = a, .b = b, .need = need };
}

/* The task list: chunks in order, each copy right after the chunk `lag` pairs past what it waits for. */
static void mt_tasks(struct mt_job *job)
{
        const struct geom *g = job->g;
        const struct mt_plan *p = &job->plan;
        const uint32_t pairs = g->h / 2;
        const size_t w = g->w, wh = w * g->h;
        uint32_t luma_next = 0, chroma_next = 0;

        job->n_tasks = 0;
        for (uint32_t k = 0; k <= p->chunks; k++) {
                const uint32_t a = k * p->c < pairs ? k * p->c : pairs, b = a + p->c < pairs ? a + p->c : pairs;
                const uint32_t ready = a > p->lag ? a - p->lag : 0; /* pairs surely done when chunk k is taken */

                /* Copies whose destination's input lies below `ready` (all of them after the last chunk). */
                while (luma_next < p->first) {
                        uint32_t e = luma_next + p->c < p->first ? luma_next + p->c : p->first;
                        uint32_t need = pairs_under(g, 2 * (size_t)e * w);
                        if (k < p->chunks && need > ready)
                                break;
                        /* Its rows come from the chunks up to e too. */
                        mt_add(job, MT_COPY_LUMA, luma_next, e, chunks_for(p, need > e ? need : e));
                        luma_next = e;
                }
                while (chroma_next < p->direct) {
                        uint32_t e = chroma_next + p->c < p->direct ? chroma_next + p->c : p->direct;
                        uint32_t need = pairs_under(g, wh + (size_t)e * w);
                        if (k < p->chunks && need > ready)
                                break;
                        mt_add(job, MT_COPY_CHROMA, chroma_next, e, chunks_for(p, need > e ? need : e));
                        chroma_next = e;
                }
                if (k == p->chunks)
                        break;
                uint32_t need = 0;
                if (a >= p->first)
                        need = pairs_under(g, 2 * (size_t)b * w);
                if (a >= p->direct) {
                        uint32_t n = pairs_under(g, wh + (size_t)b * w);
                        need = n > need ? n : need;
                }
                mt_add(job, MT_CHUNK, a, b, chunks_for(p, need));
        }
}

static void mt_run_task(struct mt_job *job, const struct mt_task *t, uint8_t *tmp)
{
        const struct zcp_convert_rows *d = job->d;
        const struct geom *g = job->g;
        const struct mt_plan *p = &job->plan;
        const size_t w = g->w, wh = w * g->h;
        uint8_t *luma = job->scratch, *chroma = job->scratch + p->chroma;
        uint32_t a = t->a;

        mt_wait(job, t->need);
        switch (t->kind) {
        case MT_CHUNK: {
                uint8_t *y = a < p->first ? luma : job->buf;
                uint8_t *uv = a < p->direct ? chroma : job->buf + wh;

                if (a == 0) { /* pair 0 as one thread does it (RGB: convert.h's rounding, not libyuv's) */
                        d->first_pair(d, job->buf, g->s, y, y + w, uv, g->w);
                        a++;
                }
                if (a < t->b)
                        packed_chunk(d, g, job->buf, y, uv + (size_t)a * w, tmp, p->tmp_rows, true, a, t->b);
                atomic_store_explicit(&job->done[t->a / p->c], 1, memory_order_release);
                break;
        }
        case MT_COPY_LUMA:
                memcpy(job->buf + 2 * (size_t)a * w, luma + 2 * (size_t)a * w, 2 * (size_t)(t->b - a) * w);
                break;
        case MT_COPY_CHROMA:
                memcpy(job->buf + wh + (size_t)a * w, chroma + (size_t)a * w, (size_t)(t->b - a) * w);
                break;
        }
}

static void mt_share(void *arg, uint32_t i, uint32_t n)
{
        struct mt_job *job = arg;
        uint8_t *tmp = job->scratch + job->plan.tmp + i * job->plan.tmp_stride;
        uint32_t k;

        while ((k = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed)) < job->n_tasks)
                mt_run_task(job, &job->tasks[k], tmp);
        /* Tasks others took are theirs to finish: the join waits for every share that started. */
}

void zcp_convert_packed_mt(struct zcp_workers *workers, const struct zcp_convert_rows *d, const struct geom *g,
                              uint8_t *buf, uint8_t *scratch)
{
        struct mt_job job = { .d = d, .g = g, .plan = mt_plan(d, g, zcp_workers_count(workers)), .buf = buf,
                              .scratch = scratch };

        mt_tasks(&job);
        zcp_workers_run_open(workers, mt_share, &job);
}

size_t zcp_convert_packed_mt_scratch(const struct zcp_convert_rows *d, const struct geom *g, uint32_t threads)
{
        return mt_plan(d, g, threads).size;
}
