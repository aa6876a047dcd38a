/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend's device (cuda_internal.h): the probe and why a GPU cannot be used (one line
 * naming cause and fix for the log, STATUS= and /stats), the current device per thread, what
 * runs on each GPU (gpuinfo.h), and the sticky-error rule: an illegal address and its kin, or
 * any error cudaGetLastError keeps returning, means the context is lost and the process must
 * restart (ZCP_ERR_GPU_STICKY; main exits ZCP_EXIT_GPU_FATAL).
 *
 * Fault injection for tests: ZCP_FAULT_GPU=no-driver|no-device|driver-too-old|no-kernel-image|
 * out-of-memory makes the probe fail as on a GPU with that fault (tests/integration
 * test_backend.py); ZCP_FAULT_GPU_COUNT=N makes the host count N GPUs (placement's checks,
 * tests/integration test_daemon.py).
 *
 * Threads: the probe on the main thread; the others on whichever thread uses the GPU.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/gpuinfo.h"
#include "core/log.h"
#include "infer/cuda_internal.h"

static bool sticky_code(cudaError_t e)
{
        switch (e) {
        case cudaErrorIllegalAddress:
        case cudaErrorLaunchFailure:
        case cudaErrorAssert:
        case cudaErrorHardwareStackError:
        case cudaErrorIllegalInstruction:
        case cudaErrorMisalignedAddress:
        case cudaErrorInvalidAddressSpace:
        case cudaErrorInvalidPc:
        case cudaErrorECCUncorrectable:
        case cudaErrorLaunchTimeout:
                return true;
        default:
                return false;
        }
}

/*
 * Classifies a failed call at `stage` of frame `seq`: clears a non-sticky
 * error; a sticky one (by code, or because cudaGetLastError keeps returning
 * it) marks the context lost.
 */
int zcp_cuda_gpu_error(struct zcp_backend_ctx *ctx, cudaError_t e, const char *stage, uint64_t seq)
{
        cudaError_t again;

        (void)cudaGetLastError();
        again = cudaGetLastError();
        if (sticky_code(e) || again != cudaSuccess) {
                if (!ctx->sticky) {
                        zcp_gpu_info_mark_sticky(ctx->device);
                        zcp_err("cuda backend: stream %s: sticky GPU error on GPU %u at %s of frame %" PRIu64
                                ": %s (%s)%s%s; the GPU context is lost, the process must restart",
                                ctx->name, ctx->device, stage, seq, cudaGetErrorName(e), cudaGetErrorString(e),
                                again != cudaSuccess && again != e ? ", then " : "",
                                again != cudaSuccess && again != e ? cudaGetErrorName(again) : "");
                }
                ctx->sticky = true;
                return ZCP_ERR_GPU_STICKY;
        }
        ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 5 * ZCP_NSEC_PER_SEC,
                            "cuda backend: stream %s: %s of frame %" PRIu64 " failed: %s (%s)", ctx->name, stage,
                            seq, cudaGetErrorName(e), cudaGetErrorString(e));
        return -EIO;
}

/* The runtime's current device is per thread: the infer thread sets it once. */
cudaError_t zcp_cuda_use_device(uint32_t device)
{
        static _Thread_local int current = -1;
        cudaError_t e;

        if (current == (int)device)
                return cudaSuccess;
        e = cudaSetDevice((int)device);
        if (e == cudaSuccess)
                current = (int)device;
        return e;
}

/* Mapped host memory must be on before the context exists; with UVA it always is. */
cudaError_t zcp_cuda_init_device(uint32_t device)
{
        cudaError_t e = cudaInitDevice((int)device, cudaDeviceMapHost, 0);

        if (e == cudaErrorSetOnActiveProcess) {
                (void)cudaGetLastError();
                e = cudaSuccess;
        }
        if (e != cudaSuccess)
                return e;
        return zcp_cuda_use_device(device);
}

/*
 * Why a GPU cannot be used, and what fixes it: one line for the log, STATUS=
 * and /stats (backend.h). Returns -ENODEV where there is no GPU to use at all
 * (no driver, no device: `auto` quietly runs the CPU backend), another
 * negative errno where there is one that this zcpipe cannot use (`auto`
 * warns).
 */
static int explain(cudaError_t e, uint32_t device, const char *gpu, int major, int minor, int driver_cuda,
                   size_t free_b, size_t total_b, char *why, size_t whylen)
{
        char drv[16], rt[16];
        int runtime = CUDART_VERSION;

        (void)cudaRuntimeGetVersion(&runtime);
        zcp_cuda_version_str(driver_cuda, drv, sizeof(drv));
        zcp_cuda_version_str(runtime, rt, sizeof(rt));
        switch (e) {
        case cudaErrorNoDevice:
                snprintf(why, whylen, "no CUDA device");
                return -ENODEV;
        case cudaErrorInsufficientDriver:
                if (driver_cuda == 0) {
                        snprintf(why, whylen, "no NVIDIA driver: libcuda.so.1 not found");
                        return -ENODEV;
                }
                snprintf(why, whylen,
                         "the NVIDIA driver is too old: it supports CUDA %s, this zcpipe's runtime is CUDA %s; fix: "
                         "install an NVIDIA driver for CUDA %s or newer, or rebuild zcpipe with the CUDA toolkit "
                         "the driver supports (meson -Dcuda-root=...)",
                         drv, rt, rt);
                return -EPROTO;
        case cudaErrorNoKernelImageForDevice:
        case cudaErrorInvalidKernelImage:
        case cudaErrorInvalidPtx:
                snprintf(why, whylen,
                         "no kernel image for GPU %u (%s, compute capability %d.%d): this zcpipe has machine code "
                         "for sm_%s and PTX for compute_%d; fix: rebuild with meson -Dcuda-arch=%d%d (if this "
                         "GPU's nvcc supports it) or use backend: cpu",
                         device, gpu, major, minor, ZCP_CUDA_ARCHS, ZCP_CUDA_PTX_ARCH, major, minor);
                return -ENOEXEC;
        case cudaErrorUnsupportedPtxVersion:
                snprintf(why, whylen,
                         "the driver (CUDA %s) cannot compile this zcpipe's PTX (CUDA %s) for GPU %u (%s, compute "
                         "capability %d.%d); fix: install an NVIDIA driver for CUDA %s or newer, or rebuild with "
                         "meson -Dcuda-arch=%d%d",
                         drv, rt, device, gpu, major, minor, rt, major, minor);
                return -ENOEXEC;
        case cudaErrorMemoryAllocation:
                snprintf(why, whylen,
                         "out of memory on GPU %u (%s): %zu MiB free of %zu MiB; fix: stop what holds the GPU "
                         "(nvidia-smi lists it) or choose another gpu.device",
                         device, gpu, free_b >> 20, total_b >> 20);
                return -ENOMEM;
        case cudaErrorDevicesUnavailable:
                snprintf(why, whylen,
                         "GPU %u (%s) is busy in exclusive compute mode or unavailable; fix: stop the process that "
                         "holds it, or have the administrator set the default compute mode (nvidia-smi -c DEFAULT)",
                         device, gpu);
                return -EBUSY;
        default:
                snprintf(why, whylen, "GPU %u (%s): %s (%s)", device, gpu, cudaGetErrorString(e), cudaGetErrorName(e));
                return -EIO;
        }
}

/* ZCP_FAULT_GPU (tests): the probe fails as on a GPU with that fault, through explain(). */
static int injected_fault(const char *fault, uint32_t device, char *why, size_t whylen)
{
        static const struct {
                const char *name;
                cudaError_t e;
                int driver_cuda;
        } faults[] = {
                { "no-driver", cudaErrorInsufficientDriver, 0 },
                { "no-device", cudaErrorNoDevice, CUDART_VERSION },
                { "driver-too-old", cudaErrorInsufficientDriver, 11080 },
                { "no-kernel-image", cudaErrorNoKernelImageForDevice, CUDART_VERSION },
                { "out-of-memory", cudaErrorMemoryAllocation, CUDART_VERSION },
        };

        for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
                if (strcmp(fault, faults[i].name) == 0)
                        return explain(faults[i].e, device, "injected GPU", 6, 1, faults[i].driver_cuda, 0,
                                       16ull << 30, why, whylen);
        snprintf(why, whylen, "ZCP_FAULT_GPU=%s: unknown fault", fault);
        return -EINVAL;
}

/*
 * The kernel driver's version, from /proc/driver/nvidia/version ("" when
 * unreadable): the first word of digits and dots on its first line, as in
 * "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...".
 */
static void driver_version(char *buf, size_t size)
{
        char line[256];
        FILE *f = fopen("/proc/driver/nvidia/version", "re");

        buf[0] = '\0';
        if (!f)
                return;
        if (fgets(line, sizeof(line), f)) {
                for (char *save = NULL, *w = strtok_r(line, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) {
                        size_t n = strspn(w, "0123456789.");
                        if (n == strlen(w) && n > 2 && strchr(w, '.') && w[0] != '.') {
                                snprintf(buf, size, "%s", w);
                                break;
                        }
                }
        }
        fclose(f);
}

/* Records and, the first time for this device, logs what runs on it (gpuinfo.h). */
static void record_gpu(uint32_t device, const struct cudaDeviceProp *prop, int driver_cuda)
{
        struct zcp_gpu_info info = { .device = device }, known[ZCP_GPU_INFO_MAX];
        const char *force = getenv("CUDA_FORCE_PTX_JIT");
        char drv[16], rt[16];
        uint32_t n;

        snprintf(info.name, sizeof(info.name), "%.*s", (int)sizeof(info.name) - 1, prop->name);
        info.cc_major = prop->major;
        info.cc_minor = prop->minor;
        driver_version(info.driver, sizeof(info.driver));
        info.driver_cuda = driver_cuda;
        info.runtime = CUDART_VERSION;
        (void)cudaRuntimeGetVersion(&info.runtime);
        if (zcp_k_code_version(&info.ptx_version, &info.binary_version) != cudaSuccess)
                (void)cudaGetLastError();
        /*
         * Machine code built for an architecture reports the same PTX and
         * binary version; code the driver compiled from the embedded PTX
         * reports the PTX's (the lowest) and the GPU's. On a GPU of exactly
         * the PTX's architecture the two look alike: the variable that forces
         * JIT decides.
         */
        info.ptx_jit = info.ptx_version != info.binary_version || (force && force[0] && strcmp(force, "0") != 0);
        n = zcp_gpu_info_list(known, ZCP_GPU_INFO_MAX);
        for (uint32_t i = 0; i < n; i++)
                if (known[i].device == device)
                        return;
        zcp_gpu_info_set(&info);
        zcp_info("cuda: GPU %u: %s, compute capability %d.%d, driver %s (CUDA %s), runtime CUDA %s, code %s "
                 "(ptxVersion %d, binaryVersion %d), dependent launches %s",
                 device, info.name, info.cc_major, info.cc_minor, info.driver[0] ? info.driver : "?",
                 zcp_cuda_version_str(driver_cuda, drv, sizeof(drv)),
                 zcp_cuda_version_str(info.runtime, rt, sizeof(rt)), info.ptx_jit ? "ptx-jit" : "native",
                 info.ptx_version, info.binary_version, zcp_k_dependent_launch() ? "on" : "off");
}

uint32_t zcp_cuda_device_count(void)
{
        const char *fault = getenv("ZCP_FAULT_GPU_COUNT");
        int n = 0;

        if (fault && fault[0])
                return (uint32_t)strtoul(fault, NULL, 10);
        if (cudaGetDeviceCount(&n) != cudaSuccess) {
                (void)cudaGetLastError();
                return 0;
        }
        return n > 0 ? (uint32_t)n : 0;
}

int zcp_cuda_probe(uint32_t device, char *why, size_t whylen)
{
        struct cudaDeviceProp prop;
        const char *fault = getenv("ZCP_FAULT_GPU");
        size_t free_b = 0, total_b = 0;
        cudaError_t e;
        int n = 0, mode = 0, driver_cuda = 0;

        if (fault && fault[0])
                return injected_fault(fault, device, why, whylen);
        (void)cudaDriverGetVersion(&driver_cuda);   /* 0 without a driver */
        e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess) {
                (void)cudaGetLastError();
                return explain(e, device, "?", 0, 0, driver_cuda, 0, 0, why, whylen);
        }
        if (n == 0)
                return explain(cudaErrorNoDevice, device, "?", 0, 0, driver_cuda, 0, 0, why, whylen);
        if (device >= (uint32_t)n) {
                snprintf(why, whylen, "GPU %u does not exist (%d CUDA device%s); fix: set gpu.device below %d", device,
                         n, n == 1 ? "" : "s", n);
                return -ENXIO;
        }
        e = cudaGetDeviceProperties(&prop, (int)device);
        if (e != cudaSuccess) {
                (void)cudaGetLastError();
                return explain(e, device, "?", 0, 0, driver_cuda, 0, 0, why, whylen);
        }
        if (!prop.canMapHostMemory) {
                snprintf(why, whylen, "GPU %u (%s) cannot map host memory (zero copy needs it); fix: use backend: cpu",
                         device, prop.name);
                return -EOPNOTSUPP;
        }
        if (cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, (int)device) == cudaSuccess &&
            mode == cudaComputeModeProhibited) {
                snprintf(why, whylen,
                         "GPU %u (%s) is in compute mode 'prohibited'; fix: have the administrator set the default "
                         "compute mode (nvidia-smi -c DEFAULT)",
                         device, prop.name);
                return -EBUSY;
        }
        e = zcp_cuda_init_device(device);
        if (e == cudaSuccess)
                e = cudaMemGetInfo(&free_b, &total_b);
        if (e == cudaSuccess)
                e = zcp_k_selftest();
        if (e != cudaSuccess) {
                (void)cudaGetLastError();
                return explain(e, device, prop.name, prop.major, prop.minor, driver_cuda, free_b, total_b, why,
                               whylen);
        }
        record_gpu(device, &prop, driver_cuda);
        return 0;
}
