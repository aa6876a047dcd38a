/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The one JSON string escaper, for everything zcpipe writes as JSON (result
 * lines, the frame log, /stats): '"' and '\' are escaped with a backslash,
 * control characters and DEL as \u00XX, every other byte (UTF-8 included)
 * is copied as it is. Pure; any thread; no allocation.
 */
#include <stddef.h>

/*
 * Writes the escaped form of s (without quotes) into dst, as snprintf does:
 * at most size - 1 bytes and a NUL (nothing when size is 0, dst may then be
 * NULL). Returns the length of the whole escaped text: a return >= size
 * means it was cut.
 */
size_t zcp_json_escape(char *dst, size_t size, const char *s);
