/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Model files to plans (model/plan.h): zcnet's .safetensors and TensorFlow.js graph models
 * (model.json with its weight shards: float32, float16 or uint8/uint16-quantized), read as they
 * are, no conversion step. Everything a backend relies on is checked here; anything else is
 * refused with one line naming the file, and for TF.js the node and its op.
 *
 * Ownership: the plan returned is the caller's (zcp_plan_free). Main thread.
 */
#include <stddef.h>
#include <stdint.h>

#include "model/plan.h"

struct zcp_model_opts {
        uint32_t in_w, in_h;    /* model input; 0: the model's own (TF.js: the graph's; zcnet: 224 x 224) */
};

/*
 * Loads `path`: a name ending in ".json" is a TF.js graph model, anything else zcnet's
 * .safetensors. Returns 0 and *ret, or a negative errno (-ENOENT, -EACCES: the file or a shard
 * cannot be read; -EINVAL: its content is refused; -ENOMEM) with the reason in err.
 */
int zcp_model_load(const char *path, const struct zcp_model_opts *opts, struct zcp_plan **ret, char *err,
                   size_t errlen);

/* zcnet: the .safetensors loader (model/zcnet.c). */
int zcp_zcnet_load(const char *path, const struct zcp_model_opts *opts, struct zcp_plan **ret, char *err,
                   size_t errlen);
/* TF.js graph models (model/tfjs.c). */
int zcp_tfjs_load(const char *path, const struct zcp_model_opts *opts, struct zcp_plan **ret, char *err,
                  size_t errlen);

/*
 * The classes a detector reports: list = "" (all), or labels and class numbers separated by
 * ',' (spaces around them ignored), each one the model has. Sets bit c of mask (mask_words
 * 32-bit words) for each; 0, or -EINVAL naming the entry that is not a class of the model.
 */
#define ZCP_CLASS_MASK_WORDS 32   /* 1024 classes: core/kparams.h ZCP_DET_CLASSES_MAX */
int zcp_model_class_mask(const struct zcp_plan *plan, const char *list, uint32_t *mask, char *err, size_t errlen);

/*
 * The head keys a model section gives that this model's kind of head ignores (model.top_k for a
 * detector; min_score, nms_iou, max_detections and classes for a classifier): their number, and
 * a sentence naming them and what the model reports instead in msg ("" when none). A warning,
 * not an error: the stream runs as if they were not there.
 */
struct zcp_model_config;
uint32_t zcp_model_unused_keys(const struct zcp_model_config *mc, const struct zcp_plan *plan, char *msg,
                               size_t size);

/*
 * Labels: one per line, exactly head.classes lines, each non-empty, valid UTF-8 without control
 * characters (tab allowed), at most ZCP_LABEL_MAX_BYTES bytes; anything else is refused (-EINVAL)
 * with FILE:LINE: reason in err.
 */
#define ZCP_LABEL_MAX_BYTES 256u
int zcp_model_load_labels(struct zcp_plan *plan, const char *path, char *err, size_t errlen);

/*
 * The plan a stream's model section names, shared: the first caller loads it (the model at
 * mc->path with mc's input size; labels from mc->labels, else labels.txt beside a model.json
 * when there is one; mc->classes checked against it), later callers with the same path, input
 * size and labels get the same plan (also callers that load it at the same time). Returns 0
 * and *ret (release it with zcp_model_release), or a negative errno with the reason in err: the
 * file cannot be read (-ENOENT, -EACCES, ...) or is refused (-EINVAL). Any thread.
 */
struct zcp_model_config;
/* The same plan loaded afresh from the files, never shared (free it with zcp_plan_free). */
int zcp_model_load_config(const struct zcp_model_config *mc, struct zcp_plan **ret, char *err, size_t errlen);
int zcp_model_acquire(const struct zcp_model_config *mc, const struct zcp_plan **ret, char *err, size_t errlen);
void zcp_model_release(const struct zcp_plan *plan);

