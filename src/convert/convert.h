/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * In-place conversion of one captured frame to tightly packed NV12, the format
 * the infer stage reads. Called by the convert thread on the slot it holds; the
 * functions keep no state, so any thread may call them on memory it owns.
 *
 * Memory: the frame is converted inside its slot (no second frame-sized buffer).
 * The caller owns a per-thread scratch buffer of zcp_convert_scratch_size()
 * bytes, at most half the input frame, allocated once at start. The per-frame
 * call allocates nothing and logs nothing.
 *
 * Threads: a large packed frame (4:2:2, RGB) can be split into bands of row
 * pairs across a zcp_workers team owned by the converting thread
 * (zcp_convert_to_nv12_mt); the result is the same bytes as one thread's.
 *
 * Colour: RGB inputs use BT.601 limited range (Y 16..235, UV 16..240),
 * Y = (66 R + 129 G + 25 B + 4224) >> 8, U/V from the 2x2 block's rounded mean
 * R, G, B: U = (112 B - 74 G - 38 R + 32896) >> 8,
 * V = (112 R - 94 G - 18 B + 32896) >> 8. The libyuv SIMD paths may differ
 * from these integer formulas by +-1..2. 4:2:2 inputs halve the chroma
 * vertically as (upper + lower + 1) >> 1; YUV inputs are otherwise copied
 * bit-exactly. GREY gets neutral chroma (128).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pixfmt.h"

/*
 * True if zcp_convert_to_nv12() accepts fmt (YUYV, UYVY, YVYU, NV12, NV21,
 * I420, YV12, RGB24, BGR24, RGBX, BGRX, GREY). Pure; any thread.
 */
bool zcp_convert_supported(enum zcp_pixfmt fmt);

/*
 * Bytes of scratch zcp_convert_to_nv12() needs for this input geometry; never
 * more than half the input frame (zcp_pixfmt_frame_size_stride() / 2), 0 for
 * formats that need none. Returns 0 too for a geometry the conversion would
 * refuse. Pure; any thread.
 */
size_t zcp_convert_scratch_size(enum zcp_pixfmt fmt, uint32_t width, uint32_t height, uint32_t stride);

/*
 * Scratch bytes zcp_convert_to_nv12_mt() needs with a team of `threads`
 * (>= zcp_convert_scratch_size(); also at most half the input frame). Pure;
 * any thread.
 */
size_t zcp_convert_scratch_size_mt(enum zcp_pixfmt fmt, uint32_t width, uint32_t height, uint32_t stride,
                                   uint32_t threads);

/*
 * `threads` when zcp_convert_to_nv12_mt() with a team of that size would
 * split a frame of this geometry into bands, else 1 (planar or grey input, a
 * frame too small). Pure; any thread.
 */
uint32_t zcp_convert_team_size(enum zcp_pixfmt fmt, uint32_t width, uint32_t height, uint32_t stride,
                               uint32_t threads);

/*
 * Threads worth using for one frame of this size when the config says 0
 * (auto): 1 below 1920x1080, else 4; never more than
 * half of `cpus` (e.g. zcp_workers_cpus(); the stream's other stages run
 * meanwhile), at least 1. Pure; any thread.
 */
uint32_t zcp_convert_auto_threads(uint32_t width, uint32_t height, uint32_t cpus);

/*
 * Converts the frame at buf to tightly packed NV12 at buf, in place: Y
 * (width * height bytes) followed by interleaved U V (width * height / 2).
 * The input has format fmt, `stride` bytes per row of its first plane and,
 * for planar formats, the chroma planes following as pixfmt.h describes
 * (I420/YV12 chroma rows of stride / 2, NV12/NV21 of stride). width and
 * height must be even; stride even for the planar 4:2:0 formats.
 *
 * buf_size is the number of bytes available at buf: nothing at or beyond
 * buf + max(input size, NV12 size) is touched. scratch (owned by the caller,
 * not shared with another thread during the call) holds scratch_size >=
 * zcp_convert_scratch_size() bytes; its content is undefined afterwards.
 * NV12 input with stride == width is left as it is.
 *
 * Returns 0 on success; -EINVAL for zero or odd dimensions, a stride below the
 * format's minimum (or odd for I420/YV12/NV12/NV21, or above INT32_MAX), an
 * unsupported fmt, a NULL buf, or a scratch smaller than needed; -ENOSPC when
 * buf_size is smaller than zcp_pixfmt_slot_size(). On error buf is untouched.
 * Allocates nothing; does not log. Any thread (the convert thread of the
 * stream in the pipeline).
 */
int zcp_convert_to_nv12(enum zcp_pixfmt fmt, uint8_t *buf, size_t buf_size, uint32_t width, uint32_t height,
                        uint32_t stride, uint8_t *scratch, size_t scratch_size);

struct zcp_workers;

/*
 * zcp_convert_to_nv12() with the work of a packed frame (YUYV, UYVY, YVYU,
 * RGB24, BGR24, RGBX, BGRX) of at least 32 rows per thread split across
 * `workers` (NULL or a team of 1: the calling thread alone; other formats and
 * smaller frames always go on the calling thread). scratch_size must be at
 * least zcp_convert_scratch_size_mt(..., zcp_workers_count(workers)). Same
 * return codes and output. Only the team's owner thread may call it.
 */
int zcp_convert_to_nv12_mt(struct zcp_workers *workers, enum zcp_pixfmt fmt, uint8_t *buf, size_t buf_size,
                           uint32_t width, uint32_t height, uint32_t stride, uint8_t *scratch, size_t scratch_size);
