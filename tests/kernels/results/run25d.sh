# Run 25d: the head's loads that do not depend on the layer before moved up: each warp's fc weights
# and bias before the dependent-launch wait, the published block's words with the logits in the last
# block (ZCP_HEAD_EARLY=0: as before). The kernels suite, the daemon cuda vs cpu, the 1080p A/B
# (three rounds), Nsight Compute on the layered path.
B=.gpu/b
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/k 150 "kernels daemon"
grep -v "^ok \|^cuda" $OUT/r/k/summary.txt | cut -c1-200
bash tests/kernels/ab1080.sh $B $OUT/r 3 'early=' 'late=ZCP_HEAD_EARLY=0'
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/n 100 "ncu"
sed -n '/ncu layers:/,/sum of kernel/p' $OUT/r/n/summary.txt | head -13
ZCP_HEAD_EARLY=0 bash $B/tests/kernels/gpu-run.sh $B $OUT/r/n0 100 "ncu"
sed -n '/ncu layers:/,/sum of kernel/p' $OUT/r/n0/summary.txt | head -13 | tail -2
