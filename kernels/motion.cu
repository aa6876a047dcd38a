/* SPDX-License-Identifier: MIT */
/*
 * Motion on the GPU (DESIGN.md §4, reference.c's zcp_ref_motion): per cell, the
 * EMA background in device memory and the moving test; the moving count and
 * the bounding box are reduced per block and then across blocks with
 * atomics; the last block to finish writes the motion fields of the stage
 * block, resets the reduction scratch for the next frame and (optionally)
 * publishes the whole result block to the slot's mapped block (kcommon.cuh);
 * beside a model the head publishes, after motion.
 *
 * The moving mask (frame.h): each warp holds 32 consecutive cells, so one
 * __ballot_sync of the moving test is one mask word, stored by lane 0
 * straight into the slot's mapped mask (no atomics, every word written each
 * frame, zeros past the last cell). The storing lane fences (system scope)
 * before its block counts itself done, so the mask is complete and visible
 * before the last block writes the stage block, and so before whichever
 * kernel publishes the result writes `valid`.
 *
 * Float operations mirror reference.c exactly (__fsub_rn/__fmul_rn/__fadd_rn,
 * IEEE division), so the background and the results are bit-identical.
 * Also here: the stage/publish helpers and the self test.
 */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "kcommon.cuh"

#define MOTION_THREADS 256

/* Reduction scratch in device memory; between frames: count 0, min UINT32_MAX, max 0, done 0. */
struct mstate {
        uint32_t first;          /* non-zero: the next frame sets the background */
        uint32_t count;
        uint32_t min_x, min_y, max_x, max_y;
        uint32_t done;           /* blocks finished this frame */
        uint32_t pad;
};

struct zcp_k_motion {
        struct zcp_motion_params p;
        uint32_t grid_w, grid_h, n;
        float *bg;
        struct mstate *st;
        size_t dev_bytes;
};

struct motion_args {
        const uint32_t *grid;
        float *bg;
        struct mstate *st;
        uint32_t grid_w, n, cell, W, H;
        float threshold, alpha;
        struct zcp_result *stage, *publish;
        uint32_t *mask;          /* the slot's mask (mapped), mask_words words; NULL: none */
        uint32_t grid_h, mask_words;
};

static __device__ __forceinline__ uint32_t block_reduce(uint32_t v, int op, uint32_t *s)
{
        const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;

#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
                const uint32_t t = __shfl_xor_sync(0xffffffffu, v, o);
                v = op == 0 ? v + t : op == 1 ? min(v, t) : max(v, t);
        }
        if (lane == 0)
                s[warp] = v;
        __syncthreads();
        if (threadIdx.x == 0)
                for (int i = 1; i < MOTION_THREADS / 32; i++)
                        v = op == 0 ? v + s[i] : op == 1 ? min(v, s[i]) : max(v, s[i]);
        __syncthreads();
        return v;   /* valid in thread 0 */
}

static __global__ void __launch_bounds__(MOTION_THREADS) motion(const motion_args a)
{
        __shared__ uint32_t s_red[MOTION_THREADS / 32];
        __shared__ bool s_last;
        const uint32_t i = blockIdx.x * MOTION_THREADS + threadIdx.x;
        const bool first = *(volatile uint32_t *)&a.st->first != 0;
        uint32_t mv = 0, gx = 0, gy = 0;

        if (i < a.n) {
                const float m = (float)__ldg(a.grid + i);
                if (first) {
                        a.bg[i] = m;
                } else {
                        const float bgv = a.bg[i];
                        float t = __fsub_rn(m, bgv);
                        mv = fabsf(t) > a.threshold;
                        t = __fmul_rn(a.alpha, t);
                        a.bg[i] = __fadd_rn(bgv, t);
                        gy = i / a.grid_w;
                        gx = i - gy * a.grid_w;
                }
        }
        /* All lanes are here (no early exit above): one word of 32 cells per warp. */
        const uint32_t word = __ballot_sync(0xffffffffu, mv != 0);
        if (a.mask && (threadIdx.x & 31) == 0 && i / 32 < a.mask_words) {
                a.mask[i / 32] = word;
                __threadfence_system();
        }
        const uint32_t count = block_reduce(mv, 0, s_red);
        const uint32_t min_x = block_reduce(mv ? gx : UINT32_MAX, 1, s_red);
        const uint32_t min_y = block_reduce(mv ? gy : UINT32_MAX, 1, s_red);
        const uint32_t max_x = block_reduce(mv ? gx : 0, 2, s_red);
        const uint32_t max_y = block_reduce(mv ? gy : 0, 2, s_red);
        if (threadIdx.x == 0) {
                if (count) {
                        atomicAdd(&a.st->count, count);
                        atomicMin(&a.st->min_x, min_x);
                        atomicMin(&a.st->min_y, min_y);
                        atomicMax(&a.st->max_x, max_x);
                        atomicMax(&a.st->max_y, max_y);
                }
                __threadfence();
                s_last = atomicAdd(&a.st->done, 1u) == gridDim.x - 1;
        }
        __syncthreads();
        if (!s_last)
                return;

        if (threadIdx.x == 0) {
                volatile struct mstate *st = a.st;
                struct zcp_result *r = a.stage;
                const uint32_t moving = st->count;

                __threadfence();
                r->moving_cells = moving;
                r->total_cells = a.n;
                r->grid_w = a.grid_w;
                r->grid_h = a.grid_h;
                r->mask_words = a.mask ? a.mask_words : 0;
                r->moving_fraction = __fdiv_rn((float)moving, (float)a.n);
                if (moving == 0) {
                        r->bbox[0] = r->bbox[1] = r->bbox[2] = r->bbox[3] = -1;
                } else {
                        const uint32_t x1 = (st->max_x + 1) * a.cell, y1 = (st->max_y + 1) * a.cell;
                        r->bbox[0] = (int32_t)(st->min_x * a.cell);
                        r->bbox[1] = (int32_t)(st->min_y * a.cell);
                        r->bbox[2] = (int32_t)(x1 < a.W ? x1 : a.W);
                        r->bbox[3] = (int32_t)(y1 < a.H ? y1 : a.H);
                }
                st->count = 0;
                st->min_x = st->min_y = UINT32_MAX;
                st->max_x = st->max_y = 0;
                st->done = 0;
                st->first = 0;
                __threadfence();
        }
        __syncthreads();
        if (a.publish)
                kpublish_block(a.stage, a.publish);
}

static __global__ void motion_reset(struct mstate *st)
{
        st->first = 1;
}

static __global__ void publish(const struct zcp_result *stage, struct zcp_result *dst)
{
        kpublish_block(stage, dst);
}

static __global__ void empty(void)
{
}

static __global__ void selftest(uint32_t *out)
{
        out[threadIdx.x] = threadIdx.x * 3u + 1u;
}

int zcp_k_motion_new(const struct zcp_motion_params *p, struct zcp_k_motion **ret_motion, char *errbuf,
                     size_t errlen)
{
        struct zcp_k_motion *mo;
        struct mstate init;
        cudaError_t e;

        if (p->cell == 0 || p->width == 0 || p->height == 0) {
                kerr(errbuf, errlen, "motion: unsupported geometry %ux%u cell %u", p->width, p->height, p->cell);
                return cudaErrorInvalidValue;
        }
        mo = (struct zcp_k_motion *)calloc(1, sizeof(*mo));
        if (!mo) {
                kerr(errbuf, errlen, "out of host memory");
                return cudaErrorMemoryAllocation;
        }
        mo->p = *p;
        mo->grid_w = zcp_grid_w(p->width, p->cell);
        mo->grid_h = zcp_grid_h(p->height, p->cell);
        mo->n = mo->grid_w * mo->grid_h;
        if ((e = kmalloc((void **)&mo->bg, sizeof(float) * mo->n, "motion background", errbuf, errlen)) ||
            (e = kmalloc((void **)&mo->st, sizeof(struct mstate), "motion state", errbuf, errlen)))
                goto fail;
        mo->dev_bytes = sizeof(float) * mo->n + sizeof(struct mstate);
        memset(&init, 0, sizeof(init));
        init.first = 1;
        init.min_x = init.min_y = UINT32_MAX;
        if ((e = kupload(mo->st, &init, sizeof(init), "the motion state", errbuf, errlen)))
                goto fail;
        *ret_motion = mo;
        return cudaSuccess;
fail:
        zcp_k_motion_free(mo);
        return e;
}

void zcp_k_motion_free(struct zcp_k_motion *mo)
{
        if (!mo)
                return;
        cudaFree(mo->bg);
        cudaFree(mo->st);
        free(mo);
}

size_t zcp_k_motion_device_bytes(const struct zcp_k_motion *mo)
{
        return mo ? mo->dev_bytes : 0;
}

int zcp_k_motion_reset(struct zcp_k_motion *mo, void *stream)
{
        motion_reset<<<1, 1, 0, (cudaStream_t)stream>>>(mo->st);
        return cudaGetLastError();
}

int zcp_k_motion_read_bg(const struct zcp_k_motion *mo, float *ret_bg)
{
        return cudaMemcpy(ret_bg, mo->bg, sizeof(float) * mo->n, cudaMemcpyDeviceToHost);
}

int zcp_k_motion(const struct zcp_k_motion *mo, const uint32_t *grid_dev, struct zcp_result *stage_dev,
                 struct zcp_result *publish_dev, uint32_t *mask_dev, void *stream)
{
        motion_args a;

        if (!mo || !grid_dev || !stage_dev || ((uintptr_t)mask_dev & 3))
                return cudaErrorInvalidValue;
        a.grid = grid_dev;
        a.bg = mo->bg;
        a.st = mo->st;
        a.grid_w = mo->grid_w;
        a.n = mo->n;
        a.cell = mo->p.cell;
        a.W = mo->p.width;
        a.H = mo->p.height;
        a.threshold = mo->p.threshold;
        a.alpha = mo->p.alpha;
        a.stage = stage_dev;
        a.publish = publish_dev;
        a.mask = mask_dev;
        a.grid_h = mo->grid_h;
        a.mask_words = zcp_mask_words(mo->n);
        motion<<<(mo->n + MOTION_THREADS - 1) / MOTION_THREADS, MOTION_THREADS, 0, (cudaStream_t)stream>>>(a);
        return cudaGetLastError();
}

int zcp_k_stage_init(struct zcp_result *stage_dev)
{
        struct zcp_result r;

        memset(&r, 0, sizeof(r));
        for (int i = 0; i < 4; i++)
                r.bbox[i] = -1;
        return cudaMemcpy(stage_dev, &r, sizeof(r), cudaMemcpyHostToDevice);
}

int zcp_k_publish(const struct zcp_result *stage_dev, struct zcp_result *publish_dev, void *stream)
{
        if (!stage_dev || !publish_dev)
                return cudaErrorInvalidValue;
        publish<<<1, 64, 0, (cudaStream_t)stream>>>(stage_dev, publish_dev);
        return cudaGetLastError();
}

int zcp_k_empty(void *stream)
{
        empty<<<1, 32, 0, (cudaStream_t)stream>>>();
        return cudaGetLastError();
}

/* An empty kernel that waits for the one before it when launched dependent, as the plan's do. */
static __global__ void empty_dependent()
{
        kpdl_wait();
}

int zcp_k_empty_chain(void *stream, unsigned n, unsigned blocks, int dependent)
{
        const bool pdl = dependent && kpdl_enabled();

        for (unsigned i = 0; i < n; i++)
                klaunch(pdl && i > 0, empty_dependent, dim3(blocks), 256, (cudaStream_t)stream);
        return cudaGetLastError();
}

int zcp_k_selftest(void)
{
        uint32_t *d = NULL, h[32];
        cudaError_t e;

        if ((e = cudaMalloc((void **)&d, sizeof(h))) != cudaSuccess)
                return e;
        selftest<<<1, 32>>>(d);
        if ((e = cudaGetLastError()) == cudaSuccess && (e = cudaDeviceSynchronize()) == cudaSuccess &&
            (e = cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost)) == cudaSuccess) {
                for (uint32_t i = 0; i < 32; i++)
                        if (h[i] != i * 3u + 1u)
                                e = cudaErrorUnknown;
        }
        cudaFree(d);
        return e;
}

int zcp_k_code_version(int *ret_ptx, int *ret_binary)
{
        cudaFuncAttributes a;
        cudaError_t e = cudaFuncGetAttributes(&a, selftest);

        if (e != cudaSuccess)
                return e;
        *ret_ptx = a.ptxVersion;
        *ret_binary = a.binaryVersion;
        return cudaSuccess;
}

int zcp_k_dependent_launch(void)
{
        return kpdl_enabled();
}
