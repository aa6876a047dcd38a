B=.gpu/b
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/g 1000 "kernels memcheck"
cat $OUT/r/g/summary.txt
bash tests/kernels/ab1080.sh $B $OUT/r 1 'tiled=' 'split=ZCP_CONV_TILED=0'
