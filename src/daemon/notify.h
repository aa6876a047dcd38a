/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The service manager protocol (sd_notify): READY=1, STATUS=, STOPPING=1,
 * RELOADING=1 and WATCHDOG=1 datagrams to $NOTIFY_SOCKET, and the watchdog
 * interval systemd asks for ($WATCHDOG_USEC, $WATCHDOG_PID).
 *
 * Without $NOTIFY_SOCKET (not run by systemd) every call is a cheap no-op.
 * Built from notify.c with libsystemd (HAVE_SYSTEMD); without it the static
 * inline stubs below do nothing and report no watchdog.
 *
 * Main thread only (the control loop is the one place that decides what the
 * service manager is told).
 */
#include <stdint.h>

#include "core/log.h"

#if HAVE_SYSTEMD

/*
 * Sends `state` (newline-separated VAR=VALUE assignments). Returns > 0 when
 * sent, 0 when there is no $NOTIFY_SOCKET, negative errno on failure (logged
 * once per process, not on every tick).
 */
int zcp_notify(const char *state);

/* Same, formatted: zcp_notifyf("STATUS=%s", line). Longer than 4 KiB is cut. */
int zcp_notifyf(const char *fmt, ...) ZCP_PRINTF(1, 2);

/*
 * The watchdog systemd requested for this process: returns 1 and
 * *ret_usec (the WatchdogSec= interval; ping at least twice per interval),
 * 0 when none (no $WATCHDOG_USEC, or $WATCHDOG_PID names another process),
 * negative errno when the variables are malformed.
 */
int zcp_notify_watchdog_usec(uint64_t *ret_usec);

#else

static inline int zcp_notify(const char *state)
{
        (void)state;
        return 0;
}

static inline int zcp_notifyf(const char *fmt, ...) ZCP_PRINTF(1, 2);
static inline int zcp_notifyf(const char *fmt, ...)
{
        (void)fmt;
        return 0;
}

static inline int zcp_notify_watchdog_usec(uint64_t *ret_usec)
{
        (void)ret_usec;
        return 0;
}

#endif
