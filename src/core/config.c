/* SPDX-License-Identifier: MIT */
/*
 * Configuration loader (config.h). libyaml events are first turned into a
 * small node tree (config_tree.c: rejecting syntax errors, anchors, aliases,
 * tags and extra documents), then the one table-driven walker here fills the
 * structs: every section is a table of key descriptors (config_schema.c:
 * name, type, offset, range, enum names), so unknown, duplicate, mistyped
 * and out-of-range keys are all caught in one place. Cross-key rules run
 * after each section, at the offending key. Every error is one line
 * "FILE:LINE:COL: message" (1-based libyaml marks).
 *
 * The loader's files call each other in one direction: config.c (reading
 * the file, the walker, scalar values) -> config_schema.c (the tables, the
 * rules, the defaults) -> config_tree.c (the node tree, the errors).
 *
 * Main thread only; no global state. Everything allocated here is freed on
 * every path except the returned struct, which the caller owns.
 */
#include "core/config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config_schema.h"
#include "core/config_tree.h"
#include "core/err.h"

void zcp_config_free(struct zcp_config *config)
{
        free(config);
}

bool zcp_stream_config_changed(const struct zcp_stream_config *a, const struct zcp_stream_config *b)
{
        /* Every config is calloc'ed and strings are written with their tail
         * zeroed, so padding and unused bytes compare equal. Which head keys were
         * written (for a warning) is no setting: compared as equal. */
        const size_t at = offsetof(struct zcp_stream_config, model) + offsetof(struct zcp_model_config, head_keys);
        const size_t end = at + sizeof(a->model.head_keys);

        return memcmp(a, b, at) != 0 || memcmp((const char *)a + end, (const char *)b + end, sizeof(*a) - end) != 0;
}

/* ---- scalar values ---------------------------------------------------------- */

static bool has_uri_scheme(const char *s)
{
        if (!isalpha((unsigned char)s[0]))
                return false;
        while (isalnum((unsigned char)*s) || *s == '+' || *s == '.' || *s == '-')
                s++;
        return strncmp(s, "://", 3) == 0;
}

/* dst = base_dir joined with rel, with leading "./" and "../" folded into base_dir. */
static int resolve_path(const char *base_dir, const char *rel, char *dst, size_t size)
{
        char dir[ZCP_PATH_MAX];
        const char *s = rel;
        int n;

        if (snprintf(dir, sizeof(dir), "%s", base_dir) >= (int)sizeof(dir))
                return -ENAMETOOLONG;
        for (;;) {
                if (s[0] == '.' && (s[1] == '/' || s[1] == '\0')) {
                        s += 1;
                } else if (s[0] == '.' && s[1] == '.' && (s[2] == '/' || s[2] == '\0')) {
                        /* base_dir is canonical (no symlinks), so this is exact. */
                        char *slash = strrchr(dir, '/');
                        if (slash == dir)
                                dir[1] = '\0';
                        else if (slash)
                                *slash = '\0';
                        s += 2;
                } else {
                        break;
                }
                while (*s == '/')
                        s++;
        }
        memset(dst, 0, size);
        if (*s == '\0')
                n = snprintf(dst, size, "%s", dir);
        else
                n = snprintf(dst, size, "%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", s);
        if (n < 0 || (size_t)n >= size) {
                memset(dst, 0, size);
                return -ENAMETOOLONG;
        }
        return 0;
}

enum num_status { NUM_OK, NUM_SYNTAX, NUM_RANGE };

static enum num_status parse_uint(const struct node *v, uint64_t *ret)
{
        const char *s = v->value;
        unsigned long long x;
        char *end;

        if (s[0] == '-' && isdigit((unsigned char)s[1])) {
                /* A negative integer is a number, just not one we accept. */
                for (s++; isdigit((unsigned char)*s); s++)
                        ;
                return *s == '\0' && s == v->value + v->len ? NUM_RANGE : NUM_SYNTAX;
        }
        if (!isdigit((unsigned char)s[0]))
                return NUM_SYNTAX;
        errno = 0;
        x = strtoull(s, &end, 10);
        if (end != v->value + v->len)
                return NUM_SYNTAX;
        if (errno == ERANGE)
                return NUM_RANGE;
        *ret = x;
        return NUM_OK;
}

/* A byte count: digits and an optional K, M, G or T (powers of 1024, "KiB"/"KB" spellings too). */
static enum num_status parse_size(const struct node *v, uint64_t *ret)
{
        static const char units[] = "KMGT";
        char digits[32];
        size_t n = strspn(v->value, "0123456789");
        const char *u = v->value + n, *at;
        struct node num = *v;
        enum num_status st;
        uint64_t x;
        unsigned shift = 0;

        if (n == 0 || n >= sizeof(digits))
                return n == 0 ? NUM_SYNTAX : NUM_RANGE;
        if (*u) {
                at = strchr(units, toupper((unsigned char)*u));
                if (!at || !*at)
                        return NUM_SYNTAX;
                shift = 10u * (unsigned)(at - units + 1);
                u++;
                if (*u == 'i')
                        u++;
                if (*u == 'B' || *u == 'b')
                        u++;
                if (*u || (size_t)(u - v->value) != v->len)
                        return NUM_SYNTAX;
        }
        memcpy(digits, v->value, n);
        digits[n] = '\0';
        num.value = digits;
        num.len = n;
        st = parse_uint(&num, &x);
        if (st != NUM_OK)
                return st;
        if (shift && x > (UINT64_MAX >> shift))
                return NUM_RANGE;
        *ret = x << shift;
        return NUM_OK;
}

static enum num_status parse_float(const struct node *v, double *ret)
{
        const char *s = v->value;
        bool digit = false;
        double x;
        char *end;

        /* Decimal notation only: no hex floats, no nan/inf spellings. */
        for (size_t i = 0; i < v->len; i++) {
                if (isdigit((unsigned char)s[i]))
                        digit = true;
                else if (!strchr("+-.eE", s[i]) || s[i] == '\0')
                        return NUM_SYNTAX;
        }
        if (!digit)
                return NUM_SYNTAX;
        errno = 0;
        x = strtod(s, &end);
        if (end != s + v->len)
                return NUM_SYNTAX;
        if (errno == ERANGE || !isfinite(x))
                return NUM_RANGE;
        *ret = x;
        return NUM_OK;
}

static void join_names(const char *const *names, int count, char *buf, size_t size)
{
        size_t o = 0;

        buf[0] = '\0';
        for (int i = 0; i < count && o < size; i++) {
                int n = snprintf(buf + o, size - o, "%s%s", i ? ", " : "", names[i]);
                if (n < 0)
                        break;
                o += (size_t)n;
        }
}

static int type_error(struct ctx *c, const struct section *sec, const struct key_desc *d,
                      const struct node *v, const char *expected)
{
        if (v->kind == NODE_SCALAR && !node_is_null(v))
                return err_at(c, &v->mark, "%s%s: expected %s, got %s '%s'", sec->prefix, d->name,
                              expected, node_kind_name(v), show(v->value, v->len).s);
        return err_at(c, &v->mark, "%s%s: expected %s, got %s", sec->prefix, d->name, expected,
                      node_kind_name(v));
}

static int range_error(struct ctx *c, const struct section *sec, const struct key_desc *d,
                       const struct node *v)
{
        if (d->type == K_FLOAT || d->type == K_FLOAT3)
                return err_at(c, &v->mark, "%s%s: %s is out of range %c%g, %g]", sec->prefix, d->name,
                              show(v->value, v->len).s, d->flags & F_MIN_EXCL ? '(' : '[', d->fmin,
                              d->fmax);
        return err_at(c, &v->mark, "%s%s: %s is out of range (%s%s%llu..%llu)", sec->prefix, d->name,
                      show(v->value, v->len).s, d->flags & F_AUTO ? "auto or " : "", d->flags & F_ZERO_OK ? "0 or " : "",
                      (unsigned long long)d->umin, (unsigned long long)d->umax);
}

static int parse_number(struct ctx *c, const struct section *sec, const struct key_desc *d,
                        const struct node *v, double *ret)
{
        enum num_status st;
        double x = 0;

        if (v->kind != NODE_SCALAR || !v->plain || node_is_null(v))
                return type_error(c, sec, d, v, "a number");
        st = parse_float(v, &x);
        if (st == NUM_SYNTAX)
                return type_error(c, sec, d, v, "a number");
        if (st == NUM_RANGE || x > d->fmax || x < d->fmin || ((d->flags & F_MIN_EXCL) && x <= d->fmin))
                return range_error(c, sec, d, v);
        /* Stored as float: a value that becomes 0 or denormal there (a divisor, a rate) is refused. */
        if (x != 0 && !isnormal((float)x))
                return err_at(c, &v->mark, "%s%s: %s is too small for single precision (|x| >= %g, or 0)", sec->prefix,
                              d->name, show(v->value, v->len).s, (double)FLT_MIN);
        *ret = x;
        return 0;
}

static bool valid_name(const char *s)
{
        if (!*s)
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && *s != '_' && *s != '.' && *s != '-')
                        return false;
        return true;
}

static int parse_section(struct ctx *c, const struct node *key, const struct node *n,
                         const struct section *sec, void *base, struct seen *ret_seen);
static int parse_streams(struct ctx *c, const struct node *key, const struct node *v,
                         struct zcp_config *cfg);

/* A sequence of names, or one name: non-empty, without ',', joined with ',' into field. */
static int parse_names(struct ctx *c, const struct section *sec, const struct key_desc *d, const struct node *v,
                       char *field)
{
        const struct node *one[1] = { v };
        const struct node *const *items = v->kind == NODE_SEQ ? (const struct node *const *)v->kids : one;
        size_t n = v->kind == NODE_SEQ ? v->n : 1, used = 0;

        if (v->kind != NODE_SEQ && v->kind != NODE_SCALAR)
                return type_error(c, sec, d, v, "a list of names");
        field[0] = '\0';
        for (size_t i = 0; i < n; i++) {
                const struct node *it = items[i];
                if (it->kind != NODE_SCALAR || it->len == 0 || strlen(it->value) != it->len ||
                    memchr(it->value, ',', it->len))
                        return err_at(c, &it->mark, "%s%s: each entry must be a non-empty name without ','",
                                      sec->prefix, d->name);
                if (used + it->len + 2 > d->size)
                        return err_at(c, &it->mark, "%s%s: too long (at most %zu characters in all)", sec->prefix,
                                      d->name, d->size - 1);
                used += (size_t)snprintf(field + used, d->size - used, "%s%s", used ? "," : "", it->value);
        }
        return 0;
}

static int parse_value(struct ctx *c, const struct section *sec, const struct key_desc *d,
                       const struct node *k, const struct node *v, void *base)
{
        char *field = (char *)base + d->offset;
        struct seen sub_seen;
        char list[256];
        enum num_status st;
        uint64_t u = 0;
        double x = 0;
        float f3[3];
        bool b;
        int idx, r;

        switch (d->type) {
        case K_SECTION:
                return parse_section(c, k, v, d->sub, field, &sub_seen);
        case K_STREAMS:
                return parse_streams(c, k, v, base);
        case K_NAMES:
                return parse_names(c, sec, d, v, field);
        case K_FLOAT3:
                if (v->kind != NODE_SEQ)
                        return type_error(c, sec, d, v, "a sequence of 3 numbers");
                if (v->n != 3)
                        return err_at(c, &v->mark, "%s%s: expected exactly 3 numbers, got %zu", sec->prefix,
                                      d->name, v->n);
                for (size_t i = 0; i < 3; i++) {
                        r = parse_number(c, sec, d, v->kids[i], &x);
                        if (r < 0)
                                return r;
                        f3[i] = (float)x;
                }
                memcpy(field, f3, sizeof(f3));
                return 0;
        default:
                break;
        }

        if (v->kind != NODE_SCALAR) {
                static const char *const what[] = {
                        [K_U32] = "an unsigned integer", [K_U64] = "an unsigned integer",
                        [K_FLOAT] = "a number",           [K_BOOL] = "a boolean",
                        [K_ENUM] = "a name",              [K_STR] = "a string",
                        [K_PATH] = "a path",              [K_URIPATH] = "a path or URI",
                };
                return type_error(c, sec, d, v, what[d->type]);
        }

        switch (d->type) {
        case K_U32:
        case K_U64:
                if (!v->plain || node_is_null(v))
                        return type_error(c, sec, d, v, d->flags & F_AUTO ? "auto or an unsigned integer"
                                                                          : "an unsigned integer");
                if ((d->flags & F_AUTO) && strcmp(v->value, "auto") == 0) {
                        uint32_t u32 = UINT32_MAX;
                        memcpy(field, &u32, sizeof(u32));
                        return 0;
                }
                st = (d->flags & F_SIZE) ? parse_size(v, &u) : parse_uint(v, &u);
                if (st == NUM_SYNTAX)
                        return type_error(c, sec, d, v,
                                          (d->flags & F_SIZE)   ? "a byte count (e.g. 536870912, 512M, 4G)"
                                          : (d->flags & F_AUTO) ? "auto or an unsigned integer"
                                                                : "an unsigned integer");
                if (st == NUM_RANGE || ((u < d->umin || u > d->umax) && !(u == 0 && (d->flags & F_ZERO_OK))))
                        return range_error(c, sec, d, v);
                if ((d->flags & F_EVEN) && (u & 1))
                        return err_at(c, &k->mark, "%s%s must be even (got %llu)", sec->prefix, d->name,
                                      (unsigned long long)u);
                if (d->type == K_U32) {
                        uint32_t u32 = (uint32_t)u;
                        memcpy(field, &u32, sizeof(u32));
                } else {
                        memcpy(field, &u, sizeof(u));
                }
                return 0;
        case K_FLOAT:
                r = parse_number(c, sec, d, v, &x);
                if (r < 0)
                        return r;
                f3[0] = (float)x;
                memcpy(field, &f3[0], sizeof(float));
                return 0;
        case K_BOOL:
                /* YAML 1.1 spellings, lowercase only; quoted values are strings. */
                if (!v->plain)
                        return type_error(c, sec, d, v, "a boolean (true/false, yes/no, on/off)");
                if (!strcmp(v->value, "true") || !strcmp(v->value, "yes") || !strcmp(v->value, "on"))
                        b = true;
                else if (!strcmp(v->value, "false") || !strcmp(v->value, "no") || !strcmp(v->value, "off"))
                        b = false;
                else
                        return type_error(c, sec, d, v, "a boolean (true/false, yes/no, on/off)");
                memcpy(field, &b, sizeof(b));
                return 0;
        case K_ENUM:
                idx = strlen(v->value) == v->len ? zcp_enum_from_name(d->names, d->count, v->value) : -1;
                if (idx < 0) {
                        join_names(d->names, d->count, list, sizeof(list));
                        return err_at(c, &v->mark, "%s%s: bad value '%s' (valid: %s)", sec->prefix, d->name,
                                      show(v->value, v->len).s, list);
                }
                memcpy(field, &idx, sizeof(idx));
                return 0;
        case K_STR:
        case K_PATH:
        case K_URIPATH:
                if (strlen(v->value) != v->len)
                        return err_at(c, &v->mark, "%s%s: contains a NUL character", sec->prefix, d->name);
                if ((d->flags & F_NONEMPTY) && v->len == 0)
                        return err_at(c, &v->mark, "%s%s must not be empty", sec->prefix, d->name);
                if ((d->flags & F_NAME) && !valid_name(v->value))
                        return err_at(c, &v->mark, "%s%s: '%s' may contain only A-Z a-z 0-9 _ . -",
                                      sec->prefix, d->name, show(v->value, v->len).s);
                if (d->type != K_STR && v->len > 0 && v->value[0] != '/' && c->base_dir &&
                    !(d->type == K_URIPATH && has_uri_scheme(v->value))) {
                        if (resolve_path(c->base_dir, v->value, field, d->size) < 0)
                                return err_at(c, &v->mark, "%s%s: path too long once resolved against %s",
                                              sec->prefix, d->name, c->base_dir);
                        return 0;
                }
                if (v->len >= d->size)
                        return err_at(c, &v->mark, "%s%s: too long (at most %zu characters)", sec->prefix,
                                      d->name, d->size - 1);
                set_str(field, d->size, v->value);
                return 0;
        default:
                break;
        }
        return err_at(c, &v->mark, "internal error: bad key type");
}

static unsigned edit_distance(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        unsigned row[65];

        if (la > 64 || lb > 64)
                return UINT_MAX;
        for (size_t j = 0; j <= lb; j++)
                row[j] = (unsigned)j;
        for (size_t i = 1; i <= la; i++) {
                unsigned diag = row[0];
                row[0] = (unsigned)i;
                for (size_t j = 1; j <= lb; j++) {
                        unsigned up = row[j];
                        unsigned best = diag + (a[i - 1] != b[j - 1]);
                        if (up + 1 < best)
                                best = up + 1;
                        if (row[j - 1] + 1 < best)
                                best = row[j - 1] + 1;
                        row[j] = best;
                        diag = up;
                }
        }
        return row[lb];
}

/*
 * --check (ZCP_CONFIG_READ_FILES): the file a key names can be opened and
 * read by this process, as the running service will read it; a secret
 * (F_SECRET) must be closed to group and others, as the MQTT sink insists.
 */
static int check_readable(struct ctx *c, const struct section *sec, const struct key_desc *d,
                          const struct node *v, const char *path)
{
        char who[96] = "";
        struct stat st;
        char byte;
        int fd, r = 0;

        if (!path[0] || has_uri_scheme(path))
                return 0;
        if (geteuid() != 0)
                snprintf(who, sizeof(who), " as uid %u", (unsigned)geteuid());
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                r = -errno;
                return errv_at(c, r, &v->mark, "%s%s: cannot open %s%s: %s", sec->prefix, d->name, path, who,
                               zcp_strerror(r));
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
        } else if (S_ISDIR(st.st_mode)) {
                r = -EISDIR;
        } else if (S_ISREG(st.st_mode) && (d->flags & F_SECRET) && (st.st_mode & (S_IRWXG | S_IRWXO))) {
                r = errv_at(c, -EPERM, &v->mark, "%s%s: %s is open to group or others (mode %04o): chmod 600 it, "
                            "so that only its owner (the user zcpipe runs as) may read it",
                            sec->prefix, d->name, path, (unsigned)(st.st_mode & 07777));
                goto out;
        } else if (S_ISREG(st.st_mode) && st.st_size > 0 && read(fd, &byte, 1) < 0) {
                r = -errno;
        }
        if (r < 0)
                errv_at(c, r, &v->mark, "%s%s: cannot read %s%s: %s", sec->prefix, d->name, path, who,
                        zcp_strerror(r));
out:
        close(fd);
        return r;
}

/*
 * Reads the mapping `n` into `base` by the table of `sec`. An error in one
 * key is reported and the walk goes on with the next, so that one load
 * reports every error; the section's cross-key check runs when all its keys
 * were read without error (a check on a half-read section would only add
 * noise). Returns 0 or -EINVAL (or the first error's code).
 */
static int parse_section(struct ctx *c, const struct node *key, const struct node *n,
                         const struct section *sec, void *base, struct seen *ret_seen)
{
        struct seen *s = ret_seen;
        unsigned errors = c->errors;

        memset(s, 0, sizeof(*s));
        s->at = key ? key->mark : n->mark;
        if (n->kind != NODE_MAP && !node_is_null(n)) {
                if (n->kind == NODE_SCALAR)
                        return err_at(c, &n->mark, "%s: expected a mapping, got %s '%s'", sec->name,
                                      node_kind_name(n), show(n->value, n->len).s);
                return err_at(c, &n->mark, "%s: expected a mapping, got %s", sec->name, node_kind_name(n));
        }
        for (size_t i = 0; n->kind == NODE_MAP && i + 1 < n->n && !too_many_errors(c); i += 2) {
                const struct node *k = n->kids[i], *v = n->kids[i + 1];
                size_t j;

                if (k->kind != NODE_SCALAR) {
                        err_at(c, &k->mark, "keys must be plain names, got %s in %s", node_kind_name(k), sec->name);
                        continue;
                }
                for (j = 0; j < sec->count; j++)
                        if (strlen(k->value) == k->len && strcmp(sec->keys[j].name, k->value) == 0)
                                break;
                if (j == sec->count) {
                        unsigned best = 3;
                        const char *hint = NULL;
                        for (size_t t = 0; t < sec->count; t++) {
                                unsigned dist = edit_distance(k->value, sec->keys[t].name);
                                if (dist < best) {
                                        best = dist;
                                        hint = sec->keys[t].name;
                                }
                        }
                        if (hint)
                                err_at(c, &k->mark, "unknown key '%s' in %s (did you mean '%s'?)",
                                       show(k->value, k->len).s, sec->name, hint);
                        else
                                err_at(c, &k->mark, "unknown key '%s' in %s", show(k->value, k->len).s, sec->name);
                        continue;
                }
                if (s->mask & (1u << j)) {
                        err_at(c, &k->mark, "duplicate key '%s' in %s (first at line %zu)", sec->keys[j].name,
                               sec->name, s->key[j]->mark.line + 1);
                        continue;
                }
                s->mask |= 1u << j;
                s->key[j] = k;
                s->val[j] = v;
                parse_value(c, sec, &sec->keys[j], k, v, base);
        }
        if (c->errors == errors && sec->check)
                sec->check(c, base, s);
        /* --check: the files this section names, once it is known to be right */
        if (c->read_files && c->errors == errors)
                for (size_t j = 0; j < sec->count; j++)
                        if ((s->mask & (1u << j)) && (sec->keys[j].flags & (F_READ | F_SECRET)))
                                check_readable(c, sec, &sec->keys[j], s->val[j],
                                               (const char *)base + sec->keys[j].offset);
        return c->errors == errors ? 0 : c->first_err;
}

static int parse_streams(struct ctx *c, const struct node *key, const struct node *v,
                         struct zcp_config *cfg)
{
        const struct node *name_node[ZCP_CONFIG_MAX_STREAMS];
        unsigned errors = c->errors;
        uint32_t n_gst = 0;
        size_t count;
        struct seen s;

        if (node_is_null(v) || (v->kind == NODE_SEQ && v->n == 0))
                return err_at(c, &key->mark, "streams must list at least one stream");
        if (v->kind != NODE_SEQ) {
                if (v->kind == NODE_SCALAR)
                        return err_at(c, &v->mark, "streams: expected a sequence of streams, got %s '%s'",
                                      node_kind_name(v), show(v->value, v->len).s);
                return err_at(c, &v->mark, "streams: expected a sequence of streams, got %s",
                              node_kind_name(v));
        }
        count = v->n;
        if (count > ZCP_CONFIG_MAX_STREAMS) {
                err_at(c, &v->kids[ZCP_CONFIG_MAX_STREAMS]->mark, "too many streams (%zu, at most %d)", v->n,
                       ZCP_CONFIG_MAX_STREAMS);
                count = ZCP_CONFIG_MAX_STREAMS;   /* the first ones are still checked */
        }
        for (size_t i = 0; i < count && !too_many_errors(c); i++) {
                struct zcp_stream_config *st = &cfg->streams[i];
                const struct node *item = v->kids[i];

                zcp_config_stream_defaults(st);
                parse_section(c, NULL, item, &zcp_config_stream_section, st, &s);
                if (st->model.path[0] == '\0')
                        set_str(st->model.path, sizeof(st->model.path), zcp_config_default_weights());
                if ((item->kind == NODE_MAP || node_is_null(item)) && !(s.mask & (1u << STREAM_SOURCE)))
                        err_at(c, &item->mark, "stream %zu: missing required section 'source'", i);
                name_node[i] = (s.mask & (1u << STREAM_NAME)) ? s.val[STREAM_NAME] : NULL;
                if (!name_node[i] || !st->name[0])
                        snprintf(st->name, sizeof(st->name), "stream%zu", i);
                set_str(st->output.stream, sizeof(st->output.stream), st->name);
                for (size_t j = 0; j < i; j++) {
                        if (strcmp(cfg->streams[j].name, st->name) != 0)
                                continue;
                        err_at(c, name_node[i] ? &name_node[i]->mark : &item->mark,
                               "duplicate stream name '%s'%s (stream %zu at line %zu has it too)", st->name,
                               name_node[i] ? "" : ", the default name of this stream", j,
                               (name_node[j] ? name_node[j] : v->kids[j])->mark.line + 1);
                        break;
                }
        }
        if (c->errors != errors)
                return c->first_err;
        cfg->stream_count = (uint32_t)count;
        /* decoder_threads auto shares the CPUs among every stream that decodes with GStreamer */
        for (size_t i = 0; i < count; i++) {
                enum zcp_source_type t = cfg->streams[i].source.type;

                n_gst += t == ZCP_SOURCE_FILE || t == ZCP_SOURCE_NETWORK;
        }
        for (size_t i = 0; i < count; i++)
                cfg->streams[i].source.gst_streams = n_gst ? n_gst : 1;
        return 0;
}

/* ---- entry points ----------------------------------------------------------- */

/* The code a failed load returns: a content error wins over the files it names (--check). */
static int load_error(const struct ctx *c)
{
        return c->content_err ? -EINVAL : c->first_err;
}

static int parse_text(struct ctx *c, const char *text, size_t len, struct zcp_config **ret_config)
{
        struct zcp_config *cfg = NULL;
        struct node *root = NULL;
        struct seen s;
        int r;

        if (len > ZCP_CONFIG_MAX_BYTES)
                return zcp_config_too_large(c, text, len);
        r = zcp_config_tree_parse(c, text, len, &root);
        if (r < 0)
                return r;

        if (node_is_null(root)) {
                r = err_at(c, &root->mark, "empty document (expected a mapping with 'streams')");
                goto out;
        }
        if (root->kind != NODE_MAP) {
                r = err_at(c, &root->mark, "the top level must be a mapping, got %s", node_kind_name(root));
                goto out;
        }
        cfg = calloc(1, sizeof(*cfg));
        if (!cfg) {
                r = err_nopos(c, -ENOMEM, "out of memory");
                goto out;
        }
        zcp_config_defaults(cfg);
        if (snprintf(cfg->source_path, sizeof(cfg->source_path), "%s", c->name) >= (int)sizeof(cfg->source_path)) {
                r = err_nopos(c, -ENAMETOOLONG, "file name too long");
                goto out;
        }
        parse_section(c, NULL, root, &zcp_config_top_section, cfg, &s);
        if (!(s.mask & (1u << TOP_STREAMS)) && !too_many_errors(c))
                err_at(c, &root->mark, "missing required key 'streams' (a list of one or more streams)");
        if (c->errors) {
                /* found section by section: said in the order of the file */
                zcp_config_errors_sort(c);
                if (too_many_errors(c)) {
                        c->stopping = true;
                        err_nopos(c, c->first_err, "stopped after %u errors; fix these and check again",
                                  ZCP_CONFIG_MAX_ERRORS);
                }
                r = load_error(c);
                goto out;
        }
        *ret_config = cfg;
        cfg = NULL;
        r = 0;
out:
        free(cfg);
        zcp_config_node_free(root);
        return r;
}

int zcp_config_parse(const char *name, const char *text, size_t len, struct zcp_config **ret_config,
                     char *errbuf, size_t errlen)
{
        char cwd[ZCP_PATH_MAX];
        struct ctx c = {
                .name = name ? name : "<config>",
                .errbuf = errbuf,
                .errlen = errlen,
                .base_dir = getcwd(cwd, sizeof(cwd)),
        };

        if (errbuf && errlen)
                errbuf[0] = '\0';
        return parse_text(&c, text ? text : "", text ? len : 0, ret_config);
}

/* Reads the whole file (at most ZCP_CONFIG_MAX_BYTES) into a heap buffer. */
static int read_file(struct ctx *c, const char *path, char **ret_buf, size_t *ret_len)
{
        size_t len = 0, cap;
        struct stat st;
        char *buf = NULL;
        int fd, r;

        /* O_NONBLOCK: a FIFO given by mistake must not hang the daemon. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
                r = -errno;
                return err_nopos(c, r, "%s", zcp_strerror(r));
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                err_nopos(c, r, "%s", zcp_strerror(r));
                goto out;
        }
        if (S_ISDIR(st.st_mode)) {
                r = err_nopos(c, -EISDIR, "%s", strerror(EISDIR));
                goto out;
        }
        if (!S_ISREG(st.st_mode)) {
                r = err_nopos(c, -EINVAL, "not a regular file");
                goto out;
        }
        /* One byte more than the file (at most the cap), to notice a file that grew meanwhile. */
        cap = (st.st_size > (off_t)ZCP_CONFIG_MAX_BYTES ? ZCP_CONFIG_MAX_BYTES : (size_t)st.st_size) + 1;
        buf = malloc(cap);
        if (!buf) {
                r = err_nopos(c, -ENOMEM, "out of memory");
                goto out;
        }
        for (;;) {
                ssize_t n;

                if (len == cap) {
                        char *nb;
                        if (cap > ZCP_CONFIG_MAX_BYTES) {
                                r = zcp_config_too_large(c, buf, st.st_size > (off_t)ZCP_CONFIG_MAX_BYTES ? (uint64_t)st.st_size : 0);
                                goto out;
                        }
                        cap = cap * 2 > ZCP_CONFIG_MAX_BYTES + 1 ? ZCP_CONFIG_MAX_BYTES + 1 : cap * 2;
                        nb = realloc(buf, cap);
                        if (!nb) {
                                r = err_nopos(c, -ENOMEM, "out of memory");
                                goto out;
                        }
                        buf = nb;
                }
                n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = -errno;
                        err_nopos(c, r, "%s", zcp_strerror(r));
                        goto out;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        if (len > ZCP_CONFIG_MAX_BYTES) {
                r = zcp_config_too_large(c, buf, st.st_size > (off_t)ZCP_CONFIG_MAX_BYTES ? (uint64_t)st.st_size : 0);
                goto out;
        }
        *ret_buf = buf;
        *ret_len = len;
        buf = NULL;
        r = 0;
out:
        free(buf);
        close(fd);
        return r;
}

int zcp_config_load_flags(const char *path, unsigned flags, struct zcp_config **ret_config, char *errbuf,
                          size_t errlen)
{
        char dir[ZCP_PATH_MAX], *real_dir = NULL, *slash, *buf = NULL;
        struct ctx c = {
                .name = path,
                .errbuf = errbuf,
                .errlen = errlen,
                .read_files = (flags & ZCP_CONFIG_READ_FILES) != 0,
        };
        size_t len = 0;
        int r;

        if (errbuf && errlen)
                errbuf[0] = '\0';
        if (!path || !*path) {
                c.name = "<config>";
                return err_nopos(&c, -ENOENT, "%s", strerror(ENOENT));
        }
        r = read_file(&c, path, &buf, &len);
        if (r < 0)
                return r;

        /* Relative paths in the file are relative to the file's directory. */
        if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
                r = err_nopos(&c, -ENAMETOOLONG, "file name too long");
                goto out;
        }
        slash = strrchr(dir, '/');
        if (!slash)
                snprintf(dir, sizeof(dir), ".");
        else if (slash == dir)
                dir[1] = '\0';
        else
                *slash = '\0';
        real_dir = realpath(dir, NULL);
        if (!real_dir) {
                r = -errno;
                err_nopos(&c, r, "cannot resolve the directory %s: %s", dir, zcp_strerror(r));
                goto out;
        }
        c.base_dir = real_dir;
        r = parse_text(&c, buf, len, ret_config);
out:
        free(real_dir);
        free(buf);
        return r;
}

int zcp_config_load(const char *path, struct zcp_config **ret_config, char *errbuf, size_t errlen)
{
        return zcp_config_load_flags(path, 0, ret_config, errbuf, errlen);
}
