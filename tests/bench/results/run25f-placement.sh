#!/bin/bash
# Issue 16 item 1 on the GPU machine's host: does placing the 4 conversion threads matter? The
# host's CPU topology, then the paced cold conversions of run 23c (72 ms clock, wake-ahead on) with
# the process free to use every CPU (the scheduler places the threads) and pinned by taskset to
# 4 CPUs chosen three ways. From the repository root of a bundle copy: B=.gpu/b, logs under $OUT/r.
B=${B:-.gpu/b}
F="--only convert --threads 1,4 --sizes 1920x1080 --formats yuyv,uyvy,rgb24 --iter 61 --period 72 --cold"
{
  lscpu
  for c in /sys/devices/system/cpu/cpu[0-9]*; do
    echo "$(basename $c): siblings $(cat $c/topology/thread_siblings_list 2>/dev/null)" \
      "core $(cat $c/topology/core_id 2>/dev/null) package $(cat $c/topology/physical_package_id 2>/dev/null)"
  done
} > $OUT/r/topology.txt 2>&1
grep -E "^(Model name|Thread|Core|Socket|NUMA|L2|L3)" $OUT/r/topology.txt
grep siblings $OUT/r/topology.txt | head -16 | tr '\n' ';'; echo
run() {   # run NAME [taskset CPUS]
  local n=$1; shift
  timeout 120 $B/env "$@" $B/bin/bench_cpu $F > $OUT/r/cpu-$n.log 2>&1
}
run free
run cpus0-3 taskset -c 0-3
run cpus0246 taskset -c 0,2,4,6
run cpus0-4-8-12 taskset -c 0,4,8,12
echo "== ms medians: log | format | libyuv 1T | zcpipe 1T | 4T | 4T/1T | crit | work xW | woken | libyuv 4 bands, / libyuv 1T"
for f in $OUT/r/cpu-*.log; do
  grep -E '^(yuyv|uyvy|rgb24) ' $f | awk -v n=$(basename $f .log) \
    '{printf "%s | %s | %s | %s | %s | %.3f | %s | %s %s | %s | %s %.3f\n", n, $1, $4, $7, $12, $12 / $7, $16, $20, $21, $22, $23, $23 / $4}'
done
