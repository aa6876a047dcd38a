# Needs the trigger described in RESULTS.md run 25g (taken out again): kpdl_trigger() at the top of conv3x3_relu_tile when the layer has parts.
# Run 25g: the last layer lets the head launch at once (griddepcontrol.launch_dependents at the top
# of conv3's blocks; the head's blocks load their fc rows, then wait). The kernels suite, the daemon
# cuda vs cpu, then the 1080p A/B against ZCP_HEAD_TRIGGER=0, three rounds.
B=.gpu/b
bash $B/tests/kernels/gpu-run.sh $B $OUT/r/k 150 "kernels daemon"
grep -v "^ok \|^cuda" $OUT/r/k/summary.txt | cut -c1-200
bash tests/kernels/ab1080.sh $B $OUT/r 3 'trig=' 'notrig=ZCP_HEAD_TRIGGER=0'
