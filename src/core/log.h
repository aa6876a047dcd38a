/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Logging to stderr, one line per call, in one of two forms:
 *
 *   - stderr is the journal (systemd sets JOURNAL_STREAM=DEV:INO and it
 *     matches fstat(2) of fd 2): each line starts with its syslog priority,
 *     "<3>error: ...", "<4>warn: ...", "<6>info: ...", "<7>debug: ...", so that
 *     `journalctl -p err` filters (the journal adds time, pid and name itself);
 *   - anything else (a terminal, a file, a pipe): each line carries the local
 *     time to the microsecond and the calling thread's name,
 *     "2026-12-02T17:58:01.123456 [zcp-inf-cam0] zcpipe: warn: ...".
 *
 * The level is checked before anything is formatted: zcp_err/warn/info/debug
 * do not even evaluate their arguments when the level is off.
 * Thread-safe (one write(2) per line). Not for the per-frame path unless
 * rate-limited with ZCP_LOG_RATELIMITED.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum zcp_log_level { ZCP_LOG_ERROR, ZCP_LOG_WARN, ZCP_LOG_INFO, ZCP_LOG_DEBUG, ZCP_LOG_LEVEL_COUNT };

extern const char *const zcp_log_level_names[ZCP_LOG_LEVEL_COUNT];

void zcp_log_set_level(enum zcp_log_level level);
enum zcp_log_level zcp_log_get_level(void);

/*
 * Decides the form (above) from JOURNAL_STREAM and stderr now. Called once
 * by the first log line; call again after changing fd 2 or JOURNAL_STREAM
 * (tests). Returns true for the journal form. Any thread.
 */
bool zcp_log_init(void);

/* The current level, for the macros below (relaxed atomic; use zcp_log_set_level). */
extern _Atomic int zcp_log_level_now;
#define ZCP_LOG_ON(level) ((int)(level) <= atomic_load_explicit(&zcp_log_level_now, memory_order_relaxed))

#if defined(__GNUC__)
#define ZCP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ZCP_PRINTF(a, b)
#endif

/* One line at `level` ("zcpipe: LEVEL: " then the message), if the level is on. */
void zcp_log(enum zcp_log_level level, const char *fmt, ...) ZCP_PRINTF(2, 3);
void zcp_logv(enum zcp_log_level level, const char *fmt, va_list ap);
/*
 * The message alone at `level`: no "zcpipe: LEVEL: ", no time or thread (for
 * lines whose form is fixed, e.g. "FILE:LINE:COL: message" of a bad config);
 * with the priority prefix in the journal form. Always written.
 */
void zcp_log_line(enum zcp_log_level level, const char *fmt, ...) ZCP_PRINTF(2, 3);

#define zcp_err(...)   (ZCP_LOG_ON(ZCP_LOG_ERROR) ? zcp_log(ZCP_LOG_ERROR, __VA_ARGS__) : (void)0)
#define zcp_warn(...)  (ZCP_LOG_ON(ZCP_LOG_WARN) ? zcp_log(ZCP_LOG_WARN, __VA_ARGS__) : (void)0)
#define zcp_info(...)  (ZCP_LOG_ON(ZCP_LOG_INFO) ? zcp_log(ZCP_LOG_INFO, __VA_ARGS__) : (void)0)
#define zcp_debug(...) (ZCP_LOG_ON(ZCP_LOG_DEBUG) ? zcp_log(ZCP_LOG_DEBUG, __VA_ARGS__) : (void)0)

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
                if (ZCP_LOG_ON(level) && zcp_ratelimit_ok(&rl__, (interval_ns), &sup__))     \
                        zcp_log(level, fmt " (%llu similar suppressed)", __VA_ARGS__,        \
                                (unsigned long long)sup__);                                  \
        } while (0)
