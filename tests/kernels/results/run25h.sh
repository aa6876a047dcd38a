# Run 25h: the head as one cluster of 8 blocks meeting in distributed shared memory (fc_head_cluster)
# instead of 125 blocks meeting through global memory. The kernels suite (the two heads bit-identical
# on every frame), memcheck, the daemon cuda vs cpu, the 1080p A/B against ZCP_HEAD_CLUSTER=0 (three
# rounds), Nsight Compute, racecheck last.
B=.gpu/b
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/k 150 "kernels memcheck daemon"
grep -v "^ok \|^cuda" $OUT/r/k/summary.txt | cut -c1-200
grep "cluster" $OUT/r/k/kernels.log | head -4
bash tests/kernels/ab1080.sh $B $OUT/r 3 'cluster=' 'blocks=ZCP_HEAD_CLUSTER=0'
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/n 100 "ncu"
sed -n '/ncu layers:/,/sum of kernel/p' $OUT/r/n/summary.txt | head -13
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/rc 100 "racecheck"
cat $OUT/r/rc/summary.txt
