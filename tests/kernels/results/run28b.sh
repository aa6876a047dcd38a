#!/bin/bash
# Run 28b: the later of the head and motion publishing the whole block from the stage (a version
# not kept: the head then read motion's words after the meeting; 28c replaced it),
# The kernels suite (test_meet: either order) with memcheck and racecheck and the daemon, then
# 1080p bench_gpu with it and with ZCP_MEET=0, interleaved, four rounds.
# mkdir -p $OUT/r; bash tests/kernels/results/run28b.sh > $OUT/r/all.txt 2>&1
B=.gpu/b O=$OUT/r
bash "$B/tests/kernels/gpu-run.sh" "$B" "$O" 150 "kernels memcheck racecheck daemon"
bash tests/kernels/ab1080.sh "$B" "$O/ab" 4 'meet=' 'join=ZCP_MEET=0'
grep -h "^ok meet\|top-k ties" "$O"/kernels*.log 2>/dev/null | head -4
