# A/B at 1080p, each config three times in turn; then a table.
B=.gpu/b
CFGS="all nopdl"
for i in 1 2 3; do
  for c in $CFGS; do
    case $c in
      all) e="";;
      nopdl) e="ZCP_PDL=0";;
    esac
    env $e ZCP_BENCH_SIZE=1920x1080 $B/env $B/bin/bench_gpu 1000 > $OUT/r/ab-$c-$i.log 2>&1
  done
done
echo "== A/B 1080p (p50 us): config round | zc | copy | kern | net alone | timeline scanned/side/features/published"
for i in 1 2 3; do for c in $CFGS; do
  f=$OUT/r/ab-$c-$i.log
  zc=$(grep '^1920x1080 (' $f | sed 's/.*zc p50 \([0-9.]*\).*/\1/')
  cp=$(grep '^1920x1080 (' $f | sed 's/.*copy p50 \([0-9.]*\).*/\1/')
  kn=$(grep '^1920x1080 (' $f | sed 's/.*kern \([0-9.]*\).*/\1/')
  na=$(grep '^1920x1080 network paths' $f | sed 's/.*network alone layers \([0-9.]*\).*/\1/')
  tl=$(grep '^1920x1080 zero-copy timeline' $f | sed 's/.*: //')
  echo "$c $i | $zc | $cp | $kn | $na | $tl"
  tail -n 2 $f | grep -i "fail\|error" | head -2
done; done
