/* SPDX-License-Identifier: MIT */
/* The table of built sources, looked up by the config's source type. */
#include <stddef.h>

#include "capture/source.h"

const char *const zcp_capture_path_names[ZCP_CAPTURE_PATH_COUNT] = {
        [ZCP_PATH_DIRECT] = "direct",
        [ZCP_PATH_REGISTERED] = "registered",
        [ZCP_PATH_COPY] = "copy",
};

static const struct zcp_source_ops *const sources[ZCP_SOURCE_TYPE_COUNT] = {
#if HAVE_V4L2
        [ZCP_SOURCE_V4L2] = &zcp_source_v4l2,
#endif
#if HAVE_GSTREAMER
        [ZCP_SOURCE_FILE] = &zcp_source_file,
        [ZCP_SOURCE_NETWORK] = &zcp_source_network,
#endif
        [ZCP_SOURCE_SYNTHETIC] = &zcp_source_synthetic,
};

static atomic_bool cancelled;

void zcp_source_cancel_all(void)
{
        atomic_store(&cancelled, true);
}

bool zcp_source_cancelled(void)
{
        return atomic_load_explicit(&cancelled, memory_order_relaxed);
}

const struct zcp_source_ops *zcp_source_find(enum zcp_source_type type)
{
        return (unsigned)type < ZCP_SOURCE_TYPE_COUNT ? sources[type] : NULL;
}
