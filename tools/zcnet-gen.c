/* SPDX-License-Identifier: MIT */
/*
 * zcnet-gen: writes the default, UNTRAINED zcnet weights
 * (zcnet-default.safetensors; the build runs it, models/meson.build)
 * deterministically: the same bytes on every machine and every run.
 *
 *   conv0 3->16, conv1 16->32, conv2 32->64, conv3 64->128 (3x3, stride 2), fc 128->1000
 *
 * Values come from one splitmix64 stream (fixed seed) in tensor order
 * conv0.weight, conv0.bias, ..., fc.weight, fc.bias. Each 64-bit draw gives
 * u = (x >> 40) * 2^-24 in [0,1), then (u * 2 - 1) * bound, with the
 * He-uniform bound sqrt(6 / fan_in) for weights and PyTorch's default
 * 1 / sqrt(fan_in) for biases (fan_in = in*9 for convs, 128 for fc). Every
 * step is a correctly rounded IEEE float operation (-ffp-contract=off).
 *
 * Usage: zcnet-gen OUTPUT
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEED     UINT64_C(0x7a636e65742d7631)   /* "zcnet-v1" */
#define CLASSES  1000

static const uint32_t chans[] = { 3, 16, 32, 64, 128 };
#define CONVS (sizeof(chans) / sizeof(chans[0]) - 1)

struct tensor {
        char name[32];
        uint32_t ndim;
        uint32_t shape[4];
        size_t elems;
        float bound;
};

static uint64_t splitmix64(uint64_t *state)
{
        uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));

        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

static float uniform(uint64_t *state, float bound)
{
        float u = (float)(splitmix64(state) >> 40) * 0x1.0p-24f;

        return (u * 2.0f - 1.0f) * bound;
}

static int write_all(int fd, const void *buf, size_t len)
{
        const uint8_t *p = buf;

        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

static void set(struct tensor *t, const char *name, uint32_t ndim, const uint32_t *shape, float bound)
{
        snprintf(t->name, sizeof(t->name), "%s", name);
        t->ndim = ndim;
        t->elems = 1;
        for (uint32_t i = 0; i < ndim; i++) {
                t->shape[i] = shape[i];
                t->elems *= shape[i];
        }
        t->bound = bound;
}

int main(int argc, char **argv)
{
        struct tensor t[2 * CONVS + 2];
        char header[4096], name[32];
        size_t n = 0, hl = 0, off = 0, total = 0;
        uint64_t state = SEED;
        uint8_t *data = NULL, len8[8];
        int fd = -1, r;

        if (argc != 2 || argv[1][0] == '-') {
                fprintf(stderr, "usage: %s OUTPUT\nWrites the deterministic untrained zcnet weights (safetensors).\n",
                        argv[0]);
                return 64;
        }
        for (uint32_t i = 0; i < CONVS; i++) {
                uint32_t fan_in = chans[i] * 9;
                uint32_t ws[4] = { chans[i + 1], chans[i], 3, 3 }, bs[1] = { chans[i + 1] };

                snprintf(name, sizeof(name), "conv%u.weight", i);
                set(&t[n++], name, 4, ws, sqrtf(6.0f / (float)fan_in));
                snprintf(name, sizeof(name), "conv%u.bias", i);
                set(&t[n++], name, 1, bs, 1.0f / sqrtf((float)fan_in));
        }
        {
                uint32_t fan_in = chans[CONVS];
                uint32_t ws[2] = { CLASSES, fan_in }, bs[1] = { CLASSES };

                set(&t[n++], "fc.weight", 2, ws, sqrtf(6.0f / (float)fan_in));
                set(&t[n++], "fc.bias", 1, bs, 1.0f / sqrtf((float)fan_in));
        }

        hl += (size_t)snprintf(header + hl, sizeof(header) - hl,
                               "{\"__metadata__\":{\"generator\":\"zcnet-gen v1\",\"note\":\"untrained\",\"stride\":\"2\"}");
        for (size_t i = 0; i < n; i++) {
                hl += (size_t)snprintf(header + hl, sizeof(header) - hl, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[",
                                       t[i].name);
                for (uint32_t d = 0; d < t[i].ndim; d++)
                        hl += (size_t)snprintf(header + hl, sizeof(header) - hl, "%s%u", d ? "," : "", t[i].shape[d]);
                hl += (size_t)snprintf(header + hl, sizeof(header) - hl, "],\"data_offsets\":[%zu,%zu]}", off,
                                       off + t[i].elems * 4);
                off += t[i].elems * 4;
                total += t[i].elems;
        }
        hl += (size_t)snprintf(header + hl, sizeof(header) - hl, "}");
        while (hl % 8 != 0)   /* data starts 8-aligned, as safetensors writes it */
                header[hl++] = ' ';
        if (hl >= sizeof(header) - 8) {
                fprintf(stderr, "zcnet-gen: header too long\n");
                return 70;
        }

        data = malloc(total * 4);
        if (!data) {
                fprintf(stderr, "zcnet-gen: out of memory\n");
                return 70;
        }
        off = 0;
        for (size_t i = 0; i < n; i++) {
                for (size_t e = 0; e < t[i].elems; e++) {
                        float f = uniform(&state, t[i].bound);
                        uint32_t u;

                        memcpy(&u, &f, sizeof(u));
                        for (int b = 0; b < 4; b++)
                                data[off++] = (uint8_t)(u >> (8 * b));
                }
        }
        for (int b = 0; b < 8; b++)
                len8[b] = (uint8_t)((uint64_t)hl >> (8 * b));

        fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
                fprintf(stderr, "zcnet-gen: %s: %s\n", argv[1], strerror(errno));
                free(data);
                return 73;
        }
        r = write_all(fd, len8, sizeof(len8));
        if (r == 0)
                r = write_all(fd, header, hl);
        if (r == 0)
                r = write_all(fd, data, total * 4);
        if (close(fd) < 0 && r == 0)
                r = -errno;
        free(data);
        if (r < 0) {
                fprintf(stderr, "zcnet-gen: %s: %s\n", argv[1], strerror(-r));
                unlink(argv[1]);
                return 74;
        }
        return 0;
}
