/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * zcnet weights from a .safetensors file, and the optional labels file.
 *
 * Ownership: zcp_model_load() returns a heap model, freed with
 * zcp_model_free(); immutable after load, so any thread may read it.
 * Loading: main thread.
 */
#include <stddef.h>

#include "core/kparams.h"

/*
 * Loads a .safetensors file (F32 tensors conv{i}.weight [out,in,3,3],
 * conv{i}.bias [out], fc.weight [classes,C], fc.bias [classes]; optional
 * __metadata__ "stride" (default "2") or "conv{i}.stride"). Checks every shape
 * and offset. Returns 0, or negative errno with a one-line message naming the
 * file in errbuf (-EINVAL for bad content).
 */
int zcp_model_load(const char *path, struct zcp_model **ret_model, char *errbuf, size_t errlen);
/*
 * Optional labels file: one label per line, must have `classes` lines, each
 * non-empty, valid UTF-8 without control characters (tab allowed) and at
 * most ZCP_LABEL_MAX_BYTES bytes; anything else is refused (-EINVAL) with
 * FILE:LINE: reason in errbuf.
 */
#define ZCP_LABEL_MAX_BYTES 256u
int zcp_model_load_labels(struct zcp_model *model, const char *path, char *errbuf, size_t errlen);
void zcp_model_free(struct zcp_model *model);
