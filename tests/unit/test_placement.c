/* SPDX-License-Identifier: MIT */
/*
 * Placement of streams on GPUs (src/daemon/placement.c), without a GPU: auto
 * takes the usable GPU with the fewest streams, ties to the lowest index, and
 * skips a GPU that cannot be used; one GPU (or none) is GPU 0 as before the
 * key had auto; a number is honoured, and one the host has no GPU for is a
 * configuration error naming the stream, the GPUs there are and the fix
 * (start, reload and --check), but only for streams that may use a GPU and
 * only where the host has a GPU at all. Sixteen streams over two GPUs split
 * eight and eight, as the supervisor places them one by one.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "core/config.h"
#include "core/err.h"
#include "daemon/placement.h"

static uint32_t place(uint32_t want, uint32_t count, uint64_t usable, const uint32_t *streams)
{
        struct zcp_gpu_host host = { .count = count, .usable = usable };
        uint32_t d = 999;
        char why[192] = "";

        CHECK_MSG(zcp_place(want, &host, streams, &d, why, sizeof(why)) == 0, "%s", why);
        return d;
}

static void test_auto(void)
{
        uint32_t s[ZCP_GPU_MAX] = { 0 };

        /* No GPU, one GPU: GPU 0, as gpu.device's old default. */
        CHECK(place(ZCP_GPU_DEVICE_AUTO, 0, 0, s) == 0);
        s[0] = 5;
        CHECK(place(ZCP_GPU_DEVICE_AUTO, 1, 1, s) == 0);
        /* Fewest streams; ties to the lowest index. */
        s[0] = 0;
        CHECK(place(ZCP_GPU_DEVICE_AUTO, 4, 0xf, s) == 0);
        s[0] = 1;
        CHECK(place(ZCP_GPU_DEVICE_AUTO, 4, 0xf, s) == 1);
        s[1] = 1, s[2] = 1;
        CHECK(place(ZCP_GPU_DEVICE_AUTO, 4, 0xf, s) == 3);
        s[3] = 1;
        CHECK(place(ZCP_GPU_DEVICE_AUTO, 4, 0xf, s) == 0);
        s[2] = 0;
        CHECK(place(ZCP_GPU_DEVICE_AUTO, 4, 0xf, s) == 2);
        /* A GPU that cannot be used takes no auto stream, however idle. */
        CHECK(place(ZCP_GPU_DEVICE_AUTO, 4, 0xb, s) == 0);
        /* None usable: GPU 0, whose backend choice then says why (auto -> cpu). */
        CHECK(place(ZCP_GPU_DEVICE_AUTO, 4, 0, s) == 0);
        /* Streams counted past the host's GPUs do not matter. */
        memset(s, 0, sizeof(s));
        s[0] = 3, s[1] = 3, s[5] = 0;
        CHECK(place(ZCP_GPU_DEVICE_AUTO, 2, 0x3, s) == 0);
        printf("ok auto: fewest streams, lowest index among equals, usable GPUs only\n");
}

static void test_sixteen_over_two(void)
{
        uint32_t s[ZCP_GPU_MAX] = { 0 };

        for (int i = 0; i < 16; i++) {
                uint32_t d = place(ZCP_GPU_DEVICE_AUTO, 2, 0x3, s);

                CHECK(d == (uint32_t)(i % 2));
                s[d]++;
        }
        CHECK(s[0] == 8 && s[1] == 8);
        /* One of GPU 1's streams fails and is re-opened: it goes back where there is room. */
        s[1]--;
        CHECK(place(ZCP_GPU_DEVICE_AUTO, 2, 0x3, s) == 1);
        printf("ok 16 streams over 2 GPUs: 8 and 8\n");
}

static void test_number(void)
{
        struct zcp_gpu_host two = { .count = 2, .usable = 0x3 };
        uint32_t s[ZCP_GPU_MAX] = { 7, 0 }, d = 999;
        char why[192] = "";

        /* A number is honoured, even on the busier GPU or one that is not usable. */
        CHECK(place(0, 2, 0x3, s) == 0);
        CHECK(place(1, 2, 0x1, s) == 1);
        /* Without a GPU it is kept: the backend choice decides (auto -> cpu, cuda -> exit 69) as before. */
        CHECK(place(5, 0, 0, s) == 5);
        /* Past the host's GPUs: refused, with the fix. */
        CHECK(zcp_place(2, &two, s, &d, why, sizeof(why)) == -ENXIO && d == 999);
        CHECK_MSG(strcmp(why, "gpu.device 2, but this host has 2 GPUs (0, 1); fix: a number below 2, or auto") == 0,
                  "%s", why);
        two.count = 1;
        CHECK(zcp_place(1, &two, s, &d, why, sizeof(why)) == -ENXIO);
        CHECK_MSG(strstr(why, "this host has 1 GPU (0); fix: a number below 1, or auto"), "%s", why);
        two.count = 4;
        CHECK(zcp_place(63, &two, s, &d, why, sizeof(why)) == -ENXIO);
        CHECK_MSG(strstr(why, "gpu.device 63, but this host has 4 GPUs (0..3)"), "%s", why);
        printf("ok a number: honoured, refused past the host's GPUs\n");
}

static struct zcp_config *parse(const char *text)
{
        struct zcp_config *cfg = NULL;
        char err[512] = "";

        CHECK_MSG(zcp_config_parse("gpus.yaml", text, strlen(text), &cfg, err, sizeof(err)) == 0, "%s", err);
        return cfg;
}

#define STREAM(name, gpu) "  - name: " name "\n    source: {type: synthetic}\n    gpu: {" gpu "}\n"

static void test_config(void)
{
        struct zcp_gpu_host two = { .count = 2, .usable = 0x3 }, none = { 0 };
        struct zcp_config *cfg;
        char msg[512] = "";

        /* The key: auto by default, auto or a number. */
        cfg = parse("streams:\n" STREAM("a", "") STREAM("b", "device: auto") STREAM("c", "device: 1")
                            STREAM("d", "device: 0"));
        CHECK(cfg->streams[0].gpu.device == ZCP_GPU_DEVICE_AUTO);
        CHECK(cfg->streams[1].gpu.device == ZCP_GPU_DEVICE_AUTO);
        CHECK(cfg->streams[2].gpu.device == 1);
        CHECK(cfg->streams[3].gpu.device == 0);
        CHECK(zcp_place_needs_probe(cfg));
        CHECK(zcp_place_check(cfg, &two, msg, sizeof(msg)) == 0);
        zcp_config_free(cfg);

        /* GPU 2 on a host of two: the stream and the fix; a cpu stream's number does not matter. */
        cfg = parse("streams:\n" STREAM("a", "backend: cpu, device: 9") STREAM("cam2", "device: 2"));
        CHECK(!zcp_place_needs_probe(cfg));
        CHECK(zcp_place_check(cfg, &two, msg, sizeof(msg)) == ZCP_ERR_CONFIG);
        CHECK_MSG(strcmp(msg, "gpus.yaml: stream cam2: gpu.device 2, but this host has 2 GPUs (0, 1); fix: a number "
                              "below 2, or auto") == 0,
                  "%s", msg);
        /* No GPU at all: the number stays for the backend choice (auto runs on the cpu, as before). */
        CHECK(zcp_place_check(cfg, &none, msg, sizeof(msg)) == 0);
        zcp_config_free(cfg);
        printf("ok config: auto (default) or a number, checked against the host's GPUs\n");
}

int main(void)
{
        test_auto();
        test_sixteen_over_two();
        test_number();
        test_config();
        return 0;
}
