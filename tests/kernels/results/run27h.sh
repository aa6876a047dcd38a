#!/bin/bash
# Run 27h: the head's steps timed from inside (%globaltimer in block 0 of the cluster head, a probe
# build), and its top-k as k rounds of a block arg-max (ZCP_TOPK_OLD=1, the tree before) against each
# warp's own k best then one merge. The kernels suite first, then 1080p bench_gpu four interleaved rounds.
B=.gpu/b O=$OUT/r
bash "$B/tests/kernels/gpu-run.sh" "$B" "$O" 150 "kernels memcheck daemon"
grep -v "^cuda" "$O/summary.txt" | cut -c1-200
bash tests/kernels/ab1080.sh "$B" "$O/ab" 4 'new=' 'old=ZCP_TOPK_OLD=1'
for f in "$O"/ab/*.log; do echo "$(basename "$f"): $(grep 'head probe' "$f" | sed 's/.*median)://')"; done
