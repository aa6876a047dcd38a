/* SPDX-License-Identifier: MIT */
/* The growing output buffer of the metrics endpoint's content (prom.h): text, label values, JSON strings. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "daemon/prom.h"

#define BUF_MAX (64u << 20)   /* a scrape larger than this is a bug: fail it */

static bool buf_reserve(struct zcp_prom_buf *b, size_t more)
{
        size_t cap;
        char *p;

        if (b->failed)
                return false;
        if (b->len + more + 1 <= b->cap)
                return true;
        cap = b->cap ? b->cap : 16384;
        while (cap < b->len + more + 1)
                cap *= 2;
        if (cap > BUF_MAX) {
                b->failed = true;
                return false;
        }
        p = realloc(b->data, cap);
        if (!p) {
                b->failed = true;
                return false;
        }
        b->data = p;
        b->cap = cap;
        return true;
}

void zcp_prom_buf_printf(struct zcp_prom_buf *b, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (!buf_reserve(b, 256))
                return;
        va_start(ap, fmt);
        n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
                b->failed = true;
                return;
        }
        if ((size_t)n >= b->cap - b->len) {
                if (!buf_reserve(b, (size_t)n))
                        return;
                va_start(ap, fmt);
                n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
                va_end(ap);
                if (n < 0 || (size_t)n >= b->cap - b->len) {
                        b->failed = true;
                        return;
                }
        }
        b->len += (size_t)n;
}

void zcp_prom_buf_putc(struct zcp_prom_buf *b, char c)
{
        if (!buf_reserve(b, 1))
                return;
        b->data[b->len++] = c;
        b->data[b->len] = '\0';
}

void zcp_prom_buf_label_value(struct zcp_prom_buf *b, const char *s)
{
        for (; *s; s++) {
                if (*s == '\\' || *s == '"') {
                        zcp_prom_buf_putc(b, '\\');
                        zcp_prom_buf_putc(b, *s);
                } else if (*s == '\n') {
                        zcp_prom_buf_putc(b, '\\');
                        zcp_prom_buf_putc(b, 'n');
                } else {
                        zcp_prom_buf_putc(b, *s);
                }
        }
}

void zcp_prom_buf_json_string(struct zcp_prom_buf *b, const char *s)
{
        size_t n = zcp_json_escape(NULL, 0, s);

        zcp_prom_buf_putc(b, '"');
        if (!buf_reserve(b, n + 1))
                return;
        zcp_json_escape(b->data + b->len, b->cap - b->len, s);
        b->len += n;
        zcp_prom_buf_putc(b, '"');
}

char *zcp_prom_buf_steal(struct zcp_prom_buf *b, size_t *ret_len)
{
        char *p = b->data;

        *ret_len = b->len;
        *b = (struct zcp_prom_buf){ 0 };
        return p;
}

void zcp_prom_buf_done(struct zcp_prom_buf *b)
{
        free(b->data);
        *b = (struct zcp_prom_buf){ 0 };
}
