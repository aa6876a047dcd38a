/* SPDX-License-Identifier: MIT */
/* zcpipe: the transfer mode plan of `gpu.transfer: auto` (xferplan.h has the design). */
#include "infer/xferplan.h"

#include <string.h>

void zcp_xferplan_init(struct zcp_xferplan *p, uint32_t initial)
{
        memset(p, 0, sizeof(*p));
        p->cur = initial ? 1 : 0;
        p->users = p->users_next = 1;
        p->window = ZCP_XFERPLAN_WINDOW;
        p->settle_len = ZCP_XFERPLAN_SETTLE;
        p->period = ZCP_XFERPLAN_PERIOD;
        p->period_max = ZCP_XFERPLAN_PERIOD_MAX;
        p->interval = ZCP_XFERPLAN_PERIOD;
}

/* The sizes for p->users_next users; the baseline starts again. Not during a probe. */
static void apply_users(struct zcp_xferplan *p)
{
        const uint32_t n = p->users_next;

        if (n == p->users)
                return;
        p->users = n;
        p->window = ZCP_XFERPLAN_WINDOW * n;
        p->settle_len = ZCP_XFERPLAN_SETTLE * n;
        /* The interval keeps its place between PERIOD and PERIOD_MAX (how many probes were kept). */
        p->interval = p->interval / p->period * ZCP_XFERPLAN_PERIOD * n;
        p->period = (uint64_t)ZCP_XFERPLAN_PERIOD * n;
        p->period_max = (uint64_t)ZCP_XFERPLAN_PERIOD_MAX * n;
        p->nbase = 0;
        p->ibase = 0;
}

void zcp_xferplan_set_users(struct zcp_xferplan *p, uint32_t n)
{
        p->users_next = n < 1 ? 1 : n > ZCP_XFERPLAN_USERS_MAX ? ZCP_XFERPLAN_USERS_MAX : n;
        if (!p->probing)
                apply_users(p);
}

uint32_t zcp_xferplan_next(const struct zcp_xferplan *p)
{
        return p->probing ? 1 - p->cur : p->cur;
}

/* The median of n (<= WINDOW_MAX) values: the upper one of the middle two. Once a probe. */
static uint64_t median(const uint64_t *v, uint32_t n)
{
        uint64_t s[ZCP_XFERPLAN_WINDOW_MAX];

        if (n == 0)
                return 0;
        for (uint32_t i = 0; i < n; i++) {
                uint32_t j = i;

                for (; j > 0 && s[j - 1] > v[i]; j--)
                        s[j] = s[j - 1];
                s[j] = v[i];
        }
        return s[n / 2];
}

static enum zcp_xferplan_event decide(struct zcp_xferplan *p)
{
        const uint64_t cur = median(p->base, p->nbase), other = median(p->probe, p->nprobe);

        p->probing = false;
        p->since = 0;
        p->med_cur = cur;
        p->med_other = other;
        /* other < cur x (1 - H): better by more than the hysteresis, in the current mode's time. */
        if (other * 100 < cur * (100 - ZCP_XFERPLAN_HYSTERESIS_PCT)) {
                p->cur = 1 - p->cur;
                p->switches++;
                p->interval = p->period;
                /* The probe measured the new current mode: it is the baseline. */
                memcpy(p->base, p->probe, p->nprobe * sizeof(p->base[0]));
                p->nbase = p->nprobe;
                p->ibase = p->nprobe % p->window;
                p->nprobe = 0;
                apply_users(p);
                return ZCP_XFERPLAN_SWITCHED;
        }
        p->nprobe = 0;
        /* The early first probe (below) is not one of the doubling ones: PERIOD comes next. */
        if (p->probes > 1)
                p->interval = 2 * p->interval < p->period_max ? 2 * p->interval : p->period_max;
        apply_users(p);
        return ZCP_XFERPLAN_KEPT;
}

enum zcp_xferplan_event zcp_xferplan_record(struct zcp_xferplan *p, uint32_t mode, uint64_t ns)
{
        mode = mode ? 1 : 0;
        p->frames++;
        p->mode_frames[mode]++;
        if (p->probing && mode != p->cur) {
                p->probe_frames++;
                if (p->settle > 0) {
                        p->settle--;
                        return ZCP_XFERPLAN_NONE;
                }
                p->probe[p->nprobe++] = ns;
                return p->nprobe == p->window ? decide(p) : ZCP_XFERPLAN_NONE;
        }
        if (p->probing || mode != p->cur) {
                p->stray++;
                return ZCP_XFERPLAN_NONE;
        }
        p->steady++;
        p->base[p->ibase] = ns;
        p->ibase = (p->ibase + 1) % p->window;
        if (p->nbase < p->window)
                p->nbase++;
        /* The first probe as soon as one window of warm-up and a full baseline are in. */
        if (++p->since >= (p->probes ? p->interval : 2ull * p->window) && p->nbase == p->window) {
                p->probing = true;
                p->settle = p->settle_len;
                p->nprobe = 0;
                p->probes++;
                return ZCP_XFERPLAN_PROBE;
        }
        return ZCP_XFERPLAN_NONE;
}
