/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the YAML config parser (core/config.c) on any bytes.
 * Either it returns 0 and a config, or a negative errno and one line
 * "NAME:LINE:COL: message" (NAME: message without a position) with no
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
        char err[512];
        int r;

        err[0] = '\0';
        r = zcp_config_parse("fuzz.yaml", (const char *)data, size, &cfg, err, sizeof(err));
        if (r == 0) {
                FUZZ_CHECK(cfg && cfg->stream_count >= 1 && cfg->stream_count <= ZCP_CONFIG_MAX_STREAMS);
                zcp_config_free(cfg);
                return 0;
        }
        FUZZ_CHECK(r < 0 && cfg == NULL);
        FUZZ_CHECK(strncmp(err, "fuzz.yaml:", 10) == 0 && !strchr(err, '\n'));
        for (const char *p = err; *p; p++)
                FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
        return 0;
}
