/* SPDX-License-Identifier: MIT */
/*
 * The live page's routes (live.h), the thread that keeps the latency
 * points (latency.h) coming, one sample a second, and the one that feeds
 * video clients.
 *
 * A snapshot request finds the stream in the registry, takes a reference
 * to its snapshot under the registry lock and works on it after the lock
 * is released: encoding a JPEG never holds the registry (nor the pipeline:
 * snapshot.h).
 *
 * A video client (struct zcp_live_stream) goes round these states, all
 * changed under live->lock; the HTTP server's suspend() and resume() are
 * called outside it:
 *
 *   RUNNING --read(): its part is sent, nothing new--> PARKING --suspend()--> PARKED
 *      ^                                                                        |
 *      +----resume()---- the feeder made its next part (or it ended) <-- FILLING
 *
 * The feeder only touches PARKED clients (it makes them FILLING while it
 * encodes), and a suspended connection is never freed by the server, so a
 * client is never freed under the feeder's hands; zcp_live_end_streams()
 * stops the feeder before it resumes the parked ones.
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

/* Video (MJPEG): one part per new snapshot, multipart/x-mixed-replace. */
#define MJPEG_BOUNDARY     "zcpframe"
#define MJPEG_TYPE         "multipart/x-mixed-replace; boundary=" MJPEG_BOUNDARY
#define MJPEG_KEEPALIVE_NS (5 * ZCP_NSEC_PER_SEC)   /* nothing new this long: the last part again */
#define MJPEG_LOOKUP_NS    ZCP_NSEC_PER_SEC         /* the stream found again (restarts) and watched */
#define MJPEG_IDLE_NS      ZCP_NSEC_PER_SEC         /* the feeder's longest sleep */
#define MJPEG_POLL_MIN_NS  (10 * ZCP_NSEC_PER_MSEC) /* its shortest look for a new frame */
#define MJPEG_BATCH        16                       /* clients filled per pass */

enum park {
        PARK_RUNNING,   /* the server pulls its bytes: read() may run */
        PARK_PARKING,   /* read() suspends it */
        PARK_PARKED,    /* suspended until its next part */
        PARK_FILLING,   /* suspended, the feeder makes its next part */
};

struct zcp_live_stream {
        struct zcp_live *live;
        struct zcp_live_stream *prev, *next;   /* live->clients */
        char name[ZCP_NAME_MAX];
        void (*suspend)(void *arg);
        void (*resume)(void *arg);
        void *arg;
        /* Under live->lock: */
        enum park park;
        bool ended;           /* the next read() ends the body */
        char *part;           /* the part being sent, kept for a keep-alive; malloc'd */
        size_t part_len, part_off;
        uint64_t due_ns;      /* the feeder looks at it then (while PARKED) */
        /* The feeder's (while FILLING), and free()'s: */
        struct zcp_snapshot *snap;   /* a reference, or NULL (the stream is down) */
        uint32_t width, height;
        uint64_t looked_up_ns;       /* `snap` found at */
        uint64_t taken_seen;         /* its frames taken when the feeder last looked */
        uint64_t seq_sent;           /* the frame of the last part, when have_seq */
        bool have_seq;
        bool any_part;               /* a part (or the preamble) was made */
        uint64_t sent_ns;            /* the last part (or the same again) was handed over */
};

struct zcp_live {
        struct zcp_registry *registry;
        uint32_t snapshot_fps;
        uint32_t max_streams;     /* video clients at once */
        struct zcp_latency *latency;

        pthread_mutex_t lock;     /* `stopping`, the video clients and their state */
        pthread_cond_t wake;      /* the ticker's */
        pthread_cond_t feed;      /* the feeder's: a client parked, or stop */
        bool stopping;
        pthread_t ticker;
        bool ticker_started;

        struct zcp_live_stream *clients;
        uint32_t client_count;
        bool streams_ended;       /* zcp_live_end_streams() ran: no new client */
        bool feeder_stopping;
        pthread_t feeder;
        bool feeder_started;
};

static void *feeder_thread(void *arg);

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
        live->max_streams = cfg->max_connections / 4 ? cfg->max_connections / 4 : 1;
        pthread_mutex_init(&live->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&live->wake, &ca);
        pthread_cond_init(&live->feed, &ca);
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
        r = -pthread_create(&live->feeder, NULL, feeder_thread, live);
        if (r < 0) {
                zcp_err("metrics: cannot start a thread: %s", strerror(-r));
                goto fail;
        }
        pthread_setname_np(live->feeder, "zcp-http-mjpeg");
        live->feeder_started = true;
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
        zcp_live_end_streams(live);
        if (live->ticker_started) {
                pthread_mutex_lock(&live->lock);
                live->stopping = true;
                pthread_cond_signal(&live->wake);
                pthread_mutex_unlock(&live->lock);
                pthread_join(live->ticker, NULL);
        }
        zcp_latency_free(live->latency);
        pthread_cond_destroy(&live->feed);
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

/* ---- video: /stream/<stream>.mjpg ---- */

static bool answer_stream(struct zcp_live *live, const char *rest, struct zcp_live_reply *ret)
{
        const char *dot = strrchr(rest, '.');
        struct find f = { .name = rest };
        struct zcp_live_stream *s;
        uint64_t now = zcp_now_ns();
        int r;

        if (!dot || strcmp(dot, ".mjpg") != 0 || dot == rest)
                return text(ret, 404, "not found: /stream/<stream>.mjpg\n");
        f.len = (size_t)(dot - rest);
        if (live->snapshot_fps == 0)
                return text(ret, 404, "snapshots are off (metrics.http.snapshot_fps: 0)\n");
        zcp_registry_foreach(live->registry, find_one, &f);
        if (!f.found || f.len >= sizeof(s->name)) {
                zcp_snapshot_unref(f.snap);
                return text(ret, 404, "no such stream\n");
        }
        /* Frames are taken from now on (a stream that is down has no snapshot yet: the feeder waits for it). */
        r = f.snap ? zcp_snapshot_watch(f.snap, f.width, f.height, live->snapshot_fps) : 0;
        if (r == -ENOTSUP) {
                zcp_snapshot_unref(f.snap);
                return text(ret, 404, "snapshots are not built into this zcpipe (needs libturbojpeg)\n");
        }
        s = calloc(1, sizeof(*s));
        if (!s) {
                zcp_snapshot_unref(f.snap);
                return text(ret, 500, "out of memory\n");
        }
        s->live = live;
        memcpy(s->name, rest, f.len);
        s->snap = f.snap;
        s->width = f.width;
        s->height = f.height;
        s->looked_up_ns = now;
        s->due_ns = now;
        pthread_mutex_lock(&live->lock);
        if (live->streams_ended || live->client_count >= live->max_streams) {
                bool ending = live->streams_ended;

                pthread_mutex_unlock(&live->lock);
                zcp_snapshot_unref(s->snap);
                free(s);
                if (ending)
                        return text(ret, 503, "zcpipe is stopping\n");
                text(ret, 503, "too many video clients: try again later (at most a quarter of max_connections)\n");
                add_header(ret, "Retry-After", "5");
                return true;
        }
        s->next = live->clients;
        if (live->clients)
                live->clients->prev = s;
        live->clients = s;
        live->client_count++;
        pthread_mutex_unlock(&live->lock);
        ret->status = 200;
        ret->type = MJPEG_TYPE;
        ret->stream = s;
        return true;
}

void zcp_live_stream_attach(struct zcp_live_stream *s, void (*suspend)(void *arg), void (*resume)(void *arg),
                            void *arg)
{
        s->suspend = suspend;
        s->resume = resume;
        s->arg = arg;
}

ssize_t zcp_live_stream_read(struct zcp_live_stream *s, char *buf, size_t max)
{
        struct zcp_live *live = s->live;

        pthread_mutex_lock(&live->lock);
        if (s->part && s->part_off < s->part_len) {
                size_t n = s->part_len - s->part_off < max ? s->part_len - s->part_off : max;

                memcpy(buf, s->part + s->part_off, n);
                s->part_off += n;
                pthread_mutex_unlock(&live->lock);
                return (ssize_t)n;
        }
        if (s->ended) {
                pthread_mutex_unlock(&live->lock);
                return -1;
        }
        s->park = PARK_PARKING;
        pthread_mutex_unlock(&live->lock);
        s->suspend(s->arg);
        pthread_mutex_lock(&live->lock);
        if (s->ended) {
                /* Ended while it was being suspended: nobody else resumes it now. */
                s->park = PARK_RUNNING;
                pthread_mutex_unlock(&live->lock);
                s->resume(s->arg);
                return 0;
        }
        s->park = PARK_PARKED;
        pthread_cond_signal(&live->feed);
        pthread_mutex_unlock(&live->lock);
        return 0;
}

void zcp_live_stream_free(struct zcp_live_stream *s)
{
        struct zcp_live *live;

        if (!s)
                return;
        live = s->live;
        pthread_mutex_lock(&live->lock);
        if (s->prev)
                s->prev->next = s->next;
        else
                live->clients = s->next;
        if (s->next)
                s->next->prev = s->prev;
        live->client_count--;
        pthread_mutex_unlock(&live->lock);
        zcp_snapshot_unref(s->snap);
        free(s->part);
        free(s);
}

/* One multipart part: its headers, the JPEG, CRLF (malloc'd; NULL when out of memory). */
static char *make_part(const void *jpeg, size_t len, uint64_t seq, size_t *ret_len)
{
        char head[200];
        int n = snprintf(head, sizeof(head),
                         "--" MJPEG_BOUNDARY "\r\nContent-Type: image/jpeg\r\nContent-Length: %zu\r\n"
                         "X-Zcp-Seq: %" PRIu64 "\r\n\r\n",
                         len, seq);
        char *part = malloc((size_t)n + len + 2);

        if (!part)
                return NULL;
        memcpy(part, head, (size_t)n);
        memcpy(part + n, jpeg, len);
        memcpy(part + (size_t)n + len, "\r\n", 2);
        *ret_len = (size_t)n + len + 2;
        return part;
}

/*
 * Feeder, for a client it holds (FILLING): finds its stream again once a
 * second (a restart makes a new snapshot; watching keeps frames coming), and
 * when a frame was taken since it last looked, gets its JPEG (snapshot.h:
 * encoded at most once per frame, whoever asks) as the next part. Nothing
 * new for MJPEG_KEEPALIVE_NS: the last part again (before the first frame, a
 * CRLF of preamble), so that a client that went away is noticed. Then parks
 * the client again or resumes it.
 */
static void fill(struct zcp_live *live, struct zcp_live_stream *s, uint64_t now)
{
        uint64_t interval = ZCP_NSEC_PER_SEC / (live->snapshot_fps ? live->snapshot_fps : 1);
        uint64_t poll = interval / 4 > MJPEG_POLL_MIN_NS ? interval / 4 : MJPEG_POLL_MIN_NS;
        bool gone = false, wake, sent = false;
        char *part = NULL;
        size_t len = 0;

        if (now - s->looked_up_ns >= MJPEG_LOOKUP_NS) {
                struct find f = { .name = s->name, .len = strlen(s->name) };

                zcp_registry_foreach(live->registry, find_one, &f);
                if (f.snap != s->snap) {
                        s->taken_seen = 0;
                        s->have_seq = false;
                }
                zcp_snapshot_unref(s->snap);
                s->snap = f.snap;
                s->width = f.width;
                s->height = f.height;
                s->looked_up_ns = now;
                gone = !f.found;   /* removed by a reload */
                if (s->snap)
                        (void)zcp_snapshot_watch(s->snap, s->width, s->height, live->snapshot_fps);
        }
        if (!gone && s->snap) {
                struct zcp_snapshot_counters c;
                void *jpeg;
                size_t jlen;
                uint64_t seq;

                zcp_snapshot_counters(s->snap, &c);
                if (c.taken != s->taken_seen && zcp_snapshot_jpeg(s->snap, &jpeg, &jlen, &seq) == 0) {
                        s->taken_seen = c.taken;
                        if (!s->have_seq || seq != s->seq_sent) {
                                part = make_part(jpeg, jlen, seq, &len);
                                s->seq_sent = seq;
                                s->have_seq = part != NULL;
                        }
                        free(jpeg);
                }
        }
        if (!part && !gone && !s->any_part && now - s->sent_ns >= MJPEG_KEEPALIVE_NS && (part = strdup("\r\n")))
                len = 2;

        pthread_mutex_lock(&live->lock);
        if (gone)
                s->ended = true;
        if (part) {
                free(s->part);
                s->part = part;
                s->part_len = len;
                s->any_part = true;
                sent = true;
        } else if (!gone && s->part && now - s->sent_ns >= MJPEG_KEEPALIVE_NS) {
                sent = true;   /* the same bytes again */
        }
        if (sent) {
                s->part_off = 0;
                s->sent_ns = now;
        }
        s->due_ns = now + (sent ? interval : poll);
        wake = sent || s->ended;
        s->park = wake ? PARK_RUNNING : PARK_PARKED;
        pthread_mutex_unlock(&live->lock);
        if (wake)
                s->resume(s->arg);
}

static void *feeder_thread(void *arg)
{
        struct zcp_live *live = arg;

        pthread_mutex_lock(&live->lock);
        while (!live->feeder_stopping) {
                struct zcp_live_stream *due[MJPEG_BATCH];
                uint64_t now = zcp_now_ns(), next = now + MJPEG_IDLE_NS;
                uint32_t n = 0;

                for (struct zcp_live_stream *s = live->clients; s; s = s->next) {
                        if (s->park != PARK_PARKED)
                                continue;
                        if (s->due_ns <= now && n < MJPEG_BATCH) {
                                s->park = PARK_FILLING;
                                due[n++] = s;
                        } else if (s->due_ns < next) {
                                next = s->due_ns;
                        }
                }
                if (n == 0) {
                        struct timespec ts = { .tv_sec = (time_t)(next / ZCP_NSEC_PER_SEC),
                                               .tv_nsec = (long)(next % ZCP_NSEC_PER_SEC) };

                        pthread_cond_timedwait(&live->feed, &live->lock, &ts);
                        continue;
                }
                pthread_mutex_unlock(&live->lock);
                for (uint32_t i = 0; i < n; i++)
                        fill(live, due[i], now);
                pthread_mutex_lock(&live->lock);
        }
        pthread_mutex_unlock(&live->lock);
        return NULL;
}

void zcp_live_end_streams(struct zcp_live *live)
{
        struct zcp_live_stream *parked[256];
        uint32_t n = 0;
        bool more = true;

        if (!live)
                return;
        pthread_mutex_lock(&live->lock);
        live->streams_ended = true;
        live->feeder_stopping = true;
        pthread_cond_signal(&live->feed);
        pthread_mutex_unlock(&live->lock);
        if (live->feeder_started) {
                pthread_join(live->feeder, NULL);
                live->feeder_started = false;
        }
        /* Then nobody but this thread resumes a parked client: each one exactly once. */
        while (more) {
                pthread_mutex_lock(&live->lock);
                n = 0;
                more = false;
                for (struct zcp_live_stream *s = live->clients; s; s = s->next) {
                        s->ended = true;
                        if (s->park != PARK_PARKED)
                                continue;
                        if (n == sizeof(parked) / sizeof(parked[0])) {
                                more = true;
                                break;
                        }
                        s->park = PARK_RUNNING;
                        parked[n++] = s;
                }
                pthread_mutex_unlock(&live->lock);
                for (uint32_t i = 0; i < n; i++)
                        parked[i]->resume(parked[i]->arg);
        }
}

bool zcp_live_answer(struct zcp_live *live, const char *url, struct zcp_live_reply *ret)
{
        static const char snapshot_prefix[] = "/snapshot/";
        static const char stream_prefix[] = "/stream/";

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
        if (strncmp(url, stream_prefix, sizeof(stream_prefix) - 1) == 0)
                return answer_stream(live, url + sizeof(stream_prefix) - 1, ret);
        if (strcmp(url, "/api/latency") == 0) {
                char *json;
                size_t len;

                if (zcp_latency_json(live->latency, zcp_now_ns(), &json, &len) < 0)
                        return text(ret, 500, "out of memory\n");
                return owned(ret, "application/json", json, len);
        }
        return false;
}
