/* SPDX-License-Identifier: MIT */
/*
 * Logging: one line per call to stderr with one write(2), so lines from
 * different threads never interleave. Level is a relaxed atomic.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"

const char *const zcp_log_level_names[ZCP_LOG_LEVEL_COUNT] = {
        [ZCP_LOG_ERROR] = "error",
        [ZCP_LOG_WARN] = "warn",
        [ZCP_LOG_INFO] = "info",
        [ZCP_LOG_DEBUG] = "debug",
};

static _Atomic int log_level = ZCP_LOG_INFO;

void zcp_log_set_level(enum zcp_log_level level)
{
        atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

enum zcp_log_level zcp_log_get_level(void)
{
        return (enum zcp_log_level)atomic_load_explicit(&log_level, memory_order_relaxed);
}

void zcp_logv(enum zcp_log_level level, const char *fmt, va_list ap)
{
        char line[1024];
        int n, m;

        if ((int)level > atomic_load_explicit(&log_level, memory_order_relaxed))
                return;
        n = snprintf(line, sizeof(line), "zcpipe: %s: ", zcp_log_level_names[level]);
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

void zcp_log(enum zcp_log_level level, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        zcp_logv(level, fmt, ap);
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
