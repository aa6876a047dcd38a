/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend (src/infer/cuda*.c) end to end against the CPU backend (the C reference of
 * every computation) on rings of slots, for plans of both heads:
 *
 * - every transfer mode (zero-copy, copy, auto) and sync mode, two frames in flight, model and
 *   motion on and off, rings with and without moving masks: motion results and masks equal,
 *   a classifier's top-k within 1e-4 (near ties may swap), a detector's detections by the
 *   contract (class, box IoU >= 0.95, score within 1e-3; tests/kernels/kutil.h);
 * - the shipped CenterNet on the sample's frames (stretched and letterboxed) in each transfer
 *   mode against the CPU backend's results computed once;
 * - frames that move: slots lent registered memfd buffers and given their own memory back, in
 *   zero-copy, copy and auto mode (past auto's first probe), against the cpu backend on the same
 *   sequence; an unreadable lent frame fails alone.
 *
 * The seed is printed; ZCP_TEST_SEED replays one. ZCP_KTEST_QUICK: small cases only (for
 * compute-sanitizer). Without a usable GPU: exit 77.
 */
#include <inttypes.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "infer/xferplan.h"
#include "kutil.h"

static struct zcp_stream_stats stats;
static bool quick;

static uint32_t f2u(float f)
{
        uint32_t u;
        memcpy(&u, &f, 4);
        return u;
}

static bool close_rel(double got, double want, double rel)
{
        return fabs(got - want) <= rel * fabs(want) + 1e-30;
}

/*
 * A GPU result and moving mask against the CPU's: motion fields and mask exactly (the mask also
 * checked against its own result), a classifier's scores within 1e-4 (a near tie may swap two
 * neighbours), a detector's detections by the contract (det: the stream's post-processing; NULL:
 * no detector, none on either side). `cell`: the motion cell of both.
 */
static void compare_blocks(const struct zcp_result *g, const uint32_t *gmask, const struct zcp_result *c,
                           const uint32_t *cmask, uint32_t W, uint32_t H, uint32_t cell,
                           const struct zcp_det_params *det, const char *what, uint64_t seq)
{
        char w2[160];

        CHECK_MSG(g->valid == 1 && c->valid == 1, "%s frame %" PRIu64 ": valid %u / %u", what, seq, g->valid, c->valid);
        CHECK_MSG(g->moving_cells == c->moving_cells && g->total_cells == c->total_cells &&
                          f2u(g->moving_fraction) == f2u(c->moving_fraction),
                  "%s frame %" PRIu64 ": motion %u/%u, cpu %u/%u", what, seq, g->moving_cells, g->total_cells,
                  c->moving_cells, c->total_cells);
        for (int i = 0; i < 4; i++)
                CHECK_MSG(g->bbox[i] == c->bbox[i], "%s frame %" PRIu64 ": bbox[%d] %d, cpu %d", what, seq, i,
                          g->bbox[i], c->bbox[i]);
        CHECK_MSG(g->topk_count == c->topk_count, "%s: topk_count %u, cpu %u", what, g->topk_count, c->topk_count);
        for (uint32_t i = 0; i < c->topk_count; i++) {
                CHECK_MSG(close_rel(g->topk_prob[i], c->topk_prob[i], 1e-4), "%s frame %" PRIu64 ": p[%u] %.9g cpu %.9g",
                          what, seq, i, g->topk_prob[i], c->topk_prob[i]);
                if (g->topk_class[i] != c->topk_class[i]) {
                        bool found = false;
                        for (uint32_t j = 0; j < c->topk_count; j++)
                                found |= c->topk_class[j] == g->topk_class[i] &&
                                         close_rel(c->topk_prob[j], c->topk_prob[i], 1e-4);
                        CHECK_MSG(found, "%s frame %" PRIu64 ": rank %u class %u, cpu %u", what, seq, i,
                                  g->topk_class[i], c->topk_class[i]);
                }
        }
        CHECK_MSG(g->grid_w == c->grid_w && g->grid_h == c->grid_h && g->mask_words == c->mask_words,
                  "%s frame %" PRIu64 ": grid %ux%u mask words %u, cpu %ux%u %u", what, seq, g->grid_w, g->grid_h,
                  g->mask_words, c->grid_w, c->grid_h, c->mask_words);
        if (g->mask_words) {
                CHECK(gmask && cmask);
                for (uint32_t i = 0; i < g->mask_words; i++)
                        CHECK_MSG(gmask[i] == cmask[i], "%s frame %" PRIu64 ": mask word %u = %08x, cpu %08x", what,
                                  seq, i, gmask[i], cmask[i]);
                kt_mask_check(g, gmask, W, H, cell, what);
        }
        CHECK_MSG(g->det_count <= ZCP_DET_MAX && c->det_count <= ZCP_DET_MAX, "%s frame %" PRIu64 ": %u / %u detections",
                  what, seq, g->det_count, c->det_count);
        snprintf(w2, sizeof(w2), "%s frame %" PRIu64 " (gpu first)", what, seq);
        if (det)
                kt_match_dets(g, c, det->min_score, det->max_det, w2);
        else
                CHECK_MSG(g->det_count == 0 && c->det_count == 0, "%s: %u / %u detections without a detector", w2,
                          g->det_count, c->det_count);
}

static void compare_results(const struct zcp_slot *gs, const struct zcp_slot *cs, uint32_t cell,
                            const struct zcp_det_params *det, const char *what, uint64_t seq)
{
        CHECK(!gs->result->mask_words || gs->result->mask_words <= gs->mask_words);
        compare_blocks(gs->result, gs->mask, cs->result, cs->mask, gs->frame.width, gs->frame.height, cell, det, what,
                       seq);
}

struct be_case {
        enum zcp_transfer transfer;
        enum zcp_sync sync;
        bool model, motion;
        uint32_t slots;
        bool no_masks;   /* rings made without moving masks: results carry none */
};

static void check_backend(const struct zcp_plan *m, uint32_t W, uint32_t H, uint8_t *const *frames, uint32_t nframes,
                          const struct be_case *bc, const char *what)
{
        struct zcp_stream_config cfg = kt_stream_config();
        struct zcp_backend_params bp;
        struct zcp_allocator alloc;
        struct zcp_ring *gring = NULL, *cring = NULL;
        struct zcp_backend_ctx *g = NULL, *c = NULL;
        const char *mode;
        uint64_t seq = 0;
        uint32_t moving = 0;
        const uint32_t cells = zcp_grid_w(W, cfg.motion.cell) * zcp_grid_h(H, cfg.motion.cell);
        const uint32_t masks = bc->motion && !bc->no_masks ? cells : 0;

        cfg.gpu.backend = ZCP_BACKEND_CUDA;
        cfg.gpu.transfer = bc->transfer;
        cfg.gpu.sync = bc->sync;
        cfg.model.enabled = bc->model;
        cfg.motion.enabled = bc->motion;
        cfg.motion.threshold = 6.0f;
        cfg.model.top_k = 5;
        bp = kt_backend_params(&cfg, m, W, H, "kt");
        zcp_stream_stats_init(&stats);
        CHECK(zcp_backend_cuda.allocator(0, &alloc) == 0);
        if (bc->motion && !bc->no_masks) {   /* masks of another grid are refused */
                CHECK(zcp_ring_new(bc->slots, zcp_nv12_size(W, H), cells + 1, &alloc, &stats, &gring) == 0);
                CHECK(zcp_backend_cuda.open(&bp, gring, &g) == -EINVAL && g == NULL);
                zcp_ring_free(gring);
                gring = NULL;
        }
        CHECK(zcp_ring_new(bc->slots, zcp_nv12_size(W, H), masks, &alloc, &stats, &gring) == 0);
        CHECK(zcp_ring_new(bc->slots, zcp_nv12_size(W, H), masks, &zcp_host_allocator, &stats, &cring) == 0);
        CHECK(zcp_backend_cuda.open(&bp, gring, &g) == 0);
        CHECK(zcp_backend_cpu.open(&bp, cring, &c) == 0);
        mode = zcp_backend_cuda.transfer_mode(g);
        CHECK(strcmp(mode, "zero-copy") == 0 || strcmp(mode, "copy") == 0);
        if (bc->transfer != ZCP_TRANSFER_AUTO)
                CHECK(strcmp(mode, zcp_transfer_names[bc->transfer]) == 0);

        /* Twice through the frames; every third step has two frames in flight. */
        for (uint32_t i = 0; i < 2 * nframes; i++) {
                const uint32_t burst = (i % 3 == 2 && bc->slots >= 2) ? 2 : 1;
                uint32_t idx[2];

                for (uint32_t b = 0; b < burst; b++, seq++) {
                        idx[b] = (uint32_t)(seq % bc->slots);
                        struct zcp_slot *gs = zcp_ring_slot(gring, idx[b]);
                        struct zcp_slot *cs = zcp_ring_slot(cring, idx[b]);
                        const uint8_t *fr = frames[seq % nframes];
                        kt_slot_frame(gs, fr, W, H, seq);
                        kt_slot_frame(cs, fr, W, H, seq);
                        memset(gs->result, 0xFF, sizeof(*gs->result));
                        if (gs->mask)
                                memset(gs->mask, 0xFF, (size_t)gs->mask_words * 4);
                        CHECK(zcp_backend_cpu.submit(c, cs) == 0);
                        CHECK(zcp_backend_cpu.wait(c, cs) == 0);
                        CHECK(zcp_backend_cuda.submit(g, gs) == 0);
                }
                for (uint32_t b = 0; b < burst; b++) {
                        struct zcp_slot *gs = zcp_ring_slot(gring, idx[b]);
                        CHECK(zcp_backend_cuda.wait(g, gs) == 0);
                        compare_results(gs, zcp_ring_slot(cring, idx[b]), cfg.motion.cell,
                                        bc->model && m->head.kind == ZCP_HEAD_CENTERNET ? &bp.det : NULL, what,
                                        gs->frame.seq);
                        CHECK(gs->result->mask_words == (masks ? zcp_mask_words(cells) : 0));
                        moving += gs->result->moving_cells > 0;
                }
        }
        /* A frame of another geometry is refused, and the stream goes on. */
        {
                struct zcp_slot *gs = zcp_ring_slot(gring, 0);
                kt_slot_frame(gs, frames[0], W, H, seq);
                gs->frame.width = W - 2;
                CHECK(zcp_backend_cuda.submit(g, gs) == -EINVAL);
        }
        printf("ok backend %-6s %ux%u transfer %s -> %s, sync %s, model %s, motion %s, %u slots%s: %" PRIu64
               " frames as the cpu backend (%u with motion)\n",
               what, W, H, zcp_transfer_names[bc->transfer], mode, zcp_sync_names[bc->sync], bc->model ? "on" : "off",
               bc->motion ? "on" : "off", bc->slots, masks ? ", masks" : "", seq, moving);
        zcp_backend_cuda.close(g);
        zcp_backend_cpu.close(c);
        zcp_ring_free(gring);
        zcp_ring_free(cring);
}

static void test_backend_random(const struct zcp_plan *small, const char *name)
{
        static const struct be_case cases[] = {
                { ZCP_TRANSFER_ZERO_COPY, ZCP_SYNC_SPIN, true, true, 3, false },
                { ZCP_TRANSFER_COPY, ZCP_SYNC_BLOCK, true, true, 3, false },
                { ZCP_TRANSFER_AUTO, ZCP_SYNC_YIELD, true, true, 4, false },
                { ZCP_TRANSFER_ZERO_COPY, ZCP_SYNC_BLOCK, false, true, 2, false },
                { ZCP_TRANSFER_COPY, ZCP_SYNC_SPIN, true, false, 2, false },
                { ZCP_TRANSFER_ZERO_COPY, ZCP_SYNC_SPIN, false, false, 2, false },
                { ZCP_TRANSFER_ZERO_COPY, ZCP_SYNC_SPIN, true, true, 2, true },
        };
        static const uint32_t sizes[][2] = { { 640, 480 }, { 642, 482 } };
        uint8_t *frames[6];

        for (size_t s = 0; s < (quick ? 1 : sizeof(sizes) / sizeof(sizes[0])); s++) {
                const uint32_t W = sizes[s][0], H = sizes[s][1];
                frames[0] = kt_malloc(zcp_nv12_size(W, H));
                kt_frame(frames[0], W, H, false);
                for (uint32_t f = 1; f < 6; f++) {
                        /* A sequence: mostly the previous frame, with a new box. */
                        frames[f] = kt_malloc(zcp_nv12_size(W, H));
                        memcpy(frames[f], frames[f - 1], zcp_nv12_size(W, H));
                        uint32_t bx = (uint32_t)(kt_rnd() % (W - 64)), by = (uint32_t)(kt_rnd() % (H - 64));
                        for (uint32_t y = by; y < by + 64; y++)
                                memset(frames[f] + (size_t)y * W + bx, (int)(kt_rnd() & 0xff), 64);
                }
                for (size_t i = 0; i < (quick ? 2 : sizeof(cases) / sizeof(cases[0])); i++)
                        check_backend(small, W, H, frames, 6, &cases[i], name);
                for (uint32_t f = 0; f < 6; f++)
                        free(frames[f]);
        }
}

struct lend_step {
        uint32_t slot;
        int buf;           /* -1: the slot's own memory, else the registered buffer lent to it */
        bool with_next;    /* in flight together with the next step */
};

/*
 * The cuda backend on frames that move: slots alternately read their own
 * memory and registered memfd buffers lent to them (zcp_ring_lend), a
 * buffer lent to one slot and then another, two buffers in turn on one
 * slot, two lent frames in flight; every result as the cpu backend's on the
 * same sequence (the motion background carries over). While a slot is lent,
 * its own memory holds another frame, so reading the wrong memory shows.
 * Then a lent frame the GPU cannot read fails with -EINVAL and the next
 * frame is right.
 *
 * transfer auto runs the sequence over and over past the plan's first two probes
 * (xferplan.h: after 2 x WINDOW frames of one mode, then ZCP_XFERPLAN_PERIOD more,
 * the next SETTLE + WINDOW run in the other; quick runs, for the sanitizers, run it once), so
 * frames of both graph sets of every slot read moving memory, each exec
 * pointed anew when it runs; and a lent frame without a device alias is
 * copied there, right, not refused.
 */
static void check_lend(const struct zcp_plan *m, uint32_t W, uint32_t H, enum zcp_transfer transfer)
{
        static const struct lend_step steps[] = {
                { 0, -1, false }, { 0, 0, false }, { 0, -1, false }, { 1, -1, false }, { 1, 0, false },
                { 0, 1, false },  { 0, 0, false }, { 0, 1, false },  { 1, 1, false },  { 1, -1, false },
                { 0, -1, false }, { 0, 0, false }, { 1, 1, false },  { 0, 1, true },   { 1, 0, false },
                { 0, 0, true },   { 1, -1, false },
        };
        const size_t nsteps = sizeof(steps) / sizeof(steps[0]);
        const bool autom = transfer == ZCP_TRANSFER_AUTO;
        /* auto: past the first probe and a window after it (not in quick runs: the sanitizers' 60 s) */
        const uint32_t rounds = autom && !quick ? (uint32_t)((ZCP_XFERPLAN_PERIOD + 3 * (ZCP_XFERPLAN_SETTLE +
                                                              ZCP_XFERPLAN_WINDOW)) / nsteps + 1)
                                                : 1;
        struct zcp_stream_config cfg = kt_stream_config();
        struct zcp_backend_params bp;
        struct zcp_allocator alloc;
        struct zcp_ring *gring = NULL, *cring = NULL;
        struct zcp_backend_ctx *g = NULL, *c = NULL;
        const size_t fsize = zcp_nv12_size(W, H);
        uint8_t *frames[4], *poison = kt_malloc(fsize), *buf[2];
        void *bdev[2];
        uint64_t seq = 0;
        uint32_t moving = 0, lent_frames = 0;
        const uint32_t cells = zcp_grid_w(W, cfg.motion.cell) * zcp_grid_h(H, cfg.motion.cell);

        cfg.gpu.backend = ZCP_BACKEND_CUDA;
        cfg.gpu.transfer = transfer;
        cfg.gpu.sync = ZCP_SYNC_SPIN;
        cfg.model.enabled = true;
        cfg.motion.enabled = true;
        cfg.motion.threshold = 6.0f;
        cfg.model.top_k = 5;
        bp = kt_backend_params(&cfg, m, W, H, "kt-lend");
        frames[0] = kt_malloc(fsize);
        kt_frame(frames[0], W, H, false);
        for (uint32_t f = 1; f < 4; f++) {
                frames[f] = kt_malloc(fsize);
                memcpy(frames[f], frames[f - 1], fsize);
                uint32_t bx = (uint32_t)(kt_rnd() % (W - 64)), by = (uint32_t)(kt_rnd() % (H - 64));
                for (uint32_t y = by; y < by + 64; y++)
                        memset(frames[f] + (size_t)y * W + bx, (int)(kt_rnd() & 0xff), 64);
        }
        kt_frame(poison, W, H, true);
        zcp_stream_stats_init(&stats);
        CHECK(zcp_backend_cuda.allocator(0, &alloc) == 0);
        CHECK(zcp_ring_new(2, fsize, cells, &alloc, &stats, &gring) == 0);
        CHECK(zcp_ring_new(2, fsize, cells, &zcp_host_allocator, &stats, &cring) == 0);
        for (int b = 0; b < 2; b++) {
                buf[b] = kt_memfd_buffer(gring->slot_size);
                CHECK(alloc.map(alloc.ctx, buf[b], gring->slot_size, &bdev[b]) == 0);
                CHECK(bdev[b] && ((uintptr_t)bdev[b] & 15) == 0);
        }
        CHECK(zcp_backend_cuda.open(&bp, gring, &g) == 0);
        CHECK(zcp_backend_cpu.open(&bp, cring, &c) == 0);
        if (autom)
                CHECK(strcmp(zcp_backend_cuda.transfer_mode(g), "zero-copy") == 0 ||
                      strcmp(zcp_backend_cuda.transfer_mode(g), "copy") == 0);
        else
                CHECK(strcmp(zcp_backend_cuda.transfer_mode(g), zcp_transfer_names[transfer]) == 0);

        for (uint32_t round = 0; round < rounds; round++) {
                for (size_t i = 0; i < nsteps;) {
                        const size_t n = steps[i].with_next && i + 1 < nsteps ? 2 : 1;

                        for (size_t k = 0; k < n; k++, seq++) {
                                const struct lend_step *st = &steps[i + k];
                                struct zcp_slot *gs = zcp_ring_slot(gring, st->slot);
                                struct zcp_slot *cs = zcp_ring_slot(cring, st->slot);
                                const uint8_t *fr = frames[seq % 4];

                                zcp_ring_move(gring, st->slot, ZCP_SLOT_FREE, ZCP_SLOT_SOURCE);
                                if (st->buf >= 0) {
                                        zcp_ring_lend(gring, st->slot, buf[st->buf], bdev[st->buf],
                                                      gring->slot_size, (uint32_t)st->buf + 1);
                                        memcpy(gs->own, poison, fsize);
                                        lent_frames++;
                                }
                                kt_slot_frame(gs, fr, W, H, seq);
                                kt_slot_frame(cs, fr, W, H, seq);
                                memset(gs->result, 0xFF, sizeof(*gs->result));
                                memset(gs->mask, 0xFF, (size_t)gs->mask_words * 4);
                                CHECK(zcp_backend_cpu.submit(c, cs) == 0);
                                CHECK(zcp_backend_cpu.wait(c, cs) == 0);
                                CHECK_MSG(zcp_backend_cuda.submit(g, gs) == 0, "lend %ux%u %s frame %" PRIu64, W,
                                          H, zcp_transfer_names[transfer], seq);
                        }
                        for (size_t k = 0; k < n; k++) {
                                const struct lend_step *st = &steps[i + k];
                                struct zcp_slot *gs = zcp_ring_slot(gring, st->slot);
                                char what[64];

                                snprintf(what, sizeof(what), "lend %s %ux%u slot %u %s%d",
                                         zcp_transfer_names[transfer], W, H, st->slot,
                                         st->buf < 0 ? "own" : "buffer ", st->buf < 0 ? 0 : st->buf);
                                CHECK(zcp_backend_cuda.wait(g, gs) == 0);
                                compare_results(gs, zcp_ring_slot(cring, st->slot), cfg.motion.cell, NULL, what,
                                                gs->frame.seq);
                                CHECK(gs->result->mask_words == zcp_mask_words(cells));
                                moving += gs->result->moving_cells > 0;
                                CHECK(zcp_ring_unlend(gring, st->slot) == (st->buf < 0 ? 0u : (uint32_t)st->buf + 1));
                                CHECK(gs->data == gs->own && gs->dev == gs->own_dev);
                                if (st->buf >= 0)   /* back with the lender: a later frame reading it would show */
                                        memcpy(buf[st->buf], poison, fsize);
                                zcp_ring_move(gring, st->slot, ZCP_SLOT_SOURCE, ZCP_SLOT_FREE);
                        }
                        i += n;
                }
        }
        CHECK(moving > 0);

        /* A lent frame the GPU cannot read fails alone; the slot's next frame is right. */
        {
                struct zcp_slot *gs = zcp_ring_slot(gring, 0);
                struct zcp_slot *cs = zcp_ring_slot(cring, 0);
                const bool copy = transfer == ZCP_TRANSFER_COPY;
                int r;

                zcp_ring_move(gring, 0, ZCP_SLOT_FREE, ZCP_SLOT_SOURCE);
                zcp_ring_lend(gring, 0, buf[0], copy ? bdev[0] : NULL, gring->slot_size, 1);
                if (autom) {
                        /* No device alias: auto copies it, whichever mode its plan is in, and it is right. */
                        memcpy(gs->own, poison, fsize);
                        kt_slot_frame(gs, frames[seq % 4], W, H, seq);
                        kt_slot_frame(cs, frames[seq % 4], W, H, seq);
                        CHECK(zcp_backend_cpu.submit(c, cs) == 0 && zcp_backend_cpu.wait(c, cs) == 0);
                        CHECK(zcp_backend_cuda.submit(g, gs) == 0 && zcp_backend_cuda.wait(g, gs) == 0);
                        compare_results(gs, cs, cfg.motion.cell, NULL, "auto: lent frame without a device alias", seq);
                        seq++;
                }
                if (copy || autom)
                        gs->cap = zcp_k_frame_bytes_padded(W, H) - 16;   /* shorter than a frame */
                kt_slot_frame(gs, frames[0], W, H, seq);
                r = zcp_backend_cuda.submit(g, gs);
                CHECK_MSG(r == -EINVAL, "unreadable lent frame: %d", r);
                if (!copy && !autom) {
                        gs->dev = (uint8_t *)bdev[0] + 8;   /* misaligned alias */
                        CHECK(zcp_backend_cuda.submit(g, gs) == -EINVAL);
                }
                CHECK(zcp_ring_unlend(gring, 0) == 1);
                zcp_ring_lend(gring, 0, buf[1], bdev[1], gring->slot_size, 2);
                kt_slot_frame(gs, frames[seq % 4], W, H, seq);
                kt_slot_frame(cs, frames[seq % 4], W, H, seq);
                CHECK(zcp_backend_cpu.submit(c, cs) == 0 && zcp_backend_cpu.wait(c, cs) == 0);
                CHECK(zcp_backend_cuda.submit(g, gs) == 0 && zcp_backend_cuda.wait(g, gs) == 0);
                compare_results(gs, cs, cfg.motion.cell, NULL, "lend after a refused frame", seq);
                CHECK(zcp_ring_unlend(gring, 0) == 2);
                zcp_ring_move(gring, 0, ZCP_SLOT_SOURCE, ZCP_SLOT_FREE);
                seq++;
        }
        printf("ok lend %-9s %ux%u: %" PRIu64 " frames (%u from lent memfd buffers, %u with motion) as the cpu "
               "backend; unreadable lent frame -EINVAL, then right again\n",
               zcp_transfer_names[transfer], W, H, seq, lent_frames, moving);
        zcp_backend_cuda.close(g);
        zcp_backend_cpu.close(c);
        for (int b = 0; b < 2; b++) {
                alloc.unmap(alloc.ctx, buf[b]);
                CHECK(munmap(buf[b], gring->slot_size) == 0);
        }
        CHECK(cudaGetLastError() == cudaSuccess);
        zcp_ring_free(gring);
        zcp_ring_free(cring);
        for (uint32_t f = 0; f < 4; f++)
                free(frames[f]);
        free(poison);
}

static void test_lend(const struct zcp_plan *small)
{
        static const uint32_t sizes[][2] = { { 640, 480 }, { 642, 482 } };

        for (size_t s = 0; s < (quick ? 1 : sizeof(sizes) / sizeof(sizes[0])); s++) {
                check_lend(small, sizes[s][0], sizes[s][1], ZCP_TRANSFER_ZERO_COPY);
                check_lend(small, sizes[s][0], sizes[s][1], ZCP_TRANSFER_COPY);
                check_lend(small, sizes[s][0], sizes[s][1], ZCP_TRANSFER_AUTO);
        }
}

/*
 * The shipped CenterNet on the sample's frames: the cpu backend's results once, then the cuda
 * backend's in each transfer mode against them, frame by frame (motion included).
 */
static void check_centernet(const struct zcp_plan *cn, uint8_t *const *frames, uint32_t n, uint32_t W, uint32_t H,
                            bool letterbox)
{
        static const enum zcp_transfer modes[] = { ZCP_TRANSFER_ZERO_COPY, ZCP_TRANSFER_COPY, ZCP_TRANSFER_AUTO };
        struct zcp_stream_config cfg = kt_stream_config();
        struct zcp_backend_params bp;
        struct zcp_allocator alloc;
        struct zcp_ring *ring = NULL;
        struct zcp_backend_ctx *b = NULL;
        const uint32_t cells = zcp_grid_w(W, cfg.motion.cell) * zcp_grid_h(H, cfg.motion.cell);
        const uint32_t words = zcp_mask_words(cells);
        struct zcp_result *want = kt_malloc(sizeof(*want) * n);
        uint32_t *wmask = kt_malloc((size_t)words * 4 * n), dets = 0, matched = 0;

        cfg.model.resize = letterbox ? ZCP_RESIZE_LETTERBOX : ZCP_RESIZE_STRETCH;
        cfg.motion.threshold = 6.0f;
        bp = kt_backend_params(&cfg, cn, W, H, "kt-centernet");
        zcp_stream_stats_init(&stats);
        CHECK(zcp_ring_new(1, zcp_nv12_size(W, H), cells, &zcp_host_allocator, &stats, &ring) == 0);
        CHECK(zcp_backend_cpu.open(&bp, ring, &b) == 0);
        for (uint32_t f = 0; f < n; f++) {
                struct zcp_slot *s = zcp_ring_slot(ring, 0);
                kt_slot_frame(s, frames[f], W, H, f);
                CHECK(zcp_backend_cpu.submit(b, s) == 0 && zcp_backend_cpu.wait(b, s) == 0);
                want[f] = *s->result;
                memcpy(wmask + (size_t)f * words, s->mask, (size_t)words * 4);
                dets += want[f].det_count;
        }
        zcp_backend_cpu.close(b);
        zcp_ring_free(ring);
        CHECK(zcp_backend_cuda.allocator(0, &alloc) == 0);
        for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
                cfg.gpu.transfer = modes[m];
                bp = kt_backend_params(&cfg, cn, W, H, "kt-centernet");
                CHECK(zcp_ring_new(3, zcp_nv12_size(W, H), cells, &alloc, &stats, &ring) == 0);
                CHECK(zcp_backend_cuda.open(&bp, ring, &b) == 0);
                matched = 0;
                for (uint32_t f = 0; f < n; f++) {
                        struct zcp_slot *s = zcp_ring_slot(ring, f % 3);
                        char what[96];
                        kt_slot_frame(s, frames[f], W, H, f);
                        memset(s->result, 0xFF, sizeof(*s->result));
                        CHECK(zcp_backend_cuda.submit(b, s) == 0 && zcp_backend_cuda.wait(b, s) == 0);
                        snprintf(what, sizeof(what), "centernet %s %s", letterbox ? "letterbox" : "stretch",
                                 zcp_transfer_names[modes[m]]);
                        compare_blocks(s->result, s->mask, &want[f], wmask + (size_t)f * words, W, H, cfg.motion.cell,
                                       &bp.det, what, f);
                        matched += s->result->det_count;
                }
                printf("ok backend centernet %s %ux%u transfer %s -> %s: %u frames as the cpu backend (%u detections, "
                       "%u on the GPU)\n", letterbox ? "letterbox" : "stretch", W, H, zcp_transfer_names[modes[m]],
                       zcp_backend_cuda.transfer_mode(b), n, dets, matched);
                zcp_backend_cuda.close(b);
                zcp_ring_free(ring);
        }
        free(want);
        free(wmask);
}

int main(void)
{
        static const uint32_t chans[] = { 3, 8, 12, 16 }, strides[] = { 2, 1, 3 };
        struct zcp_plan *small, *det, *cn;
        uint8_t *sample[6];
        uint32_t ns, sw = 0, sh = 0;
        const char *env = getenv("ZCP_TEST_SEED");
        uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

        setvbuf(stdout, NULL, _IOLBF, 0);
        kt_need_gpu();
        zcp_log_set_level(ZCP_LOG_WARN);
        quick = getenv("ZCP_KTEST_QUICK") != NULL;
        kt_seed(seed);
        printf("seed %" PRIu64 " (ZCP_TEST_SEED=%" PRIu64 " replays it)\n", seed, seed);

        small = kt_zcnet_plan(chans, strides, 3, 37, 96, 64);
        det = kt_random_plan(64, 48, 7);
        /*
         * Inputs of 0..1 around 0: random weights on 0..255 grow the activations through the hard
         * swishes until the head's scores hang on the last bits of long sums, where the two backends'
         * sums in different orders would reorder near ties and move the NMS.
         */
        det->input.pixels = ZCP_PIXELS_UNIT;
        for (int k = 0; k < 3; k++) {
                det->input.mean[k] = 0.5f;
                det->input.std[k] = 0.25f;
        }
        test_backend_random(small, "zcnet");
        if (!quick)
                test_backend_random(det, "detector");
        test_lend(small);

        cn = kt_load_model("centernet/model.json");
        CHECK(cn);
        ns = quick ? 0 : kt_sample_frames(sample, 4, &sw, &sh);
        if (ns > 0) {
                check_centernet(cn, sample, ns, sw, sh, false);
                check_centernet(cn, sample, ns, sw, sh, true);
                for (uint32_t f = 0; f < ns; f++)
                        free(sample[f]);
        }
        zcp_plan_free(cn);
        zcp_plan_free(small);
        zcp_plan_free(det);
        printf("all backend checks passed\n");
        return 0;
}
