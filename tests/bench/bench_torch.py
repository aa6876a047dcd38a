#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch side of tests/bench/bench_cpu.c: the same zcnet on one CPU thread.

  bench_torch.py --probe
      prints "torch VERSION" (exit 0), or "SKIP reason" (exit 77) without torch.
  bench_torch.py WEIGHTS FRAME.nv12 WIDTH HEIGHT ITER [IN_W IN_H CELL]
      reads the .safetensors file itself (8-byte little-endian header length,
      JSON header, raw little-endian tensors; no safetensors package), then
      times, with torch.set_num_threads(1), warm-up first, under
      torch.inference_mode():
        net    zcnet on a 1x3xIN_HxIN_W tensor (the frame's, preprocessed);
        frame  the whole per-frame work as zcpipe's CPU backend does it:
               bilinear resize (interpolate's align_corners=False indices and
               weights) of the NV12 frame's RGB (BT.601 limited, chroma of the
               2x2 block; only the pixels the resize reads are converted),
               normalize, zcnet, softmax, top-5, and the motion grid (integer
               mean luma per CELL x CELL cell) with the background update.
      Prints "net MEDIAN_MS MIN_MS", "frame MEDIAN_MS MIN_MS", the frame's
      parts "preprocess ..." and "motion ..." alone, and
      "top5 CLASS PROB ..." (the frame's, to check it is the same network).
"""
import json
import statistics
import struct
import sys
import time

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def probe():
    try:
        import torch
    except ImportError as e:
        print(f"SKIP no PyTorch for {sys.executable}: {e}")
        sys.exit(77)
    print(f"torch {torch.__version__}")


def load_weights(path, torch):
    import numpy as np

    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, t in header.items():
        if t["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {t['dtype']}, expected F32")
        a, b = t["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype="<f4").copy().reshape(t["shape"])
        tensors[name] = torch.from_numpy(arr)
    convs = 0
    while f"conv{convs}.weight" in tensors:
        convs += 1
    strides = [int(meta.get(f"conv{i}.stride", meta.get("stride", "2"))) for i in range(convs)]
    return tensors, strides


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--probe":
        probe()
        return
    if len(sys.argv) not in (6, 9):
        raise SystemExit(__doc__)
    import torch
    import torch.nn.functional as F

    weights, frame_path, w, h, iters = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    in_w, in_h, cell = map(int, sys.argv[6:9]) if len(sys.argv) == 9 else (224, 224, 16)
    torch.set_num_threads(1)
    T, strides = load_weights(weights, torch)
    convs = len(strides)
    with open(frame_path, "rb") as f:
        raw = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
    luma = raw[: w * h].view(h, w)
    uv = raw[w * h: w * h * 3 // 2].view(h // 2, w // 2, 2)
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    state = {"bg": None}

    def net(x):
        for i in range(convs):
            x = F.relu(F.conv2d(x, T[f"conv{i}.weight"], T[f"conv{i}.bias"], stride=strides[i], padding=1))
        x = x.mean((2, 3))
        return torch.softmax(F.linear(x, T["fc.weight"], T["fc.bias"]), 1)[0]

    # Bilinear source indices and weights as interpolate(align_corners=False) computes them.
    def src_index(out, size):
        scale = size / out
        src = ((torch.arange(out, dtype=torch.float32) + 0.5) * scale - 0.5).clamp_(min=0.0)
        i0 = src.long().clamp_(max=size - 1)
        i1 = torch.where(i0 < size - 1, i0 + 1, i0)
        l1 = src - i0.float()
        return i0, i1, 1.0 - l1, l1

    x0, x1, lx0, lx1 = src_index(in_w, w)
    y0, y1, ly0, ly1 = src_index(in_h, h)
    # Each index with its chroma index, computed once per geometry.
    x0, x1, y0, y1 = ((i, i // 2) for i in (x0, x1, y0, y1))

    def rgb_at(ys, xs):
        """RGB (3, in_h, in_w) of the full-resolution pixels (ys x xs), only those."""
        c = luma.index_select(0, ys[0]).index_select(1, xs[0]).float() - 16.0
        u = uv.index_select(0, ys[1]).index_select(1, xs[1])
        d = u[..., 0].float() - 128.0
        e = u[..., 1].float() - 128.0
        r = 1.164 * c + 1.596 * e
        g = 1.164 * c - 0.392 * d - 0.813 * e
        b = 1.164 * c + 2.017 * d
        return torch.stack((r, g, b)).clamp_(0.0, 255.0)

    def preprocess():
        # The resize reads 4 pixels per output: convert those, not the whole frame.
        top = lx0 * rgb_at(y0, x0) + lx1 * rgb_at(y0, x1)
        bot = lx0 * rgb_at(y1, x0) + lx1 * rgb_at(y1, x1)
        x = ly0.view(-1, 1) * top + ly1.view(-1, 1) * bot
        return ((x / 255.0 - mean[0]) / std[0]).unsqueeze(0)

    def motion():
        sums = F.avg_pool2d(luma.float().view(1, 1, h, w), cell, ceil_mode=True)[0, 0]
        m = sums.floor()
        if state["bg"] is None:
            state["bg"] = m.clone()
            return 0, None
        t = m - state["bg"]
        moving = t.abs() > 12.0
        state["bg"] += 0.05 * t
        idx = moving.nonzero()
        if idx.numel() == 0:
            return 0, None
        return int(idx.shape[0]), (idx.min(0).values, idx.max(0).values)

    def frame():
        probs = net(preprocess())
        top = torch.topk(probs, 5)
        motion()
        return top

    with torch.inference_mode():
        x = preprocess()
        for _ in range(10):
            net(x)
            frame()
        times = {"net": [], "frame": [], "preprocess": [], "motion": []}
        for _ in range(iters):
            t0 = time.perf_counter()
            net(x)
            t1 = time.perf_counter()
            top = frame()
            t2 = time.perf_counter()
            preprocess()
            t3 = time.perf_counter()
            motion()
            t4 = time.perf_counter()
            times["net"].append((t1 - t0) * 1e3)
            times["frame"].append((t2 - t1) * 1e3)
            times["preprocess"].append((t3 - t2) * 1e3)
            times["motion"].append((t4 - t3) * 1e3)
    for k, v in times.items():
        print(f"{k} {statistics.median(v):.4f} {min(v):.4f}")
    print("top5 " + " ".join(f"{int(c)} {float(p):.9g}" for p, c in zip(top.values, top.indices)))


if __name__ == "__main__":
    main()
