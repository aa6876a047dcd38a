/* SPDX-License-Identifier: MIT */
/*
 * Per-frame JSON lines log (framelog.h).
 *
 * In:  zcp_framelog_write() from the publish thread of every stream: the
 *      line is formatted on the stack and copied into a byte ring under a
 *      mutex held for the copy only. A full ring drops the line (counted).
 * Out: the writer thread copies whole lines out of the ring into its own
 *      staging buffer, then appends them to the file with write(2) outside
 *      the lock, rotating the file at line boundaries before it would pass
 *      max_bytes. It wakes when the ring is a quarter full or every 100 ms.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/json.h"
#include "core/err.h"
#include "core/log.h"
#include "output/framelog.h"

#define RING_BYTES  (1u << 20)    /* ~2000 lines of slack for the writer */
#define STAGE_BYTES (64u << 10)
#define LINE_BYTES  1536          /* longest line: 63-byte name escaped 6x + 10 timestamps */
#define WAKE_NS     (100 * ZCP_NSEC_PER_MSEC)

struct zcp_framelog {
        char path[ZCP_PATH_MAX];
        uint64_t max_bytes;
        uint32_t keep;

        pthread_mutex_t lock;
        pthread_cond_t wake;       /* writer waits here */
        char *ring;                /* RING_BYTES */
        uint64_t head, tail;       /* bytes ever put / taken; head - tail bytes buffered */
        bool stop;
        bool writer_waiting;
        _Atomic uint64_t lost;
        _Atomic uint64_t written;         /* lines written whole */
        _Atomic uint64_t rotate_failed;   /* rotations that could not rename the live file */

        /* Writer thread only. */
        pthread_t writer;
        bool writer_started;
        char *stage;               /* STAGE_BYTES */
        int fd;
        uint64_t size;             /* bytes in the current file */
        uint64_t lost_reported;
};

/* The stream name, escaped (core/json.h); cut, never overrunning, if it does not fit before end. */
static void put_json_name(char **p, char *end, const char *s)
{
        size_t room = (size_t)(end - *p), n = zcp_json_escape(*p, room, s);

        *p += n < room ? n : room - 1;
}

int zcp_framelog_format(char *buf, size_t size, const char *stream, const struct zcp_frame *f)
{
        char *p = buf, *end = buf + size;
        bool dropped = f->flags & ZCP_FRAME_DROPPED;
        int n;

        if (size < 16)
                return -ENOSPC;
        memcpy(p, "{\"stream\":\"", 11);
        p += 11;
        put_json_name(&p, end, stream);
        n = snprintf(p, (size_t)(end - p), "\",\"seq\":%" PRIu64 ",\"pts_ns\":%" PRIu64 ",\"dropped\":%s,\"drop_reason\":",
                     f->seq, f->pts_ns, dropped ? "true" : "false");
        if (n < 0 || n >= end - p)
                return -ENOSPC;
        p += n;
        if (dropped && (unsigned)f->drop_reason < ZCP_DROP_REASON_COUNT)
                n = snprintf(p, (size_t)(end - p), "\"%s\",\"t\":{", zcp_drop_reason_names[f->drop_reason]);
        else
                n = snprintf(p, (size_t)(end - p), "null,\"t\":{");
        if (n < 0 || n >= end - p)
                return -ENOSPC;
        p += n;
        for (int i = 0; i < ZCP_TS_COUNT; i++) {
                if (f->t[i])
                        n = snprintf(p, (size_t)(end - p), "%s\"%s\":%" PRIu64, i ? "," : "", zcp_ts_names[i], f->t[i]);
                else
                        n = snprintf(p, (size_t)(end - p), "%s\"%s\":null", i ? "," : "", zcp_ts_names[i]);
                if (n < 0 || n >= end - p)
                        return -ENOSPC;
                p += n;
        }
        if (!dropped && f->t[ZCP_TS_PUBLISH_END] >= f->t[ZCP_TS_CAPTURE] && f->t[ZCP_TS_CAPTURE])
                n = snprintf(p, (size_t)(end - p), "},\"e2e_ns\":%" PRIu64 "}\n",
                             f->t[ZCP_TS_PUBLISH_END] - f->t[ZCP_TS_CAPTURE]);
        else
                n = snprintf(p, (size_t)(end - p), "},\"e2e_ns\":null}\n");
        if (n < 0 || n >= end - p)
                return -ENOSPC;
        p += n;
        return (int)(p - buf);
}

void zcp_framelog_write(struct zcp_framelog *fl, const char *stream, const struct zcp_frame *f)
{
        char line[LINE_BYTES];
        int n = zcp_framelog_format(line, sizeof(line), stream, f);
        uint64_t used, at;

        if (n < 0) {
                atomic_fetch_add_explicit(&fl->lost, 1, memory_order_relaxed);
                return;
        }
        pthread_mutex_lock(&fl->lock);
        used = fl->head - fl->tail;
        if (RING_BYTES - used < (uint64_t)n) {
                pthread_mutex_unlock(&fl->lock);
                atomic_fetch_add_explicit(&fl->lost, 1, memory_order_relaxed);
                return;
        }
        at = fl->head % RING_BYTES;
        if (at + (uint64_t)n <= RING_BYTES) {
                memcpy(fl->ring + at, line, (size_t)n);
        } else {
                size_t first = (size_t)(RING_BYTES - at);
                memcpy(fl->ring + at, line, first);
                memcpy(fl->ring, line + first, (size_t)n - first);
        }
        fl->head += (uint64_t)n;
        if (fl->writer_waiting && used + (uint64_t)n >= RING_BYTES / 4)
                pthread_cond_signal(&fl->wake);
        pthread_mutex_unlock(&fl->lock);
}

uint64_t zcp_framelog_rotate_failed(const struct zcp_framelog *fl)
{
        return fl ? atomic_load_explicit(&fl->rotate_failed, memory_order_relaxed) : 0;
}

uint64_t zcp_framelog_written(const struct zcp_framelog *fl)
{
        return fl ? atomic_load_explicit(&fl->written, memory_order_relaxed) : 0;
}

uint64_t zcp_framelog_lost(const struct zcp_framelog *fl)
{
        return fl ? atomic_load_explicit(&fl->lost, memory_order_relaxed) : 0;
}

/* Never O_TRUNC: whatever is at the path (ours, or made by someone meanwhile) is appended to. */
static int open_file(struct zcp_framelog *fl)
{
        struct stat st;
        int fd = open(fl->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        fl->fd = fd;
        fl->size = (uint64_t)st.st_size;
        return 0;
}

/*
 * path -> path.1 -> ... -> path.keep, then a new path. When the live file
 * cannot be renamed (a read-only directory, something in the way), nothing
 * is destroyed: the live file stays open and is appended to past max_bytes
 * (counted in `rotate_failed`, logged), and rotation is tried again at the
 * next boundary. Returns true when a fresh file is open.
 */
static bool rotate(struct zcp_framelog *fl)
{
        char from[ZCP_PATH_MAX + 16], to[ZCP_PATH_MAX + 16];
        int r;

        for (uint32_t i = fl->keep; i > 1; i--) {
                snprintf(from, sizeof(from), "%s.%u", fl->path, i - 1);
                snprintf(to, sizeof(to), "%s.%u", fl->path, i);
                if (rename(from, to) < 0 && errno != ENOENT)
                        ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC, "frame log: cannot rename %s to %s: %s",
                                            from, to, strerror(errno));
        }
        snprintf(to, sizeof(to), "%s.1", fl->path);
        if (fl->fd >= 0 && rename(fl->path, to) < 0 && errno != ENOENT) {
                atomic_fetch_add_explicit(&fl->rotate_failed, 1, memory_order_relaxed);
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 10 * ZCP_NSEC_PER_SEC,
                                    "frame log: cannot rotate %s to %s (%s): appending to it past its size limit",
                                    fl->path, to, strerror(errno));
                return false;
        }
        if (fl->fd >= 0) {
                close(fl->fd);
                fl->fd = -1;
        }
        r = open_file(fl);
        if (r < 0) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 10 * ZCP_NSEC_PER_SEC, "frame log: cannot open %s: %s", fl->path,
                                    zcp_strerror(r));
                return false;
        }
        return true;
}

static uint64_t count_lines(const char *p, size_t n)
{
        uint64_t lines = 0;

        for (size_t i = 0; i < n; i++)
                lines += p[i] == '\n';
        return lines;
}

static void write_lines(struct zcp_framelog *fl, const char *p, size_t n)
{
        size_t done = 0;

        while (done < n) {
                ssize_t w = write(fl->fd, p + done, n - done);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        uint64_t lost = count_lines(p + done, n - done);
                        size_t torn = 0;

                        /* A line cut short (disk full) is cut back off, so the next one is not glued to it. */
                        while (torn < done && p[done - torn - 1] != '\n')
                                torn++;
                        if (torn && ftruncate(fl->fd, (off_t)(fl->size - torn)) == 0)
                                fl->size -= torn;
                        else if (torn)
                                lost++;   /* left torn: the line is lost all the same */

                        ZCP_LOG_RATELIMITED(ZCP_LOG_ERROR, 10 * ZCP_NSEC_PER_SEC, "frame log: cannot write %s: %s",
                                            fl->path, w < 0 ? strerror(errno) : "no progress");
                        atomic_fetch_add_explicit(&fl->lost, lost, memory_order_relaxed);
                        fl->lost_reported += lost;   /* reported just now */
                        return;
                }
                done += (size_t)w;
                fl->size += (uint64_t)w;
        }
        atomic_fetch_add_explicit(&fl->written, count_lines(p, n), memory_order_relaxed);
}

/* Whole lines in p[0..n): into the file, rotating at a line boundary before max_bytes. */
static void put_lines(struct zcp_framelog *fl, const char *p, size_t n)
{
        while (n > 0) {
                uint64_t room = fl->size < fl->max_bytes ? fl->max_bytes - fl->size : 0;
                size_t take = 0;

                if (fl->fd < 0) {
                        rotate(fl);   /* retry opening a file that failed to open */
                        if (fl->fd < 0) {
                                atomic_fetch_add_explicit(&fl->lost, count_lines(p, n), memory_order_relaxed);
                                return;
                        }
                }
                if (n <= room) {
                        take = n;
                } else {
                        for (size_t i = (size_t)room; i > 0; i--)
                                if (p[i - 1] == '\n') {
                                        take = i;
                                        break;
                                }
                }
                if (take == 0) {
                        if (fl->size > 0 && rotate(fl))
                                continue;
                        if (fl->size > 0) {
                                take = n;   /* rotation failed: append, never destroy */
                                goto append;
                        }
                        /* A line longer than max_bytes on its own (cannot happen with max_bytes >= 4096). */
                        const char *nl = memchr(p, '\n', n);
                        take = nl ? (size_t)(nl - p) + 1 : n;
                }
append:
                write_lines(fl, p, take);
                p += take;
                n -= take;
                if (n > 0 && !rotate(fl)) {
                        write_lines(fl, p, n);   /* rotation failed: append, never destroy */
                        return;
                }
        }
}

static void *writer_thread(void *arg)
{
        struct zcp_framelog *fl = arg;

        pthread_mutex_lock(&fl->lock);
        for (;;) {
                uint64_t avail = fl->head - fl->tail, lost;
                size_t n, at, first, whole;

                if (avail == 0) {
                        struct timespec ts;
                        uint64_t when;

                        if (fl->stop)
                                break;
                        clock_gettime(CLOCK_MONOTONIC, &ts);
                        when = zcp_timespec_ns(&ts) + WAKE_NS;
                        ts.tv_sec = (time_t)(when / ZCP_NSEC_PER_SEC);
                        ts.tv_nsec = (long)(when % ZCP_NSEC_PER_SEC);
                        fl->writer_waiting = true;
                        pthread_cond_timedwait(&fl->wake, &fl->lock, &ts);
                        fl->writer_waiting = false;
                        continue;
                }
                n = avail < STAGE_BYTES ? (size_t)avail : STAGE_BYTES;
                at = (size_t)(fl->tail % RING_BYTES);
                first = RING_BYTES - at < n ? RING_BYTES - at : n;
                memcpy(fl->stage, fl->ring + at, first);
                memcpy(fl->stage + first, fl->ring, n - first);
                /* Lines go in whole, so the ring holds whole lines: keep the staged ones that are complete. */
                whole = n;
                while (whole > 0 && fl->stage[whole - 1] != '\n')
                        whole--;
                fl->tail += whole;
                pthread_mutex_unlock(&fl->lock);

                put_lines(fl, fl->stage, whole);
                lost = atomic_load_explicit(&fl->lost, memory_order_relaxed);
                if (lost > fl->lost_reported) {
                        ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC,
                                            "frame log: %" PRIu64 " lines lost so far (the writer fell behind)", lost);
                        fl->lost_reported = lost;
                }
                pthread_mutex_lock(&fl->lock);
        }
        pthread_mutex_unlock(&fl->lock);
        return NULL;
}

int zcp_framelog_open(const struct zcp_frame_log_config *cfg, struct zcp_framelog **ret_framelog)
{
        struct zcp_framelog *fl;
        pthread_condattr_t ca;
        int r;

        if (!cfg->path[0]) {
                *ret_framelog = NULL;
                return 0;
        }
        fl = calloc(1, sizeof(*fl));
        if (!fl)
                return -ENOMEM;
        fl->fd = -1;
        snprintf(fl->path, sizeof(fl->path), "%s", cfg->path);
        fl->max_bytes = cfg->max_bytes < 4096 ? 4096 : cfg->max_bytes;
        fl->keep = cfg->keep < 1 ? 1 : cfg->keep;
        pthread_mutex_init(&fl->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&fl->wake, &ca);
        pthread_condattr_destroy(&ca);
        fl->ring = malloc(RING_BYTES);
        fl->stage = malloc(STAGE_BYTES);
        if (!fl->ring || !fl->stage) {
                r = -ENOMEM;
                goto fail;
        }
        r = open_file(fl);
        if (r < 0) {
                zcp_err("frame log: cannot open %s: %s", fl->path, zcp_strerror(r));
                goto fail;
        }
        r = -pthread_create(&fl->writer, NULL, writer_thread, fl);
        if (r < 0) {
                zcp_err("frame log: cannot start the writer thread: %s", zcp_strerror(r));
                goto fail;
        }
        pthread_setname_np(fl->writer, "zcp-framelog");
        fl->writer_started = true;
        zcp_info("frame log: %s (rotated at %" PRIu64 " bytes, %u kept)", fl->path, fl->max_bytes, fl->keep);
        *ret_framelog = fl;
        return 0;

fail:
        zcp_framelog_close(fl);
        return r;
}

void zcp_framelog_close(struct zcp_framelog *fl)
{
        uint64_t lost;

        if (!fl)
                return;
        if (fl->writer_started) {
                pthread_mutex_lock(&fl->lock);
                fl->stop = true;
                pthread_cond_signal(&fl->wake);
                pthread_mutex_unlock(&fl->lock);
                pthread_join(fl->writer, NULL);
        }
        if (atomic_load(&fl->rotate_failed))
                zcp_warn("frame log: %" PRIu64 " rotations of %s failed; it was appended to past its limit instead",
                         (uint64_t)atomic_load(&fl->rotate_failed), fl->path);
        lost = atomic_load(&fl->lost);
        if (lost)
                zcp_warn("frame log: %" PRIu64 " lines were lost (the writer fell behind or could not write %s)", lost,
                         fl->path);
        if (fl->fd >= 0)
                close(fl->fd);
        pthread_cond_destroy(&fl->wake);
        pthread_mutex_destroy(&fl->lock);
        free(fl->ring);
        free(fl->stage);
        free(fl);
}
