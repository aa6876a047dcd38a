# Run 24i (a tree since reverted in part): the tiled layers trigger their dependent launch after their
# sums and copy their packed weights before waiting. The kernels suite, memcheck, the daemon cuda vs
# cpu; then 1080p A/B, three rounds: default, ZCP_CONV_TRIGGER=0 (the early copy alone),
# ZCP_CONV_TILED=0 (run 22's layers).
B=.gpu/b
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/g 1000 "kernels memcheck daemon"
grep -v "^ok \|^cuda-rt" $OUT/r/g/summary.txt | cut -c1-160
bash tests/kernels/ab1080.sh $B $OUT/r 3 'trigger=' 'notrigger=ZCP_CONV_TRIGGER=0' 'split=ZCP_CONV_TILED=0'
