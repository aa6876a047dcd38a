# Needs run25-convpair.patch applied (the pair kernel was measured, then taken out: RESULTS.md run 25).
# Run 25c: the pair's second layer with its input channels in slices (ks) where its items are fewer
# than the threads. The kernels suite, the 1080p A/B of tilings against the layers apart (two
# rounds), Nsight Compute with the 4x4, 2-pixel tiling.
B=.gpu/b
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/k 150 "kernels"
grep -v "^ok " $OUT/r/k/summary.txt | cut -c1-200
grep "^ok conv pair" $OUT/r/k/kernels.log | cut -c1-200
bash tests/kernels/ab1080.sh $B $OUT/r 2 'apart=ZCP_CONV_PAIR=0' 't4x4x2=ZCP_PAIR_TILE=4x4x2' \
        't8x2x2=ZCP_PAIR_TILE=8x2x2' 't4x4=ZCP_PAIR_TILE=4x4x1' 't8x2=ZCP_PAIR_TILE=8x2x1' \
        't2x8x2=ZCP_PAIR_TILE=2x8x2' 't4x8x2=ZCP_PAIR_TILE=4x8x2' 't4x2x2=ZCP_PAIR_TILE=4x2x2' \
        't8x4=ZCP_PAIR_TILE=8x4x1'
ZCP_PAIR_TILE=4x4x2 bash $B/tests/kernels/gpu-run.sh $B $OUT/r/n 100 "ncu"
sed -n '/ncu layers:/,/sum of kernel/p' $OUT/r/n/summary.txt | head -14
