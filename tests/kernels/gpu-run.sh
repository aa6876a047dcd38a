#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs, on a GPU machine, everything the GPU stage is judged by, from a folder
# made by gpu-bundle (binaries built elsewhere, with their libraries):
#   the kernels suite (ktest_kernels: preprocess and motion; ktest_plans: every op kind and the
#   heads against the C reference, both ways of summing convolutions; ktest_backend: the backend
#   against the cpu backend; ktest_sticky), compute-sanitizer (memcheck, racecheck) on their quick
#   subsets, the detector's GPU-stage benchmark (bench_gpu), gpu.sync side by side, 16 streams of
#   1080p with the detector (bench_streams), the PyTorch peer on the same per-frame work
#   (peer_torch.py time, and check against the daemon's lines), zcpipe on the sample (cuda, its
#   lines against the cpu backend's where CPU=1), zcpipe on the fake camera at 1080p, the PTX path,
#   zcpipe-bench --quick, N file streams of 1080p (tests/kernels/files-bench.sh), and on a host with
#   two GPUs or more, 2 x 8 streams of 1080p placed by gpu.device auto (tests/kernels/multi-gpu.sh;
#   ktest_multigpu runs in the kernels part; both skip with one GPU).
#
#   tests/kernels/gpu-run.sh BUNDLE OUTDIR [FRAMES] [PARTS]
#
# BUNDLE holds bin/{ktest_*,bench_*,zcpipe,zcpipe-bench}, config/, samples/, models/,
# tests/kernels/{compare_results.py,peer_torch.py,...}, bin/libfakecam.so: tests/kernels/gpu-bundle.sh
# makes it. PARTS: any of "kernels memcheck racecheck bench sync streams cpu daemon camera peer ptx
# zbench files multigpu" (default: all). Logs go to OUTDIR; a summary table is printed last. Knobs:
# KTEST_SECONDS (each suite's limit), SANITIZER_TESTS (the suites compute-sanitizer runs),
# SANITIZER_SECONDS, STREAMS_SECONDS/STREAMS_N/STREAMS_ROUNDS, DAEMON_VARIANTS, DAEMON_SECONDS, CPU=1
# (the daemon on the cpu backend too, compared), PEER_MODEL, PEER_ITER, PEER_SECONDS, PEER_CHECK_SECONDS.
# docs/performance.md says which part gives which of its figures.
set -u
B=$(cd "$1" && pwd)
O=$(mkdir -p "$2" && cd "$2" && pwd)
N=${3:-2000}
PARTS=${4:-kernels memcheck racecheck bench sync streams cpu daemon camera peer ptx zbench files multigpu}
export ZCP_SOURCE_ROOT=$B
# The bundle's models (the build tree's models/: the generated zcnet and the CenterNet copy, by
# gpu-bundle.sh): for the tests and for zcpipe, which runs outside its build tree here.
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
        # The three suites at once (each uses the GPU lightly and a CPU core for its reference), then sticky.
        for t in kernels plans backend; do
                step "$t" "${KTEST_SECONDS:-500}" "$B/bin/ktest_$t" &
        done
        wait
        step sticky 60 "$B/bin/ktest_sticky"
        step multigpu-kernels 300 "$B/bin/ktest_multigpu"   # exit 77 with fewer than two GPUs
        grep -A3 "^worst op difference" "$O/plans.log" >>"$S"
        grep -h "^ok centernet\|^ok backend centernet" "$O/plans.log" "$O/backend.log" | cut -c1-160 >>"$S"
        ;;
esac
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
for tool in memcheck racecheck; do
        case " $PARTS " in *" $tool "*)
                if [ -n "$CS" ]; then
                        for t in ${SANITIZER_TESTS:-kernels plans backend}; do
                                ZCP_KTEST_QUICK=1 step "$tool-$t" "${SANITIZER_SECONDS:-300}" "$CS" --tool "$tool" \
                                        --error-exitcode 9 "$B/bin/ktest_$t"
                        done
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
case " $PARTS " in *" cpu "*)
        # The host's CPU side (issue 16): in-place conversion against libyuv per format, 1, 2 and 4 threads
        # (tests/bench/bench_cpu.c; the columns are explained in docs/performance.md).
        step cpu 300 "$B/bin/bench_cpu" --only convert --threads 1,2,4 --sizes 1920x1080,1280x720 \
                --formats yuyv,uyvy,yvyu,rgb24,bgr24,rgbx,bgrx --iter "${CPU_ITER:-401}"
        sed -n '/^format size/,$p' "$O/cpu.log" | head -40 >>"$S"
        ;;
esac
case " $PARTS " in *" streams "*)
        # N streams of 1080p with the detector, at 30 fps and at full rate (tests/kernels/bench_streams.c):
        # transfer auto against both fixed modes, the worst stream's p99 (issue 37 item 6: under 5 ms at 16).
        # STREAMS_ROUNDS interleaved rounds per row (medians).
        ZCP_BENCH_QUIET=1 step streams 590 "$B/bin/bench_streams" "${STREAMS_SECONDS:-2}" \
                "${STREAMS_N:-16}" 1 30 "${STREAMS_ROUNDS:-1}"
        grep -E "^16 streams real" "$O/streams.log" >>"$S"
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
case " $PARTS " in *" multigpu "*)
        # Several GPUs (issue 41): 2 x MULTIGPU_PER (default 8) streams of 1080p at 30 fps placed by
        # gpu.device auto, each stream's results against the cpu backend's, each GPU's share and the
        # worst end-to-end p99 (tests/kernels/multi-gpu.sh; exit 77 on a host of one GPU).
        t0=$SECONDS
        timeout 900 bash "$B/tests/kernels/multi-gpu.sh" "$B" "$O/multigpu" "${MULTIGPU_SECONDS:-20}" \
                "${MULTIGPU_PER:-8}" "${MULTIGPU_CHECK:-60}" >"$O/multigpu.log" 2>&1
        printf '%-22s rc=%-3s %4ss\n' multigpu "$?" "$((SECONDS - t0))" >>"$S"
        sed -n '/^SKIP\|^several GPUs:/,$p' "$O/multigpu.log" >>"$S"
        ;;
esac
case " $PARTS " in *" daemon "*)
        # Variants of config/sample.yaml (the shipped CenterNet): pace fast, backend cuda (and cpu where CPU=1:
        # the C reference of the detector takes seconds a frame), results to /tmp; cuda-rt at pace realtime
        # with each gpu.sync for end-to-end latency.
        for be in cuda cpu; do
                sed -e 's/pace: realtime.*/pace: fast/' -e 's/loop: true.*/loop: false/' \
                    -e "s|/tmp/zcpipe-sample.jsonl|/tmp/zc-$be.jsonl|" \
                    -e "s|^    model:|    gpu:\n      backend: $be\n    model:|" "$B/config/sample.yaml" >"$B/config/sample-$be.yaml"
        done
        sed -e "s|/tmp/zc-cuda.jsonl|/tmp/zc-cuda-rt.jsonl|" -e 's/pace: fast/pace: realtime/' \
            "$B/config/sample-cuda.yaml" >"$B/config/sample-cuda-rt.yaml"
        for sy in spin block; do
                sed -e "s|/tmp/zc-cuda-rt.jsonl|/tmp/zc-cuda-rt-$sy.jsonl|" -e "s/backend: cuda/backend: cuda\n      sync: $sy/" \
                    "$B/config/sample-cuda-rt.yaml" >"$B/config/sample-cuda-rt-$sy.yaml"
        done
        # The file sink appends: a second run on a warm machine must not count the first one's lines.
        rm -f /tmp/zc-cuda.jsonl /tmp/zc-cpu.jsonl /tmp/zc-cuda-rt.jsonl /tmp/zc-cuda-rt-spin.jsonl /tmp/zc-cuda-rt-block.jsonl
        VARIANTS=${DAEMON_VARIANTS:-cuda cuda-rt cuda-rt-spin cuda-rt-block}
        [ "${CPU:-0}" = 1 ] && VARIANTS="cpu $VARIANTS"
        {
                for v in $VARIANTS; do
                        echo "===== zcpipe --config config/sample-$v.yaml"
                        t0=$(date +%s.%N)
                        timeout "${DAEMON_SECONDS:-120}" "$B/env" "$B/bin/zcpipe" --config "$B/config/sample-$v.yaml" 2>&1
                        echo "===== exit $?, $(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null || true) s"
                done
        } >"$O/daemon.log" 2>&1
        grep -E "^===== exit" "$O/daemon.log" | tr '\n' ' ' | sed "s/^/daemon ($VARIANTS) /" >>"$S"
        echo >>"$S"
        if [ "${CPU:-0}" = 1 ]; then
                step compare 60 python3 "$B/tests/kernels/compare_results.py" /tmp/zc-cpu.jsonl /tmp/zc-cuda.jsonl
        fi
        for v in $VARIANTS; do
                python3 "$B/tests/kernels/stage_latency.py" "/tmp/zc-$v.jsonl" "$v" >>"$O/daemon.log" 2>&1
        done
        grep -E "^cuda(-rt)?(-spin|-block)?: " "$O/daemon.log" >>"$S"
        cp /tmp/zc-cuda.jsonl "$O/" 2>/dev/null
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
        # The PyTorch peer (tests/kernels/peer_torch.py): the same per-frame work with the same model (PyTorch
        # running the TF.js graph node by node) on this GPU, timed eager / CUDA graph / torch.compile on 1080p
        # frames (the sample scaled by the bundle's gst-launch and openh264), then checked frame by frame
        # against the cuda backend's lines of the `daemon` part (the sample at its own size). Outside the
        # bundle's environment: its libraries are not PyTorch's.
        MODEL=${PEER_MODEL:-$B/models/centernet/model.json}
        G="$B/env $B/bin/gst-launch-1.0 -q filesrc location=$B/samples/vtest-h264.mp4 ! qtdemux ! h264parse ! openh264dec"
        $G ! videoconvert ! video/x-raw,format=NV12 ! filesink location=/tmp/zc-peer-576.nv12 >"$O/peer-frames.log" 2>&1
        $G ! videoconvert ! videoscale ! video/x-raw,format=NV12,width=1920,height=1080 ! identity eos-after=8 ! \
                filesink location=/tmp/zc-peer-1080.nv12 >>"$O/peer-frames.log" 2>&1
        t0=$SECONDS
        PYTHONUNBUFFERED=1 timeout "${PEER_SECONDS:-420}" python3 "$B/tests/kernels/peer_torch.py" time "$MODEL" \
                /tmp/zc-peer-1080.nv12 1920 1080 "${PEER_ITER:-$N}" >"$O/peer-time.log" 2>&1
        printf '%-22s rc=%-3s %4ss\n' peer-time "$?" "$((SECONDS - t0))" >>"$S"
        sed -n '/^peer /,$p' "$O/peer-time.log" >>"$S"
        if [ -s /tmp/zc-cuda.jsonl ]; then
                timeout "${PEER_CHECK_SECONDS:-300}" python3 "$B/tests/kernels/peer_torch.py" check "$MODEL" \
                        /tmp/zc-peer-576.nv12 768 576 /tmp/zc-cuda.jsonl >"$O/peer-check.log" 2>&1
                printf '%-22s rc=%-3s %s\n' peer-check "$?" "$(grep -E '^peer vs' "$O/peer-check.log")" >>"$S"
        else
                echo "peer-check: no /tmp/zc-cuda.jsonl (run the daemon part first)" >>"$S"
        fi
        ;;
esac

case " $PARTS " in *" ptx "*)
        # The PTX path: the suites with CUDA_FORCE_PTX_JIT=1 (the driver ignores the machine code and
        # JIT-compiles the embedded lowest PTX: compute_75 in the default build, without tensor cores or
        # dependent launches), which must pass as natively, and the daemon's lines compared with a native run's.
        sed -e 's/pace: realtime.*/pace: fast/' -e 's/loop: true.*/loop: false/' \
            -e "s|^    model:|    gpu:\n      backend: cuda\n    model:|" \
            -e '/^metrics:/,$d' "$B/config/sample.yaml" >"$B/config/sample-ptx.yaml"
        printf 'metrics:\n  http:\n    enabled: false\n' >>"$B/config/sample-ptx.yaml"
        printf '#!/bin/sh\nexec "%s/env" "%s/bin/zcpipe" "$@"\n' "$B" "$B" >"$B/zcpipe-env"
        chmod +x "$B/zcpipe-env"
        for mode in native ptx; do
                if [ $mode = ptx ]; then export CUDA_FORCE_PTX_JIT=1; else unset CUDA_FORCE_PTX_JIT; fi
                sed "s|/tmp/zcpipe-sample.jsonl|/tmp/zc-ptx-$mode.jsonl|" "$B/config/sample-ptx.yaml" \
                        >"$B/config/sample-ptx-$mode.yaml"
                rm -f "/tmp/zc-ptx-$mode.jsonl"
                step "daemon-$mode" 120 "$B/bin/zcpipe" --config "$B/config/sample-ptx-$mode.yaml"
                cp "/tmp/zc-ptx-$mode.jsonl" "$O/sample-$mode.jsonl" 2>/dev/null
                [ $mode = native ] && continue
                for t in kernels plans backend sticky; do
                        step "$t-$mode" 500 "$B/bin/ktest_$t"
                done
                ZCPIPE="$B/zcpipe-env" step "backend-py-$mode" 120 python3 "$B/tests/integration/test_backend.py"
        done
        unset CUDA_FORCE_PTX_JIT
        step ptx-compare 60 python3 "$B/tests/kernels/compare_results.py" /tmp/zc-ptx-native.jsonl /tmp/zc-ptx-ptx.jsonl
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
