#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compares two zcpipe JSON-lines result files of the same input run twice on
the same backend (e.g. the GPU's native code and its PTX JIT-compiled by the
driver): every frame's object must be identical once its timestamps ("t",
CLOCK_MONOTONIC of this run) are removed. Prints one line; exit 1 on any
difference.

    compare_exact.py A.jsonl B.jsonl
"""
import json
import sys


def load(path):
    frames = {}
    with open(path) as f:
        for line in f:
            o = json.loads(line)
            o.pop("t", None)
            frames[(o["stream"], o["seq"])] = o
    return frames


def main():
    a, b = load(sys.argv[1]), load(sys.argv[2])
    if not a:
        print(f"DIFFER: {sys.argv[1]} holds no frames")
        return 1
    if set(a) != set(b):
        print(f"DIFFER: frames {len(a)} vs {len(b)}")
        return 1
    bad = [k for k in sorted(a) if a[k] != b[k]]
    if bad:
        k = bad[0]
        print(f"DIFFER: {len(bad)} of {len(a)} frames, first {k}: {json.dumps(a[k])} vs {json.dumps(b[k])}")
        return 1
    moving = sum(1 for o in a.values() if o["motion"]["moving_cells"] > 0)
    print(f"IDENTICAL: {len(a)} frames ({moving} with motion), every field but the timestamps equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
