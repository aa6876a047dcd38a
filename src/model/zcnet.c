/* SPDX-License-Identifier: MIT */
/*
 * zcnet (DESIGN.md §4) from a .safetensors file (the JSON header parsed by jansson, duplicate
 * keys refused) to a plan: each conv{i} a 3x3 convolution with padding 1 and ReLU, the mean over
 * the pixels, fc as a 1x1 convolution, the classify head. Main thread.
 */
#include "model/model.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>

#include "core/err.h"
#include "core/log.h"
#include "model/files.h"

#define HEADER_MAX        (100u * 1000u * 1000u)   /* safetensors' own limit */
#define MAX_LAYERS        16
#define DIM_MAX           (1u << 24)
#define SHAPE_MAX_DIMS    8

/* ------------------------------------------------------------------ JSON */

/* The header is parsed by jansson (JSON_REJECT_DUPLICATES); these name what was found. */
static const char *jtype_name(const json_t *v)
{
        switch (json_typeof(v)) {
        case JSON_OBJECT:
                return "object";
        case JSON_ARRAY:
                return "array";
        case JSON_STRING:
                return "string";
        case JSON_INTEGER:
        case JSON_REAL:
                return "number";
        case JSON_TRUE:
        case JSON_FALSE:
                return "boolean";
        default:
                return "null";
        }
}

/* A non-negative JSON integer (3.0 and 3e0 are not). */
static bool jnum_u64(const json_t *v, uint64_t *ret)
{
        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return false;
        *ret = (uint64_t)json_integer_value(v);
        return true;
}

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

/* ----------------------------------------------------------- safetensors */

struct tensor {
        const char *name;       /* points into the parsed header's keys */
        bool present;
        uint32_t ndim;
        uint64_t shape[SHAPE_MAX_DIMS];
        uint64_t elems;
        uint64_t begin, end;    /* relative to the data section */
};

struct loader {
        const char *path;
        char *errbuf;
        size_t errlen;
        uint64_t data_size;
        struct tensor conv_w[MAX_LAYERS], conv_b[MAX_LAYERS];
        struct tensor fc_w, fc_b;
        uint32_t conv_count;
};

static int fail(struct loader *L, const char *fmt, ...) ZCP_PRINTF(2, 3);
static int fail(struct loader *L, const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        zcp_set_err(L->errbuf, L->errlen, "%s: %s", L->path, msg);
        return -EINVAL;
}

static const char *shape_str(const struct tensor *t, char *buf, size_t len)
{
        size_t o = 0;

        o += (size_t)snprintf(buf + o, len - o, "[");
        for (uint32_t i = 0; i < t->ndim && o < len; i++)
                o += (size_t)snprintf(buf + o, len - o, "%s%llu", i ? "," : "", (unsigned long long)t->shape[i]);
        if (o < len)
                snprintf(buf + o, len - o, "]");
        return buf;
}

/* "conv<i>.weight" etc. Returns the slot or NULL (unknown name); -1 index too large. */
static struct tensor *tensor_slot(struct loader *L, const char *name, int *ret_bad_index)
{
        const char *s;
        uint64_t idx = 0;
        bool weight;

        *ret_bad_index = 0;
        if (strcmp(name, "fc.weight") == 0)
                return &L->fc_w;
        if (strcmp(name, "fc.bias") == 0)
                return &L->fc_b;
        if (strncmp(name, "conv", 4) != 0)
                return NULL;
        s = name + 4;
        if (!is_digit(*s) || (s[0] == '0' && is_digit(s[1])))
                return NULL;
        for (; is_digit(*s); s++) {
                if (idx < 1000000)
                        idx = idx * 10 + (uint64_t)(*s - '0');
        }
        if (strcmp(s, ".weight") == 0)
                weight = true;
        else if (strcmp(s, ".bias") == 0)
                weight = false;
        else
                return NULL;
        if (idx >= MAX_LAYERS) {
                *ret_bad_index = 1;
                return NULL;
        }
        if (idx + 1 > L->conv_count)
                L->conv_count = (uint32_t)idx + 1;
        return weight ? &L->conv_w[idx] : &L->conv_b[idx];
}

static int read_tensor_entry(struct loader *L, const char *name, const json_t *v)
{
        const json_t *dtype, *shape, *offs, *field;
        const char *key;
        struct tensor *t;
        int bad_index;
        char sb[128];

        t = tensor_slot(L, name, &bad_index);
        if (bad_index)
                return fail(L, "tensor '%s': at most %d conv layers are supported", name, MAX_LAYERS);
        if (!t)
                return fail(L, "unexpected tensor '%s' (zcnet has only conv{i}.weight, conv{i}.bias, fc.weight, fc.bias)",
                            name);
        if (!json_is_object(v))
                return fail(L, "tensor '%s': entry is a JSON %s, not an object", name, jtype_name(v));
        json_object_foreach((json_t *)v, key, field)
                if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
                        return fail(L, "tensor '%s': unknown field '%s'", name, key);
        dtype = json_object_get(v, "dtype");
        shape = json_object_get(v, "shape");
        offs = json_object_get(v, "data_offsets");
        if (!json_is_string(dtype))
                return fail(L, "tensor '%s': missing or non-string 'dtype'", name);
        if (strcmp(json_string_value(dtype), "F32") != 0)
                return fail(L, "tensor '%s': dtype %s, only F32 is supported", name, json_string_value(dtype));
        if (!json_is_array(shape))
                return fail(L, "tensor '%s': missing or non-array 'shape'", name);
        if (json_array_size(shape) > SHAPE_MAX_DIMS)
                return fail(L, "tensor '%s': shape has %zu dimensions", name, json_array_size(shape));
        t->name = name;
        t->ndim = (uint32_t)json_array_size(shape);
        t->elems = 1;
        for (size_t i = 0; i < json_array_size(shape); i++) {
                if (!jnum_u64(json_array_get(shape, i), &t->shape[i]))
                        return fail(L, "tensor '%s': shape entry %zu is not a non-negative integer", name, i);
                if (t->shape[i] == 0 || t->shape[i] > DIM_MAX)
                        return fail(L, "tensor '%s': shape dimension %zu is %llu (allowed 1..%u)", name, i,
                                    (unsigned long long)t->shape[i], DIM_MAX);
                if (__builtin_mul_overflow(t->elems, t->shape[i], &t->elems) || t->elems > (UINT64_MAX >> 3))
                        return fail(L, "tensor '%s': shape %s is too large", name, shape_str(t, sb, sizeof(sb)));
        }
        if (!json_is_array(offs) || json_array_size(offs) != 2 || !jnum_u64(json_array_get(offs, 0), &t->begin) ||
            !jnum_u64(json_array_get(offs, 1), &t->end) || t->begin > t->end)
                return fail(L, "tensor '%s': 'data_offsets' must be [begin,end] with 0 <= begin <= end", name);
        if (t->end > L->data_size)
                return fail(L, "tensor '%s': data_offsets [%llu,%llu) beyond the end of the data (%llu bytes): file truncated?",
                            name, (unsigned long long)t->begin, (unsigned long long)t->end,
                            (unsigned long long)L->data_size);
        if (t->end - t->begin != t->elems * 4)
                return fail(L, "tensor '%s': data_offsets span %llu bytes but shape %s of F32 needs %llu", name,
                            (unsigned long long)(t->end - t->begin), shape_str(t, sb, sizeof(sb)),
                            (unsigned long long)(t->elems * 4));
        t->present = true;
        return 0;
}

static int check_overlap(struct loader *L)
{
        const struct tensor *list[2 * MAX_LAYERS + 2];
        size_t n = 0;

        for (uint32_t i = 0; i < MAX_LAYERS; i++) {
                if (L->conv_w[i].present)
                        list[n++] = &L->conv_w[i];
                if (L->conv_b[i].present)
                        list[n++] = &L->conv_b[i];
        }
        if (L->fc_w.present)
                list[n++] = &L->fc_w;
        if (L->fc_b.present)
                list[n++] = &L->fc_b;
        /* Insertion sort by begin (at most 34 entries). */
        for (size_t i = 1; i < n; i++) {
                const struct tensor *t = list[i];
                size_t j = i;
                while (j > 0 && list[j - 1]->begin > t->begin) {
                        list[j] = list[j - 1];
                        j--;
                }
                list[j] = t;
        }
        for (size_t i = 1; i < n; i++)
                if (list[i]->begin < list[i - 1]->end)
                        return fail(L, "tensors '%s' [%llu,%llu) and '%s' [%llu,%llu) overlap in the data",
                                    list[i - 1]->name, (unsigned long long)list[i - 1]->begin,
                                    (unsigned long long)list[i - 1]->end, list[i]->name,
                                    (unsigned long long)list[i]->begin, (unsigned long long)list[i]->end);
        return 0;
}

static int check_structure(struct loader *L)
{
        char sb[128];

        if (L->conv_count == 0)
                return fail(L, "missing tensor 'conv0.weight'");
        for (uint32_t i = 0; i < L->conv_count; i++) {
                const struct tensor *w = &L->conv_w[i], *b = &L->conv_b[i];

                if (!w->present)
                        return fail(L, "missing tensor 'conv%u.weight'", i);
                if (!b->present)
                        return fail(L, "missing tensor 'conv%u.bias'", i);
                if (w->ndim != 4 || w->shape[2] != 3 || w->shape[3] != 3)
                        return fail(L, "tensor '%s': shape %s, expected [out,in,3,3]", w->name,
                                    shape_str(w, sb, sizeof(sb)));
                if (i == 0 && w->shape[1] != 3)
                        return fail(L, "tensor '%s': shape %s, expected 3 input channels (RGB)", w->name,
                                    shape_str(w, sb, sizeof(sb)));
                if (i > 0 && w->shape[1] != L->conv_w[i - 1].shape[0])
                        return fail(L, "tensor '%s': shape %s has %llu input channels but conv%u has %llu outputs",
                                    w->name, shape_str(w, sb, sizeof(sb)), (unsigned long long)w->shape[1], i - 1,
                                    (unsigned long long)L->conv_w[i - 1].shape[0]);
                if (b->ndim != 1 || b->shape[0] != w->shape[0])
                        return fail(L, "tensor '%s': shape %s, expected [%llu]", b->name, shape_str(b, sb, sizeof(sb)),
                                    (unsigned long long)w->shape[0]);
        }
        if (!L->fc_w.present)
                return fail(L, "missing tensor 'fc.weight'");
        if (!L->fc_b.present)
                return fail(L, "missing tensor 'fc.bias'");
        if (L->fc_w.ndim != 2 || L->fc_w.shape[1] != L->conv_w[L->conv_count - 1].shape[0])
                return fail(L, "tensor 'fc.weight': shape %s, expected [classes,%llu] (%llu = outputs of conv%u)",
                            shape_str(&L->fc_w, sb, sizeof(sb)),
                            (unsigned long long)L->conv_w[L->conv_count - 1].shape[0],
                            (unsigned long long)L->conv_w[L->conv_count - 1].shape[0], L->conv_count - 1);
        if (L->fc_b.ndim != 1 || L->fc_b.shape[0] != L->fc_w.shape[0])
                return fail(L, "tensor 'fc.bias': shape %s, expected [%llu]", shape_str(&L->fc_b, sb, sizeof(sb)),
                            (unsigned long long)L->fc_w.shape[0]);
        return 0;
}

static int parse_stride(struct loader *L, const char *key, const json_t *v, uint32_t *ret)
{
        const char *str = json_string_value(v);

        if (!str)
                return fail(L, "metadata '%s' must be a string", key);
        if (str[0] < '1' || str[0] > '4' || str[1] != '\0')
                return fail(L, "metadata '%s' is \"%s\", expected \"1\"..\"4\"", key, str);
        *ret = (uint32_t)(str[0] - '0');
        return 0;
}

/* "conv<i>.stride" (i without leading zeros): returns i, else -1. */
static int64_t stride_key_layer(const char *k)
{
        size_t kl = strlen(k);
        int64_t idx = 0;

        if (kl < 12 || strncmp(k, "conv", 4) != 0 || strcmp(k + kl - 7, ".stride") != 0)
                return -1;
        if (k[4] == '0' && kl > 12)
                return -1;
        for (const char *s = k + 4; s < k + kl - 7; s++) {
                if (!is_digit(*s))
                        return -1;
                if (idx < 1000000)
                        idx = idx * 10 + (*s - '0');
        }
        return idx;
}

/* safetensors metadata is a string -> string map. */
static int check_metadata(struct loader *L, const json_t *meta)
{
        const char *key;
        json_t *v;

        if (meta && !json_is_object(meta))
                return fail(L, "'__metadata__' is a JSON %s, not an object", jtype_name(meta));
        if (!meta)
                return 0;
        json_object_foreach((json_t *)meta, key, v)
                if (!json_is_string(v))
                        return fail(L, "metadata '%s' is a JSON %s, must be a string", key, jtype_name(v));
        return 0;
}

/* Strides: "stride" for all layers (default 2), then "conv<i>.stride" per layer. */
static int read_metadata(struct loader *L, const json_t *meta, uint32_t *strides)
{
        uint32_t all = 2;
        const char *key;
        json_t *v;
        int r;

        if (meta && json_object_get(meta, "stride")) {
                r = parse_stride(L, "stride", json_object_get(meta, "stride"), &all);
                if (r < 0)
                        return r;
        }
        for (uint32_t i = 0; i < MAX_LAYERS; i++)
                strides[i] = all;
        if (!meta)
                return 0;
        json_object_foreach((json_t *)meta, key, v) {
                int64_t idx = stride_key_layer(key);

                if (idx < 0)
                        continue;   /* somebody else's metadata */
                if (idx >= L->conv_count)
                        return fail(L, "metadata '%s' names no layer (the model has %u conv layers)", key,
                                    L->conv_count);
                r = parse_stride(L, key, v, &strides[idx]);
                if (r < 0)
                        return r;
        }
        return 0;
}

static uint32_t le32(const uint8_t *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int copy_tensor(struct loader *L, const struct tensor *t, const uint8_t *data, float *dst)
{
        for (uint64_t i = 0; i < t->elems; i++) {
                uint32_t u = le32(data + t->begin + 4 * i);
                float f;

                memcpy(&f, &u, sizeof(f));
                if (!isfinite(f))
                        return fail(L, "tensor '%s': element %llu is not finite (%s)", t->name, (unsigned long long)i,
                                    isnan(f) ? "nan" : "inf");
                dst[i] = f;
        }
        return 0;
}

/* [out][in][kh][kw] (PyTorch) to [kh][kw][in][out] (the plan's HWIO). */
static void to_hwio(const float *w, uint32_t out, uint32_t in, uint32_t kh, uint32_t kw, float *dst)
{
        for (uint32_t o = 0; o < out; o++)
                for (uint32_t i = 0; i < in; i++)
                        for (uint32_t y = 0; y < kh; y++)
                                for (uint32_t x = 0; x < kw; x++)
                                        dst[(((size_t)y * kw + x) * in + i) * out + o] =
                                                w[(((size_t)o * in + i) * kh + y) * kw + x];
}

static int build_plan(struct loader *L, const json_t *root, const uint8_t *data, const struct zcp_model_opts *opts,
                      struct zcp_plan **ret)
{
        const char *key;
        json_t *v;
        uint32_t strides[MAX_LAYERS], h, w, n;
        struct zcp_plan *p = NULL;
        uint64_t total = 0;
        float *tmp = NULL;
        size_t off = 0;
        int r;

        if (!json_is_object(root))
                return fail(L, "header is not a JSON object");
        r = check_metadata(L, json_object_get(root, "__metadata__"));
        if (r < 0)
                return r;
        json_object_foreach((json_t *)root, key, v) {
                if (strcmp(key, "__metadata__") == 0)
                        continue;
                r = read_tensor_entry(L, key, v);
                if (r < 0)
                        return r;
        }
        r = check_overlap(L);
        if (r < 0)
                return r;
        r = check_structure(L);
        if (r < 0)
                return r;
        r = read_metadata(L, json_object_get(root, "__metadata__"), strides);
        if (r < 0)
                return r;

        for (uint32_t i = 0; i < L->conv_count; i++)
                total += ((L->conv_w[i].elems + 3) & ~3ull) + ((L->conv_b[i].elems + 3) & ~3ull);
        total += ((L->fc_w.elems + 3) & ~3ull) + ((L->fc_b.elems + 3) & ~3ull);

        n = L->conv_count + 2;   /* convs, mean, fc */
        p = calloc(1, sizeof(*p));
        {
                uint64_t most = L->fc_w.elems;
                for (uint32_t i = 0; i < L->conv_count; i++)
                        most = L->conv_w[i].elems > most ? L->conv_w[i].elems : most;
                tmp = malloc(sizeof(float) * (most ? most : 1));   /* a PyTorch-layout tensor before its transpose */
        }
        if (p) {
                p->weights = calloc((size_t)total ? (size_t)total : 1, sizeof(float));
                p->tensors = calloc(n + 1, sizeof(*p->tensors));
                p->ops = calloc(n, sizeof(*p->ops));
        }
        if (!p || !tmp || !p->weights || !p->tensors || !p->ops) {
                zcp_set_err(L->errbuf, L->errlen, "%s: out of memory for %llu floats of weights", L->path,
                            (unsigned long long)total);
                r = -ENOMEM;
                goto fail;
        }
        snprintf(p->format, sizeof(p->format), "zcnet");
        p->weight_floats = (size_t)total;
        w = opts && opts->in_w ? opts->in_w : 224;
        h = opts && opts->in_h ? opts->in_h : 224;
        p->tensors[0] = (struct zcp_plan_tensor){ .h = h, .w = w, .c = 3 };
        p->tensor_count = n + 1;
        p->op_count = n;
        p->input = (struct zcp_plan_input){ .t = 0, .pixels = ZCP_PIXELS_UNIT, .mean = { 0.485f, 0.456f, 0.406f },
                                            .std = { 0.229f, 0.224f, 0.225f } };
        for (uint32_t i = 0; i < L->conv_count; i++) {
                struct zcp_plan_op *op = &p->ops[i];
                uint32_t out = (uint32_t)L->conv_w[i].shape[0], in = (uint32_t)L->conv_w[i].shape[1];
                uint32_t s = strides[i];

                h = (h + 2 - 3) / s + 1;
                w = (w + 2 - 3) / s + 1;
                p->tensors[i + 1] = (struct zcp_plan_tensor){ .h = h, .w = w, .c = out };
                op->kind = ZCP_OP_CONV;
                snprintf(op->name, sizeof(op->name), "conv%u", i);
                op->in = (struct zcp_plan_view){ .t = i, .c = in };
                op->out = (struct zcp_plan_view){ .t = i + 1, .c = out };
                op->act.kind = ZCP_ACT_RELU;
                op->u.conv = (struct zcp_plan_conv){ .kh = 3, .kw = 3, .sh = s, .sw = s, .pad_t = 1, .pad_l = 1,
                                                     .pad_b = 1, .pad_r = 1, .groups = 1 };
                if ((r = copy_tensor(L, &L->conv_w[i], data, tmp)) < 0)
                        goto fail;
                to_hwio(tmp, out, in, 3, 3, p->weights + off);
                op->u.conv.weight = off;
                off += (L->conv_w[i].elems + 3) & ~3ull;
                if ((r = copy_tensor(L, &L->conv_b[i], data, p->weights + off)) < 0)
                        goto fail;
                op->u.conv.bias = off;
                off += (L->conv_b[i].elems + 3) & ~3ull;
        }
        {
                uint32_t last = L->conv_count, c = (uint32_t)L->fc_w.shape[1], classes = (uint32_t)L->fc_w.shape[0];
                struct zcp_plan_op *mean = &p->ops[last], *fc = &p->ops[last + 1];

                p->tensors[last + 1] = (struct zcp_plan_tensor){ .h = 1, .w = 1, .c = c };
                p->tensors[last + 2] = (struct zcp_plan_tensor){ .h = 1, .w = 1, .c = classes };
                mean->kind = ZCP_OP_MEAN;
                snprintf(mean->name, sizeof(mean->name), "pool");
                mean->in = (struct zcp_plan_view){ .t = last, .c = c };
                mean->out = (struct zcp_plan_view){ .t = last + 1, .c = c };
                fc->kind = ZCP_OP_CONV;
                snprintf(fc->name, sizeof(fc->name), "fc");
                fc->in = mean->out;
                fc->out = (struct zcp_plan_view){ .t = last + 2, .c = classes };
                fc->u.conv = (struct zcp_plan_conv){ .kh = 1, .kw = 1, .sh = 1, .sw = 1, .groups = 1 };
                if ((r = copy_tensor(L, &L->fc_w, data, tmp)) < 0)
                        goto fail;
                to_hwio(tmp, classes, c, 1, 1, p->weights + off);
                fc->u.conv.weight = off;
                off += (L->fc_w.elems + 3) & ~3ull;
                if ((r = copy_tensor(L, &L->fc_b, data, p->weights + off)) < 0)
                        goto fail;
                fc->u.conv.bias = off;
                p->head = (struct zcp_plan_head){ .kind = ZCP_HEAD_CLASSIFY, .classes = classes,
                                                  .scores = fc->out };
        }
        for (uint32_t i = 0; i < L->conv_count; i++)
                p->macs += (uint64_t)p->tensors[i + 1].h * p->tensors[i + 1].w * p->ops[i].out.c * 9 * p->ops[i].in.c;
        p->macs += p->ops[L->conv_count + 1].in.c * (uint64_t)p->head.classes;
        if (h == 0 || w == 0) {
                r = fail(L, "an input of %ux%u leaves nothing after %u layers", opts ? opts->in_w : 224,
                         opts ? opts->in_h : 224, L->conv_count);
                goto fail;
        }
        if ((r = zcp_plan_layout(p)) < 0)
                goto fail;
        if ((r = zcp_plan_check(p, L->errbuf, L->errlen)) < 0)
                goto fail;
        free(tmp);
        *ret = p;
        return 0;
fail:
        free(tmp);
        zcp_plan_free(p);
        return r;
}

int zcp_zcnet_load(const char *path, const struct zcp_model_opts *opts, struct zcp_plan **ret, char *errbuf,
                   size_t errlen)
{
        struct loader L = { .path = path, .errbuf = errbuf, .errlen = errlen };
        json_error_t jerr;
        json_t *root = NULL;
        uint8_t lenbuf[8], *data = NULL;
        char *hdr = NULL;
        uint64_t size, hlen = 0;
        int fd, r;

        fd = zcp_open_regular(path, &size, errbuf, errlen);
        if (fd < 0)
                return fd;
        if (size < 8) {
                r = fail(&L, "%s (%llu bytes), not a safetensors file", size ? "too short" : "empty file",
                         (unsigned long long)size);
                goto out;
        }
        r = zcp_read_full(fd, lenbuf, sizeof(lenbuf));
        if (r < 0)
                goto read_error;
        for (int i = 7; i >= 0; i--)
                hlen = hlen << 8 | lenbuf[i];
        if (hlen < 2 || hlen > HEADER_MAX || hlen > size - 8) {
                r = fail(&L, "bad header length %llu (file is %llu bytes, limit %u): not a safetensors file?",
                         (unsigned long long)hlen, (unsigned long long)size, HEADER_MAX);
                goto out;
        }
        hdr = malloc((size_t)hlen);
        L.data_size = size - 8 - hlen;
        data = malloc(L.data_size ? (size_t)L.data_size : 1);
        if (!hdr || !data) {
                zcp_set_err(errbuf, errlen, "%s: out of memory for %llu bytes", path, (unsigned long long)size);
                r = -ENOMEM;
                goto out;
        }
        r = zcp_read_full(fd, hdr, (size_t)hlen);
        if (r < 0)
                goto read_error;
        /* Duplicate keys are refused: which of two entries would be the tensor? */
        root = json_loadb(hdr, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
        if (!root) {
                if (json_error_code(&jerr) == json_error_out_of_memory) {
                        zcp_set_err(errbuf, errlen, "%s: out of memory parsing the header", path);
                        r = -ENOMEM;
                        goto out;
                }
                r = fail(&L, "header is not valid JSON: %s at byte %zu", jerr.text, (size_t)8 + (size_t)jerr.position);
                goto out;
        }
        r = zcp_read_full(fd, data, (size_t)L.data_size);
        if (r < 0)
                goto read_error;
        r = build_plan(&L, root, data, opts, ret);
        goto out;

read_error:
        if (r == -EIO)
                zcp_set_err(errbuf, errlen, "%s: file shrank while reading", path);
        else
                zcp_set_err(errbuf, errlen, "%s: read error: %s", path, zcp_strerror(r));
out:
        json_decref(root);
        free(hdr);
        free(data);
        close(fd);
        return r;
}

