#!/bin/bash
# Built here: git worktree add /tmp/x512 HEAD; cd /tmp/x512; git apply <this dir>/run29d-512.patch;
# meson setup bx -Dcuda-arch=90 -Dwerror=true; ninja -C bx tests/kernels/bench_gpu tests/kernels/ktest_kernels;
# then into .gpu/b2/bin (stripped), with .gpu/b2/env running .gpu/b/env. Run as
#   mkdir -p $OUT/r; bash tests/kernels/results/run29d.sh > $OUT/r/all.txt 2>&1
# Run 29d: the tiled convolutions with 512 threads a block (CTILE_THREADS 512, one block an SM; .gpu/b2,
# built from a worktree with results/run29d-512.patch) against the tree's 256 (.gpu/b), interleaved.
O=$OUT/r
.gpu/b2/env .gpu/b2/bin/ktest_kernels > $O/k512.log 2>&1; echo "ktest_kernels (512) rc=$?"
tail -3 $O/k512.log
for i in 1 2 3 4; do
        first=; [ $i = 1 ] && first=ZCP_BENCH_VARIANTS=1
        AB_FIRST_ENV=$first bash tests/kernels/ab1080.sh .gpu/b $O/t256-$i 1 't256=' > $O/t256-$i.txt
        AB_FIRST_ENV=$first bash tests/kernels/ab1080.sh .gpu/b2 $O/t512-$i 1 't512=' > $O/t512-$i.txt
done
grep -h "conv[0-3] " $O/t256-1/ab-t256-1.log | head -40
echo ==
grep -h "conv[0-3] " $O/t512-1/ab-t512-1.log | head -40
echo "== A/B 1080p (p50 us): config round | zc | copy | kern | kern scan path | net alone | timeline"
for i in 1 2 3 4; do tail -n +2 $O/t256-$i.txt | sed "s/^t256 1/t256 $i/"; tail -n +2 $O/t512-$i.txt | sed "s/^t512 1/t512 $i/"; done
