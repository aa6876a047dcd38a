/* SPDX-License-Identifier: MIT */
/*
 * The CPU fast path's kernels for x86-64-v4 (AVX-512): 16 floats per vector, 32 vector registers.
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
#pragma GCC target("arch=x86-64-v4")

#define ZCP_VL 16
#define ZCP_VMAX 4
#define ZCP_TILE_R4 6  /* 24 accumulators of the 32 registers, 4 weights, a broadcast */
#define ZCP_TILE_R3 8
#define ZCP_TILE_R2 12
#define ZCP_TILE_R1 16

#include "infer/cpu_vec.h"

#include "infer/cpu_conv_tmpl.c"
#include "infer/cpu_ops_tmpl.c"

const struct zcp_fk_isa zcp_fk_v4 = {
        .name = "x86-64-v4",
        .vl = ZCP_VL,
        .conv_new = conv_new,
        .conv_units = conv_units,
        .ops_units = ops_units,
};
#else
typedef int zcp_fk_v4_unused; /* not an x86-64 GCC build: no kernels of this level */
#endif
