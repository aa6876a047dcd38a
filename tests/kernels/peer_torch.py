#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The PyTorch peer of zcpipe's GPU stage (issue 15): the same per-frame work, on the GPU.

    peer_torch.py time  WEIGHTS FRAMES.nv12 W H ITER [CELL THRESHOLD ALPHA]
    peer_torch.py check WEIGHTS FRAMES.nv12 W H ZCPIPE.jsonl [CELL THRESHOLD ALPHA]

FRAMES.nv12 holds whole NV12 frames of W x H back to back. The work per frame is what
zcpipe's GPU stage does between submit and results visible (DESIGN.md section 4): from an NV12
frame in pinned host memory to the top-5 (class, probability) and the motion results (moving
cells, bounding box) in pinned host memory: the frame copied to the GPU (non-blocking, from
pinned memory), the model input (BT.601 limited RGB of each pixel with its 2x2 block's chroma,
bilinear resize with interpolate(align_corners=False)'s indices and weights, only the pixels the
resize reads converted; mean/std normalisation), zcnet read from the .safetensors file itself
(3x3 convolutions + bias + ReLU, global average pool, fc, softmax), the top-5, the motion grid
(integer mean luma per CELL x CELL cell, edge cells smaller), moving = |mean - background| >
THRESHOLD, background += ALPHA * (mean - background), count and bounding box in pixels, and the
results copied back. TF32 is off (fp32 throughout, as zcpipe); cudnn.benchmark picks the fastest
convolution.

time: the frames rotate over 8 pinned buffers (as zcpipe's 8 slots); for each way PyTorch users
run such a pipeline, the host-observed latency of one frame (launch to results on the host),
median and p99 over ITER frames after a warm-up:
    eager      plain PyTorch calls, then a stream synchronize;
    graph      the whole frame captured in a CUDA graph, one per buffer (torch.cuda.CUDAGraph);
    compile    torch.compile (default mode: inductor's fused kernels; its own CUDA graphs off) of the
               work, captured the same way (skipped with its reason where it cannot run);
and `net` (the network alone on a device tensor, CUDA graph) for the kernels' share.

check: runs the frames in order through the eager path (the background starts from frame 0)
and compares each with zcpipe's JSON line of the same seq: top-5 classes in the same order,
probabilities within 1e-4 relative, moving cells and bounding box equal. Prints the counts;
exit 1 when any frame differs.
"""
import json
import os
import statistics
import struct
import sys
import time

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SLOTS = 8
K = 5


def load_weights(path, torch, dev):
    import numpy as np

    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {}) or {}
    t = {}
    for name, d in header.items():
        if d["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {d['dtype']}, expected F32")
        a, b = d["data_offsets"]
        t[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype="<f4").copy().reshape(d["shape"])).to(dev)
    convs = 0
    while f"conv{convs}.weight" in t:
        convs += 1
    strides = [int(meta.get(f"conv{i}.stride", meta.get("stride", "2"))) for i in range(convs)]
    in_w = int(meta.get("input_width", 224))
    in_h = int(meta.get("input_height", 224))
    return t, strides, in_w, in_h


class Peer:
    def __init__(self, torch, weights, w, h, cell, thr, alpha, dev):
        import torch.nn.functional as F

        self.torch, self.F, self.dev = torch, F, dev
        self.T, self.strides, self.in_w, self.in_h = load_weights(weights, torch, dev)
        self.w, self.h, self.cell, self.thr, self.alpha = w, h, cell, thr, alpha
        self.mean = torch.tensor(MEAN, device=dev).view(3, 1, 1)
        self.std = torch.tensor(STD, device=dev).view(3, 1, 1)
        x0, x1, lx0, lx1 = self.src_index(self.in_w, w)
        y0, y1, ly0, ly1 = self.src_index(self.in_h, h)
        self.ix = [(i, i // 2) for i in (x0, x1)]
        self.iy = [(i, i // 2) for i in (y0, y1)]
        self.lx0, self.lx1, self.ly0, self.ly1 = lx0, lx1, ly0.view(-1, 1), ly1.view(-1, 1)
        self.gw, self.gh = (w + cell - 1) // cell, (h + cell - 1) // cell
        self.gx = torch.arange(self.gw, device=dev).view(1, -1).expand(self.gh, self.gw)
        self.gy = torch.arange(self.gh, device=dev).view(-1, 1).expand(self.gh, self.gw)
        self.bg = torch.zeros(self.gh, self.gw, device=dev)
        self.first = torch.ones((), device=dev)

    def src_index(self, out, size):
        torch = self.torch
        scale = size / out
        src = ((torch.arange(out, dtype=torch.float32, device=self.dev) + 0.5) * scale - 0.5).clamp_(min=0.0)
        i0 = src.long().clamp_(max=size - 1)
        i1 = torch.where(i0 < size - 1, i0 + 1, i0)
        l1 = src - i0.float()
        return i0, i1, 1.0 - l1, l1

    def net(self, x):
        F = self.F
        for i, s in enumerate(self.strides):
            x = F.relu(F.conv2d(x, self.T[f"conv{i}.weight"], self.T[f"conv{i}.bias"], stride=s, padding=1))
        x = x.mean((2, 3))
        return self.torch.softmax(F.linear(x, self.T["fc.weight"], self.T["fc.bias"]), 1)[0]

    def work(self, d):
        """d: the NV12 frame on the GPU (uint8). Returns a float tensor: 5 probs, 5 classes, count, bbox."""
        torch, F, w, h = self.torch, self.F, self.w, self.h
        luma = d[: w * h].view(h, w)
        uv = d[w * h: w * h * 3 // 2].view(h // 2, w // 2, 2)

        def rgb_at(ys, xs):
            c = luma.index_select(0, ys[0]).index_select(1, xs[0]).float() - 16.0
            u = uv.index_select(0, ys[1]).index_select(1, xs[1])
            e = u[..., 1].float() - 128.0
            dd = u[..., 0].float() - 128.0
            r = 1.164 * c + 1.596 * e
            g = 1.164 * c - 0.392 * dd - 0.813 * e
            b = 1.164 * c + 2.017 * dd
            return torch.stack((r, g, b)).clamp_(0.0, 255.0)

        top = self.lx0 * rgb_at(self.iy[0], self.ix[0]) + self.lx1 * rgb_at(self.iy[0], self.ix[1])
        bot = self.lx0 * rgb_at(self.iy[1], self.ix[0]) + self.lx1 * rgb_at(self.iy[1], self.ix[1])
        x = self.ly0 * top + self.ly1 * bot
        x = ((x / 255.0 - self.mean) / self.std).unsqueeze(0)
        probs = self.net(x)
        p, c = torch.topk(probs, K)

        m = F.avg_pool2d(luma.float().view(1, 1, h, w), self.cell, ceil_mode=True)[0, 0].floor()
        diff = m - self.bg
        moving = (diff.abs() > self.thr) & (self.first == 0)
        upd = diff * self.alpha
        self.bg.copy_(torch.where(self.first > 0, m, self.bg + upd))
        self.first.zero_()
        n = moving.sum()
        big = self.gw + self.gh
        x0 = torch.where(moving, self.gx, big).min()
        y0 = torch.where(moving, self.gy, big).min()
        x1 = torch.where(moving, self.gx, -1).max()
        y1 = torch.where(moving, self.gy, -1).max()
        return torch.cat((p, c.float(), torch.stack((n, x0, y0, x1, y1)).float()))

    def decode(self, r):
        r = r.tolist()
        top = [(int(r[K + i]), r[i]) for i in range(K)]
        n = int(r[2 * K])
        if n == 0:
            return top, 0, None
        cx0, cy0, cx1, cy1 = (int(v) for v in r[2 * K + 1: 2 * K + 5])
        c = self.cell
        return top, n, [cx0 * c, cy0 * c, min((cx1 + 1) * c, self.w), min((cy1 + 1) * c, self.h)]


def read_frames(path, w, h, limit=None):
    size = w * h * 3 // 2
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // size
    if limit:
        n = min(n, limit)
    if n == 0:
        raise SystemExit(f"{path}: no whole {w}x{h} NV12 frame")
    return [data[i * size:(i + 1) * size] for i in range(n)]


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def time_mode(torch, peer, pinned, dframe, res, mode, iters):
    """Host-observed us per frame: launch -> results in pinned host memory."""
    stream = torch.cuda.Stream()
    fn = peer.work
    if mode == "compile":
        fn = torch.compile(peer.work, dynamic=False)
    graphs = []
    with torch.cuda.stream(stream):
        def once(i):
            dframe.copy_(pinned[i], non_blocking=True)
            res[i].copy_(fn(dframe), non_blocking=True)

        for i in range(3 * SLOTS):   # warm-up (and compilation)
            once(i % SLOTS)
        stream.synchronize()
        if mode in ("graph", "compile"):
            pool = None
            for i in range(SLOTS):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=stream, pool=pool):
                    once(i)
                pool = g.pool()
                graphs.append(g)
            for i in range(3 * SLOTS):
                graphs[i % SLOTS].replay()
            stream.synchronize()
        ts = []
        for it in range(iters):
            i = it % SLOTS
            t0 = time.perf_counter_ns()
            if graphs:
                graphs[i].replay()
            else:
                once(i)
            stream.synchronize()
            ts.append((time.perf_counter_ns() - t0) / 1e3)
    return ts


def time_net(torch, peer, iters):
    stream = torch.cuda.Stream()
    x = torch.randn(1, 3, peer.in_h, peer.in_w, device=peer.dev)
    with torch.cuda.stream(stream):
        for _ in range(10):
            peer.net(x)
        stream.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            y = peer.net(x)
        del y
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter_ns()
            g.replay()
            stream.synchronize()
            ts.append((time.perf_counter_ns() - t0) / 1e3)
    return ts


def main():
    if len(sys.argv) not in (7, 10) or sys.argv[1] not in ("time", "check"):
        raise SystemExit(__doc__)
    cmd, weights, frames_path = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        import torch
    except ImportError as e:
        print(f"SKIP no PyTorch for {sys.executable}: {e}")
        return 77
    # ZCP_PEER_DEVICE=cpu runs `check` on the CPU: the same semantics, checked where no GPU is.
    dev = torch.device(os.environ.get("ZCP_PEER_DEVICE", "cuda"))
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("SKIP torch.cuda.is_available() is False")
        return 77
    if dev.type != "cuda" and cmd != "check":
        raise SystemExit("time needs the GPU (ZCP_PEER_DEVICE=cpu is for check)")

    w, h = int(sys.argv[4]), int(sys.argv[5])
    cell, thr, alpha = (int(sys.argv[7]), float(sys.argv[8]), float(sys.argv[9])) if len(sys.argv) == 10 \
        else (16, 12.0, 0.05)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    peer = Peer(torch, weights, w, h, cell, thr, alpha, dev)
    print(f"torch {torch.__version__}, " + (f"{torch.cuda.get_device_name(0)}, cudnn {torch.backends.cudnn.version()}"
                                            if dev.type == "cuda" else "on the CPU"))

    with torch.inference_mode():
        if cmd == "check":
            return check(torch, peer, frames_path, sys.argv[6])
        iters = int(sys.argv[6])
        frames = read_frames(frames_path, w, h, SLOTS)
        pinned = [torch.frombuffer(bytearray(frames[i % len(frames)]), dtype=torch.uint8).pin_memory()
                  for i in range(SLOTS)]
        dframe = torch.empty(w * h * 3 // 2, dtype=torch.uint8, device=dev)
        res = torch.zeros(SLOTS, 2 * K + 5).pin_memory()
        print(f"peer {w}x{h}: launch -> top-5 and motion in pinned host memory, us per frame, {iters} frames "
              f"over {SLOTS} pinned buffers")
        print(f"{'mode':<9} {'p50':>8} {'p99':>8} {'min':>8}")
        for mode in ("eager", "graph", "compile"):
            peer.first.fill_(1.0)
            try:
                ts = time_mode(torch, peer, pinned, dframe, res, mode, iters)
            except Exception as e:   # torch.compile needs a working triton and compiler
                print(f"{mode:<9} skipped: {type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}")
                continue
            print(f"{mode:<9} {statistics.median(ts):8.1f} {pct(ts, 0.99):8.1f} {min(ts):8.1f}")
            top, n, box = peer.decode(res[(iters - 1) % SLOTS])
            print(f"          last frame: top-5 {[c for c, _ in top]}, moving cells {n}, bbox {box}")
        ts = time_net(torch, peer, iters)
        print(f"{'net':<9} {statistics.median(ts):8.1f} {pct(ts, 0.99):8.1f} {min(ts):8.1f}   "
              f"(the network alone on a device tensor, CUDA graph)")
    return 0


def check(torch, peer, frames_path, results_path):
    lines = {}
    with open(results_path) as f:
        for ln in f:
            o = json.loads(ln)
            lines[o["seq"]] = o
    frames = read_frames(frames_path, peer.w, peer.h)
    n = min(len(frames), len(lines))
    d = torch.empty(peer.w * peer.h * 3 // 2, dtype=torch.uint8, device=peer.dev)
    same_top = same_motion = 0
    worst = 0.0
    first_diff = None
    for seq in range(n):
        if seq not in lines:
            raise SystemExit(f"{results_path}: no line for seq {seq}")
        d.copy_(torch.frombuffer(bytearray(frames[seq]), dtype=torch.uint8))
        top, moving, box = peer.decode(peer.work(d).cpu())
        o = lines[seq]
        ztop = [(t["class"], t["prob"]) for t in o["topk"]][:K]
        classes_ok = [c for c, _ in top] == [c for c, _ in ztop]
        rel = max(abs(p - q) / max(abs(q), 1e-30) for (_, p), (_, q) in zip(top, ztop))
        worst = max(worst, rel)
        if classes_ok and rel <= 1e-4:
            same_top += 1
        zm = o["motion"]
        if zm["moving_cells"] == moving and (zm["bbox"] or None) == box:
            same_motion += 1
        elif first_diff is None:
            first_diff = f"seq {seq}: peer moving {moving} bbox {box}, zcpipe {zm['moving_cells']} {zm['bbox']}"
    print(f"peer vs zcpipe ({results_path}, {peer.w}x{peer.h}): {n} frames; top-5 classes equal and "
          f"probabilities within 1e-4 in {same_top}, worst relative difference {worst:.2e}; motion (moving cells "
          f"and bbox) equal in {same_motion}")
    if first_diff:
        print(f"first motion difference: {first_diff}")
    return 0 if same_top == n and same_motion == n else 1


if __name__ == "__main__":
    sys.exit(main())
