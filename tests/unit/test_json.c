/* SPDX-License-Identifier: MIT */
/*
 * The one JSON string escaper (core/json.h): the escapes themselves against
 * hand-written expectations, every byte value, and snprintf's contract
 * (cut at size - 1 with a NUL, the full length returned, size 0 writes
 * nothing).
 */
#include <string.h>

#include "common.h"
#include "core/json.h"

int main(void)
{
        char buf[64];
        char all[256];

        CHECK(zcp_json_escape(buf, sizeof(buf), "plain UTF-8: caf\xc3\xa9") == 18 &&
              strcmp(buf, "plain UTF-8: caf\xc3\xa9") == 0);
        CHECK(zcp_json_escape(buf, sizeof(buf), "a\"b\\c\nd\x01\x7f") == 26);
        CHECK(strcmp(buf, "a\\\"b\\\\c\\u000ad\\u0001\\u007f") == 0);
        CHECK(zcp_json_escape(buf, sizeof(buf), "") == 0 && buf[0] == '\0');

        /* Cut like snprintf: the whole length comes back, the buffer ends in a NUL. */
        memset(buf, 'x', sizeof(buf));
        CHECK(zcp_json_escape(buf, 5, "ab\"cd") == 6);
        CHECK(memcmp(buf, "ab\\\"", 4) == 0 && buf[4] == '\0' && buf[5] == 'x');
        CHECK(zcp_json_escape(NULL, 0, "\n\n") == 12);

        /* Every byte 1..255: control characters and DEL as \u00XX, '"' '\' with a backslash, the rest as is. */
        for (int c = 1; c < 256; c++)
                all[c - 1] = (char)c;
        all[255] = '\0';
        {
                static char out[256 * 6 + 1];
                size_t n = zcp_json_escape(out, sizeof(out), all), want = 0;

                for (int c = 1; c < 256; c++)
                        want += c < 0x20 || c == 0x7f ? 6 : c == '"' || c == '\\' ? 2 : 1;
                CHECK(n == want && strlen(out) == want);
                CHECK(strstr(out, "\\u001f ") && strstr(out, "\\u007f\x80"));
        }
        printf("json: ok\n");
        return 0;
}
