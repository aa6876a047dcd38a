/* SPDX-License-Identifier: MIT */
/*
 * A plan's heads (model/plan.h) on the GPU, written into the stage block and published.
 *
 * CENTERNET, two launches. cn_blocks: each block takes a run of flat indices
 * (y * w + x) * classes + c of the heatmap, CN_U a thread at a time, tests each value against
 * the score threshold and the 3x3 peak rule of zcp_ref_centernet, and keeps its best `k` as 64-bit keys (the value's
 * bits made orderable, then the complement of the flat index: larger key = larger value, ties
 * to the lower index, as TopKV2 and the reference order them), appended to a shared-memory
 * buffer and cut back to the best k by a bitonic sort whenever it fills. cn_merge: one block
 * streams every block's keys through the same buffer, decodes the best k (class, score, box in
 * input pixels: the reference's float operations), and post-processes them as
 * infer/detect.c does: score threshold, class filter, boxes to frame pixels, and the per-class
 * suppression in candidate order (the IoU of every candidate pair of one class in parallel, the
 * greedy pass over the bit rows by one thread), at most max_det. The threshold test before the
 * cut changes nothing: the candidates at or over it are a prefix of the reference's list.
 *
 * CLASSIFY, one block: softmax (max, exp, sum, divide; the sum reassociated) and the top-k by
 * probability, ties to the lower class, one block-wide arg-max per entry.
 *
 * Compiled with --fmad=false: the boxes, IoUs and probabilities are the reference's operations.
 */
#include "plan.cuh"

#define TK_BUF  2048          /* keys a block buffers */
#define CN_T    256           /* threads of cn_blocks */
#define CN_U    4             /* values a cn_blocks thread loads at once */
#define CM_T    512           /* threads of cn_merge */
static_assert(CN_U * CN_T < TK_BUF && CM_T < TK_BUF, "a round's keys fit the buffer beside the kept ones");
static_assert(2 * CM_T >= 1024, "cn_merge's prefix sums: two blocks' counts a thread, up to 1024 blocks");
#define CL_T    256           /* threads of the classifier's head */
#define OV_W    (ZCP_K_CANDIDATES_MAX / 32)

struct topk_sh {
        uint32_t count;
        unsigned long long floor;     /* a key must be larger to enter (0: any) */
};

/* Sorts buf[0, n2) descending (n2 a power of two), every thread of the block. */
static __device__ void bitonic_desc(unsigned long long *buf, uint32_t n2)
{
        for (uint32_t size = 2; size <= n2; size <<= 1)
                for (uint32_t stride = size / 2; stride > 0; stride >>= 1) {
                        for (uint32_t i = threadIdx.x; i < n2 / 2; i += blockDim.x) {
                                const uint32_t lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
                                const bool desc = (lo & size) == 0;
                                const unsigned long long x = buf[lo], y = buf[hi];
                                if ((x < y) == desc) {
                                        buf[lo] = y;
                                        buf[hi] = x;
                                }
                        }
                        __syncthreads();
                }
}

/* The buffer's best min(count, k) keys first, sorted; the floor raised when k are kept. */
static __device__ void topk_flush(unsigned long long *buf, topk_sh *s, uint32_t k)
{
        const uint32_t n = s->count;
        uint32_t n2 = 2;

        while (n2 < n)
                n2 <<= 1;
        for (uint32_t i = n + threadIdx.x; i < n2; i += blockDim.x)
                buf[i] = 0;
        __syncthreads();
        bitonic_desc(buf, n2);
        if (threadIdx.x == 0) {
                s->count = n < k ? n : k;
                s->floor = n >= k ? buf[k - 1] : 0;
        }
        __syncthreads();
}

/*
 * The best k keys of j in [begin, end), into buf[0, s->count), sorted descending. A round takes U
 * indices a thread: first the U values pre_of(j) (independent loads, all in flight at once), then
 * their keys key_of(j, value) (which may load more for the few that need it), then the buffer.
 * Keys are unique, so the order they enter the buffer in changes nothing.
 */
template <uint32_t U, typename P, typename F>
static __device__ void topk_collect(unsigned long long *buf, topk_sh *s, uint32_t k, uint32_t begin, uint32_t end,
                                    P pre_of, F key_of)
{
        static_assert(U >= 1, "a value a thread at least");
        if (threadIdx.x == 0) {
                s->count = 0;
                s->floor = 0;
        }
        __syncthreads();
        for (uint32_t base = begin; base < end; base += U * blockDim.x) {
                decltype(pre_of(0u)) pre[U];
                unsigned long long key[U];
#pragma unroll
                for (uint32_t u = 0; u < U; u++) {
                        const uint32_t j = base + u * blockDim.x + threadIdx.x;
                        if (j < end)
                                pre[u] = pre_of(j);
                }
#pragma unroll
                for (uint32_t u = 0; u < U; u++) {
                        const uint32_t j = base + u * blockDim.x + threadIdx.x;
                        key[u] = j < end ? key_of(j, pre[u]) : 0ull;
                }
                const bool full = s->count > TK_BUF - U * blockDim.x;

                __syncthreads();   /* every thread has read the count before any adds to it: one decision */
                if (full)
                        topk_flush(buf, s, k);
#pragma unroll
                for (uint32_t u = 0; u < U; u++)
                        if (key[u] > s->floor)
                                buf[atomicAdd(&s->count, 1u)] = key[u];
                __syncthreads();
        }
        topk_flush(buf, s, k);
}

static __device__ __forceinline__ uint32_t ord_bits(float v)
{
        const uint32_t u = __float_as_uint(v);
        return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Flat index e's heat value. */
static __device__ __forceinline__ float cn_value(const khead &h, uint32_t e)
{
        const uint32_t c = e % h.classes, px = e / h.classes;

        return h.scores[(size_t)px * h.scores_stride + c];
}

/* Flat index e's key when its value v is a candidate at or over thr, else 0. */
static __device__ __forceinline__ unsigned long long cn_key(const khead &h, uint32_t e, float v, float thr)
{
        const uint32_t c = e % h.classes, px = e / h.classes, y = px / h.w, x = px - y * h.w;

        if (!(v >= thr))
                return 0;
        for (uint32_t yy = y ? y - 1 : 0; yy <= y + 1 && yy < h.h; yy++)
                for (uint32_t xx = x ? x - 1 : 0; xx <= x + 1 && xx < h.w; xx++)
                        if (h.scores[((size_t)yy * h.w + xx) * h.scores_stride + c] > v)
                                return 0;
        return (unsigned long long)ord_bits(v) << 32 | (0xffffffffu - e);
}

static __global__ void __launch_bounds__(CN_T) cn_blocks(const khead h, float thr, uint32_t *counts)
{
        __shared__ unsigned long long buf[TK_BUF];
        __shared__ topk_sh s;
        const uint32_t begin = blockIdx.x * h.chunk, end = min(begin + h.chunk, h.total);

        kpdl_wait();
        topk_collect<CN_U>(
                buf, &s, h.k, begin, end, [&](uint32_t e) { return cn_value(h, e); },
                [&](uint32_t e, float v) { return cn_key(h, e, v, thr); });
        for (uint32_t i = threadIdx.x; i < s.count; i += CN_T)   /* cn_merge reads the first counts[b] */
                h.lists[(size_t)blockIdx.x * h.k + i] = buf[i];
        if (threadIdx.x == 0)
                counts[blockIdx.x] = s.count;
}

static __device__ __forceinline__ float clampf(float v, float hi)
{
        return fminf(fmaxf(v, 0.0f), hi);
}

/* infer/detect.c iou(), operation for operation. */
static __device__ float kiou(const float *a, const float *b)
{
        const float iw = fminf(a[2], b[2]) - fmaxf(a[0], b[0]);
        const float ih = fminf(a[3], b[3]) - fmaxf(a[1], b[1]);
        const float inter = fmaxf(iw, 0.0f) * fmaxf(ih, 0.0f);
        const float area_a = (a[2] - a[0]) * (a[3] - a[1]);
        const float area_b = (b[2] - b[0]) * (b[3] - b[1]);
        const float uni = (area_a + area_b) - inter;

        return uni > 0.0f ? inter / uni : 0.0f;
}

static __global__ void __launch_bounds__(CM_T) cn_merge(const khead h, const zcp_det_params det, const uint32_t *counts,
                                                        zcp_result *stage, zcp_result *publish)
{
        __shared__ unsigned long long buf[TK_BUF];
        __shared__ topk_sh s;
        __shared__ uint32_t s_first[1024 + 1];       /* prefix sums of the blocks' counts */
        __shared__ float s_box[ZCP_K_CANDIDATES_MAX][4];
        __shared__ float s_score[ZCP_K_CANDIDATES_MAX];
        __shared__ uint32_t s_cls[ZCP_K_CANDIDATES_MAX];
        __shared__ bool s_pass[ZCP_K_CANDIDATES_MAX];
        __shared__ uint32_t s_ov[ZCP_K_CANDIDATES_MAX][OV_W];
        __shared__ uint32_t s_keep[ZCP_DET_MAX];
        __shared__ uint32_t s_kept;
        const uint32_t tid = threadIdx.x;

        kpdl_wait();
        {
                /* s_first: the exclusive prefix sums of the counts, every count loaded at once (a thread
                 * loading them one after another waited a round trip each) */
                __shared__ uint32_t s_warp[CM_T / 32];
                const uint32_t lane = tid & 31, warp = tid >> 5, b0 = 2 * tid;
                const uint32_t c0 = b0 < h.blocks ? counts[b0] : 0, c1 = b0 + 1 < h.blocks ? counts[b0 + 1] : 0;
                uint32_t v = c0 + c1;
#pragma unroll
                for (uint32_t o = 1; o < 32; o <<= 1) {
                        const uint32_t u = __shfl_up_sync(0xffffffffu, v, o);
                        if (lane >= o)
                                v += u;
                }
                if (lane == 31)
                        s_warp[warp] = v;
                __syncthreads();
                if (warp == 0) {
                        uint32_t w = lane < CM_T / 32 ? s_warp[lane] : 0;
#pragma unroll
                        for (uint32_t o = 1; o < 32; o <<= 1) {
                                const uint32_t u = __shfl_up_sync(0xffffffffu, w, o);
                                if (lane >= o)
                                        w += u;
                        }
                        if (lane < CM_T / 32)
                                s_warp[lane] = w;
                }
                __syncthreads();
                v = v - (c0 + c1) + (warp ? s_warp[warp - 1] : 0);
                if (b0 < h.blocks)
                        s_first[b0] = v;
                if (b0 + 1 < h.blocks)
                        s_first[b0 + 1] = v + c0;
                if (tid == 0)
                        s_first[h.blocks] = s_warp[CM_T / 32 - 1];
                __syncthreads();
        }
        topk_collect<1>(
                buf, &s, h.k, 0, s_first[h.blocks],
                [&](uint32_t j) {
                        uint32_t lo = 0, hi = h.blocks;   /* the block b with s_first[b] <= j < s_first[b + 1] */
                        while (hi - lo > 1) {
                                const uint32_t mid = (lo + hi) / 2;
                                if (s_first[mid] <= j)
                                        lo = mid;
                                else
                                        hi = mid;
                        }
                        return h.lists[(size_t)lo * h.k + (j - s_first[lo])];
                },
                [](uint32_t, unsigned long long key) { return key; });
        const uint32_t n = s.count;

        /* Decode (zcp_ref_centernet) and the frame mapping (zcp_detect_post). */
        for (uint32_t i = tid; i < n; i += CM_T) {
                const uint32_t e = 0xffffffffu - (uint32_t)buf[i];
                const uint32_t c = e % h.classes, px = e / h.classes, y = px / h.w, x = px - y * h.w;
                const float v = h.scores[(size_t)px * h.scores_stride + c];
                const float *sz = h.sizes + (size_t)px * h.sizes_stride;
                const float bx0 = (float)x * h.stride - sz[0], by0 = (float)y * h.stride - sz[1];
                const float bx1 = (float)x * h.stride + sz[2], by1 = (float)y * h.stride + sz[3];

                s_cls[i] = c;
                s_score[i] = v;
                s_pass[i] = v >= det.min_score && c < ZCP_DET_CLASSES_MAX && (det.class_mask[c / 32] >> (c % 32) & 1u);
                s_box[i][0] = clampf((bx0 - det.off_x) * det.scale_x, det.frame_w);
                s_box[i][1] = clampf((by0 - det.off_y) * det.scale_y, det.frame_h);
                s_box[i][2] = clampf((bx1 - det.off_x) * det.scale_x, det.frame_w);
                s_box[i][3] = clampf((by1 - det.off_y) * det.scale_y, det.frame_h);
                for (uint32_t w = 0; w < OV_W; w++)
                        s_ov[i][w] = 0;
        }
        __syncthreads();
        /* Row i, bit j < i: candidates j and i of one class overlap more than nms_iou. */
        for (uint32_t q = tid; q < n * n; q += CM_T) {
                const uint32_t i = q / n, j = q - i * n;
                if (j < i && s_pass[i] && s_pass[j] && s_cls[i] == s_cls[j] && kiou(s_box[j], s_box[i]) > det.nms_iou)
                        atomicOr(&s_ov[i][j / 32], 1u << (j % 32));
        }
        __syncthreads();
        if (tid == 0) {
                uint32_t kept = 0, mask[OV_W] = { 0 };
                for (uint32_t i = 0; i < n && kept < det.max_det && kept < ZCP_DET_MAX; i++) {
                        bool drop = !s_pass[i];
                        for (uint32_t w = 0; w < OV_W && !drop; w++)
                                drop = (s_ov[i][w] & mask[w]) != 0;
                        if (drop)
                                continue;
                        mask[i / 32] |= 1u << (i % 32);
                        s_keep[kept++] = i;
                }
                s_kept = kept;
                stage->det_count = kept;
        }
        __syncthreads();
        for (uint32_t q = tid; q < s_kept; q += CM_T) {
                const uint32_t i = s_keep[q];
                zcp_detection *d = &stage->det[q];
                d->cls = s_cls[i];
                d->score = s_score[i];
                for (int b = 0; b < 4; b++)
                        d->box[b] = s_box[i][b];
        }
        __threadfence();
        __syncthreads();
        if (publish)
                kpublish_block(stage, publish);
}

/* ------------------------------------------------------------- classify */

/* The block's sum of v (a fixed tree), valid in every thread. */
static __device__ float block_sum(float v, float *sh)
{
        sh[threadIdx.x] = v;
        __syncthreads();
        for (uint32_t o = CL_T / 2; o > 0; o >>= 1) {
                if (threadIdx.x < o)
                        sh[threadIdx.x] = sh[threadIdx.x] + sh[threadIdx.x + o];
                __syncthreads();
        }
        v = sh[0];
        __syncthreads();
        return v;
}

static __global__ void __launch_bounds__(CL_T) cls_head(const khead h, uint32_t k, zcp_result *stage,
                                                        zcp_result *publish)
{
        __shared__ float sh[CL_T];
        __shared__ uint32_t si[CL_T];
        const uint32_t tid = threadIdx.x;
        const float *logit = h.scores;
        float m = -INFINITY, sum = 0.0f;

        kpdl_wait();
        for (uint32_t c = tid; c < h.classes; c += CL_T)
                m = logit[c] > m ? logit[c] : m;
        sh[tid] = m;
        __syncthreads();
        for (uint32_t o = CL_T / 2; o > 0; o >>= 1) {
                if (tid < o && sh[tid + o] > sh[tid])
                        sh[tid] = sh[tid + o];
                __syncthreads();
        }
        m = sh[0];
        __syncthreads();
        for (uint32_t c = tid; c < h.classes; c += CL_T) {
                const float e = expf(logit[c] - m);
                h.probs[c] = e;
                sum = sum + e;
        }
        sum = block_sum(sum, sh);
        for (uint32_t c = tid; c < h.classes; c += CL_T)
                h.probs[c] = h.probs[c] / sum;
        __syncthreads();
        for (uint32_t r = 0; r < k; r++) {
                float best = -1.0f;
                uint32_t bc = UINT32_MAX;
                for (uint32_t c = tid; c < h.classes; c += CL_T) {
                        const float p = h.probs[c];
                        if (p > best) {   /* c ascends: an equal later one never wins */
                                best = p;
                                bc = c;
                        }
                }
                sh[tid] = best;
                si[tid] = bc;
                __syncthreads();
                for (uint32_t o = CL_T / 2; o > 0; o >>= 1) {
                        if (tid < o && (sh[tid + o] > sh[tid] || (sh[tid + o] == sh[tid] && si[tid + o] < si[tid]))) {
                                sh[tid] = sh[tid + o];
                                si[tid] = si[tid + o];
                        }
                        __syncthreads();
                }
                if (tid == 0) {
                        stage->topk_class[r] = si[0];
                        stage->topk_prob[r] = sh[0];
                        h.probs[si[0]] = -2.0f;   /* taken */
                }
                __syncthreads();
        }
        if (tid == 0)
                stage->topk_count = k;
        __threadfence();
        __syncthreads();
        if (publish)
                kpublish_block(stage, publish);
}

/* ------------------------------------------------------------------ host */

size_t khead_plan(khead *h, int sms)
{
        if (h->kind == ZCP_HEAD_CLASSIFY)
                return sizeof(float) * h->classes;
        h->total = h->h * h->w * h->classes;
        {
                uint32_t blocks = (h->total + 4095) / 4096;
                const uint32_t most = 2u * (uint32_t)sms < 1024 ? 2u * (uint32_t)sms : 1024;
                blocks = blocks < 1 ? 1 : blocks > most ? most : blocks;
                h->chunk = (h->total + blocks - 1) / blocks;
                h->blocks = (h->total + h->chunk - 1) / h->chunk;
        }
        /* the lists, then the counts */
        return sizeof(unsigned long long) * h->blocks * h->k + sizeof(uint32_t) * h->blocks;
}

cudaError_t khead_launch(const khead *h, uint32_t top_k, const struct zcp_det_params *det, struct zcp_result *stage,
                         struct zcp_result *publish, bool pdl, cudaStream_t st)
{
        if (h->kind == ZCP_HEAD_CLASSIFY) {
                uint32_t k = top_k < h->classes ? top_k : h->classes;
                k = k < ZCP_TOPK_MAX ? k : ZCP_TOPK_MAX;
                klaunch(pdl, cls_head, dim3(1), CL_T, st, *h, k, stage, publish);
        } else {
                uint32_t *counts = (uint32_t *)(h->lists + (size_t)h->blocks * h->k);
                if (!det)
                        return cudaErrorInvalidValue;
                klaunch(pdl, cn_blocks, dim3(h->blocks), CN_T, st, *h, det->min_score, counts);
                klaunch(pdl, cn_merge, dim3(1), CM_T, st, *h, *det, (const uint32_t *)counts, stage, publish);
        }
        return cudaGetLastError();
}
