/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Logging to stderr, one line per call, prefixed with the level.
 * Thread-safe (one write(2) per line). Not for the per-frame path unless
 * rate-limited with ZCP_LOG_RATELIMITED.
 */
#include <stdarg.h>
#include <stdint.h>

enum zcp_log_level { ZCP_LOG_ERROR, ZCP_LOG_WARN, ZCP_LOG_INFO, ZCP_LOG_DEBUG, ZCP_LOG_LEVEL_COUNT };

extern const char *const zcp_log_level_names[ZCP_LOG_LEVEL_COUNT];

void zcp_log_set_level(enum zcp_log_level level);
enum zcp_log_level zcp_log_get_level(void);

#if defined(__GNUC__)
#define ZCP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ZCP_PRINTF(a, b)
#endif

void zcp_log(enum zcp_log_level level, const char *fmt, ...) ZCP_PRINTF(2, 3);
void zcp_logv(enum zcp_log_level level, const char *fmt, va_list ap);

#define zcp_err(...)   zcp_log(ZCP_LOG_ERROR, __VA_ARGS__)
#define zcp_warn(...)  zcp_log(ZCP_LOG_WARN, __VA_ARGS__)
#define zcp_info(...)  zcp_log(ZCP_LOG_INFO, __VA_ARGS__)
#define zcp_debug(...) zcp_log(ZCP_LOG_DEBUG, __VA_ARGS__)

/*
 * Rate limit: at most one line per `interval_ns` per call site; the lines
 * suppressed in between are counted in the next one.
 */
struct zcp_ratelimit {
        uint64_t last_ns;
        uint64_t suppressed;
};
int zcp_ratelimit_ok(struct zcp_ratelimit *rl, uint64_t interval_ns, uint64_t *ret_suppressed);

#define ZCP_LOG_RATELIMITED(level, interval_ns, fmt, ...)                                    \
        do {                                                                                 \
                static _Thread_local struct zcp_ratelimit rl__;                              \
                uint64_t sup__;                                                              \
                if (zcp_ratelimit_ok(&rl__, (interval_ns), &sup__))                          \
                        zcp_log(level, fmt " (%llu similar suppressed)", __VA_ARGS__,        \
                                (unsigned long long)sup__);                                  \
        } while (0)
