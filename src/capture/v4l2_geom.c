/* SPDX-License-Identifier: MIT */
/*
 * V4L2 source: the geometry the ring is made for (v4l2_geom.h; v4l2.c,
 * "Geometry", says what the source does as a whole). The info open returns
 * is derived from the negotiated format here; a connection that negotiated
 * afresh either still fits it or leaves RECONFIGURE pending until the caller
 * re-makes the ring. Source thread, and the main thread at open.
 */
#include "capture/v4l2_geom.h"
#include "capture/v4l2_buf.h"
#include "capture/v4l2_fmt.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/pixfmt.h"

/*
 * The path open predicts (the ring does not exist yet): mmap buffers are read
 * in place when they can hold a converted frame. The path in use, exported
 * once streaming, also depends on the ring allocator taking them.
 */
static enum zcp_capture_path predicted_path(const struct zcp_source_ctx *c)
{
        size_t slot;

        if (c->cap_fmt == ZCP_PIX_MJPEG || c->io == IO_USERPTR)
                return ZCP_PATH_DIRECT;
        slot = zcp_pixfmt_slot_size(c->cap_fmt, c->width, c->height, c->bpl);
        if (slot < c->needed)
                slot = c->needed;
        return zcp_v4l2_page_round(c->sizeimage) >= zcp_v4l2_page_round(slot) ? ZCP_PATH_REGISTERED : ZCP_PATH_COPY;
}

static struct zcp_source_info info_for(const struct zcp_source_ctx *c, uint32_t fps_num, uint32_t fps_den)
{
        bool mjpeg = c->cap_fmt == ZCP_PIX_MJPEG;

        return (struct zcp_source_info){
                .width = c->width,
                .height = c->height,
                .fmt = mjpeg ? ZCP_PIX_I420 : c->cap_fmt,
                .stride = mjpeg ? c->width : c->bpl,
                .frame_bytes = mjpeg ? zcp_mjpeg_i420_size(c->width, c->height)
                               : c->io == IO_USERPTR ? c->sizeimage
                                                     : c->needed,
                .fps_num = fps_num,
                .fps_den = fps_den,
                .live = true,
                .path = predicted_path(c),
                /* The MMAP_BUFS buffers asked for, registered with the GPU (a driver may grant more). */
                .pinned_bytes = predicted_path(c) == ZCP_PATH_REGISTERED
                                        ? (size_t)MMAP_BUFS * zcp_v4l2_page_round(c->sizeimage)
                                        : 0,
        };
}

void zcp_v4l2_make_info(struct zcp_source_ctx *c, uint32_t fps_num, uint32_t fps_den)
{
        c->info = info_for(c, fps_num, fps_den);
}

/* What the ring depends on (the path and the rate are labels). */
static bool same_geometry(const struct zcp_source_info *a, const struct zcp_source_info *b)
{
        return a->width == b->width && a->height == b->height && a->fmt == b->fmt && a->stride == b->stride &&
               a->frame_bytes == b->frame_bytes;
}

int zcp_v4l2_renegotiated(struct zcp_source_ctx *c, uint32_t fps_num, uint32_t fps_den)
{
        struct zcp_source_info n = info_for(c, fps_num, fps_den);

        if (same_geometry(&n, &c->info)) {
                c->renegotiate = false;
                c->follow_source = false;
                c->provisional = false;
                return 0;
        }
        if (n.width == 0 || n.height == 0 || (n.width & 1) || (n.height & 1) ||
            (c->cap_fmt != ZCP_PIX_MJPEG && zcp_pixfmt_slot_size(n.fmt, n.width, n.height, n.stride) == 0)) {
                zcp_log(fail_level(c), "%s: %s: %s %ux%u with %u bytes per line cannot be converted", c->name,
                        c->node, fourcc_text(c->fourcc).s, n.width, n.height, n.stride);
                return zcp_v4l2_refusal(c, -EINVAL);
        }
        if (!c->reconfigure_ok) {
                /* Only a provisional info gets here: without the caller's help the ring cannot change. */
                zcp_err("%s: %s delivers %s %ux%u (%u bytes per line); the stream was made for %s %ux%u before the "
                        "camera was there and cannot re-make its ring: set source.format: %s",
                        c->name, c->node, zcp_pixfmt_name(n.fmt), n.width, n.height, n.stride,
                        zcp_pixfmt_name(c->info.fmt), c->info.width, c->info.height, zcp_pixfmt_name(c->cap_fmt));
                return ZCP_ERR_CONFIG;
        }
        zcp_info("%s: %s: %s %ux%u, %u bytes per line, %zu bytes per slot frame: the ring was made for %s %ux%u, "
                 "%zu bytes: re-making it", c->name, c->node, fourcc_text(c->fourcc).s, n.width, n.height, n.stride,
                 n.frame_bytes, zcp_pixfmt_name(c->info.fmt), c->info.width, c->info.height, c->info.frame_bytes);
        c->next_info = n;
        return ZCP_SOURCE_RECONFIGURE;
}

/*
 * RECONFIGURE is pending (the device is closed). It is returned once no slot
 * reads a driver buffer any more (they come back as downstream finishes its
 * frames), or after timeout_ms: buffers still read then stay mapped, retired,
 * until stop() collects their slots.
 */
int zcp_v4l2_pending(struct zcp_source_ctx *c)
{
        set_state(c, ZCP_SOURCE_OPENING);
        if (c->nlent > 0 &&
            zcp_now_ns() - c->pending_since_ns < (uint64_t)c->cfg.timeout_ms * ZCP_NSEC_PER_MSEC) {
                int r = zcp_v4l2_collect(c, WAIT_MAX_MS * (int64_t)ZCP_NSEC_PER_MSEC);

                if (r < 0 && r != -EAGAIN && r != -EPIPE)
                        zcp_warn("%s: collecting a slot: %s", c->name, zcp_strerror(r));
                if (c->nlent > 0)
                        return ZCP_SOURCE_AGAIN;
        }
        if (c->nlent > 0)
                ZCP_LOG_RATELIMITED(ZCP_LOG_INFO, LOG_EVERY_NS,
                                    "%s: %u slots still read driver buffers: unmapped when stop() collects them",
                                    c->name, c->nlent);
        return ZCP_SOURCE_RECONFIGURE;
}
