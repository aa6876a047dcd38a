/* SPDX-License-Identifier: MIT */
/*
 * The zcnet .safetensors loader (model/zcnet.c) and the labels loader: a valid small file
 * becomes a plan with the right shapes, strides and values; every class of bad file
 * (generated here into a temporary directory) fails with -EINVAL or -ENOENT
 * and a one-line message naming the file and, where there is one, the
 * tensor; the default weights the build generated load with zcnet's shapes;
 * and tools/zcnet-gen (argv[1], passed by meson) is deterministic: two runs
 * write the same bytes, which are the build's default weights.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "model/model.h"

static char dir[256];
static char path[512];
static char last_err[512];

/* One tensor of a fixture; begin/end < 0 means "next in the data". */
struct spec {
        const char *name;
        const char *dtype;
        uint32_t ndim;
        uint64_t shape[4];
        int64_t begin, end;
};

#define T(n, ...) { n, "F32", sizeof((uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t), { __VA_ARGS__ }, -1, -1 }

/* conv0 3->4, conv1 4->5, fc 5->2 */
static const struct spec valid[] = {
        T("conv0.weight", 4, 3, 3, 3),
        T("conv0.bias", 4),
        T("conv1.weight", 5, 4, 3, 3),
        T("conv1.bias", 5),
        T("fc.weight", 2, 5),
        T("fc.bias", 2),
};
#define NVALID (sizeof(valid) / sizeof(valid[0]))

static uint64_t elems(const struct spec *s)
{
        uint64_t n = 1;
        for (uint32_t i = 0; i < s->ndim; i++)
                n *= s->shape[i];
        return n;
}

/* Value of element i of the data section (as floats, in file order). */
static float value(size_t i)
{
        return (float)((int)(i % 101) - 50) / 64.0f;
}

static void write_file(const void *a, size_t alen, const void *b, size_t blen, const void *c, size_t clen)
{
        FILE *f = fopen(path, "wbe");
        CHECK(f);
        CHECK(fwrite(a, 1, alen, f) == alen);
        CHECK(blen == 0 || fwrite(b, 1, blen, f) == blen);
        CHECK(clen == 0 || fwrite(c, 1, clen, f) == clen);
        CHECK(fclose(f) == 0);
}

/*
 * Writes a safetensors file from specs, with optional metadata JSON (the
 * object body, without braces), extra bytes of data (negative: truncate),
 * and an optional raw header replacing the generated one.
 */
static void write_st(const struct spec *s, size_t n, const char *meta, long extra, const char *raw_header)
{
        char header[8192];
        size_t hl = 0, off = 0, total = 0;
        uint8_t len8[8];
        float *data;

        for (size_t i = 0; i < n; i++)
                total += elems(&s[i]) * 4;
        hl += (size_t)snprintf(header + hl, sizeof(header) - hl, "{");
        if (meta)
                hl += (size_t)snprintf(header + hl, sizeof(header) - hl, "\"__metadata__\":{%s}%s", meta, n ? "," : "");
        for (size_t i = 0; i < n; i++) {
                uint64_t b = s[i].begin >= 0 ? (uint64_t)s[i].begin : off;
                uint64_t e = s[i].end >= 0 ? (uint64_t)s[i].end : b + elems(&s[i]) * 4;
                hl += (size_t)snprintf(header + hl, sizeof(header) - hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                                       i ? "," : "", s[i].name, s[i].dtype);
                for (uint32_t d = 0; d < s[i].ndim; d++)
                        hl += (size_t)snprintf(header + hl, sizeof(header) - hl, "%s%llu", d ? "," : "",
                                               (unsigned long long)s[i].shape[d]);
                hl += (size_t)snprintf(header + hl, sizeof(header) - hl, "],\"data_offsets\":[%llu,%llu]}",
                                       (unsigned long long)b, (unsigned long long)e);
                off = e > off ? e : off;
        }
        hl += (size_t)snprintf(header + hl, sizeof(header) - hl, "}");
        CHECK(hl < sizeof(header) - 1);
        total = off > total ? off : total;   /* holes */
        if (raw_header) {
                snprintf(header, sizeof(header), "%s", raw_header);
                hl = strlen(header);
        }
        data = calloc(total / 4 + 16, sizeof(float));
        CHECK(data);
        for (size_t i = 0; i < total / 4 + 16; i++)
                data[i] = value(i);   /* little-endian host assumed by the test */
        for (int i = 0; i < 8; i++)
                len8[i] = (uint8_t)((uint64_t)hl >> (8 * i));
        if (extra < 0)
                CHECK((size_t)-extra <= total);
        write_file(len8, 8, header, hl, data, (size_t)((long)total + extra));
        free(data);
}

/* The plan of a zcnet file: conv i is op i, then the mean, then fc. */
static uint32_t convs(const struct zcp_plan *p)
{
        return p->op_count - 2;
}

/* Element k of conv layer l's weight in the file's [out][in][3][3] order (the plan holds HWIO). */
static float conv_w(const struct zcp_plan *p, uint32_t l, size_t k)
{
        const struct zcp_plan_op *op = &p->ops[l];
        uint32_t in = op->in.c, out = op->out.c, x = (uint32_t)(k % 3), y = (uint32_t)(k / 3 % 3);
        uint32_t i = (uint32_t)(k / 9 % in), o = (uint32_t)(k / 9 / in);

        return p->weights[op->u.conv.weight + (((size_t)y * 3 + x) * in + i) * out + o];
}

static float conv_b(const struct zcp_plan *p, uint32_t l, size_t k)
{
        return p->weights[p->ops[l].u.conv.bias + k];
}

/* fc weight element k in the file's [classes][C] order. */
static float fc_w(const struct zcp_plan *p, size_t k)
{
        const struct zcp_plan_op *fc = &p->ops[p->op_count - 1];

        return p->weights[fc->u.conv.weight + (k % fc->in.c) * fc->out.c + k / fc->in.c];
}

/* Loads `path` and expects failure `want` with a one-line message naming the file and `needle`. */
static void expect_fail(int want, const char *needle, const char *what)
{
        struct zcp_plan *m = (struct zcp_plan *)0x1;
        char err[512];

        memset(err, 'x', sizeof(err));
        err[sizeof(err) - 1] = '\0';
        int r = zcp_model_load(path, NULL, &m, err, sizeof(err));
        CHECK_MSG(r == want, "%s: got %d (%s), want %d", what, r, err, want);
        CHECK_MSG(m == (struct zcp_plan *)0x1, "%s: ret written on failure", what);
        CHECK_MSG(strstr(err, path) != NULL, "%s: message does not name the file: %s", what, err);
        CHECK_MSG(!strchr(err, '\n'), "%s: message is not one line", what);
        CHECK_MSG(!needle || strstr(err, needle), "%s: message lacks '%s': %s", what, needle, err);
        printf("  %-28s %s\n", what, err);
        memcpy(last_err, err, sizeof(last_err));
}

static struct zcp_plan *expect_ok(void)
{
        struct zcp_plan *m = NULL;
        struct zcp_model_opts o = { .in_w = 224, .in_h = 100 };
        char err[512] = "";

        CHECK_MSG(zcp_model_load(path, &o, &m, err, sizeof(err)) == 0, "%s", err);
        CHECK(m);
        return m;
}

static void test_valid(void)
{
        struct zcp_plan *m;
        size_t i = 0;

        snprintf(path, sizeof(path), "%s/valid.safetensors", dir);
        write_st(valid, NVALID, "\"stride\":\"1\",\"conv1.stride\":\"3\",\"other\":\"x\"", 0, NULL);
        m = expect_ok();
        CHECK(convs(m) == 2 && m->head.kind == ZCP_HEAD_CLASSIFY && m->head.classes == 2 && !m->labels);
        CHECK(m->ops[2].kind == ZCP_OP_MEAN && m->ops[2].in.c == 5);
        CHECK(m->ops[3].kind == ZCP_OP_CONV && m->ops[3].u.conv.kh == 1 && m->ops[3].in.c == 5 && m->ops[3].out.c == 2);
        CHECK(m->ops[0].in.c == 3 && m->ops[0].out.c == 4 && m->ops[0].u.conv.sh == 1);
        CHECK(m->ops[1].kind == ZCP_OP_CONV && m->ops[1].in.c == 4 && m->ops[1].out.c == 5 &&
              m->ops[1].u.conv.sh == 3 && m->ops[1].u.conv.sw == 3);
        CHECK(m->input.pixels == ZCP_PIXELS_UNIT && m->input.mean[0] == 0.485f && m->input.std[2] == 0.225f);
        /* values in file order */
        for (size_t k = 0; k < 108; k++, i++)
                CHECK(conv_w(m, 0, k) == value(i));
        for (size_t k = 0; k < 4; k++, i++)
                CHECK(conv_b(m, 0, k) == value(i));
        for (size_t k = 0; k < 180; k++, i++)
                CHECK(conv_w(m, 1, k) == value(i));
        for (size_t k = 0; k < 5; k++, i++)
                CHECK(conv_b(m, 1, k) == value(i));
        for (size_t k = 0; k < 10; k++, i++)
                CHECK(fc_w(m, k) == value(i));
        for (size_t k = 0; k < 2; k++, i++)
                CHECK(m->weights[m->ops[3].u.conv.bias + k] == value(i));
        /* shapes for a 224 x 100 input: padding 1, stride 1 then 3 */
        CHECK(m->tensors[m->ops[0].out.t].w == 224 && m->tensors[m->ops[0].out.t].h == 100);
        CHECK(m->tensors[m->ops[1].out.t].w == 75 && m->tensors[m->ops[1].out.t].h == 34);

        /* labels */
        char lp[600];
        snprintf(lp, sizeof(lp), "%s/labels.txt", dir);
        FILE *f = fopen(lp, "we");
        CHECK(f && fputs("cat\r\ndog", f) >= 0 && fclose(f) == 0);
        char err[512] = "";
        CHECK_MSG(zcp_model_load_labels(m, lp, err, sizeof(err)) == 0, "%s", err);
        CHECK(m->labels && strcmp(m->labels[0], "cat") == 0 && strcmp(m->labels[1], "dog") == 0);
        f = fopen(lp, "we");
        CHECK(f && fputs("cat\ndog\nbird\n", f) >= 0 && fclose(f) == 0);
        CHECK(zcp_model_load_labels(m, lp, err, sizeof(err)) == -EINVAL && strstr(err, lp) && strstr(err, "3 labels"));
        CHECK(strcmp(m->labels[1], "dog") == 0);   /* the old labels stay */
        f = fopen(lp, "we");
        CHECK(f && fputs("cat\n\n", f) >= 0 && fclose(f) == 0);
        CHECK(zcp_model_load_labels(m, lp, err, sizeof(err)) == -EINVAL && strstr(err, lp) && strstr(err, "empty"));
        /* Labels go into every JSON line as they are: valid UTF-8 only, 256 bytes at most. */
        {
                static const char *const bad_utf8[] = {
                        "cat\ndo\xffg\n",          /* not UTF-8 at all */
                        "cat\nd\xc3\n",            /* truncated sequence */
                        "cat\n\xc0\xaf" "dog\n",      /* overlong '/' */
                        "cat\n\xed\xa0\x80" "dog\n",  /* a surrogate */
                        "cat\n\xf4\x90\x80\x80\n", /* above U+10FFFF */
                };
                char longl[600];

                for (size_t k = 0; k < sizeof(bad_utf8) / sizeof(bad_utf8[0]); k++) {
                        f = fopen(lp, "we");
                        CHECK(f && fputs(bad_utf8[k], f) >= 0 && fclose(f) == 0);
                        CHECK_MSG(zcp_model_load_labels(m, lp, err, sizeof(err)) == -EINVAL && strstr(err, ":2: ") &&
                                          strstr(err, "UTF-8"),
                                  "case %zu: %s", k, err);
                }
                f = fopen(lp, "we");   /* multi-byte UTF-8 is fine */
                CHECK(f && fputs("ch\xc3\xa2t\n\xe7\x8a\xac \xf0\x9f\x90\x95\n", f) >= 0 && fclose(f) == 0);
                CHECK_MSG(zcp_model_load_labels(m, lp, err, sizeof(err)) == 0, "%s", err);
                CHECK(strcmp(m->labels[1], "\xe7\x8a\xac \xf0\x9f\x90\x95") == 0);

                memset(longl, 'x', ZCP_LABEL_MAX_BYTES);   /* exactly the limit, with CRLF: fine */
                snprintf(longl + ZCP_LABEL_MAX_BYTES, sizeof(longl) - ZCP_LABEL_MAX_BYTES, "\r\ndog\n");
                f = fopen(lp, "we");
                CHECK(f && fputs(longl, f) >= 0 && fclose(f) == 0);
                CHECK_MSG(zcp_model_load_labels(m, lp, err, sizeof(err)) == 0, "%s", err);
                CHECK(strlen(m->labels[0]) == ZCP_LABEL_MAX_BYTES);
                memset(longl, 'x', ZCP_LABEL_MAX_BYTES + 1);   /* one byte over */
                snprintf(longl + ZCP_LABEL_MAX_BYTES + 1, sizeof(longl) - ZCP_LABEL_MAX_BYTES - 1, "\ndog\n");
                f = fopen(lp, "we");
                CHECK(f && fputs(longl, f) >= 0 && fclose(f) == 0);
                CHECK_MSG(zcp_model_load_labels(m, lp, err, sizeof(err)) == -EINVAL && strstr(err, ":1: ") &&
                                  strstr(err, "longer than 256"),
                          "%s", err);
        }
        snprintf(lp, sizeof(lp), "%s/nolabels.txt", dir);
        CHECK(zcp_model_load_labels(m, lp, err, sizeof(err)) == -ENOENT && strstr(err, lp));
        zcp_plan_free(m);

        /* No metadata: stride 2 everywhere. */
        write_st(valid, NVALID, NULL, 0, NULL);
        m = expect_ok();
        CHECK(m->ops[0].u.conv.sh == 2 && m->ops[1].u.conv.sh == 2);
        zcp_plan_free(m);

        /* Holes between tensors and out-of-order offsets are fine. */
        struct spec s[NVALID];
        memcpy(s, valid, sizeof(s));
        s[5].begin = 0;          /* fc.bias first */
        s[5].end = 8;
        s[0].begin = 16;         /* conv0.weight after a hole of 8 bytes */
        s[0].end = 16 + 432;
        s[1].begin = -1;
        write_st(s, NVALID, NULL, 0, NULL);
        m = expect_ok();
        CHECK(m->weights[m->ops[3].u.conv.bias] == value(0) && m->weights[m->ops[3].u.conv.bias + 1] == value(1) &&
              conv_w(m, 0, 0) == value(4));
        zcp_plan_free(m);
}

static void with(const struct spec *s, size_t n, const char *meta, int want, const char *needle, const char *what)
{
        write_st(s, n, meta, 0, NULL);
        expect_fail(want, needle, what);
}

static void test_bad(void)
{
        struct spec s[NVALID + 1];
        long valid_data = 0;

        snprintf(path, sizeof(path), "%s/bad.safetensors", dir);
        for (size_t i = 0; i < NVALID; i++)
                valid_data += (long)elems(&valid[i]) * 4;

        /* missing tensors */
        for (size_t drop = 0; drop < NVALID; drop++) {
                size_t n = 0;
                for (size_t i = 0; i < NVALID; i++)
                        if (i != drop)
                                s[n++] = valid[i];
                with(s, n, NULL, -EINVAL, valid[drop].name, "missing tensor");
        }
        /* a gap in the conv numbering: conv0, conv2 */
        memcpy(s, valid, sizeof(valid));
        s[2].name = "conv2.weight";
        s[3].name = "conv2.bias";
        with(s, NVALID, NULL, -EINVAL, "'conv1.weight'", "conv gap");

        /* wrong shapes */
        memcpy(s, valid, sizeof(valid));
        s[0].shape[3] = 2;
        with(s, NVALID, NULL, -EINVAL, "conv0.weight", "kernel not 3x3");
        memcpy(s, valid, sizeof(valid));
        s[0].ndim = 3;
        with(s, NVALID, NULL, -EINVAL, "conv0.weight", "conv weight 3-d");
        memcpy(s, valid, sizeof(valid));
        s[0].shape[1] = 1;
        with(s, NVALID, NULL, -EINVAL, "conv0.weight", "conv0 not RGB");
        memcpy(s, valid, sizeof(valid));
        s[2].shape[1] = 3;
        with(s, NVALID, NULL, -EINVAL, "conv1.weight", "in/out chain mismatch");
        memcpy(s, valid, sizeof(valid));
        s[3].shape[0] = 4;
        with(s, NVALID, NULL, -EINVAL, "conv1.bias", "conv bias shape");
        memcpy(s, valid, sizeof(valid));
        s[4].shape[1] = 4;
        with(s, NVALID, NULL, -EINVAL, "fc.weight", "fc in mismatch");
        memcpy(s, valid, sizeof(valid));
        s[5].shape[0] = 3;
        with(s, NVALID, NULL, -EINVAL, "fc.bias", "fc bias shape");
        memcpy(s, valid, sizeof(valid));
        s[1].shape[0] = 0;
        with(s, NVALID, NULL, -EINVAL, "conv0.bias", "zero dimension");

        /* dtype */
        memcpy(s, valid, sizeof(valid));
        s[2].dtype = "F16";
        with(s, NVALID, NULL, -EINVAL, "conv1.weight", "wrong dtype");

        /* offsets */
        memcpy(s, valid, sizeof(valid));
        s[1].begin = 400;   /* inside conv0.weight [0,432) */
        s[1].end = 416;
        with(s, NVALID, NULL, -EINVAL, "conv0.bias", "overlapping offsets");
        memcpy(s, valid, sizeof(valid));
        s[5].begin = 0;     /* fc.bias over the start of conv0.weight */
        s[5].end = 8;
        with(s, NVALID, NULL, -EINVAL, "overlap", "overlap with first tensor");
        memcpy(s, valid, sizeof(valid));
        s[0].begin = 0;
        s[0].end = 428;
        with(s, NVALID, NULL, -EINVAL, "conv0.weight", "offsets span != shape");
        memcpy(s, valid, sizeof(valid));
        s[3].begin = 100;
        s[3].end = 80;
        with(s, NVALID, NULL, -EINVAL, "conv1.bias", "begin > end");

        /* truncated data: the last tensor runs past the end */
        write_st(valid, NVALID, NULL, -4, NULL);
        expect_fail(-EINVAL, "fc.bias", "truncated data");
        write_st(valid, NVALID, NULL, -valid_data, NULL);
        expect_fail(-EINVAL, "conv0.weight", "no data at all");

        /* names */
        memcpy(s, valid, sizeof(valid));
        s[NVALID] = (struct spec)T("bn.weight", 4);
        with(s, NVALID + 1, NULL, -EINVAL, "bn.weight", "unexpected tensor");
        s[NVALID] = (struct spec)T("conv16.weight", 4, 3, 3, 3);
        with(s, NVALID + 1, NULL, -EINVAL, "conv16.weight", "too many layers");

        /* metadata */
        with(valid, NVALID, "\"stride\":\"5\"", -EINVAL, "stride", "stride 5");
        with(valid, NVALID, "\"stride\":\"0\"", -EINVAL, "stride", "stride 0");
        with(valid, NVALID, "\"stride\":\"two\"", -EINVAL, "stride", "stride text");
        with(valid, NVALID, "\"conv1.stride\":\"12\"", -EINVAL, "conv1.stride", "layer stride 12");
        with(valid, NVALID, "\"conv2.stride\":\"1\"", -EINVAL, "conv2.stride", "stride of no layer");
        with(valid, NVALID, "\"stride\":2", -EINVAL, "stride", "stride not a string");
        write_st(valid, NVALID, NULL, 0, NULL);

        /* non-finite weights */
        {
                struct spec one[NVALID];
                memcpy(one, valid, sizeof(valid));
                write_st(one, NVALID, NULL, 0, NULL);
                FILE *f = fopen(path, "r+be");
                uint64_t hl = 0;
                uint8_t b[8];
                float nan = NAN;
                CHECK(f && fread(b, 1, 8, f) == 8);
                for (int i = 7; i >= 0; i--)
                        hl = hl << 8 | b[i];
                CHECK(fseek(f, (long)(8 + hl + 432 + 16 + 4 * 7), SEEK_SET) == 0);  /* conv1.weight[7] */
                CHECK(fwrite(&nan, 4, 1, f) == 1 && fclose(f) == 0);
                expect_fail(-EINVAL, "conv1.weight", "NaN weight");
        }

        /* header length */
        {
                uint8_t len8[8] = { 0 };
                const char *h = "{}";
                uint64_t big = 1ull << 40;
                write_file("\x02\0\0\0\0\0\0\0", 8, h, 2, NULL, 0);
                expect_fail(-EINVAL, "conv0.weight", "empty header object");
                write_file("\x40\0\0\0\0\0\0\0", 8, h, 2, NULL, 0);
                expect_fail(-EINVAL, "header length", "header length > file");
                for (int i = 0; i < 8; i++)
                        len8[i] = (uint8_t)(big >> (8 * i));
                write_file(len8, 8, h, 2, NULL, 0);
                expect_fail(-EINVAL, "header length", "header length 1 TB");
                write_file("\0\0\0\0\0\0\0\0", 8, NULL, 0, NULL, 0);
                expect_fail(-EINVAL, "header length", "header length 0");
                write_file("\x02\0\0\0", 4, NULL, 0, NULL, 0);
                expect_fail(-EINVAL, "too short", "4-byte file");
                write_file("", 0, NULL, 0, NULL, 0);
                expect_fail(-EINVAL, "empty", "empty file");
        }

        /* malformed JSON */
        {
                static const char *const bad_json[] = {
                        "{\"conv0.weight\":{\"dtype\":\"F32\",}}",
                        "{\"conv0.weight\":{\"dtype\":\"F32\"}",
                        "{\"conv0.weight\" {}}",
                        "{\"conv0.weight\":{\"dtype\":\"F32}}",
                        "{\"a\":1}x",
                        "{\"a\":01}",
                        "{\"a\":-}",
                        "{\"a\":tru}",
                        "{\"a\":\"\\q\"}",
                        "{\"a\":\"\\ud800\"}",
                        "{\"a\":\"x\ny\"}",
                        "{\"a\":1,\"a\":2}",
                        "{'a':1}",
                        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
                };
                for (size_t i = 0; i < sizeof(bad_json) / sizeof(bad_json[0]); i++) {
                        write_st(NULL, 0, NULL, 0, bad_json[i]);
                        expect_fail(-EINVAL, "JSON", "malformed JSON");
                }
                write_st(NULL, 0, NULL, 0, "[]");
                expect_fail(-EINVAL, "not a JSON object", "header is an array");
                write_st(NULL, 0, NULL, 0, "{\"conv0.weight\":[]}");
                expect_fail(-EINVAL, "conv0.weight", "entry not an object");
                CHECK(strstr(last_err, "JSON array"));
                write_st(NULL, 0, NULL, 0,
                         "{\"conv0.weight\":{\"dtype\":\"F32\",\"shape\":[4,3,3,3.0],\"data_offsets\":[0,432]}}");
                expect_fail(-EINVAL, "conv0.weight", "fractional shape");
                write_st(NULL, 0, NULL, 0,
                         "{\"conv0.weight\":{\"dtype\":\"F32\",\"shape\":[4,3,3,3],\"data_offsets\":[-1,432]}}");
                expect_fail(-EINVAL, "conv0.weight", "negative offset");
                write_st(NULL, 0, NULL, 0, "{\"conv0.weight\":{\"dtype\":\"F32\",\"shape\":[4,3,3,3]}}");
                expect_fail(-EINVAL, "conv0.weight", "no data_offsets");
                write_st(NULL, 0, NULL, 0,
                         "{\"conv0.weight\":{\"dtype\":\"F32\",\"shape\":[4,3,3,3],\"data_offsets\":[0,432],\"x\":1}}");
                expect_fail(-EINVAL, "conv0.weight", "unknown field");
                write_st(NULL, 0, NULL, 0, "{\"__metadata__\":[]}");
                expect_fail(-EINVAL, "__metadata__", "metadata not an object");
        }

        /* missing file, directory */
        snprintf(path, sizeof(path), "%s/does-not-exist.safetensors", dir);
        expect_fail(-ENOENT, NULL, "missing file");
        snprintf(path, sizeof(path), "%s", dir);
        expect_fail(-EISDIR, NULL, "directory");
}

/* Runs `gen out`; the generator must exit 0. */
static void generate(const char *gen, const char *out)
{
        pid_t pid = fork();
        int st;

        CHECK(pid >= 0);
        if (pid == 0) {
                execl(gen, gen, out, (char *)NULL);
                _exit(127);
        }
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s %s failed (status %d)", gen, out, st);
}

/* The number of bytes of a and b, which must be equal byte for byte. */
static size_t same_bytes(const char *a_path, const char *b_path)
{
        FILE *a = fopen(a_path, "rbe"), *b = fopen(b_path, "rbe");
        size_t n = 0;

        CHECK_MSG(a && b, "cannot open %s or %s", a_path, b_path);
        for (;;) {
                int ca = fgetc(a), cb = fgetc(b);
                CHECK_MSG(ca == cb, "%s and %s differ at byte %zu", a_path, b_path, n);
                if (ca == EOF)
                        break;
                n++;
        }
        fclose(a);
        fclose(b);
        return n;
}

static void test_default(const char *gen)
{
        const char *def = zcp_test_default_weights();
        char one[600], two[600];
        struct zcp_plan *m = NULL;
        char err[512] = "";
        static const uint32_t ch[] = { 3, 16, 32, 64, 128 };

        CHECK_MSG(zcp_model_load(def, NULL, &m, err, sizeof(err)) == 0, "%s", err);
        CHECK(convs(m) == 4 && m->head.classes == 1000 && m->ops[5].in.c == 128);
        CHECK(m->tensors[m->input.t].w == 224 && m->tensors[m->input.t].h == 224);
        for (int i = 0; i < 4; i++)
                CHECK(m->ops[i].in.c == ch[i] && m->ops[i].out.c == ch[i + 1] && m->ops[i].u.conv.sh == 2);
        zcp_plan_free(m);

        /* Two fresh runs give the same bytes, and those are the build's. */
        snprintf(one, sizeof(one), "%s/gen-1.safetensors", dir);
        snprintf(two, sizeof(two), "%s/gen-2.safetensors", dir);
        generate(gen, one);
        generate(gen, two);
        size_t n = same_bytes(one, two);
        CHECK(n > 900000);
        CHECK(same_bytes(one, def) == n);
        unlink(one);
        unlink(two);
        printf("zcnet-gen is deterministic: two runs and %s are the same %zu bytes\n", def, n);
}

int main(int argc, char **argv)
{
        char gen[4096];

        if (argc > 1)
                snprintf(gen, sizeof(gen), "%s", argv[1]);
        else
                snprintf(gen, sizeof(gen), "%s/tools/zcnet-gen", zcp_test_build_root());

        snprintf(dir, sizeof(dir), "%s/zcp-weights-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        CHECK(mkdtemp(dir));

        test_valid();
        test_bad();
        test_default(gen);

        char cmd[600];
        snprintf(cmd, sizeof(cmd), "%s/valid.safetensors", dir);
        unlink(cmd);
        snprintf(cmd, sizeof(cmd), "%s/bad.safetensors", dir);
        unlink(cmd);
        snprintf(cmd, sizeof(cmd), "%s/labels.txt", dir);
        unlink(cmd);
        CHECK(rmdir(dir) == 0);
        printf("ok\n");
        return 0;
}
