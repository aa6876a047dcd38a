/* SPDX-License-Identifier: MIT */
/*
 * MJPEG -> I420 into a slot (mjpeg.h). In: one JPEG from a camera buffer.
 * Out: the decoded frame in the slot. Nothing blocks; a frame that does not
 * decode cleanly is refused (the caller drops it as corrupt). Source thread.
 * libturbojpeg keeps its own per-image memory pools; this file allocates only
 * in zcp_mjpeg_new().
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "capture/mjpeg.h"

struct zcp_mjpeg {
        tjhandle tj;
        uint32_t width, height;
        uint8_t *scratch;           /* chroma planes of non-4:2:0 JPEGs: 2 x width x height */
        const char *error;
        char errbuf[160];
};

size_t zcp_mjpeg_i420_size(uint32_t width, uint32_t height)
{
        return (size_t)width * height + 2 * ((size_t)(width / 2) * (height / 2));
}

int zcp_mjpeg_new(uint32_t width, uint32_t height, struct zcp_mjpeg **ret_mjpeg)
{
        struct zcp_mjpeg *m;

        if (width == 0 || height == 0 || width % 2 || height % 2 || width > 16384 || height > 16384)
                return -EINVAL;
        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->width = width;
        m->height = height;
        m->scratch = malloc(2 * (size_t)width * height);
        m->tj = tjInitDecompress();
        if (!m->scratch || !m->tj) {
                zcp_mjpeg_free(m);
                return -ENOMEM;
        }
        m->error = "";
        *ret_mjpeg = m;
        return 0;
}

void zcp_mjpeg_free(struct zcp_mjpeg *m)
{
        if (!m)
                return;
        if (m->tj)
                tjDestroy(m->tj);
        free(m->scratch);
        free(m);
}

const char *zcp_mjpeg_error(const struct zcp_mjpeg *m)
{
        return m->error;
}

/*
 * Chroma plane cw x ch -> ow x oh (= width/2 x height/2). Exact halving
 * averages; a plane narrower than the output (4:1:1) is widened by repetition.
 */
static void chroma_to_420(const uint8_t *src, uint32_t cw, uint32_t ch, uint8_t *dst, uint32_t ow, uint32_t oh)
{
        bool hx = cw == 2 * ow, vy = ch == 2 * oh;

        for (uint32_t y = 0; y < oh; y++) {
                uint32_t sy = vy ? 2 * y : (uint32_t)((uint64_t)y * ch / oh);
                const uint8_t *r0 = src + (size_t)sy * cw;
                const uint8_t *r1 = vy ? r0 + cw : r0;
                uint8_t *d = dst + (size_t)y * ow;

                for (uint32_t x = 0; x < ow; x++) {
                        if (hx) {
                                unsigned a = r0[2 * x], b = r0[2 * x + 1];

                                if (vy)
                                        d[x] = (uint8_t)((a + b + r1[2 * x] + r1[2 * x + 1] + 2) >> 2);
                                else
                                        d[x] = (uint8_t)((a + b + 1) >> 1);
                        } else {
                                uint32_t sx = (uint32_t)((uint64_t)x * cw / ow);

                                d[x] = vy ? (uint8_t)((r0[sx] + r1[sx] + 1u) >> 1) : r0[sx];
                        }
                }
        }
}

static int fail(struct zcp_mjpeg *m, int err, const char *what)
{
        snprintf(m->errbuf, sizeof(m->errbuf), "%s: %s", what, tjGetErrorStr2(m->tj));
        m->error = m->errbuf;
        return err;
}

int zcp_mjpeg_decode_i420(struct zcp_mjpeg *m, const uint8_t *jpeg, size_t len, uint8_t *dst)
{
        int w, h, samp, cs, r;
        uint32_t ow = m->width / 2, oh = m->height / 2;
        uint8_t *y = dst, *u = dst + (size_t)m->width * m->height, *v = u + (size_t)ow * oh;

        if (len < 4 || len > 0xffffffffUL || jpeg[0] != 0xff || jpeg[1] != 0xd8) {
                m->error = "not a JPEG (no start-of-image marker)";
                return -EBADMSG;
        }
        if (tjDecompressHeader3(m->tj, jpeg, (unsigned long)len, &w, &h, &samp, &cs) < 0)
                return fail(m, -EBADMSG, "header");
        if ((uint32_t)w != m->width || (uint32_t)h != m->height) {
                snprintf(m->errbuf, sizeof(m->errbuf), "JPEG is %dx%d, the stream is %ux%u", w, h, m->width,
                         m->height);
                m->error = m->errbuf;
                return -ERANGE;
        }
        if (samp == TJSAMP_420) {
                unsigned char *planes[3] = { y, u, v };
                int strides[3] = { (int)m->width, (int)ow, (int)ow };

                r = tjDecompressToYUVPlanes(m->tj, jpeg, (unsigned long)len, planes, w, strides, h, 0);
                if (r < 0)
                        return fail(m, -EBADMSG, "decode");
        } else if (samp == TJSAMP_GRAY) {
                unsigned char *planes[3] = { y, NULL, NULL };
                int strides[3] = { (int)m->width, 0, 0 };

                r = tjDecompressToYUVPlanes(m->tj, jpeg, (unsigned long)len, planes, w, strides, h, 0);
                if (r < 0)
                        return fail(m, -EBADMSG, "decode");
                memset(u, 128, 2 * (size_t)ow * oh);
        } else {
                int cw = tjPlaneWidth(1, w, samp), ch = tjPlaneHeight(1, h, samp);
                size_t csize;
                unsigned char *planes[3];
                int strides[3];

                if (cw <= 0 || ch <= 0 || (size_t)cw * (size_t)ch > (size_t)m->width * m->height) {
                        m->error = "unsupported chroma subsampling";
                        return -EBADMSG;
                }
                csize = (size_t)cw * (size_t)ch;
                planes[0] = y;
                planes[1] = m->scratch;
                planes[2] = m->scratch + csize;
                strides[0] = (int)m->width;
                strides[1] = cw;
                strides[2] = cw;
                r = tjDecompressToYUVPlanes(m->tj, jpeg, (unsigned long)len, planes, w, strides, h, 0);
                if (r < 0)
                        return fail(m, -EBADMSG, "decode");
                chroma_to_420(planes[1], (uint32_t)cw, (uint32_t)ch, u, ow, oh);
                chroma_to_420(planes[2], (uint32_t)cw, (uint32_t)ch, v, ow, oh);
        }
        return 0;
}
