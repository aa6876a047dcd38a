/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The metrics endpoint (libmicrohttpd), on 127.0.0.1:9464 by default:
 *
 *   GET /metrics  Prometheus text format 0.0.4 (prom.h)
 *   GET /healthz  200 "ok" while every stream publishes frames, else 503 and why
 *   GET /stats    per stream, per stage percentiles and counters as JSON
 *   GET /         the live page, its snapshots and /api/latency (live.h)
 *
 * HEAD works on every path; any other path is 404, any other method 405.
 * It runs on its own threads (libmicrohttpd's polling thread and a small
 * "zcp-http-reap" thread that cuts connections which hold a slot too long)
 * and reads the streams only through the registry. Limits: max_connections
 * plus a reserve (a quarter, at least 2): a connection landing in the
 * reserve evicts the one waiting longest without a request, so a prompt
 * client always gets in; each request read and answered within timeout_s of
 * connecting or of the previous response on that connection (0.5 s while 3/4
 * of the slots are taken); 64 KiB of memory per connection (larger headers
 * are refused with 431). Pages are served from a cache rendered at most
 * every 250 ms.
 *
 * Built only with HAVE_HTTP; without it the functions below are stubs that
 * start nothing.
 */
#include "core/config.h"
#include "core/log.h"
#include "daemon/registry.h"

struct zcp_http;

#if HAVE_HTTP
/*
 * Starts the endpoint on its own thread(s). Refuses a non-loopback listen
 * address unless cfg->allow_non_loopback (-EINVAL, logged). Port in use: one
 * clear error line "metrics: cannot listen on 127.0.0.1:9464: Address already
 * in use" and -EADDRINUSE. cfg->enabled false: returns 0 with *ret_http =
 * NULL. Port 0 takes a free port (tests; see zcp_http_port()). `registry`
 * must outlive the endpoint. Main thread.
 */
int zcp_http_start(const struct zcp_http_config *cfg, struct zcp_registry *registry, struct zcp_http **ret_http);
/* Stops serving and frees. Accepts NULL. Main thread. */
void zcp_http_stop(struct zcp_http *http);
/* The TCP port listened on (the chosen one when cfg->port was 0); 0 for NULL. Any thread. */
unsigned zcp_http_port(const struct zcp_http *http);
/*
 * Pages rendered so far (collections of the registry + formatting); each
 * page is rendered at most once per 250 ms however fast it is scraped. Any
 * thread.
 */
uint64_t zcp_http_renders(const struct zcp_http *http);
#else
static inline int zcp_http_start(const struct zcp_http_config *cfg, struct zcp_registry *registry,
                                 struct zcp_http **ret_http)
{
        (void)registry;
        if (cfg->enabled)
                zcp_info("metrics: built without http: no /metrics endpoint (metrics.http is ignored)");
        *ret_http = NULL;
        return 0;
}
static inline void zcp_http_stop(struct zcp_http *http)
{
        (void)http;
}
static inline unsigned zcp_http_port(const struct zcp_http *http)
{
        (void)http;
        return 0;
}
static inline uint64_t zcp_http_renders(const struct zcp_http *http)
{
        (void)http;
        return 0;
}
#endif
