#!/bin/bash
# Run 28d, the tree as committed: the head's top-k by warp-wide redux (28a) and the later of the
# head and motion setting `valid` (28c; the head reading the meeting word early, beside its
# softmax, so that where motion has finished it needs no atomic: kmeet_valid_seen). The kernels
# suite (test_meet: either order) with memcheck and racecheck, bench_gpu at every size, the
# daemon and the PyTorch peer; then 1080p with the meeting and with ZCP_MEET=0, four rounds.
# mkdir -p $OUT/r; bash tests/kernels/results/run28d.sh > $OUT/r/all.txt 2>&1
B=.gpu/b O=$OUT/r
bash "$B/tests/kernels/gpu-run.sh" "$B" "$O" 1000 "kernels memcheck racecheck bench daemon peer"
bash tests/kernels/ab1080.sh "$B" "$O/ab" 4 'meet=' 'join=ZCP_MEET=0'
grep -h "^ok meet\|top-k ties" "$O"/kernels*.log 2>/dev/null | head -4
