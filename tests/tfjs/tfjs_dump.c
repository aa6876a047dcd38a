/* SPDX-License-Identifier: MIT */
/*
 * The zcpipe side of the TensorFlow.js oracle (tests/tfjs/test_tfjs.py): for the first N frames
 * of a clip, decoded by the production file source, writes into OUTDIR
 *   frame<i>.f32    the model input zcpipe's preprocess made (NHWC float32, the plan's input)
 *   zcpipe.json     per frame: the C reference's decoded candidates (the graph's own decode, in
 *                   model-input pixels) and the detections after zcpipe's post-processing from
 *                   the C reference, the CPU backend and, where a GPU is usable, the CUDA backend;
 *                   and the post-processing's parameters, so that the test applies the same rules
 *                   to TensorFlow.js's candidates.
 *
 *   tfjs_dump MODEL.json CLIP FRAMES OUTDIR
 *
 * Exit 0 with the files written; 1 on an error (printed). The backends run through their
 * production ops tables (backend.h) opened as the pipeline opens them (zcp_backend_params_init).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "hostutil.h"
#include "infer/backend.h"
#include "infer/detect.h"
#include "infer/reference.h"
#include "model/model.h"

static void put_dets(FILE *f, const char *key, const struct zcp_detection *d, uint32_t n)
{
        fprintf(f, "\"%s\":[", key);
        for (uint32_t i = 0; i < n; i++)
                fprintf(f, "%s{\"id\":%u,\"score\":%.9g,\"box\":[%.9g,%.9g,%.9g,%.9g]}", i ? "," : "", d[i].cls,
                        (double)d[i].score, (double)d[i].box[0], (double)d[i].box[1], (double)d[i].box[2],
                        (double)d[i].box[3]);
        fprintf(f, "]");
}

/* The detections a backend's ops give for one NV12 frame. */
static uint32_t run_backend(const struct zcp_backend_ops *ops, struct zcp_backend_ctx *ctx, struct zcp_slot *slot,
                            struct zcp_detection *ret)
{
        slot->result->valid = 0;
        CHECK(ops->submit(ctx, slot) == 0 && ops->wait(ctx, slot) == 0 && slot->result->valid);
        memcpy(ret, slot->result->det, sizeof(struct zcp_detection) * slot->result->det_count);
        return slot->result->det_count;
}

int main(int argc, char **argv)
{
        struct zcp_stream_config cfg = kt_stream_config();
        const struct zcp_plan *plan = NULL;
        struct zcp_backend_params bp;
        const struct zcp_backend_ops *cuda = NULL;
        struct zcp_backend_ctx *cpu_ctx = NULL, *cuda_ctx = NULL;
        struct zcp_ring *ring = NULL, *cuda_ring = NULL;
        struct zcp_stream_stats st;
        struct zcp_allocator alloc;
        uint8_t *frames[64];
        uint32_t w = 0, h = 0, n, want;
        char err[512], path[4096];
        float *arena;
        FILE *out;

        if (argc != 5) {
                fprintf(stderr, "usage: tfjs_dump MODEL.json CLIP FRAMES OUTDIR\n");
                return 1;
        }
        if (!HAVE_GSTREAMER) {
                printf("built without GStreamer: no file source to decode the clip with\n");
                return 77;
        }
        want = (uint32_t)atoi(argv[3]);
        CHECK(want >= 1 && want <= 64);
        snprintf(cfg.model.path, sizeof(cfg.model.path), "%s", argv[1]);
        cfg.model.labels[0] = '\0';
        if (zcp_model_acquire(&cfg.model, &plan, err, sizeof(err)) < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        CHECK(plan->head.kind == ZCP_HEAD_CENTERNET);
        n = kt_clip_frames(argv[2], frames, want, &w, &h);
        CHECK_MSG(n == want, "%s: %u of %u frames decoded", argv[2], n, want);
        CHECK(zcp_backend_params_init(&bp, &cfg, plan, w, h, "oracle", err, sizeof(err)) == 0);
        arena = kt_malloc(sizeof(float) * plan->arena_floats);

        /* the CPU backend, and CUDA where this build has it and a GPU is usable */
        zcp_stream_stats_init(&st);
        CHECK(zcp_backend_cpu.allocator(0, &alloc) == 0);
        CHECK(zcp_ring_new(1, zcp_nv12_size(w, h), 0, &alloc, &st, &ring) == 0);
        CHECK(zcp_backend_cpu.open(&bp, ring, &cpu_ctx) == 0);
        {
                struct zcp_backend_choice c;
                if (zcp_backend_choose(ZCP_BACKEND_AUTO, 0, &c) == 0 && c.ops != &zcp_backend_cpu) {
                        cuda = c.ops;
                        CHECK(cuda->allocator(0, &alloc) == 0);
                        CHECK(zcp_ring_new(1, zcp_nv12_size(w, h), 0, &alloc, &st, &cuda_ring) == 0);
                        CHECK(cuda->open(&bp, cuda_ring, &cuda_ctx) == 0);
                }
        }

        snprintf(path, sizeof(path), "%s/zcpipe.json", argv[4]);
        out = fopen(path, "we");
        CHECK(out);
        fprintf(out, "{\"width\":%u,\"height\":%u,\"in_w\":%u,\"in_h\":%u,\"classes\":%u,\"cuda\":%s,", w, h,
                bp.pre.in_w, bp.pre.in_h, plan->head.classes, cuda ? "true" : "false");
        fprintf(out, "\"post\":{\"min_score\":%.9g,\"nms_iou\":%.9g,\"max_det\":%u,\"off_x\":%.9g,\"off_y\":%.9g,"
                     "\"scale_x\":%.9g,\"scale_y\":%.9g,\"frame_w\":%.9g,\"frame_h\":%.9g},\"frames\":[",
                (double)bp.det.min_score, (double)bp.det.nms_iou, bp.det.max_det, (double)bp.det.off_x,
                (double)bp.det.off_y, (double)bp.det.scale_x, (double)bp.det.scale_y, (double)bp.det.frame_w,
                (double)bp.det.frame_h);
        for (uint32_t i = 0; i < n; i++) {
                struct zcp_detection cand[1000], ref[ZCP_DET_MAX], got[ZCP_DET_MAX];
                const struct zcp_plan_tensor *ti = &plan->tensors[plan->input.t];
                uint32_t nc, nr, ng;
                FILE *f;

                /* the input tensor, as the C reference makes it (every backend's is equal: their tests) */
                memset(arena, 0, sizeof(float) * plan->arena_floats);
                zcp_ref_preprocess(frames[i], &bp.pre, arena + ti->off, NULL);
                snprintf(path, sizeof(path), "%s/frame%u.f32", argv[4], i);
                f = fopen(path, "wbe");
                CHECK(f && fwrite(arena + ti->off, sizeof(float), (size_t)ti->h * ti->w * 3, f) ==
                                   (size_t)ti->h * ti->w * 3);
                fclose(f);
                zcp_ref_plan(plan, arena);
                nc = zcp_ref_centernet(plan, arena, cand);
                nr = zcp_detect_post(cand, nc, &bp.det, ref);
                fprintf(out, "%s{\"input\":\"frame%u.f32\",", i ? "," : "", i);
                put_dets(out, "candidates", cand, nc);
                fprintf(out, ",");
                put_dets(out, "reference", ref, nr);
                memcpy(zcp_ring_slot(ring, 0)->data, frames[i], zcp_nv12_size(w, h));
                {
                        struct zcp_slot *s = zcp_ring_slot(ring, 0);
                        s->frame = (struct zcp_frame){ .seq = i, .width = w, .height = h, .fmt = ZCP_PIX_NV12,
                                                       .stride = w, .bytes = zcp_nv12_size(w, h) };
                        ng = run_backend(&zcp_backend_cpu, cpu_ctx, s, got);
                }
                fprintf(out, ",");
                put_dets(out, "cpu", got, ng);
                if (cuda) {
                        struct zcp_slot *s = zcp_ring_slot(cuda_ring, 0);
                        memcpy(s->data, frames[i], zcp_nv12_size(w, h));
                        s->frame = (struct zcp_frame){ .seq = i, .width = w, .height = h, .fmt = ZCP_PIX_NV12,
                                                       .stride = w, .bytes = zcp_nv12_size(w, h) };
                        ng = run_backend(cuda, cuda_ctx, s, got);
                        fprintf(out, ",");
                        put_dets(out, "cuda", got, ng);
                }
                fprintf(out, "}");
                printf("frame %u: %u candidates, %u detections (reference)\n", i, nc, nr);
                free(frames[i]);
        }
        fprintf(out, "]}\n");
        CHECK(fclose(out) == 0);
        zcp_backend_cpu.close(cpu_ctx);
        zcp_ring_free(ring);
        if (cuda) {
                cuda->close(cuda_ctx);
                zcp_ring_free(cuda_ring);
        }
        free(arena);
        zcp_model_release(plan);
        return 0;
}
