# Run 24 a, b, d, f (the tree of each): the tiled convolution. The kernels suite and memcheck, then
# 1080p A/B: the default (tiled layers) against ZCP_CONV_TILED=0 (the split layers), three rounds;
# the per-kernel breakdown (every variant and the tiled kernel's runners-up) from round 1.
B=.gpu/b
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/k 1000 "kernels memcheck"
cat $OUT/r/k/summary.txt
grep -E "^(ok|FAIL|not ok).*(conv3x3|tiled)|FAIL|layers path|fused path" $OUT/r/k/kernels.log | head -30
AB_FIRST_ENV=ZCP_BENCH_VARIANTS=1 bash tests/kernels/ab1080.sh $B $OUT/r 3 'tiled=' 'split=ZCP_CONV_TILED=0' > $OUT/r/ab.txt
echo "== per-kernel, tiled round 1"
grep -E "^    (conv|preprocess|avgpool|fc|motion|zcnet)" $OUT/r/ab-tiled-1.log | cut -c1-70
cat $OUT/r/ab.txt
