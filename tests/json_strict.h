/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * A strict JSON check for the C tests that read zcpipe's output lines (the
 * Python tests use tests/integration/zcpjson.py): RFC 8259 grammar only (so
 * nan, inf and -nan are refused), strings in valid UTF-8 without raw control
 * characters, one object per line, ending in '\n'.
 *
 *   zcp_json_line_ok(line, len) -> NULL when the line is one strict JSON
 *   object and its newline, else a static description of the first fault.
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct zcp_json_p {
        const unsigned char *s, *end;
        const char *err;
        int depth;
};

static bool zcp_json_value_(struct zcp_json_p *p);

static void zcp_json_ws_(struct zcp_json_p *p)
{
        while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\r'))
                p->s++;
}

static bool zcp_json_fail_(struct zcp_json_p *p, const char *why)
{
        if (!p->err)
                p->err = why;
        return false;
}

static bool zcp_json_string_(struct zcp_json_p *p)
{
        p->s++; /* '"' */
        while (p->s < p->end) {
                unsigned char c = *p->s;

                if (c == '"') {
                        p->s++;
                        return true;
                }
                if (c < 0x20)
                        return zcp_json_fail_(p, "raw control character in a string");
                if (c == '\\') {
                        if (++p->s >= p->end)
                                break;
                        if (*p->s == 'u') {
                                for (int i = 1; i <= 4; i++)
                                        if (p->s + i >= p->end || !strchr("0123456789abcdefABCDEF", p->s[i]) ||
                                            p->s[i] == 0)
                                                return zcp_json_fail_(p, "bad \\u escape");
                                p->s += 5;
                        } else if (strchr("\"\\/bfnrt", *p->s) && *p->s) {
                                p->s++;
                        } else {
                                return zcp_json_fail_(p, "bad escape");
                        }
                        continue;
                }
                if (c < 0x80) {
                        p->s++;
                        continue;
                }
                {
                        size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
                        unsigned cp = len == 2 ? c & 0x1fu : len == 3 ? c & 0x0fu : c & 0x07u;

                        if (!len || p->s + len > p->end)
                                return zcp_json_fail_(p, "invalid UTF-8");
                        for (size_t i = 1; i < len; i++) {
                                if ((p->s[i] & 0xc0) != 0x80)
                                        return zcp_json_fail_(p, "invalid UTF-8");
                                cp = cp << 6 | (p->s[i] & 0x3fu);
                        }
                        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
                            (cp >= 0xd800 && cp <= 0xdfff))
                                return zcp_json_fail_(p, "invalid UTF-8");
                        p->s += len;
                }
        }
        return zcp_json_fail_(p, "unterminated string");
}

static bool zcp_json_digits_(struct zcp_json_p *p)
{
        const unsigned char *start = p->s;

        while (p->s < p->end && *p->s >= '0' && *p->s <= '9')
                p->s++;
        return p->s > start;
}

static bool zcp_json_number_(struct zcp_json_p *p)
{
        if (*p->s == '-')
                p->s++;
        if (p->s < p->end && *p->s == '0')
                p->s++;
        else if (!zcp_json_digits_(p))
                return zcp_json_fail_(p, "not a number (nan/inf are not JSON)");
        if (p->s < p->end && *p->s == '.') {
                p->s++;
                if (!zcp_json_digits_(p))
                        return zcp_json_fail_(p, "bad fraction");
        }
        if (p->s < p->end && (*p->s == 'e' || *p->s == 'E')) {
                p->s++;
                if (p->s < p->end && (*p->s == '+' || *p->s == '-'))
                        p->s++;
                if (!zcp_json_digits_(p))
                        return zcp_json_fail_(p, "bad exponent");
        }
        return true;
}

static bool zcp_json_word_(struct zcp_json_p *p, const char *w)
{
        size_t n = strlen(w);

        if ((size_t)(p->end - p->s) < n || memcmp(p->s, w, n) != 0)
                return zcp_json_fail_(p, "unexpected token");
        p->s += n;
        return true;
}

static bool zcp_json_container_(struct zcp_json_p *p, char close, bool object)
{
        if (++p->depth > 64)
                return zcp_json_fail_(p, "nested too deep");
        p->s++;
        zcp_json_ws_(p);
        if (p->s < p->end && *p->s == close) {
                p->s++;
                p->depth--;
                return true;
        }
        for (;;) {
                zcp_json_ws_(p);
                if (object) {
                        if (p->s >= p->end || *p->s != '"' || !zcp_json_string_(p))
                                return zcp_json_fail_(p, "expected a key");
                        zcp_json_ws_(p);
                        if (p->s >= p->end || *p->s != ':')
                                return zcp_json_fail_(p, "expected ':'");
                        p->s++;
                }
                if (!zcp_json_value_(p))
                        return false;
                zcp_json_ws_(p);
                if (p->s < p->end && *p->s == ',') {
                        p->s++;
                        continue;
                }
                if (p->s < p->end && *p->s == close) {
                        p->s++;
                        p->depth--;
                        return true;
                }
                return zcp_json_fail_(p, "expected ',' or a closing bracket");
        }
}

static bool zcp_json_value_(struct zcp_json_p *p)
{
        zcp_json_ws_(p);
        if (p->s >= p->end)
                return zcp_json_fail_(p, "value expected");
        switch (*p->s) {
        case '{':
                return zcp_json_container_(p, '}', true);
        case '[':
                return zcp_json_container_(p, ']', false);
        case '"':
                return zcp_json_string_(p);
        case 't':
                return zcp_json_word_(p, "true");
        case 'f':
                return zcp_json_word_(p, "false");
        case 'n':
                return zcp_json_word_(p, "null");
        default:
                return zcp_json_number_(p);
        }
}

static inline const char *zcp_json_line_ok(const char *line, size_t len)
{
        struct zcp_json_p p = { (const unsigned char *)line, (const unsigned char *)line + len, NULL, 0 };

        if (len == 0 || line[len - 1] != '\n')
                return "torn line (no newline)";
        p.end--;
        zcp_json_ws_(&p);
        if (p.s >= p.end || *p.s != '{')
                return "not an object";
        if (!zcp_json_value_(&p))
                return p.err;
        zcp_json_ws_(&p);
        return p.s == p.end ? NULL : "junk after the object";
}
