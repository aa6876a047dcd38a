#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""zcpipe-bench as a user runs it (tools/bench/zcpipe-bench.c).

  - --help prints the usage and every option, exit 0; a bad argument exits 64;
  - --quick --png --csv: without a usable GPU (this CI machine) it exits 69 with
    one line on stderr naming the reason, prints nothing on stdout and writes
    neither file; on a GPU machine it exits 0 with the 16 rows of the table
    (4 frame sizes x 4 patterns), every result checked, the CSV's 16 rows and
    a PNG.

Usage: test_bench.py ZCPIPE_BENCH   ('' when the build has no CUDA: skipped, 77)
"""
import csv
import os
import re
import subprocess
import sys
import tempfile

SIZES = ["640x480", "1280x720", "1920x1080", "3840x2160"]
PATTERNS = ["read1", "read-k", "result-back", "cpu-gpu-turns"]


def run(args, timeout=120):
    return subprocess.run([BENCH] + args, capture_output=True, text=True, timeout=timeout)


def check_help():
    r = run(["--help"])
    assert r.returncode == 0, r
    for opt in ["--quick", "--iters", "--k", "--device", "--png", "--csv", "--help"]:
        assert opt in r.stdout, f"--help does not mention {opt}:\n{r.stdout}"
    assert r.stdout.startswith("Usage: zcpipe-bench"), r.stdout
    for bad in (["--k", "0"], ["--iters", "x"], ["--nope"], ["extra"]):
        r = run(bad)
        assert r.returncode == 64, f"{bad}: exit {r.returncode}, expected 64 (usage)\n{r.stderr}"
        assert "zcpipe-bench" in r.stderr or "Usage" in r.stderr, r.stderr
    print("--help: ok; bad arguments: exit 64")


def check_quick(tmp):
    png, csvf = os.path.join(tmp, "zb.png"), os.path.join(tmp, "zb.csv")
    r = run(["--quick", "--png", png, "--csv", csvf], timeout=300)
    if r.returncode == 69:
        lines = r.stderr.strip().split("\n")
        assert len(lines) == 1, f"expected one line on stderr:\n{r.stderr}"
        m = re.match(r"zcpipe-bench: no GPU to measure: (.+)\. Copy against zero-copy needs an NVIDIA GPU", lines[0])
        assert m, f"unclear message: {lines[0]}"
        reason = m.group(1)
        assert re.search(r"no NVIDIA driver|no CUDA device|driver is too old|cannot map|does not exist|GPU \d", reason), reason
        assert r.stdout == "", f"stdout without a GPU:\n{r.stdout}"
        assert not os.path.exists(png) and not os.path.exists(csvf), "files written without a GPU"
        print(f"--quick without a GPU: exit 69, '{lines[0]}'")
        return
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    # A GPU machine: the whole table, every result checked, the files.
    rows = [l for l in r.stdout.split("\n") if re.match(r"^\d+x\d+ +\d+\.\d+ +\S", l)]
    assert len(rows) == 16, f"{len(rows)} table rows:\n{r.stdout}"
    for l in rows:
        assert l.split()[-1] in ("yes", "no", "even"), l
    assert "all 32 results checked" in r.stdout, r.stdout
    with open(csvf) as f:
        got = list(csv.DictReader(f))
    assert len(got) == 16, got
    assert {(g["frame"], g["pattern"]) for g in got} == {(s, p) for s in SIZES for p in PATTERNS}
    for g in got:
        assert int(g["bytes"]) == int(g["width"]) * int(g["height"]) * 3 // 2, g
        assert float(g["zc_p50_us"]) > 0 and float(g["copy_p50_us"]) > 0, g
        assert float(g["zc_p99_us"]) >= float(g["zc_p50_us"]), g
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG"
    print(f"--quick on a GPU: exit 0, 16 rows, CSV and PNG written\n{r.stdout}")


def main():
    global BENCH
    BENCH = sys.argv[1] if len(sys.argv) > 1 else ""
    if not BENCH:
        print("SKIP: zcpipe-bench is not built (this build has no CUDA)")
        return 77
    with tempfile.TemporaryDirectory(prefix="zcp-bench-") as tmp:
        check_help()
        check_quick(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
