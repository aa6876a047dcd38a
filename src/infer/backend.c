/* SPDX-License-Identifier: MIT */
/*
 * Backend selection (backend.h): resolves the configured kind to an ops
 * table, probing CUDA where it is built in, and logs the choice once.
 * Main thread, at stream start.
 */
#include <errno.h>

#include "core/log.h"
#include "infer/backend.h"

/* Every backend this build has, indexed by enum zcp_backend_kind (auto is resolved below). */
static const struct zcp_backend_ops *const backends[ZCP_BACKEND_KIND_COUNT] = {
#if HAVE_CUDA
        [ZCP_BACKEND_CUDA] = &zcp_backend_cuda,
#endif
        [ZCP_BACKEND_CPU] = &zcp_backend_cpu,
};

int zcp_backend_select(enum zcp_backend_kind kind, uint32_t device, const struct zcp_backend_ops **ret_ops)
{
        const struct zcp_backend_ops *cuda = backends[ZCP_BACKEND_CUDA];
        char why[256] = "";
        int r;

        if ((int)kind < 0 || kind >= ZCP_BACKEND_KIND_COUNT) {
                zcp_err("backend: unknown kind %d", (int)kind);
                return -EINVAL;
        }
        if (kind == ZCP_BACKEND_CPU) {
                *ret_ops = backends[ZCP_BACKEND_CPU];
                return 0;
        }
        if (!cuda) {
                if (kind == ZCP_BACKEND_CUDA) {
                        zcp_err("backend: cuda asked for, but this build has no CUDA support");
                        return -ENODEV;
                }
                zcp_info("backend: auto -> cpu (this build has no CUDA support)");
                *ret_ops = backends[ZCP_BACKEND_CPU];
                return 0;
        }
        r = cuda->probe(device, why, sizeof(why));
        if (r < 0) {
                if (kind == ZCP_BACKEND_CUDA) {
                        zcp_err("backend: cuda asked for, but GPU %u is unusable: %s", device,
                                why[0] ? why : "probe failed");
                        return -ENODEV;
                }
                zcp_info("backend: auto -> cpu (GPU %u unusable: %s)", device, why[0] ? why : "probe failed");
                *ret_ops = backends[ZCP_BACKEND_CPU];
                return 0;
        }
        if (kind == ZCP_BACKEND_AUTO)
                zcp_info("backend: auto -> cuda (GPU %u usable)", device);
        *ret_ops = cuda;
        return 0;
}
