#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Per-stage latency from a zcpipe JSON-lines result file (the "t"
timestamps of every frame): p50 / p99 / max in microseconds of
capture -> convert start (dequeue and hand-over: for the fake camera, also
its copy of the frame into the buffer), convert (start->end), infer (start->end: the GPU stage as the pipeline sees
it, submit -> results visible) and capture -> publish_start (end to end
without the sink write). One line per stage.

    stage_latency.py FILE.jsonl [LABEL [SKIP]]

SKIP: leave out the first SKIP frames (warm-up: first touches of buffers).
"""
import json
import sys


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * q))]


def main():
    label = sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]
    skip = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    rows = [json.loads(line)["t"] for line in open(sys.argv[1])][skip:]
    spans = {
        "capture->convert": ("capture", "convert_start"),
        "convert": ("convert_start", "convert_end"),
        "infer (gpu stage)": ("infer_start", "infer_end"),
        "capture->publish": ("capture", "publish_start"),
    }
    for name, (a, b) in spans.items():
        us = [(t[b] - t[a]) / 1e3 for t in rows if t.get(a) and t.get(b)]
        if us:
            print(f"{label}: {name:18s} n={len(us):4d} p50 {pct(us, 0.5):9.1f} us  p99 {pct(us, 0.99):9.1f} us"
                  f"  max {max(us):9.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
