/* SPDX-License-Identifier: MIT */
/*
 * The project's error codes (core/err.h): outside errno's range, each with a
 * message of its own (never glibc's "Unknown error N"), distinct exit codes
 * (core/exitcode.h); negative errno values get strerror's text.
 */
#include <errno.h>
#include <string.h>

#include "common.h"
#include "core/err.h"
#include "core/exitcode.h"

int main(void)
{
        static const int codes[] = { ZCP_ERR_INPUT, ZCP_ERR_CONFIG, ZCP_ERR_GPU_STICKY };
        const size_t n = sizeof(codes) / sizeof(codes[0]);

        for (size_t i = 0; i < n; i++) {
                const char *m = zcp_strerror(codes[i]);

                /* The kernel reserves -1 .. -4095 (MAX_ERRNO) for errno values. */
                CHECK(codes[i] < -4095);
                CHECK_MSG(m && m[0] && strstr(m, "Unknown error") == NULL, "code %d: '%s'", codes[i], m);
                for (size_t j = 0; j < i; j++) {
                        CHECK(codes[i] != codes[j]);
                        CHECK(strcmp(m, zcp_strerror(codes[j])) != 0);
                }
        }
        CHECK(strcmp(zcp_strerror(-ENOENT), strerror(ENOENT)) == 0);
        CHECK(strcmp(zcp_strerror(ENOENT), strerror(ENOENT)) == 0);
        CHECK(strcmp(zcp_strerror(0), "success") == 0);
        /* The exit codes systemd and users tell apart (README.md's table). */
        CHECK(ZCP_ERR_INPUT == -(ZCP_ERR_BASE + ZCP_EXIT_NOINPUT) && ZCP_ERR_CONFIG == -(ZCP_ERR_BASE + ZCP_EXIT_CONFIG) &&
              ZCP_ERR_GPU_STICKY == -(ZCP_ERR_BASE + ZCP_EXIT_GPU_FATAL));
        CHECK(ZCP_EXIT_NOINPUT == 66 && ZCP_EXIT_NO_DEVICE == 69 && ZCP_EXIT_CONFIG == 78 && ZCP_EXIT_GPU_FATAL == 86);
        printf("err: ok\n");
        return 0;
}
