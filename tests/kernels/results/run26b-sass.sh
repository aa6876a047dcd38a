#!/bin/bash
# Where the tiled convolutions and the head spend their cycles, per SASS instruction (issue 15
# item 2): Nsight Compute's full set on one frame's layered kernels (gpu-run.sh's ncufull part),
# then a report of the four convolutions and the head with the source counters, printed per SASS
# instruction (stall samples, executed instructions). From a bundle copy's root: B=.gpu/b.
B=${B:-.gpu/b}
O=$OUT/r
bash $B/tests/kernels/gpu-run.sh $B $O 100 ncufull > /dev/null 2>&1
cat $O/summary.txt
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
$NCU --version | tail -1
ZCP_BENCH_SIZE=1920x1080 timeout 300 $NCU --nvtx --nvtx-include "layers-seq-1920x1080/" \
        -k 'regex:conv3x3_relu_tile|fc_head|fc_softmax' --launch-count 6 --clock-control none \
        --section SourceCounters --section WarpStateStats --section InstructionStats --section LaunchStats \
        --section Occupancy --section SpeedOfLight -o $O/src -f $B/env $B/bin/bench_gpu 100 > $O/src.log 2>&1
echo "src report rc=$?"; tail -3 $O/src.log
for i in 0 1 2 3 4 5; do
  $NCU -i $O/src.ncu-rep --page source --csv --print-source sass --launch-skip $i --launch-count 1 \
        > $O/sass-$i.csv 2> $O/sass-$i.err || $NCU -i $O/src.ncu-rep --page source --csv --print-source sass \
        --kernel-id ":::$((i + 1))" > $O/sass-$i.csv 2>> $O/sass-$i.err
  echo "sass-$i: $(wc -l < $O/sass-$i.csv) lines; $(head -c 300 $O/sass-$i.err)"
done
$NCU -i $O/src.ncu-rep --page details --csv > $O/src-details.csv 2>&1
grep -c . $O/src-details.csv
