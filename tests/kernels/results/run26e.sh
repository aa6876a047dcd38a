#!/bin/bash
# Run 26e: which of run 26d's two changes moved the kernels' figure (kern 0.5 us up, the network
# alone 0.7 us down): bench_gpu of the tree (both), bench_gpu_hb (8f42fa1 + the head's first cluster
# barrier only) and bench_gpu_old (8f42fa1), 1080p, interleaved, five rounds. B=.gpu/b, logs $OUT/r.
# "The tree": 26d's (8f42fa1 + results/run26d-pinned.patch + the head barrier); the extra binaries are
# builds of 8f42fa1 copied into the bundle's bin/ by hand (the device tool carries one bundle).
B=.gpu/b
O=$OUT/r
mkdir -p $O
for i in 1 2 3 4 5; do
  for v in new hb old; do
    bin=$B/bin/bench_gpu; [ $v != new ] && bin=$B/bin/bench_gpu_$v
    ZCP_BENCH_SIZE=1920x1080 $B/env $bin 1000 > $O/ab-$v-$i.log 2>&1
  done
done
echo "== A/B 1080p (p50 us): tree round | zc | copy | kern | net alone | timeline"
for i in 1 2 3 4 5; do for v in new hb old; do
  f=$O/ab-$v-$i.log
  zc=$(grep '^1920x1080 (' $f | sed 's/.*zc p50 \([0-9.]*\).*/\1/')
  cp=$(grep '^1920x1080 (' $f | sed 's/.*copy p50 \([0-9.]*\).*/\1/')
  kn=$(grep '^1920x1080 (' $f | sed 's/.*kern \([0-9.]*\).*/\1/')
  na=$(grep '^1920x1080 network paths' $f | sed 's/.*network alone layers \([0-9.]*\).*/\1/')
  tl=$(grep '^1920x1080 zero-copy timeline' $f | sed 's/.*: //')
  echo "$v $i | $zc | $cp | $kn | $na | $tl"
done; done
