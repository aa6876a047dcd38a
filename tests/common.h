/* SPDX-License-Identifier: MIT */
#pragma once
/* Minimal test helpers: CHECK aborts with file:line (works under NDEBUG). */
#include <stdio.h>
#include <stdlib.h>

#define ZCP_TEST_SKIP 77

#define CHECK(cond)                                                                     \
        do {                                                                            \
                if (!(cond)) {                                                          \
                        fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
                        abort();                                                        \
                }                                                                       \
        } while (0)

#define CHECK_MSG(cond, ...)                                                            \
        do {                                                                            \
                if (!(cond)) {                                                          \
                        fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
                        fprintf(stderr, __VA_ARGS__);                                   \
                        fputc('\n', stderr);                                            \
                        abort();                                                        \
                }                                                                       \
        } while (0)

/* Path under the source tree (ZCP_SOURCE_ROOT, set by meson test). */
static inline const char *zcp_test_src_root(void)
{
        const char *r = getenv("ZCP_SOURCE_ROOT");
        return r ? r : ".";
}
static inline const char *zcp_test_build_root(void)
{
        const char *r = getenv("ZCP_BUILD_ROOT");
        return r ? r : "build";
}
/*
 * The default weights, generated at build time (models/meson.build): in
 * $ZCP_MODELDIR (set by meson test), else in the build tree's models/.
 * Returns a static buffer.
 */
static inline const char *zcp_test_default_weights(void)
{
        static char path[512];
        const char *dir = getenv("ZCP_MODELDIR");

        if (dir && dir[0])
                snprintf(path, sizeof(path), "%s/zcnet-default.safetensors", dir);
        else
                snprintf(path, sizeof(path), "%s/models/zcnet-default.safetensors", zcp_test_build_root());
        return path;
}
