#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""zcpipe against an independent implementation: the PyTorch peer (tests/kernels/peer_torch.py).

Usage: test_peer.py [zcnet|detector]   (env ZCPIPE, ZCP_SOURCE_ROOT set by meson)

zcpipe decodes the bundled sample (150 frames, 768x576) with the CPU backend and writes its JSON
lines; GStreamer decodes the same file to raw NV12 frames; the peer, written from DESIGN.md's
model contract in PyTorch (its own preprocess, network, head and avg_pool2d motion grid, run here
on the CPU), computes every frame and must agree with every line, motion (moving cells and
bounding box) equal, and
  zcnet     (default; meson's peer-torch) zcnet-default.safetensors (the build's models/,
            ZCP_MODELDIR): the top-5 classes in the same order, probabilities within 1e-4 relative;
  detector  (by hand, once the daemon runs detectors) centernet/model.json (the build's models/,
            else the source tree's), the TF.js graph executed node by node: the same detections
            (class, box IoU >= 0.95, score within 1e-3; a detection within 1e-3 of min_score may be
            on one side only).
On the GPU machine the same script runs against the cuda backend's lines (tests/kernels/gpu-run.sh,
part `peer`). Skipped (77) where PyTorch (Debian's python3-torch), gst-launch-1.0 or zcpipe's
GStreamer support is missing.
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zcptest import ROOT, ZCPIPE, fail, skip, tmpdir  # noqa: E402

W, H, FRAMES = 768, 576, 150
MODELS = {"zcnet": "zcnet-default.safetensors", "detector": os.path.join("centernet", "model.json")}


def torch_python():
    """A python3 that imports torch and numpy: this one, else Debian's (meson may have found another)."""
    for py in (sys.executable, "/usr/bin/python3"):
        if py and os.path.exists(py) and subprocess.run([py, "-c", "import torch, numpy"], capture_output=True,
                                                        timeout=120).returncode == 0:
            return py
    return None


def config(path, model, sample, jsonl):
    """A config for `model` on the CPU backend, as zcpipe --check takes it."""
    with open(path, "w") as f:
        f.write(f"""streams:
  - name: sample
    source:
      type: file
      path: {sample}
      pace: fast
      loop: false
    gpu:
      backend: cpu
    model:
      path: {model}
    output:
      type: file
      path: {jsonl}
metrics:
  http:
    enabled: false
""")
    r = subprocess.run([ZCPIPE, "--config", path, "--check"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"zcpipe --check refuses a config for {model} (exit {r.returncode}): {r.stderr[-1500:]}")


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "zcnet"
    if what not in MODELS:
        sys.exit(__doc__)   # not raise SystemExit: zcptest's sys.exit sees the failure
    out = subprocess.run([ZCPIPE, "--version"], capture_output=True, text=True, timeout=60).stdout
    if not re.search(r"gstreamer yes", out):
        skip("zcpipe built without GStreamer: it cannot decode the sample")
    gst = shutil.which("gst-launch-1.0")
    if not gst:
        skip("no gst-launch-1.0 (gstreamer1.0-tools)")
    py = torch_python()
    if not py:
        skip("no PyTorch and numpy (Debian: python3-torch) for python3 or /usr/bin/python3")
    tmp = tmpdir("zcp-peer-")
    sample = os.path.join(ROOT, "samples", "vtest-h264.mp4")
    # The build's models (the generated zcnet weights), else the source tree's (the shipped TF.js models).
    models = os.environ.get("ZCP_MODELDIR") or os.path.join(os.environ.get("ZCP_BUILD_ROOT", "build"), "models")
    model = os.path.abspath(os.path.join(models, MODELS[what]))
    if not os.path.exists(model):
        model = os.path.join(ROOT, "models", MODELS[what])
    jsonl, nv12, cfg = (os.path.join(tmp, n) for n in ("results.jsonl", "frames.nv12", "sample.yaml"))
    config(cfg, model, sample, jsonl)
    r = subprocess.run([ZCPIPE, "--config", cfg], capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        fail(f"zcpipe exited {r.returncode}: {r.stderr[-2000:]}")
    with open(jsonl) as f:
        first = f.readline()
        lines = 1 + sum(1 for _ in f) if first else 0
    if lines != FRAMES:
        fail(f"zcpipe wrote {lines} lines, expected {FRAMES}")
    if what == "detector" and '"detections"' not in first:
        fail(f"zcpipe's lines carry no detections with {model} (is the detector wired in?): {first[:300]}")
    r = subprocess.run([gst, "-q", "filesrc", f"location={sample}", "!", "decodebin", "!", "videoconvert", "!",
                        "video/x-raw,format=NV12", "!", "filesink", f"location={nv12}"],
                       capture_output=True, text=True, timeout=300)
    size = os.path.getsize(nv12) if os.path.exists(nv12) else 0
    if r.returncode != 0 or size != FRAMES * W * H * 3 // 2:
        fail(f"gst-launch-1.0 exited {r.returncode}, {size} bytes of NV12: {r.stderr[-1000:]}")
    peer = os.path.join(ROOT, "tests", "kernels", "peer_torch.py")
    env = dict(os.environ, ZCP_PEER_DEVICE="cpu")
    r = subprocess.run([py, peer, "check", model, nv12, str(W), str(H), jsonl], capture_output=True, text=True,
                       timeout=1800, env=env)
    print(r.stdout.strip())
    if what == "zcnet":
        want = f"{FRAMES} frames; top-5 classes equal and probabilities within 1e-4 in {FRAMES},"
    else:
        want = f"{FRAMES} frames; detections equal"
    if r.returncode != 0 or want not in r.stdout or f"motion (moving cells and bbox) equal in {FRAMES}" \
            not in r.stdout:
        fail(f"the peer disagrees with zcpipe (exit {r.returncode}): {r.stdout[-1500:]} {r.stderr[-1500:]}")
    print(f"ok zcpipe (cpu backend, {what}) and the PyTorch peer agree on all {FRAMES} frames of the sample")


if __name__ == "__main__":
    main()
