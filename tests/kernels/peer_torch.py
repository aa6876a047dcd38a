#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The PyTorch peer of zcpipe: the same per-frame work, written independently in PyTorch.

    peer_torch.py check MODEL FRAMES.nv12 W H ZCPIPE.jsonl [OPTIONS]
    peer_torch.py time  MODEL FRAMES.nv12 W H ITER [OPTIONS]
    peer_torch.py cpu   MODEL FRAMES.nv12 W H [FRAMES.nv12 W H ...] [--threads 1,2] [--frames N] [OPTIONS]
    peer_torch.py graph MODEL.json INPUT.f32 [OUTPREFIX] [--ref PREFIX]

MODEL is what zcpipe's `model:` names: zcnet's .safetensors (its tensors read here: 3x3 convolutions
+ bias + ReLU, global average pool, fc, softmax, top-5), or a TensorFlow.js graph model (model.json
beside its weight shards: float32, int32, and quantization float16, uint8, uint16 with
v = q * scale + min in float64, stored float32). A graph model is executed node by node with torch
ops, whatever the network (nothing here names a layer): Placeholder, Const, Identity, Conv2D,
_FusedConv2D, DepthwiseConv2dNative, FusedDepthwiseConv2dNative (NHWC, SAME / VALID / EXPLICIT
padding, dilations; fused BiasAdd then Relu, Relu6, Sigmoid, Elu, LeakyRelu or Prelu), Add, AddV2,
Sub, Mul, RealDiv, Maximum, Minimum (broadcasting), Relu, Relu6, Sigmoid, Tanh, LeakyRelu, Mean,
ResizeBilinear (TensorFlow's indices: align_corners, half_pixel_centers, neither), ConcatV2,
MaxPool, Softmax, and what a decode tail uses: TopKV2 (sorted, ties to the lower index), GatherV2,
StridedSlice, FloorDiv, FloorMod, Cast, Equal, ExpandDims, Squeeze, Reshape. Anything else is
refused at load, naming the node. Rank-4 tensors are held NCHW inside (faster convolutions); every
op computes what it computes on the NHWC tensor.

The head follows from the graph: an output computed from a TopKV2 is a detector's candidates
(rows x0, y0, x1, y1, score, class in input pixels, best first, as CenterNet's decode tail gives
them); an output that is a Softmax is a classifier's probabilities (top-5).

The per-frame work is zcpipe's (DESIGN.md sections 4 and 7): an NV12 frame W x H -> RGB by BT.601
limited range, each pixel with its 2x2 block's chroma (only the pixels the resize reads) ->
bilinear resize with interpolate(align_corners=False)'s indices and weights (half-pixel, no
antialias) into the model input's region (stretch: all of it; letterbox: the frame's aspect,
centred, black elsewhere) -> pixel scale (unit: / 255; byte: 0..255 as is) -> (v - mean) / std ->
the network -> for a detector: its candidates; score >= min_score and class in the filter; boxes
to frame pixels ((b - off) * scale, clamped to the frame); per-class greedy NMS (a box is dropped
when its IoU with a kept box of its class is over nms_iou); at most max_detections; for a
classifier: the top-5. Beside it the motion grid (integer mean luma per CELL x CELL cell, edge
cells smaller), moving = |mean - background| > THRESHOLD, background += ALPHA * (mean -
background) (the first frame sets it), count and bounding box in pixels. All of it runs on the
device with no host sync (a CUDA graph holds a whole frame): the NMS as a few whole-matrix steps
that provably give greedy NMS's answer once they settle, checked each frame (the host redoes the
NMS in the rare frame where they have not); the detections, top-5 and motion then come to the
host.

Modes:
  check  the frames in order (the background starts from frame 0) against zcpipe's JSON line of the
         same seq. Classifier: top-5 classes in the same order, probabilities within 1e-4 relative.
         Detector ("detections":[{"class","id","score","box":[x0,y0,x1,y1]}, ...] in frame pixels):
         the same detections, matched one to one: same class id, box IoU >= 0.95, score within 1e-3;
         a detection without a match whose score is within 1e-3 of min_score is counted apart (the
         threshold may fall either way on it). Motion: moving cells and bounding box equal. Prints
         the counts; exit 1 when a frame differs. ZCP_PEER_DEVICE=cpu runs it on the CPU.
  time   on CUDA (fp32, TF32 off as zcpipe computes fp32; cudnn.benchmark): the frames rotate over 8
         pinned buffers (zcpipe's 8 slots); host-observed latency of one frame, from launch to the
         results on the host, median and p99 over ITER
         frames after a warm-up, for each way PyTorch users run it:
             eager    plain calls, then a stream synchronize;
             graph    the frame's GPU work captured in a CUDA graph, one per pinned buffer;
             compile  torch.compile (inductor, its own CUDA graphs off) of the same work, captured the
                      same way (skipped with its reason where it cannot run);
             graph-cl, compile-cl  the same with the network channels-last (cuDNN's NHWC kernels);
         then `best` (the lowest median: PyTorch's best) and `net`: the network alone on a device tensor
         (CUDA graph).
  cpu    on the CPU: frames/s of the whole per-frame work with torch.set_num_threads(N) for each N
         of --threads (default 1,2), for each frames file and size given, the network NCHW and
         channels-last (the better is PyTorch's best); a table, with the process's CPU time per
         frame (on a shared machine, one thread's CPU time is the steadier figure).
  graph  the TF.js graph alone on an NHWC float32 input: writes each output to
         OUTPREFIX.<name>.f32 (non-alphanumerics as '_'), and with --ref PREFIX compares with files
         of the same names (TensorFlow.js's, say): the max abs difference per output; exit 1 when a
         value before the decode differs by more than 1e-3 (relative to values over 1: the float32
         sums of a deep network differ by some 1e-5 of the value between implementations) or a
         decoded row differs (class, score by 1e-3, box by 0.05 px).

OPTIONS (zcpipe's model.* and motion.* keys; defaults: the model's own, as zcpipe's):
  --pixels unit|byte   --mean R,G,B   --std R,G,B   --resize stretch|letterbox
                       (zcnet: unit, 0.485,0.456,0.406, 0.229,0.224,0.225; TF.js: byte, 0,0,0, 1,1,1;
                       stretch)
  --min-score S (0.3)  --nms-iou T (0.5)  --max-detections N (20)  --classes person,car,... (labels
                       or class ids; default all)  --labels FILE (default: labels.txt beside model.json)
  --cell N (16)  --threshold T (12)  --alpha A (0.05)
Needs python3, torch and numpy only (Debian's python3-torch 1.13 runs check, cpu and graph).
"""
import argparse
import base64
import json
import math
import os
import statistics
import struct
import sys
import time

import numpy as np

SLOTS = 8
K = 5
NMS_STEPS = 4   # device NMS iterations before the check that it settled (Peer.detect)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
torch = None   # imported in main(): a missing PyTorch is a skip, not a crash
F = None


class Refused(Exception):
    """A model the peer does not run, with the reason (file, node, op)."""


# ------------------------------------------------------------------------------------------ zcnet

class Zcnet:
    """zcnet from its .safetensors: NCHW input [1, 3, in_h, in_w] -> probabilities [classes]."""
    kind = "classify"
    pixels, mean, std = "unit", IMAGENET_MEAN, IMAGENET_STD
    labels = None

    def __init__(self, path, dev):
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        meta = header.pop("__metadata__", {}) or {}
        t = {}
        for name, d in header.items():
            if d["dtype"] != "F32":
                raise Refused(f"{path}: {name} is {d['dtype']}, expected F32")
            a, b = d["data_offsets"]
            t[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype="<f4").copy().reshape(d["shape"])).to(dev)
        convs = 0
        while f"conv{convs}.weight" in t:
            convs += 1
        self.T = t
        self.strides = [int(meta.get(f"conv{i}.stride", meta.get("stride", "2"))) for i in range(convs)]
        self.in_w = int(meta.get("input_width", 224))
        self.in_h = int(meta.get("input_height", 224))
        self.classes = t["fc.weight"].shape[0]

    def memory_format(self, fmt):
        for i in range(len(self.strides)):
            self.T[f"conv{i}.weight"] = self.T[f"conv{i}.weight"].contiguous(memory_format=fmt)

    def forward(self, x):
        for i, s in enumerate(self.strides):
            x = F.relu(F.conv2d(x, self.T[f"conv{i}.weight"], self.T[f"conv{i}.bias"], stride=s, padding=1))
        x = x.mean((2, 3))
        return torch.softmax(F.linear(x, self.T["fc.weight"], self.T["fc.bias"]), 1)[0]


# ------------------------------------------------------------------------------- TF.js graph models

DTYPES = {"DT_FLOAT": "float32", "DT_INT32": "int32", "DT_BOOL": "bool", "DT_INT64": "int64"}
NHWC_TO_NCHW = (0, 2, 3, 1)   # TF axis a of an NHWC tensor is dim NHWC_TO_NCHW[a] of the NCHW one


class V:
    """A value in the graph: tensor t; nchw: t is a rank-4 NHWC value held as NCHW."""
    __slots__ = ("t", "nchw")

    def __init__(self, t, nchw=False):
        self.t, self.nchw = t, nchw

    def tf(self):
        """The tensor in TensorFlow's own layout."""
        return self.t.permute(0, 2, 3, 1) if self.nchw else self.t

    def as_nchw(self):
        """As NCHW: a rank-4 NHWC tensor permuted; anything of lower rank padded to 4 first, so that it
        broadcasts against NCHW tensors as it did against NHWC ones."""
        if self.nchw:
            return self.t
        t = self.t
        if t.dim() > 4:
            raise RuntimeError(f"rank {t.dim()} against an image tensor")
        if t.numel() == 1:
            return t.reshape(())
        return t.reshape((1,) * (4 - t.dim()) + tuple(t.shape)).permute(0, 3, 1, 2)


def attr(node, key, default=None):
    """A node attribute as Python: int, float, bool, str (base64-decoded), or a list of those."""
    a = node.get("attr", {}).get(key)
    if a is None:
        return default
    if "list" in a:
        lst = a["list"]
        if "i" in lst:
            return [int(v) for v in lst["i"]]
        if "f" in lst:
            return [float(v) for v in lst["f"]]
        if "s" in lst:
            return [base64.b64decode(v).decode() for v in lst["s"]]
        return []
    if "i" in a:
        return int(a["i"])
    if "f" in a:
        return float(a["f"])
    if "b" in a:
        return bool(a["b"])
    if "s" in a:
        return base64.b64decode(a["s"]).decode()
    if "type" in a:
        return a["type"]
    return default


def split_ref(ref):
    """'name:port' -> (name, port); 'name' -> (name, 0)."""
    name, _, port = ref.partition(":")
    return name, int(port) if port else 0


def read_weights(path, manifest):
    """The weights of every group, by name, as numpy arrays (float32 or int32)."""
    base = os.path.dirname(path)
    out = {}
    for group in manifest:
        buf = b"".join(open(os.path.join(base, p), "rb").read() for p in group["paths"])
        off = 0
        for w in group["weights"]:
            name, dtype, shape = w["name"], w["dtype"], [int(d) for d in w["shape"]]
            n = int(np.prod(shape, dtype=np.int64))
            q = w.get("quantization")
            if dtype not in ("float32", "int32"):
                raise Refused(f"{path}: weight '{name}': dtype {dtype} not supported (float32, int32)")
            if q is not None and q.get("dtype") not in ("float16", "uint8", "uint16"):
                raise Refused(f"{path}: weight '{name}': quantization {q.get('dtype')} not supported (float16, uint8, "
                              f"uint16)")
            size = 4 if q is None else 1 if q["dtype"] == "uint8" else 2
            if off + size * n > len(buf):
                raise Refused(f"{path}: weight '{name}' lies past the end of the shards {group['paths']} "
                              f"({len(buf)} bytes)")
            if q is None:
                a = np.frombuffer(buf, dtype="<f4" if dtype == "float32" else "<i4", count=n, offset=off)
                off += 4 * n
            elif q["dtype"] == "float16":
                a = np.frombuffer(buf, dtype="<f2", count=n, offset=off).astype(np.float64)
                off += 2 * n
            else:
                raw = np.frombuffer(buf, dtype="<u1" if size == 1 else "<u2", count=n, offset=off)
                a = raw.astype(np.float64) * float(q["scale"]) + float(q["min"])   # TF.js: in doubles
                off += size * n
            if dtype == "int32":
                a = np.floor(a + 0.5).astype(np.int32) if a.dtype == np.float64 else a.astype(np.int32)
            else:
                a = a.astype(np.float32)
            out[name] = a.reshape(shape)
    return out


def same_pads(size, k, s, d, mode, explicit):
    """TensorFlow's padding of one axis: (before, after)."""
    ek = (k - 1) * d + 1
    if mode == "SAME":
        out = -(-size // s)
        total = max((out - 1) * s + ek - size, 0)
        return total // 2, total - total // 2
    if mode == "VALID":
        return 0, 0
    if mode == "EXPLICIT":
        return explicit
    raise ValueError(f"padding {mode}")


def resize_axis(out, size, align_corners, half_pixel):
    """TensorFlow's bilinear source indices and fractions of one axis, in float32 as plan.h spells them."""
    f32 = np.float32
    if align_corners:
        scale = f32(size - 1) / f32(out - 1) if out > 1 else f32(0)
    else:
        scale = f32(size) / f32(out)
    o = np.arange(out, dtype=np.float32)
    if half_pixel:
        src = np.maximum((o + f32(0.5)) * scale - f32(0.5), f32(0))
    else:
        src = o * scale
    fl = np.floor(src)
    lo = np.clip(fl.astype(np.int64), 0, size - 1)
    hi = np.minimum(lo + 1, size - 1)
    return lo, hi, (src - fl).astype(np.float32)


def topk_low_first(x, k):
    """TopKV2 on the last axis: values descending, ties to the lower index, as TensorFlow orders them.
    torch.topk's order among equal values is unspecified, so it runs on int64 keys: the value's bits
    made monotonic in the high word, the index reversed in the low word."""
    n = x.shape[-1]
    if x.dtype == torch.float32:
        b = (x + 0.0).contiguous().view(torch.int32)   # + 0.0: -0 becomes +0 (equal values, equal keys)
        ordered = torch.where(b >= 0, b, b ^ 0x7fffffff)
    elif x.dtype == torch.int32:
        ordered = x
    else:
        raise RuntimeError(f"TopKV2 of {x.dtype}")
    rev = torch.arange(n - 1, -1, -1, dtype=torch.int64, device=x.device)
    key = ordered.to(torch.int64) * (1 << 32) + rev
    _, idx = torch.topk(key, k, dim=-1, sorted=True)
    return torch.gather(x, -1, idx), idx.to(torch.int32)


def act_fn(name, node, alpha_arg=None):
    """A fused activation by TensorFlow's name; KeyError for one the peer does not know."""
    if name in (None, "", "Identity"):
        return None
    if name == "Relu":
        return torch.relu
    if name == "Relu6":
        return lambda y: torch.clamp(y, 0.0, 6.0)
    if name == "Sigmoid":
        return torch.sigmoid
    if name == "Elu":
        return F.elu
    if name == "LeakyRelu":
        a = attr(node, "leakyrelu_alpha", attr(node, "alpha", 0.2))
        return lambda y: F.leaky_relu(y, a)
    if name == "Prelu" and alpha_arg is not None:
        return lambda y: torch.where(y >= 0, y, y * alpha_arg)
    raise KeyError(name)


def elementwise_ops():
    """TensorFlow's elementwise ops as torch functions: (binary, unary)."""
    binary = {"Add": torch.add, "AddV2": torch.add, "Sub": torch.sub, "Mul": torch.mul, "RealDiv": torch.div,
              "Maximum": torch.maximum, "Minimum": torch.minimum, "Equal": torch.eq,
              "FloorDiv": lambda a, b: torch.div(a, b, rounding_mode="floor"), "FloorMod": torch.remainder}
    unary = {"Relu": torch.relu, "Relu6": lambda y: torch.clamp(y, 0.0, 6.0), "Sigmoid": torch.sigmoid,
             "Tanh": torch.tanh, "Identity": lambda y: y}
    return binary, unary


class TfjsGraph:
    """A TF.js graph model, executed node by node: run(x, outputs) -> [V]. Refused at load: an op or attribute
    outside the set above, naming the node."""

    def __init__(self, path, dev):
        self.path, self.dev = path, dev
        with open(path) as f:
            m = json.load(f)
        if m.get("format") not in (None, "graph-model") or "modelTopology" not in m:
            raise Refused(f"{path}: not a TF.js graph model (format {m.get('format')})")
        self.nodes = {n["name"]: n for n in m["modelTopology"].get("node", [])}
        weights = read_weights(path, m.get("weightsManifest", []))
        self.consts = {}
        for name, n in self.nodes.items():
            n["_in"] = [split_ref(r) for r in n.get("input", []) if not r.startswith("^")]
            if n["op"] == "Const":
                if name not in weights:
                    raise Refused(f"{path}: node '{name}' (Const): no weight of that name in the manifest")
                self.consts[name] = weights[name]
        self.inputs = [n for n, v in self.nodes.items() if v["op"] == "Placeholder"]
        if len(self.inputs) != 1:
            raise Refused(f"{path}: {len(self.inputs)} Placeholder nodes; the peer feeds one image")
        dims = self._placeholder_dims(self.nodes[self.inputs[0]])
        if len(dims) != 4 or dims[3] != 3 or dims[1] < 1 or dims[2] < 1:
            raise Refused(f"{path}: node '{self.inputs[0]}' (Placeholder): shape {dims}, the peer feeds "
                          f"[1, h, w, 3] (NHWC RGB)")
        self.in_h, self.in_w = dims[1], dims[2]
        sig = (m.get("signature") or {}).get("outputs") or {}
        if sig:
            self.outputs = [split_ref(v.get("name", k)) for k, v in sig.items()]
        else:
            used = {r[0] for n in self.nodes.values() for r in n["_in"]}
            self.outputs = [(n, 0) for n, v in self.nodes.items() if n not in used and v["op"] != "Const"]
        for o, _ in self.outputs:
            if o not in self.nodes:
                raise Refused(f"{path}: output '{o}' is no node of the graph")
        self.tensors = {n: torch.from_numpy(np.ascontiguousarray(a)).to(dev) for n, a in self.consts.items()}
        self.runners = {}
        self.plans = {}
        self.conv_weights = []
        binary, unary = elementwise_ops()
        for name in self.order([o for o, _ in self.outputs]):
            n = self.nodes[name]
            if n["op"] in ("Const", "Placeholder"):
                continue
            if n["op"] in binary:
                self.runners[name] = self._binary(binary[n["op"]])
            elif n["op"] in unary:
                self.runners[name] = self._unary(unary[n["op"]])
            elif hasattr(self, "op_" + n["op"]):
                self.runners[name] = getattr(self, "op_" + n["op"])(n)
            else:
                raise Refused(f"{path}: node '{name}' ({n['op']}): op not supported by the peer")

    @staticmethod
    def _placeholder_dims(n):
        shape = n.get("attr", {}).get("shape", {}).get("shape", {})
        return [int(d.get("size", -1)) for d in shape.get("dim", [])]

    def order(self, outs):
        """The nodes the outputs need, each after its inputs."""
        seen, order = set(), []
        for o in outs:
            stack = [(o, False)]
            while stack:
                name, done = stack.pop()
                if done:
                    order.append(name)
                    continue
                if name in seen:
                    continue
                if name not in self.nodes:
                    raise Refused(f"{self.path}: input '{name}' is no node of the graph")
                seen.add(name)
                stack.append((name, True))
                for r, _ in reversed(self.nodes[name]["_in"]):
                    if r not in seen:
                        stack.append((r, False))
        return order

    def err(self, n, msg):
        return Refused(f"{self.path}: node '{n['name']}' ({n['op']}): {msg}")

    def const(self, n, i):
        """Input i of node n as the numpy value of a Const (through Identity nodes)."""
        if i >= len(n["_in"]):
            raise self.err(n, f"{len(n['_in'])} inputs, input {i} expected")
        name = n["_in"][i][0]
        while self.nodes[name]["op"] == "Identity":
            name = self.nodes[name]["_in"][0][0]
        if name not in self.consts:
            raise self.err(n, f"input {i} ('{name}') is not a constant")
        return self.consts[name]

    def plan(self, outs):
        """Steps to compute `outs`: (name, runner, input refs, names whose last use it is)."""
        key = tuple(outs)
        if key not in self.plans:
            order = [n for n in self.order([o for o, _ in outs]) if n in self.runners]
            last = {}
            for i, name in enumerate(order):
                for r, _ in self.nodes[name]["_in"]:
                    last[r] = i
            keep = {o for o, _ in outs}
            steps = []
            for i, name in enumerate(order):
                free = [r for r, _ in set(self.nodes[name]["_in"]) if last.get(r) == i and r in self.runners
                        and r not in keep]
                steps.append((name, self.runners[name], self.nodes[name]["_in"], free))
            self.plans[key] = steps
        return self.plans[key]

    def run(self, x, outs=None):
        """x: the input, NCHW [1, 3, h, w] float32 on the device. Returns the outputs' values."""
        outs = outs or self.outputs
        vals = {self.inputs[0]: [V(x, True)]}
        consts = self.tensors
        for name, fn, ins, free in self.plan(outs):
            args = [vals[r][p] if r in vals else V(consts[r]) for r, p in ins]
            vals[name] = fn(args)
            for r in free:
                del vals[r]
        return [vals[o][p] if o in vals else V(consts[o]) for o, p in outs]

    def ancestors(self, name):
        return {self.nodes[a]["op"] for a in self.order([name])}

    # ---- convolution and pooling (NCHW inside)

    def _conv(self, n, depthwise, fused):
        w = self.const(n, 1)
        if attr(n, "data_format", "NHWC") != "NHWC":
            raise self.err(n, "data_format is not NHWC")
        kh, kw = w.shape[0], w.shape[1]
        if depthwise:
            cin, mult = w.shape[2], w.shape[3]
            wt = np.ascontiguousarray(w.transpose(2, 3, 0, 1).reshape(cin * mult, 1, kh, kw))
        else:
            wt = np.ascontiguousarray(w.transpose(3, 2, 0, 1))
        wt = {"w": torch.from_numpy(wt).to(self.dev)}
        self.conv_weights.append(wt)
        st = attr(n, "strides", [1, 1, 1, 1])
        dil = attr(n, "dilations", [1, 1, 1, 1])
        mode = attr(n, "padding", "VALID")
        ex = attr(n, "explicit_paddings", []) or [0] * 8
        if mode not in ("SAME", "VALID", "EXPLICIT") or len(st) != 4 or len(dil) != 4:
            raise self.err(n, f"padding {mode}, strides {st}, dilations {dil}")
        ops = fused or []
        bias, act = None, None
        if ops:
            if ops[0] != "BiasAdd" or len(ops) > 2:
                raise self.err(n, f"fused_ops {ops} (BiasAdd, then one activation)")
            bias = torch.from_numpy(np.ascontiguousarray(self.const(n, 2))).to(self.dev)
            alpha = None
            if len(ops) == 2 and ops[1] == "Prelu":
                alpha = torch.from_numpy(np.ascontiguousarray(self.const(n, 3))).to(self.dev).view(1, -1, 1, 1)
            try:
                act = act_fn(ops[1] if len(ops) == 2 else None, n, alpha)
            except KeyError:
                raise self.err(n, f"fused activation {ops[1]}") from None
        cache = {}

        def run(a):
            x = a[0].as_nchw()
            if "pad" not in cache:
                groups = x.shape[1] if depthwise else x.shape[1] // w.shape[2]
                pt, pb = same_pads(x.shape[2], kh, st[1], dil[1], mode, (ex[2], ex[3]))
                pl, pr = same_pads(x.shape[3], kw, st[2], dil[2], mode, (ex[4], ex[5]))
                cache["pad"] = (pt, pb, pl, pr, groups)
            pt, pb, pl, pr, groups = cache["pad"]
            if pt == pb and pl == pr:
                y = F.conv2d(x, wt["w"], bias, (st[1], st[2]), (pt, pl), (dil[1], dil[2]), groups)
            else:
                y = F.conv2d(F.pad(x, (pl, pr, pt, pb)), wt["w"], bias, (st[1], st[2]), 0, (dil[1], dil[2]), groups)
            return [V(act(y) if act else y, True)]
        return run

    def op_Conv2D(self, n):
        return self._conv(n, False, None)

    def op__FusedConv2D(self, n):
        return self._conv(n, False, attr(n, "fused_ops", []))

    def op_DepthwiseConv2dNative(self, n):
        return self._conv(n, True, None)

    def op_FusedDepthwiseConv2dNative(self, n):
        return self._conv(n, True, attr(n, "fused_ops", []))

    def op_MaxPool(self, n):
        ks, st = attr(n, "ksize", []), attr(n, "strides", [])
        mode = attr(n, "padding", "VALID")
        if attr(n, "data_format", "NHWC") != "NHWC" or len(ks) != 4 or len(st) != 4 or ks[0] != 1 or ks[3] != 1 \
                or mode not in ("SAME", "VALID", "EXPLICIT"):
            raise self.err(n, f"ksize {ks}, strides {st}, padding {mode}")
        ex = attr(n, "explicit_paddings", []) or [0] * 8
        cache = {}

        def run(a):
            x = a[0].as_nchw()
            if "pad" not in cache:
                cache["pad"] = (same_pads(x.shape[2], ks[1], st[1], 1, mode, (ex[2], ex[3])) +
                                same_pads(x.shape[3], ks[2], st[2], 1, mode, (ex[4], ex[5])))
            pt, pb, pl, pr = cache["pad"]
            if pt == pb and pl == pr and pt <= ks[1] // 2 and pl <= ks[2] // 2:
                y = F.max_pool2d(x, (ks[1], ks[2]), (st[1], st[2]), (pt, pl))   # implicit -inf padding
            else:
                y = F.max_pool2d(F.pad(x, (pl, pr, pt, pb), value=-math.inf), (ks[1], ks[2]), (st[1], st[2]))
            return [V(y, True)]
        return run

    def op_ResizeBilinear(self, n):
        size = [int(v) for v in self.const(n, 1).reshape(-1)]
        ac, hp = attr(n, "align_corners", False), attr(n, "half_pixel_centers", False)
        cache = {}

        def run(a):
            x = a[0].as_nchw()
            if "ix" not in cache:
                dev = x.device
                y0, y1, fy = resize_axis(size[0], x.shape[2], ac, hp)
                x0, x1, fx = resize_axis(size[1], x.shape[3], ac, hp)
                cache["ix"] = [torch.from_numpy(v).to(dev) for v in (y0, y1, x0, x1)]
                cache["f"] = (torch.from_numpy(fy).to(dev).view(-1, 1), torch.from_numpy(fx).to(dev))
            y0, y1, x0, x1 = cache["ix"]
            fy, fx = cache["f"]
            r0, r1 = x.index_select(2, y0), x.index_select(2, y1)
            tl, tr = r0.index_select(3, x0), r0.index_select(3, x1)
            bl, br = r1.index_select(3, x0), r1.index_select(3, x1)
            top = tl + (tr - tl) * fx
            bottom = bl + (br - bl) * fx
            return [V(top + (bottom - top) * fy, True)]
        return run

    # ---- elementwise

    @staticmethod
    def _binary(fn):
        """TensorFlow's broadcasting: against an NCHW-held tensor the other operand goes NCHW too."""
        def run(a):
            x, y = a
            if x.nchw or y.nchw:
                return [V(fn(x.as_nchw(), y.as_nchw()), True)]
            return [V(fn(x.t, y.t))]
        return run

    @staticmethod
    def _unary(fn):
        return lambda a: [V(fn(a[0].t), a[0].nchw)]

    def op_LeakyRelu(self, n):
        alpha = attr(n, "alpha", 0.2)
        return lambda a: [V(F.leaky_relu(a[0].t, alpha), a[0].nchw)]

    def op_Cast(self, n):
        dst = DTYPES.get(attr(n, "DstT"))
        if dst is None:
            raise self.err(n, f"DstT {attr(n, 'DstT')}")
        dt = getattr(torch, dst)
        return lambda a: [V(a[0].t.to(dt), a[0].nchw)]

    # ---- reductions and shapes

    def op_Mean(self, n):
        axes = [int(v) for v in np.array(self.const(n, 1)).reshape(-1)]
        keep = attr(n, "keep_dims", attr(n, "keepDims", False))

        def run(a):
            x = a[0]
            if x.nchw and keep:
                return [V(x.t.mean([NHWC_TO_NCHW[ax % 4] for ax in axes], keepdim=True), True)]
            t = x.tf()
            return [V(t.mean([ax % t.dim() for ax in axes], keepdim=keep))]
        return run

    def op_Softmax(self, n):
        return lambda a: [V(torch.softmax(a[0].t, 1 if a[0].nchw else -1), a[0].nchw)]

    def op_ConcatV2(self, n):
        axis = int(np.array(self.const(n, len(n["_in"]) - 1)).reshape(()))

        def run(a):
            vs = a[:-1]
            if all(v.nchw for v in vs):
                return [V(torch.cat([v.t for v in vs], NHWC_TO_NCHW[axis % 4]), True)]
            ts = [v.tf() for v in vs]
            return [V(torch.cat(ts, axis % ts[0].dim()))]
        return run

    def op_Reshape(self, n):
        shape = [int(v) for v in self.const(n, 1).reshape(-1)]
        return lambda a: [V(a[0].tf().reshape(shape))]

    def op_ExpandDims(self, n):
        d = int(np.array(self.const(n, 1)).reshape(-1)[0])

        def run(a):
            t = a[0].tf()
            return [V(t.unsqueeze(d if d >= 0 else d + t.dim() + 1))]
        return run

    def op_Squeeze(self, n):
        dims = attr(n, "squeeze_dims", attr(n, "axis", [])) or []

        def run(a):
            t = a[0].tf()
            if not dims:
                return [V(t.squeeze())]
            keep = [s for i, s in enumerate(t.shape) if i not in {d % t.dim() for d in dims}]
            return [V(t.reshape(keep))]
        return run

    def op_TopKV2(self, n):
        k = int(np.array(self.const(n, 1)).reshape(()))
        return lambda a: [V(t) for t in topk_low_first(a[0].tf(), k)]

    def op_GatherV2(self, n):
        axis = int(np.array(self.const(n, 2)).reshape(()))
        if attr(n, "batch_dims", 0) != 0:
            raise self.err(n, "batch_dims is not 0")

        def run(a):
            p, i = a[0].tf(), a[1].tf()
            ax = axis % p.dim()
            g = p.index_select(ax, i.reshape(-1).long())
            return [V(g.reshape(tuple(p.shape[:ax]) + tuple(i.shape) + tuple(p.shape[ax + 1:])))]
        return run

    def op_StridedSlice(self, n):
        b, e, s = (np.array(self.const(n, i)).reshape(-1).tolist() for i in (1, 2, 3))
        bm, em, sm = attr(n, "begin_mask", 0), attr(n, "end_mask", 0), attr(n, "shrink_axis_mask", 0)
        if attr(n, "ellipsis_mask", 0) or attr(n, "new_axis_mask", 0) or any(v <= 0 for v in s):
            raise self.err(n, "ellipsis or new-axis masks, or strides under 1")
        idx = []
        for i in range(len(b)):
            if sm >> i & 1:
                idx.append(b[i])
            else:
                idx.append(slice(None if bm >> i & 1 else b[i], None if em >> i & 1 else e[i], s[i]))
        idx = tuple(idx)
        return lambda a: [V(a[0].tf()[idx])]


class TfjsModel:
    """A TF.js graph model with its head: forward(NCHW input) -> candidates [k, 6] or probabilities."""
    pixels, mean, std = "byte", (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)

    def __init__(self, path, dev):
        self.g = TfjsGraph(path, dev)
        self.in_w, self.in_h = self.g.in_w, self.g.in_h
        self.head = None
        for o in self.g.outputs:
            ops = self.g.ancestors(o[0])
            if "TopKV2" in ops:
                self.kind, self.head = "detect", o
                break
            src = o[0]
            while self.g.nodes[src]["op"] == "Identity":
                src = self.g.nodes[src]["_in"][0][0]
            if self.g.nodes[src]["op"] == "Softmax" and self.head is None:
                self.kind, self.head = "classify", o
        if self.head is None:
            raise Refused(f"{path}: no head the peer understands: an output computed from a TopKV2 (a detector's "
                          f"candidates) or a Softmax (a classifier)")
        labels = os.path.join(os.path.dirname(path), "labels.txt")
        self.labels = read_labels(labels) if os.path.exists(labels) else None

    def memory_format(self, fmt):
        for w in self.g.conv_weights:
            w["w"] = w["w"].contiguous(memory_format=fmt)

    def forward(self, x):
        t = self.g.run(x, [self.head])[0].tf()
        if self.kind == "detect":
            if t.dim() != 3 or t.shape[2] != 6:
                raise Refused(f"{self.g.path}: output '{self.head[0]}' has shape {list(t.shape)}, not [1, k, 6]")
            return t[0]
        return t.reshape(-1)


def read_labels(path):
    with open(path, encoding="utf-8") as f:
        return [ln.rstrip("\r\n") for ln in f if ln.rstrip("\r\n")]


def load_model(path, dev):
    return TfjsModel(path, dev) if path.endswith(".json") else Zcnet(path, dev)


# ------------------------------------------------------------------------------------ the frame

def pre_region(w, h, in_w, in_h, letterbox):
    """Where the frame lands in the model input (zcp_pre_region): x, y, w, h."""
    rw, rh = in_w, in_h
    if letterbox:
        if in_w * h <= in_h * w:
            rh = min(max((h * in_w * 2 + w) // (2 * w), 1), in_h)
        else:
            rw = min(max((w * in_h * 2 + h) // (2 * h), 1), in_w)
    return (in_w - rw) // 2, (in_h - rh) // 2, rw, rh


class Peer:
    """zcpipe's per-frame work for one frame size: work() on the device (no host sync: a CUDA graph can hold
    it), post() on the host. Holds the motion background, so frames go through it in order."""

    def __init__(self, model, w, h, o, dev):
        self.model, self.w, self.h, self.dev = model, w, h, dev
        self.cell, self.thr, self.alpha = o.cell, o.threshold, o.alpha
        self.kind = model.kind
        self.channels_last = False
        pixels = o.pixels or model.pixels
        mean = o.mean or model.mean
        std = o.std or model.std
        self.unit = pixels == "unit"
        self.norm = any(v != 0.0 for v in mean) or any(v != 1.0 for v in std)   # else (v - 0) / 1 == v
        self.mean = torch.tensor(mean, dtype=torch.float32, device=dev).view(3, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32, device=dev).view(3, 1, 1)
        in_w, in_h = model.in_w, model.in_h
        rx, ry, rw, rh = pre_region(w, h, in_w, in_h, o.resize == "letterbox")
        self.region = (rx, ry, rw, rh)
        self.full = (rx, ry, rw, rh) == (0, 0, in_w, in_h)
        if not self.full:
            pad = [(np.float32(0) - np.float32(m)) / np.float32(s) for m, s in zip(mean, std)]
            self.pad = torch.tensor(pad, dtype=torch.float32, device=dev).view(1, 3, 1, 1).expand(1, 3, in_h, in_w)
        x0, x1, lx0, lx1 = self.src_index(rw, w)
        y0, y1, ly0, ly1 = self.src_index(rh, h)
        self.ix = [(i, i // 2) for i in (x0, x1)]
        self.iy = [(i, i // 2) for i in (y0, y1)]
        self.lx0, self.lx1, self.ly0, self.ly1 = lx0, lx1, ly0.view(-1, 1), ly1.view(-1, 1)
        self.gw, self.gh = (w + self.cell - 1) // self.cell, (h + self.cell - 1) // self.cell
        self.gx = torch.arange(self.gw, device=dev).view(1, -1).expand(self.gh, self.gw)
        self.gy = torch.arange(self.gh, device=dev).view(-1, 1).expand(self.gh, self.gw)
        self.bg = torch.zeros(self.gh, self.gw, device=dev)
        self.first = torch.ones((), device=dev)
        # the detector's filter and box mapping, float32 as zcpipe computes them
        f32 = np.float32
        self.min_score, self.nms_iou, self.max_det = f32(o.min_score), f32(o.nms_iou), o.max_detections
        self.nms_iou_f = float(self.nms_iou)   # the same value as a Python float: torch.compile traces no numpy
        off, scale = (f32(rx), f32(ry)), (f32(w) / f32(rw), f32(h) / f32(rh))
        self.off4 = np.array(off * 2, dtype=f32)
        self.scale4 = np.array(scale * 2, dtype=f32)
        self.lim4 = np.array([w, h, w, h], dtype=f32)
        self.labels = model.labels
        classes = getattr(model, "classes", None) or (len(self.labels) if self.labels else 1 << 16)
        self.class_on = np.ones(max(classes, 1), dtype=bool)
        if o.classes:
            self.class_on[:] = False
            for c in o.classes.split(","):
                c = c.strip()
                if self.labels and c in self.labels:
                    self.class_on[self.labels.index(c)] = True
                elif c.isdigit() and int(c) < len(self.class_on):
                    self.class_on[int(c)] = True
                else:
                    raise SystemExit(f"--classes: '{c}' is neither a label nor a class id of the model")
        self.det_consts = None
        self.unsettled = 0   # frames whose device NMS did not settle in NMS_STEPS (post() did it on the host)

    def src_index(self, out, size):
        """interpolate(align_corners=False)'s source index per output pixel, float32 as zcpipe (no FMA)."""
        scale = torch.tensor(np.float32(size) / np.float32(out), device=self.dev)
        src = ((torch.arange(out, dtype=torch.float32, device=self.dev) + 0.5) * scale - 0.5).clamp_(min=0.0)
        i0 = src.long().clamp_(max=size - 1)
        i1 = torch.where(i0 < size - 1, i0 + 1, i0)
        l1 = src - i0.float()
        return i0, i1, 1.0 - l1, l1

    def tensor(self, d):
        """The model input, NCHW [1, 3, in_h, in_w], from the NV12 frame d (uint8, on the device)."""
        w, h = self.w, self.h
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
        if self.unit:
            x = x / 255.0
        if self.norm:
            x = (x - self.mean) / self.std
        x = x.unsqueeze(0)
        if self.full:
            return x
        rx, ry, rw, rh = self.region
        t = self.pad.clone()
        t[:, :, ry:ry + rh, rx:rx + rw] = x
        return t

    def motion(self, luma):
        m = F.avg_pool2d(luma.float().view(1, 1, self.h, self.w), self.cell, ceil_mode=True)[0, 0].floor()
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
        return torch.stack((n, x0, y0, x1, y1)).float()

    def work(self, d):
        """The frame's device work, one float tensor: for a detector (detect()) the detections, their count,
        whether the NMS converged, the raw candidates; for a classifier the top-5 probabilities and classes;
        then moving cells and the moving cells' bounding box in cells."""
        x = self.tensor(d)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        out = self.model.forward(x)
        if self.kind == "detect":
            head = self.detect(out)
        else:
            p, c = topk_low_first(out, K)
            head = torch.cat((p, c.float()))
        return torch.cat((head, self.motion(d[: self.w * self.h].view(self.h, self.w))))

    def detect(self, cand):
        """The filter, box mapping and per-class greedy NMS on the device, without a host sync or a loop of one
        step per candidate. Greedy NMS keeps candidate i (in order) when it passes the filter and no kept j < i
        of its class overlaps it by more than nms_iou; that rule has exactly one solution, so the map
        keep -> pass & !(some kept j < i overlaps i), iterated from keep = pass, is exact once it stops
        changing (a chain of d suppressions settles in d + 1 steps). NMS_STEPS steps, then one more tells
        whether it settled; where it did not, post() runs the host's NMS on the raw candidates. Float32 in
        infer/detect.h's order, as detect_post(). Returns [m, count, settled, m x 6 detections, k x 6
        candidates], m = min(max_det, k)."""
        k = cand.shape[0]
        dev = cand.device
        if self.det_consts is None or self.det_consts[0].device != dev:
            def t(a):
                return torch.from_numpy(np.ascontiguousarray(a)).to(dev)
            self.det_consts = (t(self.class_on), t(self.off4), t(self.scale4), t(self.lim4),
                               torch.ones(k, k, dtype=torch.bool, device=dev).tril(-1),
                               torch.arange(k, device=dev), torch.tensor(self.min_score, device=dev))
        class_on, off4, scale4, lim4, lower, ar, min_score = self.det_consts
        score, cls_f = cand[:, 4], cand[:, 5]
        cls = cls_f.long()
        inside = (cls >= 0) & (cls < class_on.shape[0])
        ok = (score >= min_score) & inside & class_on[cls.clamp(0, class_on.shape[0] - 1)]
        bx = torch.minimum(torch.maximum((cand[:, :4] - off4) * scale4, torch.zeros((), device=dev)), lim4)
        x0, y0, x1, y1 = bx.unbind(1)
        iw = torch.minimum(x1[:, None], x1[None, :]) - torch.maximum(x0[:, None], x0[None, :])
        ih = torch.minimum(y1[:, None], y1[None, :]) - torch.maximum(y0[:, None], y0[None, :])
        inter = iw.clamp(min=0.0) * ih.clamp(min=0.0)
        area = (x1 - x0) * (y1 - y0)
        uni = (area[:, None] + area[None, :]) - inter
        over = (uni > 0) & (inter / uni > self.nms_iou_f) & (cls[:, None] == cls[None, :]) & lower & ok[None, :]
        keep = ok
        for _ in range(NMS_STEPS):
            keep = ok & ~(over & keep[None, :]).any(1)
        settled = (keep == (ok & ~(over & keep[None, :]).any(1))).all()
        keep = keep & (torch.cumsum(keep, 0) <= self.max_det)
        m = min(self.max_det, k)
        first = torch.argsort(torch.where(keep, ar, ar + k))[:m]
        det = torch.cat((bx[first], score[first, None], cls_f[first, None]), 1)
        return torch.cat((torch.full((1,), float(m), device=dev), keep.sum().view(1).float(),
                          settled.view(1).float(), det.reshape(-1), cand.reshape(-1)))

    # ---- on the host

    def post(self, r):
        """The results from work()'s tensor (on the host): (detections or top-5, moving cells, bbox)."""
        n, cx0, cy0, cx1, cy1 = (int(v) for v in r[-5:].tolist())
        box = None
        if n:
            c = self.cell
            box = [cx0 * c, cy0 * c, min((cx1 + 1) * c, self.w), min((cy1 + 1) * c, self.h)]
        if self.kind == "detect":
            m, count, settled = (int(v) for v in r[:3].tolist())
            if settled:
                v = r[3: 3 + 6 * count].tolist()
                return [(int(v[6 * j + 5]), v[6 * j + 4], v[6 * j: 6 * j + 4]) for j in range(count)], n, box
            self.unsettled += 1
            return self.detect_post(self.candidates(r)), n, box
        v = r[: 2 * K].tolist()
        return [(int(v[K + i]), v[i]) for i in range(K)], n, box

    def candidates(self, r):
        """The raw candidates [k, 6] in a detector's results."""
        m = int(r[0])
        return r[3 + 6 * m: -5].numpy().reshape(-1, 6)

    def detect_post(self, cand):
        """detect() on the host, the plain way (the fallback and check's cross-check): zcpipe's filter, box
        mapping and per-class greedy NMS in float32 (infer/detect.h's order), the boxes and their pairwise IoU
        as numpy arrays, then one pass in score order."""
        f32 = np.float32
        cls = cand[:, 5].astype(np.int64)
        ok = cand[:, 4] >= self.min_score
        idx = np.flatnonzero(ok)
        if len(idx) == 0:
            return []
        cls = cls[idx]
        inside = (cls >= 0) & (cls < len(self.class_on))
        sel = inside.copy()
        sel[inside] = self.class_on[cls[inside]]
        idx, cls = idx[sel], cls[sel]
        bx = np.fmin(np.fmax((cand[idx, :4] - self.off4) * self.scale4, f32(0)), self.lim4)
        x0, y0, x1, y1 = bx.T
        iw = np.fmin.outer(x1, x1) - np.fmax.outer(x0, x0)
        ih = np.fmin.outer(y1, y1) - np.fmax.outer(y0, y0)
        inter = np.fmax(iw, f32(0)) * np.fmax(ih, f32(0))
        area = (x1 - x0) * (y1 - y0)
        uni = np.add.outer(area, area) - inter
        ratio = np.divide(inter, uni, out=np.zeros_like(inter), where=uni > 0)
        over = ((ratio > self.nms_iou) & np.equal.outer(cls, cls)).tolist()
        kept = []
        for j in range(len(idx)):
            row = over[j]
            if not any(row[k] for k in kept):
                kept.append(j)
                if len(kept) == self.max_det:
                    break
        sc, cl, bl = cand[idx, 4].tolist(), cls.tolist(), bx.tolist()
        return [(cl[j], sc[j], bl[j]) for j in kept]

    def label(self, c):
        return self.labels[c] if self.labels and c < len(self.labels) else str(c)


def iou(a, b):
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(iw, 0.0) * max(ih, 0.0)
    uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / uni if uni > 0 else 0.0


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


# ------------------------------------------------------------------------------------------- check

def match_frame(mine, theirs, min_score):
    """mine, theirs: [(class id, score, box)]. (equal, borderline only, worst IoU, worst score difference)."""
    used, worst_iou, worst_ds, border, bad = set(), 1.0, 0.0, 0, 0
    for c, s, b in theirs:
        best, bi = -1.0, None
        for j, (c2, s2, b2) in enumerate(mine):
            if j in used or c2 != c or abs(s2 - s) > 1e-3 + 5e-5:   # + the JSON's 4-decimal rounding
                continue
            v = iou(b, b2)
            if v > best:
                best, bi = v, j
        if bi is not None and best >= 0.95:
            used.add(bi)
            worst_iou = min(worst_iou, best)
            worst_ds = max(worst_ds, abs(mine[bi][1] - s))
        elif s < min_score + 1e-3 + 5e-5:
            border += 1
        else:
            bad += 1
    for j, (c, s, b) in enumerate(mine):
        if j not in used:
            if s < min_score + 1e-3:
                border += 1
            else:
                bad += 1
    return bad == 0 and border == 0, bad == 0 and border > 0, worst_iou, worst_ds


def check(peer, frames_path, results_path):
    lines = {}
    with open(results_path) as f:
        for ln in f:
            o = json.loads(ln)
            lines[o["seq"]] = o
    frames = read_frames(frames_path, peer.w, peer.h)
    n = min(len(frames), len(lines))
    d = torch.empty(peer.w * peer.h * 3 // 2, dtype=torch.uint8, device=peer.dev)
    same = border = same_motion = nms_diff = 0
    worst, worst_iou = 0.0, 1.0
    first_diff = first_mdiff = None
    for seq in range(n):
        if seq not in lines:
            raise SystemExit(f"{results_path}: no line for seq {seq}")
        d.copy_(torch.frombuffer(bytearray(frames[seq]), dtype=torch.uint8))
        r = peer.work(d).cpu()
        head, moving, box = peer.post(r)
        o = lines[seq]
        if peer.kind == "detect":
            nms_diff += head != peer.detect_post(peer.candidates(r))
            if "detections" not in o:
                raise SystemExit(f"{results_path}: seq {seq} has no \"detections\" (not a detector's line)")
            theirs = [(t["id"], t["score"], t["box"]) for t in o["detections"]]
            eq, bl, wi, ws = match_frame(head, theirs, float(peer.min_score))
            same += eq
            border += bl
            worst_iou = min(worst_iou, wi)
            worst = max(worst, ws)
            if not eq and not bl and first_diff is None:
                mine = [(peer.label(c), round(s, 4), [round(v, 1) for v in b]) for c, s, b in head]
                first_diff = (f"seq {seq}: peer {mine}\n  zcpipe "
                              f"{[(t['class'], t['score'], t['box']) for t in o['detections']]}")
        else:
            ztop = [(t["class"], t["prob"]) for t in o["topk"]][:K]
            classes_ok = [c for c, _ in head] == [c for c, _ in ztop]
            rel = max(abs(p - q) / max(abs(q), 1e-30) for (_, p), (_, q) in zip(head, ztop))
            worst = max(worst, rel)
            if classes_ok and rel <= 1e-4:
                same += 1
            elif first_diff is None:
                first_diff = f"seq {seq}: peer {head}, zcpipe {ztop}"
        zm = o["motion"]
        if zm["moving_cells"] == moving and (zm["bbox"] or None) == box:
            same_motion += 1
        elif first_mdiff is None:
            first_mdiff = f"seq {seq}: peer moving {moving} bbox {box}, zcpipe {zm['moving_cells']} {zm['bbox']}"
    if peer.kind == "detect":
        print(f"peer vs zcpipe ({results_path}, {peer.w}x{peer.h}): {n} frames; detections equal (same classes, "
              f"box IoU >= 0.95, scores within 1e-3) in {same}, {border} more differ only by detections within "
              f"1e-3 of min_score; worst IoU {worst_iou:.4f}, worst score difference {worst:.2e}; "
              f"motion (moving cells and bbox) equal in {same_motion}")
        print(f"the device's NMS settled in {NMS_STEPS} steps in {n - peer.unsettled} frames, and equals the "
              f"host's in {n - nms_diff}")
        ok = same + border == n and nms_diff == 0
    else:
        print(f"peer vs zcpipe ({results_path}, {peer.w}x{peer.h}): {n} frames; top-5 classes equal and "
              f"probabilities within 1e-4 in {same}, worst relative difference {worst:.2e}; motion (moving cells "
              f"and bbox) equal in {same_motion}")
        ok = same == n
    if first_diff:
        print(f"first difference: {first_diff}")
    if first_mdiff:
        print(f"first motion difference: {first_mdiff}")
    return 0 if ok and same_motion == n else 1


# -------------------------------------------------------------------------------------- time (GPU)

def time_mode(peer, pinned, dframe, res, mode, iters):
    """Host-observed us per frame: launch -> results on the host."""
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
        ts, post = [], []
        for it in range(iters):
            i = it % SLOTS
            t0 = time.perf_counter_ns()
            if graphs:
                graphs[i].replay()
            else:
                once(i)
            stream.synchronize()
            t1 = time.perf_counter_ns()
            peer.post(res[i])
            t2 = time.perf_counter_ns()
            ts.append((t2 - t0) / 1e3)
            post.append((t2 - t1) / 1e3)
    return ts, post


def time_net(peer, iters):
    stream = torch.cuda.Stream()
    x = torch.rand(1, 3, peer.model.in_h, peer.model.in_w, device=peer.dev) * (1.0 if peer.unit else 255.0)
    with torch.cuda.stream(stream):
        for _ in range(10):
            peer.model.forward(x)
        stream.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            y = peer.model.forward(x)
        del y
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter_ns()
            g.replay()
            stream.synchronize()
            ts.append((time.perf_counter_ns() - t0) / 1e3)
    return ts


def time_gpu(peer, frames_path, iters):
    w, h = peer.w, peer.h
    frames = read_frames(frames_path, w, h, SLOTS)
    pinned = [torch.frombuffer(bytearray(frames[i % len(frames)]), dtype=torch.uint8).pin_memory()
              for i in range(SLOTS)]
    dframe = torch.empty(w * h * 3 // 2, dtype=torch.uint8, device=peer.dev)
    n = peer.work(dframe.copy_(pinned[0])).numel()
    res = torch.zeros(SLOTS, n).pin_memory()
    what = "detections" if peer.kind == "detect" else "top-5"
    print(f"peer {w}x{h}: launch -> {what} and motion on the host, us per frame, {iters} frames over {SLOTS} "
          f"pinned buffers; model input {peer.model.in_w}x{peer.model.in_h}")
    print(f"{'mode':<11} {'p50':>8} {'p99':>8} {'min':>8} {'post p50':>9}")
    best = None
    for mode in ("eager", "graph", "compile", "graph-cl", "compile-cl"):
        cl = mode.endswith("-cl")
        peer.channels_last = cl
        peer.model.memory_format(torch.channels_last if cl else torch.contiguous_format)
        peer.first.fill_(1.0)
        try:
            ts, post = time_mode(peer, pinned, dframe, res, mode.replace("-cl", ""), iters)
        except Exception as e:   # torch.compile needs a working triton and compiler
            print(f"{mode:<11} skipped: {type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}")
            continue
        p50 = statistics.median(ts)
        print(f"{mode:<11} {p50:8.1f} {pct(ts, 0.99):8.1f} {min(ts):8.1f} {statistics.median(post):9.1f}")
        head, n, box = peer.post(res[(iters - 1) % SLOTS])
        if peer.kind == "detect":
            shown = [(peer.label(c), round(s, 2)) for c, s, _ in head]
            print(f"            last frame: {len(head)} detections {shown[:6]}, moving cells {n}, bbox {box}")
        else:
            print(f"            last frame: top-5 {[c for c, _ in head]}, moving cells {n}, bbox {box}")
        if best is None or p50 < best[1]:
            best = (mode, p50)
    if best:
        print(f"{'best':<11} {best[1]:8.1f}   ({best[0]})")
    if peer.kind == "detect":
        print(f"{'':<11} the device's NMS had not settled in {peer.unsettled} of the frames (the host's NMS ran)")
    peer.model.memory_format(torch.contiguous_format)
    ts = time_net(peer, iters)
    print(f"{'net':<11} {statistics.median(ts):8.1f} {pct(ts, 0.99):8.1f} {min(ts):8.1f}   "
          f"(the network alone on a device tensor, CUDA graph)")
    return 0


# --------------------------------------------------------------------------------------- cpu

def cpu_bench(model, sizes, threads, nframes, o):
    print(f"peer cpu: torch {torch.__version__}, {os.cpu_count()} CPUs; the whole per-frame work (preprocess, "
          f"network, {'decode, NMS' if model.kind == 'detect' else 'top-5'}, motion), model input "
          f"{model.in_w}x{model.in_h}; {nframes} frames after 2 of warm-up, the network NCHW and channels-last")
    print(f"{'frame':<10} {'threads':>7} {'layout':>13} {'frames/s':>9} {'ms/frame':>9} {'p50 ms':>8} {'min ms':>8} "
          f"{'max ms':>8} {'cpu ms':>8}")
    for path, w, h in sizes:
        frames = read_frames(path, w, h, nframes + 2)
        peer = Peer(model, w, h, o, torch.device("cpu"))
        ts_frames = [torch.frombuffer(bytearray(f), dtype=torch.uint8) for f in frames]
        for n in threads:
            torch.set_num_threads(n)
            best = None
            for cl in (False, True):
                peer.channels_last = cl
                model.memory_format(torch.channels_last if cl else torch.contiguous_format)
                peer.first.fill_(1.0)
                for i in range(2):
                    peer.post(peer.work(ts_frames[i % len(ts_frames)]))
                ts = []
                t0, c0 = time.perf_counter(), time.process_time()
                for i in range(nframes):
                    a = time.perf_counter()
                    peer.post(peer.work(ts_frames[i % len(ts_frames)]))
                    ts.append(time.perf_counter() - a)
                fps = nframes / (time.perf_counter() - t0)
                cpu = (time.process_time() - c0) / nframes
                print(f"{f'{w}x{h}':<10} {n:>7} {'channels-last' if cl else 'nchw':>13} {fps:9.2f} {1e3 / fps:9.1f} "
                      f"{1e3 * statistics.median(ts):8.1f} {1e3 * min(ts):8.1f} {1e3 * max(ts):8.1f} {1e3 * cpu:8.1f}",
                      flush=True)
                best = max(best or 0.0, fps)
            print(f"{f'{w}x{h}':<10} {n:>7} {'best':>13} {best:9.2f}", flush=True)
    model.memory_format(torch.contiguous_format)
    return 0


# ------------------------------------------------------------------------------------------ graph

def graph_mode(path, inp, outprefix, ref):
    g = TfjsGraph(path, torch.device("cpu"))
    a = np.fromfile(inp, dtype="<f4")
    if a.size != g.in_h * g.in_w * 3:
        raise SystemExit(f"{inp}: {a.size} floats, the input is {g.in_h}x{g.in_w}x3")
    x = torch.from_numpy(a.reshape(1, g.in_h, g.in_w, 3)).permute(0, 3, 1, 2).contiguous()
    outs = g.run(x)
    bad = 0
    for (name, port), v in zip(g.outputs, outs):
        t = v.tf().float().contiguous().numpy()
        fname = "".join(ch if ch.isalnum() else "_" for ch in name) + ".f32"
        if outprefix:
            t.astype("<f4").tofile(f"{outprefix}.{fname}")
        line = f"{name} {'x'.join(str(s) for s in t.shape)}"
        if ref:
            r = np.fromfile(f"{ref}.{fname}", dtype="<f4")
            if r.size != t.size:
                print(f"{line}: {ref}.{fname} holds {r.size} floats")
                bad += 1
                continue
            r = r.reshape(t.shape)
            if "TopKV2" in g.ancestors(name) and t.shape[-1] == 6:
                rows = t.reshape(-1, 6)
                rr = r.reshape(-1, 6)
                same = (rows[:, 5] == rr[:, 5]) & (np.abs(rows[:, 4] - rr[:, 4]) <= 1e-3) & \
                    (np.abs(rows[:, :4] - rr[:, :4]).max(1) <= 0.05)
                bad += int((~same).sum())
                line += (f": {int(same.sum())} of {len(rows)} decoded rows equal (class, score within 1e-3, box within "
                         f"0.05 px); max abs difference: score {np.abs(rows[:, 4] - rr[:, 4]).max():.3g}, "
                         f"box {np.abs(rows[:, :4] - rr[:, :4]).max():.3g}")
            else:
                diff = np.abs(t.astype(np.float64) - r)
                rel = diff / np.maximum(np.abs(r), 1.0)
                bad += int(rel.max() > 1e-3)
                line += (f": max abs difference {diff.max():.3g} (values up to {np.abs(r).max():.3g}), mean "
                         f"{diff.mean():.3g}; max |difference| / max(|value|, 1) {rel.max():.3g}")
        print(line)
    return 1 if bad else 0


# ------------------------------------------------------------------------------------------- main

def floats3(s):
    v = [float(x) for x in s.split(",")]
    if len(v) != 3:
        raise argparse.ArgumentTypeError("three numbers, R,G,B")
    return tuple(v)


def main():
    global torch, F
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 else 64
    ap = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1], add_help=False)
    ap.add_argument("mode", choices=("check", "time", "cpu", "graph"))
    ap.add_argument("model")
    ap.add_argument("args", nargs="*")
    ap.add_argument("--pixels", choices=("unit", "byte"))
    ap.add_argument("--mean", type=floats3)
    ap.add_argument("--std", type=floats3)
    ap.add_argument("--resize", choices=("stretch", "letterbox"), default="stretch")
    ap.add_argument("--min-score", type=float, default=0.3)
    ap.add_argument("--nms-iou", type=float, default=0.5)
    ap.add_argument("--max-detections", type=int, default=20)
    ap.add_argument("--classes", default="")
    ap.add_argument("--labels")
    ap.add_argument("--cell", type=int, default=16)
    ap.add_argument("--threshold", type=float, default=12.0)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--ref")
    o = ap.parse_intermixed_args()
    a = o.args
    need = {"check": (4, 4), "time": (4, 4), "graph": (1, 2)}.get(o.mode, (3, 99))
    if not need[0] <= len(a) <= need[1] or (o.mode == "cpu" and len(a) % 3):
        raise SystemExit(__doc__)
    try:
        import torch as t
        import torch.nn.functional as f
    except ImportError as e:
        print(f"SKIP no PyTorch for {sys.executable}: {e}")
        return 77
    torch, F = t, f
    try:
        if o.mode == "graph":
            with torch.inference_mode():
                return graph_mode(o.model, a[0], a[1] if len(a) > 1 else None, o.ref)
        if o.mode == "cpu":
            model = load_model(o.model, torch.device("cpu"))
            if o.labels:
                model.labels = read_labels(o.labels)
            sizes = [(a[i], int(a[i + 1]), int(a[i + 2])) for i in range(0, len(a), 3)]
            with torch.inference_mode():
                return cpu_bench(model, sizes, [int(v) for v in o.threads.split(",")], o.frames, o)
        # ZCP_PEER_DEVICE=cpu runs `check` on the CPU: the same semantics, checked where no GPU is.
        dev = torch.device(os.environ.get("ZCP_PEER_DEVICE", "cuda"))
        if dev.type == "cuda" and not torch.cuda.is_available():
            print("SKIP torch.cuda.is_available() is False")
            return 77
        if dev.type != "cuda" and o.mode != "check":
            raise SystemExit("time needs the GPU (ZCP_PEER_DEVICE=cpu is for check)")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        model = load_model(o.model, dev)
        if o.labels:
            model.labels = read_labels(o.labels)
        w, h = int(a[1]), int(a[2])
        peer = Peer(model, w, h, o, dev)
        print(f"torch {torch.__version__}, " + (f"{torch.cuda.get_device_name(0)}, cudnn {torch.backends.cudnn.version()}"
                                                if dev.type == "cuda" else "on the CPU"))
        with torch.inference_mode():
            if o.mode == "check":
                return check(peer, a[0], a[3])
            return time_gpu(peer, a[0], int(a[3]))
    except Refused as e:
        print(f"refused: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
