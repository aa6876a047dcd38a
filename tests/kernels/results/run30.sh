#!/bin/bash
# Run 30: the layers as one chained launch (ZCP_CONV_CHAIN=1: kernels/convtile.cu conv3x3_relu_chain, tasks
# waiting on the tile rows of the layer before that they read, instead of a dependent launch a layer;
# =2: each task's weights copied before it waits), and the patch in 2 or 4 groups of copies (ZCP_CONV_STAGES:
# a run of each slice's channels a group, its sums while the later groups land). Bundle as always
# (tests/kernels/gpu-bundle.sh build-cuda), carry .gpu, run as
#   mkdir -p $OUT/r; bash tests/kernels/results/run30.sh > $OUT/r/all.txt 2>&1
O=$OUT/r
mkdir -p "$O"
# a: the kernels suite (the chain and the groups bit-identical to the layers' launches: the chain on its grid,
# 1 and 3 blocks, with the weights first; 2 and 4 groups alone and in the chain; the default model and random
# ones of strides 2 1 2, 224x224 and 97x61), memcheck and racecheck on the quick subset; the daemon with the
# chain and with 4 groups (cuda vs cpu on the sample).
bash .gpu/b/tests/kernels/gpu-run.sh .gpu/b "$O/g" 1000 "kernels memcheck racecheck" > "$O/g.txt" 2>&1
ZCP_CONV_CHAIN=1 bash .gpu/b/tests/kernels/gpu-run.sh .gpu/b "$O/d" 1000 "daemon" > "$O/d.txt" 2>&1
ZCP_CONV_STAGES=4 bash .gpu/b/tests/kernels/gpu-run.sh .gpu/b "$O/h" 1000 "daemon" > "$O/h.txt" 2>&1
cat "$O/g/summary.txt" "$O/d/summary.txt" "$O/h/summary.txt"
grep -h "chained\|groups of copies\|all kernel checks\|ERROR SUMMARY\|RACECHECK SUMMARY" "$O"/g/*.log | sort | uniq -c
# b: 1080p, four interleaved rounds: the layers (default), the chain on its grid, with the weights before
# the wait, and a block an SM; 2 and 4 groups of copies in the layers' own launches, 2 in the chain.
bash tests/kernels/ab1080.sh .gpu/b "$O/ab" 4 'layers=' 'chain=ZCP_CONV_CHAIN=1' 'chain2=ZCP_CONV_CHAIN=2' \
        'chain132=ZCP_CONV_CHAIN=1,ZCP_CONV_CHAIN_BLOCKS=132' 'st2=ZCP_CONV_STAGES=2' 'st4=ZCP_CONV_STAGES=4' \
        'chainst2=ZCP_CONV_CHAIN=1,ZCP_CONV_STAGES=2'
grep -h "chained launch\|groups" "$O"/ab/ab-chain-1.log "$O"/ab/ab-st2-1.log "$O"/ab/ab-st4-1.log \
        "$O"/ab/ab-chainst2-1.log
