/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the safetensors weights loader (infer/weights.c) on any
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
#include "infer/reference.h"
#include "infer/weights.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static int fd = -1;
        struct zcp_model *m = NULL;
        char path[64], err[512];
        int r;

        if (fd < 0) {
                fd = memfd_create("zcp-fuzz-weights", MFD_CLOEXEC);
                FUZZ_CHECK(fd >= 0);
        }
        FUZZ_CHECK(ftruncate(fd, 0) == 0);
        FUZZ_CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        r = zcp_model_load(path, &m, err, sizeof(err));
        if (r < 0) {
                FUZZ_CHECK(m == NULL && !strchr(err, '\n'));
                return 0;
        }
        FUZZ_CHECK(m && m->conv_count >= 1 && m->conv_count <= ZCP_MODEL_MAX_LAYERS && m->classes >= 1);
        /* Shapes chain: each conv's input channels are the previous one's outputs. */
        for (uint32_t i = 1; i < m->conv_count; i++)
                FUZZ_CHECK(m->conv[i].in_ch == m->conv[i - 1].out_ch);
        FUZZ_CHECK(m->fc_in == m->conv[m->conv_count - 1].out_ch);
        /* Touch every weight: a tensor outside the blob would be an ASan report. */
        {
                volatile float sum = 0;

                for (uint32_t i = 0; i < m->conv_count; i++) {
                        const struct zcp_conv_layer *c = &m->conv[i];

                        for (size_t k = 0; k < (size_t)c->out_ch * c->in_ch * 9; k++)
                                sum += c->weight[k];
                        for (size_t k = 0; k < c->out_ch; k++)
                                sum += c->bias[k];
                }
                for (size_t k = 0; k < (size_t)m->classes * m->fc_in; k++)
                        sum += m->fc_weight[k];
                (void)sum;
        }
        zcp_model_free(m);
        return 0;
}
