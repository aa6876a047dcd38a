/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The CPU fast path's vectors (internal to the kernel files src/infer/cpu_kern_*.c): ZCP_VL
 * floats as a GCC vector extension, the width of the instruction set the including file is
 * built for (16 for x86-64-v4, 8 for v3, 4 elsewhere; set before including this, default 4);
 * loads and stores of whole and partial vectors, and the plan's activations on a vector
 * (model/plan.h's zcp_plan_act_apply, the same operations; the sigmoid's exp a polynomial
 * within a few ulp of expf). All static inline, compiled into each kernel file for its own
 * instruction set. Pure; any thread.
 */
#include <stdint.h>
#include <string.h>

#include "model/plan.h"

#ifndef ZCP_VL
#define ZCP_VL 4 /* floats per vector */
#endif
#define ZCP_INLINE static inline __attribute__((always_inline))

/* Vector arguments and returns stay inside each kernel file (the helpers are inlined). */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float zcp_vf __attribute__((vector_size(ZCP_VL * sizeof(float))));
typedef int32_t zcp_vi __attribute__((vector_size(ZCP_VL * sizeof(int32_t))));

ZCP_INLINE zcp_vf zcp_vload(const float *p)
{
        zcp_vf v;

        memcpy(&v, p, sizeof(v));
        return v;
}

ZCP_INLINE void zcp_vstore(float *p, zcp_vf v)
{
        memcpy(p, &v, sizeof(v));
}

/* The first n (< ZCP_VL) floats; the other lanes 0. */
ZCP_INLINE zcp_vf zcp_vload_n(const float *p, uint32_t n)
{
        zcp_vf v = { 0 };

        for (uint32_t j = 0; j < n; j++)
                v[j] = p[j];
        return v;
}

ZCP_INLINE void zcp_vstore_n(float *p, zcp_vf v, uint32_t n)
{
        for (uint32_t j = 0; j < n; j++)
                p[j] = v[j];
}

ZCP_INLINE zcp_vf zcp_vsplat(float x)
{
        return (zcp_vf){ 0 } + x;
}

/* m ? a : b per lane (m: all ones or all zeros, from a comparison). */
ZCP_INLINE zcp_vf zcp_vsel(zcp_vi m, zcp_vf a, zcp_vf b)
{
        return (zcp_vf)(((zcp_vi)a & m) | ((zcp_vi)b & ~m));
}

/* max(x, 0) as the reference's x > 0 ? x : 0 (NaN gives 0), then min(., 6) as fminf. */
ZCP_INLINE zcp_vf zcp_vrelu(zcp_vf x)
{
        return (zcp_vf)((zcp_vi)x & (x > 0.0f));
}

ZCP_INLINE zcp_vf zcp_vrelu6(zcp_vf x)
{
        const zcp_vf t = zcp_vrelu(x), six = zcp_vsplat(6.0f);

        return zcp_vsel(t < six, t, six);
}

/*
 * exp(x): x = n ln2 + r, |r| <= ln2 / 2, exp(r) by Cephes' degree-5 polynomial, times 2^n built
 * in the exponent bits. x is clamped to [-87.3, 88.3] so that n stays in [-126, 127] (a normal
 * float's exponents): the result stays finite and normal (exp(88.3) ~ 2e38).
 */
ZCP_INLINE zcp_vf zcp_vexp(zcp_vf x)
{
        const zcp_vf hi = zcp_vsplat(88.3f), lo = zcp_vsplat(-87.3f);
        zcp_vf n, r, y;

        x = zcp_vsel(x < hi, x, hi);
        x = zcp_vsel(x > lo, x, lo);
        /* n = round(x / ln2): the 1.5 * 2^23 shift rounds to nearest */
        n = x * 1.44269504088896341f + 12582912.0f;
        n = n - 12582912.0f;
        r = x - n * 0.693359375f;
        r = r - n * -2.12194440e-4f;
        y = zcp_vsplat(1.9875691500e-4f);
        y = y * r + 1.3981999507e-3f;
        y = y * r + 8.3334519073e-3f;
        y = y * r + 4.1665795894e-2f;
        y = y * r + 1.6666665459e-1f;
        y = y * r + 5.0000001201e-1f;
        y = y * (r * r) + r + 1.0f;
        return y * (zcp_vf)((__builtin_convertvector(n, zcp_vi) + 127) << 23);
}

ZCP_INLINE zcp_vf zcp_vsigmoid(zcp_vf x)
{
        return 1.0f / (1.0f + zcp_vexp(-x));
}

ZCP_INLINE zcp_vf zcp_vhswish(zcp_vf x, float a, float b)
{
        return (x * a) * zcp_vrelu6(x + b);
}

ZCP_INLINE zcp_vf zcp_vhsigmoid(zcp_vf x, float a, float b)
{
        return zcp_vrelu6(x + b) * a;
}

/* zcp_plan_act_apply on every lane (one switch per vector: zcp_vact_n for many). */
ZCP_INLINE zcp_vf zcp_vact(const struct zcp_plan_act *act, zcp_vf x)
{
        switch (act->kind) {
        case ZCP_ACT_RELU:
                return zcp_vrelu(x);
        case ZCP_ACT_RELU6:
                return zcp_vrelu6(x);
        case ZCP_ACT_SIGMOID:
                return zcp_vsigmoid(x);
        case ZCP_ACT_HSWISH:
                return zcp_vhswish(x, act->a, act->b);
        case ZCP_ACT_HSIGMOID:
                return zcp_vhsigmoid(x, act->a, act->b);
        case ZCP_ACT_SCALE:
                return x * act->a;
        default:
                return x;
        }
}

/*
 * Channels go in blocks of one vector. First channel of block b of c channels: the last block
 * ends at c, overlapping the one before (it recomputes a few channels to the same values rather
 * than storing a partial vector); c under one vector makes one partial block.
 */
static inline uint32_t zcp_block_c0(uint32_t b, uint32_t c)
{
        return c > ZCP_VL && (b + 1) * ZCP_VL > c ? c - ZCP_VL : b * ZCP_VL;
}

static inline uint32_t zcp_blocks(uint32_t c)
{
        return (c + ZCP_VL - 1) / ZCP_VL;
}

/* Lanes of a block that hold channels: ZCP_VL, or c when under. */
static inline uint32_t zcp_lanes(uint32_t c)
{
        return c < ZCP_VL ? c : ZCP_VL;
}

/* zcp_vact on n vectors, with one switch for all of them. */
ZCP_INLINE void zcp_vact_n(const struct zcp_plan_act *act, zcp_vf *y, int n)
{
        const float a = act->a, b = act->b;

        switch (act->kind) {
        case ZCP_ACT_RELU:
                for (int i = 0; i < n; i++)
                        y[i] = zcp_vrelu(y[i]);
                break;
        case ZCP_ACT_RELU6:
                for (int i = 0; i < n; i++)
                        y[i] = zcp_vrelu6(y[i]);
                break;
        case ZCP_ACT_SIGMOID:
                for (int i = 0; i < n; i++)
                        y[i] = zcp_vsigmoid(y[i]);
                break;
        case ZCP_ACT_HSWISH:
                for (int i = 0; i < n; i++)
                        y[i] = zcp_vhswish(y[i], a, b);
                break;
        case ZCP_ACT_HSIGMOID:
                for (int i = 0; i < n; i++)
                        y[i] = zcp_vhsigmoid(y[i], a, b);
                break;
        case ZCP_ACT_SCALE:
                for (int i = 0; i < n; i++)
                        y[i] = y[i] * a;
                break;
        default:
                break;
        }
}
