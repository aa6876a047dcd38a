#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A real Prometheus (Debian's `prometheus`, exit 77 where it is not installed; tools/setup.sh
installs it) scraping a running zcpipe: 127.0.0.1, random ports, its own storage under a temp
dir, a scrape every second.

zcpipe runs a finite stream `cam` (400 frames at 100 fps, motion only) next to an endless idle
one, so the daemon and its /metrics stay up after `cam` ended and every later scrape sees the
same, final histogram. After two scrapes, and once Prometheus holds the final `cam` count,
the HTTP API must say:
  * up{job="zcpipe"} == 1, and at least two samples of it (two scrapes);
  * histogram_quantile(0.99, zcpipe_e2e_latency_seconds_bucket{stream="cam"}) is close to
    zcpipe's own p99 from /stats. The bound: Prometheus knows only the exported `le` bucket
    that holds the 99th-percentile rank and interpolates linearly inside it, so its answer is
    somewhere in that bucket; zcpipe's p99 is the midpoint of its log-linear bucket (within
    1/256 of the sample), and an exported count counts a value under a bound up to 1/128 above
    it (prom.h). So |prometheus - zcpipe| <= (width of the `le` bucket holding zcpipe's p99)
    + p99/128. With the bounds 50 us .. 10 s of prom.c this is at most half the value for
    latencies above 0.1 ms, and a wrong series, unit (ms for s) or rank would miss it;
  * the counters it stored equal those zcpipe serves (published, sink written);
and `promtool check metrics` accepts the exposition, `promtool check config` deploy/prometheus.yml.

Usage: test_prometheus.py [--have-mqtt=0|1] scrape
"""
import json
import os
import shutil
import subprocess

from zcptest import ROOT, ZCPIPE, check, free_port, skip, tmpdir
from test_mqtt_common import (Daemon, Prometheus, case_arg, daemon_config, http_get, keepalive_stream,
                              metric, metrics, settled, synthetic_stream, wait_for)

FRAMES = 400


def scalar(results, what):
    check(len(results) == 1, f"{what}: expected one series, got {json.dumps(results)[:500]}")
    return float(results[0]["value"][1])


def le_bounds(exposition, stream):
    """The finite `le` bounds zcpipe exports for the e2e histogram, ascending, in seconds."""
    out = []
    for line in exposition.splitlines():
        if line.startswith('zcpipe_e2e_latency_seconds_bucket{stream="%s",le="' % stream):
            le = line.split('le="')[1].split('"')[0]
            if le != "+Inf":
                out.append(float(le))
    check(out == sorted(out) and len(out) > 5, f"odd le bounds {out}")
    return out


def main():
    case_arg(("scrape",))
    tmp = tmpdir("zcp-prom-")
    if not shutil.which("prometheus"):
        skip("prometheus is not installed (tools/setup.sh installs it)")
    if "http yes" not in subprocess.run([ZCPIPE, "--version"], capture_output=True, text=True).stdout:
        skip("zcpipe built without the HTTP server (-Dhttp=disabled): nothing to scrape")
    http = free_port()
    cfg = daemon_config(tmp, "prom", [synthetic_stream("cam", FRAMES, 100, "{type: none}"), keepalive_stream()], http)
    d = Daemon(cfg, http)
    prom = Prometheus(tmp, [(http, {"host": "gpu-0"})])

    wait_for("two scrapes", lambda: (lambda r: r and float(r[0]["value"][1]) >= 2)(
        prom.query('count_over_time(up{job="zcpipe"}[1m])')), 60, interval=0.5)
    check(scalar(prom.query('up{job="zcpipe"}'), "up") == 1, "up is not 1")
    # cam's final numbers, in Prometheus (it ended; later scrapes repeat them).
    c = wait_for("cam to end", lambda: settled(http, "cam", FRAMES), 60)
    published = c["published"]   # FRAMES unless the source dropped some (counted)
    wait_for("cam's final count in prometheus", lambda: (lambda r: r and float(r[0]["value"][1]) == published)(
        prom.query('zcpipe_e2e_latency_seconds_count{stream="cam"}')), 60, interval=0.5)
    status, body = http_get(http, "/stats")
    check(status == 200, "/stats")
    stats = {s["name"]: s for s in json.loads(body)["streams"]}["cam"]
    check(stats["latency_ms"]["e2e"]["count"] == published, f"/stats count {stats['latency_ms']['e2e']['count']}")
    own = stats["latency_ms"]["e2e"]["p99"] / 1000.0
    theirs = scalar(prom.query('histogram_quantile(0.99, zcpipe_e2e_latency_seconds_bucket{stream="cam"})'),
                    "histogram_quantile")
    status, body = http_get(http, "/metrics")
    exposition = body.decode()
    bounds = le_bounds(exposition, "cam")
    i = next((k for k, b in enumerate(bounds) if b >= own), None)
    check(i is not None, f"p99 {own} s above every finite bucket")
    width = bounds[i] - (bounds[i - 1] if i > 0 else 0.0)
    bound = width + own / 128
    check(abs(theirs - own) <= bound,
          f"histogram_quantile(0.99) = {theirs:.6f} s, zcpipe's p99 = {own:.6f} s: apart by more than "
          f"{bound:.6f} s (the bucket ({bounds[i - 1] if i else 0}, {bounds[i]}] + p99/128)")

    # What Prometheus stored is what zcpipe serves.
    ms = metrics(http)
    for series, value in (('zcpipe_frames_published_total{stream="cam"}', published),
                          ('zcpipe_sink_written_total{stream="cam",sink="none"}',
                           metric(ms, "zcpipe_sink_written_total", stream="cam", sink="none"))):
        check(scalar(prom.query(series), series) == value, f"{series} in prometheus != {value}")
    check(scalar(prom.query('zcpipe_build_info{job="zcpipe",host="gpu-0"}'), "build_info") == 1, "target labels")

    tool = shutil.which("promtool")
    check(tool, "promtool missing although prometheus is installed")
    p = subprocess.run([tool, "check", "metrics"], input=exposition, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"promtool check metrics failed:\n{p.stdout}{p.stderr}")
    # The fleet's scrape config that docs/deploy.md shows is one Prometheus accepts.
    p = subprocess.run([tool, "check", "config", os.path.join(ROOT, "deploy", "prometheus.yml")],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"promtool check config deploy/prometheus.yml failed:\n{p.stdout}{p.stderr}")

    prom.stop()
    check(d.stop() == 0, d.stderr())
    print(f"prometheus: up 1; p99 {own * 1e3:.3f} ms from zcpipe, {theirs * 1e3:.3f} ms from histogram_quantile "
          f"(bound {bound * 1e3:.3f} ms); promtool accepts the exposition")


if __name__ == "__main__":
    main()
