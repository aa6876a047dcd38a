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

Case `dashboard`: the Grafana dashboard's queries (config/grafana-dashboard.json) against two
daemons that both name their stream `cam0` (one at 50 fps, one at 10), scraped by one Prometheus.
Every query of every panel runs as Grafana would send it ($instance and $stream: all, a panel
repeated by instance: once per instance; $__rate_interval: 20s) and each series it returns must
carry every label its legend names, non-empty (an `instance` summed away is an empty host name);
a query that gives cam0 gives it once per host, never one blended series; the two hosts' cam0
frame rates come back apart (about 50 and 10 fps).

Usage: test_prometheus.py [--have-mqtt=0|1] scrape|dashboard
"""
import json
import os
import re
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


def dashboard_targets():
    """(panel title, repeat variable or None, target) of every query of the dashboard."""
    with open(os.path.join(ROOT, "config", "grafana-dashboard.json")) as f:
        dash = json.load(f)

    def walk(panels):
        for p in panels:
            yield p
            yield from walk(p.get("panels", []))
    for p in walk(dash["panels"]):
        for t in p.get("targets", []):
            yield p.get("title", "?"), p.get("repeat"), t


def case_dashboard(tmp):
    rates = {"a": 50, "b": 10}
    ports, daemons = {}, {}
    for name, fps in rates.items():
        ports[name] = free_port()
        cfg = daemon_config(tmp, "dash-" + name, [synthetic_stream("cam0", 0, fps, "{type: none}")], ports[name])
        daemons[name] = Daemon(cfg, ports[name])
    prom = Prometheus(tmp, [(ports[n], {"host": "gpu-" + n}) for n in rates])
    instances = {f"127.0.0.1:{ports[n]}": n for n in rates}
    wait_for("25 scrapes of both daemons", lambda: (lambda r: len(r) == 2 and all(float(x["value"][1]) >= 25 for x in r))(
        prom.query('count_over_time(up{job="zcpipe"}[1m])')), 90, interval=0.5)

    checked = 0
    for title, repeat, t in dashboard_targets():
        expr, legend = t["expr"], t.get("legendFormat", "")
        # a repeated panel's $instance is one value, regex-escaped as Grafana does (and \\ in PromQL's string)
        values = [(inst, '"' + re.escape(inst).replace("\\", "\\\\") + '"') for inst in instances] \
            if repeat == "instance" else [(None, '".*"')]
        for inst, value in values:
            q = expr.replace('"$instance"', value).replace("$instance", ".*").replace("$stream", ".*")
            q = q.replace("$__rate_interval", "20s")
            check("$" not in q, f"{title}: a Grafana variable the test does not know in {q}")
            res = prom.query(q)
            for r in res:
                labels = r["metric"]
                for name in re.findall(r"{{\s*(\w+)\s*}}", legend):
                    check(labels.get(name), f"{title}: {q}\n  gives a series without '{name}' for its legend "
                          f"{legend!r}: {labels}")
                if inst:
                    check(labels.get("instance") == inst, f"{title} (repeated for {inst}): a series of another "
                          f"host or of none: {labels}")
            # cam0's series, by their labels but the target's (stage, sink...): each once per host
            cam0 = {}
            for r in res:
                if r["metric"].get("stream") == "cam0":
                    rest = tuple(sorted((k, v) for k, v in r["metric"].items() if k not in ("instance", "host")))
                    cam0.setdefault(rest, []).append(r["metric"].get("instance"))
            if not inst and "> 0" not in q:
                for rest, insts in cam0.items():
                    check(sorted(insts) == sorted(instances), f"{title}: {q}\n  gives cam0 {dict(rest)} for the "
                          f"instances {insts}, not once per host {sorted(instances)}")
            checked += 1

    fps = {r["metric"]["instance"]: float(r["value"][1]) for r in prom.query(
        'rate(zcpipe_frames_published_total{stream="cam0"}[20s])')}
    for inst, name in instances.items():
        check(abs(fps.get(inst, 0) - rates[name]) < rates[name] * 0.3,
              f"{inst} cam0: {fps.get(inst)} frames/s in Prometheus, expected about {rates[name]}")
    prom.stop()
    for d in daemons.values():
        check(d.stop() == 0, d.stderr())
    print(f"dashboard: {checked} queries over two hosts' cam0: one series per host in each, every legend label "
          f"present; fps {', '.join(f'{v:.1f}' for v in fps.values())}")


def main():
    case = case_arg(("scrape", "dashboard"))
    tmp = tmpdir("zcp-prom-")
    if not shutil.which("prometheus"):
        skip("prometheus is not installed (tools/setup.sh installs it)")
    if "http yes" not in subprocess.run([ZCPIPE, "--version"], capture_output=True, text=True).stdout:
        skip("zcpipe built without the HTTP server (-Dhttp=disabled): nothing to scrape")
    if case == "dashboard":
        case_dashboard(tmp)
        return
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
