/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The MQTT results sink (output type `mqtt`, libmosquitto). Built only with
 * HAVE_MQTT; sink.c lists it in the sink table then, and a build without it
 * has no row for the type (the stream refuses to open, naming the build).
 *
 * Each result line is published (without its '\n') to the stream's topic;
 * a retained "online"/"offline" goes to the availability topic, "offline"
 * also as the broker-held last will. The publish thread only copies the
 * line into a bounded queue (oldest dropped and counted when full) and
 * wakes the sink's own network thread, which connects, reconnects with
 * capped exponential back-off, and hands at most a few messages at a time
 * to libmosquitto. Counters: struct zcp_sink_stats (sink.h).
 *
 * Threads: open/close on the main thread, write on the stream's publish
 * thread; one network thread per sink in between.
 */
#include "output/sink.h"

#define ZCP_MQTT_MESSAGE_MAX 4096   /* longer result lines are lost as too_long */

extern const struct zcp_sink_ops zcp_sink_mqtt;
