#!/bin/bash
# Run 28c: 28b with each of the head and motion writing its own words of the mapped block and the
# later setting `valid` (kmeet_valid), nothing through the stage in between.
# The kernels suite (test_meet: either order) with memcheck and racecheck and the daemon, then
# 1080p bench_gpu with it and with ZCP_MEET=0, interleaved, four rounds.
# mkdir -p $OUT/r; bash tests/kernels/results/run28c.sh > $OUT/r/all.txt 2>&1
B=.gpu/b O=$OUT/r
bash "$B/tests/kernels/gpu-run.sh" "$B" "$O" 150 "kernels memcheck racecheck daemon"
bash tests/kernels/ab1080.sh "$B" "$O/ab" 4 'meet=' 'join=ZCP_MEET=0'
grep -h "^ok meet\|top-k ties" "$O"/kernels*.log 2>/dev/null | head -4
