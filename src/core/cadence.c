/* SPDX-License-Identifier: MIT */
/* zcpipe: a worker team's job cadence (cadence.h has the design). */
#include "core/cadence.h"

#include <string.h>

#define LATE_FIRST_NS 50000ull /* before any wake-up was measured */
#define TAIL_MAX_NS 1000000ull

void zcp_cadence_init(struct zcp_cadence *c)
{
        memset(c, 0, sizeof(*c));
        c->late = LATE_FIRST_NS;
}

static void est_add(struct zcp_cadence_est *e, uint64_t iv)
{
        if (!e->mean) {
                e->mean = iv;
                e->dev = iv / 8;
                return;
        }
        iv = iv < e->mean / 2 ? e->mean / 2 : iv;
        iv = iv > 2 * e->mean ? 2 * e->mean : iv;
        e->dev = (3 * e->dev + (iv > e->mean ? iv - e->mean : e->mean - iv)) / 4;
        e->mean = (3 * e->mean + iv) / 4;
}

void zcp_cadence_start(struct zcp_cadence *c, uint64_t now)
{
        if (c->last_end && now < c->last_end + ZCP_CADENCE_GAP_NS)
                return; /* the same burst */
        if (c->last_burst && now > c->last_burst)
                est_add(&c->period, now - c->last_burst);
        if (c->last_end && now > c->last_end)
                est_add(&c->gap, now - c->last_end);
        c->last_burst = now;
        c->bursts++;
}

void zcp_cadence_end(struct zcp_cadence *c, uint64_t now)
{
        c->last_end = now;
}

void zcp_cadence_lateness(struct zcp_cadence *c, uint64_t late)
{
        late = late > 10 * ZCP_CADENCE_LEAD_MAX_NS ? 10 * ZCP_CADENCE_LEAD_MAX_NS : late;
        c->late = (7 * c->late + late) / 8;
}

/* The steadier estimate; NULL when neither has an interval yet. */
static const struct zcp_cadence_est *steadier(const struct zcp_cadence *c)
{
        if (!c->period.mean || !c->gap.mean)
                return NULL;
        return c->gap.dev < c->period.dev ? &c->gap : &c->period;
}

uint64_t zcp_cadence_next(const struct zcp_cadence *c)
{
        const struct zcp_cadence_est *e = steadier(c);

        if (!e || e->mean > ZCP_CADENCE_PERIOD_MAX_NS || c->period.mean > ZCP_CADENCE_PERIOD_MAX_NS)
                return 0;
        return e == &c->gap ? c->last_end + e->mean : c->last_burst + e->mean;
}

uint64_t zcp_cadence_lead(const struct zcp_cadence *c)
{
        const struct zcp_cadence_est *e = steadier(c);
        uint64_t lead = 2 * c->late + ZCP_CADENCE_LEAD_MIN_NS + (e ? 2 * e->dev : 0);

        return lead > ZCP_CADENCE_LEAD_MAX_NS ? ZCP_CADENCE_LEAD_MAX_NS : lead;
}

uint64_t zcp_cadence_spin_until(const struct zcp_cadence *c)
{
        uint64_t next = zcp_cadence_next(c), tail;

        if (!next)
                return 0;
        tail = c->period.mean / 32 > TAIL_MAX_NS ? TAIL_MAX_NS : c->period.mean / 32;
        return next + zcp_cadence_lead(c) + tail;
}
