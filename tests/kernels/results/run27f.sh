#!/bin/bash
# Run 27f: the first layer computing its patches from the resize's rows (zcp_k_net_features_pre), no
# resize launch on the layered path. The kernels suite (bit-identical to the resize then the layers),
# memcheck, racecheck, the daemon; then 1080p bench_gpu with it and with ZCP_PRE_FUSED=0, four
# interleaved rounds.
# mkdir -p $OUT/r; bash tests/kernels/results/run27f.sh > $OUT/r/all.txt 2>&1
B=.gpu/b O=$OUT/r
bash "$B/tests/kernels/gpu-run.sh" "$B" "$O" 150 "kernels memcheck racecheck daemon"
grep -v "^cuda" "$O/summary.txt" | cut -c1-200
grep -h "^ok features" "$O/kernels.log"
bash tests/kernels/ab1080.sh "$B" "$O/ab" 4 'fused=' 'unfused=ZCP_PRE_FUSED=0'
