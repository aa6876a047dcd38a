#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Per-kernel table from Nsight Compute's CSV (ncu --csv --page details --section SpeedOfLight).

    ncu_table.py NCU.csv LABEL
    ncu_table.py --full NCU.csv LABEL    (ncu --set full: occupancy, issue, caches, stalls per launch)
    ncu_table.py --stalls NCU.csv LABEL  (ncu --page raw with the smsp__average_warps_issue_stalled_*
                                          metrics: per launch, the top reasons a warp waited, in
                                          cycles per issued instruction)

The CSV has one row per (launch, metric). The launches of one frame repeat the same kernel
sequence; the table has one line per position in that sequence: the kernel, its grid and block,
and the median over the profiled frames of its duration, SM throughput and memory throughput
(% of peak), then the sum of the medians (the frame's kernels back to back, without the gaps
between them that a graph replay has).
"""
import csv
import statistics
import sys

UNIT_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}
METRICS = {"Duration": "dur", "Compute (SM) Throughput": "sm", "Memory Throughput": "mem"}


def launches(path):
    with open(path, newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]
    rows = list(csv.DictReader(lines))
    out = {}
    for r in rows:
        key = METRICS.get(r.get("Metric Name", ""))
        if not key:
            continue
        lid = int(r["ID"])
        ln = out.setdefault(lid, {"name": r["Kernel Name"].split("(")[0].strip(), "grid": r.get("Grid Size", ""),
                                  "block": r.get("Block Size", "")})
        v = float(r["Metric Value"].replace(",", ""))
        if key == "dur":
            v *= UNIT_US.get(r.get("Metric Unit", "usecond"), 1.0)
        ln[key] = v
    return [out[k] for k in sorted(out)]


# --full: what says why a kernel takes its time (ncu --set full), one block per launch.
FULL = ["Duration", "Registers Per Thread", "Block Size", "Grid Size", "Theoretical Occupancy",
        "Achieved Occupancy", "Executed Ipc Active", "Issue Slots Busy", "Warp Cycles Per Issued Instruction",
        "Executed Instructions", "L1/TEX Hit Rate", "L2 Hit Rate", "Memory Throughput", "DRAM Throughput",
        "Compute (SM) Throughput", "Waves Per SM"]


def full(path, label):
    with open(path, newline="") as f:
        rows = list(csv.DictReader([ln for ln in f if ln.startswith('"')]))
    by = {}
    for r in rows:
        by.setdefault(int(r["ID"]), (r["Kernel Name"].split("(")[0].strip(), {}))[1].setdefault(
            r["Metric Name"], f'{r["Metric Value"]} {r.get("Metric Unit", "")}'.strip())
    print(f"ncu {label} (--set full): {len(by)} launches")
    for lid in sorted(by):
        name, m = by[lid]
        print(f"  [{lid}] {name}")
        print("      " + "; ".join(f"{k} {m[k]}" for k in FULL if k in m))
        stalls = sorted(((float(v.split()[0].replace(",", "")), k) for k, v in m.items()
                         if k.startswith("Stall ") or "stall" in k.lower() and v.split()[0].replace(",", "").replace(
                             ".", "", 1).isdigit()), reverse=True)[:4]
        if stalls:
            print("      stalls: " + "; ".join(f"{k} {v:g}" for v, k in stalls))
    return 0


def stalls(path, label):
    with open(path, newline="") as f:
        rows = list(csv.reader([ln for ln in f if ln.startswith('"')]))
    if len(rows) < 3:
        print(f"ncu {label}: no launches in {path}")
        return 1
    head = rows[0]
    pre, post = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    cols = [(i, h[len(pre):-len(post)]) for i, h in enumerate(head) if h.startswith(pre) and h.endswith(post)]
    name_col = head.index("Kernel Name") if "Kernel Name" in head else None
    print(f"ncu {label} stalls (cycles per issued instruction, top 6 of {len(cols)} reasons):")
    for r in rows[2:]:
        vals = []
        for i, reason in cols:
            try:
                vals.append((float(r[i].replace(",", "")), reason))
            except (ValueError, IndexError):
                pass
        vals.sort(reverse=True)
        name = r[name_col].split("(")[0].strip() if name_col is not None else "?"
        print(f"  {name[:36]:36s} total {sum(v for v, _ in vals):6.2f}: " +
              "; ".join(f"{k} {v:.2f}" for v, k in vals[:6]))
    return 0


def main():
    if sys.argv[1] == "--stalls":
        return stalls(sys.argv[2], sys.argv[3])
    if sys.argv[1] == "--full":
        return full(sys.argv[2], sys.argv[3])
    path, label = sys.argv[1], sys.argv[2]
    ls = launches(path)
    if not ls:
        print(f"ncu {label}: no launches in {path}")
        return 1
    # The frame's sequence: from the first launch up to the next launch of the same kernel and grid.
    first = (ls[0]["name"], ls[0]["grid"])
    period = next((i for i in range(1, len(ls)) if (ls[i]["name"], ls[i]["grid"]) == first), len(ls))
    frames = len(ls) // period
    print(f"ncu {label}: {len(ls)} launches, {period} kernels per frame, {frames} whole frames "
          "(median over frames; us, % of peak)")
    print(f"  {'#':>2} {'kernel':<28} {'grid':>14} {'block':>12} {'dur us':>8} {'SM %':>6} {'mem %':>6}")
    total = 0.0
    for p in range(period):
        col = [ls[f * period + p] for f in range(frames)] or [ls[p]]
        med = {k: statistics.median(c[k] for c in col if k in c) for k in ("dur", "sm", "mem") if any(k in c for c in col)}
        total += med.get("dur", 0.0)
        print(f"  {p:>2} {col[0]['name'][:28]:<28} {col[0]['grid']:>14} {col[0]['block']:>12} "
              f"{med.get('dur', float('nan')):8.2f} {med.get('sm', float('nan')):6.1f} {med.get('mem', float('nan')):6.1f}")
    print(f"  sum of kernel durations per frame ({label}): {total:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
