/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The live page of the metrics endpoint, as plain functions with no HTTP
 * library in them (http.c turns a reply into a response):
 *
 *   GET /                       the page (HTML; its CSS and JavaScript are
 *   GET /live.css, /live.js     built into the binary from src/daemon/page/)
 *   GET /snapshot/<stream>.jpg  the newest frame taken of the stream (JPEG)
 *   GET /snapshot/<stream>.json what was found in it (motion, top-k) and more
 *   GET /api/latency            per-second p50/p99 of the last minutes (latency.h)
 *   GET /stream/<stream>.mjpg   the snapshots as video: multipart/x-mixed-replace,
 *                               one JPEG part per new snapshot
 *
 * The page polls /stats, /api/latency and the snapshots of the streams it
 * shows. Snapshots are taken only while someone asks for them, at most
 * metrics.http.snapshot_fps a second (0: no snapshots, 404).
 *
 * A video (MJPEG) client is a response without an end: the HTTP server pulls
 * its bytes with zcp_live_stream_read(); when the next part is not there yet
 * the connection is suspended (the hooks given to zcp_live_stream_attach())
 * and resumed once the "zcp-http-mjpeg" thread made it: that thread watches
 * the stream's snapshots, encodes a new frame (never on the HTTP thread, never
 * on the pipeline's) and hands it over, at most snapshot_fps parts a second
 * per client, the newest frame again after 5 s without a new one (so that a
 * client that went away is noticed). At most a quarter of max_connections
 * (at least 1) video clients at once; more get 503.
 *
 * Threads: zcp_live_new()/zcp_live_end_streams()/zcp_live_free() on the main
 * thread; new() starts two threads: "zcp-http-live" samples latency once a
 * second, "zcp-http-mjpeg" feeds video clients (asleep while there are none).
 * zcp_live_answer() and the zcp_live_stream_*() functions from the HTTP
 * thread(s).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/config.h"
#include "daemon/registry.h"

struct zcp_live;
struct zcp_live_stream;

/* One response. `body` is freed with free() when must_free; `stream`, when set, replaces the body. */
#define ZCP_LIVE_HEADERS_MAX 4
struct zcp_live_reply {
        unsigned status;
        const char *type;
        void *body;
        size_t len;
        bool must_free;
        struct zcp_live_stream *stream;   /* an endless body (video): the HTTP server owns it */
        struct {
                const char *name;
                char value[256];
        } headers[ZCP_LIVE_HEADERS_MAX];
        int header_count;
};

/* Returns 0, -ENOMEM or a thread creation error (logged). `registry` outlives the page. */
int zcp_live_new(const struct zcp_http_config *cfg, struct zcp_registry *registry, struct zcp_live **ret_live);
/*
 * Ends every video client and stops the thread that feeds them: each one
 * suspended is resumed (its next read ends its response), new ones are
 * refused (503). The HTTP server calls it before it stops, as a server must
 * not stop with connections suspended. Accepts NULL; safe to repeat.
 */
void zcp_live_end_streams(struct zcp_live *live);
/* Stops the threads and frees; after zcp_live_end_streams() and the last zcp_live_stream_free(). Accepts NULL. */
void zcp_live_free(struct zcp_live *live);

/*
 * When `url` (the path, no query) is one of the page's: fills `ret` and
 * returns true (a 404 for an unknown stream, a 503 while no frame was taken
 * yet or too many video clients, a 500 when out of memory). False for any
 * other path. A 200 for /stream/ sets ret->stream instead of a body: the
 * caller attaches it to its connection or frees it.
 */
bool zcp_live_answer(struct zcp_live *live, const char *url, struct zcp_live_reply *ret);

/*
 * A video client's connection: `suspend(arg)` and `resume(arg)` stop and
 * restart the server's pulling of its bytes. zcp_live_stream_read() calls
 * suspend (from the HTTP thread, inside the read, never under a lock of its
 * own) just before it returns 0; the feeding thread, or read itself, or
 * zcp_live_end_streams() calls resume exactly once per suspend. Attach
 * before the first read.
 */
void zcp_live_stream_attach(struct zcp_live_stream *s, void (*suspend)(void *arg), void (*resume)(void *arg),
                            void *arg);
/*
 * Up to `max` bytes of the client's multipart body into `buf`: > 0 bytes, 0
 * when nothing is ready (the connection was suspended and will be resumed),
 * -1 at its end (the stream is gone, zcpipe stops). HTTP thread.
 */
ssize_t zcp_live_stream_read(struct zcp_live_stream *s, char *buf, size_t max);
/* The client is gone (its response is freed). Accepts NULL. HTTP thread, or the main thread while the server stops. */
void zcp_live_stream_free(struct zcp_live_stream *s);

/* Built into the binary from src/daemon/page/ (live_assets.c, generated). */
struct zcp_live_asset {
        const char *path;   /* "/", "/live.css", "/live.js" */
        const char *type;   /* Content-Type */
        const unsigned char *data;
        size_t len;
};
extern const struct zcp_live_asset zcp_live_assets[];
extern const size_t zcp_live_asset_count;
