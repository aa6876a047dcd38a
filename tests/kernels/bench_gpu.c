/* SPDX-License-Identifier: MIT */
/*
 * The detector's GPU stage (issue 37 item 6): the shipped CenterNet (models/centernet, 512x512,
 * 1.3 G multiply-adds) with motion, through the CUDA backend as the daemon runs it, on 8 slots
 * holding 8 different frames (the sample's frames scaled up when GStreamer can decode them, else
 * random), N frames (default 2000, argv[1]) after a warm-up:
 *
 *   stage      submit -> results visible in the slot's mapped block (wait returned, valid == 1),
 *              sync spin, p50 / p99 / max: at 1920x1080 zero-copy and copy, and at the sample's
 *              768x576 zero-copy;
 *   network    the plan's ops and head alone on a device tensor, one CUDA graph replayed, GPU
 *              time between events around each replay, p50 / p99, for each way of summing the
 *              dense convolutions (ffma, tf32x3) and the build's default;
 *   ops        each op's GPU time (events between plain launches, median of 20 runs), with its
 *              kernel and its multiply-adds; the list in the log, the ten slowest in the table;
 *   floors     pinned host -> device bandwidth (the frame's bytes over it), device copy bandwidth
 *              (the arena's bytes over it, read and written once), the launch-and-sync time of
 *              a graph of one empty kernel, and of a chain of as many empty kernels as the plan
 *              has ops, each after the one before (1 block each, dependent launches and plain;
 *              2 blocks a multiprocessor each, dependent): the plan's launches, the work removed.
 *
 * A table is printed last. Without a usable GPU: exit 77.
 */
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "kutil.h"

#define SLOTS  8
#define WARMUP 200
#define OPRUNS 20

static struct zcp_stream_stats stats;
static uint32_t frames_n = 2000;

struct lat {
        double p50, p99, max;
};

static int cmp_u64(const void *a, const void *b)
{
        const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

static int cmp_f(const void *a, const void *b)
{
        const float x = *(const float *)a, y = *(const float *)b;
        return x < y ? -1 : x > y;
}

static struct lat percentiles(uint64_t *ns, uint32_t n)
{
        struct lat l;

        qsort(ns, n, sizeof(*ns), cmp_u64);
        l.p50 = (double)ns[n / 2] / 1e3;
        l.p99 = (double)ns[(uint32_t)((uint64_t)n * 99 / 100)] / 1e3;
        l.max = (double)ns[n - 1] / 1e3;
        return l;
}

/* submit -> wait latency of the cuda backend over frames_n frames; ret_mode: the mode it reports. */
static struct lat run_backend(const struct zcp_plan *m, uint32_t W, uint32_t H, uint8_t *const *frames,
                              enum zcp_transfer t, const char **ret_mode, uint32_t *ret_dets)
{
        struct zcp_stream_config cfg = kt_stream_config();
        struct zcp_backend_params bp;
        struct zcp_allocator alloc;
        struct zcp_ring *ring = NULL;
        struct zcp_backend_ctx *g = NULL;
        uint64_t *ns = kt_malloc(sizeof(uint64_t) * frames_n);
        const uint32_t cells = zcp_grid_w(W, cfg.motion.cell) * zcp_grid_h(H, cfg.motion.cell);
        uint32_t dets = 0;
        struct lat l;

        cfg.gpu.backend = ZCP_BACKEND_CUDA;
        cfg.gpu.transfer = t;
        cfg.gpu.sync = ZCP_SYNC_SPIN;
        bp = kt_backend_params(&cfg, m, W, H, "bench");
        zcp_stream_stats_init(&stats);
        CHECK(zcp_backend_cuda.allocator(0, &alloc) == 0);
        CHECK(zcp_ring_new(SLOTS, zcp_nv12_size(W, H), cells, &alloc, &stats, &ring) == 0);
        for (uint32_t i = 0; i < SLOTS; i++)
                kt_slot_frame(zcp_ring_slot(ring, i), frames[i], W, H, i);
        CHECK(zcp_backend_cuda.open(&bp, ring, &g) == 0);
        *ret_mode = zcp_backend_cuda.transfer_mode(g);
        for (uint32_t i = 0; i < WARMUP + frames_n; i++) {
                struct zcp_slot *sl = zcp_ring_slot(ring, i % SLOTS);
                uint64_t t0;

                sl->frame.seq = i;
                t0 = zcp_now_ns();
                CHECK(zcp_backend_cuda.submit(g, sl) == 0);
                CHECK(zcp_backend_cuda.wait(g, sl) == 0);
                if (i >= WARMUP)
                        ns[i - WARMUP] = zcp_now_ns() - t0;
                CHECK(sl->result->valid == 1);
                dets += i >= WARMUP ? sl->result->det_count : 0;
        }
        zcp_backend_cuda.close(g);
        zcp_ring_free(ring);
        l = percentiles(ns, frames_n);
        *ret_dets = dets;
        free(ns);
        return l;
}

/* A net of the plan with its input filled with bytes-like values, and a stage and publish block. */
struct netrig {
        struct zcp_k_net *net;
        struct zcp_result *stage, *pub_h, *pub_d;
        struct zcp_det_params det;
};

static void rig_open(struct netrig *r, const struct zcp_plan *m, enum zcp_k_gemm gemm)
{
        const struct zcp_plan_tensor *ti = &m->tensors[m->input.t];
        const size_t nin = (size_t)3 * ti->w * ti->h;
        struct zcp_stream_config cfg = kt_stream_config();
        struct zcp_backend_params bp = kt_backend_params(&cfg, m, 1920, 1080, "bench");
        struct zcp_k_model *km = NULL;
        float *in = kt_malloc(nin * 4);
        char err[256] = "";

        for (size_t i = 0; i < nin; i++)
                in[i] = (kt_unit() + 1.0f) * 127.5f;
        CHECK_MSG(zcp_k_model_acquire(m, &km, err, sizeof(err)) == 0, "%s", err);
        CHECK_MSG(zcp_k_net_new(km, gemm, &r->net, err, sizeof(err)) == 0, "%s", err);
        zcp_k_model_release(km);
        CK(cudaMemcpy(zcp_k_net_input(r->net), in, nin * 4, cudaMemcpyHostToDevice));
        CK(cudaMalloc((void **)&r->stage, sizeof(*r->stage)));
        CK(zcp_k_stage_init(r->stage));
        CK(cudaHostAlloc((void **)&r->pub_h, sizeof(*r->pub_h), cudaHostAllocMapped));
        CK(cudaHostGetDevicePointer((void **)&r->pub_d, r->pub_h, 0));
        r->det = bp.det;
        free(in);
}

static void rig_close(struct netrig *r)
{
        zcp_k_net_free(r->net);
        cudaFree(r->stage);
        cudaFreeHost(r->pub_h);
}

/* The network alone: ops and head as one graph, GPU time of each replay between events. */
static struct lat net_alone(const struct zcp_plan *m, enum zcp_k_gemm gemm, cudaStream_t st)
{
        struct netrig r;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        cudaEvent_t e0, e1;
        uint64_t *ns = kt_malloc(sizeof(uint64_t) * frames_n);
        struct lat l;

        rig_open(&r, m, gemm);
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        CK(zcp_k_net_forward(r.net, st));
        CK(zcp_k_net_head(r.net, 5, &r.det, r.stage, r.pub_d, st));
        CK(cudaStreamEndCapture(st, &graph));
        CK(cudaGraphInstantiate(&exec, graph, 0));
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        for (uint32_t i = 0; i < WARMUP + frames_n; i++) {
                float ms;
                CK(cudaEventRecord(e0, st));
                CK(cudaGraphLaunch(exec, st));
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&ms, e0, e1));
                if (i >= WARMUP)
                        ns[i - WARMUP] = (uint64_t)(ms * 1e6);
        }
        CHECK(r.pub_h->valid == 1);
        l = percentiles(ns, frames_n);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        rig_close(&r);
        free(ns);
        return l;
}

struct optime {
        uint32_t op;
        float us;
};

static int cmp_optime(const void *a, const void *b)
{
        const float x = ((const struct optime *)a)->us, y = ((const struct optime *)b)->us;
        return x < y ? 1 : x > y ? -1 : 0;
}

/* Each op's GPU time (and the head's as op_count), median of OPRUNS runs; into t[op_count + 1]. */
static void op_times(const struct zcp_plan *m, cudaStream_t st, struct optime *t)
{
        const uint32_t n = m->op_count;
        cudaEvent_t *ev = kt_malloc(sizeof(cudaEvent_t) * (n + 2));
        float *runs = kt_malloc(sizeof(float) * (n + 1) * OPRUNS), *col = kt_malloc(sizeof(float) * OPRUNS);
        struct netrig r;

        rig_open(&r, m, ZCP_K_GEMM_AUTO);
        for (uint32_t i = 0; i < n + 2; i++)
                CK(cudaEventCreate(&ev[i]));
        for (int run = -2; run < OPRUNS; run++) {
                for (uint32_t i = 0; i < n; i++) {
                        CK(cudaEventRecord(ev[i], st));
                        CK(zcp_k_net_ops(r.net, i, 1, st));
                }
                CK(cudaEventRecord(ev[n], st));
                CK(zcp_k_net_head(r.net, 5, &r.det, r.stage, r.pub_d, st));
                CK(cudaEventRecord(ev[n + 1], st));
                CK(cudaEventSynchronize(ev[n + 1]));
                for (uint32_t i = 0; run >= 0 && i <= n; i++) {
                        float ms;
                        CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
                        runs[(size_t)i * OPRUNS + (size_t)run] = ms * 1e3f;
                }
        }
        for (uint32_t i = 0; i <= n; i++) {
                memcpy(col, runs + (size_t)i * OPRUNS, sizeof(float) * OPRUNS);
                qsort(col, OPRUNS, sizeof(float), cmp_f);
                t[i] = (struct optime){ .op = i, .us = col[OPRUNS / 2] };
        }
        printf("ops of %s (%u, GPU time between events, median of %d runs):\n", m->source, n, OPRUNS);
        for (uint32_t i = 0; i < n; i++) {
                const struct zcp_plan_op *op = &m->ops[i];
                const struct zcp_plan_tensor *to = &m->tensors[op->out.t];
                uint64_t macs = 0;
                if (op->kind == ZCP_OP_CONV)
                        macs = (uint64_t)to->h * to->w * op->out.c * op->u.conv.kh * op->u.conv.kw *
                               (op->u.conv.groups == 1 ? op->in.c : 1);
                printf("  op %3u %-7s %-26s %4ux%-4ux%-4u <- %4u ch  %8.2f us  %7.3f GMAC  %7.1f GMAC/s\n", i,
                       zcp_op_kind_names[op->kind], zcp_k_net_op_kernel(r.net, i), to->h, to->w, op->out.c, op->in.c,
                       t[i].us, (double)macs / 1e9, t[i].us > 0 ? (double)macs / (t[i].us * 1e3) : 0.0);
        }
        printf("  head (%s)                                       %8.2f us\n", zcp_head_kind_names[m->head.kind],
               t[n].us);
        for (uint32_t i = 0; i < n + 2; i++)
                cudaEventDestroy(ev[i]);
        rig_close(&r);
        free(runs);
        free(col);
        free(ev);
}

/* Pinned host -> device bandwidth in bytes/s (to_dev) or device -> device (read + write counted): median of 20. */
static double bandwidth(cudaStream_t st, bool h2d)
{
        const size_t bytes = 256u << 20;
        void *h = NULL, *d = NULL, *d2 = NULL;
        cudaEvent_t e0, e1;
        float ms[20];

        if (h2d) {
                CK(cudaHostAlloc(&h, bytes, cudaHostAllocMapped));
                memset(h, 0x5a, bytes);
        } else {
                CK(cudaMalloc(&d2, bytes));
                CK(cudaMemset(d2, 0x5a, bytes));
        }
        CK(cudaMalloc(&d, bytes));
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        for (int i = -3; i < 20; i++) {
                CK(cudaEventRecord(e0, st));
                CK(cudaMemcpyAsync(d, h2d ? h : d2, bytes, h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice, st));
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                if (i >= 0)
                        CK(cudaEventElapsedTime(&ms[i], e0, e1));
        }
        qsort(ms, 20, sizeof(ms[0]), cmp_f);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        cudaFree(d);
        cudaFree(d2);
        cudaFreeHost(h);
        return (double)bytes * (h2d ? 1.0 : 2.0) / (ms[10] * 1e-3);
}

/*
 * Launch-and-sync of a graph (spin on the event), median in us: of one empty kernel (n 0), or of a
 * chain of n empty kernels of `blocks` blocks each, dependent launches or not (the floor of a
 * plan of n ops: its launches with the work removed).
 */
static double empty_graph_us(cudaStream_t st, unsigned n, unsigned blocks, int dependent)
{
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        cudaEvent_t ev;
        uint64_t *ns = kt_malloc(sizeof(uint64_t) * frames_n);
        double r;

        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        CK(n ? zcp_k_empty_chain(st, n, blocks, dependent) : zcp_k_empty(st));
        CK(cudaStreamEndCapture(st, &graph));
        CK(cudaGraphInstantiate(&exec, graph, 0));
        CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        for (uint32_t i = 0; i < WARMUP + frames_n; i++) {
                uint64_t t0 = zcp_now_ns();
                cudaError_t e;
                CK(cudaGraphLaunch(exec, st));
                CK(cudaEventRecord(ev, st));
                while ((e = cudaEventQuery(ev)) == cudaErrorNotReady)
                        ;
                CK(e);
                if (i >= WARMUP)
                        ns[i - WARMUP] = zcp_now_ns() - t0;
        }
        r = percentiles(ns, frames_n).p50;
        cudaEventDestroy(ev);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        free(ns);
        return r;
}

/* NV12 frame W x H from src (sw x sh), nearest pixel: the sample's content at another size. */
static void scale_nv12(const uint8_t *src, uint32_t sw, uint32_t sh, uint8_t *dst, uint32_t W, uint32_t H)
{
        for (uint32_t y = 0; y < H; y++)
                for (uint32_t x = 0; x < W; x++)
                        dst[(size_t)y * W + x] = src[(size_t)(y * sh / H) * sw + x * sw / W];
        for (uint32_t y = 0; y < H / 2; y++)
                for (uint32_t x = 0; x < W / 2; x++)
                        for (int k = 0; k < 2; k++)
                                dst[(size_t)W * H + (size_t)y * W + 2 * x + k] =
                                        src[(size_t)sw * sh + (size_t)(y * (sh / 2) / (H / 2)) * sw + 2 * (x * (sw / 2) / (W / 2)) + k];
}

int main(int argc, char **argv)
{
        struct zcp_plan *cn;
        uint8_t *sample[SLOTS], *f1080[SLOTS];
        uint32_t ns, sw = 0, sh = 0, dets[3];
        struct lat stage[3], net[ZCP_K_GEMM_COUNT];
        const char *mode[3];
        struct optime *ot;
        double h2d, d2d, launch, chain[3];
        cudaStream_t st;
        struct cudaDeviceProp prop;

        setvbuf(stdout, NULL, _IOLBF, 0);
        if (argc > 1)
                frames_n = (uint32_t)strtoul(argv[1], NULL, 10);
        if (frames_n < 10)
                frames_n = 10;
        kt_need_gpu();
        zcp_log_set_level(ZCP_LOG_WARN);
        kt_seed(7);
        CK(cudaGetDeviceProperties(&prop, 0));
        cn = kt_load_model("centernet/model.json");
        CHECK(cn);
        CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

        ns = kt_sample_frames(sample, SLOTS, &sw, &sh);
        for (uint32_t i = 0; i < SLOTS; i++) {
                f1080[i] = kt_malloc(zcp_nv12_size(1920, 1080));
                if (ns)
                        scale_nv12(sample[i % ns], sw, sh, f1080[i], 1920, 1080);
                else
                        kt_frame(f1080[i], 1920, 1080, false);
        }
        printf("device: %s, %d SMs; model %s: %u ops, %.3f G multiply-adds, %zu bytes of activations; frames: %s\n",
               prop.name, prop.multiProcessorCount, cn->source, cn->op_count, (double)cn->macs / 1e9,
               cn->arena_floats * sizeof(float), ns ? "the sample's, scaled" : "random");

        {
                /* what measuring the gemm tilings costs a stream's start (plan.cu tune_gemms): the first
                 * net of a model measures them, the next takes them from the model */
                struct zcp_k_model *km = NULL;
                struct zcp_k_net *n1 = NULL, *n2 = NULL;
                char err[256] = "";
                double t0, t1, t2;
                CHECK_MSG(zcp_k_model_acquire(cn, &km, err, sizeof(err)) == 0, "%s", err);
                t0 = zcp_now_ns() / 1e6;
                CHECK_MSG(zcp_k_net_new(km, ZCP_K_GEMM_AUTO, &n1, err, sizeof(err)) == 0, "%s", err);
                t1 = zcp_now_ns() / 1e6;
                CHECK_MSG(zcp_k_net_new(km, ZCP_K_GEMM_AUTO, &n2, err, sizeof(err)) == 0, "%s", err);
                t2 = zcp_now_ns() / 1e6;
                printf("net creation: first %.1f ms (%s), second %.1f ms\n", t1 - t0,
                       getenv("ZCP_GEMM_TUNE") && !strcmp(getenv("ZCP_GEMM_TUNE"), "0") ? "ZCP_GEMM_TUNE=0"
                                                                                        : "gemm tilings measured",
                       t2 - t1);
                zcp_k_net_free(n2);
                zcp_k_net_free(n1);
                zcp_k_model_release(km);
        }
        h2d = bandwidth(st, true);
        d2d = bandwidth(st, false);
        launch = empty_graph_us(st, 0, 0, 0);
        chain[0] = empty_graph_us(st, cn->op_count, 1, 1);
        chain[1] = empty_graph_us(st, cn->op_count, 1, 0);
        chain[2] = empty_graph_us(st, cn->op_count, 2u * (unsigned)prop.multiProcessorCount, 1);
        stage[0] = run_backend(cn, 1920, 1080, f1080, ZCP_TRANSFER_ZERO_COPY, &mode[0], &dets[0]);
        stage[1] = run_backend(cn, 1920, 1080, f1080, ZCP_TRANSFER_COPY, &mode[1], &dets[1]);
        if (ns) {
                for (uint32_t i = ns; i < SLOTS; i++)
                        sample[i] = sample[i % ns];
                stage[2] = run_backend(cn, sw, sh, sample, ZCP_TRANSFER_ZERO_COPY, &mode[2], &dets[2]);
        }
        for (int g = ZCP_K_GEMM_AUTO; g < ZCP_K_GEMM_COUNT; g++)
                net[g] = net_alone(cn, (enum zcp_k_gemm)g, st);
        ot = kt_malloc(sizeof(*ot) * (cn->op_count + 1));
        op_times(cn, st, ot);
        {
                double sum = 0.0;
                for (uint32_t i = 0; i <= cn->op_count; i++)
                        sum += ot[i].us;
                printf("sum of op times %.1f us (head included)\n", sum);
        }

        printf("\nGPU stage: %s, CenterNet (%.2f GMAC) + motion, %u frames each, sync spin\n", prop.name,
               (double)cn->macs / 1e9, frames_n);
        printf("%-44s %10s %10s %10s\n", "", "p50 us", "p99 us", "max us");
        printf("%-44s %10.1f %10.1f %10.1f  (%u detections)\n", "1920x1080 zero-copy: submit -> results", stage[0].p50,
               stage[0].p99, stage[0].max, dets[0]);
        printf("%-44s %10.1f %10.1f %10.1f  (%u detections)\n", "1920x1080 copy: submit -> results", stage[1].p50,
               stage[1].p99, stage[1].max, dets[1]);
        if (ns)
                printf("%4ux%-4u %-35s %10.1f %10.1f %10.1f  (%u detections)\n", sw, sh, "zero-copy: submit -> results",
                       stage[2].p50, stage[2].p99, stage[2].max, dets[2]);
        for (int g = ZCP_K_GEMM_AUTO; g < ZCP_K_GEMM_COUNT; g++) {
                char label[64];
                snprintf(label, sizeof(label), "network alone, device tensor (%s%s)", zcp_k_gemm_names[g],
                         g == ZCP_K_GEMM_AUTO ? ": the default" : "");
                printf("%-44s %10.1f %10.1f %10.1f\n", label, net[g].p50, net[g].p99, net[g].max);
        }
        printf("floors: 1080p NV12 %.2f MB over pinned H2D %.1f GB/s = %.1f us; arena %.1f MB once each way over "
               "%.0f GB/s = %.1f us; empty graph launch+sync %.1f us\n",
               zcp_nv12_size(1920, 1080) / 1e6, h2d / 1e9, zcp_nv12_size(1920, 1080) / h2d * 1e6,
               cn->arena_floats * 4.0 / 1e6, d2d / 1e9, 2.0 * cn->arena_floats * 4.0 / d2d * 1e6, launch);
        printf("floors: %u empty kernels in one graph, launch+sync: 1 block each, dependent launches %s %.1f us, "
               "plain %.1f us; %d blocks each, dependent %.1f us\n", cn->op_count,
               zcp_k_dependent_launch() ? "(on)" : "(off here)", chain[0], chain[1],
               2 * prop.multiProcessorCount, chain[2]);
        qsort(ot, cn->op_count + 1, sizeof(*ot), cmp_optime);
        printf("slowest ops (us):");
        for (uint32_t i = 0; i < 10 && i <= cn->op_count; i++) {
                if (ot[i].op == cn->op_count)
                        printf(" head %.1f;", ot[i].us);
                else
                        printf(" op %u (%s) %.1f;", ot[i].op, zcp_op_kind_names[cn->ops[ot[i].op].kind], ot[i].us);
        }
        printf("\n");
        for (uint32_t i = 0; i < SLOTS; i++)
                free(f1080[i]);
        for (uint32_t i = 0; i < ns; i++)
                free(sample[i]);
        free(ot);
        cudaStreamDestroy(st);
        zcp_plan_free(cn);
        return 0;
}
