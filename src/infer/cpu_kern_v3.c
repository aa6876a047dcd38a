/* SPDX-License-Identifier: MIT */
/*
 * The CPU fast path's kernels for x86-64-v3 (AVX2; its FMA unused, see src/meson.build): 8 floats
 * per vector, 16 vector registers.
 * The templates cpu_conv_tmpl.c and cpu_ops_tmpl.c built for this level alone; zcp_fast_plan_new
 * picks the best level the CPU runs (cpu_kern.h).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "infer/cpu_kern.h"

#if ZCP_FK_X86
#pragma GCC target("arch=x86-64-v3")

#define ZCP_VL 8
#define ZCP_VMAX 2
#define ZCP_TILE_R2 6  /* 12 accumulators of the 16 registers, 2 weights, a broadcast */
#define ZCP_TILE_R1 12

#include "infer/cpu_vec.h"

#include "infer/cpu_conv_tmpl.c"
#include "infer/cpu_ops_tmpl.c"

const struct zcp_fk_isa zcp_fk_v3 = {
        .name = "x86-64-v3",
        .vl = ZCP_VL,
        .conv_new = conv_new,
        .conv_units = conv_units,
        .ops_units = ops_units,
};
#else
typedef int zcp_fk_v3_unused; /* not an x86-64 GCC build: no kernels of this level */
#endif
