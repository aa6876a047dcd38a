#!/bin/bash
# Issue 16 item 1 on the GPU machine's host: conversions paced on a 72 ms clock
# (bench_cpu --period; 12 ms per step: run 23b's 18 ms was shorter than one
# step's cold copy-in, so every step started late, i.e. back to back), cold,
# the team's wake-ahead on and off in turn, twice; then warm with it on.
# From the repository root of a bundle copy: B=.gpu/b, logs under $OUT/r.
B=${B:-.gpu/b}
F="--only convert --threads 1,2,4 --sizes 1920x1080 --formats yuyv,uyvy,rgb24,bgrx --iter 101 --period 72"
run() {   # run NAME AHEAD ARGS...
  local n=$1 a=$2; shift 2
  ZCP_WORKERS_AHEAD=$a timeout 100 $B/env $B/bin/bench_cpu $F "$@" > $OUT/r/cpu-$n.log 2>&1
}
run paced-cold-on-1 1 --cold
run paced-cold-off-1 0 --cold
run paced-cold-on-2 1 --cold
run paced-cold-off-2 0 --cold
run paced-warm-on 1
echo "== ms medians: log | format size | libyuv 1T | zcpipe 1T ratio | 4T 4T/1T crit work xW woken | libyuv 4 lxN | late"
for f in $OUT/r/cpu-*.log; do
  grep -E '^(yuyv|uyvy|yvyu|rgb24|bgr24|rgbx|bgrx) ' $f | awk -v n=$(basename $f .log) \
    '{printf "%s | %s %s | %s | %s %s | %s %.2f %s %s %s %s | %s %s | %s\n", n, $1, $2, $4, $7, $10, $25, $25 / $7, $29, $33, $34, $35, $36, $37, $39}'
done
