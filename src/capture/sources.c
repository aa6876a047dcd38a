/* SPDX-License-Identifier: MIT */
/*
 * The table of built sources, looked up by the config's source type: the one
 * file that names every source (source.c holds what the sources share).
 */
#include <stddef.h>

#include "capture/source.h"

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

const struct zcp_source_ops *zcp_source_find(enum zcp_source_type type)
{
        return (unsigned)type < ZCP_SOURCE_TYPE_COUNT ? sources[type] : NULL;
}
