/* SPDX-License-Identifier: MIT */
/*
 * The per-GPU families of /metrics (prom.h): one sample per GPU the CUDA
 * backend opened (core/gpuinfo.h), each labelled device="N", so that a host
 * with several GPUs shows each one's share and faults apart.
 */
#include <stdio.h>

#include "daemon/prom.h"

static void family(struct zcp_prom_buf *b, const char *name, const char *type, const char *help)
{
        zcp_prom_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void label(struct zcp_prom_buf *b, const char *key, const char *value)
{
        zcp_prom_buf_printf(b, ",%s=\"", key);
        zcp_prom_buf_label_value(b, value);
        zcp_prom_buf_printf(b, "\"");
}

/* Streams the supervisor has up on GPU `device`. */
static uint32_t streams_on(const struct zcp_prom_scrape *sc, uint32_t device)
{
        uint32_t n = 0;

        for (uint32_t i = 0; i < sc->count; i++)
                if (sc->streams[i].gpu_device == (int)device && sc->streams[i].stream_state == ZCP_STREAM_UP)
                        n++;
        return n;
}

void zcp_prom_format_gpus(const struct zcp_prom_scrape *sc, struct zcp_prom_buf *b)
{
        char num[16], v[16];

        family(b, "zcpipe_gpu_info", "gauge",
               "A GPU the CUDA backend runs on: name, compute capability, driver and runtime versions, and "
               "whether its code is native machine code or PTX JIT-compiled by the driver (always 1).");
        for (uint32_t i = 0; i < sc->gpu_count; i++) {
                const struct zcp_gpu_info *g = &sc->gpus[i];

                zcp_prom_buf_printf(b, "zcpipe_gpu_info{device=\"%u\"", g->device);
                label(b, "name", g->name);
                snprintf(num, sizeof(num), "%d.%d", g->cc_major, g->cc_minor);
                label(b, "compute_capability", num);
                label(b, "driver", g->driver);
                label(b, "driver_cuda", zcp_cuda_version_str(g->driver_cuda, v, sizeof(v)));
                label(b, "runtime", zcp_cuda_version_str(g->runtime, v, sizeof(v)));
                label(b, "code", g->ptx_jit ? "ptx-jit" : "native");
                zcp_prom_buf_printf(b, "} 1\n");
        }

        family(b, "zcpipe_gpu_streams", "gauge",
               "Streams up on the GPU (gpu.device: a number pins a stream, auto places it on the GPU with the fewest).");
        for (uint32_t i = 0; i < sc->gpu_count; i++)
                zcp_prom_buf_printf(b, "zcpipe_gpu_streams{device=\"%u\"} %u\n", sc->gpus[i].device,
                                    streams_on(sc, sc->gpus[i].device));

        family(b, "zcpipe_gpu_sticky_error", "gauge",
               "1 once a sticky CUDA error lost the GPU's context (the process then exits 86 for systemd to "
               "restart), else 0.");
        for (uint32_t i = 0; i < sc->gpu_count; i++)
                zcp_prom_buf_printf(b, "zcpipe_gpu_sticky_error{device=\"%u\"} %d\n", sc->gpus[i].device,
                                    sc->gpus[i].sticky ? 1 : 0);
}
