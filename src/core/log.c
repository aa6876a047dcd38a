/* SPDX-License-Identifier: MIT */
/*
 * Logging (log.h): one line per call to stderr with one write(2), so lines
 * from different threads never interleave. Level and form are relaxed
 * atomics; the form is decided once, from JOURNAL_STREAM and fstat(2).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"

const char *const zcp_log_level_names[ZCP_LOG_LEVEL_COUNT] = {
        [ZCP_LOG_ERROR] = "error",
        [ZCP_LOG_WARN] = "warn",
        [ZCP_LOG_INFO] = "info",
        [ZCP_LOG_DEBUG] = "debug",
};

/* syslog(3) priorities: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG. */
static const int priority[ZCP_LOG_LEVEL_COUNT] = {
        [ZCP_LOG_ERROR] = 3,
        [ZCP_LOG_WARN] = 4,
        [ZCP_LOG_INFO] = 6,
        [ZCP_LOG_DEBUG] = 7,
};

_Atomic int zcp_log_level_now = ZCP_LOG_INFO;

enum { FORM_UNKNOWN, FORM_PLAIN, FORM_JOURNAL };
static _Atomic int form = FORM_UNKNOWN;

void zcp_log_set_level(enum zcp_log_level level)
{
        atomic_store_explicit(&zcp_log_level_now, (int)level, memory_order_relaxed);
}

enum zcp_log_level zcp_log_get_level(void)
{
        return (enum zcp_log_level)atomic_load_explicit(&zcp_log_level_now, memory_order_relaxed);
}

bool zcp_log_init(void)
{
        const char *js = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        bool journal = false;
        char tail;

        /* systemd.exec(5): "DEVICE:INODE" of the stream it connected to stdout/stderr, in decimal. */
        if (js && sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) == 2 && fstat(STDERR_FILENO, &st) == 0)
                journal = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
        atomic_store_explicit(&form, journal ? FORM_JOURNAL : FORM_PLAIN, memory_order_relaxed);
        return journal;
}

static bool journal_form(void)
{
        int f = atomic_load_explicit(&form, memory_order_relaxed);

        if (f == FORM_UNKNOWN)
                return zcp_log_init();
        return f == FORM_JOURNAL;
}

/* "2026-12-02T17:58:01.123456 [thread] ": local time and the calling thread's name. */
static int plain_prefix(char *buf, size_t size)
{
        char name[17] = "";
        struct timespec ts;
        struct tm tm;
        size_t n;

        clock_gettime(CLOCK_REALTIME, &ts);
        localtime_r(&ts.tv_sec, &tm);
        n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
        if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0)
                snprintf(name, sizeof(name), "?");
        return (int)n + snprintf(buf + n, size - n, ".%06ld [%s] ", ts.tv_nsec / 1000, name);
}

/* Formats one line behind the form's prefix and writes it with one write(2). */
static void emit(enum zcp_log_level level, bool bare, const char *fmt, va_list ap)
{
        char line[1024];
        int n, m;

        if (journal_form())
                n = snprintf(line, sizeof(line), "<%d>", priority[level]);
        else
                n = bare ? 0 : plain_prefix(line, sizeof(line));
        if (!bare)
                n += snprintf(line + n, sizeof(line) - (size_t)n, "zcpipe: %s: ", zcp_log_level_names[level]);
        m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
        if (m < 0)
                m = 0;
        n += m;
        if (n > (int)sizeof(line) - 2)
                n = (int)sizeof(line) - 2;
        line[n++] = '\n';
        /* Best effort: a log line that cannot be written has nowhere else to go. */
        if (write(STDERR_FILENO, line, (size_t)n) < 0)
                return;
}

void zcp_logv(enum zcp_log_level level, const char *fmt, va_list ap)
{
        if (!ZCP_LOG_ON(level))
                return;
        emit(level, false, fmt, ap);
}

void zcp_log(enum zcp_log_level level, const char *fmt, ...)
{
        va_list ap;

        if (!ZCP_LOG_ON(level))
                return;
        va_start(ap, fmt);
        emit(level, false, fmt, ap);
        va_end(ap);
}

void zcp_log_line(enum zcp_log_level level, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        emit(level, true, fmt, ap);
        va_end(ap);
}

int zcp_ratelimit_ok(struct zcp_ratelimit *rl, uint64_t interval_ns, uint64_t *ret_suppressed)
{
        uint64_t now = zcp_now_ns();

        if (rl->last_ns != 0 && now - rl->last_ns < interval_ns) {
                rl->suppressed++;
                return 0;
        }
        rl->last_ns = now;
        *ret_suppressed = rl->suppressed;
        rl->suppressed = 0;
        return 1;
}
