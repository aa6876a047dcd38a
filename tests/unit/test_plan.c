/* SPDX-License-Identifier: MIT */
/*
 * Model files to plans (src/model/): the shipped CenterNet and small TF.js graph models the test
 * writes itself (float32, float16 and uint8-quantized shards) run through the C reference and
 * checked against values worked out by hand; and every kind of refusal, each naming the file,
 * the node and the op; streams that start together share one plan. The whole CenterNet against
 * TensorFlow.js is the integration test tfjs-oracle.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "core/config.h"
#include "infer/detect.h"
#include "infer/reference.h"
#include "model/model.h"
#include "planutil.h"

static char dir[256];

static void put(const char *name, const void *data, size_t len)
{
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "wb");
        CHECK(f != NULL);
        CHECK(fwrite(data, 1, len, f) == len);
        fclose(f);
}

static char *path_of(const char *name)
{
        static char path[512];

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        return path;
}

/*
 * A classifier: images [1,4,4,3] -> Mean over H, W -> 1x1 conv 3 -> 2 with bias and Relu
 * -> Reshape [1,2] -> Softmax. weight_json is the manifest's weights list (the conv filter
 * "w" [1,1,3,2], "b" [2], then the int32 consts), extra_nodes anything added to the graph.
 */
static void write_model(const char *json_name, const char *shard, const char *weights_json,
                        const char *extra_nodes, const char *conv_attr)
{
        char text[8192];
        int n = snprintf(text, sizeof(text),
                "{\"format\":\"graph-model\",\"generatedBy\":\"test\",\"convertedBy\":\"test_plan\","
                "\"modelTopology\":{\"node\":["
                "{\"name\":\"images\",\"op\":\"Placeholder\",\"attr\":{\"dtype\":{\"type\":\"DT_FLOAT\"},"
                "\"shape\":{\"shape\":{\"dim\":[{\"size\":\"1\"},{\"size\":\"4\"},{\"size\":\"4\"},{\"size\":\"3\"}]}}}},"
                "{\"name\":\"w\",\"op\":\"Const\"},{\"name\":\"b\",\"op\":\"Const\"},"
                "{\"name\":\"axes\",\"op\":\"Const\"},{\"name\":\"shape\",\"op\":\"Const\"},"
                "{\"name\":\"mean\",\"op\":\"Mean\",\"input\":[\"images\",\"axes\"],"
                "\"attr\":{\"keep_dims\":{\"b\":true}}},"
                "{\"name\":\"fc\",\"op\":\"_FusedConv2D\",\"input\":[\"mean\",\"w\",\"b\"],\"attr\":{"
                "\"strides\":{\"list\":{\"i\":[\"1\",\"1\",\"1\",\"1\"]}},\"padding\":{\"s\":\"U0FNRQ==\"},"
                "\"num_args\":{\"i\":\"1\"},\"fused_ops\":{\"list\":{\"s\":[\"Qmlhc0FkZA==\",\"UmVsdQ==\"]}}%s}},"
                "{\"name\":\"flat\",\"op\":\"Reshape\",\"input\":[\"fc\",\"shape\"]},"
                "{\"name\":\"probs\",\"op\":\"Softmax\",\"input\":[\"flat\"]}%s"
                "]},\"weightsManifest\":[{\"paths\":[\"%s\"],\"weights\":[%s]}]}",
                conv_attr, extra_nodes, shard, weights_json);
        CHECK(n > 0 && (size_t)n < sizeof(text));
        put(json_name, text, (size_t)n);
}

/* w = [[0.5, -1], [2, 0.25], [-0.5, 1]] ([in][out]), b = [0.25, -0.5]: exact in every encoding. */
static const float W[6] = { 0.5f, -1.0f, 2.0f, 0.25f, -0.5f, 1.0f }, B[2] = { 0.25f, -0.5f };
static const char *const CONSTS = "{\"name\":\"axes\",\"shape\":[2],\"dtype\":\"int32\"},"
                                  "{\"name\":\"shape\",\"shape\":[2],\"dtype\":\"int32\"}";
static const int32_t CONST_VALS[4] = { 1, 2, 1, 2 };

static void write_f32(const char *json_name, const char *extra, const char *attr)
{
        uint8_t buf[64];
        char wj[512];

        memcpy(buf, W, 24);
        memcpy(buf + 24, B, 8);
        memcpy(buf + 32, CONST_VALS, 16);
        put("f32.bin", buf, 48);
        snprintf(wj, sizeof(wj),
                 "{\"name\":\"w\",\"shape\":[1,1,3,2],\"dtype\":\"float32\"},"
                 "{\"name\":\"b\",\"shape\":[2],\"dtype\":\"float32\"},%s", CONSTS);
        write_model(json_name, "f32.bin", wj, extra, attr);
}

static uint16_t to_half(float f)
{
        /* the values above only: normal, exactly representable */
        uint32_t u;
        memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) == 0)
                return (uint16_t)(u >> 16);
        return (uint16_t)((u >> 16 & 0x8000) | (((u >> 23 & 0xff) - 112) << 10) | (u >> 13 & 0x3ff));
}

/* The probabilities of the classifier for one input, worked out in the plan's float order. */
static void expect_probs(const float *img, float *ret)
{
        float m[3], logit[2], mx, s;

        for (int c = 0; c < 3; c++) {
                m[c] = 0.0f;
                for (int px = 0; px < 16; px++)
                        m[c] = m[c] + img[px * 3 + c] / 16.0f;
        }
        for (int o = 0; o < 2; o++) {
                float acc = 0.0f;
                for (int i = 0; i < 3; i++)
                        acc = acc + m[i] * W[i * 2 + o];
                acc = acc + B[o];
                logit[o] = acc > 0.0f ? acc : 0.0f;
        }
        mx = fmaxf(logit[0], logit[1]);
        ret[0] = expf(logit[0] - mx);
        ret[1] = expf(logit[1] - mx);
        s = ret[0] + ret[1];
        ret[0] = ret[0] / s;
        ret[1] = ret[1] / s;
}

static void run_classifier(const char *name)
{
        struct zcp_plan *p = NULL;
        char err[1024];
        float img[48], want[2], got[2], *arena;

        if (zcp_model_load(path_of(name), NULL, &p, err, sizeof(err)) < 0) {
                fprintf(stderr, "%s: %s\n", name, err);
                CHECK(0);
        }
        CHECK(p->head.kind == ZCP_HEAD_CLASSIFY && p->head.classes == 2);
        CHECK(p->input.pixels == ZCP_PIXELS_BYTE);
        CHECK(p->tensors[p->input.t].h == 4 && p->tensors[p->input.t].w == 4);
        CHECK(p->op_count == 2 && p->ops[1].act.kind == ZCP_ACT_RELU);
        arena = calloc(p->arena_floats, sizeof(float));
        CHECK(arena != NULL);
        for (int i = 0; i < 48; i++)
                img[i] = (float)((i * 37) % 256);
        memcpy(arena + p->tensors[p->input.t].off, img, sizeof(img));
        zcp_ref_plan(p, arena);
        zcp_ref_classify(p, arena, got);
        expect_probs(img, want);
        CHECK(got[0] == want[0] && got[1] == want[1]);
        free(arena);
        zcp_plan_free(p);
}

/* Loads name and requires a refusal whose message holds every one of the strings. */
static void refused(const char *name, int want_r, const char *s1, const char *s2)
{
        struct zcp_plan *p = NULL;
        char err[1024] = "";
        int r = zcp_model_load(path_of(name), NULL, &p, err, sizeof(err));

        if (r != want_r || !strstr(err, s1) || (s2 && !strstr(err, s2))) {
                fprintf(stderr, "%s: got %d '%s', want %d with '%s' '%s'\n", name, r, err, want_r, s1,
                        s2 ? s2 : "");
                CHECK(0);
        }
        CHECK(p == NULL);
        CHECK(strchr(err, '\n') == NULL);
}

static void test_encodings(void)
{
        uint8_t buf[64];
        char wj[1024];

        write_f32("f32.json", "", "");
        run_classifier("f32.json");

        /* float16: 2 bytes a value */
        for (int i = 0; i < 6; i++) {
                uint16_t h = to_half(W[i]);
                memcpy(buf + 2 * i, &h, 2);
        }
        for (int i = 0; i < 2; i++) {
                uint16_t h = to_half(B[i]);
                memcpy(buf + 12 + 2 * i, &h, 2);
        }
        memcpy(buf + 16, CONST_VALS, 16);
        put("f16.bin", buf, 32);
        snprintf(wj, sizeof(wj),
                 "{\"name\":\"w\",\"shape\":[1,1,3,2],\"dtype\":\"float32\",\"quantization\":{\"dtype\":\"float16\"}},"
                 "{\"name\":\"b\",\"shape\":[2],\"dtype\":\"float32\",\"quantization\":{\"dtype\":\"float16\"}},%s",
                 CONSTS);
        write_model("f16.json", "f16.bin", wj, "", "");
        run_classifier("f16.json");

        /* uint8: v = q * scale + min with scale 0.25, min -1 */
        for (int i = 0; i < 6; i++)
                buf[i] = (uint8_t)((W[i] + 1.0f) / 0.25f);
        for (int i = 0; i < 2; i++)
                buf[6 + i] = (uint8_t)((B[i] + 1.0f) / 0.25f);
        memcpy(buf + 8, CONST_VALS, 16);
        put("u8.bin", buf, 24);
        snprintf(wj, sizeof(wj),
                 "{\"name\":\"w\",\"shape\":[1,1,3,2],\"dtype\":\"float32\","
                 "\"quantization\":{\"dtype\":\"uint8\",\"scale\":0.25,\"min\":-1}},"
                 "{\"name\":\"b\",\"shape\":[2],\"dtype\":\"float32\","
                 "\"quantization\":{\"dtype\":\"uint8\",\"scale\":0.25,\"min\":-1}},%s",
                 CONSTS);
        write_model("u8.json", "u8.bin", wj, "", "");
        run_classifier("u8.json");
}

static void test_refusals(void)
{
        char wj[512];

        /* an op outside the set, anywhere in the graph */
        write_f32("transpose.json", ",{\"name\":\"tr\",\"op\":\"Transpose\",\"input\":[\"images\",\"axes\"]}", "");
        refused("transpose.json", -EINVAL, "node 'tr' (Transpose)", "op Transpose is not supported");
        /* an attribute outside the set */
        write_f32("dilated.json", "", ",\"dilations\":{\"list\":{\"i\":[\"1\",\"2\",\"2\",\"1\"]}}");
        refused("dilated.json", -EINVAL, "node 'fc' (_FusedConv2D)", "dilations");
        write_f32("nchw.json", "", ",\"data_format\":{\"s\":\"TkNIVw==\"}");
        refused("nchw.json", -EINVAL, "node 'fc' (_FusedConv2D)", "data_format NCHW");
        /* a shard shorter than its weights */
        put("short.bin", W, 20);
        snprintf(wj, sizeof(wj),
                 "{\"name\":\"w\",\"shape\":[1,1,3,2],\"dtype\":\"float32\"},"
                 "{\"name\":\"b\",\"shape\":[2],\"dtype\":\"float32\"},%s", CONSTS);
        write_model("short.json", "short.bin", wj, "", "");
        refused("short.json", -EINVAL, "short.json", "truncated");
        /* a weight that is not a number: named, not left to the plan's anonymous check */
        {
                uint8_t nb[48];
                const uint16_t nan16 = 0x7e00;
                memcpy(nb, W, 24);
                memcpy(nb + 24, B, 8);
                memcpy(nb + 32, CONST_VALS, 16);
                memcpy(nb + 12, &(const float){ INFINITY }, 4);
                put("inf.bin", nb, 48);
                write_model("inf.json", "inf.bin", wj, "", "");
                refused("inf.json", -EINVAL, "weight 'w': value 3 of 6 is not finite (inf)", "weights are damaged");
                for (int i = 0; i < 6; i++) {
                        uint16_t h = to_half(W[i]);
                        memcpy(nb + 2 * i, &h, 2);
                }
                for (int i = 0; i < 2; i++)
                        memcpy(nb + 12 + 2 * i, i == 1 ? &nan16 : &(uint16_t){ to_half(B[i]) }, 2);
                memcpy(nb + 16, CONST_VALS, 16);
                put("nan16.bin", nb, 32);
                char hj[1024];
                snprintf(hj, sizeof(hj),
                         "{\"name\":\"w\",\"shape\":[1,1,3,2],\"dtype\":\"float32\","
                         "\"quantization\":{\"dtype\":\"float16\"}},"
                         "{\"name\":\"b\",\"shape\":[2],\"dtype\":\"float32\","
                         "\"quantization\":{\"dtype\":\"float16\"}},%s",
                         CONSTS);
                write_model("nan16.json", "nan16.bin", hj, "", "");
                refused("nan16.json", -EINVAL, "weight 'b': value 1 of 2 is not finite (nan)", NULL);
        }
        /* a shard that is not there */
        write_model("noshard.json", "missing.bin", wj, "", "");
        refused("noshard.json", -ENOENT, "missing.bin", "cannot open");
        /* a shard path outside the model's folder */
        write_model("escape.json", "../f32.bin", wj, "", "");
        refused("escape.json", -EINVAL, "../f32.bin", "refused");
        /* not a graph model, not JSON */
        put("layers.json", "{\"format\":\"layers-model\",\"modelTopology\":{}}", 44);
        refused("layers.json", -EINVAL, "not a TensorFlow.js graph model", "layers-model");
        put("broken.json", "{\"format\":", 10);
        refused("broken.json", -EINVAL, "broken.json", "line 1");
        /* no head */
        write_f32("nohead.json", "", "");
        {
                /* rename the Softmax away: a graph whose output nobody understands */
                FILE *f = fopen(path_of("nohead.json"), "r+");
                char text[8192];
                size_t n;
                CHECK(f != NULL);
                n = fread(text, 1, sizeof(text) - 1, f);
                fclose(f);
                text[n] = 0;
                char *s = strstr(text, "\"op\":\"Softmax\"");
                CHECK(s != NULL);
                memcpy(s, "\"op\":\"Sigmoid\"", 14);
                put("nohead.json", text, n);
        }
        refused("nohead.json", -EINVAL, "no head zcpipe understands", NULL);
        /* a missing file */
        refused("absent.json", -ENOENT, "absent.json", "cannot open");
        /* an input size the model does not take: the message gives the one it does */
        {
                struct zcp_model_opts o = { .in_w = 4, .in_h = 8 };
                struct zcp_plan *p = NULL;
                char err[1024] = "";
                CHECK(zcp_model_load(path_of("f32.json"), &o, &p, err, sizeof(err)) == -EINVAL && p == NULL);
                CHECK(strstr(err, "node 'images' (Placeholder): the model's input height is fixed at 4; "
                                  "model.input_height must be 0 or 4") != NULL);
                o = (struct zcp_model_opts){ .in_w = 4, .in_h = 4 };
                CHECK(zcp_model_load(path_of("f32.json"), &o, &p, err, sizeof(err)) == 0 && p != NULL);
                zcp_plan_free(p);
        }
}

static void test_centernet(void)
{
        const char *root = getenv("ZCP_SOURCE_ROOT");
        char path[1024], err[1024];
        struct zcp_plan *p = NULL;

        snprintf(path, sizeof(path), "%s/models/centernet/model.json", root ? root : ".");
        if (zcp_model_load(path, NULL, &p, err, sizeof(err)) < 0) {
                fprintf(stderr, "%s\n", err);
                CHECK(0);
        }
        CHECK(p->head.kind == ZCP_HEAD_CENTERNET);
        CHECK(p->head.classes == 80 && p->head.candidates == 100 && p->head.stride == 4.0f);
        CHECK(p->tensors[p->input.t].h == 512 && p->tensors[p->input.t].w == 512);
        CHECK(p->tensors[p->head.scores.t].h == 128 && p->tensors[p->head.sizes.t].w == 128);
        CHECK(p->head.scores.c == 80 && p->head.sizes.c == 4);
        CHECK(p->macs > 1200000000ull && p->macs < 1400000000ull);
        CHECK(zcp_plan_check(p, err, sizeof(err)) == 0);
        CHECK(p->arena_floats * sizeof(float) < (64u << 20));
        /* the fusions: no standalone activation or elementwise op is left in this graph */
        for (uint32_t i = 0; i < p->op_count; i++)
                CHECK(p->ops[i].kind != ZCP_OP_ELTWISE && p->ops[i].kind != ZCP_OP_COPY);
        snprintf(path, sizeof(path), "%s/models/centernet/labels.txt", root ? root : ".");
        CHECK(zcp_model_load_labels(p, path, err, sizeof(err)) == 0);
        CHECK(strcmp(p->labels[0], "person") == 0 && strcmp(p->labels[79], "toothbrush") == 0);
        zcp_plan_free(p);
}

/* A head key the model's kind ignores: named, with what the model reports instead; the other kind's keys are not. */
static void test_unused_keys(void)
{
        const char *root = getenv("ZCP_SOURCE_ROOT");
        struct zcp_model_config mc = { 0 };
        struct zcp_plan *det = NULL, *cls = NULL;
        char err[512], msg[512];

        snprintf(mc.path, sizeof(mc.path), "%s/models/centernet/model.json", root ? root : ".");
        CHECK(zcp_model_load(mc.path, NULL, &det, err, sizeof(err)) == 0);
        write_f32("keys.json", "", "");
        CHECK(zcp_model_load(path_of("keys.json"), NULL, &cls, err, sizeof(err)) == 0);
        CHECK(cls->head.kind == ZCP_HEAD_CLASSIFY && det->head.kind == ZCP_HEAD_CENTERNET);

        mc.head_keys = ZCP_MKEY_MIN_SCORE | ZCP_MKEY_NMS_IOU | ZCP_MKEY_MAX_DETECTIONS | ZCP_MKEY_CLASSES;
        CHECK(zcp_model_unused_keys(&mc, det, msg, sizeof(msg)) == 0 && msg[0] == '\0');
        mc.head_keys |= ZCP_MKEY_TOP_K;
        CHECK(zcp_model_unused_keys(&mc, det, msg, sizeof(msg)) == 1);
        CHECK_MSG(strstr(msg, "model.top_k is ignored: ") == msg && strstr(msg, "centernet/model.json is a detector") &&
                          strstr(msg, "model.max_detections"),
                  "%s", msg);
        snprintf(mc.path, sizeof(mc.path), "%s", path_of("keys.json"));
        CHECK(zcp_model_unused_keys(&mc, cls, msg, sizeof(msg)) == 4);
        CHECK_MSG(strstr(msg, "model.min_score, model.nms_iou, model.max_detections, model.classes are ignored: ") ==
                                  msg &&
                          strstr(msg, "keys.json is a classifier, it reports its model.top_k"),
                  "%s", msg);
        mc.head_keys = ZCP_MKEY_TOP_K;
        CHECK(zcp_model_unused_keys(&mc, cls, msg, sizeof(msg)) == 0 && msg[0] == '\0');
        /* a message cut short by its buffer stays a string */
        mc.head_keys = ZCP_MKEY_MIN_SCORE | ZCP_MKEY_CLASSES;
        CHECK(zcp_model_unused_keys(&mc, cls, msg, 12) >= 1 && strlen(msg) == 11);
        zcp_plan_free(det);
        zcp_plan_free(cls);
}

/* Streams that start together with one model share one plan, however their first loads interleave. */
enum { SHARERS = 4 };

struct sharer {
        pthread_barrier_t *start;
        const struct zcp_model_config *mc;
        const struct zcp_plan *plan;
        int r;
};

static void *share(void *arg)
{
        struct sharer *s = arg;
        char err[512];

        pthread_barrier_wait(s->start);
        s->r = zcp_model_acquire(s->mc, &s->plan, err, sizeof(err));
        return NULL;
}

static void test_shared(void)
{
        const char *root = getenv("ZCP_SOURCE_ROOT");
        struct zcp_model_config mc = { 0 };
        struct sharer s[SHARERS];
        pthread_t th[SHARERS];
        pthread_barrier_t start;
        const struct zcp_plan *again = NULL;
        char err[512];

        snprintf(mc.path, sizeof(mc.path), "%s/models/centernet/model.json", root ? root : ".");
        CHECK(pthread_barrier_init(&start, NULL, SHARERS) == 0);
        for (int i = 0; i < SHARERS; i++) {
                s[i] = (struct sharer){ .start = &start, .mc = &mc };
                CHECK(pthread_create(&th[i], NULL, share, &s[i]) == 0);
        }
        for (int i = 0; i < SHARERS; i++)
                CHECK(pthread_join(th[i], NULL) == 0);
        pthread_barrier_destroy(&start);
        for (int i = 0; i < SHARERS; i++)
                CHECK_MSG(s[i].r == 0 && s[i].plan == s[0].plan, "caller %d: r %d, plan %p, the first's %p", i, s[i].r,
                          (const void *)s[i].plan, (const void *)s[0].plan);
        /* one more caller shares it too; once all have let go, the next loads afresh */
        CHECK(zcp_model_acquire(&mc, &again, err, sizeof(err)) == 0 && again == s[0].plan);
        zcp_model_release(again);
        for (int i = 0; i < SHARERS; i++)
                zcp_model_release(s[i].plan);
        CHECK(zcp_model_acquire(&mc, &again, err, sizeof(err)) == 0 && again != NULL);
        zcp_model_release(again);
}

/* Whether two views share a float: one tensor's overlapping channels, or two tensors' ranges of the arena. */
static bool views_meet(const struct zcp_plan *p, struct zcp_plan_view a, struct zcp_plan_view b)
{
        const struct zcp_plan_tensor *x = &p->tensors[a.t], *y = &p->tensors[b.t];

        if (a.t == b.t)
                return a.c0 < b.c0 + b.c && b.c0 < a.c0 + a.c;
        return x->off < y->off + (size_t)y->h * y->w * y->c && y->off < x->off + (size_t)x->h * x->w * x->c;
}

/* The views an op reads into r (how many), the one it writes in *w. */
static uint32_t op_views(const struct zcp_plan_op *op, struct zcp_plan_view r[4], struct zcp_plan_view *w)
{
        uint32_t n = 0;

        r[n++] = op->in;
        if (op->kind == ZCP_OP_CONV && op->u.conv.has_scale)
                r[n++] = op->u.conv.scale;
        if (op->kind == ZCP_OP_CONV && op->u.conv.has_residual)
                r[n++] = op->u.conv.residual;
        if (op->kind == ZCP_OP_ELTWISE && op->u.elt.bcast != ZCP_BCAST_SCALAR)
                r[n++] = op->u.elt.b;
        *w = op->out;
        return n;
}

/*
 * The two-lane schedule (model/plan.h) against the plan's meaning, op after op, worked out
 * apart from zcp_plan_layout: "a finishes before b starts" is what the lanes give (each lane in
 * order, op b after op `after - 1` of the other lane, and what follows from those); any two ops
 * that touch a float, one of them writing it, must be so ordered, the earlier first: otherwise a
 * backend running the lanes side by side could read a value not yet written, or overwrite one
 * still to be read. Returns the ops of lane 1.
 */
static uint32_t check_schedule(const struct zcp_plan *p, const char *what)
{
        const uint32_t n = p->op_count;
        bool *before = calloc((size_t)n * n + 1, 1);   /* before[a * n + b] */
        uint32_t side = 0;

        CHECK(before);
        for (uint32_t b = 0; b < n; b++) {
                const struct zcp_plan_op *ob = &p->ops[b];
                uint32_t prev = UINT32_MAX;
                CHECK_MSG(ob->lane <= 1 && ob->after <= b, "%s: op %u: lane %u after %u", what, b, ob->lane, ob->after);
                side += ob->lane;
                for (uint32_t a = 0; a < b; a++)
                        if (p->ops[a].lane == ob->lane)
                                prev = a;
                for (uint32_t a = 0; a < b; a++) {
                        bool x = a == prev || (prev != UINT32_MAX && before[(size_t)a * n + prev]);
                        if (ob->after)
                                x = x || a == ob->after - 1 || before[(size_t)a * n + ob->after - 1];
                        before[(size_t)a * n + b] = x;
                }
        }
        for (uint32_t b = 0; b < n; b++)
                for (uint32_t a = 0; a < b; a++) {
                        struct zcp_plan_view ra[4], rb[4], wa, wb;
                        const uint32_t na = op_views(&p->ops[a], ra, &wa), nb = op_views(&p->ops[b], rb, &wb);
                        bool meet = views_meet(p, wa, wb);
                        for (uint32_t k = 0; k < nb; k++)
                                meet = meet || views_meet(p, wa, rb[k]);
                        for (uint32_t k = 0; k < na; k++)
                                meet = meet || views_meet(p, ra[k], wb);
                        CHECK_MSG(!meet || before[(size_t)a * n + b],
                                  "%s: ops %u (%s, lane %u) and %u (%s, lane %u) touch the same floats and may run "
                                  "at once", what, a, p->ops[a].name, p->ops[a].lane, b, p->ops[b].name, p->ops[b].lane);
                }
        free(before);
        return side;
}

/* The schedule of the shipped detector, of random plans and of random graphs of every shape. */
static void test_schedule(void)
{
        const char *root = getenv("ZCP_SOURCE_ROOT");
        char path[1024], err[1024];
        struct zcp_plan *p = NULL;
        uint32_t side, with_side = 0;

        snprintf(path, sizeof(path), "%s/models/centernet/model.json", root ? root : ".");
        CHECK_MSG(zcp_model_load(path, NULL, &p, err, sizeof(err)) == 0, "%s", err);
        /* its lateral branches and the second head beside the backbone */
        side = check_schedule(p, "centernet");
        CHECK_MSG(side >= 10 && side < p->op_count / 4, "centernet: %u ops of %u in lane 1", side, p->op_count);
        zcp_plan_free(p);
        kt_seed(7);
        p = kt_random_plan(40, 30, 5);
        CHECK(check_schedule(p, "random plan") > 0);
        zcp_plan_free(p);
        for (uint32_t s = 0; s < 300; s++) {
                char what[32];
                kt_seed(1000 + s);
                p = kt_random_dag(1 + s % 60);
                snprintf(what, sizeof(what), "random graph %u", s);
                with_side += check_schedule(p, what) > 0;
                zcp_plan_free(p);
        }
        CHECK_MSG(with_side > 200, "only %u of 300 random graphs have a lane 1", with_side);
}

/* Score threshold, class filter, boxes to frame pixels, per-class NMS, top N. */
static void test_detect_post(void)
{
        struct zcp_detection c[5] = {
                { 0, 0.9f, { 10, 10, 50, 50 } },
                { 0, 0.8f, { 12, 12, 52, 52 } },   /* IoU with the first > 0.5: dropped */
                { 2, 0.7f, { 12, 12, 52, 52 } },   /* another class: kept */
                { 0, 0.6f, { 100, 100, 140, 140 } },
                { 0, 0.2f, { 200, 200, 240, 240 } }, /* under min_score */
        };
        struct zcp_det_params p = { .min_score = 0.3f, .nms_iou = 0.5f, .max_det = 10, .off_x = 0, .off_y = 0,
                                    .scale_x = 2.0f, .scale_y = 0.5f, .frame_w = 1000, .frame_h = 1000 };
        struct zcp_detection out[10];
        uint32_t n;

        p.class_mask[0] = 0xffffffffu;
        n = zcp_detect_post(c, 5, &p, out);
        CHECK(n == 3);
        CHECK(out[0].cls == 0 && out[1].cls == 2 && out[2].cls == 0 && out[2].score == 0.6f);
        CHECK(out[0].box[0] == 20.0f && out[0].box[1] == 5.0f && out[0].box[2] == 100.0f && out[0].box[3] == 25.0f);
        p.class_mask[0] = 1u << 2;   /* class 2 only */
        CHECK(zcp_detect_post(c, 5, &p, out) == 1 && out[0].cls == 2);
        p.class_mask[0] = 0xffffffffu;
        p.max_det = 1;
        CHECK(zcp_detect_post(c, 5, &p, out) == 1 && out[0].score == 0.9f);
        p.max_det = 10;
        p.frame_w = 60;   /* clamped to the frame */
        CHECK(zcp_detect_post(c, 1, &p, out) == 1 && out[0].box[2] == 60.0f);
}

int main(void)
{
        snprintf(dir, sizeof(dir), "/tmp/zcp-test-plan-XXXXXX");
        CHECK(mkdtemp(dir) != NULL);
        test_encodings();
        test_refusals();
        test_centernet();
        test_shared();
        test_unused_keys();
        test_schedule();
        test_detect_post();
        {
                char cmd[512];
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
                CHECK(system(cmd) == 0);
        }
        printf("plan: ok\n");
        return 0;
}
