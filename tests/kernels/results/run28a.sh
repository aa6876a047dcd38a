#!/bin/bash
# Run 28a: the head's top-k by warp-wide redux (each warp its k best, one barrier, warp 0 the k best
# of theirs) against the k rounds of a block arg-max (ZCP_TOPK_ROUNDS=1). The kernels suite with
# memcheck and racecheck and the daemon, then 1080p bench_gpu both ways, interleaved, four rounds.
# mkdir -p $OUT/r; bash tests/kernels/results/run28a.sh > $OUT/r/all.txt 2>&1
B=.gpu/b O=$OUT/r
bash "$B/tests/kernels/gpu-run.sh" "$B" "$O" 150 "kernels memcheck racecheck daemon"
bash tests/kernels/ab1080.sh "$B" "$O/ab" 4 'redux=' 'rounds=ZCP_TOPK_ROUNDS=1'
grep -h "top-k\|topk" "$O"/kernels*.log 2>/dev/null | head -8
