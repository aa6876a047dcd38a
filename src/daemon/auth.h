/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * A credential for the live page (metrics.http.auth_file): the first line
 * of a file only its owner may read, given by a client either as a bearer
 * token or as the password of HTTP basic authentication (any user name, so
 * that a browser's login box works). /metrics, /healthz and /stats never
 * ask for it (http.c decides which paths do).
 *
 * Plain functions without HTTP in them. zcp_auth_load() on the main thread
 * (start-up, --check); zcp_auth_check() from any thread on a loaded struct.
 */
#include <stdbool.h>
#include <stddef.h>

#define ZCP_AUTH_SECRET_MAX 256   /* bytes of the first line, at most */

struct zcp_auth {
        char secret[ZCP_AUTH_SECRET_MAX + 1];
        size_t len;
};

/*
 * Reads the first line of `path` (without its '\n' or "\r\n"). Refused: a
 * file that is not a regular file, that its group or others may read or
 * write (the fix is chmod 600, or 400), an empty first line, a line longer
 * than ZCP_AUTH_SECRET_MAX. Returns 0, or a negative errno with one line
 * naming the file, the reason and the fix in `msg`.
 */
int zcp_auth_load(const char *path, struct zcp_auth *ret_auth, char *msg, size_t size);

/*
 * The value of a request's Authorization header (NULL: none) against the
 * secret: "Bearer <secret>", or "Basic <base64 of user:secret>" with any
 * user. Compares in time independent of where the two first differ.
 */
bool zcp_auth_check(const struct zcp_auth *auth, const char *authorization);
