#!/bin/bash
# Issue 16 item 1, the RGB formats paced with their cold copy-in on time: run
# 23c's 72 ms clock (12 ms a step) was shorter than a cold RGB copy-in with
# clflush on this host, so here 144 ms (24 ms a step). Then warm at 72 ms.
# From the repository root of a bundle copy: B=.gpu/b, logs under $OUT/r.
B=${B:-.gpu/b}
F="--only convert --threads 1,2,4 --sizes 1920x1080"
run() {   # run NAME AHEAD ARGS...
  local n=$1 a=$2; shift 2
  ZCP_WORKERS_AHEAD=$a timeout 60 $B/env $B/bin/bench_cpu $F "$@" > $OUT/r/cpu-$n.log 2>&1
}
run rgb-cold-on 1 --formats rgb24,bgr24,rgbx,bgrx --iter 61 --period 144 --cold
run rgb-cold-off 0 --formats rgb24,bgrx --iter 61 --period 144 --cold
run rgb-warm-on 1 --formats rgb24,bgr24,rgbx,bgrx --iter 101 --period 72
echo "== ms medians: log | format size | libyuv 1T | zcpipe 1T ratio | 4T 4T/1T crit work xW woken | libyuv 4 lxN | late"
for f in $OUT/r/cpu-*.log; do
  grep -E '^(yuyv|uyvy|yvyu|rgb24|bgr24|rgbx|bgrx) ' $f | awk -v n=$(basename $f .log) \
    '{printf "%s | %s %s | %s | %s %s | %s %.2f %s %s %s %s | %s %s | %s\n", n, $1, $2, $4, $7, $10, $25, $25 / $7, $29, $33, $34, $35, $36, $37, $39}'
done
