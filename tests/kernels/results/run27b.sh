#!/bin/bash
# Run 27b: the resize letting the first layer launch at once (ZCP_PRE_TRIGGER=1: griddepcontrol.launch_dependents
# at the top of the resize's blocks). The kernels suite with it, then 1080p bench_gpu with and without, four
# interleaved rounds.
# mkdir -p $OUT/r; bash tests/kernels/results/run27b.sh > $OUT/r/all.txt 2>&1
B=.gpu/b O=$OUT/r
mkdir -p "$O"
ZCP_PRE_TRIGGER=1 timeout 120 "$B/env" "$B/bin/ktest_kernels" > "$O/kernels-trig.log" 2>&1; echo "kernels (trigger) rc=$? $(tail -n 1 "$O/kernels-trig.log")"
bash tests/kernels/ab1080.sh "$B" "$O/ab" 4 'direct=' 'trig=ZCP_PRE_TRIGGER=1'
