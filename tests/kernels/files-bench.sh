#!/bin/bash
# SPDX-License-Identifier: MIT
# Throughput of N file streams (issue 15 item 5): a raw-video file (Matroska, I420) and an H.264 file
# (MP4, openh264enc), both made here with gst-launch at FILES_SIZE; then zcpipe runs N streams of each
# (pace fast, loop, output none) for SECONDS, stopped by SIGTERM. The table: N, format, the decoder and
# its thread bound (zcpipe's log), total frames/s (each stream's own rate from zcpipe's summary,
# first capture to last publish, added up), frames published, and how they reached their slots:
# copied, or decoded straight into the slot (slot_direct). copies + direct = frames captured.
#
#   tests/kernels/files-bench.sh OUTDIR [BACKEND] [N_LIST] [SECONDS]
#     e.g. tests/kernels/files-bench.sh /tmp/fb cpu 1,2 5                (here: build/zcpipe)
#          RUN=.gpu/b/env ZCPIPE=.gpu/b/bin/zcpipe GST_LAUNCH=.gpu/b/bin/gst-launch-1.0 \
#              tests/kernels/files-bench.sh $OUT/files cuda 1,8,16 10    (gpu-run.sh part "files")
#
# Environment: ZCPIPE (default build/zcpipe), GST_LAUNCH (gst-launch-1.0), RUN (a command both run
# under, e.g. a gpu-bundle's env), FILES_SIZE (1920x1080), FILES_FRAMES (120), FORMATS ("raw h264"),
# DEC_THREADS (decoder_threads; default 0 = auto), MODEL (on | off: motion only), WEIGHTS (default
# build/models/zcnet-default.safetensors), SAMPLE (a video
# scaled up into the H.264 file; default samples/vtest-h264.mp4 beside this script's tree, else a
# test pattern), FILES_DIR (where the videos are made and kept for the next run; default $TMPDIR or
# /tmp). Logs, configs and the table (table.txt) go to OUTDIR.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
O=$(mkdir -p "$1" && cd "$1" && pwd)
BACKEND=${2:-cpu}
NS=${3:-1,8,16}
SECS=${4:-10}
ZCPIPE=${ZCPIPE:-$here/build/zcpipe}
GST_LAUNCH=${GST_LAUNCH:-gst-launch-1.0}
RUN=${RUN:-}
SIZE=${FILES_SIZE:-1920x1080}
W=${SIZE%x*}
H=${SIZE#*x}
FRAMES=${FILES_FRAMES:-120}
FORMATS=${FORMATS:-raw h264}
SAMPLE=${SAMPLE:-$here/samples/vtest-h264.mp4}
MODEL=${MODEL:-on}
DT=${DEC_THREADS:-0}
WEIGHTS=${WEIGHTS:-$here/build/models/zcnet-default.safetensors}
# The videos stay out of OUTDIR (the raw one is ~0.5 GB; OUTDIR comes back from the GPU machine).
VD=${FILES_DIR:-${TMPDIR:-/tmp}}
RAW=$VD/zc-files-$SIZE.mkv
H264=$VD/zc-files-$SIZE.mp4

gst() { $RUN "$GST_LAUNCH" -q "$@"; }

# The frames: the sample scaled up (real content for the decoder), else a moving pattern.
if [ -f "$SAMPLE" ]; then
        SRC="filesrc location=$SAMPLE ! decodebin ! videoconvert ! videoscale ! videorate"
else
        SRC="videotestsrc pattern=ball"
fi
CAPS="video/x-raw,format=I420,width=$W,height=$H,framerate=30/1"
for f in $FORMATS; do
        case $f in
        raw)
                [ -s "$RAW" ] || gst $SRC ! $CAPS ! identity eos-after="$FRAMES" ! matroskamux ! \
                        filesink location="$RAW" >"$O/make-raw.log" 2>&1 || { cat "$O/make-raw.log"; rm -f "$RAW"; }
                ;;
        h264)
                [ -s "$H264" ] || gst $SRC ! $CAPS ! identity eos-after="$FRAMES" ! openh264enc bitrate=8000000 \
                        gop-size=60 ! h264parse ! mp4mux ! filesink location="$H264" >"$O/make-h264.log" 2>&1 ||
                        { cat "$O/make-h264.log"; rm -f "$H264"; }
                ;;
        esac
done
ls -l "$RAW" "$H264" 2>/dev/null | awk '{print "file:", $5, "bytes", $NF}'

config() {   # config N PATH > yaml
        echo "streams:"
        for i in $(seq 0 $(($1 - 1))); do
                cat <<EOF
  - name: f$i
    source:
      type: file
      path: $2
      pace: fast
      loop: true
      decoder_threads: $DT
    gpu:
      backend: $BACKEND
    model:
      weights: $WEIGHTS
      enabled: $([ "$MODEL" = off ] && echo false || echo true)
    output:
      type: none
EOF
        done
        printf 'log:\n  summary_interval_s: 0\nmetrics:\n  http:\n    enabled: false\n'
}

rows=()
for f in $FORMATS; do
        path=$RAW
        [ $f = h264 ] && path=$H264
        if [ ! -s "$path" ]; then
                echo "files: no $f file (see $O/make-$f.log)"
                continue
        fi
        for n in ${NS//,/ }; do
                name=$f-n$n
                config "$n" "$path" >"$O/$name.yaml"
                t0=$(date +%s.%N)
                timeout -s TERM -k 20 "$SECS" $RUN "$ZCPIPE" --config "$O/$name.yaml" >"$O/$name.log" 2>&1
                rc=$?
                echo "$name: exit $rc (124: stopped after $SECS s), $(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null) s" \
                        >>"$O/$name.log"
                rows+=("$f $n $O/$name.log")
        done
done

python3 - "$O/table.txt" "${rows[@]}" <<'PY'
import re, sys
out = open(sys.argv[1], "w")
def say(s=""):
    print(s)
    out.write(s + "\n")
say(f"{'N':>3} {'format':<6} {'decoder (threads)':<30} {'total fps':>10} {'published':>10} {'copies':>9} {'direct':>9} {'add up':>6}")
for row in sys.argv[2:]:
    fmt, n, log = row.split(" ", 2)
    text = open(log, errors="replace").read()
    streams = re.findall(r"^stream f\d+: (\d+) frames captured, (\d+) published, ([\d.]+) fps, \d+ dropped, "
                         r"\d+ decode gaps, (\d+) copies", text, re.M)
    direct = [int(x) for x in re.findall(r"^  source: (\d+) frames decoded straight", text, re.M)]
    dec = re.search(r"decoder (\S+): (?:(\S+) (\d+)|no thread setting).*?\(decoder_threads (\d+)", text)
    if dec:
        decoder = f"{dec.group(1)} ({dec.group(2)} {dec.group(3)})" if dec.group(2) else f"{dec.group(1)} (no setting)"
    else:
        decoder = "demuxer only (raw)" if fmt == "raw" else "?"
    if len(streams) != int(n):
        say(f"{n:>3} {fmt:<6} {decoder:<30} {'-':>10}  only {len(streams)} of {n} stream summaries (see {log})")
        continue
    captured = sum(int(s[0]) for s in streams)
    published = sum(int(s[1]) for s in streams)
    fps = sum(float(s[2]) for s in streams)
    copies = sum(int(s[3]) for s in streams)
    d = sum(direct)
    say(f"{n:>3} {fmt:<6} {decoder:<30} {fps:>10.1f} {published:>10} {copies:>9} {d:>9} "
        f"{'yes' if copies + d == captured else 'NO':>6}")
PY
