#!/bin/bash
# The teams' wake-ahead at 30 fps on the GPU machine's host: a 1080p YUYV frame
# converted by teams of 2 and 4 every 1/30 s, on against off (bench_cpu --only
# wake): conversion median, members woken per frame, the helpers' CPU per frame.
# From the repository root of a bundle copy: B=.gpu/b, logs under $OUT/r.
B=${B:-.gpu/b}
timeout 60 $B/env $B/bin/bench_cpu --only wake --threads 1,2,4 --iter 150 --cold > $OUT/r/wake-cold.log 2>&1
timeout 60 $B/env $B/bin/bench_cpu --only wake --threads 1,2,4 --iter 150 > $OUT/r/wake-warm.log 2>&1
cat $OUT/r/wake-cold.log $OUT/r/wake-warm.log
