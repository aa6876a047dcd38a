#!/bin/bash
# Run 27a: copy mode's preprocess without a scan first (zcp_k_pre_tensor_direct). The kernels
# suite (direct against the reference, bit for bit) with memcheck and the daemon, then 1080p
# bench_gpu with the direct parts and with ZCP_PRE_DIRECT=0, interleaved, three rounds.
# mkdir -p $OUT/r; bash tests/kernels/results/run27a.sh > $OUT/r/all.txt 2>&1
B=.gpu/b O=$OUT/r
bash "$B/tests/kernels/gpu-run.sh" "$B" "$O" 150 "kernels memcheck daemon"
bash tests/kernels/ab1080.sh "$B" "$O/ab" 3 'direct=' 'scan=ZCP_PRE_DIRECT=0'
grep -h "direct\|^ok preprocess.*1920x1080" "$O"/kernels*.log 2>/dev/null | head -5
grep -h "preprocess" "$O"/ab/ab-direct-1.log | head -8
