/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the YAML config parser (core/config.c) on any bytes.
 * Either it returns 0 and a config, or a negative errno and one line per
 * error found, "NAME:LINE:COL: message" (NAME: message without a position),
 * '\n' between them, at most ZCP_CONFIG_MAX_ERRORS + 1, with no other
 * control characters.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct zcp_config *cfg = NULL;
        static char err[ZCP_CONFIG_ERRBUF];
        unsigned lines = 0;
        int r;

        err[0] = '\0';
        r = zcp_config_parse("fuzz.yaml", (const char *)data, size, &cfg, err, sizeof(err));
        if (r == 0) {
                FUZZ_CHECK(cfg && cfg->stream_count >= 1 && cfg->stream_count <= ZCP_CONFIG_MAX_STREAMS);
                zcp_config_free(cfg);
                return 0;
        }
        FUZZ_CHECK(r < 0 && cfg == NULL);
        FUZZ_CHECK(err[0]);
        for (const char *l = err; *l; lines++) {
                size_t n = strcspn(l, "\n");

                FUZZ_CHECK(strncmp(l, "fuzz.yaml:", 10) == 0);
                for (const char *p = l; p < l + n; p++)
                        FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
                l += n;
                if (*l == '\n')
                        FUZZ_CHECK(*++l);
        }
        FUZZ_CHECK(lines <= ZCP_CONFIG_MAX_ERRORS + 1);
        return 0;
}
