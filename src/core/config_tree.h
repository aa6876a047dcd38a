/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The configuration loader's first half (config_tree.c): libyaml events
 * turned into a small node tree, rejecting syntax errors, anchors, aliases,
 * tags and extra documents; and the one-line errors every part of the loader
 * reports, "FILE:LINE:COL: message" (1-based libyaml marks), one line per
 * error, collected up to ZCP_CONFIG_MAX_ERRORS. Main thread
 * only; no global state. Calls nothing else of the loader.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <yaml.h>

#include "core/config.h"   /* ZCP_CONFIG_MAX_ERRORS */
#include "core/log.h"      /* ZCP_PRINTF */

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

/*
 * Where errors go, and what paths in the file are relative to. The loader
 * goes on after an error where it can, so that one run reports every error
 * of the file (up to ZCP_CONFIG_MAX_ERRORS): errbuf collects one line per
 * error, '\n' between them.
 */
struct ctx {
        const char *name;       /* file name for messages */
        char *errbuf;
        size_t errlen;
        const char *base_dir;   /* absolute, canonical; NULL = leave relative paths alone */
        const char *text;       /* the input, for positions of reader errors */
        size_t text_len;
        bool read_files;        /* also open every file a key names for reading (ZCP_CONFIG_READ_FILES) */
        unsigned errors;        /* errors so far (lines that did not fit errbuf included) */
        size_t used;            /* bytes of errbuf written, without the NUL */
        int first_err;          /* the code of the first error */
        bool content_err;       /* an error in the file itself (-EINVAL), not only a file it names */
        bool stopping;          /* the last line, "stopped after ...", is being said */
};

/* The walker stops at ZCP_CONFIG_MAX_ERRORS errors. */
static inline bool too_many_errors(const struct ctx *c)
{
        return c->errors >= ZCP_CONFIG_MAX_ERRORS;
}

/*
 * Appends the error to c->errbuf as one line (control characters replaced;
 * a line that does not fit whole is left out; past ZCP_CONFIG_MAX_ERRORS
 * errors only counted, but for the stopping line) and returns `err`. m NULL:
 * no position.
 */
int zcp_config_errv(struct ctx *c, int err, const yaml_mark_t *m, const char *fmt, va_list ap);

/* Orders the error lines in errbuf by line and column, those without a position last (stable). */
void zcp_config_errors_sort(struct ctx *c);

/*
 * A file over ZCP_CONFIG_MAX_BYTES: the error points at the first byte past
 * the limit (line and column, as libyaml counts them: characters), so the
 * user sees where the file outgrew it. `text` holds at least the limit plus
 * one byte; `total` is the whole size when known, else 0. Returns -EFBIG.
 */
int zcp_config_too_large(struct ctx *c, const char *text, uint64_t total);

/*
 * The tree of `text` (len bytes, at most ZCP_CONFIG_MAX_BYTES): exactly one
 * document; its root goes to *ret_root (never NULL: an empty document has an
 * empty scalar root), the caller's to free. Returns 0 or the error's code.
 */
int zcp_config_tree_parse(struct ctx *c, const char *text, size_t len, struct node **ret_root);
/* Accepts NULL. */
void zcp_config_node_free(struct node *n);

static inline bool node_is_null(const struct node *n)
{
        return n->kind == NODE_SCALAR && n->plain &&
               (n->len == 0 || strcmp(n->value, "~") == 0 || strcmp(n->value, "null") == 0);
}

static inline const char *node_kind_name(const struct node *n)
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

static inline int err_at(struct ctx *c, const yaml_mark_t *m, const char *fmt, ...) ZCP_PRINTF(3, 4);
static inline int err_at(struct ctx *c, const yaml_mark_t *m, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        zcp_config_errv(c, -EINVAL, m, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static inline int errv_at(struct ctx *c, int err, const yaml_mark_t *m, const char *fmt, ...) ZCP_PRINTF(4, 5);
static inline int errv_at(struct ctx *c, int err, const yaml_mark_t *m, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        zcp_config_errv(c, err, m, fmt, ap);
        va_end(ap);
        return err;
}

static inline int err_nopos(struct ctx *c, int err, const char *fmt, ...) ZCP_PRINTF(3, 4);
static inline int err_nopos(struct ctx *c, int err, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        zcp_config_errv(c, err, NULL, fmt, ap);
        va_end(ap);
        return err;
}

/* A user-written scalar for a message: escaped, at most ~40 characters. */
struct shown {
        char s[64];
};

static inline struct shown show(const char *v, size_t len)
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
