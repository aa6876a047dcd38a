/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * What `zcpipe --check` checks beyond the parser, so that a config it passes
 * can run (issue 40): each problem is one error line naming the stream and
 * the key, with the fix.
 *
 *   models     every stream's model loads (its labels and class filter) and
 *              gives finite scores on a synthetic frame (weights that
 *              overflow float would have every frame dropped); the longest
 *              result line it can produce fits the stream's output (MQTT's
 *              message limit: output/publish.h)
 *   outputs    a results file, a unix socket and the frame log can be made
 *              where the config says: the directory exists and this user
 *              may write it (or the file exists and may be written)
 *   distinct   no two streams write one unix socket or one results file, and
 *              no results file is the frame log (lines would interleave)
 *   auth_file  metrics.http.auth_file is readable and private (daemon/auth.h)
 *
 * Main thread. The model check runs each distinct model once (a detector of
 * 512 x 512 takes about a second on one CPU).
 */
#include <stddef.h>

#include "core/config.h"

/* Everything above. Returns 0, or ZCP_ERR_CONFIG after logging every problem found. */
int zcp_preflight_check(const struct zcp_config *cfg);

/*
 * The outputs part for one stream (a reload checks the streams it will open
 * before it stops any): 0, or ZCP_ERR_CONFIG with the problem and the fix in
 * `msg` ("stream NAME: output.path ...").
 */
struct zcp_stream_config;
int zcp_preflight_output(const struct zcp_stream_config *sc, char *msg, size_t size);

/*
 * The distinct-outputs part alone, which also runs at every start and
 * reload: 0, or ZCP_ERR_CONFIG with the first clash in `msg` ("FILE: stream
 * NAME: ..."), or -ENOMEM.
 */
int zcp_preflight_outputs_distinct(const struct zcp_config *cfg, char *msg, size_t size);
