/* SPDX-License-Identifier: MIT */
/*
 * sd_notify wrapper (notify.h), built only with libsystemd. A failure to
 * reach the service manager is logged once: the service keeps running, and
 * systemd will notice on its own (start timeout, watchdog).
 * Main thread only.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "core/log.h"
#include "daemon/notify.h"

#define NOTIFY_MAX 4096

static bool warned;

int zcp_notify(const char *state)
{
        int r = sd_notify(0, state);

        if (r < 0 && !warned) {
                warned = true;
                zcp_warn("cannot notify the service manager: %s (further failures are not logged)", strerror(-r));
        }
        return r;
}

int zcp_notifyf(const char *fmt, ...)
{
        char buf[NOTIFY_MAX];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        return zcp_notify(buf);
}

int zcp_notify_watchdog_usec(uint64_t *ret_usec)
{
        uint64_t usec = 0;
        int r;

        /* Keeps the variables: sd_notify() needs none of them, and a re-exec would. */
        r = sd_watchdog_enabled(0, &usec);
        if (r < 0) {
                zcp_warn("ignoring the watchdog settings from the service manager: %s", strerror(-r));
                return r;
        }
        if (r == 0 || usec == 0)
                return 0;
        *ret_usec = usec;
        return 1;
}
