#!/bin/bash
# Run 26c: the tiled convolutions' slices as clusters of blocks (ctile_cluster: K blocks on one tile,
# each copying a K-th of the input channels, their sums met in distributed shared memory) instead of
# the threads of one block. The kernels suite (clusters bit-identical to one block, every tiling and
# the models), memcheck, the daemon cuda vs cpu; stop there on a failure. Then the 1080p A/B against
# ZCP_CONV_CLUSTER=0 (three rounds), Nsight Compute, racecheck last. B=.gpu/b, logs under $OUT/r.
B=.gpu/b
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/k 150 "kernels memcheck daemon"
grep -v "^ok \|^cuda" $OUT/r/k/summary.txt | cut -c1-200
grep -E "cluster" $OUT/r/k/kernels.log | cut -c1-200 | head -12
grep -q "rc=0 .*all kernel checks passed" $OUT/r/k/summary.txt || { grep -i -E "fail|error" $OUT/r/k/kernels.log | head -20; exit 1; }
bash tests/kernels/ab1080.sh $B $OUT/r 3 'cluster=' 'blocks=ZCP_CONV_CLUSTER=0'
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/n 100 "ncu"
sed -n '/ncu layers:/,/sum of kernel/p' $OUT/r/n/summary.txt | head -13
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/rc 100 "racecheck"
cat $OUT/r/rc/summary.txt
