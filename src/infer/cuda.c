/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend (DESIGN.md §3, §4): the GPU reads each NV12 frame where
 * the source put it, through the slot's mapped device pointer (zero copy),
 * or from a device copy made by cudaMemcpyAsync (copy mode). Results land in
 * the slot's mapped result block, `valid` last; the motion kernel writes the
 * moving mask (frame.h) into the slot's mapped mask before that.
 *
 * Per stream: one CUDA stream (plus a side stream, used only while capturing,
 * for the grid's rows and motion beside the resize and the network), device
 * buffers allocated at open, and per slot a CUDA graph of the whole per-frame
 * sequence, captured once and replayed by submit, and an event wait() waits
 * on by `gpu.sync`: hybrid (the default: sleep until just before the
 * predicted completion, then spin; waitplan.h), spin, yield or block. The
 * network's kernels (ZCP_KERNELS, read at open): `layers` (the default; the
 * later of the head and motion publishes, zcp_k_net_head_meet; ZCP_MEET=0:
 * the head after motion's join) or `fused` (one persistent kernel).
 *
 * transfer auto: both graph sets are captured per slot and submit launches
 * the mode the GPU's plan names (xferplan.h, shared by the GPU's auto streams:
 * struct xshare), fed with each frame's submit-to-completion time. A switch
 * is logged once for the GPU, each stream's counts at close.
 *
 * Frames that move: a slot may be lent a capture driver's buffer (ring.h).
 * Each slot remembers the frame pointer each of its graph execs reads; on a
 * change submit points the one node that reads the frame (the scan kernel,
 * or the copy) at the new memory (cudaGraphExec*NodeSetParams), without
 * capturing again. A lent frame the GPU cannot read (no 16-byte aligned
 * device alias in zero-copy mode, fewer bytes than the padded NV12 size)
 * fails with -EINVAL; under transfer auto a frame without a usable device
 * alias is copied instead. The allocator's map() registers such buffers.
 *
 * Errors: every CUDA call is checked. A sticky error (illegal address and its
 * kin, or any error cudaGetLastError keeps returning) is logged once with the
 * stage and frame and returned as ZCP_ERR_GPU_STICKY: the context is lost and
 * the process must exit (main: ZCP_EXIT_GPU_FATAL). Other errors fail the
 * frame (-EIO), rate-limited in the log. The ring must come from this
 * backend's allocator (mapped pinned memory): open refuses slots without
 * device aliases, and a NULL ring.
 *
 * Threads: probe/allocator/open/close on the main thread; submit/wait on the
 * stream's infer thread only; the allocator's functions on any thread (map
 * and unmap on the source's: each makes the GPU current on its thread).
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/gpuinfo.h"
#include "core/log.h"
#include "infer/backend.h"
#include "infer/waitplan.h"
#include "infer/xferplan.h"
#include "zcp_kernels.h"

#define AUTO_SLOTS   4     /* slots rotated through while timing the transfer modes */
#define AUTO_WARMUP  10
#define AUTO_TIMED   60

/* A slot's per-frame sequence in one transfer mode. */
struct cgraph {
        cudaGraphExec_t exec;
        cudaGraph_t graph;       /* what exec was instantiated from (its nodes are changed through it) */
        void *node;              /* cudaGraphNode_t reading the frame: pass 1 (zero-copy) or the copy; NULL: none */
        const void *reads;       /* the frame memory exec reads now (device alias, or host memory in copy mode) */
};

/* Graph sets by transfer mode: [XZC] zero-copy, [XCOPY] copy (also the modes of xferplan.h). */
#define XZC   0u
#define XCOPY 1u

/* The graph set of a resolved transfer mode. */
static inline uint32_t gset(enum zcp_transfer t)
{
        return t == ZCP_TRANSFER_COPY ? XCOPY : XZC;
}

struct cslot {
        struct cgraph g[2];      /* a fixed mode captures its own; auto both */
        cudaEvent_t done;
        uint32_t mode;           /* the graph set of the frame in flight: XZC or XCOPY */
        uint64_t seq;            /* frame in flight */
        uint64_t submitted;      /* when it was launched (CLOCK_MONOTONIC ns), for the hybrid wait */
        bool busy;
};

struct zcp_backend_ctx {
        char name[ZCP_NAME_MAX];
        uint32_t device;
        enum zcp_sync sync;
        struct zcp_waitplan plan;            /* sync hybrid: when to wake (waitplan.h) */
        bool slack_set;                      /* sync hybrid: the waiting thread's timer slack is 1 ns */
        enum zcp_transfer transfer;          /* resolved: ZERO_COPY or COPY (auto: the start-up choice) */
        bool adaptive;                       /* transfer auto: re-decided per frame by the GPU's plan */
        struct xshare *xs;                   /* transfer auto: the plan of this GPU's auto streams */
        uint64_t xs_switches0;               /* its switches when this stream joined */
        uint64_t xframes[2];                 /* transfer auto: this stream's frames per mode */
        atomic_uint mode_now;                /* XZC or XCOPY, for transfer_mode() on other threads */
        _Atomic uint64_t switches_now;       /* switches since this stream joined, for transfer_switches() */
        uint32_t width, height, top_k;
        size_t frame_bytes;                  /* NV12 bytes (copy mode copies these) */
        bool motion;
        bool mask;                           /* the ring's slots have masks of this grid */
        struct zcp_ring *ring;
        cudaStream_t stream, side;
        cudaEvent_t fork, join;
        struct zcp_k_pre *pre;
        struct zcp_k_net *net;               /* NULL: motion only */
        struct zcp_k_motion *mo;             /* NULL: motion disabled */
        float *tensor;
        uint32_t *grid;
        struct zcp_result *stage;            /* device memory */
        uint32_t *meet;                      /* device word: the head and motion publish by meeting (kcommon.cuh) */
        uint8_t *frame_dev;                  /* copy mode */
        size_t dev_bytes;
        struct cslot *slots;
        uint32_t nslots;
        double median_us[ZCP_TRANSFER_COUNT];
        bool sticky;
};

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
static int gpu_error(struct zcp_backend_ctx *ctx, cudaError_t e, const char *stage, uint64_t seq)
{
        cudaError_t again;

        (void)cudaGetLastError();
        again = cudaGetLastError();
        if (sticky_code(e) || again != cudaSuccess) {
                if (!ctx->sticky)
                        zcp_err("cuda backend: stream %s: sticky GPU error at %s of frame %" PRIu64
                                ": %s (%s)%s%s; the GPU context is lost, the process must restart",
                                ctx->name, stage, seq, cudaGetErrorName(e), cudaGetErrorString(e),
                                again != cudaSuccess && again != e ? ", then " : "",
                                again != cudaSuccess && again != e ? cudaGetErrorName(again) : "");
                ctx->sticky = true;
                return ZCP_ERR_GPU_STICKY;
        }
        ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 5 * ZCP_NSEC_PER_SEC,
                            "cuda backend: stream %s: %s of frame %" PRIu64 " failed: %s (%s)", ctx->name, stage,
                            seq, cudaGetErrorName(e), cudaGetErrorString(e));
        return -EIO;
}

/* The runtime's current device is per thread: the infer thread sets it once. */
static cudaError_t use_device(uint32_t device)
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
static cudaError_t init_device(uint32_t device)
{
        cudaError_t e = cudaInitDevice((int)device, cudaDeviceMapHost, 0);

        if (e == cudaErrorSetOnActiveProcess) {
                (void)cudaGetLastError();
                e = cudaSuccess;
        }
        if (e != cudaSuccess)
                return e;
        return use_device(device);
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

static int cuda_probe(uint32_t device, char *why, size_t whylen)
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
        e = init_device(device);
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

/*
 * cudaHostAlloc does not promise page alignment: the driver carves small
 * requests out of shared pinned chunks, so after a request of a few bytes
 * elsewhere in the process (seen on the H200 with CUDA 13: 4096 bytes at
 * 0x...a00), even a whole-page request can start mid-page. Slots must start
 * on a page (V4L2 USERPTR, the ring's layout), so such a block is given back
 * and a page more is asked for; the aligned address handed out is
 * remembered beside the one to free. Rare (ring creation only): a list
 * under a mutex.
 */
struct padded {
        void *aligned, *base;
        struct padded *next;
};
static struct padded *padded_list;
static pthread_mutex_t padded_lock = PTHREAD_MUTEX_INITIALIZER;

static int cuda_alloc(void *actx, size_t bytes, void **ret_host, void **ret_dev)
{
        const uint32_t device = (uint32_t)(uintptr_t)actx;
        const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        struct padded *pad = NULL;
        void *h = NULL, *d = NULL;
        uintptr_t off = 0;
        cudaError_t e;

        e = init_device(device);
        if (e != cudaSuccess) {
                zcp_err("cuda allocator: GPU %u: %s", device, cudaGetErrorString(e));
                return -ENODEV;
        }
        e = cudaHostAlloc(&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
        if (e == cudaSuccess && (uintptr_t)h % page) {
                pad = malloc(sizeof(*pad));
                cudaFreeHost(h);
                h = NULL;
                e = pad ? cudaHostAlloc(&h, bytes + page, cudaHostAllocMapped | cudaHostAllocPortable)
                        : cudaErrorMemoryAllocation;
                off = h ? (page - (uintptr_t)h % page) % page : 0;
        }
        if (e != cudaSuccess) {
                (void)cudaGetLastError();
                free(pad);
                zcp_err("cuda allocator: cudaHostAlloc(%zu bytes, mapped) failed: %s", bytes, cudaGetErrorString(e));
                return -ENOMEM;
        }
        e = cudaHostGetDevicePointer(&d, h, 0);
        if (e != cudaSuccess) {
                zcp_err("cuda allocator: cudaHostGetDevicePointer: %s", cudaGetErrorString(e));
                cudaFreeHost(h);
                free(pad);
                return -EIO;
        }
        if (pad) {
                pad->base = h;
                pad->aligned = (uint8_t *)h + off;
                pthread_mutex_lock(&padded_lock);
                pad->next = padded_list;
                padded_list = pad;
                pthread_mutex_unlock(&padded_lock);
                zcp_debug("cuda allocator: %zu bytes: cudaHostAlloc gave an address inside a page; %p of %p", bytes,
                        pad->aligned, h);
        }
        *ret_host = (uint8_t *)h + off;
        *ret_dev = (uint8_t *)d + off;
        return 0;
}

static void cuda_free(void *actx, void *host)
{
        struct padded **pp, *pad = NULL;
        cudaError_t e;

        (void)actx;
        if (!host)
                return;
        pthread_mutex_lock(&padded_lock);
        for (pp = &padded_list; *pp; pp = &(*pp)->next)
                if ((*pp)->aligned == host) {
                        pad = *pp;
                        *pp = pad->next;
                        break;
                }
        pthread_mutex_unlock(&padded_lock);
        if (pad) {
                host = pad->base;
                free(pad);
        }
        if ((e = cudaFreeHost(host)) != cudaSuccess)
                zcp_warn("cuda allocator: cudaFreeHost(%p): %s", host, cudaGetErrorString(e));
}

static int map_errno(cudaError_t e)
{
        switch (e) {
        case cudaErrorNotSupported:
                return -EOPNOTSUPP;
        case cudaErrorMemoryAllocation:
                return -ENOMEM;
        case cudaErrorHostMemoryAlreadyRegistered:
                return -EEXIST;
        default:
                return -EINVAL;
        }
}

/* Registers someone else's memory (a capture driver's mmap buffer) as mapped pinned memory. */
static int cuda_map(void *actx, void *host, size_t bytes, void **ret_dev)
{
        const uint32_t device = (uint32_t)(uintptr_t)actx;
        const long page = sysconf(_SC_PAGESIZE);
        void *d = NULL;
        cudaError_t e;

        if (!host || bytes == 0 || (page > 0 && ((uintptr_t)host % (uintptr_t)page || bytes % (size_t)page))) {
                zcp_err("cuda allocator: cannot map %zu bytes at %p for GPU %u: not a page-aligned range of whole "
                        "pages", bytes, host, device);
                return -EINVAL;
        }
        /* The caller's thread (the source's) may not have used the GPU yet. */
        e = init_device(device);
        if (e != cudaSuccess) {
                (void)cudaGetLastError();
                zcp_err("cuda allocator: mapping %zu bytes at %p: GPU %u: %s (%s)", bytes, host, device,
                        cudaGetErrorName(e), cudaGetErrorString(e));
                return -ENODEV;
        }
        e = cudaHostRegister(host, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
        if (e != cudaSuccess) {
                (void)cudaGetLastError();
                zcp_err("cuda allocator: cudaHostRegister(%zu bytes at %p, mapped) for GPU %u failed: %s (%s)", bytes,
                        host, device, cudaGetErrorName(e), cudaGetErrorString(e));
                return map_errno(e);
        }
        e = cudaHostGetDevicePointer(&d, host, 0);
        if (e != cudaSuccess || ((uintptr_t)d & 15)) {
                (void)cudaGetLastError();
                if (e != cudaSuccess)
                        zcp_err("cuda allocator: %zu bytes at %p registered, but cudaHostGetDevicePointer failed: %s (%s)",
                                bytes, host, cudaGetErrorName(e), cudaGetErrorString(e));
                else
                        zcp_err("cuda allocator: %zu bytes at %p registered, but their device alias %p is not 16-byte "
                                "aligned", bytes, host, d);
                if (cudaHostUnregister(host) != cudaSuccess)
                        (void)cudaGetLastError();
                return -EINVAL;
        }
        *ret_dev = d;
        return 0;
}

static void cuda_unmap(void *actx, void *host)
{
        const uint32_t device = (uint32_t)(uintptr_t)actx;
        cudaError_t e;

        if (!host)
                return;
        if ((e = init_device(device)) != cudaSuccess || (e = cudaHostUnregister(host)) != cudaSuccess) {
                (void)cudaGetLastError();
                zcp_warn("cuda allocator: unmapping %p from GPU %u (cudaHostUnregister): %s (%s)", host, device,
                         cudaGetErrorName(e), cudaGetErrorString(e));
        }
}

static int cuda_allocator(uint32_t device, struct zcp_allocator *ret_alloc)
{
        *ret_alloc = (struct zcp_allocator){
                .name = "cuda-mapped",
                .ctx = (void *)(uintptr_t)device,
                .alloc = cuda_alloc,
                .free = cuda_free,
                .map = cuda_map,
                .unmap = cuda_unmap,
        };
        return 0;
}

static void destroy_execs(struct zcp_backend_ctx *ctx)
{
        for (uint32_t i = 0; i < ctx->nslots; i++) {
                for (uint32_t m = 0; m < 2; m++) {
                        struct cgraph *g = &ctx->slots[i].g[m];
                        if (g->exec)
                                cudaGraphExecDestroy(g->exec);
                        if (g->graph)
                                cudaGraphDestroy(g->graph);
                        *g = (struct cgraph){ 0 };
                }
        }
}

/*
 * transfer auto: one plan per GPU (xferplan.h, "One plan per GPU"), shared by
 * the GPU's auto streams under its mutex: submit asks it for the mode, wait
 * feeds it each frame's time. Made by the first auto stream opened on the
 * GPU (with that stream's start-up choice), freed with the last.
 */
struct xshare {
        struct xshare *next;
        uint32_t device;
        uint32_t users;
        pthread_mutex_t lock;
        struct zcp_xferplan plan;
};

static pthread_mutex_t xshares_lock = PTHREAD_MUTEX_INITIALIZER;
static struct xshare *xshares;

/* The GPU's plan with this stream counted in; NULL: out of memory. */
static struct xshare *xshare_join(uint32_t device, uint32_t initial)
{
        struct xshare *s;

        pthread_mutex_lock(&xshares_lock);
        for (s = xshares; s && s->device != device; s = s->next)
                ;
        if (!s && (s = calloc(1, sizeof(*s)))) {
                s->device = device;
                pthread_mutex_init(&s->lock, NULL);
                zcp_xferplan_init(&s->plan, initial);
                s->next = xshares;
                xshares = s;
        }
        if (s) {
                pthread_mutex_lock(&s->lock);
                zcp_xferplan_set_users(&s->plan, ++s->users);
                pthread_mutex_unlock(&s->lock);
        }
        pthread_mutex_unlock(&xshares_lock);
        return s;
}

static void xshare_leave(struct xshare *s)
{
        bool last;

        pthread_mutex_lock(&xshares_lock);
        pthread_mutex_lock(&s->lock);
        last = --s->users == 0;
        if (!last)
                zcp_xferplan_set_users(&s->plan, s->users);
        pthread_mutex_unlock(&s->lock);
        if (last) {
                struct xshare **pp = &xshares;

                while (*pp != s)
                        pp = &(*pp)->next;
                *pp = s->next;
                pthread_mutex_destroy(&s->lock);
                free(s);
        }
        pthread_mutex_unlock(&xshares_lock);
}

static void cuda_close(struct zcp_backend_ctx *ctx)
{
        if (!ctx)
                return;
        cudaError_t e;

        if (ctx->sync == ZCP_SYNC_HYBRID && ctx->plan.frames)
                zcp_info("cuda backend: stream %s: hybrid wait over %" PRIu64 " frames: slept %" PRIu64
                         ", overslept %" PRIu64 ", blocked %" PRIu64 ", last guard %" PRIu64 " us",
                         ctx->name, ctx->plan.frames, ctx->plan.slept, ctx->plan.overslept, ctx->plan.blocked,
                         zcp_waitplan_guard(&ctx->plan) / 1000);
        if (ctx->xs) {
                if (ctx->xframes[XZC] + ctx->xframes[XCOPY])
                        zcp_info("cuda backend: stream %s: transfer auto over %" PRIu64 " frames: zero-copy %" PRIu64
                                 ", copy %" PRIu64 ", %" PRIu64 " switches of GPU %u's plan, ending in %s",
                                 ctx->name, ctx->xframes[XZC] + ctx->xframes[XCOPY], ctx->xframes[XZC],
                                 ctx->xframes[XCOPY], atomic_load_explicit(&ctx->switches_now, memory_order_relaxed),
                                 ctx->device,
                                 atomic_load_explicit(&ctx->mode_now, memory_order_relaxed) == XCOPY ? "copy"
                                                                                                      : "zero-copy");
                xshare_leave(ctx->xs);
                ctx->xs = NULL;
        }

        if (ctx->stream && !ctx->sticky && (e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess)
                zcp_warn("cuda backend: stream %s: finishing the GPU work at close: %s", ctx->name,
                         cudaGetErrorString(e));
        if (ctx->slots) {
                destroy_execs(ctx);
                for (uint32_t i = 0; i < ctx->nslots; i++)
                        if (ctx->slots[i].done)
                                cudaEventDestroy(ctx->slots[i].done);
                free(ctx->slots);
        }
        if (ctx->fork)
                cudaEventDestroy(ctx->fork);
        if (ctx->join)
                cudaEventDestroy(ctx->join);
        if (ctx->side)
                cudaStreamDestroy(ctx->side);
        if (ctx->stream)
                cudaStreamDestroy(ctx->stream);
        zcp_k_pre_free(ctx->pre);
        zcp_k_net_free(ctx->net);
        zcp_k_motion_free(ctx->mo);
        cudaFree(ctx->tensor);
        cudaFree(ctx->grid);
        cudaFree(ctx->stage);
        cudaFree(ctx->meet);
        cudaFree(ctx->frame_dev);
        free(ctx);
}

/* Logs a failed allocation/setup step with the ring geometry. */
static int open_fail(const struct zcp_backend_ctx *ctx, cudaError_t e, const char *what, const char *detail)
{
        zcp_err("cuda backend: stream %s: %s: %s (ring %u slots of %zu bytes, frame %ux%u NV12)", ctx->name, what,
                detail && detail[0] ? detail : cudaGetErrorString(e), ctx->ring->count, ctx->ring->slot_size,
                ctx->width, ctx->height);
        (void)cudaGetLastError();
        return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

static int dev_alloc(struct zcp_backend_ctx *ctx, void **ret, size_t bytes, const char *what)
{
        cudaError_t e = cudaMalloc(ret, bytes);
        char msg[160];

        if (e != cudaSuccess) {
                *ret = NULL;
                snprintf(msg, sizeof(msg), "cudaMalloc(%zu bytes) failed: %s", bytes, cudaGetErrorString(e));
                return open_fail(ctx, e, what, msg);
        }
        ctx->dev_bytes += bytes;
        return 0;
}

/* The copy-mode graph's node that copies the frame into frame_dev: its only memcpy node. */
static cudaError_t find_copy_node(cudaGraph_t graph, void **ret_node)
{
        cudaGraphNode_t *nodes = NULL, found = NULL;
        size_t n = 0, hits = 0;
        cudaError_t e;

        if ((e = cudaGraphGetNodes(graph, NULL, &n)) != cudaSuccess)
                return e;
        if (n == 0)
                return cudaErrorInvalidValue;
        nodes = malloc(sizeof(*nodes) * n);
        if (!nodes)
                return cudaErrorMemoryAllocation;
        if ((e = cudaGraphGetNodes(graph, nodes, &n)) != cudaSuccess)
                goto out;
        for (size_t i = 0; i < n; i++) {
                enum cudaGraphNodeType type;

                if ((e = cudaGraphNodeGetType(nodes[i], &type)) != cudaSuccess)
                        goto out;
                if (type == cudaGraphNodeTypeMemcpy) {
                        found = nodes[i];
                        hits++;
                }
        }
        e = hits == 1 ? cudaSuccess : cudaErrorInvalidValue;
        if (e == cudaSuccess)
                *ret_node = (void *)found;
out:
        free(nodes);
        return e;
}

/*
 * The grid's part of the preprocess on the side stream, the tensor's on the
 * main one: after the scan (frame NULL) or straight from a device frame (the
 * plan's direct parts, copy mode).
 */
static cudaError_t pre_grid(struct zcp_backend_ctx *ctx, const uint8_t *frame)
{
        return (cudaError_t)(frame ? zcp_k_pre_grid_direct(ctx->pre, frame, ctx->grid, ctx->side)
                                   : zcp_k_pre_grid(ctx->pre, ctx->grid, ctx->side));
}

static cudaError_t pre_tensor(struct zcp_backend_ctx *ctx, const uint8_t *frame)
{
        return (cudaError_t)(frame ? zcp_k_pre_tensor_direct(ctx->pre, frame, ctx->tensor, ctx->stream)
                                   : zcp_k_pre_tensor(ctx->pre, ctx->tensor, ctx->stream));
}

/*
 * Records the per-frame sequence for `slot` in `mode` into a graph,
 * instantiates it into cg (graph kept, frame-reading node found). On failure
 * cg is left as it was.
 */
static cudaError_t capture(struct zcp_backend_ctx *ctx, const struct zcp_slot *slot, enum zcp_transfer mode,
                           struct cgraph *cg)
{
        struct zcp_result *publish = (struct zcp_result *)slot->result_dev;
        uint32_t *mask = ctx->mask ? (uint32_t *)slot->mask_dev : NULL;
        const uint8_t *src = (const uint8_t *)slot->dev;
        /* Copy mode with both outputs: the frame is in device memory, so no scan first (zcp_k_pre_tensor_direct). */
        const bool direct = mode == ZCP_TRANSFER_COPY && ctx->mo && ctx->net && zcp_k_pre_direct(ctx->pre);
        cudaStream_t st = ctx->stream;
        cudaGraph_t graph = NULL;
        cudaGraphExec_t exec = NULL;
        void *node = NULL;
        cudaError_t e, e2;

        e = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
        if (e != cudaSuccess)
                return e;
        if (mode == ZCP_TRANSFER_COPY) {
                e = cudaMemcpyAsync(ctx->frame_dev, slot->data, ctx->frame_bytes, cudaMemcpyHostToDevice, st);
                src = ctx->frame_dev;
        }
        /*
         * With both outputs, the scan reads only the rows the tensor needs; the
         * grid's rows, the cell means and motion go beside the resize and the
         * network (zcp_k_pre_scan), which need not wait for the whole frame.
         */
        if (e == cudaSuccess && ctx->pre && !direct)
                e = ctx->mo && ctx->net ? (cudaError_t)zcp_k_pre_scan(ctx->pre, src, st)
                                        : (cudaError_t)zcp_k_preprocess(ctx->pre, src, ctx->tensor, ctx->grid, st);
        if (e == cudaSuccess && ctx->mo && ctx->net && zcp_k_net_get_path(ctx->net) == ZCP_K_NET_FUSED) {
                /* Motion beside the fused network (which fills only the top-k); then one publish. */
                if ((e = cudaEventRecord(ctx->fork, st)) == cudaSuccess &&
                    (e = cudaStreamWaitEvent(ctx->side, ctx->fork, 0)) == cudaSuccess &&
                    (e = pre_grid(ctx, direct ? src : NULL)) == cudaSuccess &&
                    (e = (cudaError_t)zcp_k_motion(ctx->mo, ctx->grid, ctx->stage, NULL, mask, ctx->side)) ==
                            cudaSuccess &&
                    (e = cudaEventRecord(ctx->join, ctx->side)) == cudaSuccess &&
                    (e = pre_tensor(ctx, direct ? src : NULL)) == cudaSuccess &&
                    (e = (cudaError_t)zcp_k_net_forward(ctx->net, ctx->tensor, ctx->top_k, ctx->stage, NULL, st)) ==
                            cudaSuccess &&
                    (e = cudaStreamWaitEvent(st, ctx->join, 0)) == cudaSuccess)
                        e = (cudaError_t)zcp_k_publish(ctx->stage, publish, st);
        } else if (e == cudaSuccess && ctx->mo && ctx->net) {
                /*
                 * Motion beside the network. The later of motion and the head publishes (ctx->meet): the head
                 * follows the last layer as a dependent launch and the streams join at the end; ZCP_MEET=0: the
                 * head (the publisher) waits for the join.
                 */
                uint32_t *meet = zcp_k_meet_enabled() ? ctx->meet : NULL;
                if ((e = cudaEventRecord(ctx->fork, st)) == cudaSuccess &&
                    (e = cudaStreamWaitEvent(ctx->side, ctx->fork, 0)) == cudaSuccess &&
                    (e = pre_grid(ctx, direct ? src : NULL)) == cudaSuccess &&
                    (e = (cudaError_t)zcp_k_motion_meet(ctx->mo, ctx->grid, ctx->stage, meet ? publish : NULL, meet,
                                                        mask, ctx->side)) == cudaSuccess &&
                    (e = cudaEventRecord(ctx->join, ctx->side)) == cudaSuccess &&
                    (e = pre_tensor(ctx, direct ? src : NULL)) == cudaSuccess &&
                    (e = (cudaError_t)zcp_k_net_features(ctx->net, ctx->tensor, st)) == cudaSuccess &&
                    (meet || (e = cudaStreamWaitEvent(st, ctx->join, 0)) == cudaSuccess) &&
                    (e = (cudaError_t)zcp_k_net_head_meet(ctx->net, ctx->top_k, ctx->stage, publish, meet, st)) ==
                            cudaSuccess &&
                    meet)
                        e = cudaStreamWaitEvent(st, ctx->join, 0);
        } else if (e == cudaSuccess && ctx->mo) {
                e = (cudaError_t)zcp_k_motion(ctx->mo, ctx->grid, ctx->stage, publish, mask, st);
        } else if (e == cudaSuccess && ctx->net) {
                e = (cudaError_t)zcp_k_net_forward(ctx->net, ctx->tensor, ctx->top_k, ctx->stage, publish, st);
        } else if (e == cudaSuccess) {
                e = (cudaError_t)zcp_k_publish(ctx->stage, publish, st);
        }
        e2 = cudaStreamEndCapture(st, &graph);
        if (e == cudaSuccess)
                e = e2;
        if (e == cudaSuccess && ctx->pre)
                e = mode == ZCP_TRANSFER_COPY ? find_copy_node(graph, &node)
                                              : (cudaError_t)zcp_k_pre_frame_node(ctx->pre, graph, &node);
        if (e == cudaSuccess)
                e = cudaGraphInstantiate(&exec, graph, 0);
        /* Upload now, so that the slot's first frame does not pay for it. */
        if (e == cudaSuccess)
                e = cudaGraphUpload(exec, st);
        if (e != cudaSuccess) {
                if (exec)
                        cudaGraphExecDestroy(exec);
                if (graph)
                        cudaGraphDestroy(graph);
                return e;
        }
        cg->exec = exec;
        cg->graph = graph;
        cg->node = node;
        cg->reads = !ctx->pre ? NULL : mode == ZCP_TRANSFER_COPY ? (const void *)slot->data : slot->dev;
        return cudaSuccess;
}

/*
 * ZCP_KERNELS picks the network's kernels: "layers" (a launch per layer, the
 * default) or "fused" (one persistent kernel, zcp_kernels.h). For measuring
 * both on one build; anything else fails open (-EINVAL).
 */
static int choose_net_path(struct zcp_backend_ctx *ctx)
{
        const char *v = getenv("ZCP_KERNELS");
        enum zcp_k_net_path path;
        cudaError_t e;

        if (!v || !v[0] || strcmp(v, "layers") == 0) {
                path = ZCP_K_NET_LAYERS;
        } else if (strcmp(v, "fused") == 0) {
                path = ZCP_K_NET_FUSED;
        } else {
                zcp_err("cuda backend: stream %s: ZCP_KERNELS=%s: expected layers or fused", ctx->name, v);
                return -EINVAL;
        }
        if ((e = (cudaError_t)zcp_k_net_set_path(ctx->net, path)) != cudaSuccess) {
                zcp_err("cuda backend: stream %s: ZCP_KERNELS=%s: %s", ctx->name, v, cudaGetErrorString(e));
                return -EINVAL;
        }
        if (path == ZCP_K_NET_FUSED)
                zcp_info("cuda backend: stream %s: zcnet fused into one kernel (ZCP_KERNELS=fused, %u blocks)",
                         ctx->name, zcp_k_net_fused_blocks(ctx->net));
        return 0;
}

static int capture_all(struct zcp_backend_ctx *ctx, enum zcp_transfer mode, uint32_t count)
{
        for (uint32_t i = 0; i < count; i++) {
                cudaError_t e = capture(ctx, zcp_ring_slot(ctx->ring, i), mode,
                                        &ctx->slots[i].g[gset(mode)]);
                if (e != cudaSuccess) {
                        char msg[160];
                        snprintf(msg, sizeof(msg), "capturing the graph of slot %u (%s): %s", i,
                                 zcp_transfer_names[mode], cudaGetErrorString(e));
                        destroy_execs(ctx);
                        return open_fail(ctx, e, "graph capture", msg);
                }
        }
        return 0;
}

static int cmp_u64(const void *a, const void *b)
{
        const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

/* Median submit -> results visible of `mode` on the first slots (graphs captured here). */
static int time_mode(struct zcp_backend_ctx *ctx, enum zcp_transfer mode, uint32_t count, double *ret_us)
{
        uint64_t ns[AUTO_TIMED];
        cudaError_t e = cudaSuccess;
        int r;

        r = capture_all(ctx, mode, count);
        if (r < 0)
                return r;
        for (uint32_t i = 0; i < AUTO_WARMUP + AUTO_TIMED && e == cudaSuccess; i++) {
                struct cslot *cs = &ctx->slots[i % count];
                uint64_t t0 = zcp_now_ns();

                if ((e = cudaGraphLaunch(cs->g[gset(mode)].exec, ctx->stream)) !=
                            cudaSuccess ||
                    (e = cudaEventRecord(cs->done, ctx->stream)) != cudaSuccess)
                        break;
                while ((e = cudaEventQuery(cs->done)) == cudaErrorNotReady)
                        ;
                if (i >= AUTO_WARMUP)
                        ns[i - AUTO_WARMUP] = zcp_now_ns() - t0;
        }
        destroy_execs(ctx);
        if (e != cudaSuccess)
                return open_fail(ctx, e, "timing the transfer modes", NULL);
        qsort(ns, AUTO_TIMED, sizeof(ns[0]), cmp_u64);
        *ret_us = (double)ns[AUTO_TIMED / 2] / 1e3;
        return 0;
}

/* Fills the timing slots with pseudo-random pixels (the source has not started). */
static void fill_pattern(struct zcp_backend_ctx *ctx, uint32_t count)
{
        uint64_t x = 0x9e3779b97f4a7c15ULL;

        for (uint32_t s = 0; s < count; s++) {
                uint8_t *d = zcp_ring_slot(ctx->ring, s)->data;
                for (size_t i = 0; i + 8 <= ctx->frame_bytes; i += 8) {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        memcpy(d + i, &x, 8);
                }
        }
}

static int choose_transfer(struct zcp_backend_ctx *ctx)
{
        const uint32_t count = ctx->nslots < AUTO_SLOTS ? ctx->nslots : AUTO_SLOTS;
        cudaError_t e;
        int r;

        fill_pattern(ctx, count);
        r = time_mode(ctx, ZCP_TRANSFER_ZERO_COPY, count, &ctx->median_us[ZCP_TRANSFER_ZERO_COPY]);
        if (r < 0)
                return r;
        r = time_mode(ctx, ZCP_TRANSFER_COPY, count, &ctx->median_us[ZCP_TRANSFER_COPY]);
        if (r < 0)
                return r;
        ctx->transfer = ctx->median_us[ZCP_TRANSFER_ZERO_COPY] <= ctx->median_us[ZCP_TRANSFER_COPY]
                                ? ZCP_TRANSFER_ZERO_COPY
                                : ZCP_TRANSFER_COPY;
        zcp_info("cuda backend: stream %s: transfer auto -> %s (median frame latency: zero-copy %.1f us, "
                 "copy %.1f us, %ux%u)",
                 ctx->name, zcp_transfer_names[ctx->transfer], ctx->median_us[ZCP_TRANSFER_ZERO_COPY],
                 ctx->median_us[ZCP_TRANSFER_COPY], ctx->width, ctx->height);
        /* The timing frames must not leave a background behind. */
        if (ctx->mo && (e = (cudaError_t)zcp_k_motion_reset(ctx->mo, ctx->stream)) != cudaSuccess)
                return open_fail(ctx, e, "resetting motion after timing", NULL);
        if ((e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess ||
            (e = (cudaError_t)zcp_k_stage_init(ctx->stage)) != cudaSuccess)
                return open_fail(ctx, e, "resetting state after timing", NULL);
        for (uint32_t s = 0; s < count; s++)
                memset(zcp_ring_slot(ctx->ring, s)->result, 0, sizeof(struct zcp_result));
        return 0;
}

static int cuda_open(const struct zcp_backend_params *p, struct zcp_ring *ring, struct zcp_backend_ctx **ret_ctx)
{
        const struct zcp_stream_config *cfg = p->cfg;
        struct zcp_backend_ctx *ctx;
        struct zcp_preprocess_params pp;
        struct zcp_motion_params mp;
        char msg[256] = "";
        bool mask = false;
        cudaError_t e;
        int r;

        if (p->width < 16 || p->height == 0 || p->width % 2 || p->height % 2) {
                zcp_err("cuda backend: stream %s: NV12 needs an even geometry at least 16 wide, got %ux%u",
                        p->stream_name, p->width, p->height);
                return -EINVAL;
        }
        if (!ring || ring->count == 0) {
                zcp_err("cuda backend: stream %s: needs the stream's ring (graphs are captured per slot)",
                        p->stream_name);
                return -EINVAL;
        }
        if (ring->slot_size < zcp_k_frame_bytes_padded(p->width, p->height)) {
                zcp_err("cuda backend: stream %s: slots of %zu bytes cannot hold %ux%u NV12 (%zu bytes)",
                        p->stream_name, ring->slot_size, p->width, p->height, zcp_k_frame_bytes_padded(p->width, p->height));
                return -EINVAL;
        }
        for (uint32_t i = 0; i < ring->count; i++) {
                const struct zcp_slot *s = zcp_ring_slot(ring, i);
                if (!s->dev || !s->result_dev || ((uintptr_t)s->dev & 15) || ((uintptr_t)s->result_dev & 15)) {
                        zcp_err("cuda backend: stream %s: slot %u has no 16-byte aligned device alias (ring "
                                "allocator '%s'): the ring must come from the cuda allocator",
                                p->stream_name, i, ring->alloc.name ? ring->alloc.name : "?");
                        return -EINVAL;
                }
        }
        /* The moving masks (frame.h), when the ring has them: of this grid, readable by the GPU. */
        if (cfg->motion.enabled && ring->mask_cells) {
                const uint32_t cells = zcp_grid_w(p->width, cfg->motion.cell) * zcp_grid_h(p->height, cfg->motion.cell);
                if (ring->mask_cells != cells) {
                        zcp_err("cuda backend: stream %s: the ring's masks are of %u cells, the motion grid of %ux%u "
                                "at cell %u has %u",
                                p->stream_name, ring->mask_cells, p->width, p->height, cfg->motion.cell, cells);
                        return -EINVAL;
                }
                for (uint32_t i = 0; i < ring->count; i++) {
                        if (!zcp_ring_slot(ring, i)->mask_dev) {
                                zcp_err("cuda backend: stream %s: slot %u's moving mask has no device alias",
                                        p->stream_name, i);
                                return -EINVAL;
                        }
                }
                mask = true;
        }
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx) {
                zcp_err("cuda backend: stream %s: cannot allocate %zu bytes of state", p->stream_name, sizeof(*ctx));
                return -ENOMEM;
        }
        snprintf(ctx->name, sizeof(ctx->name), "%s", p->stream_name ? p->stream_name : "?");
        ctx->device = cfg->gpu.device;
        ctx->sync = cfg->gpu.sync;
        zcp_waitplan_init(&ctx->plan);
        ctx->width = p->width;
        ctx->height = p->height;
        ctx->frame_bytes = zcp_nv12_size(p->width, p->height);
        ctx->motion = cfg->motion.enabled;
        ctx->mask = mask;
        ctx->ring = ring;
        ctx->nslots = ring->count;

        e = init_device(ctx->device);
        if (e != cudaSuccess) {
                r = open_fail(ctx, e, "selecting the GPU", NULL);
                goto fail;
        }
        ctx->slots = calloc(ctx->nslots, sizeof(*ctx->slots));
        if (!ctx->slots) {
                zcp_err("cuda backend: stream %s: cannot allocate state for %u slots", ctx->name, ctx->nslots);
                r = -ENOMEM;
                goto fail;
        }
        if ((e = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking)) != cudaSuccess ||
            (e = cudaStreamCreateWithFlags(&ctx->side, cudaStreamNonBlocking)) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&ctx->fork, cudaEventDisableTiming)) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&ctx->join, cudaEventDisableTiming)) != cudaSuccess) {
                r = open_fail(ctx, e, "creating streams and events", NULL);
                goto fail;
        }
        for (uint32_t i = 0; i < ctx->nslots; i++) {
                unsigned flags = cudaEventDisableTiming |
                                 (ctx->sync == ZCP_SYNC_BLOCK || ctx->sync == ZCP_SYNC_HYBRID ? cudaEventBlockingSync : 0);
                if ((e = cudaEventCreateWithFlags(&ctx->slots[i].done, flags)) != cudaSuccess) {
                        r = open_fail(ctx, e, "creating slot events", NULL);
                        goto fail;
                }
        }

        pp = (struct zcp_preprocess_params){
                .width = p->width,
                .height = p->height,
                .in_w = cfg->model.input_width,
                .in_h = cfg->model.input_height,
                .mean = { cfg->model.mean[0], cfg->model.mean[1], cfg->model.mean[2] },
                .std = { cfg->model.std[0], cfg->model.std[1], cfg->model.std[2] },
                .cell = cfg->motion.cell,
        };
        mp = (struct zcp_motion_params){
                .width = p->width,
                .height = p->height,
                .cell = cfg->motion.cell,
                .threshold = cfg->motion.threshold,
                .alpha = cfg->motion.alpha,
        };
        const struct zcp_model *model = cfg->model.enabled ? p->model : NULL;
        if (model || ctx->motion) {
                if ((e = (cudaError_t)zcp_k_pre_new(&pp, model != NULL, ctx->motion, &ctx->pre, msg, sizeof(msg)))) {
                        r = open_fail(ctx, e, "preprocess", msg);
                        goto fail;
                }
                ctx->dev_bytes += zcp_k_pre_device_bytes(ctx->pre);
        }
        if (model) {
                uint32_t k = cfg->model.top_k < ZCP_TOPK_MAX ? cfg->model.top_k : ZCP_TOPK_MAX;
                ctx->top_k = k < model->classes ? k : model->classes;
                if ((e = (cudaError_t)zcp_k_net_new(model, pp.in_w, pp.in_h, &ctx->net, msg, sizeof(msg)))) {
                        r = open_fail(ctx, e, "zcnet", msg);
                        goto fail;
                }
                ctx->dev_bytes += zcp_k_net_device_bytes(ctx->net);
                if ((r = choose_net_path(ctx)) < 0)
                        goto fail;
                r = dev_alloc(ctx, (void **)&ctx->tensor, sizeof(float) * 3 * pp.in_w * pp.in_h, "input tensor");
                if (r < 0)
                        goto fail;
        }
        if (ctx->motion) {
                if ((e = (cudaError_t)zcp_k_motion_new(&mp, &ctx->mo, msg, sizeof(msg)))) {
                        r = open_fail(ctx, e, "motion", msg);
                        goto fail;
                }
                ctx->dev_bytes += zcp_k_motion_device_bytes(ctx->mo);
                r = dev_alloc(ctx, (void **)&ctx->grid,
                              sizeof(uint32_t) * zcp_grid_w(p->width, mp.cell) * zcp_grid_h(p->height, mp.cell),
                              "motion grid");
                if (r < 0)
                        goto fail;
        }
        r = dev_alloc(ctx, (void **)&ctx->stage, sizeof(struct zcp_result), "result stage");
        if (r < 0)
                goto fail;
        /* 0 between frames: each graph runs whole or not at all (a fault inside one is sticky: a new context). */
        r = dev_alloc(ctx, (void **)&ctx->meet, sizeof(uint32_t), "publish meeting word");
        if (r < 0)
                goto fail;
        if ((e = cudaMemset(ctx->meet, 0, sizeof(uint32_t))) != cudaSuccess ||
            (e = (cudaError_t)zcp_k_stage_init(ctx->stage)) != cudaSuccess) {
                r = open_fail(ctx, e, "initializing the result stage", NULL);
                goto fail;
        }

        ctx->transfer = cfg->gpu.transfer;
        if (ctx->transfer != ZCP_TRANSFER_ZERO_COPY && ctx->pre) {
                r = dev_alloc(ctx, (void **)&ctx->frame_dev, zcp_k_frame_bytes_padded(p->width, p->height),
                              "device frame (copy mode)");
                if (r < 0)
                        goto fail;
        }
        if (!ctx->pre) {
                ctx->transfer = ZCP_TRANSFER_ZERO_COPY;   /* nothing reads the frame */
        } else if (ctx->transfer == ZCP_TRANSFER_AUTO) {
                r = choose_transfer(ctx);
                if (r < 0)
                        goto fail;
                /* Both graph sets (and copy's device frame) stay: the mode is re-decided per frame, by the
                 * GPU's plan (its first auto stream's choice, or what its streams use now). */
                ctx->adaptive = true;
                if (!(ctx->xs = xshare_join(ctx->device, gset(ctx->transfer)))) {
                        r = -ENOMEM;
                        goto fail;
                }
                pthread_mutex_lock(&ctx->xs->lock);
                ctx->xs_switches0 = ctx->xs->plan.switches;
                if (ctx->xs->plan.cur != gset(ctx->transfer)) {
                        zcp_info("cuda backend: stream %s: transfer auto follows GPU %u's %u streams: %s", ctx->name,
                                 ctx->device, ctx->xs->users - 1, ctx->xs->plan.cur == XCOPY ? "copy" : "zero-copy");
                        ctx->transfer = ctx->xs->plan.cur == XCOPY ? ZCP_TRANSFER_COPY : ZCP_TRANSFER_ZERO_COPY;
                }
                pthread_mutex_unlock(&ctx->xs->lock);
        }
        if (ctx->transfer == ZCP_TRANSFER_ZERO_COPY && ctx->frame_dev && !ctx->adaptive) {
                cudaFree(ctx->frame_dev);
                ctx->dev_bytes -= zcp_k_frame_bytes_padded(p->width, p->height);
                ctx->frame_dev = NULL;
        }
        r = capture_all(ctx, ctx->adaptive ? ZCP_TRANSFER_ZERO_COPY : ctx->transfer, ctx->nslots);
        if (r == 0 && ctx->adaptive)
                r = capture_all(ctx, ZCP_TRANSFER_COPY, ctx->nslots);
        if (r < 0)
                goto fail;
        atomic_store_explicit(&ctx->mode_now, gset(ctx->transfer), memory_order_relaxed);
        if ((e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess) {
                r = open_fail(ctx, e, "uploading the graphs", NULL);
                goto fail;
        }
        zcp_info("cuda backend: stream %s: GPU %u, %ux%u NV12, %u slots, transfer %s%s, sync %s, model %s, "
                 "motion %s, %zu bytes of device memory",
                 ctx->name, ctx->device, ctx->width, ctx->height, ctx->nslots, zcp_transfer_names[ctx->transfer],
                 ctx->adaptive ? " (auto: re-decided while running)" : "", zcp_sync_names[ctx->sync],
                 ctx->net ? "on" : "off", ctx->mo ? "on" : "off", ctx->dev_bytes);
        *ret_ctx = ctx;
        return 0;
fail:
        cuda_close(ctx);
        return r;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#endif
}

/*
 * Checks that the GPU can read the frame memory `slot` holds now (a lent
 * buffer, or its own memory again) and points cg's exec (the slot's graph of
 * the mode this frame runs in: `copy` or zero-copy) at it when it reads other
 * memory: the pass-1 kernel's frame in zero-copy mode, the copy's source in
 * copy mode. `want` is what the exec must read. Under transfer auto each of
 * the slot's two execs remembers what it reads: the one that runs is the one
 * pointed.
 */
static int use_frame(struct zcp_backend_ctx *ctx, struct cgraph *cg, bool copy, const struct zcp_slot *slot,
                     const void *want)
{
        const size_t need = zcp_k_frame_bytes_padded(ctx->width, ctx->height);
        cudaError_t e;

        if (!slot->data || slot->cap < need || (!copy && (!slot->dev || ((uintptr_t)slot->dev & 15)))) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC,
                                    "cuda backend: stream %s: frame %" PRIu64 " of slot %u (%s buffer %u) is %zu "
                                    "bytes at %p, device alias %p: the GPU needs %zu bytes%s",
                                    ctx->name, slot->frame.seq, slot->index, slot->lent ? "lent" : "own",
                                    slot->lent, slot->cap, (void *)slot->data, slot->dev, need,
                                    copy ? "" : " and a 16-byte aligned device alias");
                return -EINVAL;
        }
        if (want == cg->reads)
                return 0;
        if (copy)
                e = cudaGraphExecMemcpyNodeSetParams1D(cg->exec, (cudaGraphNode_t)cg->node, ctx->frame_dev, want,
                                                       ctx->frame_bytes, cudaMemcpyHostToDevice);
        else
                e = (cudaError_t)zcp_k_pre_set_frame(ctx->pre, cg->exec, cg->node, want);
        if (e != cudaSuccess)
                return gpu_error(ctx, e, copy ? "pointing the frame copy at the slot's memory"
                                              : "pointing the preprocess at the slot's memory",
                                 slot->frame.seq);
        cg->reads = want;
        return 0;
}

static int cuda_submit(struct zcp_backend_ctx *ctx, struct zcp_slot *slot)
{
        const struct zcp_frame *f = &slot->frame;
        struct cslot *cs;
        struct cgraph *cg;
        uint32_t mode;
        cudaError_t e;
        int r;

        if (ctx->sticky)
                return ZCP_ERR_GPU_STICKY;
        if (slot->index >= ctx->nslots || zcp_ring_slot(ctx->ring, slot->index) != slot) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC,
                                    "cuda backend: stream %s: slot %u is not one of this stream's ring",
                                    ctx->name, slot->index);
                return -EINVAL;
        }
        if (f->width != ctx->width || f->height != ctx->height || f->fmt != ZCP_PIX_NV12) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 5 * ZCP_NSEC_PER_SEC,
                                    "cuda backend: stream %s: frame %" PRIu64 " is %ux%u %s, expected %ux%u nv12",
                                    ctx->name, f->seq, f->width, f->height, zcp_pixfmt_name(f->fmt), ctx->width,
                                    ctx->height);
                return -EINVAL;
        }
        cs = &ctx->slots[slot->index];
        if (use_device(ctx->device) != cudaSuccess)
                return gpu_error(ctx, cudaGetLastError(), "cudaSetDevice", f->seq);
        /* transfer auto: the plan's mode (xferplan.h); a fixed mode: its own. A pointer choice either way. */
        if (ctx->adaptive) {
                pthread_mutex_lock(&ctx->xs->lock);
                mode = zcp_xferplan_next(&ctx->xs->plan);
                atomic_store_explicit(&ctx->mode_now, ctx->xs->plan.cur, memory_order_relaxed);
                atomic_store_explicit(&ctx->switches_now, ctx->xs->plan.switches - ctx->xs_switches0,
                                      memory_order_relaxed);
                pthread_mutex_unlock(&ctx->xs->lock);
        } else {
                mode = gset(ctx->transfer);
        }
        /* auto: a lent frame without a 16-byte aligned device alias is copied (zero-copy would refuse it). */
        if (mode == XZC && ctx->adaptive && (!slot->dev || ((uintptr_t)slot->dev & 15)))
                mode = XCOPY;
        cg = &cs->g[mode];
        /* A lent buffer, or the slot's own memory after one: checked, and read where it is. */
        if (ctx->pre) {
                const void *want = mode == XCOPY ? (const void *)slot->data : slot->dev;
                if ((want != cg->reads || slot->lent) && (r = use_frame(ctx, cg, mode == XCOPY, slot, want)) < 0)
                        return r;
        }
        slot->result->valid = 0;
        cs->submitted = zcp_now_ns();
        if ((e = cudaGraphLaunch(cg->exec, ctx->stream)) != cudaSuccess)
                return gpu_error(ctx, e, "graph launch", f->seq);
        if ((e = cudaEventRecord(cs->done, ctx->stream)) != cudaSuccess)
                return gpu_error(ctx, e, "event record", f->seq);
        cs->mode = mode;
        cs->seq = f->seq;
        cs->busy = true;
        return 0;
}

/*
 * transfer auto, after a frame completed: its time from submit to completion
 * seen here (what the stream waits for; no timing events, whose recording
 * costs the real-time path 5-10%) to the GPU's plan; the stream that
 * completes a probe logs its decision, once for all of them.
 */
static void feed_plan(struct zcp_backend_ctx *ctx, const struct cslot *cs, uint64_t done_ns)
{
        struct xshare *s = ctx->xs;
        const struct zcp_xferplan *xp = &s->plan;
        enum zcp_xferplan_event ev;
        uint64_t med_cur, med_other, frames, switches;
        uint32_t cur, users, window;

        ctx->xframes[cs->mode]++;
        pthread_mutex_lock(&s->lock);
        ev = zcp_xferplan_record(&s->plan, cs->mode, done_ns > cs->submitted ? done_ns - cs->submitted : 0);
        cur = xp->cur;
        med_cur = xp->med_cur;
        med_other = xp->med_other;
        frames = xp->frames;
        switches = xp->switches;
        users = xp->users;
        window = xp->window;
        pthread_mutex_unlock(&s->lock);
        switch (ev) {
        case ZCP_XFERPLAN_SWITCHED:
                atomic_store_explicit(&ctx->mode_now, cur, memory_order_relaxed);
                zcp_info("cuda backend: GPU %u: transfer auto (%u streams): %s -> %s (median GPU time per frame "
                         "%.1f us -> %.1f us over %u frames each) after %" PRIu64 " frames, switch %" PRIu64,
                         ctx->device, users, cur == XCOPY ? "zero-copy" : "copy", cur == XCOPY ? "copy" : "zero-copy",
                         (double)med_cur / 1e3, (double)med_other / 1e3, window, frames, switches);
                break;
        case ZCP_XFERPLAN_KEPT:
                zcp_debug("cuda backend: GPU %u: transfer auto (%u streams): %s kept (median GPU time per frame "
                          "%.1f us, %s %.1f us) after %" PRIu64 " frames",
                          ctx->device, users, cur == XCOPY ? "copy" : "zero-copy", (double)med_cur / 1e3,
                          cur == XCOPY ? "zero-copy" : "copy", (double)med_other / 1e3, frames);
                break;
        default:
                break;
        }
}

/*
 * sync hybrid (waitplan.h): sleep until just before the predicted completion,
 * then spin on the event; block on it if the GPU is much later than predicted.
 */
static cudaError_t wait_hybrid(struct zcp_backend_ctx *ctx, const struct cslot *cs)
{
        struct zcp_waitplan *p = &ctx->plan;
        const uint64_t asked = zcp_waitplan_wake_at(p, cs->submitted);
        uint64_t now = zcp_now_ns(), woke = 0, until;
        bool busy = false, blocked = false;
        cudaError_t e;

        if (!ctx->slack_set) {
                /* This thread's sleeps end when asked, not up to 50 us later (the default slack). */
                (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
                ctx->slack_set = true;
        }
        if (asked > now + 2000 && cudaEventQuery(cs->done) == cudaErrorNotReady) {
                const struct timespec ts = { .tv_sec = (time_t)(asked / ZCP_NSEC_PER_SEC),
                                             .tv_nsec = (long)(asked % ZCP_NSEC_PER_SEC) };

                while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                        ;
                now = woke = zcp_now_ns();
        }
        until = zcp_waitplan_spin_until(p, cs->submitted, now);
        while ((e = cudaEventQuery(cs->done)) == cudaErrorNotReady) {
                busy = true;
                if (zcp_now_ns() >= until) {
                        blocked = true;
                        e = cudaEventSynchronize(cs->done);
                        break;
                }
                cpu_relax();
        }
        if (e == cudaSuccess)
                zcp_waitplan_record(p, cs->submitted, asked, woke, zcp_now_ns(), busy, blocked);
        return e;
}

static int cuda_wait(struct zcp_backend_ctx *ctx, struct zcp_slot *slot)
{
        struct cslot *cs;
        uint64_t done_ns;
        cudaError_t e;

        if (ctx->sticky)
                return ZCP_ERR_GPU_STICKY;
        if (slot->index >= ctx->nslots || !ctx->slots[slot->index].busy)
                return -EINVAL;
        cs = &ctx->slots[slot->index];
        switch (ctx->sync) {
        case ZCP_SYNC_SPIN:
                while ((e = cudaEventQuery(cs->done)) == cudaErrorNotReady)
                        cpu_relax();
                break;
        case ZCP_SYNC_YIELD:
                while ((e = cudaEventQuery(cs->done)) == cudaErrorNotReady)
                        sched_yield();
                break;
        case ZCP_SYNC_BLOCK:
                e = cudaEventSynchronize(cs->done);
                break;
        case ZCP_SYNC_HYBRID:
        default:
                e = wait_hybrid(ctx, cs);
                break;
        }
        done_ns = ctx->adaptive ? zcp_now_ns() : 0;
        cs->busy = false;
        if (e != cudaSuccess)
                return gpu_error(ctx, e, "wait", cs->seq);
        if (*(volatile uint32_t *)&slot->result->valid != 1) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 5 * ZCP_NSEC_PER_SEC,
                                    "cuda backend: stream %s: frame %" PRIu64 " completed without a result",
                                    ctx->name, cs->seq);
                return -EIO;
        }
        if (ctx->adaptive)
                feed_plan(ctx, cs, done_ns);
        return 0;
}

/* The mode frames run in now (transfer auto: changes while running); any thread. */
static const char *cuda_transfer_mode(const struct zcp_backend_ctx *ctx)
{
        return zcp_transfer_names[atomic_load_explicit(&ctx->mode_now, memory_order_relaxed) == XCOPY
                                          ? ZCP_TRANSFER_COPY
                                          : ZCP_TRANSFER_ZERO_COPY];
}

static uint64_t cuda_transfer_switches(const struct zcp_backend_ctx *ctx)
{
        return atomic_load_explicit(&ctx->switches_now, memory_order_relaxed);
}

const struct zcp_backend_ops zcp_backend_cuda = {
        .name = "cuda",
        .probe = cuda_probe,
        .allocator = cuda_allocator,
        .open = cuda_open,
        .submit = cuda_submit,
        .wait = cuda_wait,
        .transfer_mode = cuda_transfer_mode,
        .transfer_switches = cuda_transfer_switches,
        .close = cuda_close,
};
