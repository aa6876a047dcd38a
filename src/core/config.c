/* SPDX-License-Identifier: MIT */
/*
 * Configuration loader (config.h). libyaml events are first turned into a
 * small node tree (rejecting syntax errors, anchors, aliases, tags and extra
 * documents), then one table-driven walker fills the structs: every section
 * is a table of key descriptors (name, type, offset, range, enum names), so
 * unknown, duplicate, mistyped and out-of-range keys are all caught in one
 * place. Cross-key rules run after each section, at the offending key.
 * Every error is one line "FILE:LINE:COL: message" (1-based libyaml marks).
 *
 * Main thread only; no global state. Everything allocated here is freed on
 * every path except the returned struct, which the caller owns.
 */
#include "core/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "core/err.h"
#include "core/frame.h"   /* ZCP_TOPK_MAX */

#ifndef ZCP_DATADIR
#define ZCP_DATADIR "/usr/local/share/zcpipe"
#endif
#define DEFAULT_MODEL_FILE "centernet/model.json"
#define DEFAULT_WEIGHTS ZCP_DATADIR "/" DEFAULT_MODEL_FILE

/*
 * The default model: $ZCP_MODELDIR/centernet/model.json when that is
 * set (meson test sets it to the source tree's models/); else, for the
 * zcpipe of the build tree it was built in (the executable is
 * ZCP_BUILD_ROOT/zcpipe), the source tree's copy, so that a checkout works
 * before `meson install`; else the installed one. An installed zcpipe (a
 * DESTDIR inside the build tree included) never looks at the build or
 * source tree.
 */
static const char *default_weights(void)
{
        static char path[PATH_MAX];
        const char *dir = getenv("ZCP_MODELDIR");

        if (dir && dir[0]) {
                snprintf(path, sizeof(path), "%s/" DEFAULT_MODEL_FILE, dir);
                return path;
        }
#if defined(ZCP_SOURCE_MODELDIR) && defined(ZCP_BUILD_ROOT)
        {
                char exe[PATH_MAX], root[PATH_MAX];
                ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
                size_t len;

                if (n > 0 && realpath(ZCP_BUILD_ROOT, root)) {
                        exe[n] = '\0';
                        len = strlen(root);
                        if (strncmp(exe, root, len) == 0 && strcmp(exe + len, "/zcpipe") == 0)
                                return ZCP_SOURCE_MODELDIR "/" DEFAULT_MODEL_FILE;
                }
        }
#endif
        return DEFAULT_WEIGHTS;
}

#ifndef HAVE_HTTP
#define HAVE_HTTP 0
#endif

const char *const zcp_source_type_names[ZCP_SOURCE_TYPE_COUNT] = {
        [ZCP_SOURCE_V4L2] = "v4l2",
        [ZCP_SOURCE_FILE] = "file",
        [ZCP_SOURCE_SYNTHETIC] = "synthetic",
        [ZCP_SOURCE_NETWORK] = "network",
};

const char *const zcp_net_protocol_names[ZCP_NET_PROTOCOL_COUNT] = {
        [ZCP_NET_AUTO] = "auto",
        [ZCP_NET_TCP] = "tcp",
        [ZCP_NET_UDP] = "udp",
};

const char *const zcp_pace_names[ZCP_PACE_COUNT] = {
        [ZCP_PACE_REALTIME] = "realtime",
        [ZCP_PACE_FAST] = "fast",
};

const char *const zcp_v4l2_io_names[ZCP_IO_COUNT] = {
        [ZCP_IO_AUTO] = "auto",
        [ZCP_IO_USERPTR] = "userptr",
        [ZCP_IO_MMAP] = "mmap",
};

const char *const zcp_resize_names[ZCP_RESIZE_COUNT] = {
        [ZCP_RESIZE_STRETCH] = "stretch",
        [ZCP_RESIZE_LETTERBOX] = "letterbox",
};

const char *const zcp_model_pixels_names[ZCP_MPIX_COUNT] = {
        [ZCP_MPIX_AUTO] = "auto",
        [ZCP_MPIX_UNIT] = "unit",
        [ZCP_MPIX_BYTE] = "byte",
};

const char *const zcp_drop_policy_names[ZCP_DROP_POLICY_COUNT] = {
        [ZCP_DROP_POLICY_AUTO] = "auto",
        [ZCP_DROP_POLICY_NEWEST] = "newest",
        [ZCP_DROP_POLICY_BLOCK] = "block",
};

const char *const zcp_backend_kind_names[ZCP_BACKEND_KIND_COUNT] = {
        [ZCP_BACKEND_AUTO] = "auto",
        [ZCP_BACKEND_CUDA] = "cuda",
        [ZCP_BACKEND_CPU] = "cpu",
};

const char *const zcp_transfer_names[ZCP_TRANSFER_COUNT] = {
        [ZCP_TRANSFER_AUTO] = "auto",
        [ZCP_TRANSFER_ZERO_COPY] = "zero-copy",
        [ZCP_TRANSFER_COPY] = "copy",
};

const char *const zcp_sync_names[ZCP_SYNC_COUNT] = {
        [ZCP_SYNC_SPIN] = "spin",
        [ZCP_SYNC_YIELD] = "yield",
        [ZCP_SYNC_BLOCK] = "block",
        [ZCP_SYNC_HYBRID] = "hybrid",
};

const char *const zcp_output_type_names[ZCP_OUTPUT_TYPE_COUNT] = {
        [ZCP_OUTPUT_STDOUT] = "stdout",
        [ZCP_OUTPUT_FILE] = "file",
        [ZCP_OUTPUT_UNIX] = "unix",
        [ZCP_OUTPUT_NONE] = "none",
        [ZCP_OUTPUT_MQTT] = "mqtt",
};

const char *const zcp_restart_names[ZCP_RESTART_COUNT] = {
        [ZCP_RESTART_ON_FAILURE] = "on-failure",
        [ZCP_RESTART_ALWAYS] = "always",
        [ZCP_RESTART_NEVER] = "never",
};

const char *const zcp_healthz_names[ZCP_HEALTHZ_COUNT] = {
        [ZCP_HEALTHZ_ANY_DOWN] = "any-down",
        [ZCP_HEALTHZ_ALL_DOWN] = "all-down",
};

bool zcp_uri_is_network(const char *uri)
{
        static const char *const schemes[] = { "rtsp://", "rtsps://", "rtspt://", "rtspu://", "udp://",
                                                "rtp://", "srt://", "tcp://" };

        for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
                if (strncasecmp(uri, schemes[i], strlen(schemes[i])) == 0)
                        return true;
        return false;
}

int zcp_enum_from_name(const char *const *names, int count, const char *name)
{
        if (!names || !name)
                return -1;
        for (int i = 0; i < count; i++)
                if (names[i] && strcmp(names[i], name) == 0)
                        return i;
        return -1;
}

void zcp_config_free(struct zcp_config *config)
{
        free(config);
}

bool zcp_stream_config_changed(const struct zcp_stream_config *a, const struct zcp_stream_config *b)
{
        /* Every config is calloc'ed and strings are written with their tail
         * zeroed, so padding and unused bytes compare equal. */
        return memcmp(a, b, sizeof(*a)) != 0;
}

/* ---- node tree built from libyaml events ---------------------------------- */

#define MAX_DEPTH 64   /* the schema needs 5; anything deeper is nonsense */

enum node_kind { NODE_SCALAR, NODE_SEQ, NODE_MAP };

struct node {
        enum node_kind kind;
        bool plain;             /* scalar written without quotes (or block style) */
        yaml_mark_t mark;       /* start of the node */
        char *value;            /* scalar: the bytes, NUL-terminated */
        size_t len;
        struct node **kids;     /* seq: items; map: key, value, key, value... */
        size_t n, cap;
};

static void node_free(struct node *n)
{
        if (!n)
                return;
        for (size_t i = 0; i < n->n; i++)
                node_free(n->kids[i]);
        free(n->kids);
        free(n->value);
        free(n);
}

static int node_add(struct node *parent, struct node *kid)
{
        if (parent->n == parent->cap) {
                size_t cap = parent->cap ? parent->cap * 2 : 8;
                struct node **k = realloc(parent->kids, cap * sizeof(*k));
                if (!k)
                        return -ENOMEM;
                parent->kids = k;
                parent->cap = cap;
        }
        parent->kids[parent->n++] = kid;
        return 0;
}

static bool node_is_null(const struct node *n)
{
        return n->kind == NODE_SCALAR && n->plain &&
               (n->len == 0 || strcmp(n->value, "~") == 0 || strcmp(n->value, "null") == 0);
}

static const char *node_kind_name(const struct node *n)
{
        switch (n->kind) {
        case NODE_MAP:
                return "a mapping";
        case NODE_SEQ:
                return "a sequence";
        case NODE_SCALAR:
                break;
        }
        if (node_is_null(n))
                return "an empty value";
        return n->plain ? "a scalar" : "a quoted string";
}

/* ---- errors ----------------------------------------------------------------- */

struct ctx {
        const char *name;       /* file name for messages */
        char *errbuf;
        size_t errlen;
        const char *base_dir;   /* absolute, canonical; NULL = leave relative paths alone */
        const char *text;       /* the input, for positions of reader errors */
        size_t text_len;
};

static void sanitize(char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        *s = '?';
}

static int errv(struct ctx *c, int err, const yaml_mark_t *m, const char *fmt, va_list ap)
{
        int n;

        if (!c->errbuf || c->errlen == 0)
                return err;
        if (m)
                n = snprintf(c->errbuf, c->errlen, "%s:%zu:%zu: ", c->name, m->line + 1, m->column + 1);
        else
                n = snprintf(c->errbuf, c->errlen, "%s: ", c->name);
        if (n >= 0 && (size_t)n < c->errlen)
                vsnprintf(c->errbuf + n, c->errlen - (size_t)n, fmt, ap);
        sanitize(c->errbuf);
        return err;
}

static int err_at(struct ctx *c, const yaml_mark_t *m, const char *fmt, ...) ZCP_PRINTF(3, 4);
static int err_at(struct ctx *c, const yaml_mark_t *m, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        errv(c, -EINVAL, m, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static int errv_at(struct ctx *c, int err, const yaml_mark_t *m, const char *fmt, ...) ZCP_PRINTF(4, 5);
static int errv_at(struct ctx *c, int err, const yaml_mark_t *m, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        errv(c, err, m, fmt, ap);
        va_end(ap);
        return err;
}

static int err_nopos(struct ctx *c, int err, const char *fmt, ...) ZCP_PRINTF(3, 4);
static int err_nopos(struct ctx *c, int err, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        errv(c, err, NULL, fmt, ap);
        va_end(ap);
        return err;
}

/*
 * A file over ZCP_CONFIG_MAX_BYTES: the error points at the first byte past
 * the limit (line and column, as libyaml counts them: characters), so the
 * user sees where the file outgrew it. `text` holds at least the limit plus
 * one byte; `total` is the whole size when known, else 0.
 */
static int too_large(struct ctx *c, const char *text, uint64_t total)
{
        yaml_mark_t m = { 0 };

        for (size_t i = 0; i < ZCP_CONFIG_MAX_BYTES; i++) {
                if (text[i] == '\n') {
                        m.line++;
                        m.column = 0;
                } else if (((unsigned char)text[i] & 0xc0) != 0x80) {
                        m.column++;
                }
        }
        if (total)
                errv_at(c, -EFBIG, &m, "file too large (%llu bytes, at most %u): the limit is passed here",
                        (unsigned long long)total, ZCP_CONFIG_MAX_BYTES);
        else
                errv_at(c, -EFBIG, &m, "file too large (more than %u bytes): the limit is passed here",
                        ZCP_CONFIG_MAX_BYTES);
        return -EFBIG;
}

/* A user-written scalar for a message: escaped, at most ~40 characters. */
struct shown {
        char s[64];
};

static struct shown show(const char *v, size_t len)
{
        struct shown out;
        size_t o = 0;

        for (size_t i = 0; i < len; i++) {
                unsigned char ch = (unsigned char)v[i];
                if (o > 40) {
                        memcpy(out.s + o, "...", 4);
                        return out;
                }
                if (ch < 0x20 || ch == 0x7f || ch == '\\' || ch == '\'')
                        o += (size_t)snprintf(out.s + o, sizeof(out.s) - o, "\\x%02x", ch);
                else
                        out.s[o++] = (char)ch;
        }
        out.s[o] = '\0';
        return out;
}

static int syntax_error(struct ctx *c, const yaml_parser_t *p)
{
        yaml_mark_t m = p->problem_mark;
        const char *problem = p->problem ? p->problem : "unknown error";

        if (p->error == YAML_MEMORY_ERROR)
                return err_nopos(c, -ENOMEM, "out of memory while parsing");
        if (p->error == YAML_READER_ERROR) {
                /*
                 * Reader errors (bad UTF-8, control characters) carry only a
                 * byte offset; count lines and characters up to it the way
                 * libyaml's marks do (a leading BOM is not a character).
                 */
                size_t off = p->problem_offset < c->text_len ? p->problem_offset : c->text_len;
                size_t i = c->text_len >= 3 && memcmp(c->text, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
                memset(&m, 0, sizeof(m));
                for (; c->text && i < off; i++) {
                        if (c->text[i] == '\n') {
                                m.line++;
                                m.column = 0;
                        } else if (((unsigned char)c->text[i] & 0xc0) != 0x80) {
                                m.column++;
                        }
                }
                if (p->problem_value != -1)
                        return err_at(c, &m, "syntax error: %s (byte 0x%02x)", problem,
                                      (unsigned)p->problem_value & 0xffu);
                return err_at(c, &m, "syntax error: %s", problem);
        }
        if (p->context)
                return err_at(c, &m, "syntax error: %s (%s at line %zu, column %zu)", problem,
                              p->context, p->context_mark.line + 1, p->context_mark.column + 1);
        return err_at(c, &m, "syntax error: %s", problem);
}

/* Rejects anchors and explicit tags on a node event. */
static int check_node_event(struct ctx *c, const yaml_event_t *ev, const yaml_char_t *anchor,
                            const yaml_char_t *tag)
{
        if (anchor)
                return err_at(c, &ev->start_mark,
                              "anchor '&%s' is not allowed (anchors and aliases are not allowed)",
                              show((const char *)anchor, strlen((const char *)anchor)).s);
        if (tag)
                return err_at(c, &ev->start_mark, "tag '%s' is not allowed (write plain values)",
                              show((const char *)tag, strlen((const char *)tag)).s);
        return 0;
}

static struct node *node_new(enum node_kind kind, const yaml_mark_t *mark)
{
        struct node *n = calloc(1, sizeof(*n));

        if (n) {
                n->kind = kind;
                n->mark = *mark;
        }
        return n;
}

/*
 * Reads all events into a tree. Exactly one document; its root goes to
 * *ret_root (NULL never: an empty document has an empty scalar root).
 */
static int build_tree(struct ctx *c, yaml_parser_t *p, struct node **ret_root)
{
        struct node *stack[MAX_DEPTH];
        size_t depth = 0;
        struct node *root = NULL, *n;
        unsigned docs = 0;
        bool done = false;
        yaml_event_t ev;
        int r = 0;

        while (!done) {
                if (!yaml_parser_parse(p, &ev)) {
                        r = syntax_error(c, p);
                        goto fail;
                }
                n = NULL;
                switch (ev.type) {
                case YAML_NO_EVENT:
                case YAML_STREAM_START_EVENT:
                case YAML_DOCUMENT_END_EVENT:
                        break;
                case YAML_STREAM_END_EVENT:
                        if (docs == 0) {
                                r = err_at(c, &ev.start_mark,
                                           "empty configuration (no YAML document; the file is empty or only comments)");
                                goto fail_event;
                        }
                        done = true;
                        break;
                case YAML_DOCUMENT_START_EVENT:
                        if (docs++ > 0) {
                                r = err_at(c, &ev.start_mark,
                                           "multiple YAML documents are not allowed (one configuration per file)");
                                goto fail_event;
                        }
                        break;
                case YAML_ALIAS_EVENT:
                        r = err_at(c, &ev.start_mark,
                                   "alias '*%s' is not allowed (anchors and aliases are not allowed)",
                                   show((const char *)ev.data.alias.anchor,
                                        strlen((const char *)ev.data.alias.anchor)).s);
                        goto fail_event;
                case YAML_SCALAR_EVENT:
                        r = check_node_event(c, &ev, ev.data.scalar.anchor, ev.data.scalar.tag);
                        if (r < 0)
                                goto fail_event;
                        n = node_new(NODE_SCALAR, &ev.start_mark);
                        if (!n)
                                goto fail_nomem;
                        n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
                        n->len = ev.data.scalar.length;
                        n->value = malloc(n->len + 1);
                        if (!n->value) {
                                node_free(n);
                                goto fail_nomem;
                        }
                        memcpy(n->value, ev.data.scalar.value, n->len);
                        n->value[n->len] = '\0';
                        break;
                case YAML_SEQUENCE_START_EVENT:
                        r = check_node_event(c, &ev, ev.data.sequence_start.anchor,
                                             ev.data.sequence_start.tag);
                        if (r < 0)
                                goto fail_event;
                        n = node_new(NODE_SEQ, &ev.start_mark);
                        if (!n)
                                goto fail_nomem;
                        break;
                case YAML_MAPPING_START_EVENT:
                        r = check_node_event(c, &ev, ev.data.mapping_start.anchor,
                                             ev.data.mapping_start.tag);
                        if (r < 0)
                                goto fail_event;
                        n = node_new(NODE_MAP, &ev.start_mark);
                        if (!n)
                                goto fail_nomem;
                        break;
                case YAML_SEQUENCE_END_EVENT:
                case YAML_MAPPING_END_EVENT:
                        if (depth > 0)
                                depth--;
                        break;
                }
                if (n) {
                        if (depth == 0) {
                                root = n;
                        } else if (node_add(stack[depth - 1], n) < 0) {
                                node_free(n);
                                goto fail_nomem;
                        }
                        if (n->kind != NODE_SCALAR) {
                                if (depth == MAX_DEPTH) {
                                        r = err_at(c, &ev.start_mark, "nesting deeper than %d levels",
                                                   MAX_DEPTH);
                                        goto fail_event;
                                }
                                stack[depth++] = n;
                        }
                }
                yaml_event_delete(&ev);
        }
        if (!root)   /* not reached: a document always has a root node */
                return err_nopos(c, -EINVAL, "empty document");
        *ret_root = root;
        return 0;

fail_nomem:
        r = err_nopos(c, -ENOMEM, "out of memory");
fail_event:
        yaml_event_delete(&ev);
fail:
        node_free(root);
        return r;
}

/* ---- key tables ------------------------------------------------------------- */

enum key_type {
        K_U32,
        K_U64,
        K_FLOAT,
        K_BOOL,
        K_ENUM,
        K_STR,          /* copied as written */
        K_PATH,         /* relative paths resolve against the config's directory */
        K_URIPATH,      /* same, but "scheme://..." is kept as it is */
        K_FLOAT3,       /* sequence of exactly 3 numbers */
        K_NAMES,        /* a sequence of names (or one name), stored joined with ',' */
        K_SECTION,      /* nested mapping with its own table */
        K_STREAMS,      /* the top-level list of streams */
};

enum key_flags {
        F_ZERO_OK  = 1u << 0,   /* 0 is accepted besides [min, max] (= "unset") */
        F_EVEN     = 1u << 1,
        F_MIN_EXCL = 1u << 2,   /* float: value must be > min */
        F_NONEMPTY = 1u << 3,
        F_NAME     = 1u << 4,   /* [A-Za-z0-9_.-]+ */
        F_REQUIRED = 1u << 5,   /* no default: the section's check insists on it */
        F_WEIGHTS  = 1u << 6,   /* default: the installed model (default_weights()) */
        F_SIZE     = 1u << 7,   /* uint: a byte count, with an optional K, M, G or T suffix (powers of 1024) */
        F_MODEL    = 1u << 12,  /* default: the model's own (the section's check notes whether it was given) */
        /* Source keys: the source types a key applies to (none of these: every type). */
        S_V4L2     = 1u << 8,
        S_FILE     = 1u << 9,
        S_SYNTH    = 1u << 10,
        S_NET      = 1u << 11,
};
#define S_ALL (S_V4L2 | S_FILE | S_SYNTH | S_NET)

struct section;
struct seen;

typedef int (*section_check_fn)(struct ctx *c, void *base, const struct seen *s);

/*
 * One key: its name, type, place in the struct, range, flags (checks, the
 * source types it applies to) and default. The tables below are the schema:
 * they drive parsing, the checks, the defaults (apply_defaults) and the key
 * list tests walk (zcp_config_keys_foreach).
 */
struct key_desc {
        const char *name;
        enum key_type type;
        size_t offset;
        size_t size;
        uint64_t umin, umax;
        double fmin, fmax;
        unsigned flags;
        const char *const *names;
        int count;
        const struct section *sub;
        uint64_t udef;          /* default: U32, U64, BOOL, ENUM (index) */
        double fdef[3];         /* default: FLOAT (fdef[0]), FLOAT3 */
        const char *sdef;       /* default: strings ("" when NULL) */
};

struct section {
        const char *name;       /* for "unknown key 'x' in <name>" */
        const char *prefix;     /* for "<prefix>key: ..." */
        const struct key_desc *keys;
        size_t count;
        section_check_fn check; /* cross-key rules, after the mapping is read */
};

#define MAX_SECTION_KEYS 32

/* What a mapping held: key and value node per descriptor index. */
struct seen {
        uint32_t mask;
        const struct node *key[MAX_SECTION_KEYS];
        const struct node *val[MAX_SECTION_KEYS];
        yaml_mark_t at;         /* the section's key in its parent, else the mapping */
};

/* offsetof() that fails to compile when the member is not `sz` bytes. */
#define OFF(T, m, sz) (offsetof(T, m) + 0 * sizeof(char[sizeof(((T *)0)->m) == (sz) ? 1 : -1]))
/* The last argument of each is the key's default. */
#define U32(T, k, m, lo, hi, fl, def) \
        { .name = k, .type = K_U32, .offset = OFF(T, m, 4), .size = 4, .umin = lo, .umax = hi, .flags = fl, \
          .udef = def }
#define U64(T, k, m, lo, hi, fl, def) \
        { .name = k, .type = K_U64, .offset = OFF(T, m, 8), .size = 8, .umin = lo, .umax = hi, .flags = fl, \
          .udef = def }
#define FLT(T, k, m, lo, hi, fl, def) \
        { .name = k, .type = K_FLOAT, .offset = OFF(T, m, sizeof(float)), .size = sizeof(float), \
          .fmin = lo, .fmax = hi, .flags = fl, .fdef = { def } }
#define FLT3(T, k, m, lo, hi, fl, d0, d1, d2) \
        { .name = k, .type = K_FLOAT3, .offset = OFF(T, m, 3 * sizeof(float)), .size = 3 * sizeof(float), \
          .fmin = lo, .fmax = hi, .flags = fl, .fdef = { d0, d1, d2 } }
#define BOOL(T, k, m, fl, def) \
        { .name = k, .type = K_BOOL, .offset = OFF(T, m, sizeof(bool)), .size = sizeof(bool), .flags = fl, \
          .udef = def }
#define ENUM(T, k, m, tbl, n, fl, def) \
        { .name = k, .type = K_ENUM, .offset = OFF(T, m, sizeof(int)), .size = sizeof(int), .names = tbl, .count = n, \
          .flags = fl, .udef = def }
#define STR(T, k, m, ty, fl, def) \
        { .name = k, .type = ty, .offset = offsetof(T, m), .size = sizeof(((T *)0)->m), .flags = fl, .sdef = def }
#define NAMES(T, k, m, fl) \
        { .name = k, .type = K_NAMES, .offset = offsetof(T, m), .size = sizeof(((T *)0)->m), .flags = fl, .sdef = "" }
#define SECT(T, k, m, sec) \
        { .name = k, .type = K_SECTION, .offset = offsetof(T, m), .size = sizeof(((T *)0)->m), .sub = &sec }
#define KEYS(a) a, sizeof(a) / sizeof(a[0])

static int check_source(struct ctx *c, void *base, const struct seen *s);
static int check_output(struct ctx *c, void *base, const struct seen *s);
static int check_http(struct ctx *c, void *base, const struct seen *s);

/* Named indices (SRC_*, OUT_*, ...) are the keys the cross-key checks look at. */
enum { SRC_TYPE, SRC_DEVICE, SRC_WIDTH, SRC_HEIGHT, SRC_FORMAT, SRC_FPS, SRC_IO, SRC_TIMEOUT,
       SRC_BACKOFF, SRC_PATH, SRC_PACE, SRC_LOOP, SRC_LATENCY, SRC_PROTOCOL, SRC_CONNECT_TIMEOUT };
static const struct key_desc source_keys[] = {
        [SRC_TYPE] = ENUM(struct zcp_source_config, "type", type, zcp_source_type_names, ZCP_SOURCE_TYPE_COUNT,
                          F_REQUIRED, ZCP_SOURCE_TYPE_COUNT),
        [SRC_DEVICE] = STR(struct zcp_source_config, "device", device, K_PATH, F_NONEMPTY | S_V4L2, "/dev/video0"),
        [SRC_WIDTH] = U32(struct zcp_source_config, "width", width, 16, 8192, F_ZERO_OK | F_EVEN | S_ALL, 0),
        [SRC_HEIGHT] = U32(struct zcp_source_config, "height", height, 16, 8192, F_ZERO_OK | F_EVEN | S_ALL, 0),
        [SRC_FORMAT] = ENUM(struct zcp_source_config, "format", format, zcp_pixfmt_names, ZCP_PIX_COUNT, S_V4L2,
                            ZCP_PIX_NONE),
        [SRC_FPS] = U32(struct zcp_source_config, "fps", fps, 1, 1000, S_V4L2 | S_SYNTH, 30),
        [SRC_IO] = ENUM(struct zcp_source_config, "io", io, zcp_v4l2_io_names, ZCP_IO_COUNT, S_V4L2, ZCP_IO_AUTO),
        [SRC_TIMEOUT] = U32(struct zcp_source_config, "timeout_ms", timeout_ms, 10, 600000, S_V4L2 | S_NET, 2000),
        [SRC_BACKOFF] = U32(struct zcp_source_config, "backoff_max_ms", backoff_max_ms, 10, 600000, S_V4L2 | S_NET, 5000),
        [SRC_PATH] = STR(struct zcp_source_config, "path", path, K_URIPATH, S_FILE | S_NET, ""),
        [SRC_PACE] = ENUM(struct zcp_source_config, "pace", pace, zcp_pace_names, ZCP_PACE_COUNT, S_FILE | S_SYNTH,
             ZCP_PACE_REALTIME),
        [SRC_LOOP] = BOOL(struct zcp_source_config, "loop", loop, S_FILE, false),
        [SRC_LATENCY] = U32(struct zcp_source_config, "latency_ms", latency_ms, 0, 60000, S_NET, 200),
        [SRC_PROTOCOL] = ENUM(struct zcp_source_config, "protocol", protocol, zcp_net_protocol_names,
                              ZCP_NET_PROTOCOL_COUNT, S_NET, ZCP_NET_AUTO),
        [SRC_CONNECT_TIMEOUT] = U32(struct zcp_source_config, "connect_timeout_ms", connect_timeout_ms, 100, 600000,
                                    S_NET, 5000),
        U64(struct zcp_source_config, "frames", frames, 1, 1ull << 40, F_ZERO_OK | S_SYNTH, 0),
        U32(struct zcp_source_config, "box_size", box_size, 8, 1024, S_SYNTH, 64),
        U32(struct zcp_source_config, "speed", speed, 0, 256, S_SYNTH, 4),
        U32(struct zcp_source_config, "decoder_threads", decoder_threads, 1, 64, F_ZERO_OK | S_FILE | S_NET, 0),
};
static const struct section source_section = { "source", "source.", KEYS(source_keys), check_source };
_Static_assert(sizeof(source_keys) / sizeof(source_keys[0]) <= MAX_SECTION_KEYS, "largest table fits struct seen");

static const struct key_desc ring_keys[] = {
        U32(struct zcp_ring_config, "slots", slots, 2, 256, 0, 8),
        ENUM(struct zcp_ring_config, "drop", drop, zcp_drop_policy_names, ZCP_DROP_POLICY_COUNT, 0,
             ZCP_DROP_POLICY_AUTO),
};
static const struct section ring_section = { "ring", "ring.", KEYS(ring_keys), NULL };

static const struct key_desc gpu_keys[] = {
        ENUM(struct zcp_gpu_config, "backend", backend, zcp_backend_kind_names, ZCP_BACKEND_KIND_COUNT, 0,
             ZCP_BACKEND_AUTO),
        U32(struct zcp_gpu_config, "device", device, 0, 63, 0, 0),
        ENUM(struct zcp_gpu_config, "transfer", transfer, zcp_transfer_names, ZCP_TRANSFER_COUNT, 0,
             ZCP_TRANSFER_AUTO),
        ENUM(struct zcp_gpu_config, "sync", sync, zcp_sync_names, ZCP_SYNC_COUNT, 0, ZCP_SYNC_HYBRID),
};
static const struct section gpu_section = { "gpu", "gpu.", KEYS(gpu_keys), NULL };

enum { MODEL_PATH, MODEL_WEIGHTS, MODEL_LABELS, MODEL_IN_W, MODEL_IN_H, MODEL_PIXELS, MODEL_MEAN, MODEL_STD,
       MODEL_RESIZE };
static const struct key_desc model_keys[] = {
        [MODEL_PATH] = STR(struct zcp_model_config, "path", path, K_PATH, F_WEIGHTS, ""),   /* "" = the default */
        /* the name of model.path before models were TF.js graphs too: configs that say it still work */
        [MODEL_WEIGHTS] = STR(struct zcp_model_config, "weights", path, K_PATH, F_WEIGHTS, ""),
        [MODEL_LABELS] = STR(struct zcp_model_config, "labels", labels, K_PATH, 0, ""),
        [MODEL_IN_W] = U32(struct zcp_model_config, "input_width", input_width, 8, 4096, F_ZERO_OK, 0),
        [MODEL_IN_H] = U32(struct zcp_model_config, "input_height", input_height, 8, 4096, F_ZERO_OK, 0),
        [MODEL_PIXELS] = ENUM(struct zcp_model_config, "pixels", pixels, zcp_model_pixels_names, ZCP_MPIX_COUNT, 0,
                              ZCP_MPIX_AUTO),
        [MODEL_MEAN] = FLT3(struct zcp_model_config, "mean", mean, -1e6, 1e6, F_MODEL, 0, 0, 0),
        [MODEL_STD] = FLT3(struct zcp_model_config, "std", std, 0, 1e6, F_MIN_EXCL | F_MODEL, 1, 1, 1),
        [MODEL_RESIZE] = ENUM(struct zcp_model_config, "resize", resize, zcp_resize_names, ZCP_RESIZE_COUNT, 0,
                              ZCP_RESIZE_STRETCH),
        U32(struct zcp_model_config, "top_k", top_k, 1, ZCP_TOPK_MAX, 0, 5),
        FLT(struct zcp_model_config, "min_score", min_score, 0, 1, 0, 0.3),
        FLT(struct zcp_model_config, "nms_iou", nms_iou, 0, 1, 0, 0.5),
        U32(struct zcp_model_config, "max_detections", max_detections, 1, ZCP_DET_MAX, 0, 20),
        NAMES(struct zcp_model_config, "classes", classes, 0),
        BOOL(struct zcp_model_config, "enabled", enabled, 0, true),
        U32(struct zcp_model_config, "threads", threads, 1, 64, F_ZERO_OK, 0),
};
static int check_model(struct ctx *c, void *base, const struct seen *s);
static const struct section model_section = { "model", "model.", KEYS(model_keys), check_model };

static const struct key_desc motion_keys[] = {
        BOOL(struct zcp_motion_config, "enabled", enabled, 0, true),
        U32(struct zcp_motion_config, "cell", cell, 2, 256, 0, 16),
        FLT(struct zcp_motion_config, "threshold", threshold, 0, 255, 0, 12.0),
        FLT(struct zcp_motion_config, "alpha", alpha, 0, 1, F_MIN_EXCL, 0.05),
};
static const struct section motion_section = { "motion", "motion.", KEYS(motion_keys), NULL };

static const struct key_desc convert_keys[] = {
        U32(struct zcp_convert_config, "threads", threads, 1, 64, F_ZERO_OK, 0),
};
static const struct section convert_section = { "convert", "convert.", KEYS(convert_keys), NULL };

enum { OUT_TYPE, OUT_PATH, OUT_MQTT_FIRST, OUT_CERT = OUT_MQTT_FIRST + 11, OUT_KEY, OUT_USER, OUT_PASSWORD };
static const struct key_desc output_keys[] = {
        [OUT_TYPE] = ENUM(struct zcp_output_config, "type", type, zcp_output_type_names, ZCP_OUTPUT_TYPE_COUNT, 0,
                          ZCP_OUTPUT_STDOUT),
        [OUT_PATH] = STR(struct zcp_output_config, "path", path, K_PATH, 0, ""),
        /* From OUT_MQTT_FIRST on: type mqtt only (check_output). */
        STR(struct zcp_output_config, "broker", mqtt.broker, K_STR, F_NONEMPTY, "127.0.0.1"),
        U32(struct zcp_output_config, "port", mqtt.port, 1, 65535, 0, 1883),
        STR(struct zcp_output_config, "client_id", mqtt.client_id, K_STR, F_NONEMPTY, ""),
        STR(struct zcp_output_config, "host_name", mqtt.host_name, K_STR, F_NONEMPTY | F_NAME, ""),
        STR(struct zcp_output_config, "topic", mqtt.topic, K_STR, F_NONEMPTY, "zcpipe/<host>/<stream>/results"),
        STR(struct zcp_output_config, "availability_topic", mqtt.availability_topic, K_STR, F_NONEMPTY,
            "zcpipe/<host>/<stream>/status"),
        U32(struct zcp_output_config, "qos", mqtt.qos, 0, 1, 0, 1),
        U32(struct zcp_output_config, "keepalive_s", mqtt.keepalive_s, 5, 3600, 0, 30),
        U32(struct zcp_output_config, "queue", mqtt.queue, 1, 1000000, 0, 1000),
        U32(struct zcp_output_config, "backoff_max_ms", mqtt.backoff_max_ms, 100, 600000, 0, 10000),
        STR(struct zcp_output_config, "ca_file", mqtt.ca_file, K_PATH, F_NONEMPTY, ""),
        [OUT_CERT] = STR(struct zcp_output_config, "cert_file", mqtt.cert_file, K_PATH, F_NONEMPTY, ""),
        [OUT_KEY] = STR(struct zcp_output_config, "key_file", mqtt.key_file, K_PATH, F_NONEMPTY, ""),
        [OUT_USER] = STR(struct zcp_output_config, "username", mqtt.username, K_STR, F_NONEMPTY, ""),
        [OUT_PASSWORD] = STR(struct zcp_output_config, "password_file", mqtt.password_file, K_PATH, F_NONEMPTY, ""),
};
static const struct section output_section = { "output", "output.", KEYS(output_keys), check_output };

enum { STREAM_NAME, STREAM_SOURCE };
static const struct key_desc stream_keys[] = {
        [STREAM_NAME] = STR(struct zcp_stream_config, "name", name, K_STR, F_NONEMPTY | F_NAME, ""),
        [STREAM_SOURCE] = SECT(struct zcp_stream_config, "source", source, source_section),
        SECT(struct zcp_stream_config, "ring", ring, ring_section),
        SECT(struct zcp_stream_config, "gpu", gpu, gpu_section),
        SECT(struct zcp_stream_config, "model", model, model_section),
        SECT(struct zcp_stream_config, "motion", motion, motion_section),
        SECT(struct zcp_stream_config, "output", output, output_section),
        SECT(struct zcp_stream_config, "convert", convert, convert_section),
        ENUM(struct zcp_stream_config, "restart", restart, zcp_restart_names, ZCP_RESTART_COUNT, 0,
             ZCP_RESTART_ON_FAILURE),
        U32(struct zcp_stream_config, "restart_backoff_max_ms", restart_backoff_max_ms, 1000, 3600000, 0, 30000),
};
static const struct section stream_section = { "stream", "", KEYS(stream_keys), NULL };

enum { HTTP_ENABLED, HTTP_LISTEN, HTTP_PORT, HTTP_ALLOW };
static const struct key_desc http_keys[] = {
        [HTTP_ENABLED] = BOOL(struct zcp_http_config, "enabled", enabled, 0, HAVE_HTTP),
        [HTTP_LISTEN] = STR(struct zcp_http_config, "listen", listen, K_STR, F_NONEMPTY, "127.0.0.1"),
        [HTTP_PORT] = U32(struct zcp_http_config, "port", port, 1, 65535, 0, 9464),
        [HTTP_ALLOW] = BOOL(struct zcp_http_config, "allow_non_loopback", allow_non_loopback, 0, false),
        U32(struct zcp_http_config, "max_connections", max_connections, 1, 1024, 0, 16),
        U32(struct zcp_http_config, "timeout_s", timeout_s, 1, 3600, 0, 5),
        U32(struct zcp_http_config, "snapshot_fps", snapshot_fps, 0, 30, 0, 2),
        ENUM(struct zcp_http_config, "healthz", healthz, zcp_healthz_names, ZCP_HEALTHZ_COUNT, 0,
             ZCP_HEALTHZ_ANY_DOWN),
};
static const struct section http_section = { "metrics.http", "metrics.http.", KEYS(http_keys), check_http };

static const struct key_desc frame_log_keys[] = {
        STR(struct zcp_frame_log_config, "path", path, K_PATH, 0, ""),
        U64(struct zcp_frame_log_config, "max_bytes", max_bytes, 4096, 1ull << 40, 0, 64ull << 20),
        U32(struct zcp_frame_log_config, "keep", keep, 1, 100, 0, 3),
};
static const struct section frame_log_section = { "metrics.frame_log", "metrics.frame_log.",
                                                  KEYS(frame_log_keys), NULL };

static const struct key_desc metrics_keys[] = {
        SECT(struct zcp_metrics_config, "http", http, http_section),
        SECT(struct zcp_metrics_config, "frame_log", frame_log, frame_log_section),
};
static const struct section metrics_section = { "metrics", "metrics.", KEYS(metrics_keys), NULL };

static const struct key_desc log_keys[] = {
        ENUM(struct zcp_log_config, "level", level, zcp_log_level_names, ZCP_LOG_LEVEL_COUNT, 0, ZCP_LOG_INFO),
        U32(struct zcp_log_config, "summary_interval_s", summary_interval_s, 0, 86400, 0, 10),
};
static const struct section log_section = { "log", "log.", KEYS(log_keys), NULL };

enum { TOP_STREAMS };
static const struct key_desc top_keys[] = {
        [TOP_STREAMS] = { .name = "streams", .type = K_STREAMS, .sub = &stream_section },
        SECT(struct zcp_config, "metrics", metrics, metrics_section),
        SECT(struct zcp_config, "log", log, log_section),
        U64(struct zcp_config, "pinned_budget", pinned_budget, 1ull << 20, 1ull << 50, F_ZERO_OK | F_SIZE, 0),
};
static const struct section top_section = { "the top level", "", KEYS(top_keys), NULL };

/* ---- defaults --------------------------------------------------------------- */

static void set_str(char *dst, size_t size, const char *src)
{
        memset(dst, 0, size);
        snprintf(dst, size, "%s", src);
}

/* Every key of `sec` (and of its sections) gets its default from the table. */
static void apply_defaults(const struct section *sec, void *base)
{
        for (size_t i = 0; i < sec->count; i++) {
                const struct key_desc *d = &sec->keys[i];
                char *field = (char *)base + d->offset;
                float f3[3] = { (float)d->fdef[0], (float)d->fdef[1], (float)d->fdef[2] };
                uint32_t u32 = (uint32_t)d->udef;
                int idx = (int)d->udef;
                bool b = d->udef != 0;

                switch (d->type) {
                case K_U32:
                        memcpy(field, &u32, sizeof(u32));
                        break;
                case K_U64:
                        memcpy(field, &d->udef, sizeof(d->udef));
                        break;
                case K_FLOAT:
                        memcpy(field, f3, sizeof(float));
                        break;
                case K_FLOAT3:
                        memcpy(field, f3, sizeof(f3));
                        break;
                case K_BOOL:
                        memcpy(field, &b, sizeof(b));
                        break;
                case K_ENUM:
                        memcpy(field, &idx, sizeof(idx));
                        break;
                case K_STR:
                case K_PATH:
                case K_URIPATH:
                case K_NAMES:
                        set_str(field, d->size, d->flags & F_WEIGHTS ? default_weights() : d->sdef ? d->sdef : "");
                        break;
                case K_SECTION:
                        apply_defaults(d->sub, field);
                        break;
                case K_STREAMS:
                        break;   /* each stream gets its defaults as it is parsed */
                }
        }
}

static void stream_defaults(struct zcp_stream_config *s)
{
        memset(s, 0, sizeof(*s));
        apply_defaults(&stream_section, s);
}

static void config_defaults(struct zcp_config *cfg)
{
        apply_defaults(&top_section, cfg);
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
        return err_at(c, &v->mark, "%s%s: %s is out of range (%s%llu..%llu)", sec->prefix, d->name,
                      show(v->value, v->len).s, d->flags & F_ZERO_OK ? "0 or " : "",
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

/* The model section: whether mean and std were given (else the model's own are used). */
static int check_model(struct ctx *c, void *base, const struct seen *s)
{
        struct zcp_model_config *m = base;

        if ((s->mask & (1u << MODEL_PATH)) && (s->mask & (1u << MODEL_WEIGHTS)))
                return err_at(c, &s->key[MODEL_WEIGHTS]->mark,
                              "model.weights is the old name of model.path: give one of them");
        m->mean_set = (s->mask & (1u << MODEL_MEAN)) != 0;
        m->std_set = (s->mask & (1u << MODEL_STD)) != 0;
        return 0;
}

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
        case K_NAMES:
                return parse_names(c, sec, d, v, field);
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
                        return type_error(c, sec, d, v, "an unsigned integer");
                st = (d->flags & F_SIZE) ? parse_size(v, &u) : parse_uint(v, &u);
                if (st == NUM_SYNTAX)
                        return type_error(c, sec, d, v,
                                          (d->flags & F_SIZE) ? "a byte count (e.g. 536870912, 512M, 4G)"
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

static int parse_section(struct ctx *c, const struct node *key, const struct node *n,
                         const struct section *sec, void *base, struct seen *ret_seen)
{
        struct seen *s = ret_seen;
        int r;

        memset(s, 0, sizeof(*s));
        s->at = key ? key->mark : n->mark;
        if (n->kind != NODE_MAP && !node_is_null(n)) {
                if (n->kind == NODE_SCALAR)
                        return err_at(c, &n->mark, "%s: expected a mapping, got %s '%s'", sec->name,
                                      node_kind_name(n), show(n->value, n->len).s);
                return err_at(c, &n->mark, "%s: expected a mapping, got %s", sec->name, node_kind_name(n));
        }
        for (size_t i = 0; n->kind == NODE_MAP && i + 1 < n->n; i += 2) {
                const struct node *k = n->kids[i], *v = n->kids[i + 1];
                size_t j;

                if (k->kind != NODE_SCALAR)
                        return err_at(c, &k->mark, "keys must be plain names, got %s in %s",
                                      node_kind_name(k), sec->name);
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
                                return err_at(c, &k->mark, "unknown key '%s' in %s (did you mean '%s'?)",
                                              show(k->value, k->len).s, sec->name, hint);
                        return err_at(c, &k->mark, "unknown key '%s' in %s", show(k->value, k->len).s,
                                      sec->name);
                }
                if (s->mask & (1u << j))
                        return err_at(c, &k->mark, "duplicate key '%s' in %s (first at line %zu)",
                                      sec->keys[j].name, sec->name, s->key[j]->mark.line + 1);
                s->mask |= 1u << j;
                s->key[j] = k;
                s->val[j] = v;
                r = parse_value(c, sec, &sec->keys[j], k, v, base);
                if (r < 0)
                        return r;
        }
        if (sec->check)
                return sec->check(c, base, s);
        return 0;
}

/* ---- cross-key rules -------------------------------------------------------- */

static unsigned source_bit(enum zcp_source_type t)
{
        static const unsigned bit[ZCP_SOURCE_TYPE_COUNT] = {
                [ZCP_SOURCE_V4L2] = S_V4L2,
                [ZCP_SOURCE_FILE] = S_FILE,
                [ZCP_SOURCE_SYNTHETIC] = S_SYNTH,
                [ZCP_SOURCE_NETWORK] = S_NET,
        };

        return (unsigned)t < ZCP_SOURCE_TYPE_COUNT ? bit[t] : 0;
}

static int check_source(struct ctx *c, void *base, const struct seen *s)
{
        const struct zcp_source_config *src = base;

        if (!(s->mask & (1u << SRC_TYPE)))
                return err_at(c, &s->at, "source.type is required (v4l2, file, synthetic or network)");
        if ((src->type == ZCP_SOURCE_FILE || src->type == ZCP_SOURCE_NETWORK) && src->path[0] == '\0')
                return err_at(c, &s->key[SRC_TYPE]->mark, "source.type %s requires source.path",
                              zcp_source_type_names[src->type]);
        for (size_t i = 0; i < sizeof(source_keys) / sizeof(source_keys[0]); i++) {
                unsigned applies = source_keys[i].flags & S_ALL;
                char types[64] = "";

                if (!(s->mask & (1u << i)) || !applies || (applies & source_bit(src->type)))
                        continue;
                for (int t = 0; t < ZCP_SOURCE_TYPE_COUNT; t++)
                        if (applies & source_bit((enum zcp_source_type)t))
                                snprintf(types + strlen(types), sizeof(types) - strlen(types), "%s%s",
                                         types[0] ? ", " : "", zcp_source_type_names[t]);
                return err_at(c, &s->key[i]->mark, "source.%s does not apply to source.type %s (only to: %s)",
                              source_keys[i].name, zcp_source_type_names[src->type], types);
        }
        if (src->type != ZCP_SOURCE_NETWORK)
                return zcp_uri_is_network(src->path) && src->type == ZCP_SOURCE_FILE
                               ? err_at(c, &s->val[SRC_PATH]->mark,
                                        "source.path '%s' is a network stream: use type network (it reconnects)",
                                        show(src->path, strlen(src->path)).s)
                               : 0;
        if (!strstr(src->path, "://"))
                return err_at(c, &s->val[SRC_PATH]->mark,
                              "source.path of type network is a URL (rtsp://, udp://, http://...)");
        if (src->protocol != ZCP_NET_AUTO && strncmp(src->path, "rtsp", 4) != 0)
                return err_at(c, &s->val[SRC_PROTOCOL]->mark, "source.protocol applies to rtsp:// URLs only");
        return 0;
}

/* A topic template: no MQTT wildcards, and only the <host> and <stream> placeholders. */
static const char *topic_problem(const char *t)
{
        if (strpbrk(t, "+#"))
                return "must not contain the MQTT wildcards + or #";
        for (const char *p = strchr(t, '<'); p; p = strchr(p + 1, '<'))
                if (strncmp(p, "<host>", 6) != 0 && strncmp(p, "<stream>", 8) != 0)
                        return "may hold only the placeholders <host> and <stream>";
        return NULL;
}

static int check_output(struct ctx *c, void *base, const struct seen *s)
{
        const struct zcp_output_config *out = base;
        const struct zcp_mqtt_config *m = &out->mqtt;
        const char *why;

        if ((out->type == ZCP_OUTPUT_FILE || out->type == ZCP_OUTPUT_UNIX) && out->path[0] == '\0')
                return err_at(c, &s->key[OUT_TYPE]->mark, "output.type %s requires output.path",
                              zcp_output_type_names[out->type]);
        if (out->type == ZCP_OUTPUT_MQTT && (s->mask & (1u << OUT_PATH)))
                return err_at(c, &s->key[OUT_PATH]->mark, "output.path does not apply to output.type mqtt");
        for (size_t j = OUT_MQTT_FIRST; j < sizeof(output_keys) / sizeof(output_keys[0]); j++)
                if (out->type != ZCP_OUTPUT_MQTT && (s->mask & (1u << j)))
                        return err_at(c, &s->key[j]->mark, "output.%s applies only to output.type mqtt, not %s",
                                      output_keys[j].name, zcp_output_type_names[out->type]);
        if (out->type != ZCP_OUTPUT_MQTT)
                return 0;
        if ((why = topic_problem(m->topic)) != NULL)
                return err_at(c, &s->at, "output.topic '%s' %s", show(m->topic, strlen(m->topic)).s, why);
        if ((why = topic_problem(m->availability_topic)) != NULL)
                return err_at(c, &s->at, "output.availability_topic '%s' %s",
                              show(m->availability_topic, strlen(m->availability_topic)).s, why);
        if (!m->cert_file[0] != !m->key_file[0])
                return err_at(c, &s->key[m->cert_file[0] ? OUT_CERT : OUT_KEY]->mark,
                              "output.cert_file and output.key_file go together");
        if (m->cert_file[0] && !m->ca_file[0])
                return err_at(c, &s->key[OUT_CERT]->mark, "output.cert_file needs output.ca_file (TLS)");
        if (m->password_file[0] && !m->username[0])
                return err_at(c, &s->key[OUT_PASSWORD]->mark, "output.password_file needs output.username");
        return 0;
}

static bool is_loopback(const char *addr)
{
        struct in_addr a4;
        struct in6_addr a6;

        if (strcmp(addr, "localhost") == 0)
                return true;
        if (inet_pton(AF_INET, addr, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, addr, &a6) == 1) {
                if (IN6_IS_ADDR_LOOPBACK(&a6))
                        return true;
                return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
        }
        return false;
}

static int check_http(struct ctx *c, void *base, const struct seen *s)
{
        const struct zcp_http_config *http = base;

        if (!http->allow_non_loopback && !is_loopback(http->listen))
                return err_at(c, &s->key[HTTP_LISTEN]->mark,
                              "metrics.http.listen '%s' is not a loopback address (127.0.0.0/8, ::1, localhost); "
                              "set allow_non_loopback: true to expose metrics",
                              show(http->listen, strlen(http->listen)).s);
        return 0;
}

static int parse_streams(struct ctx *c, const struct node *key, const struct node *v,
                         struct zcp_config *cfg)
{
        const struct node *name_node[ZCP_CONFIG_MAX_STREAMS];
        uint32_t n_gst = 0;
        struct seen s;
        int r;

        if (node_is_null(v) || (v->kind == NODE_SEQ && v->n == 0))
                return err_at(c, &key->mark, "streams must list at least one stream");
        if (v->kind != NODE_SEQ) {
                if (v->kind == NODE_SCALAR)
                        return err_at(c, &v->mark, "streams: expected a sequence of streams, got %s '%s'",
                                      node_kind_name(v), show(v->value, v->len).s);
                return err_at(c, &v->mark, "streams: expected a sequence of streams, got %s",
                              node_kind_name(v));
        }
        if (v->n > ZCP_CONFIG_MAX_STREAMS)
                return err_at(c, &v->kids[ZCP_CONFIG_MAX_STREAMS]->mark,
                              "too many streams (%zu, at most %d)", v->n, ZCP_CONFIG_MAX_STREAMS);
        for (size_t i = 0; i < v->n; i++) {
                struct zcp_stream_config *st = &cfg->streams[i];
                const struct node *item = v->kids[i];

                stream_defaults(st);
                r = parse_section(c, NULL, item, &stream_section, st, &s);
                if (r < 0)
                        return r;
                if (st->model.path[0] == '\0')
                        set_str(st->model.path, sizeof(st->model.path), default_weights());
                if (!(s.mask & (1u << STREAM_SOURCE)))
                        return err_at(c, &item->mark, "stream %zu: missing required section 'source'", i);
                name_node[i] = (s.mask & (1u << STREAM_NAME)) ? s.val[STREAM_NAME] : NULL;
                if (!name_node[i])
                        snprintf(st->name, sizeof(st->name), "stream%zu", i);
                set_str(st->output.stream, sizeof(st->output.stream), st->name);
                for (size_t j = 0; j < i; j++) {
                        if (strcmp(cfg->streams[j].name, st->name) != 0)
                                continue;
                        return err_at(c, name_node[i] ? &name_node[i]->mark : &item->mark,
                                      "duplicate stream name '%s'%s (stream %zu at line %zu has it too)",
                                      st->name, name_node[i] ? "" : ", the default name of this stream", j,
                                      (name_node[j] ? name_node[j] : v->kids[j])->mark.line + 1);
                }
        }
        cfg->stream_count = (uint32_t)v->n;
        /* decoder_threads auto shares the CPUs among every stream that decodes with GStreamer */
        for (size_t i = 0; i < v->n; i++) {
                enum zcp_source_type t = cfg->streams[i].source.type;

                n_gst += t == ZCP_SOURCE_FILE || t == ZCP_SOURCE_NETWORK;
        }
        for (size_t i = 0; i < v->n; i++)
                cfg->streams[i].source.gst_streams = n_gst ? n_gst : 1;
        return 0;
}

/* ---- the schema, for tests and documentation -------------------------------- */

static void key_default_text(const struct key_desc *d, char *buf, size_t size)
{
        buf[0] = '\0';
        switch (d->type) {
        case K_U32:
        case K_U64:
                snprintf(buf, size, "%llu", (unsigned long long)d->udef);
                break;
        case K_FLOAT:
                snprintf(buf, size, "%g", d->fdef[0]);
                break;
        case K_FLOAT3:
                if (d->flags & F_MODEL)
                        snprintf(buf, size, "model");
                else
                        snprintf(buf, size, "[%g, %g, %g]", d->fdef[0], d->fdef[1], d->fdef[2]);
                break;
        case K_NAMES:
                snprintf(buf, size, "[]");
                break;
        case K_BOOL:
                snprintf(buf, size, "%s", d->udef ? "true" : "false");
                break;
        case K_ENUM:
                if (d->udef < (uint64_t)d->count)
                        snprintf(buf, size, "%s", d->names[d->udef]);
                break;
        case K_STR:
        case K_PATH:
        case K_URIPATH:
                snprintf(buf, size, "%s", d->sdef ? d->sdef : "");
                break;
        case K_SECTION:
        case K_STREAMS:
                break;
        }
}

static void keys_walk(const struct section *sec, const char *prefix,
                      void (*fn)(const struct zcp_config_key *key, void *userdata), void *userdata)
{
        static const char *const type_names[] = {
                [K_U32] = "uint",  [K_U64] = "uint",     [K_FLOAT] = "float",   [K_BOOL] = "bool",
                [K_ENUM] = "enum", [K_STR] = "string",   [K_PATH] = "path",     [K_URIPATH] = "path",
                [K_FLOAT3] = "float3", [K_NAMES] = "names", [K_SECTION] = "section", [K_STREAMS] = "streams",
        };

        for (size_t i = 0; i < sec->count; i++) {
                const struct key_desc *d = &sec->keys[i];
                struct zcp_config_key k = {
                        .name = d->name,
                        .type = type_names[d->type],
                        .required = (d->flags & F_REQUIRED) != 0,
                        .sources = 0,
                };

                snprintf(k.path, sizeof(k.path), "%s%s", prefix, d->name);
                key_default_text(d, k.def, sizeof(k.def));
                for (int t = 0; t < ZCP_SOURCE_TYPE_COUNT; t++)
                        if (!(d->flags & S_ALL) || (d->flags & source_bit((enum zcp_source_type)t)))
                                k.sources |= 1u << t;
                fn(&k, userdata);
                if (d->sub) {
                        char sub[sizeof(k.path) + 1];

                        snprintf(sub, sizeof(sub), "%s.", k.path);
                        keys_walk(d->sub, sub, fn, userdata);
                }
        }
}

void zcp_config_keys_foreach(void (*fn)(const struct zcp_config_key *key, void *userdata), void *userdata)
{
        keys_walk(&top_section, "", fn, userdata);
}

/* ---- entry points ----------------------------------------------------------- */

static int parse_text(struct ctx *c, const char *text, size_t len, struct zcp_config **ret_config)
{
        struct zcp_config *cfg = NULL;
        struct node *root = NULL;
        yaml_parser_t parser;
        struct seen s;
        int r;

        if (len > ZCP_CONFIG_MAX_BYTES)
                return too_large(c, text, len);
        c->text = text;
        c->text_len = len;
        if (!yaml_parser_initialize(&parser))
                return err_nopos(c, -ENOMEM, "out of memory");
        yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
        r = build_tree(c, &parser, &root);
        yaml_parser_delete(&parser);
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
        config_defaults(cfg);
        if (snprintf(cfg->source_path, sizeof(cfg->source_path), "%s", c->name) >= (int)sizeof(cfg->source_path)) {
                r = err_nopos(c, -ENAMETOOLONG, "file name too long");
                goto out;
        }
        r = parse_section(c, NULL, root, &top_section, cfg, &s);
        if (r < 0)
                goto out;
        if (!(s.mask & (1u << TOP_STREAMS))) {
                r = err_at(c, &root->mark, "missing required key 'streams' (a list of one or more streams)");
                goto out;
        }
        *ret_config = cfg;
        cfg = NULL;
        r = 0;
out:
        free(cfg);
        node_free(root);
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
                                r = too_large(c, buf, st.st_size > (off_t)ZCP_CONFIG_MAX_BYTES ? (uint64_t)st.st_size : 0);
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
                r = too_large(c, buf, st.st_size > (off_t)ZCP_CONFIG_MAX_BYTES ? (uint64_t)st.st_size : 0);
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

int zcp_config_load(const char *path, struct zcp_config **ret_config, char *errbuf, size_t errlen)
{
        char dir[ZCP_PATH_MAX], *real_dir = NULL, *slash, *buf = NULL;
        struct ctx c = { .name = path, .errbuf = errbuf, .errlen = errlen };
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
