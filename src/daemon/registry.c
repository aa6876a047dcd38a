/* SPDX-License-Identifier: MIT */
/* The set of running streams for exporters (registry.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/config.h"
#include "daemon/registry.h"

struct zcp_registry {
        pthread_mutex_t lock;
        struct zcp_stream *streams[ZCP_CONFIG_MAX_STREAMS];
        uint32_t count;
};

int zcp_registry_new(struct zcp_registry **ret_registry)
{
        struct zcp_registry *r = calloc(1, sizeof(*r));

        if (!r)
                return -ENOMEM;
        pthread_mutex_init(&r->lock, NULL);
        *ret_registry = r;
        return 0;
}

void zcp_registry_free(struct zcp_registry *r)
{
        if (!r)
                return;
        pthread_mutex_destroy(&r->lock);
        free(r);
}

void zcp_registry_set(struct zcp_registry *r, struct zcp_stream *const *streams, uint32_t count)
{
        if (count > ZCP_CONFIG_MAX_STREAMS)
                count = ZCP_CONFIG_MAX_STREAMS;
        pthread_mutex_lock(&r->lock);
        for (uint32_t i = 0; i < count; i++)
                r->streams[i] = streams[i];
        r->count = count;
        pthread_mutex_unlock(&r->lock);
}

uint32_t zcp_registry_foreach(struct zcp_registry *r, void (*fn)(const struct zcp_stream_view *view, void *userdata),
                              void *userdata)
{
        uint32_t n;

        pthread_mutex_lock(&r->lock);
        n = r->count;
        for (uint32_t i = 0; i < n; i++) {
                struct zcp_stream_view v;

                zcp_stream_view(r->streams[i], &v);
                fn(&v, userdata);
        }
        pthread_mutex_unlock(&r->lock);
        return n;
}
