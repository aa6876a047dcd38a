#!/bin/bash
# Run 27e: the tree as committed (copy mode's direct preprocess): the kernels suite, memcheck,
# racecheck, bench_gpu 1000 at every size, the daemon cuda vs cpu, the PyTorch peer, Nsight Compute.
# B=.gpu/b, logs $OUT/r.
B=.gpu/b
bash $B/tests/kernels/gpu-run.sh $B $OUT/r 1000 "kernels memcheck racecheck bench daemon peer ncu"
grep -v "^cuda" $OUT/r/summary.txt | cut -c1-220
