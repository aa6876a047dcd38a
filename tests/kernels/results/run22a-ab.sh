# A/B of run 22's three changes at 1080p, each config twice in turn; then a table.
B=.gpu/b
for i in 1 2; do
  for c in base head pool conv0 all; do
    case $c in
      base) e="ZCP_HEAD_REGS=0 ZCP_POOL_IN_CONV=0 ZCP_CONV0_EXACT=1";;
      head) e="ZCP_POOL_IN_CONV=0 ZCP_CONV0_EXACT=1";;
      pool) e="ZCP_HEAD_REGS=0 ZCP_CONV0_EXACT=1";;
      conv0) e="ZCP_HEAD_REGS=0 ZCP_POOL_IN_CONV=0";;
      all) e="";;
    esac
    env $e ZCP_BENCH_SIZE=1920x1080 $B/env $B/bin/bench_gpu 1000 > $OUT/ab-$c-$i.log 2>&1
  done
done
echo "== A/B 1080p (p50 us): config round | zc | copy | kern | net alone | timeline scanned/side/features/published"
for i in 1 2; do for c in base head pool conv0 all; do
  f=$OUT/ab-$c-$i.log
  zc=$(grep '^1920x1080 (' $f | sed 's/.*zc p50 \([0-9.]*\).*/\1/')
  cp=$(grep '^1920x1080 (' $f | sed 's/.*copy p50 \([0-9.]*\).*/\1/')
  kn=$(grep '^1920x1080 (' $f | sed 's/.*kern \([0-9.]*\).*/\1/')
  na=$(grep '^1920x1080 network paths' $f | sed 's/.*network alone layers \([0-9.]*\).*/\1/')
  tl=$(grep '^1920x1080 zero-copy timeline' $f | sed 's/.*: //')
  echo "$c $i | $zc | $cp | $kn | $na | $tl"
done; done
