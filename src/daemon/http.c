/* SPDX-License-Identifier: MIT */
/*
 * The metrics endpoint (http.h) on libmicrohttpd.
 *
 * Threads: libmicrohttpd's internal polling thread (epoll where available)
 * accepts, parses and calls on_request(), which serves each page from a
 * cache rendered at most once per CACHE_NS (the registry is collected and
 * the text formatted only then, so scraping as fast as possible costs the
 * streams at most a few renders a second); each answer is a copy of the
 * cached page handed to libmicrohttpd, which frees it. The reaper thread
 * ("zcp-http-reap") wakes every 250 ms while connections are open and shuts
 * down the socket of any that has held a slot longer than allowed without
 * finishing a request (slow or silent clients); libmicrohttpd then closes
 * it.
 *
 * Pacing: every request takes a turn of a GCRA schedule at
 * max_requests_per_s (a quarter of a second's worth may come at once); a
 * request early for its turn is suspended (MHD_suspend_connection) and the
 * reaper resumes it when its turn comes, so clients that scrape as fast as
 * they can wait in the kernel instead of taking the pipeline's CPU, and no
 * request is refused for it. The server's own threads run at nice
 * HTTP_NICE: when the CPUs are busy, the stages come first.
 *
 * Beyond loopback (docs/metrics.md): the live page (every path but
 * /metrics, /healthz, /stats) is served only when metrics.http.page says so
 * (auto: on loopback only), and asks for metrics.http.auth_file's secret
 * when one is set (daemon/auth.h). An HTTP/1.1 request without Host is 400;
 * "%00" in a path is left as it is (a NUL would cut the path short).
 *
 * Slots: the listener defers accept() until the client sent something
 * (TCP_DEFER_ACCEPT, up to timeout_s), so silent clients never hold a slot.
 * libmicrohttpd takes max_connections plus a reserve (a quarter, at
 * least 2). A connection that lands in the reserve evicts at once the
 * connection that has waited longest without a request being read (silent
 * or dripping clients first, idle keep-alive ones next), so a client that
 * connects and sends its request promptly always gets a slot, however many
 * others reconnect as soon as they are cut. Per-address limits cannot tell
 * local clients apart, so they only bound what one address takes overall.
 * Nothing here touches a frame: the streams only ever see the registry lock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "core/clock.h"
#include "core/err.h"
#include "daemon/auth.h"
#include "daemon/http.h"
#include "daemon/live.h"
#include "daemon/prom.h"

#if MHD_VERSION >= 0x00097002
#define MHD_RET enum MHD_Result
#else
#define MHD_RET int
#endif

#define MEMORY_LIMIT     (64u * 1024)   /* per connection; at 32 KiB libmicrohttpd closes after every response */
#define REAP_PERIOD_NS   (250 * ZCP_NSEC_PER_MSEC)
#define PRESSURE_NS      (500 * ZCP_NSEC_PER_MSEC) /* deadline while every slot is taken */
#define CACHE_NS         (250 * ZCP_NSEC_PER_MSEC) /* a page is rendered at most this often */
#define CACHED_PAGES     3                         /* /metrics, /healthz, /stats (enum page) */
#define STREAM_SNDBUF    (64 * 1024)               /* a video client's socket (the kernel doubles it) */
#define PACE_BURST_NS    (250 * ZCP_NSEC_PER_MSEC) /* this much of the schedule may come at once */
#define HTTP_NICE        10                        /* the server's threads, below the stages' 0 */

struct conn {
        struct conn *prev, *next;
        int fd;
        uint64_t since_ns;   /* connected, or finished its previous request */
        uint64_t requests;   /* answered on this connection */
        bool busy;           /* a request was read and is being answered: never evicted */
        bool streaming;      /* answering with an endless body (live.h's video): never reaped */
        bool shut;
};

/* A request suspended until its turn (pacing). */
struct parked {
        struct MHD_Connection *mc;
        uint64_t due_ns;
};

struct page_cache {
        char *body;
        size_t len;
        unsigned status;
        uint64_t at_ns;      /* rendered at; 0 never */
};

struct zcp_http {
        struct MHD_Daemon *daemon;
        struct zcp_registry *registry;
        char where[96];                   /* "127.0.0.1:9464", "[::1]:9464" */
        unsigned port;
        uint64_t timeout_ns;
        uint32_t per_ip_limit;
        enum zcp_healthz healthz;         /* the /healthz status code policy */

        pthread_mutex_t scrape_lock;      /* the scrape, the rate state and the page cache */
        struct zcp_prom_scrape *scrape;
        uint64_t scrape_ns;               /* collected at; 0 never */
        struct zcp_prom_rates rates;
        struct page_cache cache[CACHED_PAGES];   /* per enum page */
        _Atomic uint64_t renders;
        uint32_t soft_limit;              /* max_connections: beyond it, evict */
        uint64_t evicted;

        struct zcp_live *live;            /* the page, snapshots, /api/latency */
        bool loopback;                    /* the listen address is a loopback one */
        bool page;                        /* the live page is served (metrics.http.page) */
        bool need_auth;                   /* ... and asks for auth's secret */
        struct zcp_auth auth;

        /* Pacing, under conn_lock: the schedule's next turn (GCRA), the requests waiting for theirs. */
        uint64_t pace_interval_ns, pace_tat_ns;
        struct parked *parked;
        uint32_t parked_count, parked_cap;
        uint64_t paced;                   /* requests that waited for their turn */
        uint64_t refused;                 /* early requests of clients that could not wait (park()) */
        bool closing;                     /* stopping: nothing is parked any more */

        pthread_mutex_t conn_lock;        /* the connection list and `stopping` */
        pthread_cond_t conn_wake;
        struct conn *conns;
        uint32_t conn_count;
        uint64_t reaped;
        bool stopping;
        pthread_t reaper;
        bool reaper_started;
};

/* ---- requests ---- */

static MHD_RET reply(struct MHD_Connection *mc, unsigned status, const char *type, char *body, size_t len,
                     bool must_free)
{
        struct MHD_Response *resp;
        MHD_RET r;

        resp = MHD_create_response_from_buffer(len, body, must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!resp) {
                if (must_free)
                        free(body);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        r = MHD_queue_response(mc, status, resp);
        MHD_destroy_response(resp);
        return r;
}

static MHD_RET reply_text(struct MHD_Connection *mc, unsigned status, const char *text)
{
        return reply(mc, status, "text/plain; charset=utf-8", (char *)text, strlen(text), false);
}

/* 429 for a request early for its turn whose client cannot wait for it (park()). */
static MHD_RET reply_busy(struct MHD_Connection *mc, unsigned retry_s)
{
        static const char text[] = "too many requests: over metrics.http.max_requests_per_s, and this client "
                                   "closed its side so it cannot wait for its turn: try again after Retry-After\n";
        struct MHD_Response *resp;
        char retry[16];
        MHD_RET r;

        resp = MHD_create_response_from_buffer(sizeof(text) - 1, (void *)text, MHD_RESPMEM_PERSISTENT);
        if (!resp)
                return MHD_NO;
        snprintf(retry, sizeof(retry), "%u", retry_s);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, retry);
        r = MHD_queue_response(mc, MHD_HTTP_TOO_MANY_REQUESTS, resp);
        MHD_destroy_response(resp);
        return r;
}

/* 401 with the challenge a browser answers with its login box. */
static MHD_RET reply_unauthorized(struct MHD_Connection *mc)
{
        static const char text[] = "unauthorized: the live page asks for metrics.http.auth_file's secret "
                                   "(Authorization: Bearer ..., or basic auth with it as the password)\n";
        struct MHD_Response *resp;
        MHD_RET r;

        resp = MHD_create_response_from_buffer(sizeof(text) - 1, (void *)text, MHD_RESPMEM_PERSISTENT);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Basic realm=\"zcpipe\", charset=\"UTF-8\"");
        r = MHD_queue_response(mc, MHD_HTTP_UNAUTHORIZED, resp);
        MHD_destroy_response(resp);
        return r;
}

enum page { PAGE_METRICS, PAGE_HEALTHZ, PAGE_STATS, PAGE_COUNT };
static const char *const page_paths[PAGE_COUNT] = { "/metrics", "/healthz", "/stats" };
_Static_assert(PAGE_COUNT <= CACHED_PAGES, "serve() caches every page of enum page");

/* Under scrape_lock: renders `page` into its cache entry. Returns 0 or -ENOMEM. */
static int render(struct zcp_http *http, enum page page, uint64_t now)
{
        struct page_cache *pc = &http->cache[page];
        struct zcp_prom_buf out = { 0 };
        unsigned status = MHD_HTTP_OK;
        char *body;
        size_t len;
        int r = 0;

        /* One collection serves every page rendered within the interval. */
        if (!http->scrape_ns || now - http->scrape_ns >= CACHE_NS) {
                zcp_prom_collect(http->registry, http->scrape);
                zcp_prom_rates_update(&http->rates, http->scrape);
                http->scrape_ns = now;
        }
        switch (page) {
        case PAGE_METRICS:
                r = zcp_prom_format_metrics(http->scrape, &out);
                break;
        case PAGE_STATS:
                r = zcp_prom_format_stats(http->scrape, &out);
                break;
        default: {
                char reason[1024];

                if (!zcp_prom_health_policy(http->scrape, http->healthz, reason, sizeof(reason)))
                        status = MHD_HTTP_SERVICE_UNAVAILABLE;
                zcp_prom_buf_printf(&out, "%s\n", reason);
                r = out.failed ? -ENOMEM : 0;
                break;
        }
        }
        if (r < 0) {
                zcp_prom_buf_done(&out);
                return r;
        }
        body = zcp_prom_buf_steal(&out, &len);
        free(pc->body);
        *pc = (struct page_cache){ .body = body, .len = len, .status = status, .at_ns = now };
        atomic_fetch_add_explicit(&http->renders, 1, memory_order_relaxed);
        return 0;
}

static MHD_RET serve(struct zcp_http *http, struct MHD_Connection *mc, enum page page)
{
        static const char *const types[PAGE_COUNT] = {
                [PAGE_METRICS] = "text/plain; version=0.0.4; charset=utf-8",
                [PAGE_HEALTHZ] = "text/plain; charset=utf-8",
                [PAGE_STATS] = "application/json",
        };
        const struct page_cache *pc = &http->cache[page];
        uint64_t now = zcp_now_ns();
        unsigned status;
        char *body;
        size_t len;
        int r = 0;

        pthread_mutex_lock(&http->scrape_lock);
        if (!pc->body || now - pc->at_ns >= CACHE_NS)
                r = render(http, page, now);
        body = r == 0 ? malloc(pc->len ? pc->len : 1) : NULL;
        if (body)
                memcpy(body, pc->body, pc->len);
        len = pc->len;
        status = pc->status;
        pthread_mutex_unlock(&http->scrape_lock);
        if (!body) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC, "metrics: cannot build %s: %s",
                                    page_paths[page], zcp_strerror(r < 0 ? r : -ENOMEM));
                return reply_text(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        }
        return reply(mc, status, types[page], body, len, true);
}

/* A request's headers were read: its connection is answered, not evicted. */
static void mark_busy(struct zcp_http *http, struct MHD_Connection *mc)
{
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        struct conn *c = info ? info->socket_context : NULL;

        if (!c)
                return;
        pthread_mutex_lock(&http->conn_lock);
        c->busy = true;
        pthread_mutex_unlock(&http->conn_lock);
}

/* A video client's body (live.h): its bytes as they come; suspended while there are none. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        ssize_t n = zcp_live_stream_read(cls, buf, max);

        (void)pos;
        return n < 0 ? MHD_CONTENT_READER_END_OF_STREAM : n;
}

static void stream_free(void *cls)
{
        zcp_live_stream_free(cls);
}

static void stream_suspend(void *mc)
{
        MHD_suspend_connection(mc);
}

static void stream_resume(void *mc)
{
        MHD_resume_connection(mc);
}

static MHD_RET serve_live(struct zcp_http *http, struct MHD_Connection *mc, struct zcp_live_reply *lr)
{
        struct MHD_Response *resp;
        MHD_RET r;

        if (lr->stream) {
                const union MHD_ConnectionInfo *info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
                struct conn *c = info ? info->socket_context : NULL;

                resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, stream_read, lr->stream,
                                                         stream_free);
                if (!resp) {
                        zcp_live_stream_free(lr->stream);
                        return MHD_NO;
                }
                zcp_live_stream_attach(lr->stream, stream_suspend, stream_resume, mc);
                if (c) {
                        /* A fixed send buffer (no autotuning to megabytes): a slow client skips frames
                         * rather than falls behind, and one that stopped reading is cut after timeout_s. */
                        int sndbuf = STREAM_SNDBUF;

                        pthread_mutex_lock(&http->conn_lock);
                        c->streaming = true;
                        if (c->fd >= 0)
                                setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
                        pthread_mutex_unlock(&http->conn_lock);
                }
        } else {
                resp = MHD_create_response_from_buffer(lr->len, lr->body,
                                                       lr->must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        }
        if (!resp) {
                if (lr->must_free)
                        free(lr->body);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, lr->type);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        for (int i = 0; i < lr->header_count; i++)
                MHD_add_response_header(resp, lr->headers[i].name, lr->headers[i].value);
        r = MHD_queue_response(mc, lr->status, resp);
        MHD_destroy_response(resp);
        return r;
}

/* Whether the client has closed its side (sent everything it will send): EOF is waiting to be read. */
static bool peer_done(struct MHD_Connection *mc)
{
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        char b;

        return info && recv(info->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

enum pace { PACE_NOW, PACE_PARKED, PACE_REFUSED };

/*
 * The request's turn in the schedule (GCRA at max_requests_per_s). Early:
 * suspended and parked for the reaper to resume (PACE_PARKED). But a client
 * that has closed its side after its request (shutdown(SHUT_WR), `nc -N`)
 * cannot wait that way: libmicrohttpd (0.9.75) drops a suspended request
 * whose connection's end it has seen once resumed, unanswered (the fuzzer
 * found it, docs/development.md). Such a request is refused, 429 with
 * Retry-After, and takes no turn (PACE_REFUSED; *retry_s). libmicrohttpd's
 * thread.
 */
static enum pace park(struct zcp_http *http, struct MHD_Connection *mc, unsigned *retry_s)
{
        uint64_t now = zcp_now_ns(), delay = 0;
        enum pace r = PACE_NOW;
        bool early;

        pthread_mutex_lock(&http->conn_lock);
        if (http->pace_tat_ns < now)
                http->pace_tat_ns = now;
        if (http->pace_tat_ns > now + PACE_BURST_NS)
                delay = http->pace_tat_ns - now - PACE_BURST_NS;
        early = delay && !http->closing && http->parked_count < http->parked_cap;
        if (early && peer_done(mc)) {
                http->refused++;
                ZCP_LOG_RATELIMITED(ZCP_LOG_INFO, 60 * ZCP_NSEC_PER_SEC,
                                    "metrics: over max_requests_per_s, refused (429) a request whose client closed "
                                    "its side and so cannot wait for its turn (%llu so far)",
                                    (unsigned long long)http->refused);
                *retry_s = (unsigned)((delay + ZCP_NSEC_PER_SEC - 1) / ZCP_NSEC_PER_SEC);
                pthread_mutex_unlock(&http->conn_lock);
                return PACE_REFUSED;
        }
        http->pace_tat_ns += http->pace_interval_ns;
        if (early) {
                http->parked[http->parked_count++] = (struct parked){ .mc = mc, .due_ns = now + delay };
                http->paced++;
                MHD_suspend_connection(mc);
                pthread_cond_signal(&http->conn_wake);
                r = PACE_PARKED;
        }
        pthread_mutex_unlock(&http->conn_lock);
        return r;
}

/* Markers of a request's progress in *req_cls: its headers were read; it had its turn. */
static char req_seen, req_paced;

static MHD_RET on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                          const char *version, const char *upload_data, size_t *upload_size, void **req_cls)
{
        struct zcp_http *http = cls;

        (void)upload_data;
        if (!*req_cls) {
                /* First call, headers only. Other methods are answered now, before any body is read
                 * (libmicrohttpd then closes the connection); GET and HEAD on the next call, which
                 * keeps the connection alive. */
                mark_busy(http, mc);
                if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
                        return reply_text(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: use GET or HEAD\n");
                if (strcmp(version, MHD_HTTP_VERSION_1_1) == 0 &&
                    !MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST))
                        return reply_text(mc, MHD_HTTP_BAD_REQUEST, "bad request: HTTP/1.1 needs a Host header\n");
                *req_cls = &req_seen;
                return MHD_YES;
        }
        if (*upload_size) {
                *upload_size = 0;   /* a body on a GET: ignored (bounded by the memory limit) */
                return MHD_YES;
        }
        if (*req_cls == &req_seen) {
                unsigned retry_s = 1;

                *req_cls = &req_paced;
                switch (park(http, mc, &retry_s)) {
                case PACE_PARKED:
                        return MHD_YES;   /* called again when resumed */
                case PACE_REFUSED:
                        return reply_busy(mc, retry_s);
                case PACE_NOW:
                        break;
                }
        }
        for (int p = 0; p < PAGE_COUNT; p++)
                if (strcmp(url, page_paths[p]) == 0)
                        return serve(http, mc, (enum page)p);
        /* What is left is the live page's, or nothing. */
        if (!http->page)
                return reply_text(mc, MHD_HTTP_NOT_FOUND,
                                  "not found: /metrics, /healthz and /stats answer here; the live page is off "
                                  "(metrics.http.page)\n");
        if (http->need_auth &&
            !zcp_auth_check(&http->auth, MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION)))
                return reply_unauthorized(mc);
        {
                struct zcp_live_reply lr;

                if (zcp_live_answer(http->live, url, &lr))
                        return serve_live(http, mc, &lr);
        }
        return reply_text(mc, MHD_HTTP_NOT_FOUND, "not found: try /, /metrics, /healthz or /stats\n");
}

/*
 * Percent-decoding as libmicrohttpd's own, except that "%00" stays as it is:
 * a NUL would cut the path short, and "/metrics%00.txt" is not /metrics.
 */
static size_t unescape(void *cls, struct MHD_Connection *mc, char *s)
{
        char *w = s;
        const char *r = s;

        (void)cls;
        (void)mc;
        while (*r) {
                if (r[0] == '%' && isxdigit((unsigned char)r[1]) && isxdigit((unsigned char)r[2]) &&
                    !(r[1] == '0' && r[2] == '0')) {
                        char hex[3] = { r[1], r[2], '\0' };

                        *w++ = (char)strtoul(hex, NULL, 16);
                        r += 3;
                } else {
                        *w++ = *r++;
                }
        }
        *w = '\0';
        return (size_t)(w - s);
}

/* The server's own threads: named, and below the stages when the CPUs are busy. */
static void tune_thread(const char *name)
{
        static _Thread_local bool done;

        if (done)
                return;
        done = true;
        /* Linux: PRIO_PROCESS with 0 is the calling thread. Lowering one's priority needs no privilege. */
        if (setpriority(PRIO_PROCESS, 0, HTTP_NICE) < 0)
                zcp_debug("metrics: cannot lower the priority of %s: %s", name ? name : "a server thread",
                          strerror(errno));
        if (name)
                pthread_setname_np(pthread_self(), name);
}

/* ---- connection bookkeeping (libmicrohttpd's thread) and the reaper ---- */

/*
 * Under conn_lock, for a connection that just started: while more than the
 * soft limit hold a slot, cut the one waiting longest without a request
 * being read (never-served ones first, then idle keep-alive ones), so the
 * reserve stays free for the next prompt client.
 */
/* Bytes the client sent that libmicrohttpd has not read yet: a request is on its way. */
static bool unread(int fd)
{
        int n = 0;

        return ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

static void evict_for(struct zcp_http *http, const struct conn *fresh)
{
        uint32_t open = 0;
        struct conn *victim = NULL;

        for (struct conn *c = http->conns; c; c = c->next) {
                if (c->shut)
                        continue;
                open++;
                if (c == fresh || c->busy || c->fd < 0 || unread(c->fd))
                        continue;
                if (!victim || (c->requests == 0) > (victim->requests == 0) ||
                    ((c->requests == 0) == (victim->requests == 0) && c->since_ns < victim->since_ns))
                        victim = c;
        }
        if (open <= http->soft_limit || !victim)
                return;
        shutdown(victim->fd, SHUT_RDWR);
        victim->shut = true;
        http->evicted++;
        ZCP_LOG_RATELIMITED(ZCP_LOG_INFO, 60 * ZCP_NSEC_PER_SEC,
                            "metrics: every slot taken: cut a client %s to make room (%llu so far)",
                            victim->requests ? "idle after its requests" : "that sent no request yet",
                            (unsigned long long)http->evicted);
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
        struct zcp_http *http = cls;
        struct conn *c = *socket_context;

        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);

                tune_thread("zcp-http");   /* libmicrohttpd's polling thread, at its first connection */

                c = calloc(1, sizeof(*c));
                if (!c)
                        return;   /* not tracked: libmicrohttpd's own idle timeout still applies */
                c->fd = info ? info->connect_fd : -1;
                c->since_ns = zcp_now_ns();
                pthread_mutex_lock(&http->conn_lock);
                c->next = http->conns;
                if (http->conns)
                        http->conns->prev = c;
                http->conns = c;
                if (http->conn_count++ == 0)
                        pthread_cond_signal(&http->conn_wake);   /* the reaper sleeps while there are none */
                evict_for(http, c);
                pthread_mutex_unlock(&http->conn_lock);
                *socket_context = c;
        } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && c) {
                /* Before libmicrohttpd closes the fd: the reaper never touches a closed (reused) fd. */
                pthread_mutex_lock(&http->conn_lock);
                if (c->prev)
                        c->prev->next = c->next;
                else
                        http->conns = c->next;
                if (c->next)
                        c->next->prev = c->prev;
                http->conn_count--;
                pthread_mutex_unlock(&http->conn_lock);
                free(c);
                *socket_context = NULL;
        }
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **req_cls, enum MHD_RequestTerminationCode code)
{
        struct zcp_http *http = cls;
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        struct conn *c = info ? info->socket_context : NULL;

        (void)req_cls;
        (void)code;
        if (!c)
                return;
        pthread_mutex_lock(&http->conn_lock);
        c->since_ns = zcp_now_ns();   /* a keep-alive connection starts a new deadline */
        c->requests++;
        c->busy = false;
        c->streaming = false;
        pthread_mutex_unlock(&http->conn_lock);
}

/*
 * Under conn_lock: resumes the parked requests due by `now` (all of them when
 * closing), outside the lock (libmicrohttpd takes its own). Returns when the
 * next one is due, UINT64_MAX for none.
 */
static uint64_t resume_due(struct zcp_http *http, uint64_t now)
{
        for (;;) {
                struct MHD_Connection *due[32];
                uint32_t n = 0, i = 0;
                uint64_t next = UINT64_MAX;

                while (i < http->parked_count) {
                        struct parked *pk = &http->parked[i];

                        if ((pk->due_ns <= now || http->closing) && n < 32) {
                                due[n++] = pk->mc;
                                *pk = http->parked[--http->parked_count];
                                continue;
                        }
                        if (pk->due_ns < next)
                                next = pk->due_ns;
                        i++;
                }
                if (n == 0)
                        return next;
                pthread_mutex_unlock(&http->conn_lock);
                for (i = 0; i < n; i++)
                        MHD_resume_connection(due[i]);
                pthread_mutex_lock(&http->conn_lock);
        }
}

static void *reaper_thread(void *arg)
{
        struct zcp_http *http = arg;

        tune_thread(NULL);
        pthread_mutex_lock(&http->conn_lock);
        while (!http->stopping) {
                uint64_t now = zcp_now_ns(), limit = http->timeout_ns, wake = now + REAP_PERIOD_NS, next;
                struct timespec ts;

                /* Every slot a client may take is taken: whoever idles makes room, soon. */
                if (http->conn_count >= http->per_ip_limit && limit > PRESSURE_NS)
                        limit = PRESSURE_NS;
                for (struct conn *c = http->conns; c; c = c->next) {
                        if (c->shut || c->fd < 0 || c->streaming || now - c->since_ns <= limit)
                                continue;
                        /* libmicrohttpd sees the end of the stream and closes the connection itself. */
                        shutdown(c->fd, SHUT_RDWR);
                        c->shut = true;
                        http->reaped++;
                        if (c->requests == 0)
                                ZCP_LOG_RATELIMITED(ZCP_LOG_INFO, 60 * ZCP_NSEC_PER_SEC,
                                                    "metrics: closed a client that sent no complete request in "
                                                    "%.1f s (%llu connections cut so far)",
                                                    (double)(now - c->since_ns) / 1e9,
                                                    (unsigned long long)http->reaped);
                        else
                                zcp_debug("metrics: closed a connection idle for %.1f s after %llu requests",
                                          (double)(now - c->since_ns) / 1e9, (unsigned long long)c->requests);
                }
                /* Requests whose turn came go on. */
                next = resume_due(http, now);
                if (next < wake)
                        wake = next;
                ts = (struct timespec){ .tv_sec = (time_t)(wake / ZCP_NSEC_PER_SEC),
                                        .tv_nsec = (long)(wake % ZCP_NSEC_PER_SEC) };
                if (http->conn_count == 0 && http->parked_count == 0)
                        pthread_cond_wait(&http->conn_wake, &http->conn_lock);
                else if (!http->stopping)
                        pthread_cond_timedwait(&http->conn_wake, &http->conn_lock, &ts);
        }
        pthread_mutex_unlock(&http->conn_lock);
        return NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
        char msg[256];
        size_t n;

        (void)cls;
        vsnprintf(msg, sizeof(msg), fmt, ap);
        n = strlen(msg);
        while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
                msg[--n] = '\0';
        ZCP_LOG_RATELIMITED(ZCP_LOG_DEBUG, ZCP_NSEC_PER_SEC, "metrics: libmicrohttpd: %s", msg);
}

/* ---- start / stop ---- */

static bool sockaddr_is_loopback(const struct sockaddr *sa)
{
        if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
                return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
        }
        if (sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
                if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
                        return true;
                return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
        }
        return false;
}

static void format_where(const struct sockaddr *sa, unsigned port, char *buf, size_t size)
{
        char host[INET6_ADDRSTRLEN] = "?";

        if (sa->sa_family == AF_INET6) {
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, host, sizeof(host));
                snprintf(buf, size, "[%s]:%u", host, port);
        } else {
                inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, host, sizeof(host));
                snprintf(buf, size, "%s:%u", host, port);
        }
}

/* Resolves, checks and binds the listen address: clear errors here, before libmicrohttpd sees it. */
static int open_listener(const struct zcp_http_config *cfg, struct zcp_http *http, int *ret_fd)
{
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
        struct addrinfo *res = NULL;
        struct sockaddr_storage bound;
        socklen_t bound_len = sizeof(bound);
        char port[16];
        int fd = -1, one = 1, defer, r;

        snprintf(port, sizeof(port), "%u", cfg->port);
        r = getaddrinfo(cfg->listen, port, &hints, &res);
        if (r != 0 || !res) {
                zcp_err("metrics: cannot resolve listen address '%s': %s", cfg->listen,
                        r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
                if (res)
                        freeaddrinfo(res);
                return -EINVAL;
        }
        format_where(res->ai_addr, cfg->port, http->where, sizeof(http->where));
        http->loopback = sockaddr_is_loopback(res->ai_addr);
        if (!http->loopback && !cfg->allow_non_loopback) {
                zcp_err("metrics: refusing to listen on %s: not a loopback address "
                        "(set metrics.http.allow_non_loopback: true to expose metrics)",
                        http->where);
                r = -EINVAL;
                goto out;
        }
        fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
                r = -errno;
                zcp_err("metrics: cannot listen on %s: %s", http->where, zcp_strerror(r));
                goto out;
        }
        /* Restart right after a stop (connections in TIME_WAIT); never a second listener on Linux. */
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        /*
         * A connection is accepted once its client has sent something: silent clients never take a
         * slot (however fast they reconnect), and a prompt client's request is already there when
         * it is accepted, so it can never be evicted before it is read (evict_for()).
         */
        defer = (int)(cfg->timeout_s ? cfg->timeout_s : 1);
        if (setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof(defer)) < 0)
                zcp_debug("metrics: TCP_DEFER_ACCEPT: %s", strerror(errno));
        if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 64) < 0) {
                r = -errno;
                zcp_err("metrics: cannot listen on %s: %s", http->where, zcp_strerror(r));
                goto out;
        }
        if (getsockname(fd, (struct sockaddr *)&bound, &bound_len) == 0) {
                http->port = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                                         : ntohs(((struct sockaddr_in *)&bound)->sin_port);
                format_where((struct sockaddr *)&bound, http->port, http->where, sizeof(http->where));
        }
        *ret_fd = fd;
        fd = -1;
        r = 0;
out:
        if (fd >= 0)
                close(fd);
        freeaddrinfo(res);
        return r;
}

int zcp_http_start(const struct zcp_http_config *cfg, struct zcp_registry *registry, struct zcp_http **ret_http)
{
        /* Suspend/resume: scrapers wait their turn and video clients their next frame off the
         * polling loop (live.h). */
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
        pthread_condattr_t ca;
        struct zcp_http *http;
        unsigned reserve;
        int fd = -1, r;

        if (!cfg->enabled) {
                *ret_http = NULL;
                return 0;
        }
        http = calloc(1, sizeof(*http));
        if (!http)
                return -ENOMEM;
        http->registry = registry;
        http->healthz = cfg->healthz;
        http->timeout_ns = (uint64_t)(cfg->timeout_s ? cfg->timeout_s : 1) * ZCP_NSEC_PER_SEC;
        /* One address may take 3/4 of the slots (matters where non-loopback clients are allowed). */
        http->per_ip_limit = cfg->max_connections >= 4 ? cfg->max_connections - cfg->max_connections / 4
                                                       : (cfg->max_connections ? cfg->max_connections : 1);
        http->soft_limit = cfg->max_connections ? cfg->max_connections : 1;
        reserve = http->soft_limit / 4 > 2 ? http->soft_limit / 4 : 2;
        pthread_mutex_init(&http->scrape_lock, NULL);
        pthread_mutex_init(&http->conn_lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&http->conn_wake, &ca);
        pthread_condattr_destroy(&ca);
        http->scrape = calloc(1, sizeof(*http->scrape));
        http->parked_cap = http->soft_limit + reserve;
        http->parked = calloc(http->parked_cap, sizeof(*http->parked));
        if (!http->scrape || !http->parked) {
                r = -ENOMEM;
                goto fail;
        }
        http->pace_interval_ns = ZCP_NSEC_PER_SEC / (cfg->max_requests_per_s ? cfg->max_requests_per_s : 1);
        if (cfg->auth_file[0]) {
                char msg[ZCP_PATH_MAX + 256];

                r = zcp_auth_load(cfg->auth_file, &http->auth, msg, sizeof(msg));
                if (r < 0) {
                        zcp_err("metrics: %s", msg);
                        r = ZCP_ERR_CONFIG;
                        goto fail;
                }
                http->need_auth = true;
        }

        r = zcp_live_new(cfg, registry, &http->live);
        if (r < 0)
                goto fail;

        r = open_listener(cfg, http, &fd);
        if (r < 0)
                goto fail;
        http->page = cfg->page == ZCP_HTTP_PAGE_ON || (cfg->page == ZCP_HTTP_PAGE_AUTO && http->loopback);
        if (http->page && !http->loopback && !http->need_auth)
                zcp_warn("metrics: the live page (camera frames) is served on %s, beyond loopback, to anyone: "
                         "set metrics.http.auth_file, or metrics.http.page: off",
                         http->where);

        r = -pthread_create(&http->reaper, NULL, reaper_thread, http);
        if (r < 0) {
                zcp_err("metrics: cannot start a thread: %s", zcp_strerror(r));
                close(fd);
                goto fail;
        }
        pthread_setname_np(http->reaper, "zcp-http-reap");
        http->reaper_started = true;

        flags |= MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? MHD_USE_EPOLL : MHD_USE_POLL;
        http->daemon = MHD_start_daemon(
                flags, 0, NULL, NULL, on_request, http,
                /* first, so that libmicrohttpd's messages about the options come here too */
                MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, http,
                MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                MHD_OPTION_CONNECTION_LIMIT, (unsigned)(http->soft_limit + reserve),
                /* Local clients share one address: a per-address limit would refuse the honest with the rest. */
                MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)(http->soft_limit + reserve),
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(cfg->timeout_s ? cfg->timeout_s : 1),
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MEMORY_LIMIT,
                MHD_OPTION_NOTIFY_CONNECTION, on_connection, http,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, http,
                MHD_OPTION_UNESCAPE_CALLBACK, unescape, http,
                MHD_OPTION_END);
        if (!http->daemon) {
                /* The listen socket may or may not have been closed by libmicrohttpd: leave it (exit follows). */
                zcp_err("metrics: cannot start the HTTP server on %s (libmicrohttpd refused; see debug log)",
                        http->where);
                r = -EIO;
                goto fail;
        }
        if (http->page)
                zcp_info("metrics: serving http://%s/metrics (and /healthz, /stats; the live page at http://%s/%s)",
                         http->where, http->where, http->need_auth ? ", with metrics.http.auth_file's secret" : "");
        else
                zcp_info("metrics: serving http://%s/metrics (and /healthz, /stats; the live page is off: "
                         "metrics.http.page)",
                         http->where);
        *ret_http = http;
        return 0;

fail:
        zcp_http_stop(http);
        return r;
}

void zcp_http_stop(struct zcp_http *http)
{
        if (!http)
                return;
        /* libmicrohttpd refuses to stop with a connection suspended: the video clients and the
         * scrapers waiting for their turn are resumed first. */
        zcp_live_end_streams(http->live);
        pthread_mutex_lock(&http->conn_lock);
        http->closing = true;
        resume_due(http, UINT64_MAX);
        pthread_mutex_unlock(&http->conn_lock);
        /* Closes the listen socket and every connection (their CLOSED notifications empty the list). */
        if (http->daemon)
                MHD_stop_daemon(http->daemon);
        zcp_live_free(http->live);   /* after the daemon: no request is in it any more */
        if (http->reaper_started) {
                pthread_mutex_lock(&http->conn_lock);
                http->stopping = true;
                pthread_cond_signal(&http->conn_wake);
                pthread_mutex_unlock(&http->conn_lock);
                pthread_join(http->reaper, NULL);
        }
        while (http->conns) {
                struct conn *c = http->conns;
                http->conns = c->next;
                free(c);
        }
        pthread_cond_destroy(&http->conn_wake);
        pthread_mutex_destroy(&http->conn_lock);
        pthread_mutex_destroy(&http->scrape_lock);
        for (int p = 0; p < CACHED_PAGES; p++)
                free(http->cache[p].body);
        free(http->scrape);
        free(http->parked);
        explicit_bzero(&http->auth, sizeof(http->auth));
        free(http);
}

unsigned zcp_http_port(const struct zcp_http *http)
{
        return http ? http->port : 0;
}

uint64_t zcp_http_renders(const struct zcp_http *http)
{
        return http ? atomic_load_explicit(&http->renders, memory_order_relaxed) : 0;
}
