#!/bin/bash
# Ran on 2026-12-05 (RESULTS.md run 29) on 8d12738, the tree with the TMA branch; that branch was
# then taken out (slower on every layer): to run this again, `git apply results/run29-tma.patch`.
# (b) as run: Nsight Compute both ways only (the daemon's TMA runs were left out: the suite's
# bit-identity checks had passed).
# Run 29, prepared on 2026-12-04 in a session without a device; the next session's first call.
# (a) d29dc1f (one publish helper, one capture chain for the meeting and ZCP_MEET=0) has not run on
#     a GPU: the kernels suite (test_meet, either order; the backend both ways), memcheck, racecheck
#     (its quick run takes the TMA copies too), the daemon.
#     The suite now also checks the tiled layers copying through the tensor memory accelerator
#     (ZCP_K_TILE_TMA on every tiling that fits, bit-identical to the copies; the nets made with
#     ZCP_CONV_TMA=1 bit-identical on every frame).
# (b) 1080p, the copies (default) against ZCP_CONV_TMA=1 and =2 (tilings costed for the
#     accelerator), four interleaved rounds.
# (c) Nsight Compute on one frame's layered kernels, both ways; the daemon (cuda vs cpu) with ZCP_CONV_TMA=1.
# Two device calls (each under the 600 s limit), each as
#   mkdir -p $OUT/r; bash tests/kernels/results/run29.sh a > $OUT/r/all.txt 2>&1   (then b: (c))
B=.gpu/b O=$OUT/r
case ${1:-a} in
a)
        bash "$B/tests/kernels/gpu-run.sh" "$B" "$O" 150 "kernels memcheck racecheck daemon"
        # If the suite failed (the TMA checks abort it at their first difference), the rest without them.
        grep -q "^kernels  *rc=0 " "$O/summary.txt" ||
                ZCP_KTEST_TMA=0 bash "$B/tests/kernels/gpu-run.sh" "$B" "$O/notma" 150 "kernels"
        bash tests/kernels/ab1080.sh "$B" "$O/ab" 4 'copies=' 'tma=ZCP_CONV_TMA=1' 'tmaplan=ZCP_CONV_TMA=2'
        cat "$O/summary.txt" "$O/notma/summary.txt" 2>/dev/null
        grep -h "^ok meet\|TMA\|CHECK failed" "$O"/kernels*.log "$O"/notma/kernels*.log 2>/dev/null | head -20
        ;;
b)
        bash "$B/tests/kernels/gpu-run.sh" "$B" "$O/ncu-copies" 100 "ncu"
        ZCP_CONV_TMA=1 bash "$B/tests/kernels/gpu-run.sh" "$B" "$O/ncu-tma" 100 "ncu"
        echo "== copies"
        cat "$O/ncu-copies/summary.txt"
        echo "== ZCP_CONV_TMA=1"
        cat "$O/ncu-tma/summary.txt"
        ;;
esac
