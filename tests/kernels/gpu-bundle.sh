#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds what tests/kernels/gpu-run.sh runs and bundles it into .gpu/b (git-ignored)
# with ../shared/tools/gpu-bundle, for a GPU machine that has none of the -dev packages,
# then packs it as .gpu/b.tar.xz (the folder moves to .gpu-b): unpacked it is ~80 MB even for
# one architecture (GStreamer's and TLS libraries, each program ~4 MB of GPU code), over the
# device tool's 64 MiB; packed, ~20 MB.
#
#   tests/kernels/gpu-bundle.sh [BUILDDIR]      (default build-cuda; configured for sm_90 if missing)
#   GPU_BUNDLE_PTX_ONLY=1 tests/kernels/gpu-bundle.sh BUILDDIR   (what the "ptx" part needs, smaller)
#   GPU_BUNDLE_PACK=0: leave .gpu/b unpacked (a machine with the -dev packages, or no size limit)
#
# Then, on the GPU machine (the device tool: carry [".gpu"]):
#   mkdir -p .gpu/b && tar -xJf .gpu/b.tar.xz -C .gpu/b &&
#   bash .gpu/b/tests/kernels/gpu-run.sh .gpu/b $OUT 2000 "kernels memcheck bench streams daemon peer"
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
[ -f "$build/build.ninja" ] || meson setup "$build" -Dcuda-arch=90
ninja -C "$build" zcpipe tests/kernels/ktest_kernels tests/kernels/ktest_plans tests/kernels/ktest_backend \
        tests/kernels/ktest_sticky tests/kernels/ktest_multigpu tests/kernels/bench_gpu \
        tests/kernels/bench_sync tests/kernels/bench_streams tools/bench/zcpipe-bench tests/fakecam/libfakecam.so \
        tests/bench/bench_cpu tests/tfjs/tfjs_dump models/zcnet-default.safetensors
tool=${GPU_BUNDLE:-../shared/tools/gpu-bundle}
[ -x "$tool" ] || tool=/work/shared/tools/gpu-bundle
if [ "${GPU_BUNDLE_PTX_ONLY:-0}" = 1 ]; then
        # Only what the "ptx" part of gpu-run.sh needs (no bench, fake camera or gst-launch).
        "$tool" .gpu/b "$build/zcpipe" "$build/tests/kernels/ktest_kernels" "$build/tests/kernels/ktest_plans" \
                "$build/tests/kernels/ktest_backend" "$build/tests/kernels/ktest_sticky" config samples "$build/models"
else
        "$tool" .gpu/b "$build/zcpipe" "$build/tests/kernels/ktest_kernels" "$build/tests/kernels/ktest_plans" \
                "$build/tests/kernels/ktest_backend" "$build/tests/kernels/ktest_sticky" \
                "$build/tests/kernels/ktest_multigpu" "$build/tests/kernels/bench_gpu" "$build/tests/kernels/bench_sync" \
                "$build/tests/kernels/bench_streams" \
                "$build/tools/bench/zcpipe-bench" "$build/tests/bench/bench_cpu" "$build/tests/tfjs/tfjs_dump" \
                "$build/tests/fakecam/libfakecam.so" \
                "$(command -v gst-launch-1.0)" config samples "$build/models"
fi
# Debug sections out (the GPU code of 8 architectures makes each program ~7 MB): the bundle and the
# repository must stay under the device tool's 64 MiB.
strip --strip-debug .gpu/b/bin/zcpipe .gpu/b/bin/ktest_kernels .gpu/b/bin/ktest_plans .gpu/b/bin/ktest_backend \
        .gpu/b/bin/ktest_sticky
for b in ktest_multigpu bench_gpu bench_sync bench_streams zcpipe-bench bench_cpu tfjs_dump; do
        [ -f .gpu/b/bin/$b ] && strip --strip-debug .gpu/b/bin/$b
done
# The TF.js models the source tree ships (the build's models/ holds the generated zcnet weights):
# the peer part times PyTorch on the default detector.
for m in models/*/model.json; do
        [ -e "$m" ] && [ ! -e ".gpu/b/$m" ] && cp -r "$(dirname "$m")" .gpu/b/models/
done
mkdir -p .gpu/b/tests/kernels
cp tests/kernels/compare_results.py tests/kernels/stage_latency.py tests/kernels/gpu-run.sh tests/kernels/peer_torch.py \
        tests/kernels/files-bench.sh tests/kernels/multi-gpu.sh \
        .gpu/b/tests/kernels/
mkdir -p .gpu/b/tests/integration .gpu/b/tests/tfjs
cp tests/integration/test_backend.py .gpu/b/tests/integration/
# The TF.js oracle's comparison (tests/tfjs/test_tfjs.py); TF.js itself does not run there (no node):
# its outputs for the clip are made here and carried (test_tfjs.py --keep, then --tfjs-outputs).
cp tests/tfjs/test_tfjs.py .gpu/b/tests/tfjs/
if [ "${GPU_BUNDLE_PACK:-1}" = 1 ]; then
        rm -rf .gpu-b .gpu/b.tar.xz
        tar -C .gpu/b -cf - . | xz -T0 -6 >.gpu/b.tar.xz
        mv .gpu/b .gpu-b
        echo "gpu-bundle: packed $(du -h .gpu/b.tar.xz | cut -f1) .gpu/b.tar.xz (unpacked in .gpu-b)"
fi
