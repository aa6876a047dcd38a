/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The set of running streams, as exporters see it (HTTP /metrics, STATUS=,
 * summaries). The main thread replaces the set (start, SIGHUP reload, stop);
 * exporter threads read it. A mutex makes a replacement atomic for readers
 * and keeps a stream alive while a reader looks at it: the main thread calls
 * zcp_registry_set() (which waits for readers) before freeing a stream.
 */
#include <stdint.h>

#include "pipeline.h"

struct zcp_registry;

int zcp_registry_new(struct zcp_registry **ret_registry);
/* Accepts NULL. No reader may be inside foreach. */
void zcp_registry_free(struct zcp_registry *registry);

/* Main thread: the streams now running (count may be 0). The array is copied. */
void zcp_registry_set(struct zcp_registry *registry, struct zcp_stream *const *streams, uint32_t count);

/*
 * Main thread: the same with objects that make their own view (the
 * supervisor's slots, which outlive their streams): `view` is called under
 * the lock. A writer that changes what an object's view points to (frees a
 * stream) does so between zcp_registry_lock() and zcp_registry_unlock().
 */
typedef void (*zcp_registry_view_fn)(const void *obj, struct zcp_stream_view *ret_view);
void zcp_registry_set_objects(struct zcp_registry *registry, const void *const *objs, uint32_t count,
                              zcp_registry_view_fn view);
void zcp_registry_lock(struct zcp_registry *registry);
void zcp_registry_unlock(struct zcp_registry *registry);

/*
 * The process's per-frame log (output/framelog.h; NULL: none), whose
 * counters /metrics and /stats show. Set by the main thread before the
 * exporters start; it must outlive them. Any thread reads it.
 */
struct zcp_framelog;
void zcp_registry_set_framelog(struct zcp_registry *registry, struct zcp_framelog *framelog);
struct zcp_framelog *zcp_registry_framelog(struct zcp_registry *registry);

/*
 * Any thread: calls fn once per stream, in config order, holding the lock
 * (fn must be quick and must not call back into the registry). Returns the
 * number of streams visited.
 */
uint32_t zcp_registry_foreach(struct zcp_registry *registry,
                              void (*fn)(const struct zcp_stream_view *view, void *userdata), void *userdata);
