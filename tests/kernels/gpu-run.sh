#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs, on a GPU machine, everything the GPU stage is judged by, from a folder
# made by gpu-bundle (binaries built elsewhere, with their libraries):
#   the kernels suite (ktest_kernels, ktest_sticky), compute-sanitizer
#   (memcheck, racecheck) on the quick subset, the benchmark, zcpipe on the sample (cuda vs cpu,
#   pace fast, results compared; cuda at pace realtime for end-to-end latency), and zcpipe on the
#   fake camera at 1080p (io userptr against io mmap read in place; cuda vs cpu compared), and
#   zcpipe-bench --quick (copy against zero-copy: its table, CSV and PNG), and N file streams of 1080p
#   raw video and H.264 (tests/kernels/files-bench.sh: total frames/s, copies against slot_direct).
#
#   tests/kernels/gpu-run.sh BUNDLE OUTDIR [FRAMES] [PARTS]
#
# BUNDLE holds bin/{ktest_kernels,ktest_sticky,bench_gpu,bench_sync,zcpipe,zcpipe-bench}, config/,
# samples/, models/, tests/kernels/compare_results.py, bin/libfakecam.so: tests/kernels/gpu-bundle.sh
# makes it. PARTS: any of "kernels memcheck racecheck bench sync ncu ncufull streams cpu daemon
# camera peer ptx zbench files" (default: all). Logs go to OUTDIR; a summary table is printed last.
# docs/performance.md says which part gives which of its figures.
set -u
B=$(cd "$1" && pwd)
O=$(mkdir -p "$2" && cd "$2" && pwd)
N=${3:-2000}
PARTS=${4:-kernels memcheck racecheck bench sync ncu ncufull streams cpu daemon camera peer ptx zbench files}
export ZCP_SOURCE_ROOT=$B
# The bundle's default weights (the build tree's models/, copied by gpu-bundle.sh): for the tests
# and for zcpipe, which runs outside its build tree here.
export ZCP_MODELDIR=$B/models
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
        ZCP_PRE_DIRECT=0 step kernels-no-direct 400 "$B/bin/ktest_kernels"
        step sticky 60 "$B/bin/ktest_sticky"
        ;;
esac
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
for tool in memcheck racecheck; do
        case " $PARTS " in *" $tool "*)
                if [ -n "$CS" ]; then
                        # 300 s: racecheck checks every shared-memory access, and the tiled convolutions
                        # make many (over 60 s on an H200).
                        ZCP_KTEST_QUICK=1 step "$tool" "${SANITIZER_SECONDS:-300}" "$CS" --tool "$tool" --error-exitcode 9 \
                                "$B/bin/ktest_kernels"
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
case " $PARTS " in *" sync "*)
        # gpu.sync side by side: latency and the waiting thread's CPU per frame, frames at 30 fps.
        step sync 300 "$B/bin/bench_sync" "${SYNC_FRAMES:-150}" "${SYNC_FPS:-30}"
        sed -n '/^submit -> results visible/,$p' "$O/sync.log" >>"$S"
        grep -E "hybrid wait over" "$O/sync.log" | sed 's/^.*cuda backend: //' >>"$S"
        ;;
esac
case " $PARTS " in *" ncu "*)
        # Nsight Compute on the device-resident 1920x1080 sequence (preprocess + zcnet + motion, issue 15; as
        # copy mode runs it, bench_gpu's kern: the "direct" range), each network path: every kernel of the
        # first frames of bench_gpu's timed replays (an NVTX range),
        # the Speed Of Light section, clocks as they run (not locked to base), then a per-kernel table.
        NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
        if [ -n "$NCU" ]; then
                for p in layers fused; do
                        t0=$SECONDS
                        ZCP_BENCH_SIZE=1920x1080 timeout 300 "$NCU" --nvtx --nvtx-include "$p-direct-1920x1080/" \
                                --launch-count "${NCU_LAUNCHES:-40}" --clock-control none --section SpeedOfLight --csv \
                                --page details "$B/env" "$B/bin/bench_gpu" 100 >"$O/ncu-$p.csv" 2>"$O/ncu-$p.err"
                        printf '%-22s rc=%-3s %4ss  %s\n' "ncu-$p" "$?" "$((SECONDS - t0))" \
                                "$(grep -c '"Duration"' "$O/ncu-$p.csv") kernel launches profiled" >>"$S"
                        python3 "$B/tests/kernels/ncu_table.py" "$O/ncu-$p.csv" "$p" >>"$S" 2>&1
                done
        else
                echo "ncu: not found" >>"$S"
        fi
        ;;
esac
case " $PARTS " in *" ncufull "*)
        # Why the layered kernels take their time: Nsight Compute's full set on one frame's motion, convolutions,
        # pool and head (1920x1080, device-resident), summarized by ncu_table.py --full; the CSV stays in OUTDIR.
        NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
        if [ -n "$NCU" ]; then
                t0=$SECONDS
                ZCP_BENCH_SIZE=1920x1080 timeout 400 "$NCU" --nvtx --nvtx-include "layers-seq-1920x1080/" \
                        -k 'regex:conv3x3|fc_softmax|motion|avgpool' --launch-count 7 --set full --csv --page details \
                        "$B/env" "$B/bin/bench_gpu" 100 >"$O/ncu-full.csv" 2>"$O/ncu-full.err"
                printf '%-22s rc=%-3s %4ss\n' ncu-full "$?" "$((SECONDS - t0))" >>"$S"
                python3 "$B/tests/kernels/ncu_table.py" --full "$O/ncu-full.csv" layers >>"$S" 2>&1
                # Why warps wait, per launch (the stall metrics by name: the details page has none).
                t0=$SECONDS
                ZCP_BENCH_SIZE=1920x1080 timeout 300 "$NCU" --nvtx --nvtx-include "layers-seq-1920x1080/" \
                        -k 'regex:conv3x3|fc_softmax' --launch-count 5 --page raw --csv \
                        --metrics 'regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$' \
                        "$B/env" "$B/bin/bench_gpu" 100 >"$O/ncu-stalls.csv" 2>"$O/ncu-stalls.err"
                printf '%-22s rc=%-3s %4ss\n' ncu-stalls "$?" "$((SECONDS - t0))" >>"$S"
                python3 "$B/tests/kernels/ncu_table.py" --stalls "$O/ncu-stalls.csv" layers >>"$S" 2>&1
        else
                echo "ncu: not found" >>"$S"
        fi
        ;;
esac
case " $PARTS " in *" cpu "*)
        # The host's CPU side (issue 16): in-place conversion against libyuv per format, 1, 2 and 4 threads
        # (tests/bench/bench_cpu.c; its output explains its columns).
        step cpu 300 "$B/bin/bench_cpu" --only convert --threads 1,2,4 --sizes 1920x1080,1280x720 \
                --formats yuyv,uyvy,yvyu,rgb24,bgr24,rgbx,bgrx --iter "${CPU_ITER:-401}"
        sed -n '/^format size/,$p' "$O/cpu.log" | head -40 >>"$S"
        ;;
esac
case " $PARTS " in *" streams "*)
        # transfer auto against both fixed modes with N streams of 1080p, at 30 fps and at full rate (issue 15
        # item 4; tests/kernels/bench_streams.c): the table, its target line and auto's switches.
        # STREAMS_ROUNDS interleaved rounds per row (medians); ~5 min with seconds 2 and 3 rounds.
        step streams 590 "$B/bin/bench_streams" "${STREAMS_SECONDS:-2}" \
                "${STREAMS_N:-1,4,8,16}" 1 30 "${STREAMS_ROUNDS:-3}"
        sed -n '/^transfer auto against the fixed modes/,$p' "$O/streams.log" >>"$S"
        grep -E "transfer auto \([0-9]+ streams\): (zero-copy|copy) ->" "$O/streams.log" | sed 's/^.*cuda backend: //' \
                | head -20 >>"$S"
        ;;
esac
case " $PARTS " in *" zbench "*)
        # Copy against zero-copy on this machine (tools/bench/zcpipe-bench, issue 15): the table,
        # from its header lines on, goes to the summary; the PNG and CSV stay in OUTDIR.
        step zbench 120 "$B/bin/zcpipe-bench" --quick --png "$O/zcpipe-bench.png" --csv "$O/zcpipe-bench.csv"
        sed -n '/^zcpipe-bench /,$p' "$O/zbench.log" >>"$S"
        ;;
esac
case " $PARTS " in *" files "*)
        # N file streams of 1080p (issue 15 item 5), FILES_N (default 1,8,16) streams of each format, backend
        # FILES_BACKEND (default cuda), pace fast, loop, FILES_SECONDS (default 10) each: raw video (I420 in
        # Matroska, no decoder: copied)
        # and H.264 (openh264enc here; openh264dec decodes it, the bundle has no libav, straight into the
        # ring's slots). The files are made with the bundle's gst-launch from the sample scaled up; the
        # table (frames/s, the decoder and its thread bound, copies against slot_direct) goes to the summary.
        t0=$SECONDS
        RUN="$B/env" ZCPIPE="$B/bin/zcpipe" GST_LAUNCH="$B/bin/gst-launch-1.0" SAMPLE="$B/samples/vtest-h264.mp4" \
                WEIGHTS="$B/models/zcnet-default.safetensors" timeout 580 bash "$B/tests/kernels/files-bench.sh" \
                "$O/files" "${FILES_BACKEND:-cuda}" "${FILES_N:-1,8,16}" "${FILES_SECONDS:-10}" >"$O/files.log" 2>&1
        printf '%-22s rc=%-3s %4ss\n' files "$?" "$((SECONDS - t0))" >>"$S"
        grep -E "^file:" "$O/files.log" >>"$S"
        sed -n '/^  N format/,$p' "$O/files.log" >>"$S"
        ;;
esac
case " $PARTS " in *" daemon "*)
        # Variants of config/sample.yaml: pace fast, backend cuda / cpu, results to /tmp.
        for be in cuda cpu; do
                sed -e 's/pace: realtime.*/pace: fast/' -e 's/loop: true.*/loop: false/' \
                    -e "s|/tmp/zcpipe-sample.jsonl|/tmp/zc-$be.jsonl|" \
                    -e "s|^    output:|    gpu:\n      backend: $be\n    output:|" "$B/config/sample.yaml" >"$B/config/sample-$be.yaml"
        done
        sed -e "s|/tmp/zc-cuda.jsonl|/tmp/zc-cuda-rt.jsonl|" -e 's/pace: fast/pace: realtime/' \
            "$B/config/sample-cuda.yaml" >"$B/config/sample-cuda-rt.yaml"
        # The same with the infer thread spinning on the GPU event instead of sleeping in the driver.
        # (cuda-rt has the default, sync hybrid.)
        for sy in spin block; do
                sed -e "s|/tmp/zc-cuda-rt.jsonl|/tmp/zc-cuda-rt-$sy.jsonl|" -e "s/backend: cuda/backend: cuda\n      sync: $sy/" \
                    "$B/config/sample-cuda-rt.yaml" >"$B/config/sample-cuda-rt-$sy.yaml"
        done
        # The file sink appends: a second run on a warm machine must not count the first one's lines.
        rm -f /tmp/zc-cuda.jsonl /tmp/zc-cpu.jsonl /tmp/zc-cuda-rt.jsonl /tmp/zc-cuda-rt-spin.jsonl /tmp/zc-cuda-rt-block.jsonl
        {
                for v in cuda cpu cuda-rt cuda-rt-spin cuda-rt-block; do
                        echo "===== zcpipe --config config/sample-$v.yaml"
                        cat "$B/config/sample-$v.yaml"
                        t0=$(date +%s.%N)
                        timeout 120 "$B/env" "$B/bin/zcpipe" --config "$B/config/sample-$v.yaml" 2>&1
                        echo "===== exit $?, $(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null || true) s"
                done
        } >"$O/daemon.log" 2>&1
        grep -E "^===== exit" "$O/daemon.log" | tr '\n' ' ' | sed 's/^/daemon (cuda cpu cuda-rt -spin -block) /' >>"$S"
        echo >>"$S"
        step compare 60 python3 "$B/tests/kernels/compare_results.py" /tmp/zc-cpu.jsonl /tmp/zc-cuda.jsonl
        for v in cuda cpu cuda-rt cuda-rt-spin cuda-rt-block; do
                python3 "$B/tests/kernels/stage_latency.py" "/tmp/zc-$v.jsonl" "$v" >>"$O/daemon.log" 2>&1
        done
        grep -E "^cuda(-rt)?(-spin|-block)?: " "$O/daemon.log" >>"$S"
        ;;
esac

case " $PARTS " in *" camera "*)
        # zcpipe on the fake camera (tests/fakecam, LD_PRELOAD: the real capture code against a
        # libv4l2 fed with sample frames), 1920x1080 YUYV at 30 fps, cuda, 10 s each:
        #   userptr: the camera writes into the ring (path direct);
        #   mmap: the driver's buffers registered with cudaHostRegister and read in place (registered).
        # Then mmap at 5 fps on cuda and on cpu (every frame kept), whose results must be equal, and
        # mmap on cuda with faults (two reconnects, three bad buffers).
        : >/tmp/zc-video0
        # The frames: 60 of the sample, scaled to 1080p YUYV (the bundle's gst-launch and openh264); else a pattern.
        FR=/tmp/zc-cam-1080p.yuyv
        "$B/env" "$B/bin/gst-launch-1.0" -q filesrc location="$B/samples/vtest-h264.mp4" ! qtdemux ! h264parse ! \
                openh264dec ! videoconvert ! videoscale ! video/x-raw,format=YUY2,width=1920,height=1080 ! \
                identity eos-after=60 ! filesink location=$FR >"$O/camera-frames.log" 2>&1 || rm -f $FR
        [ -s $FR ] && FRAMES="FAKECAM_FRAMES=$FR" || FRAMES="FAKECAM_PATTERN=1"
        echo "camera frames: $(ls -l $FR 2>/dev/null || echo 'the fake camera pattern')" >>"$S"
        cam() {   # cam NAME IO BACKEND FPS SECONDS [FAULTS]
                cat >"$B/config/cam-$1.yaml" <<EOF
streams:
  - name: cam
    source:
      type: v4l2
      device: /tmp/zc-video0
      width: 1920
      height: 1080
      format: yuyv
      fps: $4
      io: $2
    ring:
      drop: block
    gpu:
      backend: $3
    model:
      weights: ../models/zcnet-default.safetensors
    output:
      type: file
      path: /tmp/zc-cam-$1.jsonl
metrics:
  http:
    enabled: false
EOF
                rm -f "/tmp/zc-cam-$1.jsonl"
                echo "===== zcpipe --config config/cam-$1.yaml ($5 s)"
                # The fake is preloaded into zcpipe alone: timeout and the env script would write its
                # counters file at their own exit too.
                env "$FRAMES" FAKECAM_DEVICE=/tmp/zc-video0 FAKECAM_FORMAT=YUYV FAKECAM_WIDTH=1920 FAKECAM_HEIGHT=1080 \
                    FAKECAM_FPS=$4 FAKECAM_STATS=$O/fakecam-$1.stats FAKECAM_FAULTS="${6:-}" \
                    timeout -s TERM "$5" "$B/env" env LD_PRELOAD="$B/bin/libfakecam.so" "$B/bin/zcpipe" \
                    --config "$B/config/cam-$1.yaml" 2>&1
                echo "===== exit $? (124: stopped by SIGTERM after $5 s)"
                grep -E "^(delivered|violations|mmap_streams|userptr_streams|mmaps|munmaps|injected_[a-z]+) [1-9]?" \
                        "$O/fakecam-$1.stats" 2>/dev/null
        }
        {
                cam userptr userptr cuda 30 10
                cam mmap mmap cuda 30 10
                cam mmap5-cuda mmap cuda 5 8
                cam mmap5-cpu mmap cpu 5 8
                # Faults on the registered path: buffers lent downstream at each teardown are retired,
                # then unregistered and unmapped when their frames are published.
                cam faults mmap cuda 30 10 "enodev@60:300,eio@150,error@200,short@220,badindex@240"
        } >"$O/camera.log" 2>&1
        grep -E "streaming YUYV|cannot be read in place|^stream cam:|^  end-to-end|^===== exit|^(violations|delivered) " \
                "$O/camera.log" | cut -c1-150 >>"$S"
        n=$({ wc -l </tmp/zc-cam-mmap5-cuda.jsonl; wc -l </tmp/zc-cam-mmap5-cpu.jsonl; } 2>/dev/null | sort -n | head -1)
        head -n "${n:-0}" /tmp/zc-cam-mmap5-cuda.jsonl >/tmp/zc-cam-a.jsonl 2>/dev/null
        head -n "${n:-0}" /tmp/zc-cam-mmap5-cpu.jsonl >/tmp/zc-cam-b.jsonl 2>/dev/null
        echo "camera compare: first ${n:-0} frames of mmap5-cpu and mmap5-cuda" >>"$S"
        step camera-compare 60 python3 "$B/tests/kernels/compare_results.py" /tmp/zc-cam-b.jsonl /tmp/zc-cam-a.jsonl
        # All frames, then without the first 12 (each driver buffer written for the first time).
        for v in userptr mmap; do
                python3 "$B/tests/kernels/stage_latency.py" "/tmp/zc-cam-$v.jsonl" "cam-$v" >>"$O/camera.log" 2>&1
                python3 "$B/tests/kernels/stage_latency.py" "/tmp/zc-cam-$v.jsonl" "cam-$v-from12" 12 \
                        >>"$O/camera.log" 2>&1
        done
        python3 - /tmp/zc-cam-mmap.jsonl >>"$O/camera.log" 2>&1 <<'PY'
import json, sys
t = [json.loads(l)["t"] for l in open(sys.argv[1])][:16]
print("cam-mmap first frames, capture->convert_start us:", " ".join(str((x["convert_start"] - x["capture"]) // 1000) for x in t))
PY
        cp /tmp/zc-cam-userptr.jsonl /tmp/zc-cam-mmap.jsonl "$O/" 2>/dev/null
        grep -E "^cam-(userptr|mmap)" "$O/camera.log" >>"$S"
        ;;
esac

case " $PARTS " in *" peer "*)
        # The PyTorch peer (tests/kernels/peer_torch.py): the same per-frame work in PyTorch on this GPU, timed
        # eager / CUDA graph / torch.compile (NCHW and channels-last) on 1080p frames (the sample scaled by the
        # bundle's gst-launch and openh264), for the default detector (CenterNet, the TF.js graph executed node
        # by node) and zcnet; then checked frame by frame against the cuda backend's lines of the `daemon`
        # part (the sample at its own size) with the model those lines came from. Outside the bundle's
        # environment: its libraries are not PyTorch's.
        G="$B/env $B/bin/gst-launch-1.0 -q filesrc location=$B/samples/vtest-h264.mp4 ! qtdemux ! h264parse ! openh264dec"
        $G ! videoconvert ! video/x-raw,format=NV12 ! filesink location=/tmp/zc-peer-576.nv12 >"$O/peer-frames.log" 2>&1
        $G ! videoconvert ! videoscale ! video/x-raw,format=NV12,width=1920,height=1080 ! identity eos-after=8 ! \
                filesink location=/tmp/zc-peer-1080.nv12 >>"$O/peer-frames.log" 2>&1
        : >"$O/peer-time.log"
        for m in centernet/model.json zcnet-default.safetensors; do
                [ -f "$B/models/$m" ] || continue
                t0=$SECONDS
                echo "model $m" >>"$O/peer-time.log"
                timeout 500 python3 "$B/tests/kernels/peer_torch.py" time "$B/models/$m" \
                        /tmp/zc-peer-1080.nv12 1920 1080 "$N" >>"$O/peer-time.log" 2>&1
                printf '%-22s rc=%-3s %4ss  %s\n' peer-time "$?" "$((SECONDS - t0))" "$m" >>"$S"
        done
        grep -E '^(model |peer |mode |eager|graph|compile|best|net)' "$O/peer-time.log" >>"$S"
        if [ -s /tmp/zc-cuda.jsonl ]; then
                m=zcnet-default.safetensors
                head -n 1 /tmp/zc-cuda.jsonl | grep -q '"detections"' && m=centernet/model.json
                timeout 900 python3 "$B/tests/kernels/peer_torch.py" check "$B/models/$m" \
                        /tmp/zc-peer-576.nv12 768 576 /tmp/zc-cuda.jsonl >"$O/peer-check.log" 2>&1
                printf '%-22s rc=%-3s %s\n' peer-check "$?" "$(grep -E '^peer vs' "$O/peer-check.log")" >>"$S"
        else
                echo "peer-check: no /tmp/zc-cuda.jsonl (run the daemon part first)" >>"$S"
        fi
        ;;
esac

case " $PARTS " in *" ptx "*)
        # The PTX path (issue 13): the same binaries twice, natively and with CUDA_FORCE_PTX_JIT=1
        # (the driver ignores the machine code and JIT-compiles the embedded lowest PTX, compute_75):
        # the kernels suite with one seed (logs diffed), ktest_sticky, zcpipe on the sample (pace fast,
        # backend cuda; JSON lines compared field by field without timestamps), and
        # tests/integration/test_backend.py (the fault cases, then the real GPU: zcpipe_gpu_info and
        # the start line, which must say native, then ptx-jit). The compute_75 PTX has no tensor-core
        # loop: the native runs compared bit for bit take the FFMA loop too
        # (ZCP_CONV_MMA=0), and the native default's daemon is compared with the PTX's within 1e-4.
        # loop: false: sample.yaml loops (the demo runs until Ctrl-C); these runs decode it once.
        sed -e 's/pace: realtime.*/pace: fast/' -e 's/loop: true.*/loop: false/' \
            -e "s|^    output:|    gpu:\n      backend: cuda\n    output:|" \
            -e '/^metrics:/,$d' "$B/config/sample.yaml" >"$B/config/sample-ptx.yaml"
        printf 'metrics:\n  http:\n    enabled: false\n' >>"$B/config/sample-ptx.yaml"
        printf '#!/bin/sh\nexec "%s/env" "%s/bin/zcpipe" "$@"\n' "$B" "$B" >"$B/zcpipe-env"
        chmod +x "$B/zcpipe-env"
        export ZCP_TEST_SEED=${ZCP_TEST_SEED:-20261202}
        for mode in native ptx mma; do
                if [ $mode = ptx ]; then export CUDA_FORCE_PTX_JIT=1; else unset CUDA_FORCE_PTX_JIT; fi
                if [ $mode = mma ]; then unset ZCP_CONV_MMA; else export ZCP_CONV_MMA=0; fi
                sed "s|/tmp/zcpipe-sample.jsonl|/tmp/zc-ptx-$mode.jsonl|" "$B/config/sample-ptx.yaml" \
                        >"$B/config/sample-ptx-$mode.yaml"
                rm -f "/tmp/zc-ptx-$mode.jsonl"
                step "daemon-$mode" 120 "$B/bin/zcpipe" --config "$B/config/sample-ptx-$mode.yaml"
                cp "/tmp/zc-ptx-$mode.jsonl" "$O/sample-$mode.jsonl" 2>/dev/null
                [ $mode = mma ] && continue
                step "kernels-$mode" 400 "$B/bin/ktest_kernels"
                step "sticky-$mode" 60 "$B/bin/ktest_sticky"
                ZCPIPE="$B/zcpipe-env" step "backend-$mode" 120 python3 "$B/tests/integration/test_backend.py"
        done
        unset CUDA_FORCE_PTX_JIT ZCP_CONV_MMA
        step ptx-compare 60 python3 "$B/tests/kernels/compare_exact.py" /tmp/zc-ptx-native.jsonl /tmp/zc-ptx-ptx.jsonl
        step ptx-compare-mma 60 python3 "$B/tests/kernels/compare_results.py" /tmp/zc-ptx-mma.jsonl \
                /tmp/zc-ptx-ptx.jsonl
        # The kernels suite prints its results (errors, counts) but no timings: the logs must be equal
        # once host addresses (in the expected error lines of the fault cases), log timestamps, the
        # start line naming the code (native / ptx-jit), the lines of the tensor-core loop (planned
        # by the native code only: its cases' counts, the nets made with and without it) and the
        # head's kind (one cluster needs compute 9.0 code) are set aside.
        for mode in native ptx; do
                grep -v "info: cuda: GPU\|ZCP_CONV_MMA=\| ffma " "$O/kernels-$mode.log" |
                        sed -e 's/0x[0-9a-f]*/0xADDR/g' -e 's/^[0-9][0-9.:T-]* [^ ]* //' \
                            -e 's/ and [0-9]* on tensor cores//' -e 's/the head as one cluster/the head/' \
                            -e 's/the head (no cluster here)/the head/' >"$O/kernels-$mode.norm"
        done
        if diff "$O/kernels-native.norm" "$O/kernels-ptx.norm" >"$O/kernels-diff.txt"; then
                echo "kernels-native.log and kernels-ptx.log: identical but for addresses, the code" \
                     "line, the tensor-core lines and the head's kind" \
                     "($(grep -c '^ok ' "$O/kernels-ptx.norm") 'ok' lines compared)" >>"$S"
        else
                echo "kernels-native.log and kernels-ptx.log DIFFER: $(grep -c '^[<>]' "$O/kernels-diff.txt") lines" >>"$S"
                head -20 "$O/kernels-diff.txt" >>"$S"
        fi
        {
                echo "== zcpipe start lines and the exported metric, native then ptx"
                grep -h "info: cuda: GPU\|zcpipe_gpu_info" "$O/daemon-native.log" "$O/backend-native.log" \
                        "$O/daemon-ptx.log" "$O/backend-ptx.log"
        } >>"$S"
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
