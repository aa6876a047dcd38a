/* SPDX-License-Identifier: MIT */
/*
 * How the CPU waits for the GPU (issue 15 item 1): for 640x480, 1920x1080 and
 * 3840x2160 NV12 frames, zero-copy, the cuda backend's submit -> wait latency
 * and the CPU time the waiting thread spent per frame (CLOCK_THREAD_CPUTIME_ID
 * around submit + wait), for each `gpu.sync`: spin, yield, block and hybrid
 * (the default). Frames come at a camera's rate (argv[2] fps, default 30: the
 * thread sleeps between frames, so the GPU idles as it does in the field),
 * argv[1] timed frames per figure (default 150) after 30 warm-up frames, the
 * modes run one after the other size by size. The CPU share is that of one
 * 30 fps stream (the unit): CPU per frame x 30.
 *
 * Prints one row per (size, mode) and the hybrid's ratio to spin's p50; the
 * cuda backend logs the hybrid wait's counts (slept, overslept, blocked) at
 * close. Without a usable GPU: exit 77.
 */
#include <inttypes.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "kutil.h"

#define SLOTS  8
#define WARMUP 30

struct fig {
        double p50, p99, cpu_us;
};

static int cmp_u64(const void *a, const void *b)
{
        const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

static uint64_t thread_cpu_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * ZCP_NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
        const struct timespec ts = { .tv_sec = (time_t)(t / ZCP_NSEC_PER_SEC), .tv_nsec = (long)(t % ZCP_NSEC_PER_SEC) };

        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
                ;
}

static struct fig run(const struct zcp_plan *m, uint32_t W, uint32_t H, uint8_t *const *frames, enum zcp_sync s,
                      uint32_t n, double fps)
{
        struct zcp_stream_config cfg = kt_stream_config();
        struct zcp_backend_params bp;
        struct zcp_stream_stats stats;
        struct zcp_allocator alloc;
        struct zcp_ring *ring = NULL;
        struct zcp_backend_ctx *g = NULL;
        uint64_t *ns = kt_malloc(sizeof(uint64_t) * n), cpu = 0, next;
        const uint64_t period = (uint64_t)(1e9 / fps);
        struct fig f;

        cfg.gpu.backend = ZCP_BACKEND_CUDA;
        cfg.gpu.transfer = ZCP_TRANSFER_ZERO_COPY;
        cfg.gpu.sync = s;
        bp = kt_backend_params(&cfg, m, W, H, "sync");
        zcp_stream_stats_init(&stats);
        CHECK(zcp_backend_cuda.allocator(0, &alloc) == 0);
        CHECK(zcp_ring_new(SLOTS, zcp_nv12_size(W, H), 0, &alloc, &stats, &ring) == 0);
        for (uint32_t i = 0; i < SLOTS; i++)
                kt_slot_frame(zcp_ring_slot(ring, i), frames[i], W, H, i);
        CHECK(zcp_backend_cuda.open(&bp, ring, &g) == 0);
        next = zcp_now_ns();
        for (uint32_t i = 0; i < WARMUP + n; i++) {
                struct zcp_slot *sl = zcp_ring_slot(ring, i % SLOTS);
                uint64_t t0, c0;

                next += period;
                sleep_until(next);
                sl->frame.seq = i;
                c0 = thread_cpu_ns();
                t0 = zcp_now_ns();
                CHECK(zcp_backend_cuda.submit(g, sl) == 0);
                CHECK(zcp_backend_cuda.wait(g, sl) == 0);
                if (i >= WARMUP) {
                        ns[i - WARMUP] = zcp_now_ns() - t0;
                        cpu += thread_cpu_ns() - c0;
                }
                CHECK(sl->result->valid == 1);
        }
        zcp_backend_cuda.close(g);
        zcp_ring_free(ring);
        qsort(ns, n, sizeof(*ns), cmp_u64);
        f.p50 = (double)ns[n / 2] / 1e3;
        f.p99 = (double)ns[(uint32_t)((uint64_t)n * 99 / 100)] / 1e3;
        f.cpu_us = (double)cpu / n / 1e3;
        free(ns);
        return f;
}

int main(int argc, char **argv)
{
        static const uint32_t sizes[][2] = { { 640, 480 }, { 1920, 1080 }, { 3840, 2160 } };
        static const enum zcp_sync modes[] = { ZCP_SYNC_SPIN, ZCP_SYNC_YIELD, ZCP_SYNC_BLOCK, ZCP_SYNC_HYBRID };
        struct fig figs[3][4];
        uint32_t n = 150;
        double fps = 30;
        struct zcp_plan *m;
        struct cudaDeviceProp prop;

        kt_need_gpu();
        zcp_log_set_level(ZCP_LOG_INFO);
        if (argc > 1)
                n = (uint32_t)strtoul(argv[1], NULL, 0);
        if (argc > 2)
                fps = strtod(argv[2], NULL);
        if (n < 20)
                n = 20;
        if (!(fps > 0 && fps <= 10000))
                fps = 30;
        kt_seed(0x73796e63ull);
        m = kt_load_model("centernet/model.json");
        CHECK(m);
        CK(cudaGetDeviceProperties(&prop, 0));
        printf("device: %s; zero-copy, %u timed frames per figure after %u warm-up, frames at %.0f fps\n", prop.name,
               n, WARMUP, fps);
        for (size_t si = 0; si < 3; si++) {
                const uint32_t W = sizes[si][0], H = sizes[si][1];
                uint8_t *frames[SLOTS];

                for (uint32_t i = 0; i < SLOTS; i++) {
                        frames[i] = kt_malloc(zcp_nv12_size(W, H));
                        kt_frame(frames[i], W, H, false);
                }
                for (size_t mi = 0; mi < 4; mi++)
                        figs[si][mi] = run(m, W, H, frames, modes[mi], n, fps);
                for (uint32_t i = 0; i < SLOTS; i++)
                        free(frames[i]);
        }
        printf("\nsubmit -> results visible (us, p50 / p99), CPU per frame of the waiting thread (us), "
               "share of one core per 30 fps stream (frames came at %.0f fps)\n", fps);
        printf("%-10s %-7s %16s %12s %10s %12s\n", "size", "sync", "p50 / p99", "cpu/frame", "core %", "p50/spin");
        for (size_t si = 0; si < 3; si++)
                for (size_t mi = 0; mi < 4; mi++) {
                        const struct fig *f = &figs[si][mi];
                        char sz[16];

                        snprintf(sz, sizeof(sz), "%ux%u", sizes[si][0], sizes[si][1]);
                        printf("%-10s %-7s %7.1f / %6.1f %12.1f %10.2f %12.3f\n", sz, zcp_sync_names[modes[mi]],
                               f->p50, f->p99, f->cpu_us, f->cpu_us * 30 / 1e4, f->p50 / figs[si][0].p50);
                }
        zcp_plan_free(m);
        return 0;
}
