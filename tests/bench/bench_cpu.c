/* SPDX-License-Identifier: MIT */
/*
 * CPU benchmark, side by side in one run (printed, never asserted):
 *
 * 1. Conversion to NV12 per format and size: zcpipe's in-place conversion on
 *    one thread against libyuv's out-of-place conversion of the same frame
 *    (the fewest libyuv calls that reach NV12), then zcpipe with each team
 *    size asked for and its speed-up over one thread. Each timed call finds
 *    its input just copied in (warm cache), for both. The teams convert in
 *    their own slot and scratch: sharing the one-thread run's, they left its
 *    lines dirty in the other cores' caches, and the one-thread figure paid
 *    for fetching them back (720p YUYV and YVYU on a 2-core machine,
 *    --threads 1,2: 0.69-0.81 of libyuv shared, 0.84-1.05 apart; the spread
 *    from run to run is about 0.1). The runs stay interleaved, so that each
 *    follows the same other work. --cold: every input is flushed from the
 *    caches after it is copied in (clflush, x86), as a camera's DMA leaves a
 *    frame in memory; warm, the one-thread conversion reads a frame its own
 *    core just wrote, while the team's other members fetch it from the
 *    caller's core. Each team predicts its next job from the cadence of its
 *    jobs and wakes its members ahead of it (core/workers.h); `woken`
 *    counts the members that were asleep all the same. --period MS: each
 *    conversion starts on a clock (iteration i's step v at i * MS + v * MS /
 *    steps), its input copied in before, as a camera delivers frames; back to
 *    back (the default) the start of a team's job moves with the copies and
 *    conversions before it. Beside each team: libyuv's out-of-place
 *    conversion split into the same number of bands (a team of its own), what
 *    the host gives that many threads for the same bytes with no order.
 * 2. The CPU backend: the whole per-frame model work (preprocess, motion grid,
 *    the plan, its head, motion) through the production CPU backend ops, for
 *    the default CenterNet and zcnet, on the sample's real frame (768x576) and
 *    a 1920x1080 frame, per team size; beside it PyTorch on the same model
 *    file and frame: the `cpu` mode of tests/kernels/peer_torch.py (or of
 *    $ZCP_PEER_TORCH), its own executor of the same graph, the same team
 *    sizes (torch.set_num_threads), the better of NCHW and channels-last.
 *    The load average before and after (a shared machine's timings move).
 * 3. --only wake: a team's wake-ahead at a camera's pace, on against off:
 *    the conversion's time, members woken per frame, the helpers' CPU.
 *
 *   bench_cpu [--threads 1,2,4] [--iter N] [--sizes 640x480,1920x1080]
 *             [--formats yuyv,uyvy] [--only convert|model|wake] [--no-torch]
 *             [--torch-frames N] [--cold] [--period MS]
 *
 * Python: $ZCP_PYTHON, else the first of python3, /usr/bin/python3 that
 * imports torch. Ratios are other / zcpipe (zcpipe/torch: frames/s over
 * frames/s): above 1 means zcpipe is faster.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libyuv.h>

#include "common.h"
#include "convert/convert.h"
#include "core/log.h"
#include "core/pixfmt.h"
#include "core/workers.h"
#include "hostutil.h"
#include "planutil.h"
#include "infer/backend.h"
#include "infer/cpu_fast.h"
#include "infer/reference.h"

#define MAX_LIST 16

struct opts {
        uint32_t threads[MAX_LIST], n_threads;
        uint32_t sizes[MAX_LIST][2], n_sizes;
        enum zcp_pixfmt formats[ZCP_PIX_COUNT];
        uint32_t n_formats;
        uint32_t iter;
        uint32_t torch_frames; /* --torch-frames: the PyTorch peer's timed frames */
        bool convert, model, torch, cold, wake;
        double period_ms; /* --period: conversions start on a clock (0: back to back) */
};

/* Copies an input in; with --cold, then flushes it from every cache level (x86: clflush). */
static void fill(const struct opts *o, uint8_t *dst, const uint8_t *src, size_t n)
{
        memcpy(dst, src, n);
#if defined(__x86_64__) || defined(__i386__)
        if (o->cold) {
                for (size_t i = 0; i < n; i += 64)
                        __builtin_ia32_clflush(dst + i);
                __builtin_ia32_clflush(dst + n - 1);
                __builtin_ia32_mfence();
        }
#else
        (void)o;
#endif
}

static double now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* CPU time of the whole process (every thread), ms. */
static double process_cpu_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

struct stat {
        double med, min;
};

static struct stat summarize(double *t, uint32_t n)
{
        qsort(t, n, sizeof(t[0]), cmp_double);
        return (struct stat){ t[n / 2], t[0] };
}

/* ---- 1. conversion ---- */

/*
 * --period: spins until step `v` (of nv per iteration) of iteration `it` is
 * due on a clock of o->period_ms from `base`, as a camera delivers frames;
 * counts the steps that found themselves late (their input took longer).
 */
static void pace(const struct opts *o, double base, uint32_t it, uint32_t v, uint32_t nv, uint32_t *late)
{
        double due = base + it * o->period_ms + v * o->period_ms / nv;

        if (o->period_ms <= 0)
                return;
        if (now_ms() > due) {
                (*late)++;
                return;
        }
        while (now_ms() < due)
                ;
}

/*
 * libyuv out of place, rows [r0, r1) (even) of src (stride s) -> the same rows
 * of dst NV12 (stride w); tmp holds a frame's worth of I420 chroma. The whole
 * frame is rows [0, h).
 */
static void libyuv_nv12_rows(enum zcp_pixfmt f, const uint8_t *src, uint32_t w, uint32_t h, uint32_t s,
                             uint8_t *dst, uint8_t *tmp, uint32_t r0, uint32_t r1)
{
        const int W = (int)w, H = (int)(r1 - r0), S = (int)s;
        uint8_t *uv = dst + (size_t)w * h + (size_t)(r0 / 2) * w, *u = tmp + (size_t)(w / 2) * (r0 / 2);
        uint8_t *v = tmp + (size_t)(w / 2) * (h / 2) + (size_t)(w / 2) * (r0 / 2);
        const size_t cs = f == ZCP_PIX_I420 || f == ZCP_PIX_YV12 ? s / 2 : s; /* first chroma plane's stride */
        const uint8_t *c1 = src + (size_t)s * h + cs * (r0 / 2);
        const uint8_t *c2 = src + (size_t)s * h + (size_t)(s / 2) * (h / 2) + (size_t)(s / 2) * (r0 / 2);

        src += (size_t)s * r0;
        dst += (size_t)w * r0;

        switch (f) {
        case ZCP_PIX_YUYV:
        case ZCP_PIX_YVYU: /* libyuv has no YVYU: the same work less the chroma swap */
                YUY2ToNV12(src, S, dst, W, uv, W, W, H);
                break;
        case ZCP_PIX_UYVY:
                UYVYToNV12(src, S, dst, W, uv, W, W, H);
                break;
        case ZCP_PIX_NV12:
                NV12Copy(src, S, c1, S, dst, W, uv, W, W, H);
                break;
        case ZCP_PIX_NV21:
                NV21ToNV12(src, S, c1, S, dst, W, uv, W, W, H);
                break;
        case ZCP_PIX_I420:
                I420ToNV12(src, S, c1, S / 2, c2, S / 2, dst, W, uv, W, W, H);
                break;
        case ZCP_PIX_YV12:
                I420ToNV12(src, S, c2, S / 2, c1, S / 2, dst, W, uv, W, W, H);
                break;
        case ZCP_PIX_RGB24: /* libyuv RAW = R G B in memory */
                RAWToI420(src, S, dst, W, u, W / 2, v, W / 2, W, H);
                MergeUVPlane(u, W / 2, v, W / 2, uv, W, W / 2, H / 2);
                break;
        case ZCP_PIX_BGR24: /* libyuv RGB24 = B G R in memory */
                RGB24ToI420(src, S, dst, W, u, W / 2, v, W / 2, W, H);
                MergeUVPlane(u, W / 2, v, W / 2, uv, W, W / 2, H / 2);
                break;
        case ZCP_PIX_RGBX: /* libyuv ABGR = R G B A in memory */
                ABGRToNV12(src, S, dst, W, uv, W, W, H);
                break;
        case ZCP_PIX_BGRX: /* libyuv ARGB = B G R A in memory */
                ARGBToNV12(src, S, dst, W, uv, W, W, H);
                break;
        case ZCP_PIX_GREY:
                I400ToNV21(src, S, dst, W, uv, W, W, H); /* chroma all 128: NV21 = NV12 */
                break;
        default:
                CHECK(!"format without a libyuv counterpart");
        }
}

static void libyuv_nv12(enum zcp_pixfmt f, const uint8_t *src, uint32_t w, uint32_t h, uint32_t s, uint8_t *dst,
                        uint8_t *tmp)
{
        libyuv_nv12_rows(f, src, w, h, s, dst, tmp, 0, h);
}

/* libyuv's conversion of one frame split into a team's bands of rows: what N threads reach with no in-place order. */
struct band_job {
        enum zcp_pixfmt f;
        const uint8_t *src;
        uint32_t w, h, s;
        uint8_t *dst, *tmp;
};

static void band_share(void *arg, uint32_t i, uint32_t n)
{
        const struct band_job *j = arg;
        uint32_t pairs = j->h / 2;

        libyuv_nv12_rows(j->f, j->src, j->w, j->h, j->s, j->dst, j->tmp, 2 * (pairs * i / n),
                         2 * (pairs * (i + 1) / n));
}

static const char *libyuv_name(enum zcp_pixfmt f)
{
        switch (f) {
        case ZCP_PIX_YUYV: return "YUY2ToNV12";
        case ZCP_PIX_YVYU: return "YUY2ToNV12*";
        case ZCP_PIX_UYVY: return "UYVYToNV12";
        case ZCP_PIX_NV12: return "NV12Copy";
        case ZCP_PIX_NV21: return "NV21ToNV12";
        case ZCP_PIX_I420: return "I420ToNV12";
        case ZCP_PIX_YV12: return "I420ToNV12";
        case ZCP_PIX_RGB24: return "RAWToI420+Merge";
        case ZCP_PIX_BGR24: return "RGB24ToI420+Merge";
        case ZCP_PIX_RGBX: return "ABGRToNV12";
        case ZCP_PIX_BGRX: return "ARGBToNV12";
        case ZCP_PIX_GREY: return "I400ToNV21";
        default: return "?";
        }
}

static void bench_convert(const struct opts *o)
{
        /* The band runs have teams of their own: a team predicts its jobs from their cadence (workers.h). */
        struct zcp_workers *teams[MAX_LIST] = { 0 }, *band_teams[MAX_LIST] = { 0 };

        for (uint32_t t = 0; t < o->n_threads; t++)
                if (o->threads[t] > 1) {
                        CHECK(zcp_workers_new(o->threads[t], "bench-cvt", &teams[t]) == 0);
                        CHECK(zcp_workers_new(o->threads[t], "bench-band", &band_teams[t]) == 0);
                }

        printf("\n== Conversion to NV12: zcpipe in place vs libyuv out of place (ms per frame, median of %u; "
               "min in brackets)\n", o->iter);
        printf("   input: %s\n", o->cold ? "cold (flushed from the caches after it was copied in, as DMA leaves it)"
                                          : "warm (just copied in by the caller)");
        if (o->period_ms > 0)
                printf("   paced: each conversion starts on a clock of %.3g ms, its input copied in before (as a camera\n"
                       "   delivers); late = steps whose input was not ready on time (they start at once)\n",
                       o->period_ms);
        else
                printf("   back to back: each conversion starts once its input is copied in\n");
        printf("   stride = the format's minimum; ratio = libyuv / zcpipe 1 thread, of the medians and of the minima\n"
               "   (> 1: zcpipe faster); xN = speed-up over 1 thread, of the minima\n");
        printf("   crit = critical path: the frame's longest share as its own thread timed it (its waits for other\n"
               "   shares' chunks included); what N threads take on N free cores, less the caller's final join\n"
               "   (zcp_workers_critical_ns). A member still waking up takes no share: the others do its work\n"
               "   work = every share's time summed (zcp_workers_busy_ns), median; xW = work / zcpipe 1T, of the\n"
               "   medians: above 1 by what the split adds (copies, waits) and what side-by-side members cost\n"
               "   each other (shared caches and bandwidth); N free cores take about work / N\n"
               "   woken = members per frame that were asleep when its job came (a futex wake-up, tens of us);\n"
               "   the others were spinning: after the last job, or woken ahead of the predicted one (%s)\n"
               "   libyuv N = libyuv's out-of-place conversion split into the team's N bands of rows (median),\n"
               "   lxN = libyuv 1T / libyuv N: what this host gives N threads for the same bytes with no order\n",
               getenv("ZCP_WORKERS_AHEAD") && strcmp(getenv("ZCP_WORKERS_AHEAD"), "0") == 0
                       ? "off: ZCP_WORKERS_AHEAD=0"
                       : "on where the team fits the CPUs");
        for (uint32_t si = 0; si < o->n_sizes; si++) {
                const uint32_t w = o->sizes[si][0], h = o->sizes[si][1];

                printf("\n%-6s %-9s %-18s %17s %17s %11s", "format", "size", "libyuv call", "libyuv", "zcpipe 1T",
                       "ratio m|min");
                for (uint32_t t = 0; t < o->n_threads; t++)
                        if (o->threads[t] > 1)
                                printf(" %11s%-2u %5s %15s %4s %6s %4s %5s %8s%-2u %4s", "zcpipe ", o->threads[t], "xN",
                                       "crit", "xN", "work", "xW", "woken", "libyuv ", o->threads[t], "lxN");
                printf("\n");
                for (uint32_t fi = 0; fi < o->n_formats; fi++) {
                        const enum zcp_pixfmt f = o->formats[fi];
                        const uint32_t s = zcp_pixfmt_min_stride(f, w);
                        const size_t in = zcp_pixfmt_frame_size_stride(f, s, h);
                        const size_t slot = zcp_pixfmt_slot_size(f, w, h, s);
                        size_t sc = 0;
                        double *tz = kt_malloc(o->iter * sizeof(double)), *ty = kt_malloc(o->iter * sizeof(double));
                        double *tt[MAX_LIST], *tc[MAX_LIST], *tb[MAX_LIST], *tl[MAX_LIST];
                        uint64_t woken[MAX_LIST] = { 0 };

                        for (uint32_t t = 0; t < o->n_threads; t++) {
                                size_t n = zcp_convert_scratch_size_mt(f, w, h, s, o->threads[t]);
                                sc = n > sc ? n : sc;
                                tt[t] = kt_malloc(o->iter * sizeof(double));
                                tc[t] = kt_malloc(o->iter * sizeof(double));
                                tb[t] = kt_malloc(o->iter * sizeof(double));
                                tl[t] = kt_malloc(o->iter * sizeof(double));
                        }
                        sc = sc > zcp_convert_scratch_size(f, w, h, s) ? sc : zcp_convert_scratch_size(f, w, h, s);
                        uint8_t *orig = kt_malloc(slot), *buf = kt_malloc(slot), *src = kt_malloc(slot);
                        uint8_t *dst = kt_malloc(zcp_nv12_size(w, h)), *tmp = kt_malloc(zcp_nv12_size(w, h));
                        uint8_t *scratch = kt_malloc(sc);
                        /* The teams' own slot and scratch (see the top comment). */
                        uint8_t *buf_mt = kt_malloc(slot), *scratch_mt = kt_malloc(sc);
                        uint8_t *src_mt = kt_malloc(slot), *dst_mt = kt_malloc(zcp_nv12_size(w, h));
                        uint8_t *tmp_mt = kt_malloc(zcp_nv12_size(w, h));
                        const bool bands = zcp_convert_team_size(f, w, h, s, 2) > 1; /* the packed formats */
                        const struct band_job band = { f, src_mt, w, h, s, dst_mt, tmp_mt };

                        kt_seed(f);
                        for (size_t i = 0; i < slot; i += 8) {
                                uint64_t r = kt_rnd();
                                memcpy(orig + i, &r, slot - i < 8 ? slot - i : 8);
                        }
                        /* Pages touched once before timing, for every buffer. */
                        memcpy(src, orig, slot);
                        libyuv_nv12(f, src, w, h, s, dst, tmp);
                        memset(scratch, 0, sc);
                        memset(buf_mt, 0, slot);
                        memset(scratch_mt, 0, sc);
                        memcpy(src_mt, orig, slot);
                        libyuv_nv12(f, src_mt, w, h, s, dst_mt, tmp_mt);
                        uint32_t nv = 2, late = 0;
                        for (uint32_t t = 0; t < o->n_threads; t++)
                                nv += teams[t] ? 2 : 0;
                        const double base = now_ms() + o->period_ms;
                        for (uint32_t it = 0; it < o->iter; it++) {
                                uint32_t v = 0;
                                double t0;

                                fill(o, buf, orig, slot);
                                pace(o, base, it, v++, nv, &late);
                                t0 = now_ms();
                                CHECK(zcp_convert_to_nv12(f, buf, slot, w, h, s, scratch, sc) == 0);
                                tz[it] = now_ms() - t0;
                                fill(o, src, orig, in);
                                pace(o, base, it, v++, nv, &late);
                                t0 = now_ms();
                                libyuv_nv12(f, src, w, h, s, dst, tmp);
                                ty[it] = now_ms() - t0;
                                for (uint32_t t = 0; t < o->n_threads; t++) {
                                        if (!teams[t])
                                                continue;
                                        uint64_t c0 = zcp_workers_critical_ns(teams[t]);
                                        uint64_t b0 = zcp_workers_busy_ns(teams[t]), w0 = zcp_workers_woken(teams[t]);
                                        fill(o, buf_mt, orig, slot);
                                        pace(o, base, it, v++, nv, &late);
                                        t0 = now_ms();
                                        CHECK(zcp_convert_to_nv12_mt(teams[t], f, buf_mt, slot, w, h, s, scratch_mt,
                                                                     sc) == 0);
                                        tt[t][it] = now_ms() - t0;
                                        tc[t][it] = (double)(zcp_workers_critical_ns(teams[t]) - c0) / 1e6;
                                        tb[t][it] = (double)(zcp_workers_busy_ns(teams[t]) - b0) / 1e6;
                                        woken[t] += zcp_workers_woken(teams[t]) - w0; /* settled: the job has joined */
                                        tl[t][it] = 0;
                                        if (!bands) {
                                                v++;
                                                continue;
                                        }
                                        fill(o, src_mt, orig, in);
                                        pace(o, base, it, v++, nv, &late);
                                        t0 = now_ms();
                                        zcp_workers_run(band_teams[t], band_share, (void *)&band);
                                        tl[t][it] = now_ms() - t0;
                                }
                        }
                        struct stat z = summarize(tz, o->iter), y = summarize(ty, o->iter);
                        char sz[32];
                        snprintf(sz, sizeof(sz), "%ux%u", w, h);
                        printf("%-6s %-9s %-18s %8.3f [%6.3f] %8.3f [%6.3f] %5.2f %5.2f", zcp_pixfmt_name(f), sz,
                               libyuv_name(f), y.med, y.min, z.med, z.min, y.med / z.med, y.min / z.min);
                        for (uint32_t t = 0; t < o->n_threads; t++) {
                                if (!teams[t])
                                        continue;
                                struct stat m = summarize(tt[t], o->iter), c = summarize(tc[t], o->iter);
                                struct stat b = summarize(tb[t], o->iter), l = summarize(tl[t], o->iter);
                                bool split = zcp_convert_team_size(f, w, h, s, o->threads[t]) > 1;
                                printf(" %6.3f [%6.3f] %4.2f%s", m.med, m.min, z.min / m.min, split ? " " : "-");
                                if (split)
                                        printf(" %6.3f [%6.3f] %4.2f %6.3f %4.2f %5.2f", c.med, c.min, z.min / c.min,
                                               b.med, b.med / z.med, (double)woken[t] / o->iter);
                                else
                                        printf(" %6s  %6s  %4s %6s %4s %5s", "-", "-", "-", "-", "-", "-");
                                if (bands)
                                        printf(" %10.3f %4.2f", l.med, y.med / l.med);
                                else
                                        printf(" %10s %4s", "-", "-");
                        }
                        if (o->period_ms > 0)
                                printf("  late %u/%u", late, o->iter * nv);
                        printf("\n");
                        for (uint32_t t = 0; t < o->n_threads; t++) {
                                free(tt[t]);
                                free(tc[t]);
                                free(tb[t]);
                                free(tl[t]);
                        }
                        free(tz);
                        free(ty);
                        free(orig);
                        free(buf);
                        free(src);
                        free(dst);
                        free(tmp);
                        free(scratch);
                        free(buf_mt);
                        free(scratch_mt);
                        free(src_mt);
                        free(dst_mt);
                        free(tmp_mt);
                }
        }
        printf("   (- after a speed-up: that format or size is not split, it runs on one thread; "
               "* YVYU: libyuv has none, YUYV's conversion shown)\n");
        for (uint32_t t = 0; t < o->n_threads; t++) {
                zcp_workers_free(teams[t]);
                zcp_workers_free(band_teams[t]);
        }
}

/* ---- 2. CPU backend vs PyTorch ---- */

/* The machine's load average (1, 5 and 15 minutes) as /proc/loadavg has it, or "?". */
static void print_load(const char *when)
{
        char line[128] = "?";
        FILE *f = fopen("/proc/loadavg", "re");

        if (f) {
                if (!fgets(line, sizeof(line), f))
                        snprintf(line, sizeof(line), "?");
                fclose(f);
        }
        line[strcspn(line, "\n")] = '\0';
        printf("load average %s: %s (%u CPUs usable)\n", when, line, zcp_workers_cpus());
}

/*
 * The PyTorch peer (tests/kernels/peer_torch.py, or $ZCP_PEER_TORCH): its `cpu` mode runs the
 * same per-frame work on the same model file and frame (its own executor of the TF.js graph
 * or zcnet, torch ops) and prints frames/s per thread count, NCHW and channels-last and the
 * better of the two ("best"). Python: $ZCP_PYTHON, else the first of python3, /usr/bin/python3
 * that imports torch.
 */
static char torch_python[512], torch_peer[1024];

static bool find_torch(void)
{
        const char *cands[] = { getenv("ZCP_PYTHON"), "python3", "/usr/bin/python3" };
        const char *peer = getenv("ZCP_PEER_TORCH");
        char cmd[1200], line[256] = "";
        FILE *f;
        bool has_cpu = false;

        if (peer && peer[0])
                snprintf(torch_peer, sizeof(torch_peer), "%s", peer);
        else
                snprintf(torch_peer, sizeof(torch_peer), "%s/tests/kernels/peer_torch.py", ZCP_BENCH_SOURCE_ROOT);
        f = fopen(torch_peer, "re");
        if (f) {
                char buf[512];
                while (!has_cpu && fgets(buf, sizeof(buf), f))
                        has_cpu = strstr(buf, "peer_torch.py cpu ") != NULL;
                fclose(f);
        }
        if (!has_cpu) {
                printf("PyTorch: %s has no `cpu` mode (ZCP_PEER_TORCH names another peer): "
                       "its column is skipped\n", torch_peer);
                return false;
        }
        for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
                FILE *p;
                if (!cands[i] || !cands[i][0])
                        continue;
                snprintf(cmd, sizeof(cmd), "'%s' -c 'import torch; print(\"torch\", torch.__version__)' 2>&1",
                         cands[i]);
                p = popen(cmd, "r");
                if (!p)
                        continue;
                if (!fgets(line, sizeof(line), p))
                        line[0] = '\0';
                if (pclose(p) == 0 && strncmp(line, "torch ", 6) == 0) {
                        line[strcspn(line, "\n")] = '\0';
                        snprintf(torch_python, sizeof(torch_python), "%s", cands[i]);
                        printf("PyTorch: %s (%s), the peer %s\n", line + 6, torch_python, torch_peer);
                        return true;
                }
        }
        printf("PyTorch: not found (install python3-torch, or set ZCP_PYTHON): its column is skipped\n");
        return false;
}

/*
 * frames/s of the peer on one frame (written to a temporary file) for each team size of o, the
 * better layout's; 0 where it printed none. The peer's own lines are echoed, indented.
 */
static void run_torch(const struct opts *o, const char *model, const uint8_t *frame, uint32_t w, uint32_t h,
                      double *ret_fps)
{
        char path[] = "/tmp/zcp-bench-frame-XXXXXX", cmd[4096], threads[128] = "", line[512];
        const size_t size = zcp_nv12_size(w, h);
        int fd = mkstemp(path);
        FILE *p;

        for (uint32_t t = 0; t < o->n_threads; t++) {
                ret_fps[t] = 0.0;
                snprintf(threads + strlen(threads), sizeof(threads) - strlen(threads), "%s%u", t ? "," : "",
                         o->threads[t]);
        }
        if (fd < 0 || write(fd, frame, size) != (ssize_t)size) {
                printf("  PyTorch: cannot write %s\n", path);
                if (fd >= 0)
                        close(fd);
                unlink(path);
                return;
        }
        close(fd);
        snprintf(cmd, sizeof(cmd), "'%s' '%s' cpu '%s' '%s' %u %u --threads %s --frames %u 2>&1", torch_python,
                 torch_peer, model, path, w, h, threads, o->torch_frames);
        p = popen(cmd, "r");
        while (p && fgets(line, sizeof(line), p)) {
                unsigned lw, lh, n;
                double fps;
                char layout[32];

                printf("    | %s", line);
                if (sscanf(line, "%ux%u %u %31s %lf", &lw, &lh, &n, layout, &fps) == 5 && strcmp(layout, "best") == 0)
                        for (uint32_t t = 0; t < o->n_threads; t++)
                                if (o->threads[t] == n)
                                        ret_fps[t] = fps;
        }
        if (!p || pclose(p) != 0)
                printf("  PyTorch: `%s` failed\n", cmd);
        unlink(path);
}

/*
 * The CPU backend on one model: the whole per-frame work (preprocess, motion grid, the plan, the
 * head, motion) through the production backend ops, per team size; frames/s from the median and
 * from the minimum; PyTorch's frames/s on the same model file and frame beside it. The C
 * reference's time for the same frame once (it is the oracle, not a contender).
 */
static void bench_model_frame(const struct opts *o, const struct zcp_plan *m, const char *file, const char *what,
                              const uint8_t *frame, uint32_t w, uint32_t h)
{
        struct zcp_stream_config cfg = kt_stream_config();
        struct zcp_backend_params bp;
        float *arena = kt_malloc(sizeof(float) * m->arena_floats);
        struct stat s_frame[MAX_LIST], s_cpu[MAX_LIST];
        double torch_fps[MAX_LIST] = { 0 };
        char err[256];
        double t0;

        CHECK(zcp_backend_params_init(&bp, &cfg, m, w, h, "bench", err, sizeof(err)) == 0);
        memset(arena, 0, sizeof(float) * m->arena_floats);
        zcp_ref_preprocess(frame, &bp.pre, arena + m->tensors[m->input.t].off, NULL);
        t0 = now_ms();
        zcp_ref_plan(m, arena);
        printf("\n%s %ux%u -> %ux%u, %.2f G multiply-adds; the C reference's plan: %.1f ms\n", what, w, h,
               bp.pre.in_w, bp.pre.in_h, (double)m->macs / 1e9, now_ms() - t0);
        for (uint32_t ti = 0; ti < o->n_threads; ti++) {
                const struct zcp_backend_ops *ops = &zcp_backend_cpu;
                struct zcp_backend_ctx *ctx = NULL;
                struct zcp_result res;
                struct zcp_slot slot = { 0 };
                double *a = kt_malloc(o->iter * sizeof(double)), *cpu = kt_malloc(o->iter * sizeof(double));

                cfg.model.threads = o->threads[ti];
                CHECK(zcp_backend_params_init(&bp, &cfg, m, w, h, "bench", err, sizeof(err)) == 0);
                slot.data = kt_malloc(zcp_nv12_size(w, h));
                memcpy(slot.data, frame, zcp_nv12_size(w, h));
                slot.cap = zcp_nv12_size(w, h);
                slot.result = &res;
                slot.frame = (struct zcp_frame){ .width = w, .height = h, .fmt = ZCP_PIX_NV12, .stride = w,
                                                 .bytes = slot.cap };
                CHECK(ops->open(&bp, NULL, &ctx) == 0);
                for (uint32_t it = 0; it < o->iter + 2; it++) {
                        double t1 = now_ms(), c1 = process_cpu_ms();
                        CHECK(ops->submit(ctx, &slot) == 0 && ops->wait(ctx, &slot) == 0);
                        if (it >= 2) { /* warm-up first */
                                a[it - 2] = now_ms() - t1;
                                cpu[it - 2] = process_cpu_ms() - c1;
                        }
                }
                s_frame[ti] = summarize(a, o->iter);
                s_cpu[ti] = summarize(cpu, o->iter);
                ops->close(ctx);
                free(slot.data);
                free(a);
                free(cpu);
        }
        if (o->torch)
                run_torch(o, file, frame, w, h, torch_fps);
        printf("  %-8s %23s %10s %10s %9s", "threads", "zcpipe ms: median [min]", "frames/s", "(at min)", "CPU ms");
        if (o->torch)
                printf(" %16s %12s", "PyTorch frames/s", "zcpipe/torch");
        printf("\n");
        for (uint32_t ti = 0; ti < o->n_threads; ti++) {
                printf("  %-8u %12.2f [%8.2f] %10.1f %10.1f %9.2f", o->threads[ti], s_frame[ti].med, s_frame[ti].min,
                       1000.0 / s_frame[ti].med, 1000.0 / s_frame[ti].min, s_cpu[ti].med);
                if (o->torch && torch_fps[ti] > 0)
                        printf(" %16.2f %12.1f", torch_fps[ti], 1000.0 / s_frame[ti].med / torch_fps[ti]);
                else if (o->torch)
                        printf(" %16s %12s", "-", "-");
                printf("\n");
        }
        free(arena);
}

static void bench_model(const struct opts *o)
{
        char files[2][ZCP_PATH_MAX];
        const char *dir = getenv("ZCP_MODELDIR");
        struct zcp_plan *models[2] = { kt_load_model("centernet/model.json"), kt_default_zcnet(224, 224) };
        const char *names[2] = { "CenterNet (models/centernet)", "zcnet (default weights, 224x224)" };
        uint8_t *real[1] = { NULL }, *big;
        uint32_t rw = 0, rh = 0, nreal = kt_sample_frames(real, 1, &rw, &rh);

        snprintf(files[0], sizeof(files[0]), "%s/models/centernet/model.json", ZCP_BENCH_SOURCE_ROOT);
        snprintf(files[1], sizeof(files[1]), "%s/zcnet-default.safetensors", dir && dir[0] ? dir : "models");
        big = kt_malloc(zcp_nv12_size(1920, 1080));
        kt_seed(1080);
        kt_frame(big, 1920, 1080, false);
        printf("\n== CPU backend%s: the whole per-frame work per frame (preprocess, motion grid, the plan, its head, "
               "motion), median and minimum of %u frames after 2 of warm-up\n",
               o->torch ? " vs PyTorch" : "", o->iter);
        if (o->torch)
                printf("   PyTorch: the peer's `cpu` mode, the same work on the same model file and frame, "
                       "%u frames after 2, the better of NCHW and channels-last; zcpipe/torch = zcpipe's frames/s "
                       "(median) over PyTorch's\n", o->torch_frames);
        printf("   CPU ms = the process's CPU time per frame, median (every thread's; a team's spinning members "
               "count): against the wall time it tells the work from the waiting on a busy machine\n");
        print_load("before");
        for (int i = 0; i < 2; i++) {
                struct zcp_fast_plan *fp = NULL;

                if (!models[i])
                        continue;
                CHECK(zcp_fast_plan_new(models[i], &fp) == 0);
                printf("\n== CPU backend: %s, %s kernels\n", names[i], zcp_fast_plan_isa(fp));
                zcp_fast_plan_free(fp);
                if (nreal)
                        bench_model_frame(o, models[i], files[i], "sample frame", real[0], rw, rh);
                bench_model_frame(o, models[i], files[i], "synthetic frame", big, 1920, 1080);
                zcp_plan_free(models[i]);
        }
        print_load("after");
        if (nreal)
                free(real[0]);
        free(big);
}

/* ---- command line ---- */

/*
 * ---- 3. the teams' wake-ahead at a camera's pace (--only wake) ----
 *
 * A 1920x1080 YUYV frame converted by each team size every 1/30 s (the
 * caller sleeps until the next frame's time, as the convert thread waits
 * for the camera), o->iter frames after 10 to learn the cadence, with the
 * wake-ahead on and then off: the conversion's median, the members woken
 * per frame, and the CPU the helpers used per frame (process CPU time less
 * the calling thread's), which with the wake-ahead on includes their spin.
 */
static double cpu_ms(clockid_t c)
{
        struct timespec ts;

        clock_gettime(c, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void bench_wake(const struct opts *o)
{
        const uint32_t w = 1920, h = 1080, s = zcp_pixfmt_min_stride(ZCP_PIX_YUYV, w);
        const size_t slot = zcp_pixfmt_slot_size(ZCP_PIX_YUYV, w, h, s), in = zcp_pixfmt_frame_size_stride(ZCP_PIX_YUYV, s, h);
        const double period_ms = 1000.0 / 30;

        printf("\n== The teams' wake-ahead at 30 fps: 1920x1080 YUYV, %u frames, input %s\n", o->iter,
               o->cold ? "cold" : "warm");
        printf("   conversion median ms | woken members per frame | helpers' CPU ms per frame (%% of one core)\n");
        for (uint32_t t = 0; t < o->n_threads; t++) {
                const uint32_t n = o->threads[t];
                if (n < 2)
                        continue;
                size_t sc = zcp_convert_scratch_size_mt(ZCP_PIX_YUYV, w, h, s, n);
                uint8_t *orig = kt_malloc(slot), *buf = kt_malloc(slot), *scratch = kt_malloc(sc);
                double *tz = kt_malloc(o->iter * sizeof(double));

                kt_seed(ZCP_PIX_YUYV);
                for (size_t i = 0; i < slot; i++)
                        orig[i] = (uint8_t)kt_rnd();
                memset(scratch, 0, sc);
                for (int off = 0; off < 2; off++) {
                        struct zcp_workers *team = NULL;
                        struct timespec next;
                        double cpu0 = 0, own0 = 0;
                        uint64_t woken0 = 0;

                        CHECK(setenv("ZCP_WORKERS_AHEAD", off ? "0" : "1", 1) == 0);
                        CHECK(zcp_workers_new(n, "bench-wake", &team) == 0);
                        clock_gettime(CLOCK_MONOTONIC, &next);
                        for (uint32_t it = 0; it < o->iter + 10; it++) {
                                long ns = next.tv_nsec + (long)(period_ms * 1e6);
                                next.tv_sec += ns / 1000000000L;
                                next.tv_nsec = ns % 1000000000L;
                                fill(o, buf, orig, in);
                                clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
                                if (it == 10) {
                                        cpu0 = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
                                        own0 = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
                                        woken0 = zcp_workers_woken(team);
                                }
                                double t0 = now_ms();
                                CHECK(zcp_convert_to_nv12_mt(team, ZCP_PIX_YUYV, buf, slot, w, h, s, scratch, sc) == 0);
                                if (it >= 10)
                                        tz[it - 10] = now_ms() - t0;
                        }
                        /* The helpers' spin after the last frame belongs to it: wait out its window. */
                        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
                        double helpers = (cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - cpu0) - (cpu_ms(CLOCK_THREAD_CPUTIME_ID) - own0);
                        struct stat z = summarize(tz, o->iter);
                        printf("   %u threads, wake-ahead %-3s (%s): %.3f | %.2f | %.3f (%.2f%%)\n", n, off ? "off" : "on",
                               zcp_workers_ahead(team) ? "active" : "inactive", z.med,
                               (double)(zcp_workers_woken(team) - woken0) / o->iter, helpers / o->iter,
                               100.0 * helpers / o->iter / period_ms);
                        zcp_workers_free(team);
                }
                CHECK(unsetenv("ZCP_WORKERS_AHEAD") == 0);
                free(orig);
                free(buf);
                free(scratch);
                free(tz);
        }
}

static uint32_t parse_list(const char *s, uint32_t *out, uint32_t max)
{
        uint32_t n = 0;
        char *end;

        while (*s && n < max) {
                unsigned long v = strtoul(s, &end, 10);
                if (end == s || v == 0 || v > ZCP_WORKERS_MAX)
                        return 0;
                out[n++] = (uint32_t)v;
                s = *end == ',' ? end + 1 : end;
                if (*end && *end != ',')
                        return 0;
        }
        return n;
}

static void usage(void)
{
        fprintf(stderr, "usage: bench_cpu [--threads 1,2,4] [--iter N] [--sizes WxH,...] [--formats f,...] "
                        "[--only convert|model|wake] [--no-torch] [--torch-frames N] [--cold] [--period MS]\n");
        exit(64);
}

int main(int argc, char **argv)
{
        static const enum zcp_pixfmt all[] = {
                ZCP_PIX_YUYV, ZCP_PIX_UYVY, ZCP_PIX_YVYU, ZCP_PIX_NV12, ZCP_PIX_NV21, ZCP_PIX_I420,
                ZCP_PIX_YV12, ZCP_PIX_RGB24, ZCP_PIX_BGR24, ZCP_PIX_RGBX, ZCP_PIX_BGRX, ZCP_PIX_GREY,
        };
        struct opts o = { .iter = 31, .torch_frames = 10, .convert = true, .model = true, .torch = true };
        uint32_t cpus = zcp_workers_cpus();

        setvbuf(stdout, NULL, _IOLBF, 0);
        setenv("ZCP_SOURCE_ROOT", ZCP_BENCH_SOURCE_ROOT, 0);
        setenv("ZCP_MODELDIR", ZCP_BENCH_SOURCE_ROOT "/models", 0);
        zcp_log_set_level(ZCP_LOG_WARN);
        o.threads[o.n_threads++] = 1;
        for (uint32_t n = 2; n <= 4 && n <= cpus; n *= 2)
                o.threads[o.n_threads++] = n;
        o.sizes[0][0] = 640, o.sizes[0][1] = 480;
        o.sizes[1][0] = 1280, o.sizes[1][1] = 720;
        o.sizes[2][0] = 1920, o.sizes[2][1] = 1080;
        o.n_sizes = 3;
        memcpy(o.formats, all, sizeof(all));
        o.n_formats = sizeof(all) / sizeof(all[0]);

        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (strcmp(a, "--no-torch") == 0) {
                        o.torch = false;
                } else if (strcmp(a, "--cold") == 0) {
#if defined(__x86_64__) || defined(__i386__)
                        o.cold = true;
#else
                        fprintf(stderr, "bench_cpu: --cold needs x86 (clflush)\n");
                        exit(64);
#endif
                } else if (strcmp(a, "--threads") == 0 && v) {
                        o.n_threads = parse_list(v, o.threads, MAX_LIST);
                        if (!o.n_threads || o.threads[0] != 1)
                                usage(); /* the first is the baseline: 1 */
                        i++;
                } else if (strcmp(a, "--period") == 0 && v) {
                        o.period_ms = strtod(v, NULL);
                        if (!(o.period_ms > 0 && o.period_ms <= 1000))
                                usage();
                        i++;
                } else if (strcmp(a, "--torch-frames") == 0 && v) {
                        o.torch_frames = (uint32_t)strtoul(v, NULL, 10);
                        if (o.torch_frames < 1 || o.torch_frames > 10000)
                                usage();
                        i++;
                } else if (strcmp(a, "--iter") == 0 && v) {
                        o.iter = (uint32_t)strtoul(v, NULL, 10);
                        if (o.iter < 1 || o.iter > 100000)
                                usage();
                        i++;
                } else if (strcmp(a, "--sizes") == 0 && v) {
                        const char *p = v;
                        o.n_sizes = 0;
                        while (*p && o.n_sizes < MAX_LIST) {
                                unsigned w, h;
                                int used;
                                if (sscanf(p, "%ux%u%n", &w, &h, &used) != 2 || w < 2 || h < 2 || w % 2 || h % 2)
                                        usage();
                                o.sizes[o.n_sizes][0] = w;
                                o.sizes[o.n_sizes++][1] = h;
                                p += used;
                                p += *p == ',';
                        }
                        i++;
                } else if (strcmp(a, "--formats") == 0 && v) {
                        char list[256], *save = NULL;
                        snprintf(list, sizeof(list), "%s", v);
                        o.n_formats = 0;
                        for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                                int f = zcp_enum_from_name(zcp_pixfmt_names, ZCP_PIX_COUNT, tok);
                                if (f < 0 || !zcp_convert_supported((enum zcp_pixfmt)f))
                                        usage();
                                o.formats[o.n_formats++] = (enum zcp_pixfmt)f;
                        }
                        i++;
                } else if (strcmp(a, "--only") == 0 && v) {
                        o.convert = strcmp(v, "convert") == 0;
                        o.model = strcmp(v, "model") == 0;
                        o.wake = strcmp(v, "wake") == 0;
                        if (!o.convert && !o.model && !o.wake)
                                usage();
                        i++;
                } else {
                        usage();
                }
        }

        char cpu[256] = "?";
        FILE *f = fopen("/proc/cpuinfo", "re");
        if (f) {
                char line[512];
                while (fgets(line, sizeof(line), f))
                        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
                                snprintf(cpu, sizeof(cpu), "%s", strchr(line, ':') + 2);
                                cpu[strcspn(cpu, "\n")] = '\0';
                                break;
                        }
                fclose(f);
        }
        const char *level = "x86-64 baseline";
#if defined(__x86_64__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
                level = "x86-64-v4 (AVX-512)";
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
                level = "x86-64-v3 (AVX2, FMA)";
#endif
        printf("bench_cpu: %s; %ld CPUs online, %u usable by this process; vector clones used: %s; "
               "cc %s\n", cpu, sysconf(_SC_NPROCESSORS_ONLN), cpus, level, __VERSION__);
        if (o.convert)
                bench_convert(&o);
        if (o.wake)
                bench_wake(&o);
        if (o.model) {
                if (o.torch)
                        o.torch = find_torch();
                bench_model(&o);
        }
        return 0;
}
