#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Truth from outside: zcpipe's detector against TensorFlow.js on the same input tensors.

    test_tfjs.py TFJS_DUMP [--frames N] [--model MODEL.json] [--clip CLIP]
                 [--keep DIR] [--tfjs-outputs DIR]

tfjs_dump (tests/tfjs/tfjs_dump.c) decodes the first N frames (default 6) of the clip (default:
the bundled sample) with zcpipe's file source, writes the model input zcpipe's preprocess made for
each, and zcpipe's results for it: the C reference's decoded candidates and the detections after
zcpipe's post-processing (score threshold, class filter, boxes to frame pixels, per-class NMS,
top N) from the C reference, the CPU backend and, where a GPU is usable, the CUDA backend.
TensorFlow.js (tests/tfjs/oracle.js: tfjs-core's pure JavaScript CPU backend, installed by
`tools/setup.sh test` into tests/tfjs/node_modules) runs the whole graph, its own decode tail
included, on the same input files. Then, for every frame:

  1. decode: TF.js's `detections` output (its TopKV2 candidates: x0, y0, x1, y1, score, class in
     input pixels) against the C reference's candidates: every TF.js candidate whose score is
     clear of the cut at the 100th (by more than 1e-3) has a zcpipe candidate of the same class,
     box IoU >= 0.95 and score within 1e-3;
  2. detections: TF.js's candidates through the same post-processing rules (written again here,
     from the parameters tfjs_dump reports) against zcpipe's final detections from the reference,
     the CPU backend and CUDA: both ways, every detection clear of the score threshold (by more
     than 1e-3) has a match of the same class, IoU >= 0.95, score within 1e-3.

--keep DIR keeps the TF.js outputs (to carry them to a machine without node, where
--tfjs-outputs DIR uses them instead of running TF.js: the inputs are the same bytes wherever
the same zcpipe makes them). Exit 0 when every check holds, 1 otherwise, 77 (skipped, with the
reason) when neither node with TensorFlow.js nor --tfjs-outputs is available.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("ZCP_SOURCE_ROOT", os.path.join(HERE, "..", ".."))
TOL_SCORE = 1e-3
MIN_IOU = 0.95


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def floats(path):
    with open(path, "rb") as f:
        data = f.read()
    return struct.unpack(f"<{len(data) // 4}f", data)


def iou(a, b):
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(iw, 0.0) * max(ih, 0.0)
    ua = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / ua if ua > 0 else (1.0 if a == b else 0.0)


def post(cands, p):
    """zcpipe's post-processing (src/infer/detect.c), written again from its description."""
    kept = []
    for c in cands:  # best first
        if len(kept) >= p["max_det"]:
            break
        if not c["score"] >= p["min_score"]:
            continue
        bx = c["box"]

        def clamp(v, hi):
            return min(max(v, 0.0), hi)

        box = [clamp((bx[0] - p["off_x"]) * p["scale_x"], p["frame_w"]),
               clamp((bx[1] - p["off_y"]) * p["scale_y"], p["frame_h"]),
               clamp((bx[2] - p["off_x"]) * p["scale_x"], p["frame_w"]),
               clamp((bx[3] - p["off_y"]) * p["scale_y"], p["frame_h"])]
        if any(k["id"] == c["id"] and iou(k["box"], box) > p["nms_iou"] for k in kept):
            continue
        kept.append({"id": c["id"], "score": c["score"], "box": box})
    return kept


def match(a, b, clear, what):
    """Every entry of a with score > clear has a partner in b: same class, IoU >= 0.95, score within 1e-3.

    Returns (worst score difference, worst IoU, problems)."""
    worst_d, worst_iou, problems = 0.0, 1.0, []
    for x in a:
        if not x["score"] > clear:
            continue
        best = None
        for y in b:
            if y["id"] != x["id"] or abs(y["score"] - x["score"]) > TOL_SCORE:
                continue
            v = iou(x["box"], y["box"])
            if v >= MIN_IOU and (best is None or v > best[0]):
                best = (v, abs(y["score"] - x["score"]))
        if best is None:
            problems.append(f"{what}: class {x['id']} score {x['score']:.4f} box "
                            f"[{', '.join(f'{v:.1f}' for v in x['box'])}] has no match")
            continue
        worst_iou = min(worst_iou, best[0])
        worst_d = max(worst_d, best[1])
    return worst_d, worst_iou, problems


def tfjs_candidates(path):
    """TF.js's [1, k, 6] detections output: x0, y0, x1, y1, score, class."""
    v = floats(path)
    return [{"id": int(round(v[i + 5])), "score": v[i + 4], "box": list(v[i:i + 4])} for i in range(0, len(v), 6)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--frames", type=int, default=int(os.environ.get("ZCP_TFJS_FRAMES", "6")))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "centernet", "model.json"))
    ap.add_argument("--clip", default=os.path.join(ROOT, "samples", "vtest-h264.mp4"))
    ap.add_argument("--keep")
    ap.add_argument("--tfjs-outputs")
    a = ap.parse_args()

    node = shutil.which("node")
    tfjs = os.path.join(HERE, "node_modules", "@tensorflow", "tfjs-converter")
    if not a.tfjs_outputs:
        if not node:
            skip("no node on PATH (Debian 12 has nodejs; tools/setup.sh test installs what the test needs)")
        if not os.path.isdir(tfjs):
            skip(f"TensorFlow.js is not installed in {HERE}/node_modules (tools/setup.sh test runs npm ci there)")

    work = tempfile.mkdtemp(prefix="zcp-tfjs-")
    try:
        r = subprocess.run([a.dump, a.model, a.clip, str(a.frames), work], capture_output=True, text=True,
                           timeout=3000)
        sys.stdout.write(r.stdout)
        if r.returncode == 77:
            skip(f"tfjs_dump: {r.stdout.strip()}")
        if r.returncode != 0:
            fail(f"tfjs_dump exit {r.returncode}: {r.stderr[-2000:]}")
        with open(os.path.join(work, "zcpipe.json")) as f:
            z = json.load(f)
        inputs = [os.path.join(work, fr["input"]) for fr in z["frames"]]
        outdir = a.tfjs_outputs
        if not outdir:
            outdir = work
            r = subprocess.run([node, os.path.join(HERE, "oracle.js"), a.model, outdir] + inputs,
                               capture_output=True, text=True, timeout=3000, cwd=HERE)
            if r.returncode != 0:
                fail(f"TensorFlow.js exit {r.returncode}: {r.stderr[-2000:]}")
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
            for fn in os.listdir(outdir):
                if ".tower_0_detections." in fn or fn.endswith("_detections.f32"):
                    shutil.copy(os.path.join(outdir, fn), a.keep)

        backends = ["reference", "cpu"] + (["cuda"] if z.get("cuda") else [])
        problems = []
        print(f"{len(inputs)} frames of {os.path.basename(a.clip)}, {z['width']}x{z['height']} -> "
              f"{z['in_w']}x{z['in_h']}; backends: {', '.join(backends)}; min_score {z['post']['min_score']:.2f}")
        print(f"{'frame':>5} {'decode':>14} " + " ".join(f"{b:>22}" for b in backends))
        totals = {b: 0 for b in backends}
        for i, fr in enumerate(z["frames"]):
            outs = [fn for fn in os.listdir(outdir)
                    if fn.startswith(fr["input"] + ".") and fn.endswith("detections.f32")]
            if len(outs) != 1:
                fail(f"frame {i}: TF.js's detections output not found in {outdir}")
            tf_cands = tfjs_candidates(os.path.join(outdir, outs[0]))
            # 1. the decode: candidates clear of the 100th's score
            cut = min(c["score"] for c in tf_cands) + TOL_SCORE if tf_cands else 0.0
            d1, i1, p1 = match(tf_cands, fr["candidates"], cut, f"frame {i} decode (TF.js -> zcpipe)")
            problems += p1
            row = f"{i:>5} {len(tf_cands):>3} d{d1:.1e} "
            # 2. the detections, both ways, for every backend
            tf_final = post(tf_cands, z["post"])
            clear = z["post"]["min_score"] + TOL_SCORE
            for b in backends:
                mine = fr[b]
                da, ia, pa = match(tf_final, mine, clear, f"frame {i} {b} (TF.js -> zcpipe)")
                db, ib, pb = match(mine, tf_final, clear, f"frame {i} {b} (zcpipe -> TF.js)")
                problems += pa + pb
                totals[b] += len(mine)
                row += f" {len(mine):>3}/{len(tf_final):<3} d{max(da, db):.1e} iou{min(ia, ib):.3f}"
            print(row)
        print("detections per backend over the clip: " + ", ".join(f"{b} {n}" for b, n in totals.items()))
        if not any(totals.values()):
            problems.append("no detections at all on the clip: the check would prove nothing")
        if problems:
            for p in problems[:40]:
                print(p)
            fail(f"{len(problems)} differences from TensorFlow.js")
        print("OK: every frame's decode and detections equal TensorFlow.js's (class, IoU >= 0.95, "
              "score within 1e-3)")
    finally:
        e = sys.exc_info()[1]
        if e is None or (isinstance(e, SystemExit) and e.code in (0, 77)):
            shutil.rmtree(work, ignore_errors=True)
        else:   # what tfjs_dump and TensorFlow.js wrote, to look at
            print(f"kept for inspection: {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
