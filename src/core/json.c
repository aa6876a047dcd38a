/* SPDX-License-Identifier: MIT */
/* JSON string escaping (json.h). */
#include "core/json.h"

size_t zcp_json_escape(char *dst, size_t size, const char *s)
{
        static const char hex[] = "0123456789abcdef";
        size_t n = 0;

        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                char esc[6];
                size_t len = 0;

                if (c == '"' || c == '\\') {
                        esc[len++] = '\\';
                        esc[len++] = (char)c;
                } else if (c < 0x20 || c == 0x7f) {
                        esc[0] = '\\';
                        esc[1] = 'u';
                        esc[2] = '0';
                        esc[3] = '0';
                        esc[4] = hex[c >> 4];
                        esc[5] = hex[c & 15];
                        len = 6;
                } else {
                        esc[len++] = (char)c;
                }
                for (size_t i = 0; i < len; i++, n++)
                        if (n + 1 < size)
                                dst[n] = esc[i];
        }
        if (size > 0)
                dst[n < size ? n : size - 1] = '\0';
        return n;
}
