/* SPDX-License-Identifier: MIT */
/*
 * The CPU fast path's kernels for the baseline of any CPU the build targets (x86-64: SSE2):
 * 4 floats per vector.
 * The templates cpu_conv_tmpl.c and cpu_ops_tmpl.c built for this level alone; zcp_fast_plan_new
 * picks the best level the CPU runs (cpu_kern.h).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ZCP_VL 4
#define ZCP_VMAX 2
#define ZCP_TILE_R2 6  /* 12 accumulators of the 16 registers (x86-64: SSE2) */
#define ZCP_TILE_R1 12

#include "infer/cpu_kern.h"
#include "infer/cpu_vec.h"

#include "infer/cpu_conv_tmpl.c"
#include "infer/cpu_ops_tmpl.c"

const struct zcp_fk_isa zcp_fk_base = {
        .name = "baseline",
        .vl = ZCP_VL,
        .conv_new = conv_new,
        .conv_units = conv_units,
        .ops_units = ops_units,
};

