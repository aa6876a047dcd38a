#!/bin/bash
# Run 28g (not in the tree; results/run28g-cluster-max.patch): the cluster's blocks gather the
# logits' maximum with a distributed-shared-memory atomicMax as they store them, so block 0's
# softmax skips its max reduction and one barrier. Kernels suite, then 1080p four rounds against
# ZCP_HEAD_CMAX=0.
# mkdir -p $OUT/r; bash tests/kernels/results/run28g.sh > $OUT/r/all.txt 2>&1 (with the patch applied)
B=.gpu/b O=$OUT/r
bash "$B/tests/kernels/gpu-run.sh" "$B" "$O" 150 "kernels"
bash tests/kernels/ab1080.sh "$B" "$O/ab" 4 'cmax=' 'nocmax=ZCP_HEAD_CMAX=0'
