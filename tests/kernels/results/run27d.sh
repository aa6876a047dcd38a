#!/bin/bash
# Run 27d: the last convolution lets the head launch at once (ZCP_HEAD_TRIGGER=1:
# griddepcontrol.launch_dependents at the top of the last layer's blocks, so the head's cluster
# loads its weights while the layer runs). The kernels suite with it, then 1080p bench_gpu with
# and without, four interleaved rounds.
# mkdir -p $OUT/r; bash tests/kernels/results/run27d.sh > $OUT/r/all.txt 2>&1
B=.gpu/b O=$OUT/r
mkdir -p "$O"
ZCP_HEAD_TRIGGER=1 timeout 120 "$B/env" "$B/bin/ktest_kernels" > "$O/kernels-htrig.log" 2>&1; echo "kernels (head trigger) rc=$? $(tail -n 1 "$O/kernels-htrig.log")"
bash tests/kernels/ab1080.sh "$B" "$O/ab" 4 'tree=' 'htrig=ZCP_HEAD_TRIGGER=1'
