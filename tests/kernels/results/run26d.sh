#!/bin/bash
# Run 26d: the tiled convolution's index arithmetic ahead of the dependent-launch wait and without
# integer divisions (ctile_div with host reciprocals; run 26b's profile: a fifth of every layer's
# stall samples in the block's set-up after the wait), and the cluster head arriving at a first
# cluster barrier before its stores into block 0 (run 26c's racecheck: distributed shared memory
# may be written only in blocks known to have started). The kernels suite, memcheck, the daemon,
# then 1080p bench_gpu interleaved against bin/bench_gpu_old (a build of 8f42fa1, the tree before),
# four rounds, Nsight Compute, racecheck last. B=.gpu/b, logs under $OUT/r. The tree measured: 8f42fa1
# with results/run26d-pinned.patch (kernels/convtile.cu) and the head barrier of the commit after it.
B=.gpu/b
O=$OUT/r
bash $B/tests/kernels/gpu-run.sh $B $O/k 150 "kernels memcheck daemon"
grep -v "^ok \|^cuda" $O/k/summary.txt | cut -c1-200
grep -q "rc=0 .*all kernel checks passed" $O/k/summary.txt || { grep -i -E "fail|error" $O/k/kernels.log | head -20; exit 1; }
for i in 1 2 3 4; do
  for v in new old; do
    bin=$B/bin/bench_gpu; [ $v = old ] && bin=$B/bin/bench_gpu_old
    ZCP_BENCH_SIZE=1920x1080 $B/env $bin 1000 > $O/ab-$v-$i.log 2>&1
  done
done
echo "== A/B 1080p (p50 us): tree round | zc | copy | kern | net alone | timeline"
for i in 1 2 3 4; do for v in new old; do
  f=$O/ab-$v-$i.log
  zc=$(grep '^1920x1080 (' $f | sed 's/.*zc p50 \([0-9.]*\).*/\1/')
  cp=$(grep '^1920x1080 (' $f | sed 's/.*copy p50 \([0-9.]*\).*/\1/')
  kn=$(grep '^1920x1080 (' $f | sed 's/.*kern \([0-9.]*\).*/\1/')
  na=$(grep '^1920x1080 network paths' $f | sed 's/.*network alone layers \([0-9.]*\).*/\1/')
  tl=$(grep '^1920x1080 zero-copy timeline' $f | sed 's/.*: //')
  echo "$v $i | $zc | $cp | $kn | $na | $tl"
done; done
bash $B/tests/kernels/gpu-run.sh $B $O/n 100 "ncu"
sed -n '/ncu layers:/,/sum of kernel/p' $O/n/summary.txt | head -13
bash $B/tests/kernels/gpu-run.sh $B $O/rc 100 "racecheck"
cat $O/rc/summary.txt
