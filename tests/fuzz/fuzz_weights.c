/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the zcnet .safetensors loader (model/zcnet.c) on any
 * bytes, through its real entry point: the input is written to a memfd and
 * loaded by path. Either a model whose every tensor lies inside the file, or
 * a negative errno and a one-line message.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static int fd = -1;
        struct zcp_plan *m = NULL;
        char path[64], err[512];
        int r;

        if (fd < 0) {
                fd = memfd_create("zcp-fuzz-weights", MFD_CLOEXEC);
                FUZZ_CHECK(fd >= 0);
        }
        FUZZ_CHECK(ftruncate(fd, 0) == 0);
        FUZZ_CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        r = zcp_zcnet_load(path, NULL, &m, err, sizeof(err));
        if (r < 0) {
                FUZZ_CHECK(m == NULL && !strchr(err, '\n'));
                return 0;
        }
        /* A plan the loader returns passes its own check: every view and weight inside bounds. */
        FUZZ_CHECK(m && m->op_count >= 3 && m->head.classes >= 1);
        FUZZ_CHECK(zcp_plan_check(m, err, sizeof(err)) == 0);
        /* Touch every weight: one outside the allocation would be an ASan report. */
        {
                volatile float sum = 0;

                for (size_t k = 0; k < m->weight_floats; k++)
                        sum += m->weights[k];
                (void)sum;
        }
        zcp_plan_free(m);
        return 0;
}
