#!/bin/bash
# SPDX-License-Identifier: MIT
# Several GPUs in one zcpipe (issue 41), on a host with two GPUs or more, from a gpu-bundle folder:
#   1. zcpipe, 2 x PER_GPU (default 8) synthetic streams of 1920x1080 at 30 fps, pace realtime, for
#      SECONDS (default 20), gpu.device auto, backend cuda, the bundle's zcnet (MODEL to change it),
#      ring drop block (every frame kept), each stream's results to OUTDIR/mg-cuda/<stream>.jsonl;
#      /metrics is read halfway: each GPU's share (zcpipe_gpu_streams) and each stream's GPU
#      (zcpipe_stream_info{device=...});
#   2. the same streams on the cpu backend (the C reference path), pace fast, the first CHECK_FRAMES
#      (default 60) frames of each;
#   3. each stream's first CHECK_FRAMES cuda lines against the cpu lines (compare_results.py: motion
#      equal, scores within 1e-4 relative), then a table: per GPU its streams, frames, and the worst
#      stream's end-to-end p99 (capture -> result published, from the lines' timestamps, the first
#      second left out), and the verdict.
#
#   tests/kernels/multi-gpu.sh BUNDLE OUTDIR [SECONDS [PER_GPU [CHECK_FRAMES]]]
#
# Exit 0 when every stream ran, the streams split evenly and every result equals the reference;
# 77 on a host with fewer than two GPUs; 1 otherwise. Knobs: MODEL, PORT (default 9477).
set -u
B=$(cd "$1" && pwd)
O=$(mkdir -p "$2" && cd "$2" && pwd)
SECS=${3:-20}
PER=${4:-8}
CHECKN=${5:-60}
MODEL=${MODEL:-$B/models/zcnet-default.safetensors}
PORT=${PORT:-9477}
export ZCP_MODELDIR=$B/models
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${GPUS:-0}" -lt 2 ]; then
        echo "SKIP: several GPUs: this host has ${GPUS:-0} GPU(s) (nvidia-smi -L), the test needs two"
        exit 77
fi
N=$((2 * PER))
FRAMES=$((SECS * 30))

config() {   # config BACKEND PACE FRAMES OUTDIR HTTP
        printf 'metrics:\n  http:\n    enabled: %s\n    port: %s\nlog:\n  summary_interval_s: 0\nstreams:\n' "$5" "$PORT"
        for i in $(seq 0 $((N - 1))); do
                cat <<EOC
  - name: cam$i
    source:
      type: synthetic
      width: 1920
      height: 1080
      fps: 30
      pace: $2
      frames: $3
      box_size: $((64 + 8 * i))
    ring:
      drop: block
    gpu:
      backend: $1
      device: auto
    model:
      path: $MODEL
    output:
      type: file
      path: $4/cam$i.jsonl
EOC
        done
}

rm -rf "$O/mg-cuda" "$O/mg-cpu"
mkdir -p "$O/mg-cuda" "$O/mg-cpu"
config cuda realtime "$FRAMES" "$O/mg-cuda" true >"$O/mg-cuda.yaml"
config cpu fast "$CHECKN" "$O/mg-cpu" false >"$O/mg-cpu.yaml"

echo "== zcpipe: $N streams of 1920x1080 at 30 fps, gpu.device auto, $SECS s"
"$B/env" "$B/bin/zcpipe" --config "$O/mg-cuda.yaml" >"$O/mg-cuda.log" 2>&1 &
pid=$!
sleep $((SECS / 2))
python3 - "$PORT" >"$O/mg-metrics.txt" 2>&1 <<'PY'
import sys, urllib.request
print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode())
PY
wait $pid
rc=$?
echo "zcpipe (cuda) exit $rc"
"$B/env" "$B/bin/zcpipe" --config "$O/mg-cpu.yaml" >"$O/mg-cpu.log" 2>&1
echo "zcpipe (cpu reference, $CHECKN frames a stream) exit $?"

python3 - "$O" "$N" "$PER" "$FRAMES" "$CHECKN" "$B/tests/kernels/compare_results.py" <<'PY'
import json, re, subprocess, sys
out, n, per, frames, checkn, compare = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
    int(sys.argv[5]), sys.argv[6]
metrics = open(f"{out}/mg-metrics.txt").read()
share = {m[0]: int(m[1]) for m in re.findall(r'^zcpipe_gpu_streams\{device="(\d+)"\} (\d+)', metrics, re.M)}
gpu_of = {m[0]: m[1] for m in re.findall(r'^zcpipe_stream_info\{stream="([^"]+)",[^}]*device="(\d*)"', metrics, re.M)}
ok, rows = True, {}
for i in range(n):
    name = f"cam{i}"
    lines = [json.loads(l) for l in open(f"{out}/mg-cuda/{name}.jsonl")]
    if len(lines) != frames:
        print(f"{name}: {len(lines)} frames, expected {frames}")
        ok = False
    with open(f"{out}/mg-cuda/{name}.first.jsonl", "w") as f:
        for o in lines:
            if o["seq"] < checkn:
                f.write(json.dumps(o) + "\n")
    r = subprocess.run([sys.executable, compare, f"{out}/mg-cpu/{name}.jsonl", f"{out}/mg-cuda/{name}.first.jsonl"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"{name} (GPU {gpu_of.get(name, '?')}): {r.stdout.strip()}")
        ok = False
    e2e = sorted((o["t"]["publish_start"] - o["t"]["capture"]) / 1e6 for o in lines[30:])
    p99 = e2e[min(len(e2e) - 1, int(len(e2e) * 0.99))] if e2e else float("nan")
    row = rows.setdefault(gpu_of.get(name, "?"), [0, 0, 0.0])
    row[0] += 1
    row[1] += len(lines)
    row[2] = max(row[2], p99)
even = sorted(share.values()) == [per, per] and all(r[0] == per for r in rows.values()) and len(rows) == 2
print(f"several GPUs: {n} streams of 1920x1080 at 30 fps, gpu.device auto")
print(f"  GPU  streams (metrics)  streams (info)  frames  worst e2e p99 ms")
for g in sorted(rows):
    print(f"  {g:>3}  {share.get(g, 0):>17}  {rows[g][0]:>14}  {rows[g][1]:>6}  {rows[g][2]:>16.2f}")
print(f"  worst end-to-end p99 of all streams: {max(r[2] for r in rows.values()):.2f} ms")
print(f"  split even: {'yes' if even else 'NO'}; results equal to the cpu reference (first {checkn} frames "
      f"of each stream): {'yes' if ok else 'NO'}")
sys.exit(0 if ok and even else 1)
PY
v=$?
[ $rc -eq 0 ] || v=1
exit $v
