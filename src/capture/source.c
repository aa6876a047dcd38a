/* SPDX-License-Identifier: MIT */
/*
 * What every source shares (source.h): the capture path names and the flag
 * that cancels opening and reconnecting when the process stops. The table of
 * sources is sources.c, above the sources.
 */
#include "capture/source.h"

const char *const zcp_capture_path_names[ZCP_CAPTURE_PATH_COUNT] = {
        [ZCP_PATH_DIRECT] = "direct",
        [ZCP_PATH_REGISTERED] = "registered",
        [ZCP_PATH_COPY] = "copy",
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
