/* SPDX-License-Identifier: MIT */
/* Placement of streams on GPUs (placement.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "core/err.h"
#include "daemon/placement.h"
#include "infer/backend.h"

/* "this host has 1 GPU (0)", "... 2 GPUs (0, 1)", "... 8 GPUs (0..7)". */
static void host_text(const struct zcp_gpu_host *host, char *buf, size_t size)
{
        if (host->count == 1)
                snprintf(buf, size, "this host has 1 GPU (0)");
        else if (host->count == 2)
                snprintf(buf, size, "this host has 2 GPUs (0, 1)");
        else
                snprintf(buf, size, "this host has %u GPUs (0..%u)", host->count, host->count - 1);
}

int zcp_place(uint32_t want, const struct zcp_gpu_host *host, const uint32_t *streams, uint32_t *ret_device,
              char *why, size_t whylen)
{
        uint32_t best = 0, n = host->count < ZCP_GPU_MAX ? host->count : ZCP_GPU_MAX;
        bool found = false;

        if (want != ZCP_GPU_DEVICE_AUTO) {
                if (host->count > 0 && want >= host->count) {
                        char have[64];

                        host_text(host, have, sizeof(have));
                        snprintf(why, whylen, "gpu.device %u, but %s; fix: a number below %u, or auto", want, have,
                                 host->count);
                        return -ENXIO;
                }
                *ret_device = want;
                return 0;
        }
        for (uint32_t d = 0; d < n; d++) {
                if (!(host->usable & (1ull << d)))
                        continue;
                if (!found || streams[d] < streams[best])
                        best = d;
                found = true;
        }
        *ret_device = best;
        return 0;
}

static bool may_use_gpu(const struct zcp_stream_config *sc)
{
        return sc->gpu.backend != ZCP_BACKEND_CPU;
}

int zcp_place_check(const struct zcp_config *cfg, const struct zcp_gpu_host *host, char *msg, size_t size)
{
        static const uint32_t none[ZCP_GPU_MAX];

        for (uint32_t i = 0; i < cfg->stream_count; i++) {
                const struct zcp_stream_config *sc = &cfg->streams[i];
                char why[192];
                uint32_t d;

                if (!may_use_gpu(sc) || zcp_place(sc->gpu.device, host, none, &d, why, sizeof(why)) == 0)
                        continue;
                snprintf(msg, size, "%s: stream %s: %s", cfg->source_path, sc->name, why);
                return ZCP_ERR_CONFIG;
        }
        return 0;
}

int zcp_place_check_host(const struct zcp_config *cfg, char *msg, size_t size)
{
        struct zcp_gpu_host host;

        for (uint32_t i = 0; i < cfg->stream_count; i++) {
                const struct zcp_stream_config *sc = &cfg->streams[i];

                if (may_use_gpu(sc) && sc->gpu.device != ZCP_GPU_DEVICE_AUTO) {
                        zcp_gpu_host_probe(false, &host);
                        return zcp_place_check(cfg, &host, msg, size);
                }
        }
        return 0;
}

bool zcp_place_needs_probe(const struct zcp_config *cfg)
{
        for (uint32_t i = 0; i < cfg->stream_count; i++)
                if (may_use_gpu(&cfg->streams[i]) && cfg->streams[i].gpu.device == ZCP_GPU_DEVICE_AUTO)
                        return true;
        return false;
}

void zcp_gpu_host_probe(bool probe, struct zcp_gpu_host *ret)
{
        uint32_t n = zcp_backend_gpu_count();

        ret->count = n;
        ret->usable = n >= ZCP_GPU_MAX ? ~0ull : (1ull << n) - 1;
        if (!probe || n < 2)
                return;
        for (uint32_t d = 0; d < n && d < ZCP_GPU_MAX; d++)
                if (!zcp_backend_gpu_usable(d))
                        ret->usable &= ~(1ull << d);
}
