#!/bin/bash
# Run 32: the tensor-core channel loop as the default (ZCP_CONV_MMA=0: the FFMA loop). Bundle as always
# (tests/kernels/gpu-bundle.sh build-cuda); carry .gpu, run as
#   mkdir -p $OUT/r; bash tests/kernels/results/run32.sh > $OUT/r/all.txt 2>&1
O=$OUT/r
mkdir -p "$O"
# a: the whole set on the flipped tree: the kernels suite, memcheck, racecheck, bench_gpu at every size, the daemon
# (cuda vs cpu), the PyTorch peer (equality and time), the PTX path (FFMA natively vs compute_75 PTX bit for bit,
# the native default vs the PTX within 1e-4).
bash .gpu/b/tests/kernels/gpu-run.sh .gpu/b "$O/g" 1000 "kernels memcheck racecheck bench daemon peer ptx" \
        > "$O/g.txt" 2>&1
# b: 1080p, three interleaved rounds: the default (tensor cores) and the FFMA loop.
bash tests/kernels/ab1080.sh .gpu/b "$O/ab" 3 'mma=' 'ffma=ZCP_CONV_MMA=0' > "$O/ab.txt" 2>&1
echo "== gpu-run"
cat "$O/g.txt" | tail -60
grep -h "tensor cores\|all kernel checks\|ERROR SUMMARY\|RACECHECK SUMMARY\|FAIL" "$O"/g/*.log | sort | uniq -c | head -30
echo "== A/B"
cat "$O/ab.txt"
