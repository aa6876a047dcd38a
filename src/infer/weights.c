/* SPDX-License-Identifier: MIT */
/*
 * zcnet weights: the .safetensors loader (with its own small, strict JSON
 * parser) and the labels loader. Main thread; the model it returns is
 * immutable. The C reference of what the GPU computes is infer/reference.c.
 */
#include "infer/weights.h"

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

#include "core/log.h"

#define HEADER_MAX        (100u * 1000u * 1000u)   /* safetensors' own limit */
#define JSON_MAX_DEPTH    64
#define JSON_MAX_MEMBERS  4096
#define LABELS_MAX_BYTES  (16u << 20)
#define DIM_MAX           (1u << 24)
#define SHAPE_MAX_DIMS    8

/* ---------------------------------------------------------------- errors */

static void set_err(char *errbuf, size_t errlen, const char *fmt, ...) ZCP_PRINTF(3, 4);
static void set_err(char *errbuf, size_t errlen, const char *fmt, ...)
{
        va_list ap;

        if (!errbuf || errlen == 0)
                return;
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
        /* One line, whatever a file name or label holds. */
        for (char *c = errbuf; *c; c++)
                if (*c == '\n' || *c == '\r')
                        *c = ' ';
}

/* ------------------------------------------------------------------ JSON */

enum jtype { J_NULL, J_FALSE, J_TRUE, J_NUM, J_STR, J_ARR, J_OBJ, J_TYPE_COUNT };
static const char *const jtype_names[J_TYPE_COUNT] = {
        [J_NULL] = "null", [J_FALSE] = "false", [J_TRUE] = "true", [J_NUM] = "number",
        [J_STR] = "string", [J_ARR] = "array", [J_OBJ] = "object",
};

struct jnode {
        enum jtype type;
        char *str;              /* J_STR: decoded text; J_NUM: the literal */
        size_t count;           /* J_ARR, J_OBJ: members */
        struct jnode *kids;     /* [count] */
        char **keys;            /* J_OBJ: [count] */
};

struct jparser {
        const char *s;
        size_t len, pos;
        unsigned depth;
        const char *err;        /* what is wrong (static text), at err_pos */
        size_t err_pos;
};

static void jfree(struct jnode *n)
{
        for (size_t i = 0; i < n->count; i++) {
                jfree(&n->kids[i]);
                if (n->keys)
                        free(n->keys[i]);
        }
        free(n->kids);
        free(n->keys);
        free(n->str);
        memset(n, 0, sizeof(*n));
}

static int jfail(struct jparser *p, const char *msg)
{
        if (!p->err) {
                p->err = msg;
                p->err_pos = p->pos;
        }
        return -EINVAL;
}

static void jskip_ws(struct jparser *p)
{
        while (p->pos < p->len &&
               (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
                p->pos++;
}

static int hex4(const char *s, uint32_t *ret)
{
        uint32_t v = 0;

        for (int i = 0; i < 4; i++) {
                char c = s[i];
                v <<= 4;
                if (c >= '0' && c <= '9')
                        v |= (uint32_t)(c - '0');
                else if (c >= 'a' && c <= 'f')
                        v |= (uint32_t)(c - 'a' + 10);
                else if (c >= 'A' && c <= 'F')
                        v |= (uint32_t)(c - 'A' + 10);
                else
                        return -EINVAL;
        }
        *ret = v;
        return 0;
}

static size_t utf8_put(char *o, uint32_t cp)
{
        if (cp < 0x80) {
                o[0] = (char)cp;
                return 1;
        }
        if (cp < 0x800) {
                o[0] = (char)(0xc0 | (cp >> 6));
                o[1] = (char)(0x80 | (cp & 0x3f));
                return 2;
        }
        if (cp < 0x10000) {
                o[0] = (char)(0xe0 | (cp >> 12));
                o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
                o[2] = (char)(0x80 | (cp & 0x3f));
                return 3;
        }
        o[0] = (char)(0xf0 | (cp >> 18));
        o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[3] = (char)(0x80 | (cp & 0x3f));
        return 4;
}

/* At an opening quote: decodes the string into a new NUL-terminated buffer. */
static int jparse_string(struct jparser *p, char **ret)
{
        size_t end = p->pos + 1, o = 0;
        char *out;

        /* Find the closing quote; decoded text is never longer than the raw text. */
        while (end < p->len && p->s[end] != '"')
                end += (p->s[end] == '\\') ? 2 : 1;
        if (end >= p->len)
                return jfail(p, "unterminated string");
        out = malloc(end - p->pos);
        if (!out)
                return -ENOMEM;
        p->pos++;
        while (p->pos < end) {
                unsigned char c = (unsigned char)p->s[p->pos];
                uint32_t cp, lo;

                if (c < 0x20) {
                        free(out);
                        return jfail(p, "control character in string");
                }
                if (c != '\\') {
                        out[o++] = (char)c;
                        p->pos++;
                        continue;
                }
                p->pos++;
                switch (p->s[p->pos]) {
                case '"': out[o++] = '"'; break;
                case '\\': out[o++] = '\\'; break;
                case '/': out[o++] = '/'; break;
                case 'b': out[o++] = '\b'; break;
                case 'f': out[o++] = '\f'; break;
                case 'n': out[o++] = '\n'; break;
                case 'r': out[o++] = '\r'; break;
                case 't': out[o++] = '\t'; break;
                case 'u':
                        if (p->pos + 5 > end || hex4(p->s + p->pos + 1, &cp) < 0) {
                                free(out);
                                return jfail(p, "bad \\u escape");
                        }
                        p->pos += 4;
                        if (cp >= 0xd800 && cp < 0xdc00) {
                                if (p->pos + 7 > end || p->s[p->pos + 1] != '\\' || p->s[p->pos + 2] != 'u' ||
                                    hex4(p->s + p->pos + 3, &lo) < 0 || lo < 0xdc00 || lo >= 0xe000) {
                                        free(out);
                                        return jfail(p, "unpaired surrogate in \\u escape");
                                }
                                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                                p->pos += 6;
                        } else if (cp >= 0xdc00 && cp < 0xe000) {
                                free(out);
                                return jfail(p, "unpaired surrogate in \\u escape");
                        } else if (cp == 0) {
                                free(out);
                                return jfail(p, "\\u0000 in string");
                        }
                        o += utf8_put(out + o, cp);
                        break;
                default:
                        free(out);
                        return jfail(p, "bad escape in string");
                }
                p->pos++;
        }
        out[o] = '\0';
        p->pos = end + 1;
        *ret = out;
        return 0;
}

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

static int jparse_number(struct jparser *p, struct jnode *n)
{
        size_t start = p->pos;

        if (p->pos < p->len && p->s[p->pos] == '-')
                p->pos++;
        if (p->pos >= p->len || !is_digit(p->s[p->pos]))
                return jfail(p, "bad number");
        if (p->s[p->pos] == '0')
                p->pos++;
        else
                while (p->pos < p->len && is_digit(p->s[p->pos]))
                        p->pos++;
        if (p->pos < p->len && p->s[p->pos] == '.') {
                p->pos++;
                if (p->pos >= p->len || !is_digit(p->s[p->pos]))
                        return jfail(p, "bad number");
                while (p->pos < p->len && is_digit(p->s[p->pos]))
                        p->pos++;
        }
        if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
                p->pos++;
                if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
                        p->pos++;
                if (p->pos >= p->len || !is_digit(p->s[p->pos]))
                        return jfail(p, "bad number");
                while (p->pos < p->len && is_digit(p->s[p->pos]))
                        p->pos++;
        }
        n->type = J_NUM;
        n->str = strndup(p->s + start, p->pos - start);
        return n->str ? 0 : -ENOMEM;
}

static int jparse_value(struct jparser *p, struct jnode *n);

/* Appends a zeroed member to an array or object node; returns it. */
static int jgrow(struct jparser *p, struct jnode *n, size_t *cap, struct jnode **ret)
{
        if (n->count == JSON_MAX_MEMBERS)
                return jfail(p, "too many members");
        if (n->count == *cap) {
                size_t ncap = *cap ? *cap * 2 : 8;
                struct jnode *k = realloc(n->kids, ncap * sizeof(*k));
                if (!k)
                        return -ENOMEM;
                n->kids = k;
                if (n->type == J_OBJ) {
                        char **keys = realloc(n->keys, ncap * sizeof(*keys));
                        if (!keys)
                                return -ENOMEM;
                        n->keys = keys;
                }
                *cap = ncap;
        }
        memset(&n->kids[n->count], 0, sizeof(n->kids[0]));
        if (n->type == J_OBJ)
                n->keys[n->count] = NULL;
        *ret = &n->kids[n->count++];
        return 0;
}

static int jparse_container(struct jparser *p, struct jnode *n, bool object)
{
        size_t cap = 0;
        char close = object ? '}' : ']';
        int r;

        if (++p->depth > JSON_MAX_DEPTH)
                return jfail(p, "nested too deeply");
        n->type = object ? J_OBJ : J_ARR;
        p->pos++;
        jskip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == close) {
                p->pos++;
                p->depth--;
                return 0;
        }
        for (;;) {
                struct jnode *kid;
                char *key = NULL;

                jskip_ws(p);
                if (object) {
                        if (p->pos >= p->len || p->s[p->pos] != '"')
                                return jfail(p, "expected a string key");
                        r = jparse_string(p, &key);
                        if (r < 0)
                                return r;
                        for (size_t i = 0; i < n->count; i++)
                                if (strcmp(n->keys[i], key) == 0) {
                                        free(key);
                                        return jfail(p, "duplicate key");
                                }
                        jskip_ws(p);
                        if (p->pos >= p->len || p->s[p->pos] != ':') {
                                free(key);
                                return jfail(p, "expected ':'");
                        }
                        p->pos++;
                }
                r = jgrow(p, n, &cap, &kid);
                if (r < 0) {
                        free(key);
                        return r;
                }
                if (object)
                        n->keys[n->count - 1] = key;
                r = jparse_value(p, kid);
                if (r < 0)
                        return r;
                jskip_ws(p);
                if (p->pos < p->len && p->s[p->pos] == ',') {
                        p->pos++;
                        continue;
                }
                if (p->pos < p->len && p->s[p->pos] == close) {
                        p->pos++;
                        p->depth--;
                        return 0;
                }
                return jfail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
        }
}

static int jparse_literal(struct jparser *p, struct jnode *n, const char *word, enum jtype type)
{
        size_t l = strlen(word);

        if (p->len - p->pos < l || memcmp(p->s + p->pos, word, l) != 0)
                return jfail(p, "unexpected character");
        p->pos += l;
        n->type = type;
        return 0;
}

static int jparse_value(struct jparser *p, struct jnode *n)
{
        jskip_ws(p);
        if (p->pos >= p->len)
                return jfail(p, "unexpected end");
        switch (p->s[p->pos]) {
        case '{': return jparse_container(p, n, true);
        case '[': return jparse_container(p, n, false);
        case '"': n->type = J_STR; return jparse_string(p, &n->str);
        case 't': return jparse_literal(p, n, "true", J_TRUE);
        case 'f': return jparse_literal(p, n, "false", J_FALSE);
        case 'n': return jparse_literal(p, n, "null", J_NULL);
        default:
                if (p->s[p->pos] == '-' || is_digit(p->s[p->pos]))
                        return jparse_number(p, n);
                return jfail(p, "unexpected character");
        }
}

/* Parses a whole document (trailing whitespace allowed). */
static int jparse(struct jparser *p, struct jnode *root)
{
        int r = jparse_value(p, root);

        if (r < 0)
                return r;
        jskip_ws(p);
        if (p->pos != p->len)
                return jfail(p, "trailing characters");
        return 0;
}

/* A JSON number that is a non-negative integer literal (no sign, fraction, exponent). */
static bool jnum_u64(const struct jnode *n, uint64_t *ret)
{
        uint64_t v = 0;
        const char *s;

        if (n->type != J_NUM)
                return false;
        s = n->str;
        if (!*s || (s[0] == '0' && s[1]))
                return false;
        for (; *s; s++) {
                if (!is_digit(*s))
                        return false;
                if (v > (UINT64_MAX - 9) / 10)
                        return false;
                v = v * 10 + (uint64_t)(*s - '0');
        }
        *ret = v;
        return true;
}

static const struct jnode *jget(const struct jnode *obj, const char *key)
{
        for (size_t i = 0; i < obj->count; i++)
                if (strcmp(obj->keys[i], key) == 0)
                        return &obj->kids[i];
        return NULL;
}

/* ----------------------------------------------------------- safetensors */

struct tensor {
        const char *name;       /* points into the JSON keys */
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
        struct tensor conv_w[ZCP_MODEL_MAX_LAYERS], conv_b[ZCP_MODEL_MAX_LAYERS];
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
        set_err(L->errbuf, L->errlen, "%s: %s", L->path, msg);
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
        if (idx >= ZCP_MODEL_MAX_LAYERS) {
                *ret_bad_index = 1;
                return NULL;
        }
        if (idx + 1 > L->conv_count)
                L->conv_count = (uint32_t)idx + 1;
        return weight ? &L->conv_w[idx] : &L->conv_b[idx];
}

static int read_tensor_entry(struct loader *L, const char *name, const struct jnode *v)
{
        const struct jnode *dtype, *shape, *offs;
        struct tensor *t;
        int bad_index;
        char sb[128];

        t = tensor_slot(L, name, &bad_index);
        if (bad_index)
                return fail(L, "tensor '%s': at most %d conv layers are supported", name, ZCP_MODEL_MAX_LAYERS);
        if (!t)
                return fail(L, "unexpected tensor '%s' (zcnet has only conv{i}.weight, conv{i}.bias, fc.weight, fc.bias)",
                            name);
        if (v->type != J_OBJ)
                return fail(L, "tensor '%s': entry is a JSON %s, not an object", name, jtype_names[v->type]);
        for (size_t i = 0; i < v->count; i++)
                if (strcmp(v->keys[i], "dtype") && strcmp(v->keys[i], "shape") && strcmp(v->keys[i], "data_offsets"))
                        return fail(L, "tensor '%s': unknown field '%s'", name, v->keys[i]);
        dtype = jget(v, "dtype");
        shape = jget(v, "shape");
        offs = jget(v, "data_offsets");
        if (!dtype || dtype->type != J_STR)
                return fail(L, "tensor '%s': missing or non-string 'dtype'", name);
        if (strcmp(dtype->str, "F32") != 0)
                return fail(L, "tensor '%s': dtype %s, only F32 is supported", name, dtype->str);
        if (!shape || shape->type != J_ARR)
                return fail(L, "tensor '%s': missing or non-array 'shape'", name);
        if (shape->count > SHAPE_MAX_DIMS)
                return fail(L, "tensor '%s': shape has %zu dimensions", name, shape->count);
        t->name = name;
        t->ndim = (uint32_t)shape->count;
        t->elems = 1;
        for (size_t i = 0; i < shape->count; i++) {
                if (!jnum_u64(&shape->kids[i], &t->shape[i]))
                        return fail(L, "tensor '%s': shape entry %zu is not a non-negative integer", name, i);
                if (t->shape[i] == 0 || t->shape[i] > DIM_MAX)
                        return fail(L, "tensor '%s': shape dimension %zu is %llu (allowed 1..%u)", name, i,
                                    (unsigned long long)t->shape[i], DIM_MAX);
                if (__builtin_mul_overflow(t->elems, t->shape[i], &t->elems) || t->elems > (UINT64_MAX >> 3))
                        return fail(L, "tensor '%s': shape %s is too large", name, shape_str(t, sb, sizeof(sb)));
        }
        if (!offs || offs->type != J_ARR || offs->count != 2 || !jnum_u64(&offs->kids[0], &t->begin) ||
            !jnum_u64(&offs->kids[1], &t->end) || t->begin > t->end)
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
        const struct tensor *list[2 * ZCP_MODEL_MAX_LAYERS + 2];
        size_t n = 0;

        for (uint32_t i = 0; i < ZCP_MODEL_MAX_LAYERS; i++) {
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

static int parse_stride(struct loader *L, const char *key, const struct jnode *v, uint32_t *ret)
{
        if (v->type != J_STR)
                return fail(L, "metadata '%s' must be a string", key);
        if (v->str[0] < '1' || v->str[0] > '4' || v->str[1] != '\0')
                return fail(L, "metadata '%s' is \"%s\", expected \"1\"..\"4\"", key, v->str);
        *ret = (uint32_t)(v->str[0] - '0');
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
static int check_metadata(struct loader *L, const struct jnode *meta)
{
        if (meta && meta->type != J_OBJ)
                return fail(L, "'__metadata__' is a JSON %s, not an object", jtype_names[meta->type]);
        for (size_t i = 0; meta && i < meta->count; i++)
                if (meta->kids[i].type != J_STR)
                        return fail(L, "metadata '%s' is a JSON %s, must be a string", meta->keys[i],
                                    jtype_names[meta->kids[i].type]);
        return 0;
}

/* Strides: "stride" for all layers (default 2), then "conv<i>.stride" per layer. */
static int read_metadata(struct loader *L, const struct jnode *meta, uint32_t *strides)
{
        uint32_t all = 2;
        int r;

        if (meta && jget(meta, "stride")) {
                r = parse_stride(L, "stride", jget(meta, "stride"), &all);
                if (r < 0)
                        return r;
        }
        for (uint32_t i = 0; i < ZCP_MODEL_MAX_LAYERS; i++)
                strides[i] = all;
        for (size_t i = 0; meta && i < meta->count; i++) {
                int64_t idx = stride_key_layer(meta->keys[i]);

                if (idx < 0)
                        continue;   /* somebody else's metadata */
                if (idx >= L->conv_count)
                        return fail(L, "metadata '%s' names no layer (the model has %u conv layers)", meta->keys[i],
                                    L->conv_count);
                r = parse_stride(L, meta->keys[i], &meta->kids[i], &strides[idx]);
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

static int build_model(struct loader *L, const struct jnode *root, const uint8_t *data, struct zcp_model **ret)
{
        uint32_t strides[ZCP_MODEL_MAX_LAYERS];
        struct zcp_model *m = NULL;
        uint64_t total = 0;
        float *f;
        int r;

        if (root->type != J_OBJ)
                return fail(L, "header is not a JSON object");
        r = check_metadata(L, jget(root, "__metadata__"));
        if (r < 0)
                return r;
        for (size_t i = 0; i < root->count; i++) {
                if (strcmp(root->keys[i], "__metadata__") == 0)
                        continue;
                r = read_tensor_entry(L, root->keys[i], &root->kids[i]);
                if (r < 0)
                        return r;
        }
        r = check_overlap(L);
        if (r < 0)
                return r;
        r = check_structure(L);
        if (r < 0)
                return r;
        r = read_metadata(L, jget(root, "__metadata__"), strides);
        if (r < 0)
                return r;

        for (uint32_t i = 0; i < L->conv_count; i++)
                total += L->conv_w[i].elems + L->conv_b[i].elems;
        total += L->fc_w.elems + L->fc_b.elems;   /* <= data_size / 4: checked ranges do not overlap */

        m = calloc(1, sizeof(*m));
        if (!m) {
                set_err(L->errbuf, L->errlen, "%s: out of memory", L->path);
                return -ENOMEM;
        }
        m->blob_size = (size_t)total * sizeof(float);
        m->blob = malloc(m->blob_size);
        if (!m->blob) {
                set_err(L->errbuf, L->errlen, "%s: out of memory for %zu bytes of weights", L->path, m->blob_size);
                r = -ENOMEM;
                goto fail;
        }
        f = m->blob;
        m->conv_count = L->conv_count;
        for (uint32_t i = 0; i < L->conv_count; i++) {
                struct zcp_conv_layer *c = &m->conv[i];

                c->out_ch = (uint32_t)L->conv_w[i].shape[0];
                c->in_ch = (uint32_t)L->conv_w[i].shape[1];
                c->stride = strides[i];
                r = copy_tensor(L, &L->conv_w[i], data, f);
                if (r < 0)
                        goto fail;
                c->weight = f;
                f += L->conv_w[i].elems;
                r = copy_tensor(L, &L->conv_b[i], data, f);
                if (r < 0)
                        goto fail;
                c->bias = f;
                f += L->conv_b[i].elems;
        }
        m->classes = (uint32_t)L->fc_w.shape[0];
        m->fc_in = (uint32_t)L->fc_w.shape[1];
        r = copy_tensor(L, &L->fc_w, data, f);
        if (r < 0)
                goto fail;
        m->fc_weight = f;
        f += L->fc_w.elems;
        r = copy_tensor(L, &L->fc_b, data, f);
        if (r < 0)
                goto fail;
        m->fc_bias = f;
        *ret = m;
        return 0;
fail:
        zcp_model_free(m);
        return r;
}

/* Reads exactly len bytes; -EIO (with a message) when the file ends early. */
static int read_full(int fd, void *buf, size_t len)
{
        uint8_t *p = buf;

        while (len > 0) {
                ssize_t n = read(fd, p, len > (1u << 30) ? (1u << 30) : len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Opens a regular file for reading; returns fd and size, or negative errno with a message. */
static int open_regular(const char *path, uint64_t *ret_size, char *errbuf, size_t errlen)
{
        struct stat st;
        int fd, r;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                set_err(errbuf, errlen, "%s: cannot open: %s", path, strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                set_err(errbuf, errlen, "%s: cannot stat: %s", path, strerror(-r));
                close(fd);
                return r;
        }
        if (S_ISDIR(st.st_mode)) {
                set_err(errbuf, errlen, "%s: is a directory", path);
                close(fd);
                return -EISDIR;
        }
        if (!S_ISREG(st.st_mode)) {
                set_err(errbuf, errlen, "%s: not a regular file", path);
                close(fd);
                return -EINVAL;
        }
        *ret_size = (uint64_t)st.st_size;
        return fd;
}

int zcp_model_load(const char *path, struct zcp_model **ret_model, char *errbuf, size_t errlen)
{
        struct loader L = { .path = path, .errbuf = errbuf, .errlen = errlen };
        struct jparser jp = { 0 };
        struct jnode root = { 0 };
        uint8_t lenbuf[8], *data = NULL;
        char *hdr = NULL;
        uint64_t size, hlen = 0;
        int fd, r;

        fd = open_regular(path, &size, errbuf, errlen);
        if (fd < 0)
                return fd;
        if (size < 8) {
                r = fail(&L, "%s (%llu bytes), not a safetensors file", size ? "too short" : "empty file",
                         (unsigned long long)size);
                goto out;
        }
        r = read_full(fd, lenbuf, sizeof(lenbuf));
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
                set_err(errbuf, errlen, "%s: out of memory for %llu bytes", path, (unsigned long long)size);
                r = -ENOMEM;
                goto out;
        }
        r = read_full(fd, hdr, (size_t)hlen);
        if (r < 0)
                goto read_error;
        jp.s = hdr;
        jp.len = (size_t)hlen;
        r = jparse(&jp, &root);
        if (r == -ENOMEM) {
                set_err(errbuf, errlen, "%s: out of memory parsing the header", path);
                goto out;
        }
        if (r < 0) {
                r = fail(&L, "header is not valid JSON: %s at byte %zu", jp.err, (size_t)8 + jp.err_pos);
                goto out;
        }
        r = read_full(fd, data, (size_t)L.data_size);
        if (r < 0)
                goto read_error;
        r = build_model(&L, &root, data, ret_model);
        goto out;

read_error:
        if (r == -EIO)
                set_err(errbuf, errlen, "%s: file shrank while reading", path);
        else
                set_err(errbuf, errlen, "%s: read error: %s", path, strerror(-r));
out:
        jfree(&root);
        free(hdr);
        free(data);
        close(fd);
        return r;
}

/*
 * Length of the well-formed UTF-8 sequence at p (at most n bytes), or 0 when
 * it is not one (overlong forms, surrogates, > U+10FFFF, truncated).
 */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
        uint32_t cp;
        size_t len;

        if (p[0] < 0x80)
                return 1;
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                len = 2, cp = p[0] & 0x1f;
        else if (p[0] >= 0xe0 && p[0] <= 0xef)
                len = 3, cp = p[0] & 0x0f;
        else if (p[0] >= 0xf0 && p[0] <= 0xf4)
                len = 4, cp = p[0] & 0x07;
        else
                return 0;
        if (n < len)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return len;
}

int zcp_model_load_labels(struct zcp_model *model, const char *path, char *errbuf, size_t errlen)
{
        uint64_t size;
        char *text = NULL, **labels = NULL, *store;
        size_t lines = 0, start = 0;
        int fd, r;

        fd = open_regular(path, &size, errbuf, errlen);
        if (fd < 0)
                return fd;
        if (size > LABELS_MAX_BYTES) {
                set_err(errbuf, errlen, "%s: %llu bytes, labels files are limited to %u", path,
                        (unsigned long long)size, LABELS_MAX_BYTES);
                r = -EFBIG;
                goto out;
        }
        text = malloc((size_t)size + 1);
        if (!text) {
                r = -ENOMEM;
                set_err(errbuf, errlen, "%s: out of memory", path);
                goto out;
        }
        r = read_full(fd, text, (size_t)size);
        if (r < 0) {
                set_err(errbuf, errlen, "%s: read error: %s", path, strerror(-r));
                goto out;
        }
        /*
         * Lines end with '\n' (the last may lack it); a trailing '\r' is dropped.
         * Each label is UTF-8 (it goes into every JSON line as is) and at most
         * ZCP_LABEL_MAX_BYTES long (so a result line always fits its buffer).
         */
        for (size_t i = 0, line_start = 0; i < size; i++) {
                unsigned char c = (unsigned char)text[i];
                size_t seq;

                if (c == '\n') {
                        lines++;
                        line_start = i + 1;
                        continue;
                }
                if (i - line_start >= ZCP_LABEL_MAX_BYTES && !(c == '\r' && (i + 1 == size || text[i + 1] == '\n'))) {
                        set_err(errbuf, errlen, "%s:%zu: label longer than %u bytes", path, lines + 1,
                                ZCP_LABEL_MAX_BYTES);
                        r = -EINVAL;
                        goto out;
                }
                if (c >= 0x80) {
                        seq = utf8_seq((const unsigned char *)text + i, (size_t)size - i);
                        if (seq == 0) {
                                set_err(errbuf, errlen, "%s:%zu: label is not valid UTF-8 (byte 0x%02x at column %zu)",
                                        path, lines + 1, c, i - line_start + 1);
                                r = -EINVAL;
                                goto out;
                        }
                        i += seq - 1;
                        continue;
                }
                if (c < 0x20 && c != '\t' && !(c == '\r' && i + 1 < size && text[i + 1] == '\n') &&
                    !(c == '\r' && i + 1 == size)) {
                        set_err(errbuf, errlen, "%s:%zu: control character in label", path, lines + 1);
                        r = -EINVAL;
                        goto out;
                }
        }
        if (size > 0 && text[size - 1] != '\n')
                lines++;
        if (lines != model->classes) {
                set_err(errbuf, errlen, "%s: %zu labels, the model has %u classes", path, lines, model->classes);
                r = -EINVAL;
                goto out;
        }
        labels = malloc(lines * sizeof(char *) + (size_t)size + 1);
        if (!labels) {
                r = -ENOMEM;
                set_err(errbuf, errlen, "%s: out of memory", path);
                goto out;
        }
        store = (char *)(labels + lines);
        memcpy(store, text, (size_t)size);
        store[size] = '\n';
        for (size_t i = 0, n = 0; n < lines; i++) {
                if (store[i] != '\n')
                        continue;
                store[i] = '\0';
                if (i > start && store[i - 1] == '\r')
                        store[i - 1] = '\0';
                if (store[start] == '\0') {
                        set_err(errbuf, errlen, "%s:%zu: empty label", path, n + 1);
                        r = -EINVAL;
                        goto out;
                }
                labels[n++] = store + start;
                start = i + 1;
        }
        free(model->labels);
        model->labels = labels;
        labels = NULL;
        r = 0;
out:
        free(labels);
        free(text);
        close(fd);
        return r;
}

void zcp_model_free(struct zcp_model *model)
{
        if (!model)
                return;
        free(model->labels);
        free(model->blob);
        free(model);
}
