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
 *
 * The page polls /stats, /api/latency and the snapshots of the streams it
 * shows. Snapshots are taken only while someone asks for them, at most
 * metrics.http.snapshot_fps a second (0: no snapshots, 404).
 *
 * Threads: zcp_live_new()/zcp_live_free() on the main thread; new() starts
 * one thread ("zcp-http-live") that samples latency once a second.
 * zcp_live_answer() from the HTTP thread(s).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "daemon/registry.h"

struct zcp_live;

/* One response. `body` is freed with free() when must_free. */
#define ZCP_LIVE_HEADERS_MAX 4
struct zcp_live_reply {
        unsigned status;
        const char *type;
        void *body;
        size_t len;
        bool must_free;
        struct {
                const char *name;
                char value[256];
        } headers[ZCP_LIVE_HEADERS_MAX];
        int header_count;
};

/* Returns 0, -ENOMEM or a thread creation error (logged). `registry` outlives the page. */
int zcp_live_new(const struct zcp_http_config *cfg, struct zcp_registry *registry, struct zcp_live **ret_live);
/* Stops the sampler thread and frees. Accepts NULL. */
void zcp_live_free(struct zcp_live *live);

/*
 * When `url` (the path, no query) is one of the page's: fills `ret` and
 * returns true (a 404 for an unknown stream, a 503 while no frame was taken
 * yet, a 500 when out of memory). False for any other path.
 */
bool zcp_live_answer(struct zcp_live *live, const char *url, struct zcp_live_reply *ret);

/* Built into the binary from src/daemon/page/ (live_assets.c, generated). */
struct zcp_live_asset {
        const char *path;   /* "/", "/live.css", "/live.js" */
        const char *type;   /* Content-Type */
        const unsigned char *data;
        size_t len;
};
extern const struct zcp_live_asset zcp_live_assets[];
extern const size_t zcp_live_asset_count;
