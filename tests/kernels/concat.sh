#!/bin/bash
# A file whose frame size changes at frame 60 (640x480 -> 1280x720, two H.264 streams concatenated),
# decoded through zcpipe with backend cuda and cpu: one new ring each, the results equal.
B=$1; O=$2
for be in cuda cpu; do
cat >"$B/config/concat-$be.yaml" <<EOT
metrics:
  http:
    enabled: false
streams:
  - name: f
    source:
      type: file
      path: ../samples/concat-640-1280.h264
      pace: fast
    ring:
      drop: block
    gpu:
      backend: $be
    model:
      weights: ../models/zcnet-default.safetensors
    output:
      type: file
      path: /tmp/zc-concat-$be.jsonl
EOT
rm -f /tmp/zc-concat-$be.jsonl
timeout 60 "$B/env" "$B/bin/zcpipe" --config "$B/config/concat-$be.yaml" >"$O/concat-$be.log" 2>&1
echo "concat $be: exit $? $(grep -c . /tmp/zc-concat-$be.jsonl) lines; $(grep -o 'new ring for the new geometry.*' "$O/concat-$be.log"); $(grep -o 'stream f: [0-9]* frames captured, [0-9]* published' "$O/concat-$be.log"); backend line: $(grep -o 'backend [a-z]* ([a-z-]*)' "$O/concat-$be.log" | tr '\n' ' ')"
done
python3 "$B/tests/kernels/compare_results.py" /tmp/zc-concat-cpu.jsonl /tmp/zc-concat-cuda.jsonl > "$O/concat-compare.log" 2>&1
echo "concat cuda vs cpu: rc=$? $(tail -1 "$O/concat-compare.log")"
