/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Packed formats to NV12 in place (convert_packed.c), for convert.c: `d` is
 * the format's row converters (zcp_convert_packed_rows), `g` its geometry.
 * Pure; any thread (the team's owner for the _mt ones). Calls
 * convert_rows.c only (through `d`).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "convert/convert_priv.h"

struct zcp_workers;

/* Scratch bytes one thread needs (at most half the input frame). */
size_t zcp_convert_packed_scratch(const struct zcp_convert_rows *d, const struct geom *g);
/* Converts on the calling thread, with zcp_convert_packed_scratch() bytes of scratch. */
void zcp_convert_packed(const struct zcp_convert_rows *d, const struct geom *g, uint8_t *buf, uint8_t *scratch);
/*
 * True when `threads` threads split this frame (else it goes through the
 * one-thread code): only where one thread would use the vector/libyuv rows
 * too, so that both give the same bytes.
 */
bool zcp_convert_packed_mt_eligible(const struct zcp_convert_rows *d, const struct geom *g, uint32_t threads);
/* Scratch bytes a team of `threads` needs for an eligible frame. */
size_t zcp_convert_packed_mt_scratch(const struct zcp_convert_rows *d, const struct geom *g, uint32_t threads);
/* Converts an eligible frame with the team (its size is the one eligibility was asked for). */
void zcp_convert_packed_mt(struct zcp_workers *workers, const struct zcp_convert_rows *d, const struct geom *g,
                           uint8_t *buf, uint8_t *scratch);
