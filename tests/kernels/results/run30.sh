#!/bin/bash
# Run 30: the layers as one chained launch (ZCP_CONV_CHAIN=1: kernels/convtile.cu conv3x3_relu_chain, tasks
# waiting on the tile rows of the layer before that they read, instead of a dependent launch a layer;
# =2: each task's weights copied before it waits). Bundle as always (tests/kernels/gpu-bundle.sh build-cuda),
# carry .gpu, run as
#   mkdir -p $OUT/r; bash tests/kernels/results/run30.sh > $OUT/r/all.txt 2>&1
O=$OUT/r
mkdir -p "$O"
# a: the kernels suite (the chain bit-identical to the layers' launches on its grid, 1 and 3 blocks, with the
# weights first; the default model and random ones of strides 2 1 2, 224x224 and 97x61), memcheck and
# racecheck on the quick subset; the daemon with the chain (cuda vs cpu on the sample).
bash .gpu/b/tests/kernels/gpu-run.sh .gpu/b "$O/g" 1000 "kernels memcheck racecheck" > "$O/g.txt" 2>&1
ZCP_CONV_CHAIN=1 bash .gpu/b/tests/kernels/gpu-run.sh .gpu/b "$O/d" 1000 "daemon" > "$O/d.txt" 2>&1
cat "$O/g/summary.txt" "$O/d/summary.txt"
grep -h "chained\|all kernel checks\|ERROR SUMMARY\|RACECHECK SUMMARY" "$O"/g/*.log | sort | uniq -c
# b: 1080p, four interleaved rounds: the layers (default), the chain on its grid, with the weights before
# the wait, and a block an SM.
bash tests/kernels/ab1080.sh .gpu/b "$O/ab" 4 'layers=' 'chain=ZCP_CONV_CHAIN=1' 'chain2=ZCP_CONV_CHAIN=2' \
        'chain132=ZCP_CONV_CHAIN=1,ZCP_CONV_CHAIN_BLOCKS=132'
grep -h "chained launch" "$O"/ab/ab-chain-1.log | head -2
