/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Shared by the fuzz targets (tests/fuzz/): a check that aborts (a finding
 * for libFuzzer, a failure for the corpus replay), and the entry point.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                                        \
        do {                                                                                    \
                if (!(cond)) {                                                                  \
                        fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
                        abort();                                                                \
                }                                                                               \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
