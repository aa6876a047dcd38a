/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Ground truth of the synthetic source: a flat grey NV12 frame (Y = 64,
 * U = V = 128) with a white square (Y = 235) of side box_size that moves
 * `speed` pixels per frame along both axes and bounces off the edges.
 */
#include <stdint.h>

#define ZCP_SYNTH_BG_Y  64
#define ZCP_SYNTH_BOX_Y 235

/* Top-left corner of the square in frame `seq`. Pure; any thread. */
void zcp_synth_box_at(uint32_t width, uint32_t height, uint32_t box, uint32_t speed, uint64_t seq,
                      uint32_t *ret_x, uint32_t *ret_y);
