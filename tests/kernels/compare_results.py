#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compares two zcpipe JSON-lines result files of the same input (e.g. the
cpu and the cuda backend): the same frames, motion equal, top-k scores within
1e-4 relative (a class may trade places with a neighbour of equal score), and a
detector's detections by DESIGN.md's contract: matched one to one with the same
class id, box IoU >= 0.95 and a score within 1e-3; one without a match is
allowed only within 1e-3 of the score threshold (MIN_SCORE, default 0.3) or of
the last kept score when MAX_DET (default 20) were kept.
Prints one line; exit 1 on a difference.

    compare_results.py A.jsonl B.jsonl [MIN_SCORE [MAX_DET]]
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


def iou(p, q):
    iw = min(p[2], q[2]) - max(p[0], q[0])
    ih = min(p[3], q[3]) - max(p[1], q[1])
    inter = max(iw, 0.0) * max(ih, 0.0)
    uni = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter
    return inter / uni if uni > 0 else float(p == q)


def unmatched(x, y, min_score, max_det):
    """Detections of x without a match in y that are not on a border; None when all are fine."""
    used = [False] * len(y)
    for d in x:
        hit = None
        for j, e in enumerate(y):
            if not used[j] and e["id"] == d["id"] and abs(e["score"] - d["score"]) <= 1e-3 + 1e-6 and \
                    iou(e["box"], d["box"]) >= 0.95:
                hit = j
                break
        if hit is not None:
            used[hit] = True
            continue
        last = x[-1]["score"] if len(x) == max_det else None
        if abs(d["score"] - min_score) <= 1e-3 or (last is not None and abs(d["score"] - last) <= 1e-3):
            continue
        return d
    return None


def main():
    a, b = load(sys.argv[1]), load(sys.argv[2])
    min_score = float(sys.argv[3]) if len(sys.argv) > 3 else 0.3
    max_det = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    dets = 0
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
        dx, dy = x.get("detections", []), y.get("detections", [])
        for p, q, name in ((dx, dy, "A"), (dy, dx, "B")):
            d = unmatched(p, q, min_score, max_det)
            if d is not None:
                print(f"DIFFER: frame {key}: {name}'s detection {d} has no match")
                return 1
        dets += len(dx)
        tx, ty = x.get("topk", []), y.get("topk", [])
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
          f"({swaps} near-tie swaps), {dets} detections matched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
