/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the MJPEG path of the V4L2 source (capture/mjpeg.c): any
 * bytes a camera might hand over decode into the I420 slot frame or are
 * refused, never writing past it. The first byte picks the decoder's
 * geometry; the frame buffer is exactly zcp_mjpeg_i420_size() bytes, so ASan
 * sees any overrun.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture/mjpeg.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const uint32_t geom[][2] = { { 64, 48 }, { 16, 16 }, { 320, 240 }, { 62, 46 } };
        static struct zcp_mjpeg *dec[4];
        uint32_t g;
        uint8_t *dst;
        size_t bytes;
        int r;

        if (size < 1)
                return 0;
        g = data[0] % 4;
        if (!dec[g])
                FUZZ_CHECK(zcp_mjpeg_new(geom[g][0], geom[g][1], &dec[g]) == 0);
        bytes = zcp_mjpeg_i420_size(geom[g][0], geom[g][1]);
        dst = malloc(bytes);
        FUZZ_CHECK(dst);
        r = zcp_mjpeg_decode_i420(dec[g], data + 1, size - 1, dst);
        FUZZ_CHECK(r <= 0);
        if (r < 0)
                FUZZ_CHECK(zcp_mjpeg_error(dec[g]) != NULL);
        free(dst);
        return 0;
}
