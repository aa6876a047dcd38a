/* SPDX-License-Identifier: MIT */
/*
 * zcpipe-bench: on the user's own machine, copy against zero-copy for the
 * frames zcpipe moves (NV12, 640x480 to 3840x2160) and four ways of using
 * them; prints where zero-copy pays, writes the table as CSV and a PNG plot.
 *
 * Both modes start from the same pinned host buffer (cudaHostAlloc, mapped):
 *   zero-copy  the kernel reads the frame through its mapped device pointer;
 *   copy       cudaMemcpyAsync to device memory, then the same kernel reads
 *              the device copy (the copy is part of the time).
 * Patterns (one kernel, bench_kernels.cu, that reads every byte and sums it):
 *   read1          read once, the 4 KiB result stays in device memory;
 *   read-k         read k times (--k, default 4);
 *   result-back    read once, the 4 KiB result written to host memory: mapped
 *                  (zero-copy) or device memory then cudaMemcpyAsync back (copy);
 *   cpu-gpu-turns  per iteration the CPU writes a new frame into the buffer
 *                  (memcpy from one of two frames), the GPU reads it and
 *                  writes its result back as in result-back, the CPU reads the
 *                  result: the whole turn.
 * Times: read1, read-k, result-back between two CUDA events on the stream
 * (GPU time, the copies included); cpu-gpu-turns on the CPU's monotonic
 * clock (the CPU's writes and the wait included). Median and p99 of --iters
 * iterations after a warm-up. Every result is checked against the CPU's sum
 * of the frame: a wrong sum is an error (exit 1), not a number in the table.
 *
 * The context spins while waiting (cudaDeviceScheduleSpin), so the turns'
 * time is the memory system's, not a thread's wake-up. Everything is
 * allocated once, for the largest frame; nothing in the timed loops allocates.
 * Exit: 0, 64 usage, 69 no usable GPU (the reason on stderr), 1 a CUDA error
 * or a wrong result, 73 the CSV or PNG could not be written.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <time.h>

#include "bench_kernels.h"
#include "plot.h"

#define RES_BYTES (ZCP_BENCH_BLOCKS * sizeof(uint32_t))
/* Iterations per cell after a warm-up, by default and with --quick (32 cells each). */
#define ITERS 1000
#define WARM 50
#define QUICK_ITERS 100
#define QUICK_WARM 10

enum pattern { P_READ1, P_READK, P_BACK, P_TURNS, P_COUNT };
static const char *const pattern_names[P_COUNT] = { "read1", "read-k", "result-back", "cpu-gpu-turns" };
enum mode { M_ZC, M_COPY, M_COUNT };
static const char *const mode_names[M_COUNT] = { "zero-copy", "copy" };

static const struct frame_size {
        const char *name;
        int w, h;
} sizes[] = {
        { "640x480", 640, 480 },
        { "1280x720", 1280, 720 },
        { "1920x1080", 1920, 1080 },
        { "3840x2160", 3840, 2160 },
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

struct opts {
        int iters, warm, k, device;
        const char *png, *csv;
};

struct stat2 {
        double p50, p99;
};

struct bench {
        cudaStream_t st;
        cudaEvent_t e0, e1;
        uint8_t *h;             /* the frame: pinned, mapped (largest size) */
        void *h_dev;            /* its device pointer */
        void *d;                /* the device copy */
        uint32_t *hres;         /* the result in host memory: pinned, mapped */
        void *hres_dev;
        uint32_t *dres;         /* the result in device memory */
        uint8_t *src[2];        /* the frames the CPU writes in turns (pageable, like a decoder's) */
        double *t;              /* the iterations' times, us */
        char gpu[256];
};

static struct stat2 results[NSIZES][P_COUNT][M_COUNT];

static size_t frame_bytes(const struct frame_size *s)
{
        return (size_t)s->w * (size_t)s->h * 3 / 2;
}

static double now_us(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The sum (mod 2^32) of the 32-bit words of p, n a multiple of 4: what the kernel computes per pass. */
static uint32_t sum32(const void *p, size_t n)
{
        const uint8_t *b = p;
        uint32_t s = 0, w;

        for (size_t i = 0; i < n; i += 4) {
                memcpy(&w, b + i, 4);
                s += w;
        }
        return s;
}

static int cuda_failed(cudaError_t e, const char *what, int line)
{
        fprintf(stderr, "zcpipe-bench: %s failed (line %d): %s (%s)\n", what, line, cudaGetErrorString(e),
                cudaGetErrorName(e));
        return -1;
}

/* Every CUDA call goes through CK: on error it says which call, and the function returns -1. */
#define CK(call)                                                                                        \
        do {                                                                                            \
                const cudaError_t e_ = (cudaError_t)(call);                                             \
                if (e_ != cudaSuccess)                                                                  \
                        return cuda_failed(e_, #call, __LINE__);                                        \
        } while (0)

static int cmp_double(const void *a, const void *b)
{
        const double x = *(const double *)a, y = *(const double *)b;

        return (x > y) - (x < y);
}

static struct stat2 summarize(double *t, int n)
{
        struct stat2 s;
        int i99 = (int)ceil(0.99 * n) - 1;

        qsort(t, (size_t)n, sizeof(*t), cmp_double);
        s.p50 = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
        s.p99 = t[i99 < 0 ? 0 : i99];
        return s;
}

/*
 * Why no GPU can be measured (the same causes, in the same words, as zcpipe's
 * backend probe in src/infer/cuda.c), or 0 with the device set up.
 */
static int probe(int device, char *why, size_t whylen)
{
        struct cudaDeviceProp prop;
        int n = 0, drv = 0, rt = 0;
        cudaError_t e;

        (void)cudaDriverGetVersion(&drv);       /* 0 without a driver */
        (void)cudaRuntimeGetVersion(&rt);
        e = cudaGetDeviceCount(&n);
        if (e == cudaErrorInsufficientDriver && drv == 0) {
                snprintf(why, whylen, "no NVIDIA driver: libcuda.so.1 not found");
                return -1;
        }
        if (e == cudaErrorInsufficientDriver) {
                snprintf(why, whylen,
                         "the NVIDIA driver is too old: it supports CUDA %d.%d, this zcpipe-bench's runtime is "
                         "CUDA %d.%d; fix: install an NVIDIA driver for CUDA %d.%d or newer",
                         drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10, rt / 1000, rt % 1000 / 10);
                return -1;
        }
        if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
                snprintf(why, whylen, "no CUDA device");
                return -1;
        }
        if (e != cudaSuccess) {
                snprintf(why, whylen, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
                return -1;
        }
        if (device >= n) {
                snprintf(why, whylen, "GPU %d does not exist (%d CUDA device%s); fix: --device below %d", device, n,
                         n == 1 ? "" : "s", n);
                return -1;
        }
        e = cudaGetDeviceProperties(&prop, device);
        if (e != cudaSuccess) {
                snprintf(why, whylen, "GPU %d: %s (%s)", device, cudaGetErrorString(e), cudaGetErrorName(e));
                return -1;
        }
        if (!prop.canMapHostMemory) {
                snprintf(why, whylen, "GPU %d (%s) cannot map host memory: there is no zero-copy to measure", device,
                         prop.name);
                return -1;
        }
        /* Mapped host memory and a spinning wait, set before the context exists. */
        e = cudaInitDevice(device, cudaDeviceMapHost | cudaDeviceScheduleSpin, 0);
        if (e == cudaErrorSetOnActiveProcess) {
                (void)cudaGetLastError();
                e = cudaSuccess;
        }
        if (e == cudaSuccess)
                e = cudaSetDevice(device);
        if (e != cudaSuccess) {
                snprintf(why, whylen, "GPU %d (%s): %s (%s)", device, prop.name, cudaGetErrorString(e),
                         cudaGetErrorName(e));
                return -1;
        }
        return 0;
}

/* The link from sysfs (the runtime does not report it): "gen 5 x16 (max gen 5 x16)", or "unknown". */
static void pcie_link(const struct cudaDeviceProp *prop, char *buf, size_t size)
{
        static const char *const keys[4] = { "current_link_speed", "current_link_width", "max_link_speed",
                                             "max_link_width" };
        double v[4] = { 0, 0, 0, 0 };
        int gen[2];

        for (int i = 0; i < 4; i++) {
                char path[128];
                FILE *f;

                snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.0/%s", (unsigned)prop->pciDomainID,
                         (unsigned)prop->pciBusID, (unsigned)prop->pciDeviceID, keys[i]);
                f = fopen(path, "re");
                if (!f)
                        continue;
                if (fscanf(f, "%lf", &v[i]) != 1)
                        v[i] = 0;
                fclose(f);
        }
        if (v[0] <= 0 || v[1] <= 0) {
                snprintf(buf, size, "unknown (no /sys/bus/pci/devices/%04x:%02x:%02x.0 link files)",
                         (unsigned)prop->pciDomainID, (unsigned)prop->pciBusID, (unsigned)prop->pciDeviceID);
                return;
        }
        /* GT/s per lane: 2.5, 5, 8, 16, 32, 64 are generations 1 to 6. */
        for (int i = 0; i < 2; i++) {
                const double s = v[2 * i];
                gen[i] = s < 4 ? 1 : s < 7 ? 2 : s < 12 ? 3 : s < 24 ? 4 : s < 48 ? 5 : 6;
        }
        snprintf(buf, size, "gen %d x%.0f, %.1f GT/s (max gen %d x%.0f)", gen[0], v[1], v[0], v[2] > 0 ? gen[1] : 0,
                 v[3]);
}

static int setup(struct bench *b, const struct opts *o)
{
        const size_t max = frame_bytes(&sizes[NSIZES - 1]);
        uint32_t x = 0x9e3779b9u;

        CK(cudaStreamCreateWithFlags(&b->st, cudaStreamNonBlocking));
        CK(cudaEventCreate(&b->e0));
        CK(cudaEventCreate(&b->e1));
        CK(cudaHostAlloc((void **)&b->h, max, cudaHostAllocMapped));
        CK(cudaHostGetDevicePointer(&b->h_dev, b->h, 0));
        CK(cudaMalloc(&b->d, max));
        CK(cudaHostAlloc((void **)&b->hres, RES_BYTES, cudaHostAllocMapped));
        CK(cudaHostGetDevicePointer(&b->hres_dev, b->hres, 0));
        CK(cudaMalloc((void **)&b->dres, RES_BYTES));
        b->src[0] = malloc(max);
        b->src[1] = malloc(max);
        b->t = malloc((size_t)o->iters * sizeof(*b->t));
        if (!b->src[0] || !b->src[1] || !b->t) {
                fprintf(stderr, "zcpipe-bench: out of memory (%zu bytes)\n", 2 * max);
                return -1;
        }
        /* Two different frames of noise (xorshift32): every byte counts in the sums. */
        for (int f = 0; f < 2; f++)
                for (size_t i = 0; i < max; i++) {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        b->src[f][i] = (uint8_t)(x >> 24);
                }
        memcpy(b->h, b->src[0], max);
        return 0;
}

static void teardown(struct bench *b)
{
        /* Errors here change nothing: the process ends. */
        if (b->dres)
                (void)cudaFree(b->dres);
        if (b->hres)
                (void)cudaFreeHost(b->hres);
        if (b->d)
                (void)cudaFree(b->d);
        if (b->h)
                (void)cudaFreeHost(b->h);
        if (b->e1)
                (void)cudaEventDestroy(b->e1);
        if (b->e0)
                (void)cudaEventDestroy(b->e0);
        if (b->st)
                (void)cudaStreamDestroy(b->st);
        free(b->src[0]);
        free(b->src[1]);
        free(b->t);
}

/* Pinned bandwidth, GB/s, of `reps` copies of n bytes each way. */
static int bandwidth(struct bench *b, size_t n, int reps, double *ret_h2d, double *ret_d2h)
{
        float ms = 0;

        CK(cudaMemcpyAsync(b->d, b->h, n, cudaMemcpyHostToDevice, b->st));      /* warm */
        CK(cudaEventRecord(b->e0, b->st));
        for (int i = 0; i < reps; i++)
                CK(cudaMemcpyAsync(b->d, b->h, n, cudaMemcpyHostToDevice, b->st));
        CK(cudaEventRecord(b->e1, b->st));
        CK(cudaEventSynchronize(b->e1));
        CK(cudaEventElapsedTime(&ms, b->e0, b->e1));
        *ret_h2d = (double)n * reps / (ms * 1e6);
        CK(cudaEventRecord(b->e0, b->st));
        for (int i = 0; i < reps; i++)
                CK(cudaMemcpyAsync(b->h, b->d, n, cudaMemcpyDeviceToHost, b->st));
        CK(cudaEventRecord(b->e1, b->st));
        CK(cudaEventSynchronize(b->e1));
        CK(cudaEventElapsedTime(&ms, b->e0, b->e1));
        *ret_d2h = (double)n * reps / (ms * 1e6);
        memcpy(b->h, b->src[0], n);     /* the copy back overwrote it with itself; keep it exact anyway */
        return 0;
}

/*
 * One cell of the table: frame size s, pattern p, mode m. The times go to
 * *ret; the result is checked against the CPU's sums (-1 and a message when
 * wrong, as for a CUDA error).
 */
static int measure(struct bench *b, const struct opts *o, const struct frame_size *s, enum pattern p, enum mode m,
                   struct stat2 *ret)
{
        const size_t n = frame_bytes(s), n16 = n / 16;
        const int zc = m == M_ZC, passes = p == P_READK ? o->k : 1;
        const int back = p == P_BACK || p == P_TURNS;   /* the result goes to host memory */
        const void *in = zc ? b->h_dev : b->d;
        uint32_t *out = back && zc ? (uint32_t *)b->hres_dev : b->dres;
        const uint32_t want[2] = { sum32(b->src[0], n), sum32(b->src[1], n) };
        uint32_t got = 0;
        int wrong = 0;

        /* The frame the GPU reads (the turns write their own); results start as garbage. */
        memcpy(b->h, b->src[0], n);
        memset(b->hres, 0xa5, RES_BYTES);
        CK(cudaMemsetAsync(b->dres, 0x5a, RES_BYTES, b->st));
        CK(cudaStreamSynchronize(b->st));
        for (int it = -o->warm; it < o->iters; it++) {
                const unsigned f = (unsigned)it & 1u;
                double us;

                if (p == P_TURNS) {
                        const double t0 = now_us();

                        memcpy(b->h, b->src[f], n);
                        if (!zc)
                                CK(cudaMemcpyAsync(b->d, b->h, n, cudaMemcpyHostToDevice, b->st));
                        CK(zcp_bench_read(in, n16, 1, out, b->st));
                        if (!zc)
                                CK(cudaMemcpyAsync(b->hres, b->dres, RES_BYTES, cudaMemcpyDeviceToHost, b->st));
                        CK(cudaStreamSynchronize(b->st));
                        got = sum32(b->hres, RES_BYTES);
                        us = now_us() - t0;
                        wrong += got != want[f];
                } else {
                        float ms = 0;

                        CK(cudaEventRecord(b->e0, b->st));
                        if (!zc)
                                CK(cudaMemcpyAsync(b->d, b->h, n, cudaMemcpyHostToDevice, b->st));
                        CK(zcp_bench_read(in, n16, passes, out, b->st));
                        if (back && !zc)
                                CK(cudaMemcpyAsync(b->hres, b->dres, RES_BYTES, cudaMemcpyDeviceToHost, b->st));
                        CK(cudaEventRecord(b->e1, b->st));
                        CK(cudaEventSynchronize(b->e1));
                        CK(cudaEventElapsedTime(&ms, b->e0, b->e1));
                        us = (double)ms * 1e3;
                }
                if (it >= 0)
                        b->t[it] = us;
        }
        if (p != P_TURNS) {
                if (!back)
                        CK(cudaMemcpy(b->hres, b->dres, RES_BYTES, cudaMemcpyDeviceToHost));
                got = sum32(b->hres, RES_BYTES);
                wrong = got != want[0] * (uint32_t)passes;
        }
        if (wrong) {
                fprintf(stderr,
                        "zcpipe-bench: %s %s %s: the GPU's sum is wrong (%d iteration%s; last 0x%08x, expected "
                        "0x%08x): the numbers would mean nothing\n",
                        s->name, pattern_names[p], mode_names[m], wrong, wrong == 1 ? "" : "s", got,
                        p == P_TURNS ? want[(unsigned)(o->iters - 1) & 1u] : want[0] * (uint32_t)passes);
                return -1;
        }
        *ret = summarize(b->t, o->iters);
        return 0;
}

static const char *verdict(double ratio)
{
        return ratio < 0.95 ? "yes" : ratio > 1.05 ? "no" : "even";
}

static void print_table(const struct opts *o)
{
        printf("\n%-10s %6s  %-13s %21s  %21s  %7s  %s\n", "frame", "MB", "pattern", "zero-copy us p50 / p99",
               "copy us p50 / p99", "zc/copy", "zero-copy pays");
        for (int p = 0; p < P_COUNT; p++)
                for (size_t s = 0; s < NSIZES; s++) {
                        const struct stat2 *z = &results[s][p][M_ZC], *c = &results[s][p][M_COPY];
                        const double r = z->p50 / c->p50;
                        char pat[32];

                        if (p == P_READK)
                                snprintf(pat, sizeof(pat), "read-k (k=%d)", o->k);
                        else
                                snprintf(pat, sizeof(pat), "%s", pattern_names[p]);
                        printf("%-10s %6.2f  %-13s %10.1f / %8.1f  %10.1f / %8.1f  %7.2f  %s\n", sizes[s].name,
                               (double)frame_bytes(&sizes[s]) / 1e6, pat, z->p50, z->p99, c->p50, c->p99, r,
                               verdict(r));
                }
        printf("\nwhere zero-copy pays (p50 at least 5%% faster than copy):\n");
        for (int p = 0; p < P_COUNT; p++) {
                int any = 0;

                printf("  %-14s", pattern_names[p]);
                for (size_t s = 0; s < NSIZES; s++)
                        if (results[s][p][M_ZC].p50 < 0.95 * results[s][p][M_COPY].p50) {
                                printf(" %s", sizes[s].name);
                                any = 1;
                        }
                printf("%s\n", any ? "" : " none of the sizes");
        }
}

static int write_csv(const char *path, const struct opts *o)
{
        FILE *f = fopen(path, "we");

        if (!f)
                return -errno;
        fprintf(f, "frame,width,height,bytes,pattern,k,zc_p50_us,zc_p99_us,copy_p50_us,copy_p99_us,zc_over_copy,"
                   "zero_copy_pays\n");
        for (int p = 0; p < P_COUNT; p++)
                for (size_t s = 0; s < NSIZES; s++) {
                        const struct stat2 *z = &results[s][p][M_ZC], *c = &results[s][p][M_COPY];

                        fprintf(f, "%s,%d,%d,%zu,%s,%d,%.2f,%.2f,%.2f,%.2f,%.3f,%s\n", sizes[s].name, sizes[s].w,
                                sizes[s].h, frame_bytes(&sizes[s]), pattern_names[p], p == P_READK ? o->k : 1,
                                z->p50, z->p99, c->p50, c->p99, z->p50 / c->p50, verdict(z->p50 / c->p50));
                }
        if (ferror(f)) {
                fclose(f);
                return -EIO;
        }
        return fclose(f) ? -errno : 0;
}

static int write_png(const char *path, const struct bench *b, const struct opts *o)
{
        static const struct zcp_rgb colors[P_COUNT] = {
                { 31, 119, 180 }, { 255, 127, 14 }, { 44, 160, 44 }, { 214, 39, 40 },
        };
        double x[NSIZES], y[P_COUNT][M_COUNT][NSIZES];
        struct zcp_series ser[P_COUNT * M_COUNT];
        char names[P_COUNT * M_COUNT][48], title[320];
        struct zcp_image im;
        int r, n = 0;

        for (size_t s = 0; s < NSIZES; s++)
                x[s] = (double)frame_bytes(&sizes[s]) / 1e6;
        for (int p = 0; p < P_COUNT; p++)
                for (int m = M_COUNT - 1; m >= 0; m--) {
                        for (size_t s = 0; s < NSIZES; s++)
                                y[p][m][s] = results[s][p][m].p50;
                        if (p == P_READK)
                                snprintf(names[n], sizeof(names[n]), "read-k=%d %s", o->k, mode_names[m]);
                        else
                                snprintf(names[n], sizeof(names[n]), "%s %s", pattern_names[p], mode_names[m]);
                        ser[n] = (struct zcp_series){ names[n], colors[p], m == M_ZC, (int)NSIZES, x, y[p][m] };
                        n++;
                }
        snprintf(title, sizeof(title), "copy vs zero-copy: %.60s", b->gpu);
        r = zcp_image_init(&im, 1000, 620);
        if (r < 0)
                return r;
        r = zcp_plot_draw(&im, title, "NV12 frame, MB (640x480, 1280x720, 1920x1080, 3840x2160)",
                          "us per iteration, p50 (log)", ser, n);
        if (r == 0)
                r = zcp_png_write(&im, path);
        zcp_image_done(&im);
        return r;
}

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: zcpipe-bench [--quick] [--iters N] [--k N] [--device N] [--png FILE] [--csv FILE]\n"
                "Measures, on this machine's NVIDIA GPU, copy (cudaMemcpyAsync to device memory) against\n"
                "zero-copy (the kernel reads pinned host memory through its mapped pointer) for NV12 frames\n"
                "from 640x480 to 3840x2160, reading once, k times, with a 4 KiB result written back, and with\n"
                "the CPU and the GPU taking turns on one buffer. Prints the table of where zero-copy pays.\n"
                "\n"
                "  --quick      %d iterations after %d of warm-up (a few seconds)\n"
                "  --iters N    iterations per cell (default %d, after %d of warm-up)\n"
                "  --k N        reads of the read-k pattern (default 4)\n"
                "  --device N   the CUDA device (default 0)\n"
                "  --png FILE   the plot (default zcpipe-bench.png; '' for none)\n"
                "  --csv FILE   the table as CSV too\n"
                "  --help       this text\n"
                "Exit: 0; 64 bad arguments; 69 no usable GPU (the reason is printed); 1 a CUDA error or a wrong\n"
                "result; 73 the PNG or CSV could not be written.\n",
                QUICK_ITERS, QUICK_WARM, ITERS, WARM);
}

static int parse_int(const char *s, int lo, int hi, const char *what, int *ret)
{
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < lo || v > hi) {
                fprintf(stderr, "zcpipe-bench: %s: '%s' is not a number from %d to %d\n", what, s, lo, hi);
                return -1;
        }
        *ret = (int)v;
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
                { "quick", no_argument, NULL, 'q' },    { "iters", required_argument, NULL, 'n' },
                { "k", required_argument, NULL, 'k' },  { "device", required_argument, NULL, 'd' },
                { "png", required_argument, NULL, 'p' }, { "csv", required_argument, NULL, 'c' },
                { "help", no_argument, NULL, 'h' },     { NULL, 0, NULL, 0 },
        };
        struct opts o = { .iters = ITERS, .warm = WARM, .k = 4, .device = 0, .png = "zcpipe-bench.png", .csv = NULL };
        struct bench b;
        struct cudaDeviceProp prop;
        char why[512], link[160];
        double h2d = 0, d2h = 0, t0;
        int c, iters = 0, quick = 0, rc = 1, r;

        memset(&b, 0, sizeof(b));
        while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
                switch (c) {
                case 'q':
                        quick = 1;
                        break;
                case 'n':
                        if (parse_int(optarg, 1, 1000000, "--iters", &iters) < 0)
                                return EX_USAGE;
                        break;
                case 'k':
                        if (parse_int(optarg, 1, 64, "--k", &o.k) < 0)
                                return EX_USAGE;
                        break;
                case 'd':
                        if (parse_int(optarg, 0, 1023, "--device", &o.device) < 0)
                                return EX_USAGE;
                        break;
                case 'p':
                        o.png = optarg;
                        break;
                case 'c':
                        o.csv = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return EX_USAGE;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "zcpipe-bench: unexpected argument '%s'\n", argv[optind]);
                usage(stderr);
                return EX_USAGE;
        }
        if (quick) {
                o.iters = QUICK_ITERS;
                o.warm = QUICK_WARM;
        }
        if (iters)
                o.iters = iters;

        if (probe(o.device, why, sizeof(why)) < 0) {
                fprintf(stderr,
                        "zcpipe-bench: no GPU to measure: %s. Copy against zero-copy needs an NVIDIA GPU and its "
                        "driver.\n",
                        why);
                return EX_UNAVAILABLE;
        }
        t0 = now_us();
        if (cudaGetDeviceProperties(&prop, o.device) != cudaSuccess) {
                fprintf(stderr, "zcpipe-bench: cudaGetDeviceProperties(%d) failed\n", o.device);
                return 1;
        }
        snprintf(b.gpu, sizeof(b.gpu), "%s", prop.name);
        pcie_link(&prop, link, sizeof(link));
        {
                int drv = 0, rt = 0;

                (void)cudaDriverGetVersion(&drv);
                (void)cudaRuntimeGetVersion(&rt);
                printf("zcpipe-bench %s: copy vs zero-copy, %d iterations per cell after %d of warm-up, k=%d\n",
                       ZCP_VERSION, o.iters, o.warm, o.k);
                printf("GPU %d: %s, compute capability %d.%d, %d SMs, %zu MiB, L2 %d MiB%s; driver CUDA %d.%d, "
                       "runtime CUDA %d.%d\n",
                       o.device, prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem >> 20,
                       prop.l2CacheSize >> 20, prop.integrated ? ", integrated (shares the CPU's memory)" : "",
                       drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
                printf("PCIe: %s\n", link);
        }
        if (setup(&b, &o) < 0)
                goto out;
        if (bandwidth(&b, frame_bytes(&sizes[NSIZES - 1]), 20, &h2d, &d2h) < 0)
                goto out;
        printf("pinned bandwidth, %s frame (%.2f MB) x 20: host to device %.1f GB/s, device to host %.1f GB/s\n",
               sizes[NSIZES - 1].name, (double)frame_bytes(&sizes[NSIZES - 1]) / 1e6, h2d, d2h);
        printf("times: read1, read-k, result-back between CUDA events (the copies included); cpu-gpu-turns on the "
               "CPU clock (the CPU's frame write, the GPU, the wait, the CPU's read of the result)\n");
        fflush(stdout);
        for (size_t s = 0; s < NSIZES; s++)
                for (int p = 0; p < P_COUNT; p++)
                        for (int m = 0; m < M_COUNT; m++)
                                if (measure(&b, &o, &sizes[s], (enum pattern)p, (enum mode)m, &results[s][p][m]) < 0)
                                        goto out;
        print_table(&o);
        printf("\nall %zu results checked against the CPU's sums; %.1f s\n", NSIZES * P_COUNT * M_COUNT,
               (now_us() - t0) / 1e6);
        rc = 0;
        if (o.csv) {
                r = write_csv(o.csv, &o);
                if (r < 0) {
                        fprintf(stderr, "zcpipe-bench: cannot write %s: %s\n", o.csv, strerror(-r));
                        rc = EX_CANTCREAT;
                } else {
                        printf("table: %s\n", o.csv);
                }
        }
        if (o.png[0]) {
                r = write_png(o.png, &b, &o);
                if (r < 0) {
                        fprintf(stderr, "zcpipe-bench: cannot write %s: %s\n", o.png, strerror(-r));
                        rc = EX_CANTCREAT;
                } else {
                        printf("plot: %s\n", o.png);
                }
        }
out:
        teardown(&b);
        return rc;
}
