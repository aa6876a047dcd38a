/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend's ring allocator (backend.h allocator, cuda_internal.h): mapped pinned host
 * memory (cudaHostAlloc, mapped and portable) whose device alias the GPU reads in zero-copy
 * mode, page-aligned; and map/unmap for a capture driver's buffers (cudaHostRegister, mapped
 * and portable). Portable memory is pinned and mapped for every GPU of the process, so a ring
 * made for one GPU also serves a backend opened on another (zcp_cuda_ring_adopt).
 * Any thread: each call makes the GPU current on its own thread.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "infer/cuda_internal.h"

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

        e = zcp_cuda_init_device(device);
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
        e = zcp_cuda_init_device(device);
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
        if ((e = zcp_cuda_init_device(device)) != cudaSuccess || (e = cudaHostUnregister(host)) != cudaSuccess) {
                (void)cudaGetLastError();
                zcp_warn("cuda allocator: unmapping %p from GPU %u (cudaHostUnregister): %s (%s)", host, device,
                         cudaGetErrorName(e), cudaGetErrorString(e));
        }
}

/* The alias the current GPU dereferences for `host` (an address inside portable mapped memory), or NULL. */
static void *alias_here(void *host)
{
        struct cudaPointerAttributes a;

        if (!host)
                return NULL;
        if (cudaPointerGetAttributes(&a, host) != cudaSuccess) {
                (void)cudaGetLastError();
                return NULL;
        }
        return a.devicePointer;
}

int zcp_cuda_ring_adopt(struct zcp_ring *ring, uint32_t device)
{
        const uint32_t made_for = (uint32_t)(uintptr_t)ring->alloc.ctx;
        cudaError_t e;

        if (ring->alloc.alloc != cuda_alloc || made_for == device)
                return 0;
        if ((e = zcp_cuda_init_device(device)) != cudaSuccess) {
                (void)cudaGetLastError();
                zcp_err("cuda allocator: GPU %u: %s (%s)", device, cudaGetErrorName(e), cudaGetErrorString(e));
                return -ENODEV;
        }
        for (uint32_t i = 0; i < ring->count; i++) {
                struct zcp_slot *s = zcp_ring_slot(ring, i);
                void *own = alias_here(s->own), *res = alias_here(s->result), *mask = alias_here(s->mask);

                if (!own || !res || (s->mask && !mask)) {
                        zcp_err("cuda allocator: slot %u of a ring made for GPU %u has no alias on GPU %u", i, made_for,
                                device);
                        return -EINVAL;
                }
                s->own_dev = own;
                if (!s->lent)
                        s->dev = own;
                s->result_dev = res;
                s->mask_dev = mask;
        }
        zcp_debug("cuda allocator: a ring of %u slots made for GPU %u now read by GPU %u", ring->count, made_for,
                  device);
        return 0;
}

int zcp_cuda_allocator(uint32_t device, struct zcp_allocator *ret_alloc)
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
