# Run 25e: the final tree (the head's early loads). The kernels suite, memcheck, racecheck, bench_gpu
# at every size, the daemon cuda vs cpu on the sample, the PyTorch peer (timing and check); then the
# 1080p A/B (default against ZCP_HEAD_EARLY=0), three rounds; Nsight Compute on the layered path.
B=.gpu/b
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/g 1000 "kernels memcheck racecheck bench daemon peer ncu"
grep -v "^ok " $OUT/r/g/summary.txt | cut -c1-220
echo "== bench table"
sed -n '/^size /,$p' $OUT/r/g/bench.log | head -40
bash tests/kernels/ab1080.sh $B $OUT/r 3 'early=' 'late=ZCP_HEAD_EARLY=0'
