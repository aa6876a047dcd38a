/* SPDX-License-Identifier: MIT */
/*
 * A sticky GPU error through the CUDA backend's own seam: one ring slot's
 * device alias is made to point at unmapped memory, so the captured graph's
 * preprocess reads an illegal address. A good frame first works; then
 * wait() on the bad slot must return ZCP_ERR_GPU_STICKY (logged with stage
 * and frame), every later submit/wait must say so too, and close must not
 * hang. Its own program: the CUDA context is lost afterwards. Without a
 * usable GPU: exit 77.
 */
#include <inttypes.h>
#include <signal.h>
#include <unistd.h>

#include "kutil.h"

static struct zcp_stream_stats stats;

int main(void)
{
        struct zcp_stream_config cfg = kt_stream_config();
        struct zcp_backend_params bp;
        struct zcp_allocator alloc;
        struct zcp_ring *ring = NULL;
        struct zcp_backend_ctx *g = NULL;
        struct zcp_plan *m;
        uint8_t *frame;
        void *good_dev;
        int r;
        const uint32_t W = 640, H = 480;
        static const uint32_t chans[] = { 3, 8, 16 }, strides[] = { 2, 2 };

        kt_need_gpu();
        alarm(60);
        kt_seed(42);
        m = kt_zcnet_plan(chans, strides, 2, 10, 64, 48);
        frame = kt_malloc(zcp_nv12_size(W, H));
        kt_frame(frame, W, H, false);
        cfg.gpu.backend = ZCP_BACKEND_CUDA;
        cfg.gpu.transfer = ZCP_TRANSFER_ZERO_COPY;
        cfg.gpu.sync = ZCP_SYNC_BLOCK;
        bp = kt_backend_params(&cfg, m, W, H, "sticky");
        zcp_stream_stats_init(&stats);
        CHECK(zcp_backend_cuda.allocator(0, &alloc) == 0);
        CHECK(zcp_ring_new(2, zcp_nv12_size(W, H), 0, &alloc, &stats, &ring) == 0);

        /* Slot 1 reads 1 TiB past its real alias: nothing is mapped there. */
        good_dev = zcp_ring_slot(ring, 1)->dev;
        zcp_ring_slot(ring, 1)->dev = (uint8_t *)good_dev + (1ull << 40);
        CHECK(zcp_backend_cuda.open(&bp, ring, &g) == 0);

        kt_slot_frame(zcp_ring_slot(ring, 0), frame, W, H, 0);
        CHECK(zcp_backend_cuda.submit(g, zcp_ring_slot(ring, 0)) == 0);
        CHECK(zcp_backend_cuda.wait(g, zcp_ring_slot(ring, 0)) == 0);
        CHECK(zcp_ring_slot(ring, 0)->result->valid == 1);
        printf("ok good frame 0 on slot 0\n");

        kt_slot_frame(zcp_ring_slot(ring, 1), frame, W, H, 1);
        r = zcp_backend_cuda.submit(g, zcp_ring_slot(ring, 1));
        if (r == 0)
                r = zcp_backend_cuda.wait(g, zcp_ring_slot(ring, 1));
        CHECK_MSG(r == ZCP_ERR_GPU_STICKY, "bad slot: %d, want ZCP_ERR_GPU_STICKY", r);
        printf("ok frame 1 on the bad slot: ZCP_ERR_GPU_STICKY\n");

        kt_slot_frame(zcp_ring_slot(ring, 0), frame, W, H, 2);
        CHECK(zcp_backend_cuda.submit(g, zcp_ring_slot(ring, 0)) == ZCP_ERR_GPU_STICKY);
        CHECK(zcp_backend_cuda.wait(g, zcp_ring_slot(ring, 0)) == ZCP_ERR_GPU_STICKY);
        printf("ok later frames: ZCP_ERR_GPU_STICKY\n");

        zcp_backend_cuda.close(g);
        zcp_ring_slot(ring, 1)->dev = good_dev;
        zcp_ring_free(ring);
        zcp_plan_free(m);
        free(frame);
        printf("ok close after a sticky error returned\n");
        return 0;
}
