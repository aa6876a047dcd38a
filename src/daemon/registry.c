/* SPDX-License-Identifier: MIT */
/* The set of running streams for exporters (registry.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/config.h"
#include "daemon/registry.h"

struct zcp_registry {
        pthread_mutex_t lock;
        const void *objs[ZCP_CONFIG_MAX_STREAMS];
        zcp_registry_view_fn view;
        uint32_t count;
        struct zcp_framelog *framelog;
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

static void stream_view(const void *obj, struct zcp_stream_view *ret_view)
{
        zcp_stream_view(obj, ret_view);
}

void zcp_registry_set_objects(struct zcp_registry *r, const void *const *objs, uint32_t count,
                              zcp_registry_view_fn view)
{
        if (count > ZCP_CONFIG_MAX_STREAMS)
                count = ZCP_CONFIG_MAX_STREAMS;
        pthread_mutex_lock(&r->lock);
        for (uint32_t i = 0; i < count; i++)
                r->objs[i] = objs[i];
        r->count = count;
        r->view = view;
        pthread_mutex_unlock(&r->lock);
}

void zcp_registry_set(struct zcp_registry *r, struct zcp_stream *const *streams, uint32_t count)
{
        const void *objs[ZCP_CONFIG_MAX_STREAMS];

        if (count > ZCP_CONFIG_MAX_STREAMS)
                count = ZCP_CONFIG_MAX_STREAMS;
        for (uint32_t i = 0; i < count; i++)
                objs[i] = streams[i];
        zcp_registry_set_objects(r, objs, count, stream_view);
}

void zcp_registry_lock(struct zcp_registry *r)
{
        pthread_mutex_lock(&r->lock);
}

void zcp_registry_unlock(struct zcp_registry *r)
{
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

                r->view(r->objs[i], &v);
                fn(&v, userdata);
        }
        pthread_mutex_unlock(&r->lock);
        return n;
}

void zcp_registry_set_framelog(struct zcp_registry *r, struct zcp_framelog *framelog)
{
        pthread_mutex_lock(&r->lock);
        r->framelog = framelog;
        pthread_mutex_unlock(&r->lock);
}

struct zcp_framelog *zcp_registry_framelog(struct zcp_registry *r)
{
        struct zcp_framelog *fl;

        pthread_mutex_lock(&r->lock);
        fl = r->framelog;
        pthread_mutex_unlock(&r->lock);
        return fl;
}
