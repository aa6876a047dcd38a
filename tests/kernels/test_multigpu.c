/* SPDX-License-Identifier: MIT */
/*
 * Two GPUs in one process, through the CUDA backend's own seams (issue 41):
 *
 *   - a stream on each GPU at once, 1080p frames, each GPU's results equal to
 *     the cpu backend's (motion exactly, top-k classes equal, probabilities
 *     within 1e-4 relative);
 *   - a ring made for one GPU read by a backend opened on the other, both
 *     ways (a stream re-opened on another GPU with the memory it had:
 *     portable pinned memory, each GPU's own device aliases), with the same
 *     results;
 *   - zcpipe_gpu_info's table has both GPUs, each by its device number.
 *
 * Fewer than two usable GPUs: exit 77 with the reason. The daemon end to
 * end (placement of 2 x 8 streams, each GPU's share, the end-to-end p99)
 * is tests/kernels/multi-gpu.sh.
 */
#include <inttypes.h>
#include <math.h>
#include <unistd.h>

#include "core/gpuinfo.h"
#include "kutil.h"

#define W      1920u
#define H      1080u
#define SLOTS  3u
#define FRAMES 6u

static struct zcp_stream_stats stats;

struct lane {
        uint32_t ring_gpu, gpu;                 /* the ring's allocator's GPU, the backend's */
        struct zcp_ring *ring;
        struct zcp_backend_ctx *ctx;
};

static void compare(const struct zcp_result *g, const struct zcp_result *c, const char *what, uint32_t seq)
{
        CHECK_MSG(g->valid && c->valid, "%s frame %u: result not written", what, seq);
        CHECK_MSG(g->moving_cells == c->moving_cells && g->total_cells == c->total_cells &&
                          memcmp(g->bbox, c->bbox, sizeof(g->bbox)) == 0,
                  "%s frame %u: motion %u/%u [%d %d %d %d], cpu %u/%u [%d %d %d %d]", what, seq, g->moving_cells,
                  g->total_cells, g->bbox[0], g->bbox[1], g->bbox[2], g->bbox[3], c->moving_cells, c->total_cells,
                  c->bbox[0], c->bbox[1], c->bbox[2], c->bbox[3]);
        CHECK_MSG(g->topk_count == c->topk_count, "%s frame %u: %u classes, cpu %u", what, seq, g->topk_count,
                  c->topk_count);
        for (uint32_t k = 0; k < g->topk_count; k++) {
                CHECK_MSG(g->topk_class[k] == c->topk_class[k] &&
                                  fabsf(g->topk_prob[k] - c->topk_prob[k]) <= 1e-4f * fmaxf(fabsf(c->topk_prob[k]), 1e-6f),
                          "%s frame %u top %u: class %u p %.7g, cpu class %u p %.7g", what, seq, k, g->topk_class[k],
                          (double)g->topk_prob[k], c->topk_class[k], (double)c->topk_prob[k]);
        }
}

/* Every lane's backend runs the same frames as the cpu backend; lanes submit together, then wait. */
static void run_lanes(struct lane *lanes, uint32_t n, const struct zcp_backend_params *bp, uint8_t **frames)
{
        struct zcp_ring *cring = NULL;
        struct zcp_backend_ctx *c = NULL;
        char what[64];

        CHECK(zcp_ring_new(SLOTS, zcp_nv12_size(W, H), bp->cfg->motion.enabled ? zcp_grid_w(W, bp->cfg->motion.cell) *
                                                                                      zcp_grid_h(H, bp->cfg->motion.cell)
                                                                                : 0,
                           &zcp_host_allocator, &stats, &cring) == 0);
        CHECK(zcp_backend_cpu.open(bp, cring, &c) == 0);
        for (uint32_t seq = 0; seq < FRAMES; seq++) {
                const uint32_t idx = seq % SLOTS;
                struct zcp_slot *cs = zcp_ring_slot(cring, idx);

                kt_slot_frame(cs, frames[seq % 3], W, H, seq);
                CHECK(zcp_backend_cpu.submit(c, cs) == 0 && zcp_backend_cpu.wait(c, cs) == 0);
                for (uint32_t l = 0; l < n; l++) {
                        struct zcp_slot *gs = zcp_ring_slot(lanes[l].ring, idx);

                        kt_slot_frame(gs, frames[seq % 3], W, H, seq);
                        memset(gs->result, 0xFF, sizeof(*gs->result));
                        CHECK(zcp_backend_cuda.submit(lanes[l].ctx, gs) == 0);
                }
                for (uint32_t l = 0; l < n; l++) {
                        struct zcp_slot *gs = zcp_ring_slot(lanes[l].ring, idx);

                        CHECK(zcp_backend_cuda.wait(lanes[l].ctx, gs) == 0);
                        snprintf(what, sizeof(what), "ring of GPU %u on GPU %u", lanes[l].ring_gpu, lanes[l].gpu);
                        compare(gs->result, cs->result, what, seq);
                }
        }
        zcp_backend_cpu.close(c);
        zcp_ring_free(cring);
}

static void open_lane(struct lane *l, struct zcp_stream_config cfg, const struct zcp_plan *m, const char *name)
{
        struct zcp_backend_params bp;
        struct zcp_allocator alloc;

        cfg.gpu.device = l->gpu;
        bp = kt_backend_params(&cfg, m, W, H, name);
        CHECK(zcp_backend_cuda.allocator(l->ring_gpu, &alloc) == 0);
        CHECK(zcp_ring_new(SLOTS, zcp_nv12_size(W, H),
                           cfg.motion.enabled ? zcp_grid_w(W, cfg.motion.cell) * zcp_grid_h(H, cfg.motion.cell) : 0,
                           &alloc, &stats, &l->ring) == 0);
        CHECK_MSG(zcp_backend_cuda.open(&bp, l->ring, &l->ctx) == 0, "open on GPU %u, ring of GPU %u", l->gpu,
                  l->ring_gpu);
}

static void close_lane(struct lane *l)
{
        zcp_backend_cuda.close(l->ctx);
        zcp_ring_free(l->ring);
}

int main(void)
{
        static const uint32_t chans[] = { 3, 8, 16 }, strides[] = { 2, 2 };
        struct zcp_stream_config cfg = kt_stream_config();
        struct zcp_gpu_info gpus[ZCP_GPU_INFO_MAX];
        struct zcp_backend_params bp;
        struct lane lanes[2];
        uint8_t *frames[3];
        struct zcp_plan *m;
        char why[384] = "";
        int n = 0;

        if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
                printf("SKIP: this test needs two CUDA GPUs, the host has %d\n", n);
                return ZCP_TEST_SKIP;
        }
        for (uint32_t d = 0; d < 2; d++)
                if (zcp_backend_cuda.probe(d, why, sizeof(why)) < 0) {
                        printf("SKIP: GPU %u cannot be used: %s\n", d, why);
                        return ZCP_TEST_SKIP;
                }
        CHECK(zcp_gpu_info_list(gpus, ZCP_GPU_INFO_MAX) >= 2 && gpus[0].device == 0 && gpus[1].device == 1);
        printf("ok GPU 0: %s, GPU 1: %s\n", gpus[0].name, gpus[1].name);
        alarm(300);
        kt_seed(41);
        m = kt_zcnet_plan(chans, strides, 2, 10, 224, 224);
        for (int i = 0; i < 3; i++) {
                frames[i] = kt_malloc(zcp_nv12_size(W, H));
                kt_frame(frames[i], W, H, false);
        }
        cfg.gpu.backend = ZCP_BACKEND_CUDA;
        cfg.gpu.sync = ZCP_SYNC_BLOCK;
        cfg.motion.threshold = 6.0f;
        zcp_stream_stats_init(&stats);
        bp = kt_backend_params(&cfg, m, W, H, "mgpu");

        for (int t = 0; t < ZCP_TRANSFER_COUNT; t++) {
                cfg.gpu.transfer = (enum zcp_transfer)t;
                bp.cfg = &cfg;
                /* A stream on each GPU, at once. */
                lanes[0] = (struct lane){ .ring_gpu = 0, .gpu = 0 };
                lanes[1] = (struct lane){ .ring_gpu = 1, .gpu = 1 };
                open_lane(&lanes[0], cfg, m, "gpu0");
                open_lane(&lanes[1], cfg, m, "gpu1");
                run_lanes(lanes, 2, &bp, frames);
                close_lane(&lanes[0]);
                close_lane(&lanes[1]);
                /* Rings made for the other GPU. */
                lanes[0] = (struct lane){ .ring_gpu = 1, .gpu = 0 };
                lanes[1] = (struct lane){ .ring_gpu = 0, .gpu = 1 };
                open_lane(&lanes[0], cfg, m, "moved0");
                open_lane(&lanes[1], cfg, m, "moved1");
                run_lanes(lanes, 2, &bp, frames);
                close_lane(&lanes[0]);
                close_lane(&lanes[1]);
                printf("ok transfer %s: a stream on each GPU, and rings made for the other GPU: %u frames each as "
                       "the cpu backend\n", zcp_transfer_names[t], FRAMES);
        }
        for (int i = 0; i < 3; i++)
                free(frames[i]);
        zcp_plan_free(m);
        return 0;
}
