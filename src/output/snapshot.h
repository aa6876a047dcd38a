/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The latest frame of a stream for the live page (/snapshot/<stream>.jpg and
 * .json): taken only while someone watches, at most `fps` a second, never
 * stalling the pipeline.
 *
 *   reader (HTTP thread)                 publish thread
 *   zcp_snapshot_watch()  ── "someone is watching until t+3 s" ──> offer():
 *     allocates the buffers once            due? (watching, rate) else return
 *   zcp_snapshot_jpeg()                     try-lock, else skip (counted)
 *     under the lock: NV12 -> planar           memcpy NV12, the result line
 *                                              and the moving mask
 *     full-range YUV, libturbojpeg,         unlock
 *     at most once per frame taken
 *
 * The publish thread never blocks and never allocates: when a reader holds
 * the lock (encoding), when the buffers do not exist yet or do not fit the
 * frame, the frame is simply not taken. Readers encode on their own thread,
 * once per frame taken however many clients ask, and hand out copies.
 *
 * Ownership: reference counted. The stream's publish stage holds one
 * reference from zcp_snapshot_new() at its open to zcp_snapshot_unref() at
 * its close; a reader takes one (zcp_snapshot_ref()) under the registry
 * lock and drops it when done, so a snapshot may outlive its stream by one
 * request.
 *
 * Built with HAVE_SNAPSHOT (HTTP and libturbojpeg); without it new() gives
 * NULL, offer() does nothing and the readers' functions return -ENOTSUP.
 * All functions accept NULL (readers' functions then return -ENOENT).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/ring.h"
#include "model/plan.h"

#define ZCP_SNAPSHOT_WATCH_NS  (3ULL * 1000000000ULL)   /* a request keeps frames coming this long */
#define ZCP_SNAPSHOT_QUALITY   80

struct zcp_snapshot;

/* What a reader sees of the counters (any thread). */
struct zcp_snapshot_counters {
        uint64_t taken;          /* frames copied by the publish thread */
        uint64_t skipped_busy;   /* due frames skipped: a reader held the buffer */
        uint64_t skipped_size;   /* due frames skipped: no buffer yet, or not this geometry/format */
        uint64_t encoded;        /* JPEGs made */
        uint64_t requests;       /* zcp_snapshot_watch() calls */
};

#if HAVE_SNAPSHOT
/* Main thread (stream creation). Returns 0 or -ENOMEM. */
int zcp_snapshot_new(const struct zcp_stream_config *cfg, struct zcp_snapshot **ret_snapshot);
/* Any thread. Returns `s`. */
struct zcp_snapshot *zcp_snapshot_ref(struct zcp_snapshot *s);
/* Any thread; the last reference frees. */
void zcp_snapshot_unref(struct zcp_snapshot *s);

/*
 * Publish thread, once per published frame (NV12, tight rows), after its
 * result went out: copies it when someone watches and it is due. `model`
 * (may be NULL) is what the result line says (publish.h); `now_ns` is the
 * publish time (the frame's own PUBLISH_END is stamped only after the stage).
 * Never blocks.
 */
void zcp_snapshot_offer(struct zcp_snapshot *s, const struct zcp_slot *slot, const struct zcp_plan *model, uint64_t now_ns);

/*
 * Reader: someone watches. Frames of width x height (the stream's geometry)
 * are taken for ZCP_SNAPSHOT_WATCH_NS from now at most `fps` a second
 * (1..30). Allocates the buffers on first use (or when the geometry
 * changed). Returns 0, -EINVAL for a zero or odd geometry, or -ENOMEM.
 */
int zcp_snapshot_watch(struct zcp_snapshot *s, uint32_t width, uint32_t height, uint32_t fps);

/*
 * Reader: the JPEG of the newest frame taken (encoded now if it is new), as
 * a malloc'd copy the caller frees, and its sequence number. -EAGAIN when
 * no frame was taken yet, -ENOMEM, -EIO when libturbojpeg failed (logged).
 */
int zcp_snapshot_jpeg(struct zcp_snapshot *s, void **ret_data, size_t *ret_len, uint64_t *ret_seq);

/*
 * Reader: JSON (malloc'd, NUL-terminated, caller frees) describing the
 * newest frame taken (encoding its JPEG now if it is new, so that
 * zcp_snapshot_jpeg() right after gives the same frame unless a newer one
 * came): {"stream","fps","cell","threshold","counters":{...},"width",
 * "height","seq","age_ms","e2e_ms","mask","result":<the frame's
 * results-sink line>}; "seq":null, "mask":null and "result":null before the
 * first. "mask" is that frame's moving mask (core/frame.h) as
 * {"grid_w","grid_h","moving":<its popcount>,"hex"}: cell i = gy * grid_w +
 * gx is bit i % 8 (least significant first) of byte i / 8, each byte two
 * lowercase hex digits; null when the frame came without one (motion off).
 * `now_ns` for the age. Returns 0 or -ENOMEM.
 */
int zcp_snapshot_json(struct zcp_snapshot *s, uint64_t now_ns, char **ret_json, size_t *ret_len);

void zcp_snapshot_counters(struct zcp_snapshot *s, struct zcp_snapshot_counters *ret);
#else
static inline int zcp_snapshot_new(const struct zcp_stream_config *cfg, struct zcp_snapshot **ret_snapshot)
{
        (void)cfg;
        *ret_snapshot = NULL;
        return 0;
}
static inline struct zcp_snapshot *zcp_snapshot_ref(struct zcp_snapshot *s)
{
        return s;
}
static inline void zcp_snapshot_unref(struct zcp_snapshot *s)
{
        (void)s;
}
static inline void zcp_snapshot_offer(struct zcp_snapshot *s, const struct zcp_slot *slot, const struct zcp_plan *model,
                                      uint64_t now_ns)
{
        (void)s;
        (void)slot;
        (void)model;
        (void)now_ns;
}
static inline int zcp_snapshot_watch(struct zcp_snapshot *s, uint32_t width, uint32_t height, uint32_t fps)
{
        (void)s;
        (void)width;
        (void)height;
        (void)fps;
        return -ENOTSUP;
}
static inline int zcp_snapshot_jpeg(struct zcp_snapshot *s, void **ret_data, size_t *ret_len, uint64_t *ret_seq)
{
        (void)s;
        (void)ret_data;
        (void)ret_len;
        (void)ret_seq;
        return -ENOTSUP;
}
static inline int zcp_snapshot_json(struct zcp_snapshot *s, uint64_t now_ns, char **ret_json, size_t *ret_len)
{
        (void)s;
        (void)now_ns;
        (void)ret_json;
        (void)ret_len;
        return -ENOTSUP;
}
static inline void zcp_snapshot_counters(struct zcp_snapshot *s, struct zcp_snapshot_counters *ret)
{
        (void)s;
        *ret = (struct zcp_snapshot_counters){ 0 };
}
#endif
