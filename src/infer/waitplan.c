/* SPDX-License-Identifier: MIT */
/* zcpipe: the hybrid wait's plan (waitplan.h has the design). */
#include "infer/waitplan.h"

#include <string.h>

/* Without a prediction (a stream's first frame), spin this long before blocking. */
#define SPIN_FIRST_NS 2000000u

void zcp_waitplan_init(struct zcp_waitplan *p)
{
        memset(p, 0, sizeof(*p));
}

static void push(uint64_t *win, uint32_t *n, uint32_t *i, uint64_t v)
{
        win[*i] = v;
        *i = (*i + 1) % ZCP_WAITPLAN_WINDOW;
        if (*n < ZCP_WAITPLAN_WINDOW)
                (*n)++;
}

static uint64_t predicted(const struct zcp_waitplan *p)
{
        uint64_t m = UINT64_MAX;

        for (uint32_t i = 0; i < p->ndur; i++)
                if (p->dur[i] < m)
                        m = p->dur[i];
        return m;
}

uint64_t zcp_waitplan_guard(const struct zcp_waitplan *p)
{
        uint64_t worst = 0;

        for (uint32_t i = 0; i < p->nlate; i++)
                if (p->late[i] > worst)
                        worst = p->late[i];
        return ZCP_WAITPLAN_GUARD_MIN_NS + worst + worst / 2;
}

uint64_t zcp_waitplan_wake_at(const struct zcp_waitplan *p, uint64_t submit)
{
        uint64_t pred, guard;

        if (p->ndur == 0)
                return 0;
        pred = predicted(p);
        guard = zcp_waitplan_guard(p);
        return pred > guard ? submit + pred - guard : submit;
}

uint64_t zcp_waitplan_spin_until(const struct zcp_waitplan *p, uint64_t submit, uint64_t spin_start)
{
        uint64_t pred, span;

        (void)submit;
        if (p->ndur == 0)
                return spin_start + SPIN_FIRST_NS;
        pred = predicted(p);
        span = 2 * pred > ZCP_WAITPLAN_SPIN_MIN_NS ? 2 * pred : ZCP_WAITPLAN_SPIN_MIN_NS;
        return spin_start + span;
}

void zcp_waitplan_record(struct zcp_waitplan *p, uint64_t submit, uint64_t asked, uint64_t woke, uint64_t done,
                         bool polled_busy, bool blocked)
{
        const uint64_t took = done > submit ? done - submit : 1;
        const uint64_t guard = zcp_waitplan_guard(p);

        p->frames++;
        /*
         * A frame that did not sleep counts as on time, so that one very late wake-up, whose
         * guard may exceed the whole prediction (then no frame sleeps), ages out all the same.
         */
        if (woke)
                p->slept++;
        push(p->late, &p->nlate, &p->ilate, woke > asked ? woke - asked : 0);
        if (blocked) {
                /* Known only to be no longer than this: exact samples, when they come, are smaller. */
                p->blocked++;
                push(p->dur, &p->ndur, &p->idur, took);
        } else if (polled_busy || !woke) {
                push(p->dur, &p->ndur, &p->idur, took);
        } else {
                /*
                 * Overslept: it finished before `done`, by an unknown amount. Guess low (a guard
                 * less, and at least a quarter less, so that a prediction far too long, from a
                 * slow first frame, comes down in a few frames), then measure.
                 */
                const uint64_t quarter = took - took / 4;

                p->overslept++;
                push(p->dur, &p->ndur, &p->idur, took > guard && took - guard < quarter ? took - guard : quarter);
        }
}
