#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The zcpipe binary end to end, as a user runs it.

  sample      the bundled clip through the whole pipeline (CPU backend): exactly
              150 frames, monotonic timestamps, motion found where people walk
              (the street band of the scene), none on the static lawn.
  synthetic   the moving square's motion box equals the ground truth computed
              here independently from the pattern's definition (synth.h).
  two         two streams in one process, each with its own exact frame count.
  errors      bad configs exit 78 with FILE:LINE:COL, a missing input or config exits 66
              naming the file (a config file that is a FIFO, a device or a socket too), a
              file with sound and no picture is one short line, backend: cuda without a GPU exits 69, --check validates,
              bad usage exits 64.
  nonfinite   weights whose sums overflow float: refused at --check (the model runs once on a
              test frame); run anyway, every frame dropped as infer, no line.
  check       --check refuses what cannot run or would corrupt output (issue 40, 7): an output
              file or unix socket in a directory that does not exist or cannot be written, a
              file where the socket goes (also at start, the file kept), two streams on one
              unix socket, two file outputs on one file, a results file that is the frame log
              (also refused at start), a gpu.device the host has no GPU for (CUDA builds; also
              at start); every problem one line; the fixed config passes and runs
              over a stale socket. Head keys the model's kind ignores (top_k for a
              detector, min_score and classes for a classifier): a warning naming them at
              --check and once at start, the streams run.
  topk        a small network written here, on synthetic frames: every frame's top-5 classes
              and probabilities equal those of the model contract (DESIGN.md section 4)
              computed here, in Python, from the frame's definition (synth.h).
  sticky      a sticky GPU error (injected at the infer stage, ZCP_FAULT_STICKY) ends the
              process with exit 86 and says why, whichever backend runs: two streams, one fails.

Usage: test_daemon.py [case...]   (env ZCPIPE, ZCP_SOURCE_ROOT set by meson)
"""
import json
import math
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zcpjson  # noqa: E402
from zcptest import ROOT, WEIGHTS, ZCPIPE, fail, tmpdir, write  # noqa: E402

SAMPLE = os.path.join(ROOT, "samples", "vtest-h264.mp4")
TMP = tmpdir("zcp-itest-")
zcpjson.watch(TMP)   # every results file of every case, strictly parsed at exit
# The metrics endpoint has its own tests; these runs must not fight over its port.
NOHTTP = "metrics:\n  http:\n    enabled: false\n"


def run(args, timeout=300, env=None):
    p = subprocess.run([ZCPIPE] + args, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, **env) if env else None)
    return p.returncode, p.stdout, p.stderr


def read_lines(path):
    return zcpjson.read_lines(path)


def stream_yaml(name, source, out):
    return f"""
  - name: {name}
    source:
{source}
    ring:
      slots: 6
    gpu:
      backend: cpu
    model:
      weights: {WEIGHTS}
    output:
      type: file
      path: {out}
"""


def has_gst():
    rc, out, _ = run(["--version"])
    return rc == 0 and "gstreamer yes" in out


def case_sample():
    if not has_gst():
        print("sample: SKIP (built without GStreamer)")
        return "skip"
    out = os.path.join(TMP, "sample.jsonl")
    src = f"      type: file\n      path: {SAMPLE}\n      pace: fast"
    cfg = write("sample.yaml", NOHTTP + "log:\n  summary_interval_s: 0\nstreams:" + stream_yaml("sample", src, out))
    rc, _, err = run(["--config", cfg])
    if rc != 0:
        fail(f"sample: exit {rc}\n{err}")
    rows = read_lines(out)
    if len(rows) != 150:
        fail(f"sample: {len(rows)} frames published, expected 150")
    if [r["seq"] for r in rows] != list(range(150)):
        fail("sample: sequence numbers are not 0..149 in order")
    for r in rows:
        t = r["t"]
        order = ["capture", "convert_enter", "convert_start", "convert_end", "infer_enter", "infer_start",
                 "infer_end", "publish_enter", "publish_start"]
        vals = [t[k] for k in order]
        if vals != sorted(vals) or vals[0] == 0:
            fail(f"sample: timestamps out of order in frame {r['seq']}: {t}")
        if r["width"] != 768 or r["height"] != 576:
            fail("sample: wrong geometry")
        topk_well_formed("sample", r, 5, 1000)
    # People walk along the street band (roughly rows 100..420 of 576); the lawn
    # below and the building above stay still.
    moving = [r for r in rows[1:] if r["motion"]["moving_cells"] > 0]
    if len(moving) < 0.8 * 149:
        fail(f"sample: motion in only {len(moving)} of 149 frames")
    centre_in_band = [r for r in moving if 100 <= (r["motion"]["bbox"][1] + r["motion"]["bbox"][3]) / 2 <= 420]
    if len(centre_in_band) < 0.9 * len(moving):
        fail(f"sample: motion centred on the street in only {len(centre_in_band)} of {len(moving)} frames")
    on_lawn = [r for r in moving if r["motion"]["bbox"][3] > 480]
    if len(on_lawn) > 0.1 * len(moving):
        fail(f"sample: motion reaches the static lawn in {len(on_lawn)} frames")
    if "end-to-end" not in err or "150 published" not in err:
        fail("sample: no summary table on stderr:\n" + err)
    print(f"sample: ok ({len(moving)} frames with motion)")


def topk_well_formed(case, r, k, classes):
    """k distinct classes of the model's, probabilities in [0, 1], descending, summing to at most 1."""
    top = r["topk"]
    probs = [x["prob"] for x in top]
    ids = [x["class"] for x in top]
    if (len(top) != k or len(set(ids)) != k or not all(isinstance(c, int) and 0 <= c < classes for c in ids)
            or not all(0.0 <= p <= 1.0 for p in probs) or probs != sorted(probs, reverse=True)
            or sum(probs) > 1.0 + 1e-5):
        fail(f"{case}: frame {r['seq']}: top-{k} malformed: {top}")


def synth_truth(w, h, box, speed, seq):
    """synth.h, re-derived: bounce along x and y (y with a phase of a third)."""
    def bounce(pos, span):
        if span == 0:
            return 0
        period = 2 * span
        pos %= period
        return pos if pos <= span else period - pos
    bw, bh = min(box, w), min(box, h)
    return bounce(seq * speed, w - bw), bounce(seq * speed + (h - bh) // 3, h - bh)


def cell_means(w, h, cell, box, x0, y0):
    gw, gh = (w + cell - 1) // cell, (h + cell - 1) // cell
    means = []
    for cy in range(gh):
        for cx in range(gw):
            xs, xe = cx * cell, min((cx + 1) * cell, w)
            ys, ye = cy * cell, min((cy + 1) * cell, h)
            ix = max(0, min(xe, x0 + box) - max(xs, x0))
            iy = max(0, min(ye, y0 + box) - max(ys, y0))
            n = (xe - xs) * (ye - ys)
            inside = ix * iy
            means.append((inside * 235 + (n - inside) * 64) // n)
    return gw, gh, means


def case_synthetic():
    w, h, box, speed, cell, frames = 320, 240, 40, 6, 16, 60
    out = os.path.join(TMP, "synth.jsonl")
    src = (f"      type: synthetic\n      width: {w}\n      height: {h}\n      box_size: {box}\n"
           f"      speed: {speed}\n      frames: {frames}\n      pace: fast")
    text = NOHTTP + f"""log:
  summary_interval_s: 0
streams:
  - name: synth
    source:
{src}
    gpu:
      backend: cpu
    model:
      enabled: false
    motion:
      cell: {cell}
      threshold: 10
      alpha: 1.0
    output:
      type: file
      path: {out}
"""
    cfg = write("synth.yaml", text)
    rc, _, err = run(["--config", cfg])
    if rc != 0:
        fail(f"synthetic: exit {rc}\n{err}")
    rows = read_lines(out)
    if len(rows) != frames:
        fail(f"synthetic: {len(rows)} frames, expected {frames}")
    prev = None
    for r in rows:
        x0, y0 = synth_truth(w, h, box, speed, r["seq"])
        gw, gh, means = cell_means(w, h, cell, box, x0, y0)
        if prev is None:
            exp_cells, exp_box = 0, None
        else:
            # alpha = 1: the background is exactly the previous frame's means.
            mov = [i for i in range(gw * gh) if abs(means[i] - prev[i]) > 10]
            exp_cells = len(mov)
            if mov:
                xs = [i % gw for i in mov]
                ys = [i // gw for i in mov]
                exp_box = [min(xs) * cell, min(ys) * cell, min((max(xs) + 1) * cell, w), min((max(ys) + 1) * cell, h)]
            else:
                exp_box = None
        m = r["motion"]
        if m["moving_cells"] != exp_cells or m["bbox"] != exp_box or m["total_cells"] != gw * gh:
            fail(f"synthetic: frame {r['seq']}: got {m}, expected {exp_cells} cells, bbox {exp_box}")
        # The square itself is always inside the motion box once it has moved.
        if exp_box and not (m["bbox"][0] <= x0 and m["bbox"][1] <= y0 and m["bbox"][2] >= x0 + box
                            and m["bbox"][3] >= y0 + box):
            fail(f"synthetic: frame {r['seq']}: square at {x0},{y0} outside {m['bbox']}")
        prev = means
    print("synthetic: ok")


def case_two():
    out_a, out_b = os.path.join(TMP, "a.jsonl"), os.path.join(TMP, "b.jsonl")
    src_a = "      type: synthetic\n      width: 160\n      height: 120\n      frames: 40\n      pace: fast"
    src_b = "      type: synthetic\n      width: 96\n      height: 64\n      frames: 25\n      pace: fast"
    text = NOHTTP + "log:\n  summary_interval_s: 0\nstreams:" + stream_yaml("a", src_a, out_a) + stream_yaml("b", src_b, out_b)
    cfg = write("two.yaml", text)
    rc, _, err = run(["--config", cfg])
    if rc != 0:
        fail(f"two: exit {rc}\n{err}")
    a, b = read_lines(out_a), read_lines(out_b)
    if len(a) != 40 or len(b) != 25:
        fail(f"two: {len(a)} and {len(b)} frames, expected 40 and 25")
    if {r["stream"] for r in a} != {"a"} or {r["stream"] for r in b} != {"b"}:
        fail("two: stream names mixed up")
    if "stream a:" not in err or "stream b:" not in err:
        fail("two: summary lacks a stream")
    print("two: ok")


def case_errors():
    bad = write("bad.yaml", "streams:\n  - source:\n      type: synthetic\n    ring:\n      slotz: 4\n")
    rc, _, err = run(["--config", bad])
    if rc != 78 or f"{bad}:5:7:" not in err or "slotz" not in err:
        fail(f"errors: unknown key: exit {rc}, stderr {err!r}")
    # A config file that cannot be read is a missing input (66); one that was read and is wrong, 78.
    rc, _, err = run(["--config", os.path.join(TMP, "nope.yaml")])
    if rc != 66 or "nope.yaml" not in err:
        fail(f"errors: missing config: exit {rc}, stderr {err!r}")
    rc, _, err = run(["--config", TMP])
    if rc != 66 or "Is a directory" not in err:
        fail(f"errors: config is a directory: exit {rc}, stderr {err!r}")
    # whatever kind of file it is: a FIFO, a device, a socket
    fifo = os.path.join(TMP, "config.fifo")
    os.mkfifo(fifo)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(os.path.join(TMP, "config.sock"))
    for path in (fifo, "/dev/null", os.path.join(TMP, "config.sock")):
        rc, _, err = run(["--config", path])
        if rc != 66 or path not in err:
            fail(f"errors: config {path} cannot be read: exit {rc}, stderr {err!r}")
    sock.close()
    big = write("big.yaml", "streams:\n" + "# padding\n" * 120000)
    rc, _, err = run(["--config", big])
    if rc != 78 or "too large" not in err:
        fail(f"errors: config too large: exit {rc}, stderr {err!r}")
    # backend: cuda without a usable GPU (a CPU-only build, or no device) exits 69, EX_UNAVAILABLE.
    cpu_only = "cuda no" in run(["--version"])[1]
    if cpu_only or not os.path.exists("/dev/nvidia0"):
        cfg = write("cuda.yaml", NOHTTP + "streams:\n  - source:\n      type: synthetic\n      frames: 1\n    gpu:\n"
                                 f"      backend: cuda\n    model:\n      weights: {WEIGHTS}\n")
        rc, _, err = run(["--config", cfg])
        if rc != 69 or "cuda" not in err:
            fail(f"errors: backend cuda without a GPU (cpu-only build: {cpu_only}): exit {rc}, stderr {err!r}")
    if has_gst():
        missing = os.path.join(TMP, "missing.mp4")
        cfg = write("missing.yaml", NOHTTP + f"streams:\n  - source:\n      type: file\n      path: {missing}\n    gpu:\n"
                                    f"      backend: cpu\n    model:\n      weights: {WEIGHTS}\n")
        rc, _, err = run(["--config", cfg])
        if rc != 66 or "missing.mp4" not in err:
            fail(f"errors: missing input: exit {rc}, stderr {err!r}")
        if shutil.which("ffmpeg"):
            # A file with sound and no picture: one short line that says so, not the audio decoder's story.
            audio = os.path.join(TMP, "audio.m4a")
            subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "sine=d=1", "-c:a", "aac", audio],
                           check=True, timeout=120)
            rc, _, err = run(["--config", write("audio.yaml", open(cfg).read().replace(missing, audio))])
            errors = [ln for ln in err.splitlines() if ": error: " in ln]
            log = [ln for ln in err.splitlines() if " zcpipe: " in ln]   # the log lines, not the table
            if rc != 66 or len(errors) != 2 or "no video in it" not in errors[0] or "AAC" in err or len(log) > 5:
                fail(f"errors: audio-only file: exit {rc}, stderr {err!r}")
    badw = write("badw.safetensors", "not a safetensors file at all")
    cfg = write("badw.yaml", NOHTTP + f"streams:\n  - source:\n      type: synthetic\n      frames: 1\n    gpu:\n"
                             f"      backend: cpu\n    model:\n      weights: {badw}\n")
    rc, _, err = run(["--config", cfg])
    if rc != 78 or "badw.safetensors" not in err:
        fail(f"errors: bad weights: exit {rc}, stderr {err!r}")
    rc, out, err = run(["--check", "--config", os.path.join(ROOT, "config", "sample.yaml")])
    if rc != 0 or "OK" not in out:
        fail(f"errors: --check sample.yaml: exit {rc} {out!r} {err!r}")
    rc, _, _ = run(["--bogus"])
    if rc != 64:
        fail(f"errors: bad usage exit {rc}")
    print("errors: ok")


def safetensors(path, tensors):
    """A .safetensors file of F32 tensors: {name: (shape, value)}, value one number for every
    element or the elements in row-major order."""
    header, blobs, off = {}, [], 0
    for name, (shape, value) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        blob = struct.pack(f"<{n}f", *(value if isinstance(value, list) else [value] * n))
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def case_nonfinite():
    """Finite weights whose sums overflow float: every frame an inference error, never "prob":nan."""
    huge = os.path.join(TMP, "huge.safetensors")
    safetensors(huge, {"conv0.weight": ([4, 3, 3, 3], 3e38), "conv0.bias": ([4], 3e38),
                       "fc.weight": ([3, 4], 3e38), "fc.bias": ([3], 0.0)})
    check_cfg = write("huge-check.yaml", NOHTTP + "streams:" + stream_yaml(
        "huge", "      type: synthetic\n      frames: 1", os.path.join(TMP, "unused.jsonl")).replace(WEIGHTS, huge))
    # --check runs the model once on a test frame: scores that are not finite are refused (issue 40, 7)
    rc, _, err = run(["--check", "--config", check_cfg])
    if rc != 78 or "not finite" not in err or "huge" not in err:
        fail(f"nonfinite: --check passes weights whose scores overflow: exit {rc} {err}")
    out = os.path.join(TMP, "huge.jsonl")
    src = "      type: synthetic\n      width: 64\n      height: 48\n      frames: 20\n      pace: fast"
    cfg = write("huge.yaml", NOHTTP + "log:\n  summary_interval_s: 0\nstreams:" +
                stream_yaml("huge", src, out).replace(WEIGHTS, huge))
    rc, _, err = run(["--config", cfg])
    if rc != 0:
        fail(f"nonfinite: exit {rc}\n{err}")
    rows = read_lines(out) if os.path.exists(out) else []
    if rows:
        fail(f"nonfinite: {len(rows)} lines published with non-finite scores: {rows[0]}")
    if "20 frames captured, 0 published" not in err or not re.search(r"dropped infer\s+20\b", err):
        fail(f"nonfinite: the 20 frames are not counted as inference drops:\n{err}")
    if "non-finite scores" not in err:
        fail(f"nonfinite: no log line says why:\n{err}")
    print("nonfinite: 20 frames dropped as infer, no line written")


def case_check():
    src = "      type: synthetic\n      frames: 1"
    ok_dir = os.path.join(TMP, "out")
    os.makedirs(ok_dir, exist_ok=True)
    locked = os.path.join(TMP, "locked")
    os.makedirs(locked, exist_ok=True)
    os.chmod(locked, 0o555)

    def unix_stream(name, path):
        return stream_yaml(name, src, "unused").replace("      type: file\n      path: unused",
                                                        f"      type: unix\n      path: {path}")

    def refused(name, text, needles, at_start=False):
        cfg = write(name + ".yaml", text)
        for args in [["--check"]] + ([[]] if at_start else []):
            rc, _, err = run(args + ["--config", cfg])
            errors = [ln for ln in err.splitlines() if cfg in ln]
            if rc != 78 or any(n not in err for n in needles) or not errors:
                fail(f"check {name} {args}: exit {rc}, expected 78 naming {needles}\n{err}")
        return err

    no_dir = os.path.join(TMP, "no", "such", "dir")
    refused("nodir", NOHTTP + "streams:" + stream_yaml("a", src, os.path.join(no_dir, "a.jsonl")),
            ["stream a: output.path", "does not exist", "fix:"])
    refused("nodir-unix", NOHTTP + "streams:" + unix_stream("a", os.path.join(no_dir, "a.sock")),
            ["stream a: output.path", "does not exist"])
    # something that is not a socket where the socket goes: never replaced, refused before start
    not_sock = os.path.join(ok_dir, "results.sock")
    with open(not_sock, "w") as f:
        f.write("keep me\n")
    refused("not-a-socket", NOHTTP + "streams:" + unix_stream("a", not_sock),
            ["stream a: output.path", "it exists and is not a socket (a file)", "fix:"])
    rc, _, err = run(["--config", os.path.join(TMP, "not-a-socket.yaml")])
    if rc != 78 or f"output: {not_sock} exists and is not a socket" not in err or "device cannot" in err:
        fail(f"check not-a-socket at start: exit {rc}, expected 78 saying the path is not a socket\n{err}")
    with open(not_sock) as f:
        if f.read() != "keep me\n":
            fail("check not-a-socket: the file at the socket's path was changed")
    refused("nodir-log", NOHTTP + f"  frame_log:\n    path: {no_dir}/frames.jsonl\nstreams:" +
            stream_yaml("a", src, os.path.join(ok_dir, "a.jsonl")), ["metrics.frame_log.path", "does not exist"])
    if os.geteuid() == 0 and shutil.which("setpriv"):
        # root writes anywhere: as an unprivileged user, a directory it may not write
        cfg = write("locked.yaml", NOHTTP + "streams:" + stream_yaml("a", src, os.path.join(locked, "a.jsonl")))
        os.chmod(TMP, 0o755)
        os.chmod(cfg, 0o644)
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", ZCPIPE, "--check",
                            "--config", cfg], capture_output=True, text=True, timeout=300)
        if p.returncode != 78 or "cannot be written (Permission denied)" not in p.stderr:
            fail(f"check locked: exit {p.returncode}\n{p.stderr}")
    elif os.geteuid() != 0:
        refused("locked", NOHTTP + "streams:" + stream_yaml("a", src, os.path.join(locked, "a.jsonl")),
                ["cannot be written (Permission denied)"])
    sock = os.path.join(ok_dir, "shared.sock")
    refused("two-unix", NOHTTP + "streams:" + unix_stream("a", sock) + unix_stream("b", sock),
            ["stream b: output.path", "is also the output of stream a", "one unix socket serves one stream"],
            at_start=True)
    shared = os.path.join(ok_dir, "shared.jsonl")
    # the same file by another spelling of its directory
    refused("two-files", NOHTTP + "streams:" + stream_yaml("a", src, shared) +
            stream_yaml("b", src, os.path.join(ok_dir, "..", "out", "shared.jsonl")),
            ["stream b: output.path", "is also the output of stream a", "interleave"], at_start=True)
    refused("log-is-results", NOHTTP + f"  frame_log:\n    path: {shared}\nstreams:" + stream_yaml("a", src, shared),
            ["stream a: output.path", "is also metrics.frame_log.path"], at_start=True)
    # several problems at once: each its own line
    err = refused("several", NOHTTP + "streams:" + stream_yaml("a", src, os.path.join(no_dir, "a.jsonl")) +
                  unix_stream("b", sock) + unix_stream("c", sock), ["stream a:", "stream c:"])
    # a GPU the host does not have (the CUDA build's count made 2 by ZCP_FAULT_GPU_COUNT): 78 at --check and start
    rc, out, _ = run(["--version"])
    if "cuda yes" in out:
        cfg = write("gpu2.yaml", NOHTTP + "streams:" + stream_yaml("g", src, os.path.join(ok_dir, "g.jsonl"))
                    .replace("backend: cpu", "backend: auto\n      device: 2"))
        for args in (["--check"], []):
            rc, _, err = run(args + ["--config", cfg], env={"ZCP_FAULT_GPU_COUNT": "2"})
            want = "stream g: gpu.device 2, but this host has 2 GPUs (0, 1); fix: a number below 2, or auto"
            if rc != 78 or want not in err:
                fail(f"check gpu2 {args}: exit {rc}, expected 78 saying '{want}'\n{err}")
    # all fixed: passes, and runs; a stale socket left by an earlier run at b's path is no obstacle
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(sock)
    stale.close()
    good = write("good.yaml", NOHTTP + f"  frame_log:\n    path: {ok_dir}/frames.jsonl\nstreams:" +
                 stream_yaml("a", src, os.path.join(ok_dir, "a.jsonl")) + unix_stream("b", sock) +
                 stream_yaml("c", src, os.path.join(ok_dir, "c.jsonl")))
    rc, out, err = run(["--check", "--config", good])
    if rc != 0 or "configuration OK (3 streams)" not in out:
        fail(f"check good: exit {rc}\n{err}")
    rc, _, err = run(["--config", good])
    if rc != 0 or len(read_lines(os.path.join(ok_dir, "a.jsonl"))) != 1:
        fail(f"check good, run: exit {rc}\n{err}")
    # head keys the model's kind ignores: a warning naming them, at --check and once at start, not an error
    cls = stream_yaml("k", src, os.path.join(ok_dir, "k.jsonl")).replace(
        f"      weights: {WEIGHTS}\n", f"      weights: {WEIGHTS}\n      min_score: 0.5\n      top_k: 3\n"
                                      "      classes: [1]\n")
    det = stream_yaml("d", src, os.path.join(ok_dir, "d.jsonl")).replace(
        f"      weights: {WEIGHTS}\n", "      top_k: 3\n      max_detections: 5\n")
    keys = write("keys.yaml", NOHTTP + "streams:" + cls + det)
    said = [r"stream k: model\.min_score, model\.classes are ignored: \S+ is a classifier, it reports its model\.top_k",
            r"stream d: model\.top_k is ignored: \S+/centernet/model\.json is a detector, it reports up to "
            r"model\.max_detections"]
    rc, out, err = run(["--check", "--config", keys])
    if rc != 0 or "configuration OK (2 streams)" not in out or not all(re.search(w, err) for w in said):
        fail(f"check keys: exit {rc}, expected 0 and a warning for each stream\n{err}")
    rc, _, err = run(["--config", keys])
    warned = [len(re.findall(w.replace("stream ", "", 1), err)) for w in said]
    lines = [len(read_lines(os.path.join(ok_dir, n))) for n in ("k.jsonl", "d.jsonl")]
    if rc != 0 or warned != [1, 1] or lines != [1, 1]:
        fail(f"check keys, run: exit {rc}, warnings {warned}, lines {lines} (one each expected)\n{err}")
    os.chmod(locked, 0o755)
    print("check: ok: unwritable and missing directories, a file where a socket goes, shared sockets and files, "
          "the frame log refused; the fixed config passes and runs over a stale socket; head keys the model ignores "
          "warned of")


# ---- the model contract, computed here (DESIGN.md section 4, src/infer/reference.c) ----

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def contract_tensor(luma, w, h, in_w, in_h):
    """The model input of an NV12 frame with neutral chroma (U = V = 128): luma(x, y) -> Y."""
    def rgb(x, y):   # R = G = B: the chroma terms are 0
        return min(max(1.164 * (luma(x, y) - 16), 0.0), 255.0)

    def index(dst, scale, n):   # bilinear, align_corners=False, no antialias
        src = max((dst + 0.5) * scale - 0.5, 0.0)
        i0 = min(int(src), n - 1)
        return i0, i0 + 1 if i0 < n - 1 else i0, 1.0 - (src - i0), src - i0

    t = [[[0.0] * in_w for _ in range(in_h)] for _ in range(3)]
    for oy in range(in_h):
        y0, y1, ly0, ly1 = index(oy, h / in_h, h)
        for ox in range(in_w):
            x0, x1, lx0, lx1 = index(ox, w / in_w, w)
            v = ly0 * (lx0 * rgb(x0, y0) + lx1 * rgb(x1, y0)) + ly1 * (lx0 * rgb(x0, y1) + lx1 * rgb(x1, y1))
            for k in range(3):
                t[k][oy][ox] = (v / 255.0 - MEAN[k]) / STD[k]
    return t


def contract_conv(x, weight, bias, stride=2):
    """3x3, padding 1, bias, ReLU; weight[o][ci][ky][kx]."""
    h, w = len(x[0]), len(x[0][0])
    ho, wo = (h - 1) // stride + 1, (w - 1) // stride + 1
    out = []
    for o in range(len(bias)):
        plane = [[0.0] * wo for _ in range(ho)]
        for oy in range(ho):
            for ox in range(wo):
                acc = bias[o]
                for ci in range(len(x)):
                    for ky in range(3):
                        iy = oy * stride + ky - 1
                        if 0 <= iy < h:
                            for kx in range(3):
                                ix = ox * stride + kx - 1
                                if 0 <= ix < w:
                                    acc += weight[o][ci][ky][kx] * x[ci][iy][ix]
                plane[oy][ox] = max(acc, 0.0)
        out.append(plane)
    return out


def contract_probs(t, layers, fc_w, fc_b):
    """Every class's probability: the conv layers, global average pooling, FC, softmax."""
    for weight, bias in layers:
        t = contract_conv(t, weight, bias)
    pooled = [sum(sum(row) for row in plane) / (len(plane) * len(plane[0])) for plane in t]
    logits = [fc_b[k] + sum(fc_w[k][j] * pooled[j] for j in range(len(pooled))) for k in range(len(fc_b))]
    m = max(logits)
    e = [math.exp(z - m) for z in logits]
    return [v / sum(e) for v in e]


def case_topk():
    """Top-5 of known inputs through a small network, against the contract computed above."""
    w, h, box, speed, frames, in_w, in_h, classes = 64, 48, 16, 3, 24, 32, 32, 8
    rnd = random.Random(38)

    def tensor(*shape, scale=1.0):   # float32 values, nested as shape says
        if len(shape) == 1:
            return [f32(rnd.uniform(-scale, scale)) for _ in range(shape[0])]
        return [tensor(*shape[1:], scale=scale) for _ in range(shape[0])]

    def flat(v):
        return [x for e in v for x in flat(e)] if isinstance(v, list) else [v]

    layers = [(tensor(4, 3, 3, 3, scale=0.5), tensor(4, scale=0.2)), (tensor(4, 4, 3, 3, scale=0.5), tensor(4, scale=0.2))]
    fc_w, fc_b = tensor(classes, 4, scale=2.0), tensor(classes, scale=0.5)
    weights = os.path.join(TMP, "small.safetensors")
    safetensors(weights, {"conv0.weight": ([4, 3, 3, 3], flat(layers[0][0])), "conv0.bias": ([4], layers[0][1]),
                          "conv1.weight": ([4, 4, 3, 3], flat(layers[1][0])), "conv1.bias": ([4], layers[1][1]),
                          "fc.weight": ([classes, 4], flat(fc_w)), "fc.bias": ([classes], fc_b)})
    out = os.path.join(TMP, "topk.jsonl")
    src = (f"      type: synthetic\n      width: {w}\n      height: {h}\n      box_size: {box}\n"
           f"      speed: {speed}\n      frames: {frames}\n      pace: fast")
    text = NOHTTP + "log:\n  summary_interval_s: 0\nstreams:" + stream_yaml("topk", src, out).replace(
        f"      weights: {WEIGHTS}\n", f"      weights: {weights}\n      input_width: {in_w}\n      input_height: {in_h}\n")
    rc, _, err = run(["--config", write("topk.yaml", text)])
    if rc != 0:
        fail(f"topk: exit {rc}\n{err}")
    rows = read_lines(out)
    if [r["seq"] for r in rows] != list(range(frames)):
        fail(f"topk: frames {[r['seq'] for r in rows]}, expected 0..{frames - 1}")
    tops = set()
    for r in rows:
        x0, y0 = synth_truth(w, h, box, speed, r["seq"])

        def luma(x, y):
            return 235 if x0 <= x < x0 + box and y0 <= y < y0 + box else 64

        p = contract_probs(contract_tensor(luma, w, h, in_w, in_h), layers, fc_w, fc_b)
        expected = sorted(p, reverse=True)[:5]
        topk_well_formed("topk", r, 5, classes)
        for rank, x in enumerate(r["topk"]):
            # Within 1e-4 relative of the contract's probability of that class, and of the
            # rank's (a tie may order two classes either way).
            if abs(x["prob"] - p[x["class"]]) > 1e-4 * p[x["class"]] or \
                    abs(p[x["class"]] - expected[rank]) > 1e-4 * expected[rank]:
                fail(f"topk: frame {r['seq']}: rank {rank} is class {x['class']} p {x['prob']}; the contract "
                     f"gives it {p[x['class']]:.6g}, and the top-5 {[round(v, 6) for v in expected]}")
        tops.add(tuple(round(x["prob"], 4) for x in r["topk"]))
    if len(tops) < 2:
        fail("topk: every frame has the same probabilities: the check does not see the input")
    print(f"topk: ok ({frames} frames equal the contract's top-5; {len(tops)} distinct)")


def case_sticky():
    """Exit 86 end to end: a sticky GPU error on one stream's frame 10 ends the process."""
    outs = {n: os.path.join(TMP, f"sticky-{n}.jsonl") for n in ("a", "b")}
    text = NOHTTP + "log:\n  summary_interval_s: 0\nstreams:"
    for n in outs:
        # pace fast: every frame reaches the infer stage (back-pressure, no live drops), frame 10 included
        src = "      type: synthetic\n      width: 64\n      height: 48\n      pace: fast"
        text += stream_yaml(n, src, outs[n]) + "    restart: always\n"
    rc, _, err = run(["--config", write("sticky.yaml", text)], timeout=120, env={"ZCP_FAULT_STICKY": "a:10"})
    if rc != 86:
        fail(f"sticky: exit {rc}, expected 86\n{err}")
    for want in ("ZCP_FAULT_STICKY", "a: fatal GPU error at frame 10", "sticky GPU error: the process must restart",
                 "stream a:", "stream b:"):
        if want not in err:
            fail(f"sticky: stderr lacks {want!r}:\n{err}")
    rows = read_lines(outs["a"])
    if not rows or rows[-1]["seq"] >= 10:
        fail(f"sticky: stream a published up to frame {rows[-1]['seq'] if rows else None}, the fault was at 10")
    print(f"sticky: exit 86 (stream a stopped at frame 10, b with it)")


CASES = {"sample": case_sample, "synthetic": case_synthetic, "two": case_two, "errors": case_errors,
         "nonfinite": case_nonfinite, "topk": case_topk, "sticky": case_sticky, "check": case_check}

if __name__ == "__main__":
    names = sys.argv[1:] or list(CASES)
    results = [CASES[n]() for n in names]
    if all(r == "skip" for r in results):
        sys.exit(77)
