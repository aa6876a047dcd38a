#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds what tests/kernels/gpu-run.sh runs and bundles it into .gpu/b (git-ignored)
# with ../shared/tools/gpu-bundle, for a GPU machine that has none of the -dev packages.
#
#   tests/kernels/gpu-bundle.sh [BUILDDIR]      (default build-cuda; configured if missing)
#
# Then, on the GPU machine (the device tool: carry [".gpu"]):
#   bash .gpu/b/tests/kernels/gpu-run.sh .gpu/b $OUT 2000 "kernels memcheck racecheck bench daemon camera"
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
[ -f "$build/build.ninja" ] || meson setup "$build"
ninja -C "$build" zcpipe tests/kernels/ktest_kernels tests/kernels/ktest_sticky tests/kernels/bench_gpu \
        tests/fakecam/libfakecam.so
tool=${GPU_BUNDLE:-../shared/tools/gpu-bundle}
[ -x "$tool" ] || tool=/work/shared/tools/gpu-bundle
"$tool" .gpu/b "$build/zcpipe" "$build/tests/kernels/ktest_kernels" "$build/tests/kernels/ktest_sticky" \
        "$build/tests/kernels/bench_gpu" "$build/tests/fakecam/libfakecam.so" "$(command -v gst-launch-1.0)" config samples models
mkdir -p .gpu/b/tests/kernels
cp tests/kernels/compare_results.py tests/kernels/stage_latency.py tests/kernels/gpu-run.sh .gpu/b/tests/kernels/
