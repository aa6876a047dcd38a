/* SPDX-License-Identifier: MIT */
/*
 * The configuration loader's node tree and errors (config_tree.h): libyaml
 * events are read into a tree first, so that the walker (config.c) sees
 * every key with its position and nothing YAML allows but the schema does
 * not (anchors, aliases, tags, several documents) gets that far.
 */
#include "core/config_tree.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#include "core/config.h"

#define MAX_DEPTH 64   /* the schema needs 5; anything deeper is nonsense */

void zcp_config_node_free(struct node *n)
{
        if (!n)
                return;
        for (size_t i = 0; i < n->n; i++)
                zcp_config_node_free(n->kids[i]);
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

static void sanitize(char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        *s = '?';
}

int zcp_config_errv(struct ctx *c, int err, const yaml_mark_t *m, const char *fmt, va_list ap)
{
        char line[768];
        size_t len;
        int n;

        if (c->errors++ == 0)
                c->first_err = err;
        if (err == -EINVAL)
                c->content_err = true;
        /* The walker checks the count between keys and streams, so one of them may find a few more:
         * said are the first ZCP_CONFIG_MAX_ERRORS, then the line that says it stopped. */
        if (!c->errbuf || c->errlen == 0 || (c->errors > ZCP_CONFIG_MAX_ERRORS && !c->stopping))
                return err;
        if (m)
                n = snprintf(line, sizeof(line), "%s:%zu:%zu: ", c->name, m->line + 1, m->column + 1);
        else
                n = snprintf(line, sizeof(line), "%s: ", c->name);
        if (n >= 0 && (size_t)n < sizeof(line))
                vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        sanitize(line);
        len = strlen(line);
        if (c->used == 0 && c->errors == 1) {
                /* The first line always goes in, cut to fit if it must. */
                snprintf(c->errbuf, c->errlen, "%s", line);
                c->used = strlen(c->errbuf);
        } else if (c->used + 1 + len < c->errlen) {
                c->errbuf[c->used++] = '\n';
                memcpy(c->errbuf + c->used, line, len + 1);
                c->used += len;
        }
        return err;
}

/* The line and column of an error line "NAME:LINE:COL: ..."; none (after every position) for "NAME: ...". */
static uint64_t line_key(const struct ctx *c, const char *line)
{
        const char *p = line + strlen(c->name);
        unsigned long l, col;
        char *end;

        if (*p != ':' || !isdigit((unsigned char)p[1]))
                return UINT64_MAX;
        l = strtoul(p + 1, &end, 10);
        if (*end != ':' || !isdigit((unsigned char)end[1]))
                return UINT64_MAX;
        col = strtoul(end + 1, NULL, 10);
        return ((uint64_t)l << 32) | (col & 0xffffffffu);
}

void zcp_config_errors_sort(struct ctx *c)
{
        const char *line[ZCP_CONFIG_MAX_ERRORS + 2];
        size_t len[ZCP_CONFIG_MAX_ERRORS + 2], n = 0, o = 0;
        char *copy;

        if (!c->errbuf || c->used == 0 || !(copy = strdup(c->errbuf)))
                return;
        for (char *p = copy; *p && n < ZCP_CONFIG_MAX_ERRORS + 2; n++) {
                len[n] = strcspn(p, "\n");
                line[n] = p;
                p += len[n] + (p[len[n]] == '\n');
        }
        /* insertion sort: stable, and a few lines at most */
        for (size_t i = 1; i < n; i++) {
                const char *l = line[i];
                size_t ll = len[i], j = i;
                uint64_t k = line_key(c, l);

                for (; j > 0 && line_key(c, line[j - 1]) > k; j--) {
                        line[j] = line[j - 1];
                        len[j] = len[j - 1];
                }
                line[j] = l;
                len[j] = ll;
        }
        for (size_t i = 0; i < n; i++) {
                if (i)
                        c->errbuf[o++] = '\n';
                memcpy(c->errbuf + o, line[i], len[i]);
                o += len[i];
        }
        c->errbuf[o] = '\0';
        free(copy);
}

int zcp_config_too_large(struct ctx *c, const char *text, uint64_t total)
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
                                zcp_config_node_free(n);
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
                                zcp_config_node_free(n);
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
        zcp_config_node_free(root);
        return r;
}

int zcp_config_tree_parse(struct ctx *c, const char *text, size_t len, struct node **ret_root)
{
        yaml_parser_t parser;
        int r;

        c->text = text;
        c->text_len = len;
        if (!yaml_parser_initialize(&parser))
                return err_nopos(c, -ENOMEM, "out of memory");
        yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
        r = build_tree(c, &parser, ret_root);
        yaml_parser_delete(&parser);
        return r;
}
