/* SPDX-License-Identifier: MIT */
/*
 * TensorFlow.js graph models read: model.json (format "graph-model", modelTopology.node, a
 * weightsManifest of shard paths and weight specs) parsed by jansson, the shards read and
 * decoded into float32 / int32 constants, and the graph's accessors the later steps use
 * (tfjs_plan.c drives them: tfjs_head.c finds the head, tfjs_lower.c makes the ops). Main thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base64.h"
#include "model/graph.h"
#include "model/model.h"

#define JSON_MAX_BYTES    (64u << 20)
#define WEIGHTS_MAX_BYTES (1024ull << 20)
#define NODES_MAX         200000u

int zcp_gerr(const struct zcp_graph *g, const struct zcp_gnode *n, char *err, size_t errlen, const char *fmt, ...)
{
        va_list ap;
        int k;

        if (!err || !errlen)
                return -EINVAL;
        if (n)
                k = snprintf(err, errlen, "%s: node '%s' (%s): ", g->path, n->name, n->op);
        else
                k = snprintf(err, errlen, "%s: ", g->path);
        if (k < 0 || (size_t)k >= errlen)
                k = 0;
        va_start(ap, fmt);
        vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
        va_end(ap);
        for (char *c = err; *c; c++)
                if (*c == '\n' || *c == '\r')
                        *c = ' ';
        return -EINVAL;
}

void zcp_graph_free(struct zcp_graph *g)
{
        if (!g)
                return;
        for (uint32_t i = 0; i < g->n; i++) {
                free(g->nodes[i].in);
                free(g->nodes[i].users);
                free(g->nodes[i].f);
                free(g->nodes[i].i);
        }
        free(g->nodes);
        json_decref(g->doc);
        free(g);
}

uint32_t zcp_graph_find(const struct zcp_graph *g, const char *name)
{
        size_t len = strcspn(name, ":");

        for (uint32_t i = 0; i < g->n; i++)
                if (strlen(g->nodes[i].name) == len && strncmp(g->nodes[i].name, name, len) == 0)
                        return i;
        return UINT32_MAX;
}

/* ------------------------------------------------------------- attributes */

static json_t *attr(const struct zcp_gnode *n, const char *key)
{
        return n->attr ? json_object_get(n->attr, key) : NULL;
}

/* TF.js writes int64 attributes as JSON strings ("2") and sometimes as numbers. */
static bool jint(json_t *v, int64_t *ret)
{
        char *end;
        long long x;

        if (json_is_integer(v)) {
                *ret = json_integer_value(v);
                return true;
        }
        if (!json_is_string(v))
                return false;
        errno = 0;
        x = strtoll(json_string_value(v), &end, 10);
        if (errno || end == json_string_value(v) || *end)
                return false;
        *ret = x;
        return true;
}

bool zcp_gattr_int(const struct zcp_gnode *n, const char *key, int64_t *ret)
{
        json_t *a = attr(n, key);

        return a && jint(json_object_get(a, "i"), ret);
}

bool zcp_gattr_bool(const struct zcp_gnode *n, const char *key, bool *ret)
{
        json_t *a = attr(n, key), *b = a ? json_object_get(a, "b") : NULL;

        if (!a)
                return false;
        if (!b) { /* proto3 leaves false out: {"b": false} may be written as {} */
                *ret = false;
                return json_object_size(a) == 0;
        }
        if (!json_is_boolean(b))
                return false;
        *ret = json_is_true(b);
        return true;
}

/* A base64 string into buf as a C string (refused when it does not fit with its NUL). */
static bool b64decode(const char *in, char *buf, size_t len)
{
        const long n = len ? zcp_base64_decode(in, buf, len - 1, true) : -1;

        if (n < 0)
                return false;
        buf[n] = '\0';
        return true;
}

bool zcp_gattr_str(const struct zcp_gnode *n, const char *key, char *buf, size_t len)
{
        json_t *a = attr(n, key), *s = a ? json_object_get(a, "s") : NULL;

        return json_is_string(s) && b64decode(json_string_value(s), buf, len);
}

bool zcp_gattr_ints(const struct zcp_gnode *n, const char *key, int64_t *ret, uint32_t max, uint32_t *ret_n)
{
        json_t *a = attr(n, key), *l = a ? json_object_get(a, "list") : NULL, *is, *v;
        size_t i;

        if (!a)
                return false;
        *ret_n = 0;
        is = l ? json_object_get(l, "i") : NULL;
        if (!is)
                return json_is_object(l) || json_object_size(a) == 0;   /* an empty list */
        if (!json_is_array(is) || json_array_size(is) > max)
                return false;
        json_array_foreach(is, i, v)
                if (!jint(v, &ret[i]))
                        return false;
        *ret_n = (uint32_t)json_array_size(is);
        return true;
}

void zcp_gattr_strs(const struct zcp_gnode *n, const char *key, char *buf, size_t len)
{
        json_t *a = attr(n, key), *l = a ? json_object_get(a, "list") : NULL;
        json_t *ss = l ? json_object_get(l, "s") : NULL, *v;
        size_t i, o = 0;

        buf[0] = '\0';
        if (!json_is_array(ss))
                return;
        json_array_foreach(ss, i, v) {
                char one[64];
                if (!json_is_string(v) || !b64decode(json_string_value(v), one, sizeof(one)))
                        snprintf(one, sizeof(one), "?");
                o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", i ? "," : "", one);
                if (o >= len)
                        return;
        }
}

const struct zcp_gnode *zcp_gconst(const struct zcp_graph *g, const struct zcp_gnode *n, uint32_t input)
{
        const struct zcp_gnode *c;

        if (input >= n->n_in)
                return NULL;
        c = &g->nodes[zcp_gsource(g, n->in[input])];
        return c->is_const ? c : NULL;
}

uint32_t zcp_gsource(const struct zcp_graph *g, struct zcp_gref r)
{
        uint32_t i = r.node;

        for (uint32_t hops = 0; hops < g->n && strcmp(g->nodes[i].op, "Identity") == 0 && g->nodes[i].n_in == 1;
             hops++)
                i = g->nodes[i].in[0].node;
        return i;
}

bool zcp_gconst_scalar(const struct zcp_gnode *c, float *ret)
{
        if (!c || !c->is_const || c->count != 1)
                return false;
        *ret = c->is_int ? (float)c->i[0] : c->f[0];
        return true;
}

/* ------------------------------------------------------------------- files */

static int read_file(const char *path, size_t max, uint8_t **ret, size_t *ret_len, char *err, size_t errlen)
{
        struct stat st;
        uint8_t *buf = NULL;
        size_t got = 0;
        int fd, r;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                snprintf(err, errlen, "%s: cannot open: %s", path, strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
                snprintf(err, errlen, "%s: not a regular file", path);
                goto out;
        }
        if ((uint64_t)st.st_size > max) {
                r = -EFBIG;
                snprintf(err, errlen, "%s: %lld bytes, over the limit of %zu", path, (long long)st.st_size, max);
                goto out;
        }
        buf = malloc((size_t)st.st_size + 1);
        if (!buf) {
                r = -ENOMEM;
                snprintf(err, errlen, "%s: cannot allocate %lld bytes", path, (long long)st.st_size);
                goto out;
        }
        while (got < (size_t)st.st_size) {
                ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        r = k < 0 ? -errno : -EIO;
                        snprintf(err, errlen, "%s: read failed: %s", path, k < 0 ? strerror(errno) : "short file");
                        goto out;
                }
                got += (size_t)k;
        }
        buf[got] = 0;
        *ret = buf;
        *ret_len = got;
        buf = NULL;
        r = 0;
out:
        free(buf);
        close(fd);
        return r;
}

/* ----------------------------------------------------------------- weights */

static float half_to_float(uint16_t h)
{
        uint32_t sign = (uint32_t)(h >> 15) << 31, exp = h >> 10 & 0x1f, man = h & 0x3ff, bits;
        float f;

        if (exp == 0) {
                f = ldexpf((float)man, -24);   /* zero or subnormal: exact */
                return sign ? -f : f;
        }
        if (exp == 31)
                bits = sign | 0x7f800000u | man << 13;
        else
                bits = sign | (exp + 112) << 23 | man << 13;
        memcpy(&f, &bits, sizeof(f));
        return f;
}

struct wspec {
        const char *name, *dtype, *qdtype;
        uint32_t rank;
        int64_t dims[ZCP_GRAPH_RANK_MAX];
        size_t count;
        double qscale, qmin;
};

static int parse_spec(const struct zcp_graph *g, json_t *w, struct wspec *s, char *err, size_t errlen)
{
        json_t *shape = json_object_get(w, "shape"), *q = json_object_get(w, "quantization"), *d;
        size_t i;

        memset(s, 0, sizeof(*s));
        s->name = json_string_value(json_object_get(w, "name"));
        s->dtype = json_string_value(json_object_get(w, "dtype"));
        if (!s->name || !s->dtype || !json_is_array(shape) || json_array_size(shape) > ZCP_GRAPH_RANK_MAX)
                return zcp_gerr(g, NULL, err, errlen, "a weight without name, dtype or shape (or of rank over %d)",
                                ZCP_GRAPH_RANK_MAX);
        s->count = 1;
        s->rank = (uint32_t)json_array_size(shape);
        json_array_foreach(shape, i, d) {
                if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > (1 << 28))
                        return zcp_gerr(g, NULL, err, errlen, "weight '%s': bad shape", s->name);
                s->dims[i] = json_integer_value(d);
                if (s->count > (1ull << 30) / ((size_t)s->dims[i] + 1))
                        return zcp_gerr(g, NULL, err, errlen, "weight '%s': too large", s->name);
                s->count *= (size_t)s->dims[i];
        }
        if (strcmp(s->dtype, "float32") != 0 && strcmp(s->dtype, "int32") != 0)
                return zcp_gerr(g, NULL, err, errlen, "weight '%s': dtype %s not supported (float32, int32)",
                                s->name, s->dtype);
        if (q) {
                s->qdtype = json_string_value(json_object_get(q, "dtype"));
                if (!s->qdtype || (strcmp(s->qdtype, "float16") && strcmp(s->qdtype, "uint8") &&
                                   strcmp(s->qdtype, "uint16")))
                        return zcp_gerr(g, NULL, err, errlen,
                                        "weight '%s': quantization %s not supported (float16, uint8, uint16)", s->name,
                                        s->qdtype ? s->qdtype : "without dtype");
                if (strcmp(s->qdtype, "float16") != 0) {
                        json_t *sc = json_object_get(q, "scale"), *mn = json_object_get(q, "min");
                        if (!json_is_number(sc) || !json_is_number(mn))
                                return zcp_gerr(g, NULL, err, errlen, "weight '%s': quantization without scale/min",
                                                s->name);
                        s->qscale = json_number_value(sc);
                        s->qmin = json_number_value(mn);
                }
        }
        return 0;
}

static size_t spec_bytes(const struct wspec *s)
{
        if (!s->qdtype)
                return s->count * 4;
        return s->count * (strcmp(s->qdtype, "uint8") == 0 ? 1 : 2);
}

/* Decodes one weight from its bytes into the Const node of the same name. */
static int decode(struct zcp_graph *g, const struct wspec *s, const uint8_t *b, char *err, size_t errlen)
{
        uint32_t ni = zcp_graph_find(g, s->name);
        struct zcp_gnode *n;
        bool is_int = strcmp(s->dtype, "int32") == 0;

        if (ni == UINT32_MAX)
                return 0;   /* a weight no node uses */
        n = &g->nodes[ni];
        if (strcmp(n->op, "Const") != 0)
                return zcp_gerr(g, n, err, errlen, "a weight of this name, but the node is not a Const");
        if (n->is_const)
                return zcp_gerr(g, n, err, errlen, "two weights of this name");
        n->is_const = true;
        n->is_int = is_int;
        n->rank = s->rank;
        memcpy(n->dims, s->dims, sizeof(n->dims));
        n->count = s->count;
        if (is_int)
                n->i = malloc(sizeof(int32_t) * (s->count ? s->count : 1));
        else
                n->f = malloc(sizeof(float) * (s->count ? s->count : 1));
        if (!n->i && !n->f)
                return zcp_gerr(g, n, err, errlen, "cannot allocate %zu values", s->count);
        for (size_t k = 0; k < s->count; k++) {
                double v;
                if (!s->qdtype) {
                        uint32_t u;
                        memcpy(&u, b + 4 * k, 4);
                        if (is_int) {
                                n->i[k] = (int32_t)u;
                                continue;
                        }
                        memcpy(&n->f[k], &u, 4);
                        v = n->f[k];
                } else if (strcmp(s->qdtype, "float16") == 0) {
                        uint16_t h;
                        memcpy(&h, b + 2 * k, 2);
                        v = half_to_float(h);
                } else if (strcmp(s->qdtype, "uint8") == 0) {
                        v = (double)b[k] * s->qscale + s->qmin;   /* TF.js: in doubles, then float32 */
                } else {
                        uint16_t h;
                        memcpy(&h, b + 2 * k, 2);
                        v = (double)h * s->qscale + s->qmin;
                }
                if (is_int) {
                        n->i[k] = (int32_t)lrint(v);
                        continue;
                }
                n->f[k] = (float)v;
                /* A NaN or an infinity in a weight is a damaged shard or manifest: say
                 * which weight, rather than let the plan's own check refuse it anonymously. */
                if (!isfinite(n->f[k]))
                        return zcp_gerr(g, NULL, err, errlen,
                                        "weight '%s': value %zu of %zu is not finite (%g); the model's weights "
                                        "are damaged",
                                        s->name, k, s->count, (double)n->f[k]);
        }
        return 0;
}

/* A shard path as the manifest names it, beside model.json; no absolute paths, no "..". */
static int shard_path(const struct zcp_graph *g, const char *name, char *buf, size_t len, char *err, size_t errlen)
{
        const char *slash = strrchr(g->path, '/');
        int dir = slash ? (int)(slash - g->path) + 1 : 0;

        if (!name[0] || name[0] == '/' || strstr(name, "..") || strchr(name, '\\') || strchr(name, '?'))
                return zcp_gerr(g, NULL, err, errlen, "weight shard path '%s' refused (a file beside model.json)",
                                name);
        if (snprintf(buf, len, "%.*s%s", dir, g->path, name) >= (int)len)
                return zcp_gerr(g, NULL, err, errlen, "weight shard path '%s' too long", name);
        return 0;
}

static int read_group(struct zcp_graph *g, json_t *grp, size_t *total, char *err, size_t errlen)
{
        json_t *paths = json_object_get(grp, "paths"), *weights = json_object_get(grp, "weights"), *v;
        uint8_t *buf = NULL;
        size_t len = 0, off = 0, i;
        int r;

        if (!json_is_array(paths) || !json_is_array(weights))
                return zcp_gerr(g, NULL, err, errlen, "weightsManifest entry without paths and weights");
        /* The group's shards, concatenated in order, hold its weights back to back. */
        json_array_foreach(paths, i, v) {
                char path[4096];
                uint8_t *part;
                size_t plen;

                if (!json_is_string(v))
                        return zcp_gerr(g, NULL, err, errlen, "a weight shard path is not a string");
                if ((r = shard_path(g, json_string_value(v), path, sizeof(path), err, errlen)) < 0)
                        goto out;
                if ((r = read_file(path, WEIGHTS_MAX_BYTES, &part, &plen, err, errlen)) < 0)
                        goto out;
                if (*total + plen > WEIGHTS_MAX_BYTES) {
                        free(part);
                        r = zcp_gerr(g, NULL, err, errlen, "weights over %llu bytes", WEIGHTS_MAX_BYTES);
                        goto out;
                }
                *total += plen;
                uint8_t *nb = realloc(buf, len + plen + 1);
                if (!nb) {
                        free(part);
                        r = zcp_gerr(g, NULL, err, errlen, "cannot allocate %zu bytes of weights", len + plen);
                        goto out;
                }
                buf = nb;
                memcpy(buf + len, part, plen);
                len += plen;
                free(part);
        }
        json_array_foreach(weights, i, v) {
                struct wspec s;
                if ((r = parse_spec(g, v, &s, err, errlen)) < 0)
                        goto out;
                if (spec_bytes(&s) > len - off) {
                        r = zcp_gerr(g, NULL, err, errlen,
                                     "weight '%s' needs %zu bytes at offset %zu; its shards hold %zu (truncated?)",
                                     s.name, spec_bytes(&s), off, len);
                        goto out;
                }
                if ((r = decode(g, &s, buf + off, err, errlen)) < 0)
                        goto out;
                off += spec_bytes(&s);
        }
        r = off == len ? 0
                       : zcp_gerr(g, NULL, err, errlen, "the shards hold %zu bytes, the weights %zu", len, off);
out:
        free(buf);
        return r;
}

/* ------------------------------------------------------------------- nodes */

static int parse_nodes(struct zcp_graph *g, json_t *nodes, char *err, size_t errlen)
{
        json_t *v;
        size_t i;

        g->n = (uint32_t)json_array_size(nodes);
        g->nodes = calloc(g->n ? g->n : 1, sizeof(*g->nodes));
        if (!g->nodes)
                return zcp_gerr(g, NULL, err, errlen, "cannot allocate %u nodes", g->n);
        json_array_foreach(nodes, i, v) {
                struct zcp_gnode *n = &g->nodes[i];
                n->name = json_string_value(json_object_get(v, "name"));
                n->op = json_string_value(json_object_get(v, "op"));
                n->attr = json_object_get(v, "attr");
                if (!n->name || !n->op || (n->attr && !json_is_object(n->attr)))
                        return zcp_gerr(g, NULL, err, errlen, "node %zu without a name or op", i);
                for (size_t j = 0; j < i; j++)
                        if (strcmp(g->nodes[j].name, n->name) == 0)
                                return zcp_gerr(g, n, err, errlen, "two nodes of this name");
        }
        json_array_foreach(nodes, i, v) {
                struct zcp_gnode *n = &g->nodes[i];
                json_t *ins = json_object_get(v, "input"), *in;
                size_t k;

                if (!ins)
                        continue;
                if (!json_is_array(ins))
                        return zcp_gerr(g, n, err, errlen, "input is not a list");
                n->in = calloc(json_array_size(ins) + 1, sizeof(*n->in));
                if (!n->in)
                        return -ENOMEM;
                json_array_foreach(ins, k, in) {
                        const char *s = json_string_value(in), *colon;
                        uint32_t src;
                        long port = 0;

                        if (!s)
                                return zcp_gerr(g, n, err, errlen, "an input is not a string");
                        if (s[0] == '^')
                                continue;   /* a control dependency: order only */
                        src = zcp_graph_find(g, s);
                        if (src == UINT32_MAX)
                                return zcp_gerr(g, n, err, errlen, "input '%s' names no node", s);
                        colon = strchr(s, ':');
                        if (colon) {
                                char *end;
                                port = strtol(colon + 1, &end, 10);
                                if (*end || port < 0 || port > 64)
                                        return zcp_gerr(g, n, err, errlen, "input '%s': bad output index", s);
                        }
                        n->in[n->n_in++] = (struct zcp_gref){ .node = src, .port = (uint32_t)port };
                }
        }
        /* users */
        for (uint32_t a = 0; a < g->n; a++)
                for (uint32_t k = 0; k < g->nodes[a].n_in; k++)
                        g->nodes[g->nodes[a].in[k].node].n_users++;
        for (uint32_t a = 0; a < g->n; a++) {
                g->nodes[a].users = calloc(g->nodes[a].n_users + 1, sizeof(uint32_t));
                if (!g->nodes[a].users)
                        return -ENOMEM;
                g->nodes[a].n_users = 0;
        }
        for (uint32_t a = 0; a < g->n; a++)
                for (uint32_t k = 0; k < g->nodes[a].n_in; k++) {
                        struct zcp_gnode *src = &g->nodes[g->nodes[a].in[k].node];
                        src->users[src->n_users++] = a;
                }
        return 0;
}

int zcp_graph_read(const char *path, struct zcp_graph **ret, char *err, size_t errlen)
{
        struct zcp_graph *g = calloc(1, sizeof(*g));
        json_t *topo, *nodes, *manifest, *grp;
        json_error_t je;
        uint8_t *text = NULL;
        size_t len, i, total = 0;
        const char *fmt, *by;
        int r;

        if (!g)
                return -ENOMEM;
        g->path = path;
        if ((r = read_file(path, JSON_MAX_BYTES, &text, &len, err, errlen)) < 0)
                goto fail;
        g->doc = json_loadb((const char *)text, len, JSON_REJECT_DUPLICATES, &je);
        free(text);
        if (!g->doc) {
                r = zcp_gerr(g, NULL, err, errlen, "line %d column %d: %s", je.line, je.column, je.text);
                goto fail;
        }
        fmt = json_string_value(json_object_get(g->doc, "format"));
        topo = json_object_get(g->doc, "modelTopology");
        nodes = topo ? json_object_get(topo, "node") : NULL;
        manifest = json_object_get(g->doc, "weightsManifest");
        if (!json_is_object(g->doc) || (fmt && strcmp(fmt, "graph-model") != 0) || !json_is_array(nodes) ||
            !json_is_array(manifest)) {
                r = zcp_gerr(g, NULL, err, errlen,
                             "not a TensorFlow.js graph model (format \"graph-model\", modelTopology.node and "
                             "weightsManifest expected%s%s)",
                             fmt ? "; format is " : "", fmt ? fmt : "");
                goto fail;
        }
        if (json_array_size(nodes) > NODES_MAX) {
                r = zcp_gerr(g, NULL, err, errlen, "%zu nodes, over %u", json_array_size(nodes), NODES_MAX);
                goto fail;
        }
        by = json_string_value(json_object_get(g->doc, "convertedBy"));
        if (!by)
                by = json_string_value(json_object_get(g->doc, "generatedBy"));
        snprintf(g->provenance, sizeof(g->provenance), "%s", by ? by : "");
        if ((r = parse_nodes(g, nodes, err, errlen)) < 0)
                goto fail;
        json_array_foreach(manifest, i, grp)
                if ((r = read_group(g, grp, &total, err, errlen)) < 0)
                        goto fail;
        for (uint32_t k = 0; k < g->n; k++)
                if (strcmp(g->nodes[k].op, "Const") == 0 && !g->nodes[k].is_const &&
                    g->nodes[k].n_users > 0) {
                        r = zcp_gerr(g, &g->nodes[k], err, errlen, "a constant missing from the weights manifest");
                        goto fail;
                }
        *ret = g;
        return 0;
fail:
        zcp_graph_free(g);
        return r;
}
