#!/bin/bash
# Run 27g: 27f's fused first layer with the patch's loads in flight together (up to 4 pixels a thread:
# the table entries of all, then their bytes). The kernels suite and memcheck, then 1080p bench_gpu with
# it and with ZCP_PRE_FUSED=0, four interleaved rounds.
# mkdir -p $OUT/r; bash tests/kernels/results/run27g.sh > $OUT/r/all.txt 2>&1
B=.gpu/b O=$OUT/r
bash "$B/tests/kernels/gpu-run.sh" "$B" "$O" 150 "kernels memcheck"
grep -v "^cuda" "$O/summary.txt" | cut -c1-200
grep -h "^ok features" "$O/kernels.log"
bash tests/kernels/ab1080.sh "$B" "$O/ab" 4 'fused=' 'unfused=ZCP_PRE_FUSED=0'
