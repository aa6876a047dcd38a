#!/bin/bash
# Issue 16 item 1 on the GPU machine's host, conversions paced on an 18 ms clock
# (bench_cpu --period: as a camera delivers), cold and warm, the team's
# wake-ahead on and off; then back to back. Beside each team: libyuv split
# into the same bands. From the repository root of a bundle copy: B=.gpu/b,
# logs under $OUT/r.
B=${B:-.gpu/b}
F="--only convert --threads 1,2,4 --formats yuyv,uyvy,yvyu,rgb24,bgr24,rgbx,bgrx --iter 151"
run() {   # run NAME AHEAD ARGS...
  local n=$1 a=$2; shift 2
  ZCP_WORKERS_AHEAD=$a timeout 150 $B/env $B/bin/bench_cpu $F "$@" > $OUT/r/cpu-$n.log 2>&1
}
run paced-cold-on-1 1 --sizes 1920x1080,1280x720 --cold --period 18
run paced-cold-off-1 0 --sizes 1920x1080,1280x720 --cold --period 18
run paced-cold-on-2 1 --sizes 1920x1080 --cold --period 18
run paced-cold-off-2 0 --sizes 1920x1080 --cold --period 18
run paced-warm-on 1 --sizes 1920x1080,1280x720 --period 18
run b2b-cold-on 1 --sizes 1920x1080 --cold
echo "== ms medians: log | format size | libyuv 1T | zcpipe 1T ratio | 4T 4T/1T crit work xW woken | libyuv 4 lxN | late"
for f in $OUT/r/cpu-*.log; do
  grep -E '^(yuyv|uyvy|yvyu|rgb24|bgr24|rgbx|bgrx) ' $f | awk -v n=$(basename $f .log) \
    '{printf "%s | %s %s | %s | %s %s | %s %.2f %s %s %s %s | %s %s | %s\n", n, $1, $2, $4, $7, $10, $25, $25 / $7, $29, $33, $34, $35, $36, $37, $39}'
done
