/* SPDX-License-Identifier: MIT */
/*
 * Results sinks (sink.h).
 *
 * What comes in: whole JSON lines from the stream's publish thread.
 * What goes out: the same lines, whole, to stdout, a file or the clients of a
 * unix socket. What blocks: nothing on the publish thread. Each sink (but
 * `none`) owns a bounded queue of whole lines and a writer thread
 * (zcp-out-<type>) that drains it:
 *
 *   publish --write()--> [ queue: QUEUE_BYTES of lines, mutex held for a memcpy ]
 *                              --> writer thread --> fd / clients
 *
 * write() copies the line into the queue and returns; when the queue is full
 * the oldest queued lines are dropped to make room (counted `queue_full`,
 * DESIGN.md: "dropped oldest-first"), so a slow or stopped reader costs
 * results, never frames. The writer takes a batch of whole lines out of the
 * queue and writes it without the lock:
 *
 *   - regular files (file sink, stdout redirected to a file): blocking
 *     write(2) from the writer thread (a slow disk stalls only the writer).
 *     On a short write followed by an error (disk full, RLIMIT_FSIZE, EIO)
 *     the torn tail of the last line is truncated back, so the file only ever
 *     holds whole lines and the next line is never glued to a torn one; the
 *     lines not written are counted `write_error`.
 *   - pipes, FIFOs, terminals on stdout: a non-blocking open file description
 *     of our own (reopened through /proc/self/fd/1, so the O_NONBLOCK flag
 *     never leaks to the shell sharing the terminal) and poll(2); whole lines
 *     are written in chunks of at most PIPE_BUF bytes, which a pipe takes
 *     entirely or not at all; a longer line that was started is finished
 *     before anything else (the writer is the only writer). A reader that went away
 *     (EPIPE) ends the process like SIGTERM does (`zcpipe ... | head -1`
 *     ends), the lines left are `write_error`.
 *   - sockets on stdout: send(MSG_DONTWAIT), same as pipes.
 *   - unix: the writer accepts clients and sends each line with
 *     MSG_DONTWAIT to every client; a client that cannot take a whole line
 *     is disconnected (never waited for). The line counts as written once
 *     every client then connected took it, at least one; else it is lost:
 *     `no_reader` when none was connected, `slow_reader` when a client was
 *     cut before it got the line whole. What a cut client's socket buffer
 *     holds stays readable for it (a torn last line, then the end).
 *   - file: before each batch the open file's link count is checked, and
 *     once a second the path's identity: a file deleted or moved away
 *     (its directory removed, logrotate without copytruncate) is made
 *     again (counted in `reconnects`); while it cannot be (its directory is
 *     gone) the lines are lost as `write_error`, `error` says why and the
 *     making is tried again every second.
 *
 * A line counts as `written` once all of it reached its destination, `lost`
 * once it never will; `queued` is the gauge in between. At close the writer
 * gets CLOSE_GRACE_NS to drain the queue; what is left then is
 * `write_error` (a stopped reader never holds up SIGTERM).
 *
 * The unix socket belongs to the instance that made it: `<path>.lock` is
 * flock()ed for as long as the socket is open, an existing socket is
 * replaced only when that lock is free and nobody answers connect() on it,
 * and close() unlinks the socket only while it is still the one this sink
 * bound (same inode).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "output/sink.h"
#if HAVE_MQTT
#include "output/mqtt.h"
#endif

#define UNIX_MAX_CLIENTS 16
#define QUEUE_BYTES      (256u * 1024)                /* ~400 lines of top-5 results */
#define BATCH_BYTES      (64u * 1024)                 /* one write(2) at most */
#define CLOSE_GRACE_NS   (500 * ZCP_NSEC_PER_MSEC)    /* drain time at close */
#define LOG_EVERY_NS     (10 * ZCP_NSEC_PER_SEC)

enum out_mode { OUT_REGULAR, OUT_NONBLOCK, OUT_SOCKET, OUT_UNIX };

struct zcp_sink_ctx {
        const char *type;          /* "stdout", "file", "unix", "none" */
        struct zcp_sink_stats *stats;
        enum out_mode mode;
        int fd;                    /* stdout/file: where lines go; unix: the listening socket */
        bool own_fd;
        bool stop_on_epipe;        /* stdout: the reader went away = stop the process */
        int clients[UNIX_MAX_CLIENTS];
        char path[ZCP_PATH_MAX];   /* for messages; unix: the socket to unlink */
        char lock_path[ZCP_PATH_MAX + 8];
        int lock_fd;
        dev_t sock_dev;            /* the socket file this sink bound */
        ino_t sock_ino;

        /* The queue: a byte ring of records [uint32_t len][len bytes], under `lock`. */
        pthread_mutex_t lock;
        uint8_t *q;
        size_t q_head, q_used;     /* head: offset of the oldest record */
        uint64_t q_lines;
        bool writer_waiting;       /* the writer sleeps on `wake_fd` */
        bool stopping;
        uint64_t deadline_ns;      /* set with stopping */

        int wake_fd;               /* eventfd: a line arrived, or close */
        pthread_t writer;
        bool writer_started;
        char *batch;               /* writer thread */
        uint32_t batch_lines;
        bool gone;                 /* writer: the destination will never take a line again */
        bool need_newline;         /* writer: a torn tail could not be truncated */
        bool remake;               /* file: made again when deleted or moved away */
        uint64_t path_checked_ns;  /* writer: when the path's identity was last compared */
        uint64_t remake_tried_ns;  /* writer: the last try to make a file that could not be made */
};

/* ---- the queue ---- */

static void ring_copy_in(struct zcp_sink_ctx *c, size_t at, const void *src, size_t n)
{
        size_t first;

        at %= QUEUE_BYTES;
        first = n < QUEUE_BYTES - at ? n : QUEUE_BYTES - at;
        memcpy(c->q + at, src, first);
        memcpy(c->q, (const uint8_t *)src + first, n - first);
}

static void ring_copy_out(const struct zcp_sink_ctx *c, size_t at, void *dst, size_t n)
{
        size_t first;

        at %= QUEUE_BYTES;
        first = n < QUEUE_BYTES - at ? n : QUEUE_BYTES - at;
        memcpy(dst, c->q + at, first);
        memcpy((uint8_t *)dst + first, c->q, n - first);
}

/* Under lock. Removes the oldest record; returns its length. */
static uint32_t ring_pop(struct zcp_sink_ctx *c, char *dst)
{
        uint32_t len;

        ring_copy_out(c, c->q_head, &len, sizeof(len));
        if (dst)
                ring_copy_out(c, c->q_head + sizeof(len), dst, len);
        c->q_head = (c->q_head + sizeof(len) + len) % QUEUE_BYTES;
        c->q_used -= sizeof(len) + len;
        c->q_lines--;
        return len;
}

/* Under lock. The length of the oldest record (the queue is not empty). */
static uint32_t ring_peek_len(const struct zcp_sink_ctx *c)
{
        uint32_t len;

        ring_copy_out(c, c->q_head, &len, sizeof(len));
        return len;
}

static int queue_write(struct zcp_sink_ctx *c, const char *line, size_t len)
{
        size_t need = sizeof(uint32_t) + len;
        uint64_t dropped = 0;
        bool wake;

        if (len == 0 || len > BATCH_BYTES || line[len - 1] != '\n') {
                zcp_sink_stats_lose(c->stats, ZCP_SINK_LOSS_TOO_LONG);
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_EVERY_NS, "output %s: a line of %zu bytes is not written (at most %u)",
                                    c->path, len, BATCH_BYTES);
                return -EMSGSIZE;
        }
        pthread_mutex_lock(&c->lock);
        while (QUEUE_BYTES - c->q_used < need) {
                ring_pop(c, NULL);
                dropped++;
        }
        {
                uint32_t n32 = (uint32_t)len;

                ring_copy_in(c, c->q_head + c->q_used, &n32, sizeof(n32));
                ring_copy_in(c, c->q_head + c->q_used + sizeof(n32), line, len);
        }
        c->q_used += need;
        c->q_lines++;
        /* The gauge moves under the lock, so the writer never takes it below zero. */
        if (dropped) {
                atomic_fetch_add_explicit(&c->stats->lost[ZCP_SINK_LOSS_QUEUE_FULL], dropped, memory_order_relaxed);
                atomic_fetch_sub_explicit(&c->stats->queued, dropped, memory_order_relaxed);
        }
        atomic_fetch_add_explicit(&c->stats->queued, 1, memory_order_relaxed);
        wake = c->writer_waiting;
        c->writer_waiting = false;
        pthread_mutex_unlock(&c->lock);

        if (dropped)
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_EVERY_NS,
                                    "output %s: the reader does not keep up, dropping the oldest queued lines (%llu so far)",
                                    c->path,
                                    (unsigned long long)atomic_load(&c->stats->lost[ZCP_SINK_LOSS_QUEUE_FULL]));
        if (wake) {
                uint64_t one = 1;

                if (write(c->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
                        return -errno;
        }
        return 0;
}

/* ---- the writer thread ---- */

static void count_written(struct zcp_sink_ctx *c, uint64_t n)
{
        atomic_fetch_add_explicit(&c->stats->written, n, memory_order_relaxed);
        atomic_fetch_sub_explicit(&c->stats->queued, n, memory_order_relaxed);
}

static void count_lost_as(struct zcp_sink_ctx *c, enum zcp_sink_loss why, uint64_t n)
{
        atomic_fetch_add_explicit(&c->stats->lost[why], n, memory_order_relaxed);
        atomic_fetch_sub_explicit(&c->stats->queued, n, memory_order_relaxed);
}

static void count_lost(struct zcp_sink_ctx *c, uint64_t n)
{
        count_lost_as(c, ZCP_SINK_LOSS_WRITE_ERROR, n);
}

/* Whether results leave: 0, or why not (/healthz); each change is said once. */
static void set_error(struct zcp_sink_ctx *c, int err)
{
        int was = atomic_exchange(&c->stats->error, err);

        if (was && !err)
                zcp_info("output %s: results are written again", c->path);
}

static void drain_wake(struct zcp_sink_ctx *c)
{
        uint64_t v;

        if (read(c->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_EVERY_NS, "output %s: eventfd: %s", c->path, strerror(errno));
}

static uint64_t remaining_ms(const struct zcp_sink_ctx *c)
{
        uint64_t now = zcp_now_ns();

        return now >= c->deadline_ns ? 0 : (c->deadline_ns - now) / ZCP_NSEC_PER_MSEC + 1;
}

/*
 * Takes a batch of whole lines out of the queue into c->batch. Sleeps while
 * the queue is empty. Returns its length, 0 when stopping with nothing left.
 */
static size_t take_batch(struct zcp_sink_ctx *c)
{
        size_t len = 0;

        pthread_mutex_lock(&c->lock);
        while (c->q_lines == 0 && !c->stopping) {
                struct pollfd p = { .fd = c->wake_fd, .events = POLLIN };

                c->writer_waiting = true;
                pthread_mutex_unlock(&c->lock);
                while (poll(&p, 1, -1) < 0 && errno == EINTR)
                        ;
                drain_wake(c);
                pthread_mutex_lock(&c->lock);
        }
        c->batch_lines = 0;
        while (c->q_lines > 0 && len + ring_peek_len(c) <= BATCH_BYTES) {
                len += ring_pop(c, c->batch + len);
                c->batch_lines++;
        }
        pthread_mutex_unlock(&c->lock);
        return len;
}

static bool stopping(struct zcp_sink_ctx *c)
{
        bool s;

        pthread_mutex_lock(&c->lock);
        s = c->stopping;
        pthread_mutex_unlock(&c->lock);
        return s;
}

/*
 * Waits until fd is writable, or the close deadline passed (false). A
 * stopped reader keeps the writer here; close() wakes it through wake_fd.
 */
static bool wait_writable(struct zcp_sink_ctx *c)
{
        for (;;) {
                struct pollfd p[2] = { { .fd = c->fd, .events = POLLOUT }, { .fd = c->wake_fd, .events = POLLIN } };
                int timeout = stopping(c) ? (int)remaining_ms(c) : -1;
                int n;

                if (timeout == 0)
                        return false;
                n = poll(p, 2, timeout);
                if (n < 0 && errno != EINTR)
                        return false;
                if (n > 0 && (p[1].revents & POLLIN))
                        drain_wake(c);
                if (n > 0 && (p[0].revents & (POLLOUT | POLLERR | POLLHUP)))
                        return true;
        }
}

static ssize_t out_write(struct zcp_sink_ctx *c, const char *p, size_t len)
{
        if (c->mode == OUT_SOCKET)
                return send(c->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        return write(c->fd, p, len);
}

/* Counts the whole lines in p[0..n) and the bytes after the last '\n'. */
static uint64_t whole_lines(const char *p, size_t n, size_t *ret_torn)
{
        uint64_t lines = 0;
        size_t last = 0;

        for (size_t i = 0; i < n; i++)
                if (p[i] == '\n') {
                        lines++;
                        last = i + 1;
                }
        *ret_torn = n - last;
        return lines;
}

/* A regular file: cut a torn last line back off, so nothing is glued to it. */
static void truncate_torn(struct zcp_sink_ctx *c, size_t torn)
{
        struct stat st;
        off_t end;

        if (torn == 0)
                return;
        end = lseek(c->fd, 0, SEEK_CUR);
        /* Only while the file ends where our write did (nobody appended since). */
        if (end >= (off_t)torn && fstat(c->fd, &st) == 0 && st.st_size == end && ftruncate(c->fd, end - (off_t)torn) == 0 &&
            lseek(c->fd, end - (off_t)torn, SEEK_SET) >= 0)
                return;
        ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, LOG_EVERY_NS,
                            "output %s: cannot cut back a torn line (%s): the next line starts on a line of its own",
                            c->path, strerror(errno));
        c->need_newline = true;
}

/*
 * A file output: true when c->fd is the file at c->path, making it again if
 * it was deleted or moved away. False while it cannot be made (the lines of
 * the batch are then lost); tried again at most once a second.
 */
static bool file_ready(struct zcp_sink_ctx *c)
{
        uint64_t now = zcp_now_ns();
        struct stat st, at;
        bool gone = c->fd < 0;
        int fd;

        if (!gone && fstat(c->fd, &st) == 0) {
                gone = st.st_nlink == 0;
                if (!gone && now - c->path_checked_ns >= ZCP_NSEC_PER_SEC) {
                        c->path_checked_ns = now;
                        gone = stat(c->path, &at) != 0 || at.st_dev != st.st_dev || at.st_ino != st.st_ino;
                }
        }
        if (!gone)
                return true;
        if (c->fd < 0 && now - c->remake_tried_ns < ZCP_NSEC_PER_SEC)
                return false;
        c->remake_tried_ns = now;
        if (c->fd >= 0)
                zcp_warn("output %s: the file was deleted or moved away: making it again", c->path);
        fd = open(c->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0644);
        if (fd < 0) {
                int err = errno;

                if (atomic_load(&c->stats->error) != err)
                        zcp_err("output %s: cannot make it again (%s): results are lost, and counted, until it can be",
                                c->path, strerror(err));
                set_error(c, err);
                if (c->fd >= 0)
                        close(c->fd);
                c->fd = -1;
                return false;
        }
        if (c->fd >= 0)
                close(c->fd);
        c->fd = fd;
        c->need_newline = false;
        c->path_checked_ns = now;
        atomic_fetch_add_explicit(&c->stats->reconnects, 1, memory_order_relaxed);
        set_error(c, 0);
        zcp_info("output %s: made again (%llu times so far)", c->path,
                 (unsigned long long)atomic_load(&c->stats->reconnects));
        return true;
}

static void on_gone(struct zcp_sink_ctx *c, int err)
{
        c->gone = true;
        set_error(c, err);
        if (err == EPIPE && c->stop_on_epipe) {
                zcp_warn("output %s: the reader went away: stopping as on SIGTERM", c->path);
                kill(getpid(), SIGTERM);
        } else {
                zcp_err("output %s: cannot write any more (%s): results are counted as lost", c->path, strerror(err));
        }
}

/*
 * How much of batch[done..len) to hand to one write: a regular file takes it
 * all; a pipe takes whole lines of at most PIPE_BUF bytes together, which a
 * non-blocking pipe writes entirely or not at all (never a torn line left
 * behind for a reader that stopped). A longer line goes alone.
 */
static size_t chunk(const struct zcp_sink_ctx *c, size_t done, size_t len)
{
        size_t end = 0;

        if (c->mode == OUT_REGULAR)
                return len - done;
        for (size_t i = done; i < len; i++) {
                if (c->batch[i] != '\n')
                        continue;
                if (end && i + 1 - done > PIPE_BUF)
                        break;
                end = i + 1;
        }
        return (end ? end : len) - done;
}

/* Writes one batch of whole lines to fd; counts every line written or lost. */
static void write_batch(struct zcp_sink_ctx *c, size_t len)
{
        size_t done = 0, torn;
        uint64_t lines;
        int err = 0;

        if (c->gone || (c->remake && !file_ready(c))) {
                count_lost(c, c->batch_lines);
                return;
        }
        if (c->need_newline) {
                if (out_write(c, "\n", 1) == 1)
                        c->need_newline = false;
        }
        while (done < len) {
                ssize_t n = out_write(c, c->batch + done, chunk(c, done, len));

                if (n > 0) {
                        done += (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && c->mode != OUT_REGULAR) {
                        if (wait_writable(c))
                                continue;
                        err = ETIMEDOUT;
                        break;
                }
                err = n < 0 ? errno : EIO;
                break;
        }
        lines = whole_lines(c->batch, done, &torn);
        count_written(c, lines);
        if (done == len) {
                set_error(c, 0);
                return;
        }
        count_lost(c, c->batch_lines - lines);
        if (c->mode == OUT_REGULAR)
                truncate_torn(c, torn);
        else if (torn)
                c->need_newline = true;   /* a pipe reader saw a torn line: end it before the next one */
        if (err == EPIPE || err == ECONNRESET || err == ETIMEDOUT) {
                if (err != ETIMEDOUT)
                        on_gone(c, err);
        } else {
                set_error(c, err);
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, LOG_EVERY_NS, "output %s: write failed: %s (%llu lines lost so far)",
                                    c->path, strerror(err),
                                    (unsigned long long)atomic_load(&c->stats->lost[ZCP_SINK_LOSS_WRITE_ERROR]));
        }
}

static void unix_accept(struct zcp_sink_ctx *c)
{
        for (;;) {
                int fd = accept4(c->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                int i;

                if (fd < 0)
                        return;
                for (i = 0; i < UNIX_MAX_CLIENTS && c->clients[i] >= 0; i++)
                        ;
                if (i == UNIX_MAX_CLIENTS) {
                        ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_EVERY_NS, "output %s has %d clients already, refusing one",
                                            c->path, UNIX_MAX_CLIENTS);
                        close(fd);
                        continue;
                }
                c->clients[i] = fd;
        }
}

/*
 * The batch to every client: a client that cannot take all of it at once
 * goes (never waited for). Counts each line once: written when every client
 * connected took it whole (at least one), else lost as no_reader or
 * slow_reader.
 */
static void unix_send_batch(struct zcp_sink_ctx *c, size_t len)
{
        size_t least = len, torn;
        uint32_t clients = 0;
        uint64_t lines;

        unix_accept(c);
        for (int i = 0; i < UNIX_MAX_CLIENTS; i++) {
                ssize_t n;

                if (c->clients[i] < 0)
                        continue;
                clients++;
                do
                        n = send(c->clients[i], c->batch, len, MSG_DONTWAIT | MSG_NOSIGNAL);
                while (n < 0 && errno == EINTR);
                if (n != (ssize_t)len) {
                        /* Gone, or too slow to take the lines: never wait for a reader. */
                        ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, LOG_EVERY_NS, "output %s: dropping a client (%s)", c->path,
                                            n < 0 ? strerror(errno) : "too slow");
                        close(c->clients[i]);
                        c->clients[i] = -1;
                        if ((size_t)(n < 0 ? 0 : n) < least)
                                least = n < 0 ? 0 : (size_t)n;
                }
        }
        if (clients == 0) {
                count_lost_as(c, ZCP_SINK_LOSS_NO_READER, c->batch_lines);
                return;
        }
        lines = whole_lines(c->batch, least, &torn);
        count_written(c, lines);
        count_lost_as(c, ZCP_SINK_LOSS_SLOW_READER, c->batch_lines - lines);
}

static void *writer_thread(void *arg)
{
        struct zcp_sink_ctx *c = arg;

        for (;;) {
                size_t len = take_batch(c);

                if (len == 0)
                        break;
                if (c->mode == OUT_UNIX)
                        unix_send_batch(c, len);
                else
                        write_batch(c, len);
                if (stopping(c) && remaining_ms(c) == 0)
                        break;
        }
        /* Past the deadline: what is still queued will never be written. */
        pthread_mutex_lock(&c->lock);
        count_lost(c, c->q_lines);
        while (c->q_lines)
                ring_pop(c, NULL);
        pthread_mutex_unlock(&c->lock);
        return NULL;
}

/* ---- open / close ---- */

static void sink_close(struct zcp_sink_ctx *c)
{
        struct stat st;

        if (!c)
                return;
        if (c->writer_started) {
                uint64_t one = 1;

                pthread_mutex_lock(&c->lock);
                c->stopping = true;
                c->deadline_ns = zcp_now_ns() + CLOSE_GRACE_NS;
                pthread_mutex_unlock(&c->lock);
                if (write(c->wake_fd, &one, sizeof(one)) < 0)
                        zcp_warn("output %s: cannot wake the writer: %s", c->path, strerror(errno));
                pthread_join(c->writer, NULL);
                if (atomic_load(&c->stats->lost[ZCP_SINK_LOSS_WRITE_ERROR]) ||
                    atomic_load(&c->stats->lost[ZCP_SINK_LOSS_QUEUE_FULL]))
                        zcp_warn("output %s: %llu lines written, %llu lost (%llu queue_full, %llu write_error)",
                                 c->path, (unsigned long long)atomic_load(&c->stats->written),
                                 (unsigned long long)zcp_sink_stats_lost_total(c->stats),
                                 (unsigned long long)atomic_load(&c->stats->lost[ZCP_SINK_LOSS_QUEUE_FULL]),
                                 (unsigned long long)atomic_load(&c->stats->lost[ZCP_SINK_LOSS_WRITE_ERROR]));
        }
        for (int i = 0; i < UNIX_MAX_CLIENTS; i++)
                if (c->clients[i] >= 0)
                        close(c->clients[i]);
        if (c->own_fd && c->fd >= 0)
                close(c->fd);
        /* Only the socket this sink bound, never one another instance put there since. */
        if (c->mode == OUT_UNIX && c->sock_ino && lstat(c->path, &st) == 0 && st.st_dev == c->sock_dev &&
            st.st_ino == c->sock_ino)
                unlink(c->path);
        if (c->lock_fd >= 0) {
                unlink(c->lock_path);
                close(c->lock_fd);
        }
        if (c->wake_fd >= 0)
                close(c->wake_fd);
        if (c->q)
                pthread_mutex_destroy(&c->lock);
        free(c->q);
        free(c->batch);
        free(c);
}

static struct zcp_sink_ctx *sink_alloc(const struct zcp_output_config *cfg, struct zcp_sink_stats *stats)
{
        struct zcp_sink_ctx *c = calloc(1, sizeof(*c));

        if (!c)
                return NULL;
        c->type = zcp_output_type_names[cfg->type];
        c->stats = stats;
        c->fd = -1;
        c->lock_fd = -1;
        c->wake_fd = -1;
        for (int i = 0; i < UNIX_MAX_CLIENTS; i++)
                c->clients[i] = -1;
        snprintf(c->path, sizeof(c->path), "%s", cfg->type == ZCP_OUTPUT_STDOUT ? "stdout" : cfg->path);
        return c;
}

/* The queue and its writer thread; on failure the caller frees c. */
static int start_writer(struct zcp_sink_ctx *c)
{
        char name[16];
        int r;

        c->q = malloc(QUEUE_BYTES);
        c->batch = malloc(BATCH_BYTES);
        if (!c->q || !c->batch)
                return -ENOMEM;
        pthread_mutex_init(&c->lock, NULL);
        c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (c->wake_fd < 0)
                return -errno;
        r = -pthread_create(&c->writer, NULL, writer_thread, c);
        if (r < 0) {
                zcp_err("output %s: cannot start the writer thread: %s", c->path, zcp_strerror(r));
                return r;
        }
        c->writer_started = true;
        snprintf(name, sizeof(name), "zcp-out-%.7s", c->type);
        pthread_setname_np(c->writer, name);
        return 0;
}

static mode_t st_mode_of(int fd)
{
        struct stat st;

        return fstat(fd, &st) == 0 ? st.st_mode : 0;
}

/* Decides how lines reach an fd we were given or opened. */
static int setup_fd_mode(struct zcp_sink_ctx *c)
{
        struct stat st;

        if (fstat(c->fd, &st) < 0)
                return -errno;
        if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
                c->mode = OUT_REGULAR;
        } else if (S_ISSOCK(st.st_mode)) {
                c->mode = OUT_SOCKET;
        } else if (!c->own_fd) {
                /* A pipe, FIFO or terminal we share: our own non-blocking open file description. */
                char proc[64];
                int fd;

                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", c->fd);
                fd = open(proc, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
                if (fd < 0) {
                        zcp_warn("output %s: cannot reopen it non-blocking (%s): the shared descriptor is set "
                                 "O_NONBLOCK instead",
                                 c->path, strerror(errno));
                        if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) < 0)
                                return -errno;
                } else {
                        c->fd = fd;
                        c->own_fd = true;
                }
                c->mode = OUT_NONBLOCK;
        } else {
                if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) < 0)
                        return -errno;
                c->mode = OUT_NONBLOCK;
        }
        return 0;
}

static int stdout_open(const struct zcp_output_config *cfg, struct zcp_sink_stats *stats,
                       struct zcp_sink_ctx **ret_ctx)
{
        struct zcp_sink_ctx *c = sink_alloc(cfg, stats);
        struct stat st;
        int r;

        if (!c)
                return -ENOMEM;
        c->fd = STDOUT_FILENO;
        atomic_store(&stats->error, 0);
        /*
         * `zcpipe ... | head -1`: a pipe whose reader left ends the run. A
         * socket (the journal's stdout stream under systemd) does not: a
         * service must not stop, with exit 0, because a logger went away.
         */
        c->stop_on_epipe = fstat(STDOUT_FILENO, &st) == 0 && S_ISFIFO(st.st_mode);
        r = setup_fd_mode(c);
        if (r < 0) {
                zcp_err("output: stdout is not usable: %s", zcp_strerror(r));
                goto fail;
        }
        r = start_writer(c);
        if (r < 0)
                goto fail;
        *ret_ctx = c;
        return 0;
fail:
        sink_close(c);
        return r;
}

static int file_open(const struct zcp_output_config *cfg, struct zcp_sink_stats *stats,
                     struct zcp_sink_ctx **ret_ctx)
{
        struct zcp_sink_ctx *c = sink_alloc(cfg, stats);
        int r;

        if (!c)
                return -ENOMEM;
        /* O_NONBLOCK: a FIFO without a reader fails here (ENXIO) instead of blocking start-up. */
        c->fd = open(cfg->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
        if (c->fd < 0) {
                r = -errno;
                zcp_err("output: cannot open %s: %s", cfg->path, strerror(errno));
                goto fail;
        }
        c->own_fd = true;
        atomic_store(&stats->error, 0);
        r = setup_fd_mode(c);
        if (r == 0 && c->mode == OUT_REGULAR) {
                r = fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK) < 0 ? -errno : 0;
                c->remake = S_ISREG(st_mode_of(c->fd));
                c->path_checked_ns = zcp_now_ns();
        }
        if (r == 0)
                r = start_writer(c);
        if (r < 0)
                goto fail;
        *ret_ctx = c;
        return 0;
fail:
        sink_close(c);
        return r;
}

/*
 * Takes `<path>.lock` for this instance: refused (-EADDRINUSE) while another
 * sink, in this process or another, holds it.
 */
static int unix_lock(struct zcp_sink_ctx *c)
{
        for (int tries = 0; tries < 8; tries++) {
                struct stat a, b;
                int fd = open(c->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

                if (fd < 0) {
                        int r = -errno;
                        zcp_err("output: cannot create the lock %s: %s", c->lock_path, strerror(errno));
                        return r;
                }
                if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                        int r = errno == EWOULDBLOCK ? -EADDRINUSE : -errno;
                        zcp_err("output: unix socket %s belongs to another running zcpipe stream (%s is locked)",
                                c->path, c->lock_path);
                        close(fd);
                        return r;
                }
                /* The lock file may have been unlinked by its previous owner meanwhile: lock the one in place. */
                if (fstat(fd, &a) == 0 && stat(c->lock_path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
                        c->lock_fd = fd;
                        return 0;
                }
                close(fd);
        }
        return -EAGAIN;
}

static int unix_open(const struct zcp_output_config *cfg, struct zcp_sink_stats *stats,
                     struct zcp_sink_ctx **ret_ctx)
{
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        struct zcp_sink_ctx *c;
        struct stat st;
        int r;

        if (strlen(cfg->path) >= sizeof(addr.sun_path)) {
                zcp_err("output: unix socket path too long (max %zu): %s", sizeof(addr.sun_path) - 1, cfg->path);
                return -ENAMETOOLONG;
        }
        c = sink_alloc(cfg, stats);
        if (!c)
                return -ENOMEM;
        c->mode = OUT_UNIX;
        atomic_store(&stats->error, 0);
        strcpy(addr.sun_path, cfg->path);
        snprintf(c->lock_path, sizeof(c->lock_path), "%s.lock", cfg->path);
        r = unix_lock(c);
        if (r < 0)
                goto fail;
        /* A stale socket from a previous run is replaced; a live one or anything else is not touched. */
        if (lstat(cfg->path, &st) == 0) {
                int probe;

                if (!S_ISSOCK(st.st_mode)) {
                        zcp_err("output: %s exists and is not a socket", cfg->path);
                        r = -EEXIST;
                        goto fail;
                }
                probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
                        zcp_err("output: unix socket %s is in use by another process: not replacing it", cfg->path);
                        close(probe);
                        r = -EADDRINUSE;
                        goto fail;
                }
                if (probe >= 0)
                        close(probe);
                unlink(cfg->path);
        }
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0 || bind(c->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(c->fd, 8) < 0) {
                r = -errno;
                zcp_err("output: cannot listen on unix socket %s: %s", cfg->path, strerror(errno));
                goto fail;
        }
        c->own_fd = true;
        if (lstat(cfg->path, &st) == 0) {
                c->sock_dev = st.st_dev;
                c->sock_ino = st.st_ino;
        }
        r = start_writer(c);
        if (r < 0)
                goto fail;
        *ret_ctx = c;
        return 0;
fail:
        sink_close(c);
        return r;
}

static int none_open(const struct zcp_output_config *cfg, struct zcp_sink_stats *stats,
                     struct zcp_sink_ctx **ret_ctx)
{
        struct zcp_sink_ctx *c = sink_alloc(cfg, stats);

        if (!c)
                return -ENOMEM;
        *ret_ctx = c;
        return 0;
}

/* `none` discards by request: every line counts as written. */
static int none_write(struct zcp_sink_ctx *c, const char *line, size_t len)
{
        atomic_fetch_add_explicit(&c->stats->written, 1, memory_order_relaxed);
        return 0;
}

static const struct zcp_sink_ops sink_stdout = { "stdout", stdout_open, queue_write, sink_close, 0 };
static const struct zcp_sink_ops sink_file = { "file", file_open, queue_write, sink_close, 0 };
static const struct zcp_sink_ops sink_unix = { "unix", unix_open, queue_write, sink_close, 0 };
static const struct zcp_sink_ops sink_none = { "none", none_open, none_write, sink_close, 0 };

static const struct zcp_sink_ops *const sinks[ZCP_OUTPUT_TYPE_COUNT] = {
        [ZCP_OUTPUT_STDOUT] = &sink_stdout,
        [ZCP_OUTPUT_FILE] = &sink_file,
        [ZCP_OUTPUT_UNIX] = &sink_unix,
        [ZCP_OUTPUT_NONE] = &sink_none,
#if HAVE_MQTT
        [ZCP_OUTPUT_MQTT] = &zcp_sink_mqtt,
#endif
};

const struct zcp_sink_ops *zcp_sink_find(enum zcp_output_type type)
{
        return (unsigned)type < ZCP_OUTPUT_TYPE_COUNT ? sinks[type] : NULL;
}
