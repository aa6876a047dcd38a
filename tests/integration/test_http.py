#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The metrics endpoint of a running zcpipe (127.0.0.1 only; every loop bounded).

  scrape  the bundled sample (file, pace fast, CPU backend; a synthetic clip
          without GStreamer) next to an endless synthetic stream: /metrics is
          valid Prometheus text (a strict reader of format 0.0.4 below, and
          promtool when installed), /stats and /healthz answer, other paths
          404, other methods 405, HEAD has no body; after the sample ends,
          /healthz is 503 naming it, and the final scrape agrees with the
          summary table printed at exit (counts equal, quantiles equal to
          /stats, Prometheus buckets bracket every quantile within the
          histogram's 1 %); the per-frame log holds every frame with its
          timestamps and the same percentiles, and tools/zcp-plot renders it.
  abuse   slow clients dripping headers, 1 MiB headers, a flood of silent
          connections far above max_connections, odd methods and paths, and
          hundreds of scrapes: the endpoint keeps answering normal scrapes,
          the daemon's memory stays bounded and frames keep flowing at the
          source's rate; "%00" in a path is no end of it (404), an HTTP/1.1
          request without Host is 400.
  scrapers  four clients scraping as fast as they can get no more answers than
          max_requests_per_s allows (the rest wait, none refused), the HTTP
          thread runs at nice 10, and a fast file stream loses no frame.
  exposed listening beyond loopback: the live page is off unless enabled, then
          asks for metrics.http.auth_file's secret (bearer or basic auth);
          /metrics, /healthz and /stats stay open; a secret file others can
          read, or a missing one, is refused at --check and at start (78).
  port    the port already in use: one clear line and exit 1; http disabled
          opens no port; a non-loopback listen address is refused (exit 78).

Usage: test_http.py CASE   (env ZCPIPE, ZCP_SOURCE_ROOT set by meson)
"""
import base64
import http.client
import math
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zcpjson  # noqa: E402
from zcptest import HOST, ROOT, WEIGHTS, ZCPIPE, check, fail, free_port, skip, tmpdir, wait_for, write  # noqa: E402

SAMPLE = os.path.join(ROOT, "samples", "vtest-h264.mp4")
PLOT = os.path.join(ROOT, "tools", "zcp-plot")
TMP = tmpdir("zcp-http-")
zcpjson.watch(TMP)   # every results file and frame log, strictly parsed at exit


def version():
    p = subprocess.run([ZCPIPE, "--version"], capture_output=True, text=True, timeout=30)
    return p.stdout


class Daemon:
    """zcpipe running in the background; stderr goes to a file."""

    def __init__(self, cfg):
        self.err_path = cfg + ".stderr"
        self.err = open(self.err_path, "w")
        env = dict(os.environ)
        # Under ASan, freed blocks sit in a quarantine (256 MiB by default) and inflate RSS:
        # keep it small so that RSS measures the daemon's own memory.
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=8"
        self.proc = subprocess.Popen([ZCPIPE, "--config", cfg], stdout=subprocess.DEVNULL, stderr=self.err, env=env)

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail("zcpipe did not stop within %d s of SIGTERM\n%s" % (timeout, self.stderr()))
        self.err.close()
        return rc


def request(port, path, method="GET", timeout=5.0, body=None, headers=None):
    """One request on a fresh connection: (status, headers dict, body bytes) or raises."""
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        c.close()


def try_request(port, path, timeout=5.0):
    try:
        return request(port, path, timeout=timeout)
    except (OSError, http.client.HTTPException) as e:
        return None, {}, repr(e).encode()


# ---- a strict reader of the Prometheus text exposition format 0.0.4 ----

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_value(s):
    if s in ("+Inf", "Inf"):
        return math.inf
    if s == "-Inf":
        return -math.inf
    if s == "NaN":
        return math.nan
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", s):
        raise ValueError(f"bad value {s!r}")
    return float(s)


def parse_labels(text, pos, line):
    """text[pos] == '{'. Returns (labels dict, position after '}')."""
    labels = {}
    pos += 1
    while True:
        if text[pos] == "}":
            return labels, pos + 1
        m = re.match(r"[a-zA-Z_][a-zA-Z0-9_]*", text[pos:])
        check(m, f"label name expected at column {pos}: {line}")
        name = m.group(0)
        check(not name.startswith("__"), f"reserved label name {name}: {line}")
        check(name not in labels, f"label {name} twice: {line}")
        pos += len(name)
        check(text[pos:pos + 2] == '="', f"'=\"' expected after {name}: {line}")
        pos += 2
        val = []
        while text[pos] != '"':
            ch = text[pos]
            check(ch != "\n", f"newline in a label value: {line}")
            if ch == "\\":
                nxt = text[pos + 1]
                check(nxt in '\\"n', f"bad escape \\{nxt}: {line}")
                val.append({"\\": "\\", '"': '"', "n": "\n"}[nxt])
                pos += 2
            else:
                val.append(ch)
                pos += 1
        labels[name] = "".join(val)
        pos += 1
        if text[pos] == ",":
            pos += 1
        else:
            check(text[pos] == "}", f"',' or '}}' expected: {line}")


def parse_prometheus(text):
    """Returns {family: {"type", "help", "samples": [(name, labels, value)]}}; fails on any violation."""
    check(text.endswith("\n"), "exposition does not end with a newline")
    check("\r" not in text, "carriage return in exposition")
    fams, order, seen, current = {}, [], set(), None

    def family_for(name):
        if name in fams:
            return name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and fams.get(name[:-len(suffix)], {}).get("type") == "histogram":
                return name[:-len(suffix)]
        return None

    for line in text[:-1].split("\n"):
        check(line != "", "empty line in exposition")
        if line.startswith("#"):
            m = re.fullmatch(r"# (HELP|TYPE) (\S+) (.*)", line)
            check(m, f"unexpected comment line: {line}")
            kind, name, rest = m.groups()
            check(NAME.match(name), f"bad metric name {name}")
            fam = fams.setdefault(name, {"type": None, "help": None, "samples": []})
            if name not in order:
                check(name not in seen, f"family {name} reopened")
                order.append(name)
            if current and current != name:
                seen.add(current)
            current = name
            if kind == "HELP":
                check(fam["help"] is None, f"second HELP for {name}")
                check(not re.search(r"\\[^\\n]", rest), f"bad escape in HELP of {name}")
                fam["help"] = rest
            else:
                check(fam["type"] is None, f"second TYPE for {name}")
                check(not fam["samples"], f"TYPE after samples for {name}")
                check(rest in TYPES, f"unknown type {rest} for {name}")
                fam["type"] = rest
            continue
        m = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
        check(m, f"sample line without a metric name: {line}")
        name = m.group(0)
        pos = len(name)
        labels = {}
        if pos < len(line) and line[pos] == "{":
            labels, pos = parse_labels(line, pos, line)
        check(line[pos:pos + 1] == " ", f"space expected before the value: {line}")
        fields = line[pos + 1:].split(" ")
        check(len(fields) == 1, f"timestamps or junk after the value: {line}")
        try:
            value = parse_value(fields[0])
        except ValueError as e:
            fail(f"{e}: {line}")
        fname = family_for(name)
        check(fname is not None, f"sample {name} before its TYPE line")
        fam = fams[fname]
        check(fam["type"] is not None and fam["help"] is not None, f"sample {name} before HELP/TYPE of {fname}")
        check(current == fname, f"sample {name} outside its family's block")
        key = (name, tuple(sorted(labels.items())))
        check(key not in seen, f"duplicate series {name}{labels}")
        seen.add(key)
        fam["samples"].append((name, labels, value))

    for fname, fam in fams.items():
        if fam["type"] == "counter":
            check(fname.endswith("_total"), f"counter {fname} without _total")
            check(all(v >= 0 for _, _, v in fam["samples"]), f"negative counter in {fname}")
        if fam["type"] == "histogram":
            check_histogram(fname, fam)
    return fams


def check_histogram(fname, fam):
    series = {}
    for name, labels, value in fam["samples"]:
        base = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        s = series.setdefault(base, {"buckets": [], "sum": None, "count": None})
        if name == fname + "_bucket":
            check("le" in labels, f"{name} without le")
            s["buckets"].append((parse_value(labels["le"]), value))
        elif name == fname + "_sum":
            check("le" not in labels, f"{name} with le")
            s["sum"] = value
        elif name == fname + "_count":
            check("le" not in labels, f"{name} with le")
            s["count"] = value
        else:
            fail(f"unexpected sample {name} in histogram {fname}")
    for base, s in series.items():
        b = s["buckets"]
        check(b and s["sum"] is not None and s["count"] is not None, f"{fname}{base}: incomplete histogram")
        les = [le for le, _ in b]
        check(les == sorted(les) and len(set(les)) == len(les), f"{fname}{base}: le not ascending")
        check(les[-1] == math.inf, f"{fname}{base}: no +Inf bucket")
        counts = [c for _, c in b]
        check(all(x <= y for x, y in zip(counts, counts[1:])), f"{fname}{base}: buckets not cumulative")
        check(counts[-1] == s["count"], f"{fname}{base}: +Inf {counts[-1]} != _count {s['count']}")


def promtool_check(text):
    tool = shutil.which("promtool")
    if not tool:
        return "promtool not installed"
    p = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"promtool check metrics failed:\n{p.stdout}{p.stderr}")
    return "promtool ok"


def sample_value(fams, family, name=None, **labels):
    for n, lab, v in fams[family]["samples"]:
        if n == (name or family) and all(lab.get(k) == str(val) for k, val in labels.items()):
            return v
    fail(f"no sample {name or family}{labels}")


def get_metrics(port):
    status, headers, body = request(port, "/metrics")
    check(status == 200, f"/metrics: HTTP {status}")
    check(headers.get("content-type", "").startswith("text/plain; version=0.0.4"),
          f"/metrics content type {headers.get('content-type')}")
    text = body.decode("utf-8")
    return text, parse_prometheus(text)


def get_stats(port):
    status, headers, body = request(port, "/stats")
    check(status == 200 and headers.get("content-type") == "application/json", f"/stats: HTTP {status} {headers}")
    return {s["name"]: s for s in zcpjson.loads(body)["streams"]}


# ---- the summary table printed at exit ----

def parse_summary(err, stream):
    """{'frames': {...}, 'rows': {'convert wait': (count, p50, p90, p99, p99.9, max) ms}} of one stream."""
    m = re.search(r"^stream " + re.escape(stream) + r": (\d+) frames captured, (\d+) published, [\d.]+ fps, (\d+) "
                  r"dropped, (\d+) decode gaps, (\d+) copies, (\d+) reconnects\n((?:  .*\n?)*)", err, re.M)
    check(m, f"no summary table for stream {stream} in:\n{err}")
    frames = dict(zip(["captured", "published", "dropped", "decode_gaps", "copies", "reconnects"],
                      map(int, m.groups()[:6])))
    rows = {}
    for line in m.group(7).splitlines():
        r = re.fullmatch(r"  (\S+(?: \S+)?)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if r:
            rows[r.group(1)] = (int(r.group(2)),) + tuple(float(x) for x in r.groups()[2:])
    check(len(rows) == 7, f"summary of {stream} has {len(rows)} latency rows:\n{m.group(0)}")
    return frames, rows


def check_buckets_bracket(fams, family, labels, count, quantiles_ms):
    """Exported buckets agree with quantiles computed from the full histogram, within its 1 %."""
    buckets = sorted((parse_value(lab["le"]), v) for n, lab, v in fams[family]["samples"]
                     if n == family + "_bucket" and all(lab.get(k) == val for k, val in labels.items()))
    for q, v_ms in quantiles_ms:
        rank = max(1, math.ceil(q * count))
        v = v_ms / 1000.0
        for le, c in buckets:
            if le >= v * 1.02 + 2e-6:
                check(c >= rank, f"{family}{labels}: q{q}={v_ms} ms but only {c} <= le {le} (rank {rank})")
            if le <= v * 0.98 - 2e-6:
                check(c < rank, f"{family}{labels}: q{q}={v_ms} ms but already {c} <= le {le} (rank {rank})")


# ---- cases ----

def stream_yaml(name, source, model=True, out="none"):
    model_yaml = f"      weights: {WEIGHTS}\n" if model else "      enabled: false\n"
    return f"""
  - name: {name}
    source:
{source}
    gpu:
      backend: cpu
    model:
{model_yaml}    output:
      type: {out}
"""


def case_scrape():
    port = free_port()
    log = os.path.join(TMP, "frames.jsonl")
    have_gst = "gstreamer yes" in version()
    # At its own rate (10 fps, 15 s): /healthz must be seen 200 while both streams flow, and an
    # ended stream makes it 503 (a file decoded as fast as it goes can end before the first poll).
    if have_gst:
        first = "      type: file\n      path: " + SAMPLE + "\n      pace: realtime"
        expect = 150
    else:
        first = ("      type: synthetic\n      width: 320\n      height: 240\n      frames: 150\n      fps: 10\n"
                 "      pace: realtime")
        expect = 150
    live = "      type: synthetic\n      width: 96\n      height: 64\n      fps: 30\n      pace: realtime"
    cfg = write("scrape.yaml", f"""log:
  summary_interval_s: 1
metrics:
  http:
    port: {port}
    timeout_s: 5
  frame_log:
    path: {log}
streams:""" + stream_yaml("sample", first) + stream_yaml("live", live, model=False))
    d = Daemon(cfg)
    try:
        wait_for("/healthz 200", lambda: try_request(port, "/healthz")[0] == 200 or d.proc.poll() is not None, 30)
        check(d.proc.poll() is None, "zcpipe exited early:\n" + d.stderr())
        status, headers, body = request(port, "/healthz")
        check(status == 200 and body == b"ok\n", f"/healthz while flowing: {status} {body!r}")

        text, fams = get_metrics(port)
        tool = promtool_check(text)
        for fam in ("zcpipe_stage_wait_seconds", "zcpipe_stage_busy_seconds", "zcpipe_e2e_latency_seconds"):
            check(fams[fam]["type"] == "histogram", f"{fam} is not a histogram")
        for fam in ("zcpipe_frames_captured_total", "zcpipe_frames_published_total", "zcpipe_frames_dropped_total",
                    "zcpipe_decode_gaps_total", "zcpipe_copies_total", "zcpipe_reconnects_total"):
            check(fams[fam]["type"] == "counter", f"{fam} is not a counter")
        for fam in ("zcpipe_ring_in_flight", "zcpipe_ring_slots", "zcpipe_source_up", "zcpipe_fps",
                    "zcpipe_stream_info", "zcpipe_build_info"):
            check(fams[fam]["type"] == "gauge", f"{fam} is not a gauge")
        check(sample_value(fams, "zcpipe_build_info", http="yes") == 1, "build_info")
        # the frame log's lines where Prometheus looks, not only in the exit table (issue 40, 5)
        check(fams["zcpipe_frame_log_lost_total"]["type"] == "counter" and
              sample_value(fams, "zcpipe_frame_log_lost_total") == 0, "frame log lost")
        check(fams["zcpipe_frame_log_written_total"]["type"] == "counter", "frame log written")
        check(sample_value(fams, "zcpipe_sink_up", stream="live", sink="none") == 1, "sink up")
        info = [lab for _, lab, _ in fams["zcpipe_stream_info"]["samples"]]
        check([i["stream"] for i in info] == ["sample", "live"], f"stream_info streams {info}")
        check(info[0]["backend"] == "cpu" and info[0]["source"] == ("file" if have_gst else "synthetic"),
              f"stream_info {info[0]}")
        check(info[1]["width"] == "96" and info[1]["height"] == "64" and info[1]["source"] == "synthetic",
              f"stream_info {info[1]}")
        check(sample_value(fams, "zcpipe_ring_slots", stream="live") == 8, "ring slots")
        check(sample_value(fams, "zcpipe_source_up", stream="live") == 1, "live source up")
        stages = {lab["stage"] for _, lab, _ in fams["zcpipe_stage_busy_seconds"]["samples"]}
        check(stages == {"convert", "infer", "publish"}, f"stages {stages}")
        reasons = {lab["reason"] for _, lab, _ in fams["zcpipe_frames_dropped_total"]["samples"]}
        check({"ring_full", "stale", "corrupt", "shutdown"} <= reasons, f"drop reasons {reasons}")

        # Other paths and methods; HEAD.
        for path in ("/index.html", "/metric", "/metrics/", "/METRICS", "/stats.json", "/../healthz"):
            status, _, _ = request(port, path)
            check(status == 404, f"GET {path}: {status}, expected 404")
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "BREW"):
            status, headers, _ = request(port, "/metrics", method=method, body=b"x=1" if method == "POST" else None)
            check(status == 405 and headers.get("allow") == "GET, HEAD", f"{method} /metrics: {status} {headers}")
        status, headers, body = request(port, "/stats", method="HEAD")
        check(status == 200 and body == b"" and int(headers.get("content-length", 0)) > 100, f"HEAD /stats {status}")
        status, _, _ = request(port, "/metrics?name[]=zcpipe_fps")
        check(status == 200, f"/metrics with a query: {status}")
        c = http.client.HTTPConnection(HOST, port, timeout=5)   # keep-alive: two requests, one connection
        try:
            c.request("GET", "/healthz")
            r = c.getresponse()
            r.read()
            sock = c.sock
            check(r.status == 200 and r.getheader("connection", "").lower() != "close" and sock,
                  f"keep-alive: {r.status} {r.getheaders()}")
            c.request("GET", "/metrics")
            r = c.getresponse()
            check(r.status == 200 and len(r.read()) > 1000 and c.sock is sock, "second request on the connection")
        finally:
            c.close()

        # The sample ends; the live stream goes on. Its numbers are then final.
        wait_for("the sample to finish", lambda: get_stats(port)["sample"]["frames"]["published"] >= expect, 240, 0.5)
        status, _, body = wait_for("/healthz 503", lambda: (lambda r: r if r[0] == 503 else None)(
            request(port, "/healthz")), 10, 0.2)
        # the supervisor knows the file ended (before its last frame is 3 periods old)
        check(body.startswith(b"stream sample: ended for ") and b"stream live" not in body, f"/healthz 503 body {body!r}")
        stats = get_stats(port)
        text, fams = get_metrics(port)
        stats2 = get_stats(port)
        check(stats["sample"]["latency_ms"] == stats2["sample"]["latency_ms"], "sample still changing after it ended")
        check(stats2["live"]["fps"] > 20, f"live fps {stats2['live']['fps']}")
        # the ended file no longer delays the end of the test (its state says ended at once): give the
        # periodic summary its tick and the live stream the frames the frame log check below counts
        wait_for("a periodic summary line", lambda: re.search(r"zcpipe: info: live: .*fps", d.stderr()), 10, 0.2)
        wait_for("live frames", lambda: get_stats(port)["live"]["frames"]["published"] > 40, 30, 0.2)
    finally:
        rc = d.stop()
    err = d.stderr()
    check(rc == 0, f"zcpipe exit {rc}\n{err}")
    check(re.search(r"zcpipe: info: live: .*fps", err), "no periodic summary line in the log:\n" + err)

    # Scrape vs the table printed at exit.
    frames, rows = parse_summary(err, "sample")
    s = stats["sample"]
    check(frames["published"] == expect == s["frames"]["published"], f"published {frames} vs {s['frames']}")
    for k in ("captured", "published", "dropped", "decode_gaps", "copies", "reconnects"):
        check(frames[k] == s["frames"][k], f"{k}: summary {frames[k]} vs /stats {s['frames'][k]}")
    metric_of = {"captured": "zcpipe_frames_captured_total", "published": "zcpipe_frames_published_total",
                 "decode_gaps": "zcpipe_decode_gaps_total", "copies": "zcpipe_copies_total",
                 "reconnects": "zcpipe_reconnects_total"}
    for k, fam in metric_of.items():
        check(sample_value(fams, fam, stream="sample") == frames[k], f"{fam} vs summary {frames[k]}")
    dropped = sum(v for _, lab, v in fams["zcpipe_frames_dropped_total"]["samples"] if lab["stream"] == "sample")
    check(dropped == frames["dropped"], f"dropped {dropped} vs summary {frames['dropped']}")
    qs = [0.5, 0.9, 0.99, 0.999]
    for row, (count, p50, p90, p99, p999, mx) in rows.items():
        if row == "end-to-end":
            h, fam, labels = s["latency_ms"]["e2e"], "zcpipe_e2e_latency_seconds", {"stream": "sample"}
        else:
            stage, kind = row.split()
            h = s["latency_ms"][stage][kind]
            fam, labels = f"zcpipe_stage_{kind}_seconds", {"stream": "sample", "stage": stage}
        check(h["count"] == count, f"{row}: /stats count {h['count']} vs summary {count}")
        check(sample_value(fams, fam, fam + "_count", **labels) == count, f"{row}: _count vs summary {count}")
        for name, v in zip(["p50", "p90", "p99", "p99.9", "max"], [p50, p90, p99, p999, mx]):
            check(abs(h[name] - v) <= 0.0005 + 1e-9, f"{row} {name}: /stats {h[name]} vs summary {v}")
        total = sample_value(fams, fam, fam + "_sum", **labels)
        check(abs(total * 1000 / count - h["mean"]) <= 0.001 + 1e-6 * h["mean"], f"{row}: _sum/_count vs mean")
        check_buckets_bracket(fams, fam, labels, count, list(zip(qs, [p50, p90, p99, p999])))

    # The per-frame log: every frame with its timestamps; same percentiles within the histogram's error.
    with open(log) as f:
        lines = [zcpjson.loads(x) for x in f]
    mine = [r for r in lines if r["stream"] == "sample"]
    check(len(mine) == expect and [r["seq"] for r in mine] == list(range(expect)), "frame log: sample frames")
    check(len([r for r in lines if r["stream"] == "live"]) > 30, "frame log: live frames missing")
    order = ["capture", "convert_enter", "convert_start", "convert_end", "infer_enter", "infer_start", "infer_end",
             "publish_enter", "publish_start", "publish_end"]
    for r in mine:
        t = [r["t"][k] for k in order]
        check(not r["dropped"] and r["drop_reason"] is None, f"frame log: {r}")
        check(all(t) and t == sorted(t), f"frame log: timestamps of {r['seq']}: {r['t']}")
        check(r["e2e_ns"] == t[-1] - t[0], f"frame log: e2e of {r['seq']}")
    e2e = sorted(r["e2e_ns"] / 1e6 for r in mine)
    for q, v in zip(qs, rows["end-to-end"][1:5]):
        exact = e2e[max(1, math.ceil(q * len(e2e))) - 1]
        check(abs(exact - v) <= exact / 128 + 0.0006, f"frame log e2e q{q} {exact} ms vs summary {v} ms")

    # The plot command renders it.
    if shutil.which("gnuplot"):
        png = os.path.join(TMP, "latency.png")
        p = subprocess.run([sys.executable, PLOT, "--stream", "sample", "-o", png, log], capture_output=True,
                           text=True, timeout=120)
        check(p.returncode == 0, f"zcp-plot failed: {p.stdout}{p.stderr}")
        with open(png, "rb") as f:
            head = f.read(8)
        check(head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 10000, "zcp-plot wrote no PNG")
        m = re.search(r"p50 ([\d.]+) ms p99 ([\d.]+) ms", p.stdout)
        check(m and abs(float(m.group(1)) - rows["end-to-end"][1]) <= rows["end-to-end"][1] / 100 + 0.001,
              f"zcp-plot p50 {p.stdout}")
        plotted = "plot ok"
    else:
        plotted = "plot skipped (no gnuplot)"
    print(f"scrape: ok ({len(fams)} families, {tool}, {plotted})")


def case_abuse():
    port = free_port()
    fps = 50
    limit = 8
    live = f"      type: synthetic\n      width: 160\n      height: 120\n      fps: {fps}\n      pace: realtime"
    cfg = write("abuse.yaml", f"""log:
  summary_interval_s: 0
metrics:
  http:
    port: {port}
    max_connections: {limit}
    timeout_s: 2
streams:""" + stream_yaml("live", live, model=False))
    d = Daemon(cfg)
    notes = []
    try:
        wait_for("/healthz 200", lambda: try_request(port, "/healthz")[0] == 200 or d.proc.poll() is not None, 30)
        check(d.proc.poll() is None, "zcpipe exited early:\n" + d.stderr())
        for _ in range(20):   # warm up allocations before the baseline
            get_metrics(port)
        rss0 = d.rss_kib()
        t0, f0 = time.monotonic(), get_stats(port)["live"]["frames"]

        def scrapes_during(seconds, must_after, what):
            """Normal scrapes every 0.2 s while abuse goes on: all those started after must_after s succeed."""
            start, results = time.monotonic(), []
            while time.monotonic() - start < seconds:
                ts = time.monotonic() - start
                status, _, _ = try_request(port, "/metrics", timeout=3)
                results.append((ts, status))
                time.sleep(0.2)
            late = [(t, s) for t, s in results if t >= must_after]
            check(late and all(s == 200 for _, s in late), f"{what}: scrapes failed late: {results}")
            first_ok = min([t for t, s in results if s == 200], default=None)
            notes.append(f"{what}: first scrape ok at {first_ok:.1f} s, {sum(s == 200 for _, s in results)}"
                         f"/{len(results)} ok")

        # 1. Slow clients: each sends a request line, then one header line every 0.3 s, never finishing.
        drips, stop = [], threading.Event()
        for _ in range(12):
            s = socket.create_connection((HOST, port), timeout=2)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            drips.append(s)

        def drip():
            while not stop.is_set():
                for s in drips:
                    try:
                        s.send(b"X-Slow: 1\r\n")
                    except OSError:
                        pass
                stop.wait(0.3)
        th = threading.Thread(target=drip)
        th.start()
        scrapes_during(5, 1.5, "slow clients")
        stop.set()
        th.join()
        cut = 0
        for s in drips:   # the server has closed them (timeout_s or sooner when every slot is taken)
            s.settimeout(0.5)
            try:
                cut += s.recv(65536) == b""
            except socket.timeout:
                pass
            except OSError:
                cut += 1   # reset
            s.close()
        check(cut == len(drips), f"slow clients: {len(drips) - cut} of {len(drips)} still open after 5 s")

        # 2. Huge headers: 1 MiB of header each; refused (431 or closed), never buffered whole.
        for _ in range(5):
            s = socket.create_connection((HOST, port), timeout=3)
            try:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
            except OSError:
                pass
            try:
                reply = s.recv(64)
                check(reply == b"" or reply.startswith(b"HTTP/1.1 4"), f"huge header answered {reply!r}")
            except OSError:
                pass
            s.close()
        status, _, _ = request(port, "/metrics")
        check(status == 200, "scrape after huge headers")

        # 3. A flood of silent connections, 8x the limit.
        flood = []
        for _ in range(8 * limit):
            try:
                flood.append(socket.create_connection((HOST, port), timeout=2))
            except OSError:
                pass
        scrapes_during(4, 1.5, f"flood of {len(flood)} connections")
        for s in flood:
            s.close()

        # 4. Other methods and paths, many times.
        for i in range(100):
            method = ["POST", "PUT", "DELETE", "OPTIONS", "GET"][i % 5]
            path = ["/metrics", "/x", "/" + "a" * 2000, "/healthz/", "/x%00"][i % 5]
            status, _, _ = request(port, path, method=method)
            want = 405 if method != "GET" else 404
            check(status == want, f"{method} {path[:20]}: {status}, expected {want}")

        # 4b. A NUL in the path is not the end of it; HTTP/1.1 needs Host (HTTP/1.0 does not).
        for path in ["/metrics%00.txt", "/metrics%00", "/healthz%00x", "/stats%2500"]:
            status, _, _ = request(port, path)
            check(status == 404, f"GET {path}: {status}, expected 404")
        for req, want in [(b"GET /metrics HTTP/1.1\r\n\r\n", b"400"),
                          (b"GET /metrics HTTP/1.0\r\n\r\n", b"200"),
                          (b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b"200")]:
            with socket.create_connection((HOST, port), timeout=5) as s:
                s.sendall(req)
                reply = s.recv(64)
            check(reply.split(b" ")[1:2] == [want], f"{req!r}: answered {reply!r}, expected {want.decode()}")

        # 5. Hundreds of normal scrapes, back to back: each quick.
        slow = 0
        for _ in range(300):
            a = time.monotonic()
            status, _, _ = request(port, "/metrics")
            check(status == 200, "back-to-back scrape")
            slow += time.monotonic() - a > 0.5
        check(slow <= 3, f"{slow} of 300 scrapes took over 0.5 s")

        rss1 = d.rss_kib()
        t1, f1 = time.monotonic(), get_stats(port)["live"]["frames"]
        captured = (f1["captured"] - f0["captured"]) / (t1 - t0)
        rate = (f1["published"] - f0["published"]) / (t1 - t0)
        status, _, body = request(port, "/healthz")
        check(status == 200, f"/healthz after the abuse: {status} {body!r}")
        check(rss1 - rss0 < 16 * 1024, f"RSS grew from {rss0} KiB to {rss1} KiB")
        # Capture keeps the source's clock whatever the HTTP side does. Published frames can fall
        # behind only through CPU starvation (2 cores shared with the abusing client): a loose guard.
        check(captured >= 0.95 * fps, f"frames captured at {captured:.1f}/s during the abuse (source: {fps}/s)")
        check(rate >= 0.8 * captured, f"frames published at {rate:.1f}/s of {captured:.1f}/s captured: {f1}")
    finally:
        rc = d.stop()
    check(rc == 0, f"zcpipe exit {rc}\n{d.stderr()}")
    print(f"abuse: ok (RSS {rss0} -> {rss1} KiB; {captured:.1f} fps captured, {rate:.1f} published; "
          + "; ".join(notes) + ")")


def case_reconnect():
    """100 local clients that reconnect the moment they are cut, half of them silent, half sending
    the start of a request and no more: every honest scrape (a fresh connection sending its request
    at once) still succeeds, from the first one."""
    port = free_port()
    limit = 16
    live = "      type: synthetic\n      width: 160\n      height: 120\n      fps: 25\n      pace: realtime"
    cfg = write("reconnect.yaml", f"""log:
  summary_interval_s: 0
metrics:
  http:
    port: {port}
    max_connections: {limit}
    timeout_s: 5
streams:""" + stream_yaml("live", live, model=False))
    d = Daemon(cfg)
    stop = threading.Event()
    reconnects = [0]

    def abusers(n=100):
        sel = selectors.DefaultSelector()

        count = [0]

        def connect():
            count[0] += 1
            s = socket.socket()
            s.settimeout(2)
            try:
                s.connect((HOST, port))
                if count[0] % 2:
                    s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")   # and never the rest
            except OSError:
                s.close()
                return
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        for _ in range(n):
            connect()
        while not stop.is_set():
            for key, _ in sel.select(timeout=0.05):
                s = key.fileobj
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:   # cut (or refused): straight back
                    sel.unregister(s)
                    s.close()
                    reconnects[0] += 1
                    connect()
            while len(sel.get_map()) < n and not stop.is_set():
                connect()
        for key in list(sel.get_map().values()):
            key.fileobj.close()
        sel.close()

    th = None
    try:
        wait_for("/healthz 200", lambda: try_request(port, "/healthz")[0] == 200 or d.proc.poll() is not None, 30)
        check(d.proc.poll() is None, "zcpipe exited early:\n" + d.stderr())
        th = threading.Thread(target=abusers)
        th.start()
        time.sleep(1.0)   # the slots are full of silent clients by now
        results = []
        start = time.monotonic()
        while time.monotonic() - start < 6:
            status, _, body = try_request(port, "/metrics", timeout=5)
            results.append(status if status else body[:60])
            time.sleep(0.1)
        bad = [r for r in results if r != 200]
        check(not bad, f"{len(bad)} of {len(results)} honest scrapes failed while 100 clients reconnected: {bad[:5]}")
        check(reconnects[0] > 100, f"the abusers were cut only {reconnects[0]} times: no pressure?")
    finally:
        stop.set()
        if th:
            th.join()
        rc = d.stop()
    check(rc == 0, f"zcpipe exit {rc}\n{d.stderr()}")
    print(f"reconnect: ok ({len(results)} honest scrapes all answered; abusers cut {reconnects[0]} times)")


def case_port():
    # Taken port: one clear line, exit 1 (not 78: systemd may restart it once the port is free).
    blocker = socket.socket()
    blocker.bind((HOST, 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    src = "      type: synthetic\n      width: 64\n      height: 48\n      fps: 30\n      pace: realtime"
    cfg = write("taken.yaml", f"metrics:\n  http:\n    port: {port}\nstreams:" + stream_yaml("a", src, model=False))
    p = subprocess.run([ZCPIPE, "--config", cfg], capture_output=True, text=True, timeout=60)
    blocker.close()
    line = f"metrics: cannot listen on 127.0.0.1:{port}: Address already in use"
    check(p.returncode == 1, f"port in use: exit {p.returncode}, expected 1\n{p.stderr}")
    check(p.stderr.count(line) == 1, f"port in use: expected one line {line!r} in:\n{p.stderr}")

    # Disabled: nothing listens, frames flow, clean exit.
    port = free_port()
    src2 = "      type: synthetic\n      width: 64\n      height: 48\n      frames: 60\n      pace: fast"
    cfg = write("off.yaml", f"log:\n  summary_interval_s: 0\nmetrics:\n  http:\n    enabled: false\n    port: {port}\n"
                            "streams:" + stream_yaml("a", src2, model=False))
    d = Daemon(cfg)
    refused = 0
    while d.proc.poll() is None and refused < 20:
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            fail("http disabled, yet something listens on the port")
        except ConnectionRefusedError:
            refused += 1
        time.sleep(0.05)
    rc = d.stop()
    check(rc == 0 and "60 published" in d.stderr(), f"http disabled: exit {rc}\n{d.stderr()}")

    # Non-loopback without allow_non_loopback: refused as bad configuration.
    cfg = write("open.yaml", "metrics:\n  http:\n    listen: 0.0.0.0\nstreams:" + stream_yaml("a", src2, model=False))
    p = subprocess.run([ZCPIPE, "--config", cfg], capture_output=True, text=True, timeout=60)
    check(p.returncode == 78 and "loopback" in p.stderr, f"non-loopback listen: exit {p.returncode}\n{p.stderr}")
    print("port: ok")


def thread_nice(pid, name):
    """The nice value of the daemon's thread called `name` (None when there is none)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if comm == name:
            return int(fields[16])   # field 19 of stat: nice
    return None


def case_scrapers():
    """Issue 40, 8: four scrapers that ask as fast as they can get at most max_requests_per_s answers
    a second in all (the others wait their turn, none refused), the server's threads run below the
    stages, and a fast file stream goes on publishing every frame. A fifth client closes its side
    after each request (shutdown(SHUT_WR), as `nc -N` does), so it cannot wait for its turn: it gets
    an answer every time, 429 with Retry-After when early, never a connection closed unanswered."""
    port = free_port()
    rate, seconds = 50, 4.0
    src = f"      type: file\n      path: {SAMPLE}\n      pace: fast\n      loop: true"
    cfg = write("scrapers.yaml", f"""log:
  summary_interval_s: 0
metrics:
  http:
    port: {port}
    max_requests_per_s: {rate}
streams:""" + stream_yaml("f", src, model=False))
    d = Daemon(cfg)
    try:
        wait_for("/healthz 200", lambda: try_request(port, "/healthz")[0] == 200 or d.proc.poll() is not None, 60)
        check(d.proc.poll() is None, "zcpipe exited early:\n" + d.stderr())
        time.sleep(1.0)   # the burst allowance refills
        counts, errors, stop = [0] * 4, [], time.monotonic() + seconds

        def scrape(i):
            c = http.client.HTTPConnection(HOST, port, timeout=10)
            while time.monotonic() < stop:
                try:
                    c.request("GET", ["/metrics", "/stats", "/healthz", "/metrics"][i])
                    r = c.getresponse()
                    r.read()
                    counts[i] += r.status in (200, 503)
                except (OSError, http.client.HTTPException) as e:
                    errors.append(repr(e))
                    c.close()
                    c = http.client.HTTPConnection(HOST, port, timeout=10)
            c.close()

        halves = {}

        def half_closer():
            while time.monotonic() < stop:
                data = b""
                try:
                    with socket.create_connection((HOST, port), timeout=10) as s:
                        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
                        s.shutdown(socket.SHUT_WR)
                        while True:
                            b = s.recv(65536)
                            if not b:
                                break
                            data += b
                except OSError as e:
                    errors.append("half-closed client: " + repr(e))
                time.sleep(0.02)   # not a connection a microsecond: --repeat must not run out of local ports
                head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
                m = re.match(r"HTTP/1\.[01] (\d{3})", head)
                key = m.group(1) if m else "unanswered" if not data else "garbled"
                if key == "429" and not re.search(r"(?im)^retry-after: *[1-9]\d*\r?$", head):
                    key = "429 without Retry-After"
                halves[key] = halves.get(key, 0) + 1
        f0 = get_stats(port)["f"]["frames"]
        t0 = time.monotonic()
        threads = [threading.Thread(target=scrape, args=(i,)) for i in range(4)]
        threads.append(threading.Thread(target=half_closer))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - t0
        f1 = get_stats(port)["f"]["frames"]
        nice = thread_nice(d.proc.pid, "zcp-http")
    finally:
        rc = d.stop()
    check(rc == 0, f"zcpipe exit {rc}\n{d.stderr()}")
    total = sum(counts)
    # the schedule: a quarter of a second at once, then one every 1/rate s (the get_stats above took two)
    bound = rate * took * 1.05 + rate / 4 + 4
    check(not errors, f"scrapers got errors: {errors[:3]}")
    check(set(halves) <= {"200", "429"} and halves.get("429", 0) > 0,
          f"the client that closes its side after its request: {halves} (expected 200s, and 429s when early)")
    check(0 < total <= bound, f"{total} answers in {took:.1f} s, at most {bound:.0f} allowed ({rate}/s)")
    check(nice == 10, f"the HTTP thread (zcp-http) runs at nice {nice}, expected 10")
    m = re.search(r"stream f: (\d+) frames captured, (\d+) published, [0-9.]+ fps, (\d+) dropped", d.stderr())
    check(m and m.group(1) == m.group(2) and m.group(3) == "0", f"the stream lost frames: {m and m.groups()}")
    print(f"scrapers: ok: 4 scrapers got {total} answers in {took:.1f} s (at most {bound:.0f}); a half-closing "
          f"client {halves}; the stream "
          f"published {f1['published'] - f0['published']} frames meanwhile; zcp-http at nice {nice}")


def case_exposed():
    """Issue 39, 4: beyond loopback the live page is off unless enabled, and can ask for a secret
    from a file (bearer token or basic-auth password); /metrics, /healthz and /stats stay open."""
    port = free_port()
    src = "      type: synthetic\n      width: 64\n      height: 48\n      fps: 20"
    head = f"log:\n  summary_interval_s: 0\nmetrics:\n  http:\n    port: {port}\n"
    exposed = head + "    listen: 0.0.0.0\n    allow_non_loopback: true\n"
    page_paths = ["/", "/live.js", "/live.css", "/api/latency", "/snapshot/a.jpg", "/snapshot/a.json"]

    def statuses(paths, headers=None):
        return {p: request(port, p, headers=headers)[0] for p in paths}

    def run(name, text, probe):
        cfg = write(name + ".yaml", text + "streams:" + stream_yaml("a", src, model=False))
        d = Daemon(cfg)
        try:
            wait_for("/healthz 200", lambda: try_request(port, "/healthz")[0] == 200 or d.proc.poll() is not None,
                     60)
            check(d.proc.poll() is None, f"{name}: zcpipe exited early:\n" + d.stderr())
            probe(d)
        finally:
            rc = d.stop()
        check(rc == 0, f"{name}: zcpipe exit {rc}\n{d.stderr()}")

    def open_numbers(name):
        got = statuses(["/metrics", "/healthz", "/stats"])
        check(set(got.values()) == {200}, f"{name}: {got}")

    # Loopback (the default): the page is on, no credential asked.
    run("loopback", head, lambda d: (open_numbers("loopback"),
                                     check(request(port, "/")[0] == 200, "loopback: / is not served")))

    # Beyond loopback, page: auto: off; snapshots are never taken.
    def off(d):
        open_numbers("exposed")
        got = statuses(page_paths)
        check(set(got.values()) == {404}, f"exposed, page auto: {got}")
        check("the live page is off" in d.stderr(), "exposed: the log does not say the page is off")
    run("exposed", exposed, off)

    # page: on with a secret: 401 (with a challenge) without it or with a wrong one; bearer or basic: 200.
    secret = "s3cret-" + "x" * 20
    auth = write("page.secret", secret + "\n", mode=0o600)
    guarded = exposed + f"    page: on\n    auth_file: {auth}\n"

    def creds(d):
        open_numbers("guarded")
        status, hdrs, _ = request(port, "/")
        check(status == 401 and hdrs.get("www-authenticate", "").startswith("Basic realm="),
              f"guarded /: {status} {hdrs}")
        for bad in ["Bearer nope", "Bearer " + secret[:-1], "Basic " + base64.b64encode(b"u:nope").decode(), "x"]:
            got = statuses(page_paths, {"Authorization": bad})
            check(set(got.values()) == {401}, f"guarded, {bad!r}: {got}")
        for good in ["Bearer " + secret, "Basic " + base64.b64encode(f"anyone:{secret}".encode()).decode()]:
            status, _, body = request(port, "/", headers={"Authorization": good})
            check(status == 200 and b"<html" in body.lower(), f"guarded, {good[:6]}: / answered {status}")
            got = request(port, "/api/latency", headers={"Authorization": good})[0]
            check(got == 200, f"guarded, {good[:6]}: /api/latency {got}")
    run("guarded", guarded, creds)

    # The secret's file must be the service's own: open to others, missing: refused at --check and at start (78).
    lax = write("lax.secret", secret + "\n", mode=0o644)
    for path, why in [(lax, "chmod 600"), (os.path.join(TMP, "none.secret"), "No such file")]:
        cfg = write("bad-auth.yaml", exposed + f"    page: on\n    auth_file: {path}\n" + "streams:" +
                    stream_yaml("a", src, model=False))
        for args in (["--check"], []):
            p = subprocess.run([ZCPIPE, "--config", cfg, *args], capture_output=True, text=True, timeout=60)
            check(p.returncode == 78 and why in p.stderr, f"auth_file {path} {args}: exit {p.returncode}\n{p.stderr}")
    print("exposed: ok: page off beyond loopback by default; on with a secret: 401 without it, 200 with a bearer "
          "token or basic auth; /metrics, /healthz, /stats open; a lax or missing secret file: 78")


CASES = {"scrape": case_scrape, "abuse": case_abuse, "reconnect": case_reconnect, "port": case_port,
         "scrapers": case_scrapers, "exposed": case_exposed}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: test_http.py " + "|".join(CASES), file=sys.stderr)
        sys.exit(64)
    if "http yes" not in version():
        skip("zcpipe built without http (libmicrohttpd)")
    CASES[sys.argv[1]]()
