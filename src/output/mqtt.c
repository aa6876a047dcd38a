/* SPDX-License-Identifier: MIT */
/*
 * MQTT results sink (mqtt.h).
 *
 * In:   result lines from the publish thread (write), copied into a ring of
 *       `queue` fixed slots of ZCP_MQTT_MESSAGE_MAX bytes under a mutex held
 *       for one memcpy; an eventfd wakes the network thread.
 * Out:  PUBLISH packets, through libmosquitto driven from our own thread
 *       (mosquitto_socket + poll + loop_read/loop_write/loop_misc), so that
 *       reconnection, back-off and what counts as delivered are ours.
 * Blocks: only the network thread (name resolution, TLS, the socket).
 * Drops: when the ring is full the oldest queued line is dropped
 *       (lost{queue_full}); a line longer than the slot is lost{too_long};
 *       a QoS 0 line handed to libmosquitto and not yet written when the
 *       connection drops, a publish libmosquitto refuses, and whatever is
 *       still queued when the sink closes (after up to DRAIN_NS of trying)
 *       are lost{write_error}. At QoS 1 a line counts as written when the
 *       broker acknowledges it; lines handed over but not acknowledged stay
 *       in libmosquitto and are sent again after a reconnect (at least once).
 *       So at any time: handed to the sink = written + queued + lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <mosquitto.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "output/mqtt.h"

#define INFLIGHT_MAX  16                          /* lines handed to libmosquitto at once */
#define BACKOFF_MIN_MS 100u
#define DRAIN_NS      (3 * ZCP_NSEC_PER_SEC)      /* close: time to deliver what is queued */
#define TICK_MS       500                         /* keepalive bookkeeping while idle */
#define TOPIC_MAX     512
#define PASSWORD_MAX  256
#define MID_WORDS     (65536 / 64)

struct mqtt {
        struct zcp_mqtt_config cfg;
        struct zcp_sink_stats *stats;
        char stream[ZCP_NAME_MAX];
        char host[ZCP_NAME_MAX];
        char topic[TOPIC_MAX], avail_topic[TOPIC_MAX];
        char client_id[ZCP_NAME_MAX * 3];
        char password[PASSWORD_MAX];
        struct mosquitto *mosq;
        int wake_fd;
        pthread_t thread;
        bool thread_started;
        _Atomic bool stop;

        /* The queue: slots [head, tail) modulo cap hold lines; both only grow. */
        pthread_mutex_t lock;
        char *slots;
        uint32_t *lens;
        uint32_t cap;
        uint64_t head, tail;
        _Atomic uint32_t inflight;                /* handed to libmosquitto, not yet acknowledged */

        /* Network thread only. */
        bool started_connect;                     /* mosquitto_connect_async done once */
        bool have_socket;                         /* connecting or connected */
        bool connected;                           /* CONNACK accepted */
        bool ever_connected;
        bool pub_pending, pub_acked;              /* on_publish inside our mosquitto_publish() */
        uint32_t backoff_ms;
        uint64_t next_try_ns, drain_deadline_ns;
        uint64_t mids[MID_WORDS];                 /* result messages awaiting on_publish */
        char problem[256];                        /* the last failure logged (one line per change) */
        char lib_error[192];                      /* libmosquitto's last error message */
        char buf[ZCP_MQTT_MESSAGE_MAX];
};

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

static void lib_init(void)
{
        mosquitto_lib_init();
}

static struct mqtt *from_ctx(struct zcp_sink_ctx *c)
{
        return (struct mqtt *)c;
}

static uint32_t queue_len(const struct mqtt *m)
{
        return (uint32_t)(m->tail - m->head);
}

/* Under the lock (or by the only thread left). */
static void update_queued(struct mqtt *m)
{
        atomic_store_explicit(&m->stats->queued, (uint64_t)queue_len(m) + atomic_load(&m->inflight),
                              memory_order_relaxed);
}

static void lost(struct mqtt *m, enum zcp_sink_loss why, uint64_t n)
{
        atomic_fetch_add_explicit(&m->stats->lost[why], n, memory_order_relaxed);
}

/* ---- the publish thread ---- */

static int mqtt_write(struct zcp_sink_ctx *ctx, const char *line, size_t len)
{
        struct mqtt *m = from_ctx(ctx);
        const uint64_t one = 1;
        bool dropped = false;

        if (len > 0 && line[len - 1] == '\n')
                len--;
        if (len > ZCP_MQTT_MESSAGE_MAX) {
                lost(m, ZCP_SINK_LOSS_TOO_LONG, 1);
                return -EMSGSIZE;   /* refused and counted (sink.h); the caller logs it */
        }
        pthread_mutex_lock(&m->lock);
        if (queue_len(m) == m->cap) {
                m->head++;
                dropped = true;
        }
        memcpy(m->slots + (size_t)(m->tail % m->cap) * ZCP_MQTT_MESSAGE_MAX, line, len);
        m->lens[m->tail % m->cap] = (uint32_t)len;
        m->tail++;
        update_queued(m);
        pthread_mutex_unlock(&m->lock);
        if (dropped) {
                lost(m, ZCP_SINK_LOSS_QUEUE_FULL, 1);
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC,
                                    "%s: mqtt queue full (%u results), dropping the oldest", m->stream, m->cap);
        }
        /* Non-blocking eventfd: a counter at its maximum already means "wake up". */
        if (write(m->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
                return -errno;
        return 0;
}

/* ---- the network thread ---- */

/* Logs `what` when it differs from the last failure logged (one line per state change). */
static void problem(struct mqtt *m, enum zcp_log_level level, const char *what)
{
        /* results are not leaving: /healthz says so until the broker takes them again */
        atomic_store(&m->stats->error, ENOTCONN);
        if (strcmp(m->problem, what) == 0)
                return;
        snprintf(m->problem, sizeof(m->problem), "%s", what);
        zcp_log(level, "%s: mqtt %s:%u: %s", m->stream, m->cfg.broker, m->cfg.port, what);
}

static void schedule_retry(struct mqtt *m)
{
        m->next_try_ns = zcp_now_ns() + (uint64_t)m->backoff_ms * ZCP_NSEC_PER_MSEC;
        m->backoff_ms = m->backoff_ms * 2 > m->cfg.backoff_max_ms ? m->cfg.backoff_max_ms : m->backoff_ms * 2;
}

static void on_log(struct mosquitto *mosq, void *obj, int level, const char *str)
{
        struct mqtt *m = obj;

        if (level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING))
                snprintf(m->lib_error, sizeof(m->lib_error), "%s", str);
}

static void on_connect(struct mosquitto *mosq, void *obj, int rc)
{
        struct mqtt *m = obj;
        char what[256];

        if (rc != 0) {
                /* The broker closes the connection next; the loop sees the socket go. */
                snprintf(what, sizeof(what), "the broker refused the connection: %s%s", mosquitto_connack_string(rc),
                         rc == 4 || rc == 5 ? " (check output.username and output.password_file)" : "");
                problem(m, ZCP_LOG_ERROR, what);
                return;
        }
        m->connected = true;
        atomic_store(&m->stats->error, 0);
        m->backoff_ms = BACKOFF_MIN_MS;
        if (m->ever_connected)
                atomic_fetch_add_explicit(&m->stats->reconnects, 1, memory_order_relaxed);
        m->ever_connected = true;
        m->problem[0] = '\0';
        zcp_info("%s: mqtt connected to %s:%u as %s%s, results to %s", m->stream, m->cfg.broker, m->cfg.port,
                 m->client_id, m->cfg.ca_file[0] ? " (TLS)" : "", m->topic);
        mosquitto_publish(mosq, NULL, m->avail_topic, 6, "online", (int)m->cfg.qos, true);
}

static bool mid_take(struct mqtt *m, int mid)
{
        uint64_t bit = 1ull << (mid % 64);
        uint64_t *w = &m->mids[(mid / 64) % MID_WORDS];

        if (!(*w & bit))
                return false;
        *w &= ~bit;
        return true;
}

static void on_publish(struct mosquitto *mosq, void *obj, int mid)
{
        struct mqtt *m = obj;

        if (!mid_take(m, mid)) {
                /* Written inside our own mosquitto_publish() before we could record its mid (QoS 0). */
                if (!m->pub_pending || m->pub_acked)
                        return;   /* the availability message */
                m->pub_acked = true;
        }
        atomic_fetch_sub(&m->inflight, 1);
        atomic_fetch_add_explicit(&m->stats->written, 1, memory_order_relaxed);
        pthread_mutex_lock(&m->lock);
        update_queued(m);
        pthread_mutex_unlock(&m->lock);
}

static void try_connect(struct mqtt *m)
{
        char what[256];
        int rc;

        m->lib_error[0] = '\0';
        if (!m->started_connect) {
                m->started_connect = true;
                rc = mosquitto_connect_async(m->mosq, m->cfg.broker, (int)m->cfg.port, (int)m->cfg.keepalive_s);
        } else {
                rc = mosquitto_reconnect_async(m->mosq);
        }
        if (rc == MOSQ_ERR_SUCCESS) {
                m->have_socket = true;
                return;
        }
        snprintf(what, sizeof(what), "cannot connect: %s%s%s; retrying, holding up to %u results",
                 rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc), m->lib_error[0] ? ": " : "",
                 m->lib_error, m->cap);
        problem(m, ZCP_LOG_WARN, what);
        schedule_retry(m);
}

static void connection_gone(struct mqtt *m)
{
        char what[256];
        uint32_t unsent;

        m->have_socket = false;
        if (m->connected) {
                snprintf(what, sizeof(what), "connection lost%s%s; reconnecting, holding up to %u results",
                         m->lib_error[0] ? ": " : "", m->lib_error, m->cap);
                problem(m, ZCP_LOG_WARN, what);
        } else if (!m->problem[0] || strncmp(m->problem, "the broker refused", 18) != 0) {
                snprintf(what, sizeof(what), "cannot connect%s%s; retrying, holding up to %u results",
                         m->lib_error[0] ? ": " : "", m->lib_error[0] ? m->lib_error : " (connection closed)",
                         m->cap);
                problem(m, ZCP_LOG_WARN, what);
        }
        m->connected = false;
        atomic_store(&m->stats->error, ENOTCONN);
        if (m->cfg.qos == 0) {
                /* libmosquitto drops QoS 0 packets not yet written. */
                unsent = atomic_exchange(&m->inflight, 0);
                memset(m->mids, 0, sizeof(m->mids));
                lost(m, ZCP_SINK_LOSS_WRITE_ERROR, unsent);
                pthread_mutex_lock(&m->lock);
                update_queued(m);
                pthread_mutex_unlock(&m->lock);
        }
        schedule_retry(m);
}

/* Hands queued lines to libmosquitto while connected and below INFLIGHT_MAX. */
static void feed(struct mqtt *m)
{
        while (m->connected && atomic_load(&m->inflight) < INFLIGHT_MAX) {
                uint32_t len;
                int mid = 0, rc;

                pthread_mutex_lock(&m->lock);
                if (queue_len(m) == 0) {
                        pthread_mutex_unlock(&m->lock);
                        return;
                }
                len = m->lens[m->head % m->cap];
                memcpy(m->buf, m->slots + (size_t)(m->head % m->cap) * ZCP_MQTT_MESSAGE_MAX, len);
                m->head++;
                atomic_fetch_add(&m->inflight, 1);
                update_queued(m);
                pthread_mutex_unlock(&m->lock);

                m->pub_pending = true;
                m->pub_acked = false;
                rc = mosquitto_publish(m->mosq, &mid, m->topic, (int)len, m->buf, (int)m->cfg.qos, false);
                m->pub_pending = false;
                if (rc != MOSQ_ERR_SUCCESS) {
                        atomic_fetch_sub(&m->inflight, 1);
                        lost(m, ZCP_SINK_LOSS_WRITE_ERROR, 1);
                        ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC, "%s: mqtt publish failed: %s",
                                            m->stream, mosquitto_strerror(rc));
                        return;
                }
                if (!m->pub_acked)
                        m->mids[(mid / 64) % MID_WORDS] |= 1ull << (mid % 64);
        }
}

static int ms_until(uint64_t now, uint64_t t)
{
        uint64_t ms = t > now ? (t - now + ZCP_NSEC_PER_MSEC - 1) / ZCP_NSEC_PER_MSEC : 0;

        return ms > TICK_MS ? TICK_MS : (int)ms;
}

/* Farewell: a retained "offline" (a clean disconnect does not fire the will), then DISCONNECT. */
static void say_goodbye(struct mqtt *m)
{
        uint64_t end = zcp_now_ns() + ZCP_NSEC_PER_SEC;

        mosquitto_publish(m->mosq, NULL, m->avail_topic, 7, "offline", (int)m->cfg.qos, true);
        mosquitto_disconnect(m->mosq);
        while (mosquitto_socket(m->mosq) >= 0 && mosquitto_want_write(m->mosq) && zcp_now_ns() < end) {
                struct pollfd p = { .fd = mosquitto_socket(m->mosq), .events = POLLOUT };

                if (poll(&p, 1, 100) > 0 && mosquitto_loop_write(m->mosq, 1) != MOSQ_ERR_SUCCESS)
                        break;
        }
}

static void *net_thread(void *arg)
{
        struct mqtt *m = arg;

        for (;;) {
                struct pollfd pfd[2] = { { .fd = m->wake_fd, .events = POLLIN } };
                uint64_t now = zcp_now_ns(), v;
                int sock, timeout = TICK_MS;

                if (atomic_load(&m->stop)) {
                        bool idle;

                        if (!m->drain_deadline_ns)
                                m->drain_deadline_ns = now + DRAIN_NS;
                        pthread_mutex_lock(&m->lock);
                        idle = queue_len(m) == 0 && atomic_load(&m->inflight) == 0;
                        pthread_mutex_unlock(&m->lock);
                        if (idle || !m->connected || now >= m->drain_deadline_ns)
                                break;
                        timeout = ms_until(now, m->drain_deadline_ns);
                }
                if (!m->have_socket && !atomic_load(&m->stop)) {
                        if (now >= m->next_try_ns)
                                try_connect(m);
                        if (!m->have_socket)
                                timeout = ms_until(now, m->next_try_ns);
                }
                feed(m);
                sock = mosquitto_socket(m->mosq);
                pfd[1].fd = sock;
                pfd[1].events = (short)(POLLIN | (mosquitto_want_write(m->mosq) ? POLLOUT : 0));
                if (poll(pfd, sock >= 0 ? 2 : 1, timeout) < 0 && errno != EINTR) {
                        zcp_err("%s: mqtt: poll: %s", m->stream, strerror(errno));
                        break;
                }
                if (pfd[0].revents & POLLIN)
                        (void)!read(m->wake_fd, &v, sizeof(v));
                if (sock >= 0) {
                        int rc = MOSQ_ERR_SUCCESS;

                        if (pfd[1].revents & (POLLIN | POLLERR | POLLHUP))
                                rc = mosquitto_loop_read(m->mosq, 1);
                        if (rc == MOSQ_ERR_SUCCESS && (pfd[1].revents & POLLOUT))
                                rc = mosquitto_loop_write(m->mosq, 1);
                        if (rc == MOSQ_ERR_SUCCESS)
                                mosquitto_loop_misc(m->mosq);
                }
                if (m->have_socket && mosquitto_socket(m->mosq) < 0)
                        connection_gone(m);
        }
        if (m->connected)
                say_goodbye(m);
        return NULL;
}

/* ---- open / close (main thread) ---- */

/* dst = template with <host> and <stream> replaced. */
static int expand(char *dst, size_t size, const char *tmpl, const char *host, const char *stream)
{
        size_t n = 0;

        while (*tmpl) {
                const char *put = NULL;
                size_t skip = 1, len;

                if (strncmp(tmpl, "<host>", 6) == 0) {
                        put = host;
                        skip = 6;
                } else if (strncmp(tmpl, "<stream>", 8) == 0) {
                        put = stream;
                        skip = 8;
                }
                len = put ? strlen(put) : 1;
                if (n + len >= size)
                        return -ENAMETOOLONG;
                memcpy(dst + n, put ? put : tmpl, len);
                n += len;
                tmpl += skip;
        }
        dst[n] = '\0';
        return 0;
}

/* The first line of output.password_file; a file others may read or write is refused. */
static int read_password(struct mqtt *m)
{
        const char *path = m->cfg.password_file;
        struct stat st;
        ssize_t n;
        int fd, r;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                r = -errno;
                zcp_err("%s: output.password_file %s: %s", m->stream, path, strerror(errno));
                return r;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                zcp_err("%s: output.password_file %s is not a regular file", m->stream, path);
                r = -EINVAL;
                goto out;
        }
        if (st.st_mode & (S_IRWXG | S_IRWXO)) {
                zcp_err("%s: output.password_file %s is open to group or others (mode %04o); "
                        "chmod 600 it (only its owner may read it)",
                        m->stream, path, (unsigned)(st.st_mode & 07777));
                r = -EPERM;
                goto out;
        }
        do
                n = read(fd, m->password, sizeof(m->password) - 1);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                r = -errno;
                zcp_err("%s: output.password_file %s: %s", m->stream, path, strerror(errno));
                goto out;
        }
        m->password[n] = '\0';
        if ((size_t)n == sizeof(m->password) - 1 && !strpbrk(m->password, "\r\n")) {
                zcp_err("%s: output.password_file %s: the password is longer than %zu bytes", m->stream, path,
                        sizeof(m->password) - 2);
                r = -EINVAL;
                goto out;
        }
        m->password[strcspn(m->password, "\r\n")] = '\0';
        if (!m->password[0]) {
                zcp_err("%s: output.password_file %s holds no password (its first line is empty)", m->stream, path);
                r = -EINVAL;
                goto out;
        }
        r = 0;
out:
        close(fd);
        return r;
}

/* A key with a passphrase is refused rather than prompted for on a terminal. */
static int no_passphrase(char *buf, int size, int rwflag, void *userdata)
{
        return 0;
}

static int setup_client(struct mqtt *m)
{
        const struct zcp_mqtt_config *c = &m->cfg;
        int rc;

        m->mosq = mosquitto_new(m->client_id, true, m);
        if (!m->mosq) {
                zcp_err("%s: mqtt: cannot create a client: %s", m->stream, strerror(errno));
                return -ENOMEM;
        }
        mosquitto_connect_callback_set(m->mosq, on_connect);
        mosquitto_publish_callback_set(m->mosq, on_publish);
        mosquitto_log_callback_set(m->mosq, on_log);
        rc = mosquitto_will_set(m->mosq, m->avail_topic, 7, "offline", (int)c->qos, true);
        if (rc == MOSQ_ERR_SUCCESS && c->username[0])
                rc = mosquitto_username_pw_set(m->mosq, c->username, m->password[0] ? m->password : NULL);
        if (rc != MOSQ_ERR_SUCCESS) {
                zcp_err("%s: mqtt: %s", m->stream, mosquitto_strerror(rc));
                return -EINVAL;
        }
        if (c->ca_file[0]) {
                rc = mosquitto_tls_set(m->mosq, c->ca_file, NULL, c->cert_file[0] ? c->cert_file : NULL,
                                       c->key_file[0] ? c->key_file : NULL, no_passphrase);
                if (rc == MOSQ_ERR_SUCCESS)
                        rc = mosquitto_tls_opts_set(m->mosq, 1 /* SSL_VERIFY_PEER */, NULL, NULL);
                if (rc != MOSQ_ERR_SUCCESS) {
                        zcp_err("%s: mqtt: cannot use the TLS files (output.ca_file %s%s%s): %s", m->stream,
                                c->ca_file, c->cert_file[0] ? ", cert_file " : "", c->cert_file,
                                mosquitto_strerror(rc));
                        return -EINVAL;
                }
        }
        return 0;
}

static void mqtt_close(struct zcp_sink_ctx *ctx)
{
        struct mqtt *m = from_ctx(ctx);
        uint64_t left, lost_total;

        if (!m)
                return;
        if (m->thread_started) {
                const uint64_t one = 1;

                atomic_store(&m->stop, true);
                (void)!write(m->wake_fd, &one, sizeof(one));
                pthread_join(m->thread, NULL);
                /* Whatever was not delivered by now never will be. */
                left = queue_len(m) + atomic_exchange(&m->inflight, 0);
                m->head = m->tail;
                lost(m, ZCP_SINK_LOSS_WRITE_ERROR, left);
                update_queued(m);
                lost_total = zcp_sink_stats_lost_total(m->stats);
                zcp_log(lost_total ? ZCP_LOG_WARN : ZCP_LOG_INFO,
                        "%s: mqtt: %" PRIu64 " results delivered, %" PRIu64 " lost (queue_full %" PRIu64
                        ", write_error %" PRIu64 ", too_long %" PRIu64 "), %" PRIu64 " reconnects",
                        m->stream, atomic_load(&m->stats->written), lost_total,
                        atomic_load(&m->stats->lost[ZCP_SINK_LOSS_QUEUE_FULL]),
                        atomic_load(&m->stats->lost[ZCP_SINK_LOSS_WRITE_ERROR]),
                        atomic_load(&m->stats->lost[ZCP_SINK_LOSS_TOO_LONG]), atomic_load(&m->stats->reconnects));
        }
        if (m->mosq)
                mosquitto_destroy(m->mosq);
        if (m->wake_fd >= 0)
                close(m->wake_fd);
        pthread_mutex_destroy(&m->lock);
        explicit_bzero(m->password, sizeof(m->password));
        free(m->slots);
        free(m->lens);
        free(m);
}

static int mqtt_open(const struct zcp_output_config *cfg, struct zcp_sink_stats *stats, struct zcp_sink_ctx **ret_ctx)
{
        const char *stream = cfg->stream;
        struct mqtt *m;
        char name[16];
        int r;

        pthread_once(&lib_once, lib_init);
        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->wake_fd = -1;
        pthread_mutex_init(&m->lock, NULL);
        m->cfg = cfg->mqtt;
        m->stats = stats;
        atomic_store(&stats->error, ENOTCONN);   /* until the broker accepts the connection */
        m->cap = m->cfg.queue;
        m->backoff_ms = BACKOFF_MIN_MS;
        snprintf(m->stream, sizeof(m->stream), "%s", stream);
        if (m->cfg.host_name[0])
                snprintf(m->host, sizeof(m->host), "%s", m->cfg.host_name);
        else if (gethostname(m->host, sizeof(m->host) - 1) < 0 || !m->host[0])
                snprintf(m->host, sizeof(m->host), "localhost");
        if (expand(m->topic, sizeof(m->topic), m->cfg.topic, m->host, stream) < 0 ||
            expand(m->avail_topic, sizeof(m->avail_topic), m->cfg.availability_topic, m->host, stream) < 0 ||
            expand(m->client_id, sizeof(m->client_id), m->cfg.client_id[0] ? m->cfg.client_id : "zcpipe-<host>-<stream>",
                   m->host, stream) < 0) {
                zcp_err("%s: mqtt: a topic or client id is longer than %d bytes once expanded", stream, TOPIC_MAX - 1);
                r = -ENAMETOOLONG;
                goto fail;
        }
        if (m->cfg.password_file[0] && (r = read_password(m)) < 0)
                goto fail;
        r = setup_client(m);
        if (r < 0)
                goto fail;
        m->slots = malloc((size_t)m->cap * ZCP_MQTT_MESSAGE_MAX);
        m->lens = calloc(m->cap, sizeof(*m->lens));
        if (!m->slots || !m->lens) {
                zcp_err("%s: mqtt: cannot allocate a queue of %u results", stream, m->cap);
                r = -ENOMEM;
                goto fail;
        }
        m->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (m->wake_fd < 0) {
                r = -errno;
                goto fail;
        }
        r = -pthread_create(&m->thread, NULL, net_thread, m);
        if (r < 0)
                goto fail;
        m->thread_started = true;
        snprintf(name, sizeof(name), "zcp-mqtt");
        pthread_setname_np(m->thread, name);
        *ret_ctx = (struct zcp_sink_ctx *)m;
        return 0;
fail:
        mqtt_close((struct zcp_sink_ctx *)m);
        return r;
}

const struct zcp_sink_ops zcp_sink_mqtt = { "mqtt", mqtt_open, mqtt_write, mqtt_close, ZCP_MQTT_MESSAGE_MAX + 1 };
