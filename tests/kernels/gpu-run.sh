#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs, on a GPU machine, everything the GPU stage is judged by, from a folder
# made by gpu-bundle (binaries built elsewhere, with their libraries):
#   the kernels suite (ktest_kernels, ktest_sticky), compute-sanitizer
#   (memcheck, racecheck) on the quick subset, the benchmark, and zcpipe on the sample (cuda vs cpu,
#   pace fast, results compared; cuda at pace realtime for end-to-end latency).
#
#   tests/kernels/gpu-run.sh BUNDLE OUTDIR [FRAMES] [PARTS]
#
# BUNDLE holds bin/{ktest_kernels,ktest_sticky,bench_gpu,zcpipe}, config/,
# samples/, models/, tests/kernels/compare_results.py (see RESULTS.md for
# the exact bundling command). PARTS: any of "kernels memcheck racecheck bench daemon"
# (default: all). Logs go to OUTDIR; a summary table is printed last.
set -u
B=$(cd "$1" && pwd)
O=$(mkdir -p "$2" && cd "$2" && pwd)
N=${3:-2000}
PARTS=${4:-kernels memcheck racecheck bench daemon}
export ZCP_SOURCE_ROOT=$B
S=$O/summary.txt
: >"$S"

step() {   # step NAME TIMEOUT CMD... : runs CMD with the bundle's environment, log in OUTDIR/NAME.log
        local name=$1 t=$2 rc
        shift 2
        local t0=$SECONDS
        timeout "$t" "$B/env" "$@" >"$O/$name.log" 2>&1
        rc=$?
        printf '%-22s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" "$(tail -n 1 "$O/$name.log" | cut -c1-110)" >>"$S"
        return $rc
}

{
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,pcie.link.gen.current,pcie.link.width.current,temperature.gpu,power.draw --format=csv
        nproc
        uname -r
} >"$O/machine.txt" 2>&1

case " $PARTS " in *" kernels "*)
        step kernels 400 "$B/bin/ktest_kernels"
        step sticky 60 "$B/bin/ktest_sticky"
        ;;
esac
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
for tool in memcheck racecheck; do
        case " $PARTS " in *" $tool "*)
                if [ -n "$CS" ]; then
                        ZCP_KTEST_QUICK=1 step "$tool" 60 "$CS" --tool "$tool" --error-exitcode 9 "$B/bin/ktest_kernels"
                else
                        echo "compute-sanitizer: not found" >>"$S"
                fi
                ;;
        esac
done
case " $PARTS " in *" bench "*)
        step bench 400 "$B/bin/bench_gpu" "$N"
        ;;
esac
case " $PARTS " in *" daemon "*)
        # Variants of config/sample.yaml: pace fast, backend cuda / cpu, results to /tmp.
        for be in cuda cpu; do
                sed -e 's/pace: realtime.*/pace: fast/' -e "s|/tmp/zcpipe-sample.jsonl|/tmp/zc-$be.jsonl|" \
                    -e "s|^    model:|    gpu:\n      backend: $be\n    model:|" "$B/config/sample.yaml" >"$B/config/sample-$be.yaml"
        done
        sed -e "s|/tmp/zc-cuda.jsonl|/tmp/zc-cuda-rt.jsonl|" -e 's/pace: fast/pace: realtime/' \
            "$B/config/sample-cuda.yaml" >"$B/config/sample-cuda-rt.yaml"
        # The same with the infer thread spinning on the GPU event instead of sleeping in the driver.
        sed -e "s|/tmp/zc-cuda-rt.jsonl|/tmp/zc-cuda-rt-spin.jsonl|" -e 's/backend: cuda/backend: cuda\n      sync: spin/' \
            "$B/config/sample-cuda-rt.yaml" >"$B/config/sample-cuda-rt-spin.yaml"
        {
                for v in cuda cpu cuda-rt cuda-rt-spin; do
                        echo "===== zcpipe --config config/sample-$v.yaml"
                        cat "$B/config/sample-$v.yaml"
                        t0=$(date +%s.%N)
                        timeout 120 "$B/env" "$B/bin/zcpipe" --config "$B/config/sample-$v.yaml" 2>&1
                        echo "===== exit $?, $(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null || true) s"
                done
        } >"$O/daemon.log" 2>&1
        grep -E "^===== exit" "$O/daemon.log" | tr '\n' ' ' | sed 's/^/daemon (cuda cpu cuda-rt) /' >>"$S"
        echo >>"$S"
        step compare 60 python3 "$B/tests/kernels/compare_results.py" /tmp/zc-cpu.jsonl /tmp/zc-cuda.jsonl
        for v in cuda cpu cuda-rt cuda-rt-spin; do
                python3 "$B/tests/kernels/stage_latency.py" "/tmp/zc-$v.jsonl" "$v" >>"$O/daemon.log" 2>&1
        done
        grep -E "^cuda(-rt)?(-spin)?: " "$O/daemon.log" >>"$S"
        ;;
esac

echo "== machine"
cat "$O/machine.txt"
if [ -f "$O/bench.log" ]; then
        echo "== bench (table)"
        sed -n '/^GPU stage:/,$p' "$O/bench.log"
fi
echo "== summary"
cat "$S"
