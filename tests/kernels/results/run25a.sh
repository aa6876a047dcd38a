# Needs run25-convpair.patch applied (the pair kernel was measured, then taken out: RESULTS.md run 25).
# Run 25a: the first two layers in one launch (kernels/convpair.cu). The kernels suite (every pair
# tiling bit-identical to the host's fused multiply-adds), memcheck, the daemon cuda vs cpu on the
# sample; the 1080p A/B: the rule's tiling, the layers apart (ZCP_CONV_PAIR=0) and six other tilings,
# two rounds; then Nsight Compute on the layered path.
B=.gpu/b
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/k 150 "kernels memcheck daemon"
grep -v "^ok " $OUT/r/k/summary.txt | cut -c1-200
grep "^ok conv pair" $OUT/r/k/kernels.log | cut -c1-200
bash tests/kernels/ab1080.sh $B $OUT/r 2 'pair=' 'apart=ZCP_CONV_PAIR=0' 't8x4=ZCP_PAIR_TILE=8x4' \
        't4x4=ZCP_PAIR_TILE=4x4' 't8x2=ZCP_PAIR_TILE=8x2' 't16x2=ZCP_PAIR_TILE=16x2' 't4x2=ZCP_PAIR_TILE=4x2' \
        't2x8=ZCP_PAIR_TILE=2x8'
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/n 100 "ncu"
sed -n '/ncu layers:/,/sum of kernel/p' $OUT/r/n/summary.txt
