#!/bin/bash
# Run 26f: the division-free index arithmetic with the wait before it (bench_gpu_late: 8f42fa1 + the
# head barrier + run 26d's convolution with kpdl_wait at the top and the arithmetic pinned after it)
# against the tree (arithmetic before the wait) and bench_gpu_hb (the head barrier only), five rounds;
# "late" is 8f42fa1 + results/run26f-late.patch.
B=.gpu/b
O=$OUT/r
mkdir -p $O
for i in 1 2 3 4 5; do
  for v in new late hb; do
    bin=$B/bin/bench_gpu; [ $v != new ] && bin=$B/bin/bench_gpu_$v
    ZCP_BENCH_SIZE=1920x1080 $B/env $bin 1000 > $O/ab-$v-$i.log 2>&1
  done
done
echo "== A/B 1080p (p50 us): tree round | zc | copy | kern | net alone | timeline"
for i in 1 2 3 4 5; do for v in new late hb; do
  f=$O/ab-$v-$i.log
  zc=$(grep '^1920x1080 (' $f | sed 's/.*zc p50 \([0-9.]*\).*/\1/')
  cp=$(grep '^1920x1080 (' $f | sed 's/.*copy p50 \([0-9.]*\).*/\1/')
  kn=$(grep '^1920x1080 (' $f | sed 's/.*kern \([0-9.]*\).*/\1/')
  na=$(grep '^1920x1080 network paths' $f | sed 's/.*network alone layers \([0-9.]*\).*/\1/')
  tl=$(grep '^1920x1080 zero-copy timeline' $f | sed 's/.*: //')
  echo "$v $i | $zc | $cp | $kn | $na | $tl"
done; done
