#!/bin/bash
# Issue 16 item 1 on the GPU machine's host: the 4-thread conversion with the
# team's wake-ahead (workers.h) on and off, cold input, alternating, twice;
# then warm once with it on. Beside each: libyuv split into the same bands.
# Run from the repository root of a bundle copy: B=.gpu/b, logs under $OUT/r.
B=${B:-.gpu/b}
A="--only convert --threads 1,2,4 --sizes 1920x1080 --formats yuyv,uyvy,rgb24,bgrx --iter 201"
for i in 1 2; do
  for a in 1 0; do
    ZCP_WORKERS_AHEAD=$a timeout 120 $B/env $B/bin/bench_cpu $A --cold > $OUT/r/cpu-ahead$a-cold-$i.log 2>&1
  done
done
ZCP_WORKERS_AHEAD=1 timeout 120 $B/env $B/bin/bench_cpu $A > $OUT/r/cpu-ahead1-warm.log 2>&1
echo "== 1080p ms medians: log | format | 1T | 4T 4T/1T crit work xW woken | libyuv 1T | libyuv 4 lxN"
for f in $OUT/r/cpu-*.log; do
  grep -E '^(yuyv|uyvy|rgb24|bgrx) ' $f | awk -v n=$(basename $f .log) \
    '{printf "%s | %s | %s | %s %.2f %s %s %s %s | %s | %s %s\n", n, $1, $7, $25, $25 / $7, $29, $33, $34, $35, $4, $36, $37}'
done
