/* SPDX-License-Identifier: MIT */
/* Error messages for negative errno values and the project's codes (err.h). */
#include <string.h>

#include "core/err.h"

const char *zcp_strerror(int err)
{
        switch (err) {
        case 0:
                return "success";
        case ZCP_ERR_INPUT:
                return "the input cannot be opened";
        case ZCP_ERR_CONFIG:
                return "the configuration cannot be carried out";
        case ZCP_ERR_GPU_STICKY:
                return "fatal GPU error";
        default:
                /* glibc's strerror() returns static strings for known values ("Unknown error N" otherwise). */
                return strerror(err < 0 ? -err : err);
        }
}
