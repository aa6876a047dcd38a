# Run 24g: the final tree (tiled convolutions, packed weights). The kernels suite, memcheck, racecheck,
# bench_gpu at every size, the daemon cuda vs cpu on the sample, the PyTorch peer (timing and check);
# then the 1080p A/B (default against ZCP_CONV_TILED=0), three rounds.
B=.gpu/b
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/g 1000 "kernels memcheck racecheck bench daemon peer"
grep -v "^ok " $OUT/r/g/summary.txt | cut -c1-220
echo "== bench table"
sed -n '/^size /,$p' $OUT/r/g/bench.log | head -40
bash tests/kernels/ab1080.sh $B $OUT/r 3 'tiled=' 'split=ZCP_CONV_TILED=0'
