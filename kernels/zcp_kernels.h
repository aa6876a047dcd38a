/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The C ABI of the CUDA kernels (the .cu files beside this), used by src/infer/cuda.c and
 * tests/kernels. Plain C types only; a CUDA stream is passed as `void *`
 * (cudaStream_t), NULL meaning the legacy default stream, and so are CUDA
 * graphs, graph execs and graph nodes (cudaGraph_t, cudaGraphExec_t,
 * cudaGraphNode_t).
 *
 * Every function returns 0 or a cudaError_t value (> 0): the caller (the
 * boundary, cuda.c) classifies and logs it. Launchers are asynchronous on
 * their stream, allocate nothing, never synchronize and may be captured into
 * a CUDA graph. The _new() functions allocate device memory (cudaMalloc) and upload
 * tables synchronously; on failure they write one line naming what failed
 * and the bytes asked for into errbuf. _new()/_free(): main thread; launchers:
 * any one thread per object at a time.
 *
 * The float math mirrors src/infer/reference.c operation for operation (that
 * file's header comment is the contract): the tensor, the motion grid and
 * the motion results are bit-identical to the C reference; the zcnet sums
 * are reduced in trees, within the 1e-4 relative score tolerance.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/frame.h"
#include "core/kparams.h"

#ifdef __cplusplus
extern "C" {
#endif

struct zcp_model; /* zcnet of the old kernels: replaced by plans (model/plan.h) */

/* ------------------------------------------------------------ preprocess */

/*
 * Fused preprocess of one NV12 frame (tightly packed: Y plane of width*height
 * bytes, then the interleaved UV plane of width*height/2). Pass 1 reads the
 * frame once with coalesced 16-byte loads: the whole luma plane (cell sums of
 * the motion grid) and only the chroma rows the resize samples; the luma and
 * chroma rows the bilinear resize samples are stashed in device memory.
 * Pass 2 resizes from the stash into the tensor and turns the cell sums into
 * means. With both outputs (and a width that is a multiple of 16) pass 1 is
 * two launches, the sampled rows first (zcp_k_pre_scan below). The frame pointer may be a mapped host pointer (zero copy) or device
 * memory; it must be 16-byte aligned and readable up to
 * zcp_k_frame_bytes_padded() bytes.
 */
struct zcp_k_pre;

/* NV12 bytes rounded up to 16: what pass 1 may read. */
size_t zcp_k_frame_bytes_padded(uint32_t width, uint32_t height);

/*
 * Plans the preprocess of p's geometry. want_tensor / want_grid select the
 * outputs (at least one). Returns 0 or a cudaError_t.
 */
int zcp_k_pre_new(const struct zcp_preprocess_params *p, bool want_tensor, bool want_grid,
                  struct zcp_k_pre **ret_pre, char *errbuf, size_t errlen);
void zcp_k_pre_free(struct zcp_k_pre *pre);
/* Device bytes the plan holds (for logs). */
size_t zcp_k_pre_device_bytes(const struct zcp_k_pre *pre);
/*
 * 16-byte vectors each pass-1 thread loads (1, 2 or 4: blocks of 4, 8 or
 * 16 KiB). _new picks the most that still gives two blocks per
 * multiprocessor (small frames: more blocks, more PCIe reads in flight);
 * set_vectors overrides it (benchmarks). Not while a launch is pending.
 */
uint32_t zcp_k_pre_vectors(const struct zcp_k_pre *pre);
int zcp_k_pre_set_vectors(struct zcp_k_pre *pre, uint32_t nv);

/*
 * tensor_dev: float [3][in_h][in_w] (needed when planned with want_tensor);
 * grid_dev: uint32_t [grid_h][grid_w] (needed when planned with want_grid).
 */
int zcp_k_preprocess(const struct zcp_k_pre *pre, const uint8_t *nv12, float *tensor_dev, uint32_t *grid_dev,
                     void *stream);

/*
 * zcp_k_preprocess() in three parts, for a graph where the grid's part runs
 * beside the tensor's: zcp_k_pre_scan() reads the rows the tensor needs (and
 * sums their luma into the cells) or, where the plan does not split (a
 * width not a multiple of 16, only one of the outputs), the whole frame;
 * then, both after it and in any order or concurrently, zcp_k_pre_tensor()
 * (the resize, from the stash) and zcp_k_pre_grid() (the other luma rows of
 * the same frame, then the cell means). Each is a no-op for an output the
 * plan does not make. The scan's node is the frame node
 * (zcp_k_pre_frame_node); the grid's part reads the frame pointer the scan
 * left in device memory, so one launch of the three at a time per plan.
 */
int zcp_k_pre_scan(const struct zcp_k_pre *pre, const uint8_t *nv12, void *stream);
int zcp_k_pre_tensor(const struct zcp_k_pre *pre, float *tensor_dev, void *stream);
int zcp_k_pre_grid(const struct zcp_k_pre *pre, uint32_t *grid_dev, void *stream);

/*
 * For a frame already in device memory (copy mode), where no stash is worth
 * making first: zcp_k_pre_tensor_direct() resizes straight from the frame's
 * rows and zcp_k_pre_grid_direct() scans every luma row into the cells and
 * makes the means; the two are independent (neither waits on a scan), for a
 * graph to run side by side, one launch of each at a time per plan. The
 * same results as zcp_k_preprocess(), bit for bit. zcp_k_pre_direct() says
 * whether the plan has them: both outputs, a width that is a multiple of 16,
 * a cell window that fits (and ZCP_PRE_DIRECT not "0"); cudaErrorInvalidValue
 * otherwise. Each node carries nv12 itself (16-byte aligned, device memory):
 * neither is a frame node for zcp_k_pre_set_frame().
 */
bool zcp_k_pre_direct(const struct zcp_k_pre *pre);
int zcp_k_pre_tensor_direct(const struct zcp_k_pre *pre, const uint8_t *nv12, float *tensor_dev, void *stream);
int zcp_k_pre_grid_direct(const struct zcp_k_pre *pre, const uint8_t *nv12, uint32_t *grid_dev, void *stream);

/*
 * Frames that move (a capture driver's buffers lent to a ring slot): a graph
 * captured with zcp_k_preprocess() reads the frame pointer it was captured
 * with; these change it in an instantiated exec without capturing again.
 *
 * zcp_k_pre_frame_node() finds, in `graph` (cudaGraph_t), the node that
 * reads the frame: the pass-1 kernel node of the one zcp_k_preprocess() (or
 * zcp_k_pre_scan()) of `pre` captured there (cudaErrorInvalidValue when there is none or more
 * than one). The node belongs to the graph: keep the graph alive as long as
 * any exec instantiated from it is changed through the node. Allocates (a
 * node list): at setup, not per frame.
 *
 * zcp_k_pre_set_frame() makes `exec` (cudaGraphExec_t, instantiated from
 * that graph) read `nv12` in every later launch; launches already enqueued
 * keep the old pointer. The kernel's other arguments are the node's, so
 * `pre` must be the plan the graph was captured with and its vectors per
 * thread unchanged since. nv12 as zcp_k_preprocess(): 16-byte aligned
 * (cudaErrorInvalidValue otherwise, nothing changed), readable by the GPU up
 * to zcp_k_frame_bytes_padded(). Allocates nothing, does not synchronize;
 * the thread that launches the exec, not while another thread launches it.
 */
int zcp_k_pre_frame_node(const struct zcp_k_pre *pre, void *graph, void **ret_node);
int zcp_k_pre_set_frame(const struct zcp_k_pre *pre, void *exec, void *node, const uint8_t *nv12);

/* ------------------------------------------------------------------ zcnet */

/*
 * One 3x3 convolution (padding 1, stride s) + bias + ReLU, NCHW float.
 * Variant: `split` warps share each output, warp j summing a contiguous run
 * of input channels, the partials added in a fixed order (1, 2, 4 or 8);
 * `ocpt` output channels per thread (1, 2 or 4). split 1 is exact: taps in
 * reference.c's order, bit-identical to the reference; split > 1 equals it up to
 * float reassociation. split ZCP_K_CONV_TILED is the shared-memory tiled
 * kernel (convtile.cu; stride 1 or 2). split 0 picks (zcp_k_conv_auto): the
 * tiled kernel wherever it applies; else (other strides, or ZCP_CONV_TILED=0
 * for measuring) exact while the outputs alone fill the GPU, except a first
 * layer (2 or 3 input channels): 2 x 4, measured faster. For tiled, `ocpt` is
 * its tiling, ZCP_K_TILE(twl, thl, cgl) (a tile of 2^twl x 2^thl output
 * pixels, 2^cgl groups of 4 channels per block) or 0 for the cheapest by its
 * cost model. Tiled and split sums equal the reference up to reassociation.
 */
#define ZCP_K_CONV_TILED 16u
#define ZCP_K_TILE(twl, thl, cgl) (0x8000u | (uint32_t)(twl) | (uint32_t)(thl) << 4 | (uint32_t)(cgl) << 8)
/* With a tiling code: the weights packed as the network keeps them (tests; copies them through host memory, so not
 * while a stream is being captured). */
#define ZCP_K_TILE_PACKED 0x10000u
/* With ZCP_K_TILE_PACKED (and a tiling or none): the channel loop on tensor cores in TF32 with the error-compensated
 * split (compute 8.0+, input channels a multiple of 8; 16-pixel-wide tiles, 8, 16 or 32 channels a block). */
#define ZCP_K_TILE_MMA 0x20000u
int zcp_k_conv3x3_relu(const float *in_dev, uint32_t in_ch, uint32_t in_w, uint32_t in_h,
                       const float *weight_dev, const float *bias_dev, uint32_t out_ch, uint32_t stride,
                       float *out_dev, void *stream);
int zcp_k_conv3x3_relu_variant(const float *in_dev, uint32_t in_ch, uint32_t in_w, uint32_t in_h,
                               const float *weight_dev, const float *bias_dev, uint32_t out_ch, uint32_t stride,
                               float *out_dev, uint32_t split, uint32_t ocpt, void *stream);
/* The variant split 0 resolves to for a layer (benchmarks, tests). */
void zcp_k_conv_auto(uint32_t in_ch, uint32_t in_w, uint32_t in_h, uint32_t out_ch, uint32_t stride,
                     uint32_t *ret_split, uint32_t *ret_ocpt);
/*
 * The tiling `code` (0: the rule's) resolves to for a layer, and the cost
 * model's estimate for it (cycles); -1 where the tiled kernel does not take
 * the layer or the code (benchmarks, tests).
 */
int zcp_k_conv_tile_info(uint32_t in_ch, uint32_t in_w, uint32_t in_h, uint32_t out_ch, uint32_t stride,
                         uint32_t code, uint32_t *ret_code, double *ret_cost);

/* Global average pool: in [ch][h][w] -> out [ch]. */
int zcp_k_avgpool(const float *in_dev, uint32_t ch, uint32_t w, uint32_t h, float *out_dev, void *stream);

/*
 * Fully connected + softmax + top-k (one launch): probs_dev [classes]
 * receives the probabilities; the top-k (k <= ZCP_TOPK_MAX, clamped to
 * classes) goes into stage_dev's topk fields (a device-memory result block).
 * If publish_dev is not NULL, the whole stage block is then copied there with
 * valid = 1 written last (the slot's mapped result block). sync_dev: one
 * uint32_t of device memory, zero before, left zero (the blocks' counter);
 * one per stream of launches.
 */
int zcp_k_fc_softmax_topk(const float *in_dev, uint32_t in_n, const float *weight_dev, const float *bias_dev,
                          uint32_t classes, uint32_t k, float *probs_dev, uint32_t *sync_dev,
                          struct zcp_result *stage_dev, struct zcp_result *publish_dev, void *stream);

/* The whole network on device: weights and activations. */
struct zcp_k_net;

int zcp_k_net_new(const struct zcp_model *m, uint32_t in_w, uint32_t in_h, struct zcp_k_net **ret_net,
                  char *errbuf, size_t errlen);
void zcp_k_net_free(struct zcp_k_net *net);
size_t zcp_k_net_device_bytes(const struct zcp_k_net *net);
/* Device probabilities of the last forward [classes] (tests). */
const float *zcp_k_net_probs(const struct zcp_k_net *net);

/*
 * The conv layers and the pool: into the net's pooled features, or (the
 * default, where the last layer allows it) its partial sums left by the last
 * layer, which zcp_k_net_head finishes (and then stores the pooled features).
 */
int zcp_k_net_features(const struct zcp_k_net *net, const float *tensor_dev, void *stream);
/* fc + softmax + top-k on the pooled features, as zcp_k_fc_softmax_topk. */
int zcp_k_net_head(const struct zcp_k_net *net, uint32_t k, struct zcp_result *stage_dev,
                   struct zcp_result *publish_dev, void *stream);
/*
 * Two publishers of one result block, so that neither waits for the other:
 * the head and motion (zcp_k_motion_meet) of one frame, each on its own
 * stream, share meet_dev (a device word, 0 before the first frame: one
 * cudaMemset); each writes its own words of publish_dev (the head: the top-k
 * fields; motion: the rest; stage_dev too), fences them and counts itself
 * in; the later of the two sets `valid` and the word back to 0. The head can
 * then follow the last layer as a dependent launch instead of waiting for
 * motion's stream. A frame must run both (the word counts to two), and
 * frames sharing a word must not overlap.
 */
int zcp_k_net_head_meet(const struct zcp_k_net *net, uint32_t k, struct zcp_result *stage_dev,
                        struct zcp_result *publish_dev, uint32_t *meet_dev, void *stream);
/* Whether the backends publish by meeting (zcp_k_net_head_meet; ZCP_MEET=0: the head after the join instead). */
bool zcp_k_meet_enabled(void);
/*
 * The whole network: with the layered path (the default), zcp_k_net_features
 * then zcp_k_net_head (six launches for the default model); with the fused
 * path, one launch of a persistent kernel doing every layer, the pool, fc,
 * softmax, top-k and the publish (stage_dev's topk fields only are written,
 * so motion may fill the others beside it). Two launches of one net must not
 * run at the same time (one stream per net).
 */
int zcp_k_net_forward(const struct zcp_k_net *net, const float *tensor_dev, uint32_t k,
                      struct zcp_result *stage_dev, struct zcp_result *publish_dev, void *stream);

/*
 * Which kernels zcp_k_net_forward launches. LAYERS: a launch per conv layer,
 * the pool, then fc + softmax + top-k (sums in the order described above).
 * FUSED: one kernel (a persistent grid taking tasks in order, a stage waiting
 * for the one before through device counters; no cooperative launch needed);
 * the convolutions use fused multiply-adds, so its scores differ from the
 * layered path's by float rounding, within the 1e-4 contract; its results do
 * not depend on the grid. set_path: cudaErrorNotSupported when a layer is too
 * large for the fused kernel's indexing (2^30 elements). Not while a launch
 * is pending; zcp_k_net_features/zcp_k_net_head are the layered path whatever
 * the setting.
 */
enum zcp_k_net_path {
        ZCP_K_NET_LAYERS = 0,
        ZCP_K_NET_FUSED = 1,
};
int zcp_k_net_set_path(struct zcp_k_net *net, enum zcp_k_net_path path);
enum zcp_k_net_path zcp_k_net_get_path(const struct zcp_k_net *net);
/*
 * Whether the layered path's head runs as one cluster of blocks meeting in
 * distributed shared memory (compute 9.0+ with room for the cluster, 128
 * features, up to 1024 classes; ZCP_HEAD_CLUSTER=0 at launch: not) rather
 * than as a block per 8 classes meeting through global memory. Same bits.
 */
bool zcp_k_net_head_clustered(const struct zcp_k_net *net);
/* The layers whose channel loop runs on tensor cores (all it plans, unless ZCP_CONV_MMA=0 when the net was made). */
uint32_t zcp_k_net_mma_layers(const struct zcp_k_net *net);
/*
 * Blocks of the fused kernel's grid: by default the multiprocessors times
 * min(blocks that fit one, 4); any count is correct (1 included), which the
 * tests use. 0 restores the default. Uploads the plan (synchronous): not
 * while a launch is pending or a capture is in progress.
 */
int zcp_k_net_set_fused_blocks(struct zcp_k_net *net, uint32_t blocks);
uint32_t zcp_k_net_fused_blocks(const struct zcp_k_net *net);

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
 * Motion on the grid of cell means: updates the background and writes the
 * motion fields of stage_dev (device memory: counts, bbox, grid_w/grid_h,
 * mask_words); with publish_dev, the whole stage block is then copied there
 * with valid = 1 written last. mask_dev (NULL: none; else 4-byte aligned,
 * zcp_mask_words(grid_w * grid_h) words, typically the slot's mapped mask)
 * receives the moving mask of frame.h, bit-identical to zcp_ref_motion's,
 * complete before the stage block is written (so before any `valid`).
 */
int zcp_k_motion(const struct zcp_k_motion *mo, const uint32_t *grid_dev, struct zcp_result *stage_dev,
                 struct zcp_result *publish_dev, uint32_t *mask_dev, void *stream);
/*
 * zcp_k_motion publishing only if it is the later of itself and the head
 * sharing meet_dev (zcp_k_net_head_meet); publish_dev required.
 */
int zcp_k_motion_meet(const struct zcp_k_motion *mo, const uint32_t *grid_dev, struct zcp_result *stage_dev,
                      struct zcp_result *publish_dev, uint32_t *meet_dev, uint32_t *mask_dev, void *stream);

/* ---------------------------------------------------------------- results */

/*
 * Sets a device stage block to what the CPU backend writes before any stage:
 * all zero, bbox all -1 (synchronous).
 */
int zcp_k_stage_init(struct zcp_result *stage_dev);
/* Copies stage_dev to publish_dev with valid = 1 last (when no other launcher publishes). */
int zcp_k_publish(const struct zcp_result *stage_dev, struct zcp_result *publish_dev, void *stream);

/* Launches an empty kernel (benchmarks measure the launch-and-sync floor with it). */
int zcp_k_empty(void *stream);

/* Runs a trivial kernel and waits for it: 0 when kernels of this build run on the current device. */
int zcp_k_selftest(void);

/*
 * The code the current device runs for this build's kernels
 * (cudaFuncGetAttributes of one of them): the PTX architecture it came from
 * and the machine code's architecture, e.g. 90/90 for sm_90 machine code,
 * 75/90 for the compute_75 PTX JIT-compiled for a 9.0 GPU.
 */
int zcp_k_code_version(int *ret_ptx, int *ret_binary);

/*
 * 1 when the per-stream objects made now launch the kernels after the scan
 * dependent (programmatic serialization: compute 9.0+ running code from
 * compute 9.0+ PTX, unless ZCP_PDL=0), else 0.
 */
int zcp_k_dependent_launch(void);

#ifdef __cplusplus
}
#endif
