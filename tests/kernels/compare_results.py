#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compares two zcpipe JSON-lines result files of the same input (e.g. the
cpu and the cuda backend): the same frames, motion equal, top-k scores within
1e-4 relative (a class may trade places with a neighbour of equal score).
Prints one line; exit 1 on a difference.

    compare_results.py A.jsonl B.jsonl
"""
import json
import sys


def load(path):
    frames = {}
    with open(path) as f:
        for line in f:
            o = json.loads(line)
            frames[(o["stream"], o["seq"])] = o
    return frames


def close(a, b, rel=1e-4):
    # The files print 6 significant digits: allow that rounding too.
    return abs(a - b) <= rel * abs(b) + 1e-6 * abs(b) + 1e-30


def main():
    a, b = load(sys.argv[1]), load(sys.argv[2])
    if set(a) != set(b):
        print(f"DIFFER: frames {len(a)} vs {len(b)}; only in A: {sorted(set(a) - set(b))[:5]} "
              f"only in B: {sorted(set(b) - set(a))[:5]}")
        return 1
    moving = swaps = 0
    for key in sorted(a):
        x, y = a[key], b[key]
        if x["motion"] != y["motion"]:
            print(f"DIFFER: frame {key}: motion {x['motion']} vs {y['motion']}")
            return 1
        moving += x["motion"]["moving_cells"] > 0
        tx, ty = x["topk"], y["topk"]
        if len(tx) != len(ty):
            print(f"DIFFER: frame {key}: top-k length {len(tx)} vs {len(ty)}")
            return 1
        py = {e["class"]: e["prob"] for e in ty}
        for ex, ey in zip(tx, ty):
            if not close(ex["prob"], ey["prob"]):
                print(f"DIFFER: frame {key}: prob {ex} vs {ey}")
                return 1
            if ex["class"] != ey["class"]:
                if ex["class"] not in py or not close(ex["prob"], py[ex["class"]]):
                    print(f"DIFFER: frame {key}: class {ex} vs {ey}")
                    return 1
                swaps += 1
    print(f"SAME: {len(a)} frames, motion identical ({moving} with motion), top-k within 1e-4 "
          f"({swaps} near-tie swaps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
