/* SPDX-License-Identifier: MIT */
/* zcpipe: the transfer mode plan of `gpu.transfer: auto` (xferplan.h has the design). */
#include "infer/xferplan.h"

#include <string.h>

void zcp_xferplan_init(struct zcp_xferplan *p, uint32_t initial)
{
        memset(p, 0, sizeof(*p));
        p->cur = initial ? 1 : 0;
        p->interval = ZCP_XFERPLAN_PERIOD;
}

uint32_t zcp_xferplan_next(const struct zcp_xferplan *p)
{
        return p->probing ? 1 - p->cur : p->cur;
}

/* The median of n (<= WINDOW) values: the upper one of the middle two. */
static uint64_t median(const uint64_t *v, uint32_t n)
{
        uint64_t s[ZCP_XFERPLAN_WINDOW];

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
                p->interval = ZCP_XFERPLAN_PERIOD;
                /* The probe measured the new current mode: it is the baseline. */
                memcpy(p->base, p->probe, sizeof(p->base));
                p->nbase = p->nprobe;
                p->ibase = p->nprobe % ZCP_XFERPLAN_WINDOW;
                p->nprobe = 0;
                return ZCP_XFERPLAN_SWITCHED;
        }
        p->nprobe = 0;
        p->interval = 2 * p->interval < ZCP_XFERPLAN_PERIOD_MAX ? 2 * p->interval : ZCP_XFERPLAN_PERIOD_MAX;
        return ZCP_XFERPLAN_KEPT;
}

void zcp_xferplan_set_epoch(struct zcp_xferplan *p, uint64_t epoch)
{
        if (!p->gated) {
                p->gated = true;
                p->last_epoch = epoch;
        }
        p->epoch = epoch;
}

enum zcp_xferplan_event zcp_xferplan_record(struct zcp_xferplan *p, uint32_t mode, uint64_t ns)
{
        const bool new_epoch = !p->gated || p->epoch != p->last_epoch;

        p->last_epoch = p->epoch;
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
                return p->nprobe == ZCP_XFERPLAN_WINDOW ? decide(p) : ZCP_XFERPLAN_NONE;
        }
        if (p->probing || mode != p->cur) {
                p->stray++;
                return ZCP_XFERPLAN_NONE;
        }
        p->steady++;
        p->base[p->ibase] = ns;
        p->ibase = (p->ibase + 1) % ZCP_XFERPLAN_WINDOW;
        if (p->nbase < ZCP_XFERPLAN_WINDOW)
                p->nbase++;
        if (++p->since >= p->interval && p->nbase == ZCP_XFERPLAN_WINDOW && new_epoch) {
                p->probing = true;
                p->settle = ZCP_XFERPLAN_SETTLE;
                p->nprobe = 0;
                p->probes++;
                return ZCP_XFERPLAN_PROBE;
        }
        return ZCP_XFERPLAN_NONE;
}
