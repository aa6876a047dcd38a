/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Internal to the plan executor (plan.cu, conv.cu, ops.cu, heads.cu; not part of the C ABI):
 * each op of a plan becomes one launch record, worked out once by zcp_k_net_new (device
 * pointers into the arena and the weights, the kernel variant, the grid) and launched as it is
 * for every frame. The activation in float operations as model/plan.h spells it (these files
 * are compiled with --fmad=false, so a*b+c is never contracted; the sums of convolutions use
 * explicit fused multiply-adds or tensor cores).
 */
#include "kcommon.cuh"

/* An activation as the kernels take it. */
struct kact {
        int kind;          /* enum zcp_act */
        float a, b;
};

static __device__ __forceinline__ float kact_apply(const kact &act, float x)
{
        float t;

        switch (act.kind) {
        case ZCP_ACT_RELU:
                return x > 0.0f ? x : 0.0f;
        case ZCP_ACT_RELU6:
                return fminf(fmaxf(x, 0.0f), 6.0f);
        case ZCP_ACT_SIGMOID:
                return 1.0f / (1.0f + expf(-x));
        case ZCP_ACT_HSWISH:
                t = fminf(fmaxf(x + act.b, 0.0f), 6.0f);
                return (x * act.a) * t;
        case ZCP_ACT_HSIGMOID:
                t = fminf(fmaxf(x + act.b, 0.0f), 6.0f);
                return t * act.a;
        case ZCP_ACT_SCALE:
                return x * act.a;
        default:
                return x;
        }
}

/*
 * A convolution's operands: views are base pointers (tensor offset + first channel) and the
 * tensor's channel count as the pixel stride. M output pixels (oh * ow), K = kh * kw * cin
 * terms per output (dense) or kh * kw (depthwise).
 */
struct kconv {
        const float *in;
        uint32_t in_stride, ih, iw, cin;
        float *out;
        uint32_t out_stride, oh, ow, cout;
        const float *w, *bias, *scale, *res;   /* bias, scale, res: NULL when absent */
        uint32_t res_stride;
        uint32_t kh, kw, sh, sw, pad_t, pad_l;
        uint32_t M, K;
        kact act;
        /* Split-K (dense gemm only): blockIdx.z sums terms [z * kchunk, (z + 1) * kchunk), writes its
         * tile's sums to partial[tile][z] (tile floats each); the last of a tile's splits to arrive
         * (done[tile], back to 0 after it) adds them in order of z and applies the epilogue. */
        uint32_t splits, kchunk, tile;
        float *partial;
        uint32_t *done;
};

/* Element-wise ops, resize, max pool, copy, mean (ops.cu). */
struct kelt {
        const float *a, *b;                    /* b: NULL for a scalar */
        float *out;
        uint32_t a_stride, b_stride, out_stride;   /* b_stride 0: per channel */
        uint32_t pixels, c;
        float scalar;
        int mul;
        kact act;
};

struct kresize {
        const float *in;
        float *out;
        uint32_t in_stride, out_stride, ih, iw, oh, ow, c;
        float sy, sx;
        int half_pixel;
        kact act;
};

struct kpool {
        const float *in;
        float *out;
        uint32_t in_stride, out_stride, ih, iw, oh, ow, c;
        uint32_t kh, kw, sh, sw, pad_t, pad_l;
        kact act;
};

struct kmean {
        const float *in;
        float *out;
        uint32_t in_stride, pixels, c;
        uint32_t splits, chunk;                /* blockIdx.y: pixels [y * chunk, (y + 1) * chunk) */
        float n;                               /* pixels as a float */
        float *partial;                        /* [splits][c] */
        uint32_t *done;                        /* [gridDim.x]: blocks finished, 0 between frames */
        kact act;
};

/* Kernel families and their variants: what a launch record runs. */
enum kkind { KK_GEMM, KK_MATVEC, KK_DW, KK_ELT, KK_MEAN, KK_RESIZE, KK_POOL, KK_COPY };

struct klaunch_rec {
        enum kkind kind;
        int variant;                           /* the family's template choice */
        dim3 grid;
        unsigned block;
        size_t smem;
        union {
                kconv conv;
                kelt elt;
                kresize resize;
                kpool pool;
                kmean mean;
        } u;
};

/*
 * Planning (host): fills rec for op i of the plan from its views (already device pointers in
 * *rec's operands) and the device's multiprocessor count. Returns a short variant name for logs.
 */
const char *kconv_plan(klaunch_rec *rec, bool depthwise, int gemm, int sms);
const char *kops_plan(klaunch_rec *rec, int sms);
/*
 * The whole-K gemm tilings (kconv_plan picks one by a model of its waves; plan.cu may measure
 * them instead): their count; rec re-planned for tiling `tile` (a whole-K gemm record only, else
 * false). Every whole-K tiling adds each output's terms in the same order, 16 at a time, so the
 * tiling changes the time, never a bit of the result. kconv_name: what rec runs, for logs.
 */
int kconv_tilings(void);
bool kconv_retile(klaunch_rec *rec, int tile);
const char *kconv_name(const klaunch_rec *rec);
/* Launches a planned record on st, dependent when pdl. */
cudaError_t kconv_launch(const klaunch_rec *rec, bool pdl, cudaStream_t st);
cudaError_t kops_launch(const klaunch_rec *rec, bool pdl, cudaStream_t st);

/*
 * A head's operands (heads.cu): the views of model/plan.h's struct zcp_plan_head as device
 * pointers, and its scratch (per net). CENTERNET: `blocks` blocks each keep the best `k`
 * candidates of `chunk` flat indices, into lists [blocks][k]; one block merges them, decodes
 * and post-processes. CLASSIFY: probs [classes].
 */
struct khead {
        int kind;                              /* enum zcp_head_kind */
        const float *scores, *sizes;
        uint32_t scores_stride, sizes_stride;
        uint32_t h, w, classes, k;
        float stride;
        uint32_t total, blocks, chunk;
        unsigned long long *lists;
        float *probs;
};

/* Plans blocks and chunk; the scratch bytes (lists or probs) it needs. */
size_t khead_plan(khead *h, int sms);
cudaError_t khead_launch(const khead *h, uint32_t top_k, const struct zcp_det_params *det, struct zcp_result *stage,
                         struct zcp_result *publish, bool pdl, cudaStream_t st);
