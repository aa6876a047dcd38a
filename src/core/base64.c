/* SPDX-License-Identifier: MIT */
#include "base64.h"

#include <stdint.h>

static int value(char c, bool url)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+' || (url && c == '-'))
                return 62;
        if (c == '/' || (url && c == '_'))
                return 63;
        return -1;
}

long zcp_base64_decode(const char *in, char *out, size_t size, bool url)
{
        size_t n = 0;
        uint32_t acc = 0;
        int bits = 0;

        for (; *in && *in != '='; in++) {
                const int v = value(*in, url);

                if (v < 0)
                        return -1;
                acc = (acc << 6) | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        if (n >= size)
                                return -1;
                        out[n++] = (char)((acc >> bits) & 0xff);
                }
        }
        while (*in == '=')
                in++;
        return *in ? -1 : (long)n;
}
