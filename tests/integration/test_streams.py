#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Stream isolation (src/daemon/supervisor.c) through the real zcpipe binary.

  isolation    a file whose 50th frame is corrupt (a Y4M with a broken FRAME marker: y4mdec
               posts a bus error) next to a synthetic stream: the file stream fails at run
               time again and again and is re-opened alone after a growing back-off
               (restarts counted, state backoff in /stats and /metrics, the error as text,
               one log line per state change), /healthz is 503 naming it while it waits
               (any-down), the counters only grow across restarts, and the synthetic
               stream publishes every frame it captured (none dropped); SIGTERM exits 0.
               Then the same with metrics.http.healthz: all-down: /healthz stays 200 while
               the other stream is up, and still names the stream that is not.
  reload       a stream that failed for good (its file failed at run time, then was deleted:
               the re-open fails with ZCP_ERR_INPUT: state failed) is re-opened by a SIGHUP
               that points it at a good file, while the other stream keeps running untouched
               (its restarts stay 0, it drops nothing); a second SIGHUP removes it.
  never        the same failing file with restart: never: the process exits with the
               failure's code (1) and the log says why.
  reconfigure  an MPEG-TS made by concatenating 320x240 and 160x120 segments: decodebin
               changes caps mid-stream; the stream gets a new ring (reconfigures == 1, the
               log gives both geometries) and every decoded frame is published (none dropped
               as oversize), exit 0. Growing instead (160x120 then 320x240) under a
               pinned_budget the bigger ring does not fit: the stream fails with a message
               naming pinned_budget, and the process ends with 78.
  budget       pinned_budget: rings over it are refused at --check and at start (exit 78),
               with the figures per stream and a fix; K/M/G suffixes; under it: OK.
  start        streams that cannot open at start fail alone (issue 40, 1): beside a synthetic
               stream, a missing file, a file of garbage and a truncated MP4 are `failed` at once
               (an input that does not heal), a network stream whose server is down is up, its
               source waiting for the server, never restarted; the synthetic stream runs and loses
               nothing, /healthz names the others, /stats gives each one's error, READY=1 is not
               held back and SIGTERM exits 0. Every stream unable to open: exit 66 at once.
  keep         a reload touches only the streams whose effective config changed (issue 40, 2):
               adding or removing a file stream (which changes how many GStreamer streams share
               the CPUs) and a synthetic one, again and again, never restarts an unchanged file
               stream: its seq goes on without a gap or a repeat, no pts_ns comes twice, its
               restarts stay 0, and each reload says "N streams kept running".
  badmodel     a reload that points a running file stream at a model that cannot load (a
               NaN in its weights), one whose result lines MQTT cannot carry (100 detections)
               and one whose output directory is not there are refused before anything stops,
               each saying why: the stream goes on in one run (seq without a gap or a repeat,
               no pts_ns twice, restarts 0; stopped and rolled back, it would play its file
               again from the start); the next reload, with a model that loads, applies; that
               model's file damaged in place, a reload changing the stream reads it again and
               is refused.
  field        issue 11 "Done when": ONE zcpipe with three streams: a v4l2 camera (the fake
               camera, LD_PRELOAD; a synthetic stream when built without V4L2, said), an RTSP
               stream whose server (tests/integration/rtsp_server.py) is killed and started
               again repeatedly, and a file with a corrupt first GOP with restart: always,
               for about 70 s: the process never exits, the camera loses no frame (captured ==
               published, 0 dropped), the RTSP stream comes back after every outage (reconnects
               counted), the file's losses and restarts are in /metrics and /stats, /healthz
               names the stream that is down and is 200 again once all are up.

Usage: test_streams.py CASE   (env ZCPIPE, ZCP_SOURCE_ROOT, ZCP_BUILD_ROOT set by meson)
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zcptest  # noqa: E402
from zcptest import BUILD, ROOT, ZCPIPE, fail, free_port, skip, tmpdir, write  # noqa: E402

SAMPLE = os.path.join(ROOT, "samples", "vtest-h264.mp4")
SERVER = os.path.join(ROOT, "tests", "integration", "rtsp_server.py")
TMP = tmpdir("zcp-streams-")


def features():
    out = subprocess.run([ZCPIPE, "--version"], capture_output=True, text=True, timeout=60).stdout
    return {k: v == "yes" for k, v in re.findall(r"(\w+) (yes|no)", out)}


def need(*names):
    f = features()
    for n in names:
        if not f.get(n):
            skip(f"built without {n}")


def ffmpeg(*args):
    if not shutil.which("ffmpeg"):
        skip("ffmpeg not installed (tools/setup.sh installs it): cannot make the test files")
    r = subprocess.run(["ffmpeg", "-v", "error", "-y", *args], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("ffmpeg " + " ".join(args) + "\n" + r.stderr)


def head(http_port=None, extra=""):
    http = f"    port: {http_port}\n" if http_port else "    enabled: false\n"
    return f"metrics:\n  http:\n{http}{extra}log:\n  summary_interval_s: 2\nstreams:"


def stream(name, source, out, extra="", slots=6):
    return f"""
  - name: {name}
{extra}    source:
{source}
    ring:
      slots: {slots}
    gpu:
      backend: cpu
    model:
      enabled: false
    output:
      type: file
      path: {out}
"""


def get(port, path):
    """(status, body) or (None, "") when the server does not answer."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read().decode()
        finally:
            c.close()
    except (OSError, http.client.HTTPException):
        return None, ""


def stats(port):
    st, body = get(port, "/stats")
    try:
        return {s["name"]: s for s in json.loads(body)["streams"]} if st == 200 else {}
    except ValueError:
        return {}


def metric(text, name, labels):
    m = re.search(rf'^{name}{{{re.escape(labels)}}} ([0-9.e+-]+)$', text, re.M)
    return float(m.group(1)) if m else None


def rows(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.endswith("\n"):
                    out.append(json.loads(line))
    return out


LAST = None


class Daemon:
    def __init__(self, name, cfg, env=None):
        global LAST
        self.name = name
        self.err_path = os.path.join(TMP, name + ".stderr")
        self.err = open(self.err_path, "w")
        self.proc = subprocess.Popen([ZCPIPE, "--config", cfg], stdout=subprocess.DEVNULL, stderr=self.err,
                                     env=env)
        LAST = self

    def log(self):
        with open(self.err_path) as f:
            return f.read()

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail(f"{self.name}: still running after {timeout} s\n{self.log()[-4000:]}")
        return None

    def alive(self):
        if self.proc.poll() is not None:
            fail(f"{self.name}: zcpipe exited ({self.proc.returncode})\n{self.log()[-4000:]}")

    def stop(self, timeout=10.0):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.wait(timeout)
        self.err.close()
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_for(what, pred, timeout, daemon=None):
    """zcptest.wait_for, failing at once when `daemon` exits meanwhile."""
    def poll():
        if daemon:
            daemon.alive()
        return pred()
    return zcptest.wait_for(what, poll, timeout, interval=0.05, detail=lambda: LAST.log()[-4000:] if LAST else "")


def bad_y4m(name, frames=100, bad=50):
    """A Y4M whose frame `bad` has a broken FRAME marker: y4mdec fails there with a bus error."""
    good = os.path.join(TMP, "good.y4m")
    if not os.path.exists(good):
        ffmpeg("-f", "lavfi", "-i", "testsrc=size=160x120:rate=25", "-frames:v", str(frames), "-pix_fmt",
               "yuv420p", good)
    with open(good, "rb") as f:
        data = bytearray(f.read())
    at = -1
    for _ in range(bad + 1):
        at = data.index(b"FRAME", at + 1)
    data[at:at + 5] = b"XXXXX"
    path = os.path.join(TMP, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


SYNTH = "      type: synthetic\n      width: 64\n      height: 48\n      fps: 25"


# ---- isolation ----------------------------------------------------------------------------------


def isolation_run(policy):
    need("gstreamer", "http")
    port = free_port()
    bad = bad_y4m("bad.y4m")
    f_out, s_out = os.path.join(TMP, f"f-{policy}.jsonl"), os.path.join(TMP, f"s-{policy}.jsonl")
    src = f"      type: file\n      path: {bad}"
    cfg = write(f"iso-{policy}.yaml", head(port, f"    healthz: {policy}\n") +
                stream("f", src, f_out, "    restart_backoff_max_ms: 4000\n") +
                stream("s", SYNTH, s_out, "", slots=8).replace("      slots: 8", "      slots: 8\n      drop: block"))
    d = Daemon(f"iso-{policy}", cfg)
    seen_backoff = seen_503 = seen_200_down = False
    captured = []
    try:
        # Each run fails at frame 50 (at most 2 s at 25 fps, shorter than the 4 s cap, so the back-off
        # is never reset by a long run): 1 s, 2 s, 4 s, 4 s ...
        end = time.monotonic() + 120
        while time.monotonic() < end:
            d.alive()
            s = stats(port)
            if "f" in s:
                captured.append(s["f"]["frames"]["captured"])
                if s["f"]["stream_state"] == "backoff":
                    seen_backoff = True
                    if "source failed" not in s["f"]["last_error"]:
                        fail(f"backoff without the error as text: {s['f']}")
                    st, body = get(port, "/healthz")
                    if st == 503 and "stream f: backoff" in body:
                        seen_503 = True
                    if st == 200 and "stream f: backoff" in body:
                        seen_200_down = True
                if s["f"]["restarts"] >= 3 and seen_backoff and (seen_503 or seen_200_down):
                    break
            time.sleep(0.1)
        s = stats(port)
        st_m, text = get(port, "/metrics")
        if s["f"]["restarts"] < 3:
            fail(f"{policy}: {s['f']['restarts']} restarts in 120 s\n{d.log()[-3000:]}")
        if policy == "any-down" and not seen_503:
            fail("any-down: /healthz never 503 naming the stream in back-off")
        if policy == "all-down" and (seen_503 or not seen_200_down):
            fail(f"all-down: /healthz 503 while a stream was up ({seen_503}), or never named the stream in "
                 f"back-off ({seen_200_down})")
        if captured != sorted(captured):
            fail(f"the file stream's captured counter went back across restarts: {captured}")
        restarts = metric(text, "zcpipe_stream_restarts_total", 'stream="f"')
        if restarts is None or restarts < 3:
            fail(f"/metrics zcpipe_stream_restarts_total: {restarts}")
        if metric(text, "zcpipe_stream_state", 'stream="s",state="up"') != 1:
            fail("/metrics: the synthetic stream is not up")
        if 'zcpipe_stream_last_error_info{stream="f",error="source failed' not in text:
            fail("/metrics: no last error for the failing stream")
        if s["s"]["stream_state"] != "up" or s["s"]["restarts"] != 0:
            fail(f"the synthetic stream was touched: {s['s']}")
        rc = d.stop()
    finally:
        d.kill()
    log = d.log()
    if rc != 0:
        fail(f"{policy}: SIGTERM: exit {rc}\n{log[-3000:]}")
    changes = re.findall(r"f: (up|backoff) -> (up|backoff) \(([^)]*)", log)
    if not any(a == "up" and b == "backoff" and "retry in" in why for a, b, why in changes) or \
            not any(a == "backoff" and b == "up" and "restart" in why for a, b, why in changes):
        fail(f"no log line per state change:\n{log[-3000:]}")
    delays = [float(x) for x in re.findall(r"f: up -> backoff \(.*?retry in ([0-9.]+) s", log)]
    if delays[:3] != [1.0, 2.0, 4.0] or any(x != 4.0 for x in delays[3:]):
        fail(f"back-off {delays}, expected 1 s, 2 s, then capped at 4 s")
    m = re.search(r"stream s: (\d+) frames captured, (\d+) published, [0-9.]+ fps, (\d+) dropped", log)
    if not m or m.group(1) != m.group(2) or m.group(3) != "0" or int(m.group(2)) < 100:
        fail(f"the synthetic stream lost frames: {m.groups() if m else log[-2000:]}")
    # one run captures at most 50 frames (the 51st is broken): more is the sum over runs
    m = re.search(r"stream f: (\d+) frames captured, (\d+) published", log)
    if not m or int(m.group(1)) <= 50 or int(m.group(2)) > int(m.group(1)):
        fail(f"the file stream's counters did not add up over its runs: {m.groups() if m else None}")
    print(f"isolation {policy}: ok: {s['f']['restarts']} restarts, back-off {delays}, "
          f"synthetic {s['s']['frames']['published']} published, none lost; file {m.group(1)} captured over "
          f"{s['f']['restarts'] + 1} runs")


def case_isolation():
    isolation_run("any-down")
    isolation_run("all-down")


def case_reload():
    need("gstreamer", "http")
    port = free_port()
    bad = bad_y4m("bad-reload.y4m")
    good = os.path.join(TMP, "good.y4m")
    s_out = os.path.join(TMP, "rs.jsonl")
    synth = stream("s", SYNTH, s_out, "", slots=8).replace("      slots: 8", "      slots: 8\n      drop: block")

    def cfg_text(path, with_f=True):
        f = stream("f", f"      type: file\n      path: {path}", os.path.join(TMP, "rf.jsonl"),
                   "    restart_backoff_max_ms: 1000\n") if with_f else ""
        return head(port) + f + synth
    cfg = write("reload.yaml", cfg_text(bad))
    d = Daemon("reload", cfg)
    try:
        wait_for("the file stream to fail", lambda: stats(port).get("f", {}).get("stream_state") == "backoff", 60, d)
        os.unlink(bad)
        wait_for("the file stream given up", lambda: stats(port).get("f", {}).get("stream_state") == "failed", 30, d)
        st, body = get(port, "/healthz")
        if st != 503 or "stream f: failed for" not in body or "cannot re-open" not in body:
            fail(f"/healthz with a failed stream: {st} {body!r}")
        s_before = stats(port)["s"]
        write("reload.yaml", cfg_text(good))
        d.proc.send_signal(signal.SIGHUP)
        wait_for("the file stream re-opened by the reload", lambda: stats(port).get("f", {}).get("stream_state") == "up"
                 and stats(port)["f"]["frames"]["published"] > 0, 30, d)
        s_after = stats(port)["s"]
        if s_after["restarts"] != 0 or s_after["frames"]["published"] <= s_before["frames"]["published"] or \
                s_after["stream_state"] != "up":
            fail(f"the other stream was touched by the reload: {s_before} -> {s_after}")
        write("reload.yaml", cfg_text(good, with_f=False))
        d.proc.send_signal(signal.SIGHUP)
        wait_for("the file stream removed", lambda: "f" not in stats(port) and "s" in stats(port), 30, d)
        rc = d.stop()
    finally:
        d.kill()
    log = d.log()
    if rc != 0:
        fail(f"reload: exit {rc}\n{log[-3000:]}")
    if "f: backoff -> failed (cannot re-open" not in log or "f: failed -> up (reload)" not in log or \
            not re.search(r"reloaded .*: 1 stream kept running, 0 stopped, 1 started", log):
        fail(f"reload: the log does not show the states and the reload\n{log[-3000:]}")
    m = re.search(r"stream s: (\d+) frames captured, (\d+) published, [0-9.]+ fps, (\d+) dropped", log)
    if not m or m.group(1) != m.group(2) or m.group(3) != "0":
        fail(f"reload: the synthetic stream lost frames: {m.groups() if m else log[-2000:]}")
    print(f"reload: ok: failed -> up by SIGHUP, removed by the next; the other stream: {m.group(2)} frames, none lost")


# ---- failures at start (issue 40, 1) -----------------------------------------------------------


def truncated_mp4():
    """An MP4 whose index (moov, written last) is cut away: no demuxer can play it."""
    full = os.path.join(TMP, "tail-index.mp4")
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=160x120:rate=25", "-frames:v", "50", "-c:v", "libx264",
           "-pix_fmt", "yuv420p", full)
    with open(full, "rb") as f:
        data = f.read()
    path = os.path.join(TMP, "truncated.mp4")
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    return path


def case_start():
    need("gstreamer", "http")
    port = free_port()
    garbage = os.path.join(TMP, "garbage.mp4")
    with open(garbage, "wb") as f:
        f.write(bytes((i * 7919 + 13) & 0xff for i in range(200000)))
    down = free_port()   # nothing listens there
    net = (f"      type: network\n      path: http://127.0.0.1:{down}/cam.mjpg\n      connect_timeout_ms: 300\n"
           "      backoff_max_ms: 100")
    bad = {"missing": f"      type: file\n      path: {TMP}/no-such-file.mp4",
           "garbage": f"      type: file\n      path: {garbage}",
           "truncated": f"      type: file\n      path: {truncated_mp4()}"}
    s_out = os.path.join(TMP, "start-s.jsonl")
    cfg = write("start.yaml", head(port) +
                "".join(stream(n, src, os.path.join(TMP, f"start-{n}.jsonl")) for n, src in bad.items()) +
                stream("net", net, os.path.join(TMP, "start-net.jsonl"), "    restart_backoff_max_ms: 2000\n") +
                stream("s", SYNTH, s_out, "", slots=8).replace("      slots: 8", "      slots: 8\n      drop: block"))
    d = Daemon("start", cfg)
    try:
        wait_for("the synthetic stream running beside the others",
                 lambda: stats(port).get("s", {}).get("frames", {}).get("published", 0) >= 50, 60, d)
        # A network source whose server is down waits for it itself (docs/network.md): the
        # stream is up, its source in back-off, and the supervisor does not restart it.
        wait_for("the network stream waiting for its server",
                 lambda: stats(port).get("net", {}).get("state") in ("backoff", "opening")
                 and "waiting for it" in d.log(), 60, d)
        s = stats(port)
        for n in bad:
            if s[n]["stream_state"] != "failed" or "cannot open" not in s[n]["last_error"]:
                fail(f"start: {n}: {s[n]['stream_state']} {s[n]['last_error']!r}, expected failed (cannot open)")
        if s["net"]["stream_state"] != "up" or s["net"]["restarts"] != 0 or s["net"]["state"] not in ("backoff",
                                                                                                     "opening"):
            fail(f"start: net: stream {s['net']['stream_state']}, source {s['net']['state']}, "
                 f"{s['net']['restarts']} restarts, expected up, waiting for its server, 0 restarts")
        if not s["net"]["source_error"] or f"cannot connect ({s['net']['source_error']})" not in d.log():
            fail(f"start: net: /stats source_error {s['net']['source_error']!r}, expected the log's reason")
        if s["s"]["stream_state"] != "up" or s["s"]["restarts"] != 0:
            fail(f"start: the synthetic stream was touched: {s['s']}")
        st, body = get(port, "/healthz")
        if st != 503 or any(f"stream {n}: failed" not in body for n in bad):
            fail(f"start: /healthz {st} {body!r}")
        rc = d.stop()
    finally:
        d.kill()
    log = d.log()
    if rc != 0:
        fail(f"start: SIGTERM: exit {rc}\n{log[-3000:]}")
    for n in bad:
        if not re.search(rf"{n}: start -> failed \(cannot open: ", log):
            fail(f"start: no state line for {n}\n{log[-3000:]}")
    m = re.search(r"stream s: (\d+) frames captured, (\d+) published, [0-9.]+ fps, (\d+) dropped", log)
    if not m or m.group(1) != m.group(2) or m.group(3) != "0" or len(rows(s_out)) != int(m.group(2)):
        fail(f"start: the synthetic stream lost frames: {m.groups() if m else log[-2000:]}")
    print(f"start: ok: 3 inputs failed at start, the network stream waits for its server (source {s['net']['state']}), "
          f"the synthetic stream published {m.group(2)} frames, none lost; SIGTERM: 0")

    # Nothing can open: the process ends at once with the input's code.
    only = write("start-none.yaml", head() + stream("missing", bad["missing"], os.path.join(TMP, "none.jsonl")))
    t0 = time.monotonic()
    p = subprocess.run([ZCPIPE, "--config", only], capture_output=True, text=True, timeout=60)
    if p.returncode != 66 or time.monotonic() - t0 > 20 or "missing: start -> failed" not in p.stderr:
        fail(f"start: a config whose only stream cannot open: exit {p.returncode}\n{p.stderr[-2000:]}")
    print("start: ok: the only stream cannot open: exit 66")


# ---- reload touches only what changed (issue 40, 2) ---------------------------------------------


OUTCOMES = re.compile(r"reload refused|reload failed|reloaded ")


def reload(d, name, text, before):
    """Writes `text` to config `name`, sends SIGHUP and waits for the reload's outcome in the log
    (`before` outcomes were there already)."""
    write(name, text)
    d.proc.send_signal(signal.SIGHUP)
    wait_for(f"reload {before + 1}'s outcome", lambda: len(OUTCOMES.findall(d.log())) > before, 60, d)


def one_run(what, res, st, log):
    """The seq of result lines `res`, failing with `what` unless they come from one run of the
    stream (seq without a gap or a repeat, no pts_ns twice, its /stats `st` without restarts)."""
    seqs = [r["seq"] for r in res]
    pts = [r["pts_ns"] for r in res]
    if seqs != list(range(seqs[0], seqs[0] + len(seqs))) or len(set(pts)) != len(pts) or st["restarts"] != 0:
        fail(f"{what}: seq {seqs[:3]}..{seqs[-3:]} ({len(seqs)} lines), {len(pts) - len(set(pts))} repeated "
             f"pts_ns, {st['restarts']} restarts\n{log[-3000:]}")
    return seqs


def case_keep():
    need("gstreamer", "http")
    port = free_port()
    f_out = os.path.join(TMP, "keep-f.jsonl")
    sample = f"      type: file\n      path: {SAMPLE}\n      loop: true"
    base = head(port) + stream("f", sample, f_out)
    extra_file = stream("g", sample, os.path.join(TMP, "keep-g.jsonl"))
    extra_synth = stream("n", SYNTH, os.path.join(TMP, "keep-n.jsonl"))
    variants = [base + extra_file, base, base + extra_synth + extra_file, base + extra_synth, base + extra_file]
    cfg = write("keep.yaml", base)
    d = Daemon("keep", cfg)
    try:
        wait_for("the file stream's first frames", lambda: len(rows(f_out)) >= 5, 60, d)
        for i, v in enumerate(variants):
            reload(d, "keep.yaml", v, i)
            time.sleep(0.5)
        wait_for("the file stream going on", lambda: len(rows(f_out)) >= 40, 60, d)
        s = stats(port)
        rc = d.stop()
    finally:
        d.kill()
    log = d.log()
    if rc != 0:
        fail(f"keep: exit {rc}\n{log[-3000:]}")
    kept = [int(k) for k in re.findall(r"reloaded .*: (\d+) streams? kept running", log)]
    # f every time, and n where it stays
    if kept != [1, 1, 1, 2, 1] or "f: stopped" in log or "reload failed" in log or "reload refused" in log:
        fail(f"keep: streams kept per reload {kept}, expected [1, 1, 1, 2, 1] with f among them\n{log[-3000:]}")
    seqs = one_run("keep: the unchanged file stream restarted", rows(f_out), s["f"], log)
    print(f"keep: ok: {len(variants)} reloads, the unchanged file stream published {len(seqs)} lines in one run")


def poison(model_dir):
    """A float32 NaN written into the first weights of the model in `model_dir`."""
    shard = next(os.path.join(model_dir, n) for n in sorted(os.listdir(model_dir)) if n.endswith(".bin"))
    with open(shard, "r+b") as f:
        f.seek(4000)
        f.write(b"\x00\x00\xc0\x7f")


def case_badmodel():
    need("gstreamer", "http")
    port = free_port()
    good = os.path.join(TMP, "model")
    bad = os.path.join(TMP, "nan-model")
    for m in (good, bad):
        shutil.rmtree(m, ignore_errors=True)
        shutil.copytree(os.path.join(ROOT, "models", "centernet"), m)
    poison(bad)
    out = os.path.join(TMP, "badmodel.jsonl")
    sample = f"      type: file\n      path: {SAMPLE}\n      loop: true"
    base = head(port) + stream("f", sample, out)

    def with_model(path, more=""):
        m = f"    model:\n      path: {os.path.join(path, 'model.json')}\n      threads: 1\n{more}"
        return base.replace("    model:\n      enabled: false\n", m)

    refused = [
        with_model(bad),
        # result lines of up to 100 detections, too long for MQTT's 4,096-byte messages (no broker needed)
        with_model(good, "      max_detections: 100\n").replace(f"      type: file\n      path: {out}\n",
                                                                 "      type: mqtt\n      port: 1\n"),
        # the output moved to a directory that is not there
        base.replace(f"      path: {out}\n", f"      path: {os.path.join(TMP, 'absent', 'f.jsonl')}\n"),
    ]
    cfg = write("badmodel.yaml", base)
    d = Daemon("badmodel", cfg)
    try:
        wait_for("the file stream's first frames", lambda: len(rows(out)) >= 5, 60, d)
        for i, text in enumerate(refused):
            reload(d, "badmodel.yaml", text, i)
            n = len(rows(out))
            wait_for("the file stream going on", lambda: len(rows(out)) >= n + 5, 60, d)
        s = stats(port)
        n = len(rows(out))
        # a model that loads: applied
        write("badmodel.yaml", with_model(good))
        d.proc.send_signal(signal.SIGHUP)
        wait_for("the good reload", lambda: len(OUTCOMES.findall(d.log())) > 3, 60, d)
        wait_for("results of the detector", lambda: any("detections" in r for r in rows(out)), 60, d)
        # that model's file damaged in place, then a reload that changes the stream: read again, refused
        poison(good)
        write("badmodel.yaml", with_model(good, "      min_score: 0.4\n"))
        d.proc.send_signal(signal.SIGHUP)
        wait_for("the last reload", lambda: len(OUTCOMES.findall(d.log())) > 4, 60, d)
        rc = d.stop()
    finally:
        d.kill()
    log = d.log()
    if rc != 0:
        fail(f"badmodel: exit {rc}\n{log[-3000:]}")
    why = [r"f: \S+/nan-model/model\.json: weight '[^']+': value \d+ of \d+ is not finite",
           r"stream f: a result line can be \d+ bytes .* over the 4096-byte message limit",
           r"stream f: output.path \S+/absent/f.jsonl: its directory \S+ does not exist",
           r"f: \S+/model/model\.json: weight '[^']+': value \d+ of \d+ is not finite"]
    said = [bool(re.search(w, log)) for w in why]
    if OUTCOMES.findall(log) != ["reload refused"] * 3 + ["reloaded ", "reload refused"] or not all(said) or \
            log.count("f: stopped") != 1 or not re.search(r"f: stopped \(reload\): \d+ frames, ", log):
        fail(f"badmodel: reload outcomes {OUTCOMES.findall(log)}, reasons given {said}, "
             f"{log.count('f: stopped')} stops (1 expected, the good reload's, saying what it counted)\n"
             f"{log[-3000:]}")
    seqs = one_run("badmodel: a refused reload touched the stream", rows(out)[:n], s["f"], log)
    print(f"badmodel: ok: 3 reloads refused, each saying why, the stream went on ({len(seqs)} lines in one "
          f"run); a good one applied; a model damaged in place was read again and refused")


def case_never():
    need("gstreamer")
    bad = bad_y4m("bad-never.y4m")
    cfg = write("never.yaml", head() + stream("f", f"      type: file\n      path: {bad}", os.path.join(TMP, "nf.jsonl"),
                                             "    restart: never\n") +
                stream("s", SYNTH, os.path.join(TMP, "ns.jsonl")))
    p = subprocess.run([ZCPIPE, "--config", cfg], capture_output=True, text=True, timeout=120)
    if p.returncode != 1 or "f: up -> failed (restart: never)" not in p.stderr or \
            "a stream failed and is not restarted" not in p.stderr:
        fail(f"restart: never: exit {p.returncode}\n{p.stderr[-3000:]}")
    print("never: ok: exit 1, the failure ends the process")


# ---- reconfigure -----------------------------------------------------------------------------------


def concat(name, parts):
    segs = []
    offset = 0
    for i, (size, frames) in enumerate(parts):
        seg = os.path.join(TMP, f"{name}-{i}.ts")
        ffmpeg("-f", "lavfi", "-i", f"testsrc=size={size}:rate=25", "-frames:v", str(frames), "-c:v", "libx264",
               "-bf", "0", "-g", "25", "-pix_fmt", "yuv420p", "-output_ts_offset", str(offset), seg)
        offset += frames / 25
        segs.append(seg)
    path = os.path.join(TMP, name + ".ts")
    with open(path, "wb") as out:
        for seg in segs:
            with open(seg, "rb") as f:
                out.write(f.read())
    return path


def case_reconfigure():
    need("gstreamer")
    shrink = concat("shrink", [("320x240", 50), ("160x120", 40)])
    out = os.path.join(TMP, "shrink.jsonl")
    cfg = write("shrink.yaml", head() + stream("f", f"      type: file\n      path: {shrink}\n      pace: fast", out))
    p = subprocess.run([ZCPIPE, "--config", cfg], capture_output=True, text=True, timeout=120)
    log = p.stderr
    m = re.search(r"stream f: (\d+) frames captured, (\d+) published, [0-9.]+ fps, (\d+) dropped", log)
    acc = re.search(r"end of file \(pass 1\): (\d+) frames expected, (\d+) delivered", log)
    if p.returncode != 0 or not m or not acc:
        fail(f"reconfigure: exit {p.returncode}\n{log[-3000:]}")
    captured, published, dropped = map(int, m.groups())
    if int(acc.group(2)) != 90 or captured != 90 or published + dropped != captured or dropped != 0:
        fail(f"reconfigure: {captured} captured, {published} published, {dropped} dropped, "
             f"{acc.group(2)} delivered of 90\n{log[-3000:]}")
    if len(rows(out)) != published:
        fail(f"reconfigure: {len(rows(out))} lines for {published} published")
    if len(re.findall(r"f: new ring for the new geometry: 320x240 i420 -> 160x120 i420 \(reconfigure 1\)", log)) != 1 \
            or "reconfigure 2" in log or "oversize" in log:
        fail(f"reconfigure: not exactly one new ring, or frames dropped as oversize\n{log[-3000:]}")
    print(f"reconfigure: ok: 90 frames, {published} published, 1 new ring")

    # Growing over the budget: the first ring fits 1 MiB, the second (16 x 116 KiB) does not.
    grow = concat("grow", [("160x120", 30), ("320x240", 30)])
    cfg = write("grow.yaml", head().replace("streams:", "pinned_budget: 1M\nstreams:") +
                stream("f", f"      type: file\n      path: {grow}\n      pace: fast", os.path.join(TMP, "g.jsonl"),
                       slots=16) +
                stream("s", SYNTH + "\n      frames: 100\n      pace: fast", os.path.join(TMP, "gs.jsonl"), slots=2))
    p = subprocess.run([ZCPIPE, "--config", cfg], capture_output=True, text=True, timeout=120)
    if p.returncode != 78 or "f: up -> failed" not in p.stderr or "pinned_budget" not in p.stderr:
        fail(f"growing over pinned_budget: exit {p.returncode}\n{p.stderr[-3000:]}")
    print("reconfigure over pinned_budget: ok: the stream failed, exit 78")


# ---- budget -------------------------------------------------------------------------------------------


def case_budget():
    big = "      type: synthetic\n      width: 1920\n      height: 1080"
    cfg = write("budget.yaml", head().replace("streams:", "pinned_budget: 64M\nstreams:") +
                stream("cam0", big, os.path.join(TMP, "b0.jsonl"), slots=32) +
                stream("cam1", big, os.path.join(TMP, "b1.jsonl"), slots=16))
    for args in (["--check"], []):
        p = subprocess.run([ZCPIPE, "--config", cfg, *args], capture_output=True, text=True, timeout=60)
        err = p.stderr
        # 1920x1080 NV12 = 3110400 bytes, 760 pages of 4 KiB: 32 slots 95.0 MiB, 16 slots 47.5 MiB; and the
        # result blocks (2.6 KiB: room for 100 detections) with their moving masks (120x68 cells: 1 KiB a
        # slot): 3.6 KiB a slot, 115 KiB and 58 KiB, so 142.7 in all
        if p.returncode != 78 or not re.search(r"rings need 142\.7 MiB \(cam0 95\.1 MiB, cam1 47\.6 MiB\), over "
                                                r"pinned_budget 64\.0 MiB \(pinned_budget\); fix: ", err):
            fail(f"budget {args}: exit {p.returncode}\n{err[-2000:]}")
    ok = write("budget-ok.yaml", head().replace("streams:", "pinned_budget: 1G\nstreams:") +
               stream("cam0", big, os.path.join(TMP, "b0.jsonl"), slots=32))
    p = subprocess.run([ZCPIPE, "--config", ok, "--check"], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        fail(f"budget under 1G: exit {p.returncode}\n{p.stderr}")
    # The default (10% of MemTotal) counts too: a ring far beyond any machine's RAM is refused.
    huge = write("budget-huge.yaml", head() + stream("cam0", "      type: synthetic\n      width: 8192\n      "
                                                              "height: 8192", os.path.join(TMP, "h.jsonl"), slots=256))
    p = subprocess.run([ZCPIPE, "--config", huge, "--check"], capture_output=True, text=True, timeout=60)
    if p.returncode != 78 or "of" not in p.stderr or "GiB RAM" not in p.stderr:
        fail(f"budget default: exit {p.returncode}\n{p.stderr}")
    bad = write("budget-bad.yaml", head().replace("streams:", "pinned_budget: 12X\nstreams:") +
                stream("cam0", SYNTH, os.path.join(TMP, "x.jsonl")))
    p = subprocess.run([ZCPIPE, "--config", bad, "--check"], capture_output=True, text=True, timeout=60)
    if p.returncode != 78 or "pinned_budget" not in p.stderr:
        fail(f"budget 12X: exit {p.returncode}\n{p.stderr}")
    print("budget: ok: refused at --check and at start with the figures (78); 1G passes; the default refuses "
          "a 48 GiB ring")


# ---- field: issue 11's done-when ------------------------------------------------------------------------


def server_python():
    probe = "import gi; gi.require_version('GstRtspServer', '1.0'); from gi.repository import GstRtspServer"
    for py in [sys.executable, "/usr/bin/python3"]:
        if py and os.path.exists(py) and subprocess.run([py, "-c", probe], capture_output=True).returncode == 0:
            return py
    return None


class RtspServer:
    def __init__(self, py, port):
        self.py, self.port, self.proc = py, port, None

    def start(self):
        self.proc = subprocess.Popen([self.py, SERVER, str(self.port), SAMPLE], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        if self.proc.stdout.readline().strip() != "READY":
            self.proc.kill()
            fail(f"rtsp server did not start on port {self.port}")

    def kill(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def badgop_mp4():
    """An H.264 MP4 whose first keyframe is overwritten: the frames until the next one are lost."""
    full = os.path.join(TMP, "full.mp4")
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=160x120:rate=25", "-frames:v", "100", "-c:v", "libx264", "-bf", "0",
           "-g", "25", "-pix_fmt", "yuv420p", "-movflags", "+faststart", full)
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v", "-show_packets", "-show_entries",
                          "packet=pos,size", "-of", "json", full], capture_output=True, text=True, timeout=60).stdout
    pk = json.loads(out)["packets"][0]
    with open(full, "rb") as f:
        data = bytearray(f.read())
    key = int(pk["pos"])
    for i in range(16, int(pk["size"])):
        data[key + i] = (i * 131 + 7) & 0xff
    path = os.path.join(TMP, "badgop.mp4")
    with open(path, "wb") as g:
        g.write(data)
    return path


def case_field():
    need("gstreamer", "http")
    py = server_python()
    if not py:
        skip("no python3-gi with GstRtspServer (gir1.2-gst-rtsp-server-1.0) to run an RTSP server")
    env = dict(os.environ)
    fakecam = os.path.join(BUILD, "tests", "fakecam", "libfakecam.so")
    if features().get("v4l2") and os.path.exists(fakecam):
        node = os.path.join(TMP, "video0")
        open(node, "w").close()
        env.update(LD_PRELOAD=fakecam, FAKECAM_DEVICE=node, FAKECAM_WIDTH="64", FAKECAM_HEIGHT="48",
                   FAKECAM_FPS="25", FAKECAM_FORMAT="YUYV")
        # the sanitizer runtime must come first in an ASan build; the fake camera is preloaded before it
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
        cam_src = f"      type: v4l2\n      device: {node}\n      format: yuyv\n      width: 64\n      height: 48\n" \
                  "      fps: 25"
        healthy_kind = "v4l2 (fake camera)"
    else:
        cam_src = SYNTH
        healthy_kind = "synthetic (built without V4L2 or without the fake camera)"
    port, hport = free_port(), free_port()
    srv = RtspServer(py, port)
    srv.start()
    rtsp = (f"      type: network\n      path: rtsp://127.0.0.1:{port}/live\n      protocol: tcp\n"
            "      latency_ms: 100\n      timeout_ms: 1000\n      connect_timeout_ms: 3000\n      backoff_max_ms: 400")
    bad = f"      type: file\n      path: {badgop_mp4()}"
    outs = {n: os.path.join(TMP, f"field-{n}.jsonl") for n in ("cam", "rtsp", "file")}
    cfg = write("field.yaml", head(hport) +
                stream("cam", cam_src, outs["cam"], "", slots=16).replace("      slots: 16",
                                                                          "      slots: 16\n      drop: block") +
                stream("rtsp", rtsp, outs["rtsp"]) +
                stream("file", bad, outs["file"], "    restart: always\n    restart_backoff_max_ms: 2000\n"))
    d = Daemon("field", cfg, env=env)
    cycles = 0
    health_down = health_ok = False
    t0 = time.monotonic()
    try:
        wait_for("every stream's first frames", lambda: all(
            stats(hport).get(n, {}).get("frames", {}).get("published", 0) >= 5 for n in ("cam", "rtsp", "file")),
            60, d)
        while time.monotonic() - t0 < 70 or cycles < 8:
            if cycles >= 30:
                break
            before = stats(hport)["rtsp"]["frames"]["published"]
            srv.kill()
            # the outage seen where a user looks: /stats says the source is not up, /healthz names it
            wait_for(f"cycle {cycles}: the outage noticed",
                     lambda: stats(hport).get("rtsp", {}).get("state") != "up", 15, d)

            def down_named():
                st, body = get(hport, "/healthz")
                return st == 503 and "stream rtsp: no frame for" in body
            if wait_for(f"cycle {cycles}: /healthz naming the RTSP stream", down_named, 15, d):
                health_down = True
            time.sleep(0.3)
            srv.start()
            wait_for(f"cycle {cycles}: frames again after the server restart",
                     lambda: stats(hport).get("rtsp", {}).get("frames", {}).get("published", 0) >= before + 3, 30, d)
            cycles += 1
            time.sleep(0.5)
        # all up again at some moment: 200 "ok" (the file stream passes through back-off between its runs)
        def all_up():
            st, body = get(hport, "/healthz")
            return st == 200 and body.strip() == "ok"
        health_ok = wait_for("/healthz 200 with every stream up", all_up, 30, d)
        d.alive()
        s = stats(hport)
        _, text = get(hport, "/metrics")
        rc = d.stop()
    finally:
        d.kill()
        srv.kill()
    log = d.log()
    if rc != 0:
        fail(f"field: SIGTERM: exit {rc}\n{log[-3000:]}")
    cam, rt, fl = s["cam"], s["rtsp"], s["file"]
    if rt["frames"]["reconnects"] < cycles:
        fail(f"field: {rt['frames']['reconnects']} reconnects for {cycles} server restarts")
    if rt["stream_state"] != "up" or cam["stream_state"] != "up" or cam["restarts"] != 0:
        fail(f"field: the camera or the RTSP stream left the up state: {cam['stream_state']} {rt['stream_state']}")
    if fl["restarts"] < 2:
        fail(f"field: the file (restart: always) was re-opened {fl['restarts']} times in {time.monotonic() - t0:.0f} s")
    lost = fl["frames"]["file_expected"] - fl["frames"]["file_delivered"]
    m_exp = metric(text, "zcpipe_file_frames_expected_total", 'stream="file"')
    m_del = metric(text, "zcpipe_file_frames_delivered_total", 'stream="file"')
    if lost <= 0 or m_exp is None or m_del is None or m_exp - m_del <= 0:
        fail(f"field: the corrupt GOP's losses are not counted: /stats {fl['frames']}, /metrics {m_exp} {m_del}")
    if (metric(text, "zcpipe_stream_restarts_total", 'stream="file"') or 0) < 2:
        fail("field: the file's restarts are not in /metrics")
    m = re.search(r"stream cam: (\d+) frames captured, (\d+) published, [0-9.]+ fps, (\d+) dropped", log)
    if not m or m.group(1) != m.group(2) or m.group(3) != "0" or int(m.group(2)) < 25 * 50:
        fail(f"field: the camera lost frames: {m.groups() if m else log[-3000:]}")
    if len(rows(outs["cam"])) != int(m.group(2)):
        fail(f"field: {len(rows(outs['cam']))} camera lines for {m.group(2)} published")
    if not health_down or not health_ok:
        fail("field: /healthz did not follow the outages")
    print(f"field: ok: {time.monotonic() - t0:.0f} s, healthy stream {healthy_kind}: {m.group(2)} frames, none lost; "
          f"rtsp: {cycles} server restarts, {rt['frames']['reconnects']} reconnects, outage "
          f"{rt['frames']['outage_s']:.1f} s; file: {fl['restarts']} restarts, {lost} frames lost to the corrupt GOP "
          f"(expected {fl['frames']['file_expected']}, delivered {fl['frames']['file_delivered']}); the process never "
          f"exited")


def main():
    cases = {"isolation": case_isolation, "reload": case_reload, "start": case_start, "keep": case_keep, "badmodel": case_badmodel, "never": case_never, "reconfigure": case_reconfigure,
             "budget": case_budget, "field": case_field}
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        print("usage: test_streams.py " + "|".join(cases), file=sys.stderr)
        return 2
    cases[sys.argv[1]]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
