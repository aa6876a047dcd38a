/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The one base64 decoder (RFC 4648): the live page's basic-auth credentials
 * (daemon/auth.c, the standard alphabet) and a TF.js graph's string
 * attributes (model/tfjs.c, which may use the URL-safe one). Padding is
 * optional; nothing may follow it. Pure; any thread; no allocation.
 */
#include <stdbool.h>
#include <stddef.h>

/*
 * Decodes in into out (at most size bytes, not NUL-terminated); url: '-' and
 * '_' are accepted for '+' and '/'. Returns the decoded length, or -1 for a
 * character outside the alphabet, text after the padding, or an out too small.
 */
long zcp_base64_decode(const char *in, char *out, size_t size, bool url);
