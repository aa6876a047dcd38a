#!/bin/bash
# Run 26g: the tree as committed (the convolution's division-free set-up as in 26f's "late" bench
# binary, its loop form; the cluster head's first barrier): the kernels suite, memcheck, racecheck,
# bench_gpu 1000, the daemon cuda vs cpu, the PyTorch peer, Nsight Compute. B=.gpu/b, logs $OUT/r.
B=.gpu/b
bash $B/tests/kernels/gpu-run.sh $B $OUT/r 1000 "kernels memcheck racecheck bench daemon peer ncu"
grep -v "^cuda" $OUT/r/summary.txt | cut -c1-220
