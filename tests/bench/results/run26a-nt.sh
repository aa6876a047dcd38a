#!/bin/bash
# Issue 16 item 1, 4:2:2: does the in-place split lose its time to stores into lines that another
# core read (each chunk's outputs land on an earlier chunk's input, read by whichever member took
# it)? Streaming stores write whole lines without reading them first. ZCP_CONVERT_NT: 0 off (the
# tree's code), 1 the split's chunks only, 2 every 4:2:2 row call. Paced cold conversions as in
# run 25f, pinned to CPUs 0-3; modes interleaved. Also the kernels suite (the cluster head's room
# check, first run on a GPU). Needs results/run26a-nt.patch applied (against 8f42fa1). From a bundle copy's root: B=.gpu/b, logs under $OUT/r.
B=${B:-.gpu/b}
F="--only convert --threads 1,4 --sizes 1920x1080 --formats yuyv,uyvy --iter 61 --period 72 --cold"
bash $B/tests/kernels/gpu-run.sh $B $OUT/r 100 kernels > /dev/null 2>&1
cat $OUT/r/summary.txt 2>/dev/null | head -4
grep -h -E 'cluster' $OUT/r/kernels.log | head -6
i=0
for m in 0 2 1 0 1 2; do
  i=$((i + 1))
  ZCP_CONVERT_NT=$m timeout 120 taskset -c 0-3 $B/env $B/bin/bench_cpu $F > $OUT/r/cpu-nt$m-$i.log 2>&1
done
echo "== ms medians: log | format | libyuv 1T | zcpipe 1T | 4T | 4T/1T | crit | work xW | woken | libyuv 4 bands, / libyuv 1T"
for f in $OUT/r/cpu-nt*.log; do
  grep -E '^(yuyv|uyvy) ' $f | awk -v n=$(basename $f .log) \
    '{printf "%s | %s | %s | %s | %s | %.3f | %s | %s %s | %s | %s %.3f\n", n, $1, $4, $7, $12, $12 / $7, $16, $20, $21, $22, $23, $23 / $4}'
done
