/* SPDX-License-Identifier: MIT */
/*
 * The live page's routes (live.h) and the thread that keeps the latency
 * points (latency.h) coming, one sample a second.
 *
 * A snapshot request finds the stream in the registry, takes a reference
 * to its snapshot under the registry lock and works on it after the lock
 * is released: encoding a JPEG never holds the registry (nor the pipeline:
 * snapshot.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "daemon/latency.h"
#include "daemon/live.h"
#include "output/snapshot.h"

/* The page and its files: nothing but this origin, no inline script or style, no framing. */
#define PAGE_CSP                                                                                                  \
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; " \
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

struct zcp_live {
        struct zcp_registry *registry;
        uint32_t snapshot_fps;
        struct zcp_latency *latency;

        pthread_mutex_t lock;     /* `stopping` */
        pthread_cond_t wake;
        bool stopping;
        pthread_t ticker;
        bool ticker_started;
};

static void *ticker_thread(void *arg)
{
        struct zcp_live *live = arg;
        uint64_t next = zcp_now_ns() + ZCP_NSEC_PER_SEC;

        pthread_mutex_lock(&live->lock);
        while (!live->stopping) {
                struct timespec ts = { .tv_sec = (time_t)(next / ZCP_NSEC_PER_SEC),
                                       .tv_nsec = (long)(next % ZCP_NSEC_PER_SEC) };
                uint64_t now;

                pthread_cond_timedwait(&live->wake, &live->lock, &ts);
                now = zcp_now_ns();
                if (live->stopping || now < next)
                        continue;
                pthread_mutex_unlock(&live->lock);
                zcp_latency_sample(live->latency, live->registry, now);
                pthread_mutex_lock(&live->lock);
                /* One point a second; after a stall (suspend, debugger) start again from now. */
                next += ZCP_NSEC_PER_SEC;
                if (next <= now)
                        next = now + ZCP_NSEC_PER_SEC;
        }
        pthread_mutex_unlock(&live->lock);
        return NULL;
}

int zcp_live_new(const struct zcp_http_config *cfg, struct zcp_registry *registry, struct zcp_live **ret_live)
{
        struct zcp_live *live = calloc(1, sizeof(*live));
        pthread_condattr_t ca;
        int r;

        if (!live)
                return -ENOMEM;
        live->registry = registry;
        live->snapshot_fps = cfg->snapshot_fps;
        pthread_mutex_init(&live->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&live->wake, &ca);
        pthread_condattr_destroy(&ca);
        r = zcp_latency_new(&live->latency);
        if (r < 0)
                goto fail;
        r = -pthread_create(&live->ticker, NULL, ticker_thread, live);
        if (r < 0) {
                zcp_err("metrics: cannot start a thread: %s", strerror(-r));
                goto fail;
        }
        pthread_setname_np(live->ticker, "zcp-http-live");
        live->ticker_started = true;
        *ret_live = live;
        return 0;
fail:
        zcp_live_free(live);
        return r;
}

void zcp_live_free(struct zcp_live *live)
{
        if (!live)
                return;
        if (live->ticker_started) {
                pthread_mutex_lock(&live->lock);
                live->stopping = true;
                pthread_cond_signal(&live->wake);
                pthread_mutex_unlock(&live->lock);
                pthread_join(live->ticker, NULL);
        }
        zcp_latency_free(live->latency);
        pthread_cond_destroy(&live->wake);
        pthread_mutex_destroy(&live->lock);
        free(live);
}

/* ---- replies ---- */

static void add_header(struct zcp_live_reply *ret, const char *name, const char *fmt, ...) ZCP_PRINTF(3, 4);

static void add_header(struct zcp_live_reply *ret, const char *name, const char *fmt, ...)
{
        va_list ap;

        if (ret->header_count >= ZCP_LIVE_HEADERS_MAX)
                return;
        ret->headers[ret->header_count].name = name;
        va_start(ap, fmt);
        vsnprintf(ret->headers[ret->header_count].value, sizeof(ret->headers[0].value), fmt, ap);
        va_end(ap);
        ret->header_count++;
}

static bool text(struct zcp_live_reply *ret, unsigned status, const char *msg)
{
        ret->status = status;
        ret->type = "text/plain; charset=utf-8";
        ret->body = (void *)msg;
        ret->len = strlen(msg);
        ret->must_free = false;
        return true;
}

static bool owned(struct zcp_live_reply *ret, const char *type, void *body, size_t len)
{
        ret->status = 200;
        ret->type = type;
        ret->body = body;
        ret->len = len;
        ret->must_free = true;
        return true;
}

/* ---- snapshots ---- */

struct find {
        const char *name;
        size_t len;
        bool found;
        struct zcp_snapshot *snap;   /* a reference, or NULL */
        uint32_t width, height;
};

static void find_one(const struct zcp_stream_view *view, void *userdata)
{
        struct find *f = userdata;

        if (f->found || strlen(view->name) != f->len || memcmp(view->name, f->name, f->len) != 0)
                return;
        f->found = true;
        f->snap = zcp_snapshot_ref(view->snapshot);
        if (view->source) {
                f->width = view->source->width;
                f->height = view->source->height;
        }
}

static bool answer_snapshot(struct zcp_live *live, const char *rest, struct zcp_live_reply *ret)
{
        const char *dot = strrchr(rest, '.');
        struct find f = { .name = rest };
        bool jpeg;
        int r;

        if (!dot || (strcmp(dot, ".jpg") != 0 && strcmp(dot, ".json") != 0) || dot == rest)
                return text(ret, 404, "not found: /snapshot/<stream>.jpg or /snapshot/<stream>.json\n");
        jpeg = strcmp(dot, ".jpg") == 0;
        f.len = (size_t)(dot - rest);
        if (live->snapshot_fps == 0)
                return text(ret, 404, "snapshots are off (metrics.http.snapshot_fps: 0)\n");
        zcp_registry_foreach(live->registry, find_one, &f);
        if (!f.found)
                return text(ret, 404, "no such stream\n");
        r = zcp_snapshot_watch(f.snap, f.width, f.height, live->snapshot_fps);
        if (r == 0 && jpeg) {
                void *data;
                size_t len;
                uint64_t seq;

                r = zcp_snapshot_jpeg(f.snap, &data, &len, &seq);
                if (r == 0) {
                        owned(ret, "image/jpeg", data, len);
                        add_header(ret, "X-Zcp-Seq", "%" PRIu64, seq);
                }
        } else if (r == 0) {
                char *json;
                size_t len;

                r = zcp_snapshot_json(f.snap, zcp_now_ns(), &json, &len);
                if (r == 0)
                        owned(ret, "application/json", json, len);
        }
        zcp_snapshot_unref(f.snap);
        switch (r) {
        case 0:
                return true;
        case -EAGAIN:
                /* The first request starts the taking: the next frame published is there soon. */
                text(ret, 503, "no frame taken yet: try again in a moment\n");
                add_header(ret, "Retry-After", "1");
                return true;
        case -ENOTSUP:
                return text(ret, 404, "snapshots are not built into this zcpipe (needs libturbojpeg)\n");
        case -ENOENT:
                return text(ret, 404, "this stream has no snapshots\n");
        case -ENOMEM:
                return text(ret, 500, "out of memory\n");
        default:
                return text(ret, 500, "cannot make the snapshot (see the log)\n");
        }
}

bool zcp_live_answer(struct zcp_live *live, const char *url, struct zcp_live_reply *ret)
{
        static const char snapshot_prefix[] = "/snapshot/";

        memset(ret, 0, sizeof(*ret));
        add_header(ret, "X-Content-Type-Options", "nosniff");
        for (size_t i = 0; i < zcp_live_asset_count; i++) {
                const struct zcp_live_asset *a = &zcp_live_assets[i];

                if (strcmp(url, a->path) != 0)
                        continue;
                ret->status = 200;
                ret->type = a->type;
                ret->body = (void *)a->data;
                ret->len = a->len;
                add_header(ret, "Content-Security-Policy", "%s", PAGE_CSP);
                return true;
        }
        if (strncmp(url, snapshot_prefix, sizeof(snapshot_prefix) - 1) == 0)
                return answer_snapshot(live, url + sizeof(snapshot_prefix) - 1, ret);
        if (strcmp(url, "/api/latency") == 0) {
                char *json;
                size_t len;

                if (zcp_latency_json(live->latency, zcp_now_ns(), &json, &len) < 0)
                        return text(ret, 500, "out of memory\n");
                return owned(ret, "application/json", json, len);
        }
        return false;
}
