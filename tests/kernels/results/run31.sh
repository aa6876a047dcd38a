#!/bin/bash
# Run 31: the convolutions' channel loop on tensor cores. Bundle as always (tests/kernels/gpu-bundle.sh
# build-cuda), plus .gpu/r31/run31-mma (nvcc -O3 -arch=sm_90 -std=c++17 -o .gpu/r31/run31-mma
# tests/kernels/results/run31-mma.cu); carry .gpu, run as
#   mkdir -p $OUT/r; bash tests/kernels/results/run31.sh > $OUT/r/all.txt 2>&1
O=$OUT/r
mkdir -p "$O"
# a: the channel loop alone, FFMA against mma.sync TF32 (1 product, 3xTF32, 3xTF32 with two accumulator sets),
# patch and weights already in shared memory, 132 blocks, cycles by clock64 and error against double sums.
.gpu/r31/run31-mma 200 > "$O/mma-loop.txt" 2>&1
# b: 1080p, four interleaved rounds: the FFMA loop (default) and the tensor cores.
bash tests/kernels/ab1080.sh .gpu/b "$O/ab" 4 'layers=' 'mma=ZCP_CONV_MMA=1' > "$O/ab.txt" 2>&1
# c: the kernels suite (ZCP_K_TILE_MMA on every shape it takes, each of its tilings, within 1e-5 of double;
# nets made with ZCP_CONV_MMA=1 within 1e-4 of the reference, the layers counted), memcheck and racecheck on the
# quick subset (which has the tensor-core cases too); the daemon with ZCP_CONV_MMA=1 (cuda vs cpu on the sample).
bash .gpu/b/tests/kernels/gpu-run.sh .gpu/b "$O/g" 1000 "kernels memcheck racecheck" > "$O/g.txt" 2>&1
ZCP_CONV_MMA=1 bash .gpu/b/tests/kernels/gpu-run.sh .gpu/b "$O/d" 1000 "daemon" > "$O/d.txt" 2>&1
# d: Nsight Compute on one frame's kernels, both ways.
bash .gpu/b/tests/kernels/gpu-run.sh .gpu/b "$O/n0" 100 "ncu" > "$O/n0.txt" 2>&1
ZCP_CONV_MMA=1 bash .gpu/b/tests/kernels/gpu-run.sh .gpu/b "$O/n1" 100 "ncu" > "$O/n1.txt" 2>&1
echo "== the channel loop alone"
cat "$O/mma-loop.txt"
echo "== suite, daemon"
cat "$O/g/summary.txt" "$O/d/summary.txt"
grep -h "tensor cores\|all kernel checks\|ERROR SUMMARY\|RACECHECK SUMMARY\|FAIL\|CHECK" "$O"/g/*.log |
        sort | uniq -c | head -40
echo "== A/B"
cat "$O/ab.txt"
grep -h "tensor cores" "$O"/ab/ab-mma-1.log | head -3
echo "== ncu default, then mma"
grep -A12 "ncu-" "$O/n0/summary.txt" | head -30
grep -A12 "ncu-" "$O/n1/summary.txt" | head -30
