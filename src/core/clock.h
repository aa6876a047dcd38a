/* SPDX-License-Identifier: MIT */
#pragma once
/* CLOCK_MONOTONIC in nanoseconds: the one clock every frame timestamp uses. */
#include <stdint.h>
#include <time.h>

#define ZCP_NSEC_PER_SEC  1000000000ULL
#define ZCP_NSEC_PER_MSEC 1000000ULL
#define ZCP_NSEC_PER_USEC 1000ULL

static inline uint64_t zcp_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * ZCP_NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static inline uint64_t zcp_timespec_ns(const struct timespec *ts)
{
        return (uint64_t)ts->tv_sec * ZCP_NSEC_PER_SEC + (uint64_t)ts->tv_nsec;
}
