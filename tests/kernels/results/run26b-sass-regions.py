#!/usr/bin/env python3
# Run 26b: one launch's per-SASS-instruction source counters (ncu --page source --csv --print-source sass)
# summarized: warp instructions and stall samples by opcode and by runs of instructions executed equally
# often (the prologue, the copy loop, the channel loop, the epilogue). Usage: run26b-sass-regions.py sass-N.csv
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
sec, hdr = [], None
for r in rows:
    if r and r[0] == "Kernel Name":
        if hdr:
            break   # the file repeats the launch: the first copy is enough
        print("kernel:", r[1])
        continue
    if r and r[0] == "Address":
        hdr = r
        continue
    sec.append(r)
ix = {h: i for i, h in enumerate(hdr)}
S, E = ix["Warp Stall Sampling (All Samples)"], ix["Instructions Executed"]
stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
live = [r for r in sec if int(r[E] or 0) or int(r[S] or 0)]
ts = sum(int(r[S] or 0) for r in live)
te = sum(int(r[E] or 0) for r in live)
print(f"warp instructions {te}, stall samples {ts}")
agg = {h: sum(int(r[ix[h]] or 0) for r in live) for h in stalls}
print("stalls: " + ", ".join(f"{h[6:]} {100 * v / ts:.0f}%" for h, v in sorted(agg.items(), key=lambda x: -x[1])[:8]))
ops, samp = {}, {}
for r in live:
    t = r[1].split()
    op = (t[1] if t[0].startswith("@") else t[0]).split(".")[0]
    ops[op] = ops.get(op, 0) + int(r[E] or 0)
    samp[op] = samp.get(op, 0) + int(r[S] or 0)
print("by opcode (top 12): warp instructions %, samples %")
for k, v in sorted(ops.items(), key=lambda x: -x[1])[:12]:
    print(f"  {k:8s} {100 * v / te:5.1f} {100 * samp[k] / ts:5.1f}")
print("runs of instructions executed equally often (>= 2% of samples or instructions):")
runs, cur = [], None
for n, r in enumerate(sec):
    e, s = int(r[E] or 0), int(r[S] or 0)
    if not e and not s:
        continue
    if cur and e == cur["per"]:
        cur.update(last=n, n=cur["n"] + 1, e=cur["e"] + e, s=cur["s"] + s)
    else:
        cur = dict(first=n, last=n, n=1, per=e, e=e, s=s)
        runs.append(cur)
for c in runs:
    if c["s"] >= 0.02 * ts or c["e"] >= 0.02 * te:
        print(f"  lines {c['first']:5d}-{c['last']:5d} ({c['n']:3d} instr, each x{c['per']:6d}): "
              f"instructions {100 * c['e'] / te:4.1f}%, samples {100 * c['s'] / ts:4.1f}%")
