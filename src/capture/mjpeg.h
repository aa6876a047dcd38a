/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * MJPEG frames from a camera decoded with libturbojpeg straight into a ring
 * slot as I420 (Y plane of `width` bytes per row, then U and V planes of
 * width / 2). A 4:2:0 JPEG is decoded into the slot planes directly; other
 * subsamplings decode luma into the slot and chroma into a scratch buffer
 * taken at zcp_mjpeg_new(), then reduce it to 4:2:0: two vertical samples
 * as (upper + lower + 1) >> 1 (the rule of the convert stage for 4:2:2),
 * four as (a + b + c + d + 2) >> 2, two horizontal as (left + right + 1) >> 1.
 * Greyscale JPEGs get neutral chroma (128).
 *
 * Ownership: the decoder belongs to the source that made it; one thread at a
 * time (the stream's source thread). Decoding allocates nothing and logs
 * nothing.
 */
#include <stddef.h>
#include <stdint.h>

struct zcp_mjpeg;

/* Decoder for frames of exactly width x height (both even). Returns 0 or -ENOMEM / -EINVAL. */
int zcp_mjpeg_new(uint32_t width, uint32_t height, struct zcp_mjpeg **ret_mjpeg);
/* Accepts NULL. */
void zcp_mjpeg_free(struct zcp_mjpeg *m);

/* Bytes of the I420 frame written by zcp_mjpeg_decode_i420(). */
size_t zcp_mjpeg_i420_size(uint32_t width, uint32_t height);

/*
 * Decodes the JPEG at jpeg (len bytes) into dst (zcp_mjpeg_i420_size() bytes).
 * Returns 0; -EBADMSG when the data is not a complete, clean JPEG (header
 * unreadable, a decoder error, or a decoder warning such as a truncated
 * scan: the frame would be partial); -ERANGE when the JPEG's size is not the
 * decoder's width x height (dst untouched then). zcp_mjpeg_error() says why.
 */
int zcp_mjpeg_decode_i420(struct zcp_mjpeg *m, const uint8_t *jpeg, size_t len, uint8_t *dst);

/* The reason of the last failure (static or decoder-owned text, valid until the next call). */
const char *zcp_mjpeg_error(const struct zcp_mjpeg *m);
