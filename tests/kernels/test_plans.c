/* SPDX-License-Identifier: MIT */
/*
 * A plan's CUDA kernels (kernels/plan.cu, conv.cu, ops.cu, heads.cu) against the C reference
 * (src/infer/reference_plan.c, detect.c), with each way of summing the dense convolutions
 * (ZCP_K_GEMM_FFMA and ZCP_K_GEMM_TF32X3):
 *
 * - every op of random plans of every op kind (tests/planutil.h kt_random_plan at several sizes,
 *   odd channel counts, views into concats), zcnet plans (random shapes and the default
 *   weights) and the shipped CenterNet, op by op: the GPU runs op i on its own arena, the
 *   reference runs op i on a copy of that same arena, so differences do not pile up. A
 *   convolution's or mean's output may differ by reassociation: |gpu - ref| <= 1e-4 *
 *   max(|ref|, 0.1 * its terms' size, the sum of |x * w| and |bias|); the other ops (resize,
 *   element-wise, max pool, copy) within 1e-6 relative (their activations' expf aside, the
 *   same float operations). The worst of each kind is printed per way;
 * - random graphs of every shape of branch and join (kt_random_dag), the same way;
 * - the whole plan at once (the launches back to back, the plan's two lanes side by side) on a
 *   poisoned arena: its head's maps bit for bit those of the ops run one by one; their
 *   difference from the reference's whole run is printed (random weights amplify rounding
 *   through a network: judged by the contract below);
 * - the heads on the reference's own arena: CENTERNET decode + post-processing equal to
 *   zcp_ref_centernet + zcp_detect_post bit for bit (thresholds 0.3, 0 and none; NMS on and off;
 *   class filters; stretch and letterbox mappings to the frame; maps of ties: quantized and
 *   constant heat); CLASSIFY top-k the reference's (near ties may swap, probabilities within
 *   1e-5);
 * - every whole-K convolution at each gemm tiling in turn (plan.cu measures them and keeps the
 *   fastest): the whole plan's arena bit for bit the same;
 * - CenterNet on the sample's frames (preprocessed by the reference): GPU plan + head against
 *   the reference plan + head, the detections' contract: the same classes, box IoU >= 0.95,
 *   scores within 1e-3 (a detection within 1e-3 of the score threshold may be on either side).
 *
 * The arena is poisoned (NaN) before each whole run. The seed is printed; ZCP_TEST_SEED replays
 * one. ZCP_KTEST_QUICK: small plans only, CenterNet's whole run and heads but not its ops one by
 * one (for compute-sanitizer). Without a usable GPU: exit 77.
 */
#include <inttypes.h>
#include <time.h>
#include <unistd.h>

#include "infer/detect.h"
#include "kutil.h"
#include "model/model.h"
#include "planutil.h"

static bool quick;
static double worst[ZCP_K_GEMM_COUNT][ZCP_OP_COUNT];

static uint32_t f2u(float f)
{
        uint32_t u;
        memcpy(&u, &f, 4);
        return u;
}

/* A net of `plan` with `gemm` on the current device (its own reference to the weights). */
static struct zcp_k_net *net_of(const struct zcp_plan *plan, enum zcp_k_gemm gemm)
{
        struct zcp_k_model *km = NULL;
        struct zcp_k_net *net = NULL;
        char err[256] = "";

        CHECK_MSG(zcp_k_model_acquire(plan, &km, err, sizeof(err)) == 0, "%s", err);
        CHECK_MSG(zcp_k_net_new(km, gemm, &net, err, sizeof(err)) == 0, "%s", err);
        zcp_k_model_release(km);
        return net;
}

/* The size of each output's terms of convolution op (sum of |x * w| and |bias|), on the arena before it. */
static void conv_mag(const struct zcp_plan *p, const struct zcp_plan_op *op, const float *arena, double *mag)
{
        const struct zcp_plan_conv *c = &op->u.conv;
        const struct zcp_plan_tensor *ti = &p->tensors[op->in.t], *to = &p->tensors[op->out.t];
        const float *in = arena + ti->off + op->in.c0, *w = p->weights + c->weight;
        const float *scale = c->has_scale ? arena + p->tensors[c->scale.t].off + c->scale.c0 : NULL;
        const uint32_t cin = op->in.c, cout = op->out.c;
        const bool dw = c->groups != 1;

        for (uint32_t oy = 0; oy < to->h; oy++)
                for (uint32_t ox = 0; ox < to->w; ox++)
                        for (uint32_t o = 0; o < cout; o++) {
                                double s = c->bias != SIZE_MAX ? fabs(p->weights[c->bias + o]) : 0.0;
                                for (uint32_t ky = 0; ky < c->kh; ky++) {
                                        int64_t iy = (int64_t)oy * c->sh - c->pad_t + ky;
                                        if (iy < 0 || iy >= ti->h)
                                                continue;
                                        for (uint32_t kx = 0; kx < c->kw; kx++) {
                                                int64_t ix = (int64_t)ox * c->sw - c->pad_l + kx;
                                                const float *px = in + ((size_t)iy * ti->w + (size_t)ix) * ti->c;
                                                if (ix < 0 || ix >= ti->w)
                                                        continue;
                                                for (uint32_t i = dw ? o : 0; i < (dw ? o + 1 : cin); i++) {
                                                        double x = px[i] * (scale ? (double)scale[i] : 1.0);
                                                        size_t wi = dw ? ((size_t)ky * c->kw + kx) * cout + o
                                                                       : (((size_t)ky * c->kw + kx) * cin + i) * cout + o;
                                                        s += fabs(x * w[wi]);
                                                }
                                        }
                                }
                                mag[((size_t)oy * to->w + ox) * cout + o] = s;
                        }
}

/* Op i's output view: GPU (got) against reference (want), the error measure of its kind; the worst. */
static double op_diff(const struct zcp_plan *p, uint32_t i, const float *before, const float *got, const float *want)
{
        const struct zcp_plan_op *op = &p->ops[i];
        const struct zcp_plan_tensor *to = &p->tensors[op->out.t], *ti = &p->tensors[op->in.t];
        const size_t px_n = (size_t)to->h * to->w, n = px_n * op->out.c;
        double *mag = NULL, d = 0.0;

        if (op->kind == ZCP_OP_CONV) {
                mag = kt_malloc(n * sizeof(double));
                conv_mag(p, op, before, mag);
        } else if (op->kind == ZCP_OP_MEAN) {
                mag = kt_malloc(n * sizeof(double));
                for (uint32_t c = 0; c < op->in.c; c++) {
                        double s = 0.0;
                        for (size_t q = 0; q < (size_t)ti->h * ti->w; q++)
                                s += fabs(before[ti->off + q * ti->c + op->in.c0 + c]);
                        mag[c] = s / ((double)ti->h * ti->w);
                }
        }
        for (size_t q = 0; q < px_n; q++)
                for (uint32_t c = 0; c < op->out.c; c++) {
                        const size_t e = to->off + q * to->c + op->out.c0 + c;
                        const double r = want[e], g = got[e];
                        double floor = mag ? 0.1 * mag[q * op->out.c + c] : 0.0, dd;
                        floor = fmax(fmax(fabs(r), floor), 1e-30);
                        dd = fabs(g - r) / floor;
                        if (!(dd <= d))
                                d = isnan(dd) ? INFINITY : dd;
                }
        free(mag);
        return d;
}

static void arena_up(struct zcp_k_net *net, const float *host, size_t floats)
{
        CK(cudaMemcpy(zcp_k_net_arena(net), host, floats * 4, cudaMemcpyHostToDevice));
}

static void arena_down(const struct zcp_k_net *net, float *host, size_t floats)
{
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(host, zcp_k_net_arena(net), floats * 4, cudaMemcpyDeviceToHost));
}

/*
 * Plan m on input `in` (its input tensor's floats) with each way: op by op (unless whole_only),
 * then the whole plan against the reference's whole run (*ret_ref: that arena, the caller's).
 */
static void check_plan(const struct zcp_plan *m, const char *what, const float *in, bool whole_only, float **ret_ref)
{
        const struct zcp_plan_tensor *ti = &m->tensors[m->input.t];
        const size_t nf = m->arena_floats, bytes = nf * 4, nin = (size_t)3 * ti->w * ti->h;
        float *whole = kt_malloc(bytes), *got = kt_malloc(bytes), *want = kt_malloc(bytes);

        memset(whole, 0, bytes);
        memcpy(whole + ti->off, in, nin * 4);
        zcp_ref_plan(m, whole);
        for (int g = ZCP_K_GEMM_FFMA; g < ZCP_K_GEMM_COUNT; g++) {
                struct zcp_k_net *net = net_of(m, (enum zcp_k_gemm)g);
                double wk[ZCP_OP_COUNT] = { 0 }, d;

                if (!whole_only) {
                        memset(got, 0, bytes);
                        memcpy(got + ti->off, in, nin * 4);
                        arena_up(net, got, nf);
                        for (uint32_t i = 0; i < m->op_count; i++) {
                                const struct zcp_plan_op *op = &m->ops[i];
                                const double tol = op->kind == ZCP_OP_CONV || op->kind == ZCP_OP_MEAN ? 1e-4 : 1e-6;
                                memcpy(want, got, bytes);
                                zcp_ref_op(m, i, want);
                                CK(zcp_k_net_ops(net, i, 1, NULL));
                                arena_down(net, got, nf);
                                /* The terms' size from the reference's copy: the arena before op i but for op i's
                                 * output, which op i does not read (an op's input and output never overlap). */
                                d = op_diff(m, i, want, got, want);
                                wk[op->kind] = fmax(wk[op->kind], d);
                                CHECK_MSG(d <= tol, "%s (%s): op %u (%s %s, %s) differs by %.3g", what,
                                          zcp_k_gemm_names[g], i, zcp_op_kind_names[op->kind], op->name,
                                          zcp_k_net_op_kernel(net, i), d);
                        }
                        for (int k = 0; k < ZCP_OP_COUNT; k++)
                                worst[g][k] = fmax(worst[g][k], wk[k]);
                }
                /*
                 * The whole plan at once (the launches back to back, dependent where the device has it) on a
                 * poisoned arena: bit for bit what the ops one by one gave (the kernels sum in a fixed order;
                 * a read of memory no op wrote, or of an op's output before it is complete, would show), and
                 * against the reference's whole run for the record (a random network's head amplifies the
                 * ops' rounding, so that difference is printed, not judged: the detections' contract is,
                 * in check_centernet_frames and test_backend.c).
                 */
                if (!whole_only)
                        memcpy(want, got, bytes);
                CK(cudaMemset(zcp_k_net_arena(net), 0xFF, bytes));
                CK(cudaMemcpy(zcp_k_net_input(net), in, nin * 4, cudaMemcpyHostToDevice));
                CK(zcp_k_net_forward(net, NULL));
                arena_down(net, got, nf);
                if (!whole_only) {
                        struct zcp_plan_view hv[2] = { m->head.scores, m->head.sizes };
                        for (int v = 0; v < (m->head.kind == ZCP_HEAD_CENTERNET ? 2 : 1); v++) {
                                const struct zcp_plan_tensor *t = &m->tensors[hv[v].t];
                                for (size_t q = 0; q < (size_t)t->h * t->w; q++)
                                        for (uint32_t c = 0; c < hv[v].c; c++) {
                                                const size_t e = t->off + q * t->c + hv[v].c0 + c;
                                                CHECK_MSG(f2u(got[e]) == f2u(want[e]), "%s (%s): the whole plan's "
                                                          "head map %d [%zu] = %.9g, op by op %.9g", what,
                                                          zcp_k_gemm_names[g], v, e, got[e], want[e]);
                                        }
                        }
                }
                d = kt_view_diff(m, got, whole, m->head.scores, 1e-3);
                if (m->head.kind == ZCP_HEAD_CENTERNET)
                        d = fmax(d, kt_view_diff(m, got, whole, m->head.sizes, 1e-3));
                CHECK_MSG(isfinite(d), "%s (%s): the head's maps after the whole plan are not finite", what,
                          zcp_k_gemm_names[g]);
                printf("ok plan %-16s %-6s %3u ops%s; head maps against the reference's whole run: %.2g",
                       what, zcp_k_gemm_names[g], m->op_count,
                       whole_only ? " (whole only)" : " op by op, the whole plan bit for bit the same", d);
                if (!whole_only) {
                        printf("; worst per kind:");
                        for (int k = 0; k < ZCP_OP_COUNT; k++)
                                if (wk[k] > 0.0)
                                        printf(" %s %.2g", zcp_op_kind_names[k], wk[k]);
                }
                printf("\n");
                zcp_k_net_free(net);
        }
        free(got);
        free(want);
        if (ret_ref)
                *ret_ref = whole;
        else
                free(whole);
}

/*
 * The gemm tilings (plan.cu measures them at net creation and keeps the fastest): the whole plan
 * with every whole-K convolution at each tiling in turn leaves the arena bit for bit as the net's
 * own choice did, so which tiling a GPU's timing picks cannot change a result.
 */
static void check_tilings(const struct zcp_plan *m, const char *what, const float *in)
{
        const struct zcp_plan_tensor *ti = &m->tensors[m->input.t];
        const size_t nf = m->arena_floats, bytes = nf * 4, nin = (size_t)3 * ti->w * ti->h;
        uint32_t *want = kt_malloc(bytes), *got = kt_malloc(bytes), gemms = 0;

        for (int g = ZCP_K_GEMM_FFMA; g < ZCP_K_GEMM_COUNT; g++) {
                struct zcp_k_net *net = net_of(m, (enum zcp_k_gemm)g);
                for (int t = -1; t < zcp_k_net_tilings(); t++) {
                        if (t >= 0)
                                gemms = zcp_k_net_retile(net, t);
                        CK(cudaMemset(zcp_k_net_arena(net), 0xFF, bytes));
                        CK(cudaMemcpy(zcp_k_net_input(net), in, nin * 4, cudaMemcpyHostToDevice));
                        CK(zcp_k_net_forward(net, NULL));
                        CK(cudaDeviceSynchronize());
                        CK(cudaMemcpy(t < 0 ? want : got, zcp_k_net_arena(net), bytes, cudaMemcpyDeviceToHost));
                        for (size_t e = 0; t >= 0 && e < nf; e++)
                                CHECK_MSG(got[e] == want[e], "%s (%s): tiling %d of %u gemms: arena [%zu] %08x, the "
                                          "net's own tilings %08x", what, zcp_k_gemm_names[g], t, gemms, e, got[e],
                                          want[e]);
                }
                zcp_k_net_free(net);
        }
        printf("ok tilings %-16s %u whole-K gemms at each of %d tilings: the arena bit for bit the same\n", what, gemms,
               zcp_k_net_tilings());
        free(want);
        free(got);
}

/* ------------------------------------------------------------------ heads */

static struct zcp_det_params det_params(const struct zcp_plan *m, float min_score, float nms, uint32_t max_det,
                                        bool half_classes, bool letterbox)
{
        const struct zcp_plan_tensor *ti = &m->tensors[m->input.t];
        struct zcp_det_params p = { .min_score = min_score, .nms_iou = nms, .max_det = max_det };

        for (uint32_t c = 0; c < m->head.classes && c < ZCP_DET_CLASSES_MAX; c++)
                if (!half_classes || c % 2 == 0)
                        p.class_mask[c / 32] |= 1u << (c % 32);
        p.frame_w = 1920.0f;
        p.frame_h = 1080.0f;
        if (letterbox) {   /* a 1920x1080 frame letterboxed into the input: bars above and below */
                const float h = (float)ti->w * 1080.0f / 1920.0f;
                p.off_x = 0.0f;
                p.off_y = floorf(((float)ti->h - h) / 2.0f);
                p.scale_x = p.scale_y = 1920.0f / (float)ti->w;
        } else {
                p.scale_x = 1920.0f / (float)ti->w;
                p.scale_y = 1080.0f / (float)ti->h;
        }
        return p;
}

/*
 * The head of net on the reference arena `ref` (uploaded) against the reference head on it:
 * CENTERNET with several post-processing settings, bit for bit; CLASSIFY top-k.
 */
static void check_heads(const struct zcp_plan *m, const char *what, float *ref)
{
        struct zcp_k_net *net = net_of(m, ZCP_K_GEMM_AUTO);
        struct zcp_result *stage = NULL, *pub_h = NULL, *pub_d = NULL;
        const size_t nf = m->arena_floats;
        uint32_t checked = 0, dets = 0;

        CK(cudaMalloc((void **)&stage, sizeof(*stage)));
        CK(cudaHostAlloc((void **)&pub_h, sizeof(*pub_h), cudaHostAllocMapped));
        CK(cudaHostGetDevicePointer((void **)&pub_d, pub_h, 0));
        if (m->head.kind == ZCP_HEAD_CENTERNET) {
                const struct zcp_plan_tensor *th = &m->tensors[m->head.scores.t];
                struct zcp_detection *cand = kt_malloc(sizeof(*cand) * m->head.candidates);
                struct zcp_det_params ps[5];

                ps[0] = det_params(m, 0.3f, 0.5f, 20, false, false);
                ps[1] = det_params(m, 0.0f, 0.5f, 100, true, true);
                ps[2] = det_params(m, -INFINITY, 2.0f, 100, false, false);
                ps[3] = det_params(m, 0.5f, 0.3f, 7, false, true);
                ps[4] = det_params(m, 0.3f, 0.0f, 100, false, false);
                /* maps as they are, then quantized to eighths (many ties), then constant (all ties) */
                for (int map = 0; map < 3; map++) {
                        if (map)
                                for (size_t q = 0; q < (size_t)th->h * th->w; q++)
                                        for (uint32_t c = 0; c < m->head.classes; c++) {
                                                float *v = &ref[th->off + q * th->c + m->head.scores.c0 + c];
                                                *v = map == 1 ? floorf(*v * 8.0f) / 8.0f : 0.5f;
                                        }
                        arena_up(net, ref, nf);
                        uint32_t n = zcp_ref_centernet(m, ref, cand);
                        for (size_t s = 0; s < sizeof(ps) / sizeof(ps[0]); s++) {
                                struct zcp_result want;
                                memset(&want, 0, sizeof(want));
                                want.det_count = zcp_detect_post(cand, n, &ps[s], want.det);
                                CK(zcp_k_stage_init(stage));
                                memset(pub_h, 0xFF, sizeof(*pub_h));
                                CK(zcp_k_net_head(net, 0, &ps[s], stage, pub_d, NULL));
                                CK(cudaDeviceSynchronize());
                                CHECK(pub_h->valid == 1 && pub_h->topk_count == 0 && pub_h->bbox[0] == -1);
                                CHECK_MSG(pub_h->det_count == want.det_count, "%s map %d settings %zu: %u detections, "
                                          "reference %u", what, map, s, pub_h->det_count, want.det_count);
                                for (uint32_t j = 0; j < want.det_count; j++) {
                                        const struct zcp_detection *a = &pub_h->det[j], *b = &want.det[j];
                                        bool same = a->cls == b->cls && f2u(a->score) == f2u(b->score);
                                        for (int k = 0; k < 4; k++)
                                                same = same && f2u(a->box[k]) == f2u(b->box[k]);
                                        CHECK_MSG(same, "%s map %d settings %zu: detection %u: class %u %.9g "
                                                  "[%.9g %.9g %.9g %.9g], reference class %u %.9g [%.9g %.9g %.9g %.9g]",
                                                  what, map, s, j, a->cls, a->score, a->box[0], a->box[1], a->box[2],
                                                  a->box[3], b->cls, b->score, b->box[0], b->box[1], b->box[2], b->box[3]);
                                }
                                checked++;
                                dets += want.det_count;
                        }
                }
                free(cand);
                printf("ok heads %-16s centernet: %u runs (5 settings x real, quantized and constant maps), %u "
                       "detections bit-identical to the reference's decode + post\n", what, checked, dets);
        } else {
                const uint32_t classes = m->head.classes;
                float *probs = kt_malloc(classes * 4);
                static const uint32_t ks[] = { 1, 5, 16, 40 };
                zcp_ref_classify(m, ref, probs);
                arena_up(net, ref, nf);
                for (size_t s = 0; s < sizeof(ks) / sizeof(ks[0]); s++) {
                        uint32_t k = ks[s] < classes ? ks[s] : classes, rc[ZCP_TOPK_MAX];
                        float rp[ZCP_TOPK_MAX];
                        k = k < ZCP_TOPK_MAX ? k : ZCP_TOPK_MAX;
                        zcp_ref_topk(probs, classes, k, rc, rp);
                        CK(zcp_k_stage_init(stage));
                        memset(pub_h, 0xFF, sizeof(*pub_h));
                        CK(zcp_k_net_head(net, ks[s], NULL, stage, pub_d, NULL));
                        CK(cudaDeviceSynchronize());
                        CHECK(pub_h->valid == 1 && pub_h->det_count == 0 && pub_h->topk_count == k);
                        for (uint32_t j = 0; j < k; j++) {
                                const uint32_t gc = pub_h->topk_class[j];
                                CHECK_MSG(gc < classes && fabs(pub_h->topk_prob[j] - rp[j]) <= 1e-5 * rp[j] + 1e-30 &&
                                                  fabs(probs[gc] - rp[j]) <= 1e-5 * rp[j] + 1e-30,
                                          "%s top-%u rank %u: class %u %.9g, reference class %u %.9g", what, k, j,
                                          gc, pub_h->topk_prob[j], rc[j], rp[j]);
                        }
                        checked++;
                }
                free(probs);
                printf("ok heads %-16s classify: top-k of %u classes for k 1, 5, 16, 40: the reference's\n", what,
                       classes);
        }
        zcp_k_net_free(net);
        cudaFree(stage);
        cudaFreeHost(pub_h);
}

/* ------------------------------------------------------ CenterNet on frames */

/* CenterNet's input made by the reference preprocess from each sample frame; GPU plan + head against the reference. */
static void check_centernet_frames(const struct zcp_plan *m, uint8_t *const *frames, uint32_t n, uint32_t W, uint32_t H)
{
        const struct zcp_plan_tensor *ti = &m->tensors[m->input.t];
        struct zcp_preprocess_params pp = { .width = W, .height = H, .in_w = ti->w, .in_h = ti->h, .cell = 16,
                                            .nhwc = true, .byte_pixels = true, .std = { 1.0f, 1.0f, 1.0f } };
        struct zcp_k_net *net = net_of(m, ZCP_K_GEMM_AUTO);
        float *arena = kt_malloc(m->arena_floats * 4);
        struct zcp_detection *cand = kt_malloc(sizeof(*cand) * m->head.candidates);
        struct zcp_result *stage = NULL, *pub_h = NULL, *pub_d = NULL, want;
        struct zcp_det_params dp = det_params(m, 0.3f, 0.5f, 20, false, false);
        uint32_t total = 0, matched = 0;

        dp.scale_x = (float)W / (float)ti->w;
        dp.scale_y = (float)H / (float)ti->h;
        dp.frame_w = (float)W;
        dp.frame_h = (float)H;
        CK(cudaMalloc((void **)&stage, sizeof(*stage)));
        CK(cudaHostAlloc((void **)&pub_h, sizeof(*pub_h), cudaHostAllocMapped));
        CK(cudaHostGetDevicePointer((void **)&pub_d, pub_h, 0));
        for (uint32_t f = 0; f < n; f++) {
                char what[64];
                memset(arena, 0, m->arena_floats * 4);
                zcp_ref_preprocess(frames[f], &pp, arena + ti->off, NULL);
                CK(cudaMemset(zcp_k_net_arena(net), 0xFF, m->arena_floats * 4));
                CK(cudaMemcpy(zcp_k_net_input(net), arena + ti->off, (size_t)ti->w * ti->h * 12, cudaMemcpyHostToDevice));
                zcp_ref_plan(m, arena);
                memset(&want, 0, sizeof(want));
                want.det_count = zcp_detect_post(cand, zcp_ref_centernet(m, arena, cand), &dp, want.det);
                CK(zcp_k_stage_init(stage));
                memset(pub_h, 0xFF, sizeof(*pub_h));
                CK(zcp_k_net_forward(net, NULL));
                CK(zcp_k_net_head(net, 0, &dp, stage, pub_d, NULL));
                CK(cudaDeviceSynchronize());
                CHECK(pub_h->valid == 1);
                snprintf(what, sizeof(what), "centernet sample frame %u", f);
                matched += kt_match_dets(pub_h, &want, dp.min_score, dp.max_det, what);
                total += want.det_count;
        }
        printf("ok centernet on %u sample frames (%ux%u): %u of %u reference detections matched (class, IoU >= 0.95, "
               "score within 1e-3)\n", n, W, H, matched, total);
        CHECK(total > 0);
        zcp_k_net_free(net);
        cudaFree(stage);
        cudaFreeHost(pub_h);
        free(arena);
        free(cand);
}

int main(void)
{
        static const struct {
                uint32_t convs, chans[6], strides[5], classes, iw, ih;
        } zshapes[] = {
                { 3, { 3, 5, 7, 4 }, { 1, 3, 2 }, 10, 37, 23 },
                { 2, { 3, 24, 40 }, { 1, 2 }, 17, 31, 45 },
                { 5, { 3, 8, 16, 33, 64, 100 }, { 2, 1, 2, 2, 3 }, 50, 128, 96 },
        };
        static const uint32_t rsizes[][2] = { { 64, 48 }, { 67, 45 }, { 16, 16 }, { 130, 98 }, { 256, 200 } };
        const char *env = getenv("ZCP_TEST_SEED");
        uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        float *in = NULL, *ref = NULL;
        struct zcp_plan *cn, *def;
        uint8_t *sample[8];
        uint32_t ns, sw = 0, sh = 0;

        setvbuf(stdout, NULL, _IOLBF, 0);
        kt_need_gpu();
        zcp_log_set_level(ZCP_LOG_WARN);
        quick = getenv("ZCP_KTEST_QUICK") != NULL;
        kt_seed(seed);
        printf("seed %" PRIu64 " (ZCP_TEST_SEED=%" PRIu64 " replays it)\n", seed, seed);
        in = kt_malloc(sizeof(float) * 3 * 512 * 512);
        for (size_t i = 0; i < (size_t)3 * 512 * 512; i++)
                in[i] = (kt_unit() + 1.0f) * 127.5f;

        for (size_t s = 0; s < sizeof(rsizes) / sizeof(rsizes[0]) - (quick ? 2 : 0); s++) {
                struct zcp_plan *m = kt_random_plan(rsizes[s][0], rsizes[s][1], s == 1 ? 90 : 7);
                char what[32];
                snprintf(what, sizeof(what), "random %ux%u", rsizes[s][0], rsizes[s][1]);
                check_plan(m, what, in, false, &ref);
                check_heads(m, what, ref);
                check_tilings(m, what, in);
                free(ref);
                zcp_plan_free(m);
        }
        for (size_t s = 0; s < sizeof(zshapes) / sizeof(zshapes[0]); s++) {
                struct zcp_plan *m = kt_zcnet_plan(zshapes[s].chans, zshapes[s].strides, zshapes[s].convs,
                                                   zshapes[s].classes, zshapes[s].iw, zshapes[s].ih);
                check_plan(m, "zcnet random", in, false, &ref);
                check_heads(m, "zcnet random", ref);
                free(ref);
                zcp_plan_free(m);
        }
        for (uint32_t s = 0; s < (quick ? 6u : 24u); s++) {
                /* branches and joins of every shape: the two lanes side by side (the whole run) */
                struct zcp_plan *m = kt_random_dag(8 + s * 2);
                char what[32];
                snprintf(what, sizeof(what), "graph %u", s);
                check_plan(m, what, in, false, &ref);
                free(ref);
                zcp_plan_free(m);
        }
        def = kt_default_zcnet(224, 224);
        CHECK(def);
        check_plan(def, "zcnet default", in, quick, &ref);
        check_heads(def, "zcnet default", ref);
        free(ref);
        zcp_plan_free(def);

        cn = kt_load_model("centernet/model.json");
        CHECK(cn);
        check_plan(cn, "centernet", in, quick, &ref);
        check_heads(cn, "centernet", ref);
        check_tilings(cn, "centernet", in);
        free(ref);
        ns = quick ? 0 : kt_sample_frames(sample, 8, &sw, &sh);
        if (ns) {
                check_centernet_frames(cn, sample, ns, sw, sh);
                for (uint32_t f = 0; f < ns; f++)
                        free(sample[f]);
        }
        zcp_plan_free(cn);

        printf("worst op difference (conv, mean: over max(|ref|, 0.1 x terms); others: relative):\n");
        for (int g = ZCP_K_GEMM_FFMA; g < ZCP_K_GEMM_COUNT; g++) {
                printf("  %-6s", zcp_k_gemm_names[g]);
                for (int k = 0; k < ZCP_OP_COUNT; k++)
                        printf(" %s %.2g", zcp_op_kind_names[k], worst[g][k]);
                printf("\n");
        }
        free(in);
        printf("all plan checks passed\n");
        return 0;
}
