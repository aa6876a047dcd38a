#!/bin/bash
# Run 33: what the bodies of the kernels on the critical path cost (issue 15 item 2). A probe build
# (results/run33-probe.patch on 75ddf5f; build-cuda, bench_gpu only:
#   ../shared/tools/gpu-bundle .gpu/q build-cuda/tests/kernels/bench_gpu models samples; cp tests/kernels/ab1080.sh
#   .gpu/q/tests/kernels/), carry .gpu/q, run as
#   mkdir -p $OUT/r; bash tests/kernels/results/run33.sh a|b|c > $OUT/r/all.txt 2>&1
# ZCP_CONV_PROBE: 1 no channel loop, 2 no copies and no loop, 4 every convolution block returns after its wait.
# ZCP_HEAD_PROBE: the head without its pool and fc (block 0's softmax, top-k and publish only).
# ZCP_PRE_PROBE: the resize's blocks return after their wait.
O=$OUT/r
mkdir -p "$O"
export ZCP_SOURCE_ROOT=$PWD/.gpu/q
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
if [ "$1" = c ]; then
        # c: results/run33-cluster.cu (nvcc -O3 -arch=sm_90 -std=c++17 -o .gpu/q/r33/run33-cluster ...) beside the
        # network's launches in the same call.
        .gpu/q/r33/run33-cluster 1000 > "$O/cluster.txt" 2>&1
        bash .gpu/q/tests/kernels/ab1080.sh .gpu/q "$O/ab" 3 'full=' 'noloop=ZCP_CONV_PROBE=1' \
                'empty=ZCP_CONV_PROBE=4' > "$O/ab.txt" 2>&1
        cat "$O/cluster.txt"
elif [ "$1" = a ]; then
        bash .gpu/q/tests/kernels/ab1080.sh .gpu/q "$O/ab" 4 'full=' 'noloop=ZCP_CONV_PROBE=1' \
                'nocopy=ZCP_CONV_PROBE=2' 'empty=ZCP_CONV_PROBE=4' > "$O/ab.txt" 2>&1
else
        bash .gpu/q/tests/kernels/ab1080.sh .gpu/q "$O/ab" 3 'full=' 'empty=ZCP_CONV_PROBE=4' 'head=ZCP_HEAD_PROBE=1' \
                'pre=ZCP_PRE_PROBE=1' 'all=ZCP_CONV_PROBE=4,ZCP_HEAD_PROBE=1,ZCP_PRE_PROBE=1' > "$O/ab.txt" 2>&1
fi
grep -h "1920x1080 (\|fail\|FAIL" "$O"/ab/ab-full-1.log | head -5
cat "$O/ab.txt"
