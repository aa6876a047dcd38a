#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""No debug output: the demo's run writes a handful of log lines, not one per frame.

config/sample.yaml (what `tools/setup.sh demo` runs: the bundled clip in a loop, log.level
info, the metrics server on) with the clip decoded as fast as it goes, its results and frame
log in a temporary folder and the metrics server on a free port. The build tree's zcpipe runs
it with no ZCP_MODELDIR, so it finds the default model (CenterNet, models/centernet/) as the
demo does. Once FRAMES results are out it gets SIGINT (the demo's Ctrl-C) and must exit 0.
stderr, less the latency table printed at exit (and a sanitizer build's report after it), must
hold at most MAX_LINES lines besides the summary lines: what zcpipe says at start (about ten
lines on a machine without a GPU, a few more with one), one line per pass over the file and one
at the stop; and at most one summary line per summary interval (10 s) of the run, however slow
the build. A line per frame, or any output that grows with the frames, fails. The lines are
printed on failure.

Usage: test_quiet.py   (env ZCPIPE, ZCP_SOURCE_ROOT set by meson); exit 77 without GStreamer.
"""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zcpjson  # noqa: E402
from zcptest import ROOT, ZCPIPE, fail, free_port, skip, tmpdir, write  # noqa: E402

FRAMES = 400          # over two and a half loops of the 150-frame clip
MAX_LINES = 20        # besides the periodic summary lines
SUMMARY_S = 10        # log.summary_interval_s's default: sample.yaml does not set it
TMP = tmpdir("zcp-quiet-")
zcpjson.watch(TMP)   # the results and the frame log, strictly parsed at exit


def replace(text, old, new):
    if old not in text:
        fail(f"config/sample.yaml no longer has {old!r}: update this test")
    return text.replace(old, new)


def require(text, what):
    replace(text, what, what)


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def main():
    p = subprocess.run([ZCPIPE, "--version"], capture_output=True, text=True)
    if p.returncode != 0 or "gstreamer yes" not in p.stdout:
        skip("built without GStreamer: no file source for the sample")

    with open(os.path.join(ROOT, "config", "sample.yaml")) as f:
        text = f.read()
    results = os.path.join(TMP, "sample.jsonl")
    text = replace(text, "../samples/vtest-h264.mp4", os.path.join(ROOT, "samples", "vtest-h264.mp4"))
    text = replace(text, "pace: realtime", "pace: fast")
    require(text, "loop: true")
    text = replace(text, "/tmp/zcpipe-sample.jsonl", results)
    text = replace(text, "/tmp/zcpipe-frames.jsonl", os.path.join(TMP, "frames.jsonl"))
    require(text, "level: info")
    text = replace(text, "\nmetrics:\n", f"\nmetrics:\n  http:\n    port: {free_port()}\n")
    cfg = write("sample.yaml", text)

    env = dict(os.environ)
    env.pop("ZCP_MODELDIR", None)
    err_path = os.path.join(TMP, "stderr.txt")
    with open(err_path, "w") as err, open(os.path.join(TMP, "stdout.txt"), "w") as out:
        proc = subprocess.Popen([ZCPIPE, "--config", cfg], stdout=out, stderr=err, env=env)
        started = time.monotonic()
        deadline = time.monotonic() + 300
        n = 0
        while time.monotonic() < deadline and proc.poll() is None:
            n = count_lines(results) if os.path.exists(results) else 0
            if n >= FRAMES:
                break
            time.sleep(0.1)
        if proc.poll() is not None:
            fail(f"zcpipe exited {proc.returncode} after {n} results:\n" + open(err_path).read())
        if n < FRAMES:
            proc.kill()
            proc.wait()
            fail(f"only {n} of {FRAMES} results in 300 s:\n" + open(err_path).read())
        proc.send_signal(signal.SIGINT)
        elapsed = time.monotonic() - started
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            fail("zcpipe did not stop within 60 s of SIGINT")
    lines = open(err_path, errors="replace").read().splitlines()
    if rc != 0:
        fail(f"exit {rc} after SIGINT:\n" + "\n".join(lines))

    # The latency table at exit: "stream NAME: ..." then its indented rows. A sanitizer build's
    # report of the suppressions it used (after the table) is not zcpipe's output. The periodic
    # summary ("sample: up, 56 frames, ...") comes once per interval however many frames: a slow
    # build (ASan runs the detector at a few frames a second) has more of them, a line per frame
    # is still far over.
    log, table, summaries = [], [], 0
    report = False
    for line in lines:
        if re.fullmatch(r"-{20,}", line):
            report = not report
            continue
        if report:
            continue
        if re.search(r"zcpipe: info: \S+: \w+( \(.*?\))?, \d+ frames, [0-9.]+ fps now", line):
            summaries += 1
        elif re.match(r"stream \S+: \d+ frames captured", line):
            if log and not log[-1]:
                table.append(log.pop())   # the blank line that opens the table
            table.append(line)
        elif table and line.startswith("  "):
            table.append(line)
        else:
            log.append(line)
    if not table:
        fail("no latency table on stderr at exit:\n" + "\n".join(lines))
    if len(log) > MAX_LINES:
        fail(f"{len(log)} lines on stderr for {n} frames at log.level info, at most {MAX_LINES} expected:\n"
             + "\n".join(log))
    most = int(elapsed / SUMMARY_S) + 1
    if summaries > most:
        fail(f"{summaries} summary lines in {elapsed:.1f} s, at most one per {SUMMARY_S} s ({most}) expected:\n"
             + "\n".join(lines))
    print(f"ok: {n} frames in {elapsed:.1f} s, {len(log)} log lines on stderr (at most {MAX_LINES}), "
          f"{summaries} summary lines (at most {most}) and the latency table")


if __name__ == "__main__":
    main()
