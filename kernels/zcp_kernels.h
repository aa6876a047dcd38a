/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The C ABI of the CUDA kernels (the .cu files beside this), used by src/infer/cuda*.c and
 * tests/kernels. Plain C types only; a CUDA stream is passed as `void *` (cudaStream_t), NULL
 * meaning the legacy default stream, and so are CUDA graphs, graph execs and graph nodes
 * (cudaGraph_t, cudaGraphExec_t, cudaGraphNode_t).
 *
 * Every function returns 0 or a cudaError_t value (> 0): the caller (the boundary, cuda.c)
 * classifies and logs it. Launchers are asynchronous on their stream, allocate nothing, never
 * synchronize and may be captured into a CUDA graph. The _new()/_acquire() functions allocate
 * device memory (cudaMalloc) and upload tables synchronously on the current device; on failure
 * they write one line naming what failed into errbuf. _new()/_free(): main thread; launchers:
 * any one thread per object at a time.
 *
 * Float math: the preprocess tensor, the motion grid and the motion results are bit-identical
 * to the C reference (src/infer/reference.c); a plan's ops follow model/plan.h, the sums of
 * convolutions and means reassociated (and fused multiply-adds in them), every other operation
 * as the reference does it; the heads' decode and post-processing are bit-identical to
 * zcp_ref_centernet + zcp_detect_post on the same arena.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/frame.h"
#include "core/kparams.h"
#include "model/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ preprocess */

/*
 * Fused preprocess of one NV12 frame (tightly packed: Y plane of width*height bytes, then the
 * interleaved UV plane of width*height/2) into the model input (p: NHWC or NCHW, pixels 0..1 or
 * 0..255, mean/std, stretch or letterbox: zcp_pre_region) and the motion grid of integer cell
 * means. Pass 1 (the scan) reads the frame once with coalesced 16-byte loads: the whole luma
 * plane when the grid is wanted, otherwise only the rows the resize samples, and only the
 * chroma rows the resize samples; those rows are stashed in device memory. Pass 2 resizes from
 * the stash into the tensor and turns the cell sums into means. With both outputs and a width
 * that is a multiple of 16 the scan is split: the sampled rows first (zcp_k_pre_scan), the
 * other luma rows beside the network (zcp_k_pre_grid). The frame pointer may be a mapped host
 * pointer (zero copy) or device memory; it must be 16-byte aligned and readable up to
 * zcp_k_frame_bytes_padded() bytes.
 */
struct zcp_k_pre;

/* NV12 bytes rounded up to 16: what pass 1 may read. */
size_t zcp_k_frame_bytes_padded(uint32_t width, uint32_t height);

/* Plans the preprocess of p's geometry. want_tensor / want_grid select the outputs (at least one). */
int zcp_k_pre_new(const struct zcp_preprocess_params *p, bool want_tensor, bool want_grid,
                  struct zcp_k_pre **ret_pre, char *errbuf, size_t errlen);
void zcp_k_pre_free(struct zcp_k_pre *pre);
/* Device bytes the plan holds (for logs). */
size_t zcp_k_pre_device_bytes(const struct zcp_k_pre *pre);
/*
 * 16-byte vectors each pass-1 thread loads (1, 2 or 4: blocks of 4, 8 or 16 KiB). _new picks
 * the most that still gives two blocks per multiprocessor; set_vectors overrides it (tests,
 * benchmarks). Not while a launch is pending.
 */
uint32_t zcp_k_pre_vectors(const struct zcp_k_pre *pre);
int zcp_k_pre_set_vectors(struct zcp_k_pre *pre, uint32_t nv);
/* Whether the scan is split (zcp_k_pre_scan reads the sampled rows only); tests. */
bool zcp_k_pre_split(const struct zcp_k_pre *pre);

/*
 * tensor_dev: the plan's input (p->nhwc: float [in_h][in_w][3], else [3][in_h][in_w]; needed
 * when planned with want_tensor); grid_dev: uint32_t [grid_h][grid_w] (want_grid).
 */
int zcp_k_preprocess(const struct zcp_k_pre *pre, const uint8_t *nv12, float *tensor_dev, uint32_t *grid_dev,
                     void *stream);

/*
 * zcp_k_preprocess() in three parts, for a graph where the grid's part runs beside the
 * tensor's: zcp_k_pre_scan() reads the rows the tensor needs (and sums their luma into the
 * cells) or, where the plan does not split, the whole frame; then, both after it and in any
 * order or concurrently, zcp_k_pre_tensor() (the resize, from the stash) and zcp_k_pre_grid()
 * (the other luma rows of the same frame, then the cell means). Each is a no-op for an output
 * the plan does not make. The scan's node is the frame node (zcp_k_pre_frame_node); the grid's
 * part reads the frame pointer the scan left in device memory, so one launch of the three at a
 * time per plan.
 */
int zcp_k_pre_scan(const struct zcp_k_pre *pre, const uint8_t *nv12, void *stream);
int zcp_k_pre_tensor(const struct zcp_k_pre *pre, float *tensor_dev, void *stream);
int zcp_k_pre_grid(const struct zcp_k_pre *pre, uint32_t *grid_dev, void *stream);

/*
 * For a frame already in device memory (copy mode), where no stash is worth making first:
 * zcp_k_pre_tensor_direct() resizes straight from the frame's rows and zcp_k_pre_grid_direct()
 * scans every luma row into the cells and makes the means; the two are independent, for a graph
 * to run side by side, one launch of each at a time per plan. The same results as
 * zcp_k_preprocess(), bit for bit. zcp_k_pre_direct() says whether the plan has them (both
 * outputs, a width that is a multiple of 16, a cell window that fits); cudaErrorInvalidValue
 * otherwise. Each node carries nv12 itself (16-byte aligned, device memory): neither is a frame
 * node for zcp_k_pre_set_frame().
 */
bool zcp_k_pre_direct(const struct zcp_k_pre *pre);
int zcp_k_pre_tensor_direct(const struct zcp_k_pre *pre, const uint8_t *nv12, float *tensor_dev, void *stream);
int zcp_k_pre_grid_direct(const struct zcp_k_pre *pre, const uint8_t *nv12, uint32_t *grid_dev, void *stream);

/*
 * Frames that move (a capture driver's buffers lent to a ring slot): a graph captured with
 * zcp_k_preprocess() reads the frame pointer it was captured with; these change it in an
 * instantiated exec without capturing again.
 *
 * zcp_k_pre_frame_node() finds, in `graph` (cudaGraph_t), the node that reads the frame: the
 * pass-1 kernel node of the one zcp_k_preprocess() (or zcp_k_pre_scan()) of `pre` captured
 * there (cudaErrorInvalidValue when there is none or more than one). The node belongs to the
 * graph: keep the graph alive as long as any exec instantiated from it is changed through the
 * node. Allocates (a node list): at setup, not per frame.
 *
 * zcp_k_pre_set_frame() makes `exec` (instantiated from that graph) read `nv12` in every later
 * launch; launches already enqueued keep the old pointer. `pre` must be the plan the graph was
 * captured with and its vectors per thread unchanged since. nv12 16-byte aligned
 * (cudaErrorInvalidValue otherwise, nothing changed). Allocates nothing, does not synchronize;
 * the thread that launches the exec.
 */
int zcp_k_pre_frame_node(const struct zcp_k_pre *pre, void *graph, void **ret_node);
int zcp_k_pre_set_frame(const struct zcp_k_pre *pre, void *exec, void *node, const uint8_t *nv12);

/* ------------------------------------------------------------------ plans */

/*
 * A plan's weights on one device (model/plan.h), uploaded once and shared: acquiring the same
 * plan (the same pointer: zcp_model_acquire shares plans) on the same device returns the same
 * object with one more reference. The plan must outlive it. Any thread (a mutex inside); the
 * current device is the one used.
 */
struct zcp_k_model;
int zcp_k_model_acquire(const struct zcp_plan *plan, struct zcp_k_model **ret_model, char *errbuf, size_t errlen);
void zcp_k_model_release(struct zcp_k_model *model);
size_t zcp_k_model_device_bytes(const struct zcp_k_model *model);

/*
 * How the dense convolutions' sums run: FFMA (float32 fused multiply-adds), TF32X3 (tensor
 * cores with the error-compensated split: x*w ~ xh*wh + xh*wl + xl*wh with x = xh + xl, w =
 * wh + wl in TF32; float32-like error, ~1e-7 of the terms) or AUTO (this build's choice:
 * ZCP_K_GEMM_DEFAULT). Code JIT-compiled for GPUs before compute 8.0 has no tensor-core loop
 * and runs FFMA for TF32X3.
 */
enum zcp_k_gemm { ZCP_K_GEMM_AUTO, ZCP_K_GEMM_FFMA, ZCP_K_GEMM_TF32X3, ZCP_K_GEMM_COUNT };
#define ZCP_K_GEMM_DEFAULT ZCP_K_GEMM_TF32X3
extern const char *const zcp_k_gemm_names[ZCP_K_GEMM_COUNT];

/*
 * One stream's execution of a plan: the arena (plan->arena_floats floats of device memory,
 * laid out by the plan), the launches of every op worked out once, the heads' scratch. Nothing
 * is allocated per frame. Two launches of one net must not overlap (one stream per net). The net
 * holds a reference of its own to `model` (the caller may release its own after).
 * Refuses (cudaErrorNotSupported, with the reason) a plan whose CENTERNET head asks for more
 * than ZCP_K_CANDIDATES_MAX candidates or more than ZCP_DET_CLASSES_MAX classes.
 */
#define ZCP_K_CANDIDATES_MAX 256
struct zcp_k_net;
int zcp_k_net_new(struct zcp_k_model *model, enum zcp_k_gemm gemm, struct zcp_k_net **ret_net, char *errbuf,
                  size_t errlen);
void zcp_k_net_free(struct zcp_k_net *net);
size_t zcp_k_net_device_bytes(const struct zcp_k_net *net);
const struct zcp_plan *zcp_k_net_plan(const struct zcp_k_net *net);
/* The arena (device memory) and the input tensor in it: where the preprocess writes. */
float *zcp_k_net_arena(const struct zcp_k_net *net);
float *zcp_k_net_input(const struct zcp_k_net *net);
/*
 * Tests: every whole-K dense convolution of the net re-planned at gemm tiling `tile` (0 ..
 * zcp_k_net_tilings() - 1) from now on, in place of the one measured or modelled at
 * zcp_k_net_new (ZCP_GEMM_TUNE=0: modelled only); how many ops that re-planned. The tiling
 * changes the time, never a bit of the result.
 */
int zcp_k_net_tilings(void);
uint32_t zcp_k_net_retile(struct zcp_k_net *net, int tile);
/* Launches made for ops [first, first + count) (tests, benchmarks); and what op i runs as, for logs. */
uint32_t zcp_k_net_launches(const struct zcp_k_net *net, uint32_t first, uint32_t count);
const char *zcp_k_net_op_kernel(const struct zcp_k_net *net, uint32_t i);

/* Ops [first, first + count) of the plan on the arena, in order, each after the one before. */
int zcp_k_net_ops(const struct zcp_k_net *net, uint32_t first, uint32_t count, void *stream);
/* Every op, in the plan's two lanes (model/plan.h): lane 0 on `stream`, lane 1 on the net's own
 * stream beside it, joined by events; everything after on `stream` sees every op finished. In a
 * stream capture the second stream joins the capture. */
int zcp_k_net_forward(const struct zcp_k_net *net, void *stream);

/*
 * The head on the arena, into stage_dev (a device-memory result block): CLASSIFY writes
 * topk_count = min(top_k, classes, ZCP_TOPK_MAX) and topk_class/topk_prob (softmax, then
 * top-k by probability, ties to the lower class); CENTERNET writes det_count and det[] as
 * zcp_ref_centernet then zcp_detect_post(det) would (det required). With publish_dev (the
 * slot's mapped result block) the stage block (the motion fields included, so motion must have
 * written them before) is then copied there, `valid` = 1 written last after a system fence.
 */
int zcp_k_net_head(const struct zcp_k_net *net, uint32_t top_k, const struct zcp_det_params *det,
                   struct zcp_result *stage_dev, struct zcp_result *publish_dev, void *stream);

/* ----------------------------------------------------------------- motion */

/* Motion state on device: the EMA background and the reduction scratch. */
struct zcp_k_motion;

int zcp_k_motion_new(const struct zcp_motion_params *p, struct zcp_k_motion **ret_motion, char *errbuf,
                     size_t errlen);
void zcp_k_motion_free(struct zcp_k_motion *mo);
size_t zcp_k_motion_device_bytes(const struct zcp_k_motion *mo);
/* The next frame sets the background (as the first frame does). Asynchronous. */
int zcp_k_motion_reset(struct zcp_k_motion *mo, void *stream);
/* Copies the background [grid_h][grid_w] to host memory (synchronous; tests). */
int zcp_k_motion_read_bg(const struct zcp_k_motion *mo, float *ret_bg);

/*
 * Motion on the grid of cell means: updates the background and writes the motion fields of
 * stage_dev (device memory: counts, bbox, grid_w/grid_h, mask_words); with publish_dev, the
 * whole stage block is then copied there with valid = 1 written last. mask_dev (NULL: none;
 * else 4-byte aligned, zcp_mask_words(grid_w * grid_h) words, typically the slot's mapped mask)
 * receives the moving mask of frame.h, bit-identical to zcp_ref_motion's, complete before the
 * stage block is written (so before any `valid`).
 */
int zcp_k_motion(const struct zcp_k_motion *mo, const uint32_t *grid_dev, struct zcp_result *stage_dev,
                 struct zcp_result *publish_dev, uint32_t *mask_dev, void *stream);

/* ---------------------------------------------------------------- results */

/* Sets a device stage block to what the CPU backend writes before any stage: all zero, bbox all -1 (synchronous). */
int zcp_k_stage_init(struct zcp_result *stage_dev);
/* Copies stage_dev to publish_dev with valid = 1 last (when no other launcher publishes). */
int zcp_k_publish(const struct zcp_result *stage_dev, struct zcp_result *publish_dev, void *stream);

/* Launches an empty kernel (benchmarks measure the launch-and-sync floor with it). */
int zcp_k_empty(void *stream);
/* Launches n empty kernels of `blocks` blocks of 256 threads, each after the one before: dependent
 * (programmatic, as the plan's layers on compute 9.0+) when asked and supported. The floor of a
 * plan's chain of launches. */
int zcp_k_empty_chain(void *stream, unsigned n, unsigned blocks, int dependent);

/* Runs a trivial kernel and waits for it: 0 when kernels of this build run on the current device. */
int zcp_k_selftest(void);

/*
 * The code the current device runs for this build's kernels (cudaFuncGetAttributes of one of
 * them): the PTX architecture it came from and the machine code's architecture, e.g. 90/90 for
 * sm_90 machine code, 75/90 for the compute_75 PTX JIT-compiled for a 9.0 GPU.
 */
int zcp_k_code_version(int *ret_ptx, int *ret_binary);

/*
 * 1 when the per-stream objects made now launch the kernels after the scan dependent
 * (programmatic serialization: compute 9.0+ running code from compute 9.0+ PTX), else 0.
 */
int zcp_k_dependent_launch(void);

#ifdef __cplusplus
}
#endif
