#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The GStreamer sources (src/capture/gst.c) through the real zcpipe binary.

  rtsp        a real RTSP server (gst-rtsp-server, tests/integration/rtsp_server.py) on
              127.0.0.1 serves the bundled sample; during ONE zcpipe run it is killed and
              started again 20 times: the network stream comes back each time (published
              grows after every restart), reconnects == 20, the outage time is at least the
              time the server was down and outage frames agree with it at the stream's 10 fps;
              a file stream (the sample, looped) in the same process drops nothing, and its seq
              and 100 ms timeline have no hole;
              frames carry the sender's clock (RTCP) near the wall clock; then the server is
              frozen (SIGSTOP: connections hang) and SIGTERM still ends zcpipe at once, exit 0.
  outage      an RTSP camera that is not there when zcpipe starts, and later gone for minutes: started
              with no server on the port, zcpipe runs (no exit 66), the stream waits (state backoff or
              opening, never failed) for 20 s of attempts every 250 ms, then the server comes and
              frames flow at the stream's own 768x576 (a new ring for it); then the server is killed
              for 125 s: the stream keeps waiting (never failed, the process up), its threads and
              descriptors do not grow with the ~400 attempts, and when the server is back frames flow
              again, 1 reconnect, the outage at least 125 s.
  mjpeg       HTTP multipart MJPEG from a server started here: frames flow (320x240), the
              server is killed and started again 3 times, 3 reconnects, the stream comes back.
  accounting  files made here with ffmpeg: intact ones (MPEG-4 Part 2 AVI with B-frames,
              Cinepak AVI, a variable-rate MP4 with a 1 s pause, an interlaced H.264, an
              interlaced MPEG-2 program stream whose packets each carry part of a frame) report
              0 missing and expected == delivered == the frames encoded; an MP4 cut without
              re-encoding (an edit list after its keyframe) counts only the frames it presents,
              none missing; a recording cut to 77
              of 200 frames reports 200 expected, 77 delivered; a leading corrupt GOP reports
              what the decoder lost; frozen timestamps are counted and flagged pts_repeat;
              /metrics and /stats carry the expected/delivered counters (a looped cut file:
              expected * 77 == delivered * 200 at any scrape).
  formats     H.264 4:4:4, 4:2:2 and High 10, HEVC Main 10 and GIF: every frame published,
              the log names the converted format, conversions == frames (each encoder
              missing: that file is skipped and said; all missing: exit 77).
  signals     a FIFO with no writer as a file path: SIGTERM/SIGINT while start-up waits for it
              stop zcpipe within 2 s with exit 0 (also as a file:// URI), without a signal it
              gives up after 10 s (66); a writer that sends 10 frames then goes quiet does not
              delay SIGTERM; SIGTERM and SIGINT while a network stream is opening (a server that
              accepts and never answers) stop zcpipe within 2 s with exit 0.

Usage: test_gst.py CASE   (env ZCPIPE, ZCP_SOURCE_ROOT set by meson)
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zcptest  # noqa: E402
from zcptest import ROOT, ZCPIPE, fail, free_port, skip, tmpdir, write  # noqa: E402

SAMPLE = os.path.join(ROOT, "samples", "vtest-h264.mp4")
SERVER = os.path.join(ROOT, "tests", "integration", "rtsp_server.py")
# The mjpeg-server child (case_mjpeg) serves its parent's directory and is killed: it makes none.
TMP = None if sys.argv[1:2] == ["mjpeg-server"] else tmpdir("zcp-gst-")
CYCLES = 20


def need_gst():
    out = subprocess.run([ZCPIPE, "--version"], capture_output=True, text=True, timeout=60).stdout
    if "gstreamer yes" not in out:
        skip("built without GStreamer")


def rows(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.endswith("\n"):
                    out.append(json.loads(line))
    return out


def head(http_port=None):
    if http_port:
        return f"metrics:\n  http:\n    port: {http_port}\nlog:\n  summary_interval_s: 0\nstreams:"
    return "metrics:\n  http:\n    enabled: false\nlog:\n  summary_interval_s: 0\nstreams:"


def stream(name, source, out):
    return f"""
  - name: {name}
    source:
{source}
    ring:
      slots: 6
    gpu:
      backend: cpu
    model:
      enabled: false
    output:
      type: file
      path: {out}
"""


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.read().decode()
    finally:
        c.close()


def stats(port):
    try:
        return {s["name"]: s for s in json.loads(get(port, "/stats"))["streams"]}
    except (OSError, http.client.HTTPException, ValueError):
        return {}


def metric(text, name, stream_name):
    m = re.search(rf'^{name}{{stream="{re.escape(stream_name)}"}} ([0-9.e+]+)$', text, re.M)
    return float(m.group(1)) if m else None


LAST_LOG = None   # the running daemon's log, for a timeout's message


class Daemon:
    def __init__(self, name, cfg):
        global LAST_LOG
        self.name = name
        self.err_path = os.path.join(TMP, name + ".stderr")
        self.err = open(self.err_path, "w")
        self.proc = subprocess.Popen([ZCPIPE, "--config", cfg], stdout=subprocess.DEVNULL, stderr=self.err)
        LAST_LOG = lambda: self.log()[-3000:]   # noqa: E731

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

    def stop(self, sig=signal.SIGTERM, timeout=5.0):
        """Sends `sig`; returns (exit code, seconds to exit)."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        rc = self.wait(timeout)
        self.err.close()
        return rc, time.monotonic() - t0


def wait_for(what, pred, timeout):
    return zcptest.wait_for(what, pred, timeout, interval=0.05, detail=LAST_LOG)


# ---- rtsp -------------------------------------------------------------------------------------


def server_python():
    """An interpreter with gst-rtsp-server's introspection data (python3-gi, gir1.2-gst-rtsp-server-1.0)."""
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
        line = self.proc.stdout.readline()
        if line.strip() != "READY":
            self.proc.kill()
            fail(f"rtsp server did not start on port {self.port}")

    def kill(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def case_rtsp():
    need_gst()
    py = server_python()
    if not py:
        skip("no python3-gi with GstRtspServer (gir1.2-gst-rtsp-server-1.0) to run an RTSP server")
    port, hport = free_port(), free_port()
    srv = RtspServer(py, port)
    srv.start()
    cam_out, ref_out = os.path.join(TMP, "cam.jsonl"), os.path.join(TMP, "ref.jsonl")
    cam = (f"      type: network\n      path: rtsp://127.0.0.1:{port}/live\n      protocol: tcp\n"
           "      latency_ms: 100\n      timeout_ms: 1000\n      connect_timeout_ms: 3000\n      backoff_max_ms: 400")
    # a file (back-pressure, never drops: a loss could only come from the other stream), looped, at its 10 fps
    ref = f"      type: file\n      path: {SAMPLE}\n      loop: true"
    cfg = write("rtsp.yaml", head(hport) + stream("cam", cam, cam_out) + stream("ref", ref, ref_out))
    d = Daemon("rtsp", cfg)
    try:
        wait_for("the network stream's first frames", lambda: stats(hport).get("cam", {}).get("frames", {})
                 .get("published", 0) >= 10, 30)
        # RTCP sender reports come every few seconds: once one came, frames carry the sender's clock
        wait_for("a frame with the sender's clock", lambda: any("sender_ns" in r for r in rows(cam_out)), 30)
        down_total = 0.0
        for i in range(CYCLES):
            before = stats(hport)["cam"]["frames"]["published"]
            srv.kill()
            t_down = time.monotonic()
            wait_for(f"cycle {i}: the loss noticed", lambda: stats(hport).get("cam", {}).get("state") != "up", 10)
            time.sleep(0.2)
            down_total += time.monotonic() - t_down
            srv.start()
            wait_for(f"cycle {i}: frames again after the restart",
                     lambda: stats(hport).get("cam", {}).get("frames", {}).get("published", 0) >= before + 3, 20)
        s = stats(hport)
        text = get(hport, "/metrics")
        cam_s, ref_s = s["cam"]["frames"], s["ref"]["frames"]
        if cam_s["reconnects"] != CYCLES:
            fail(f"reconnects {cam_s['reconnects']}, expected {CYCLES}")
        if cam_s["outage_s"] < down_total - 0.001 * CYCLES:
            fail(f"outage {cam_s['outage_s']:.3f} s is shorter than the {down_total:.3f} s the server was down")
        # 10 fps: each outage of d seconds costs floor(d * 10) frames
        if not (down_total * 10 - CYCLES <= cam_s["outage_frames"] <= cam_s["outage_s"] * 10 + 1):
            fail(f"outage frames {cam_s['outage_frames']} disagree with {cam_s['outage_s']:.3f} s at 10 fps")
        if metric(text, "zcpipe_reconnects_total", "cam") != CYCLES or \
                metric(text, "zcpipe_source_outage_frames_total", "cam") is None or \
                (metric(text, "zcpipe_source_outage_seconds_total", "cam") or 0) < down_total - 0.02:
            fail("the outage is not in /metrics")
        if ref_s["dropped"] != 0 or ref_s["reconnects"] != 0 or ref_s["decode_gaps"] != 0:
            fail(f"the file stream lost frames: {ref_s}")

        # A server that goes quiet (frozen: connections hang): SIGTERM still ends zcpipe at once.
        os.kill(srv.proc.pid, signal.SIGSTOP)
        time.sleep(1.5)
        rc, took = d.stop(signal.SIGTERM, timeout=5)
        os.kill(srv.proc.pid, signal.SIGCONT)
        if rc != 0 or took > 2.0:
            fail(f"SIGTERM with a frozen server: exit {rc} after {took:.2f} s\n{d.log()[-3000:]}")
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
        srv.kill()

    refs = rows(ref_out)
    if [r["seq"] for r in refs] != list(range(len(refs))) or len(refs) < 30:
        fail(f"the file stream's results have holes ({len(refs)} lines)")
    if any(b["pts_ns"] - a["pts_ns"] != 100_000_000 for a, b in zip(refs, refs[1:])):
        fail("the file stream's timeline has a hole (pts steps other than 100 ms)")
    cams = rows(cam_out)
    synced = [r for r in cams if "sender_ns" in r]
    now = time.time_ns()
    if not synced:
        fail("no frame carries the sender's clock (RTCP)")
    if any(abs(r["sender_ns"] - now) > 600 * 10**9 for r in synced):
        fail("a sender clock is not near the wall clock")
    if any(not (0 < r["t"]["capture"] <= r["t"]["convert_enter"]) for r in cams):
        fail("a network frame's capture time is not before its conversion")
    print(f"rtsp: ok: {CYCLES} restarts, {cam_s['reconnects']} reconnects, outage {cam_s['outage_s']:.2f} s "
          f"(server down {down_total:.2f} s), {cam_s['outage_frames']} frames; {cam_s['published']} published; "
          f"{len(synced)}/{len(cams)} frames with the sender's clock; the file stream: {len(refs)} frames, "
          f"none lost; SIGTERM with a frozen server: {took:.2f} s")


def case_outage():
    need_gst()
    py = server_python()
    if not py:
        skip("no python3-gi with GstRtspServer (gir1.2-gst-rtsp-server-1.0) to run an RTSP server")
    port, hport = free_port(), free_port()
    out = os.path.join(TMP, "outage.jsonl")
    cam = (f"      type: network\n      path: rtsp://127.0.0.1:{port}/live\n      protocol: tcp\n"
           "      timeout_ms: 1000\n      connect_timeout_ms: 1000\n      backoff_max_ms: 250")
    d = Daemon("outage", write("outage.yaml", head(hport) + stream("cam", cam, out)))
    srv = RtspServer(py, port)

    def state():
        if d.proc.poll() is not None:
            fail(f"zcpipe exited ({d.proc.returncode}) while its camera was away\n{d.log()[-3000:]}")
        return stats(hport).get("cam", {})

    def resources():
        return len(os.listdir(f"/proc/{d.proc.pid}/task")), len(os.listdir(f"/proc/{d.proc.pid}/fd"))

    def wait_away(seconds, what):
        """The camera away for `seconds`: the stream waits, never fails; its threads and fds stay."""
        t0 = time.monotonic()
        time.sleep(2)
        base = resources()
        seen = set()
        while time.monotonic() - t0 < seconds:
            st = state().get("state")
            seen.add(st)
            if st in ("failed", "ended"):
                fail(f"{what}: the stream {st} after {time.monotonic() - t0:.0f} s\n{d.log()[-3000:]}")
            time.sleep(0.5)
        now = resources()
        if now[0] > base[0] + 3 or now[1] > base[1] + 8:
            fail(f"{what}: threads/fds grew from {base} to {now} while connecting again and again")
        return seen, base, now

    try:
        wait_for("zcpipe to run with its camera absent", lambda: state().get("state") is not None, 30)
        seen, base, now = wait_away(20, "absent at start")
        if "waiting for it" not in d.log():
            fail(f"the log does not say it waits for the camera\n{d.log()[-2000:]}")
        srv.start()
        wait_for("frames once the server came", lambda: state().get("frames", {}).get("published", 0) >= 10, 30)
        s = state()
        if (s.get("width"), s.get("height")) != (768, 576):
            fail(f"the ring is {s.get('width')}x{s.get('height')}, the stream 768x576")
        before = s["frames"]["published"]
        srv.kill()
        t_down = time.monotonic()
        seen2, base2, now2 = wait_away(125, "gone for minutes")
        down = time.monotonic() - t_down
        srv.start()
        wait_for("frames again after minutes away",
                 lambda: state().get("frames", {}).get("published", 0) >= before + 10, 30)
        f = state()["frames"]
        if f["reconnects"] != 1 or f["outage_s"] < down - 1:
            fail(f"after {down:.0f} s away: reconnects {f['reconnects']}, outage {f['outage_s']:.1f} s")
        rc, took = d.stop()
        if rc != 0:
            fail(f"exit {rc}\n{d.log()[-3000:]}")
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
        srv.kill()
    print(f"outage: ok: absent at start for 20 s (states {sorted(x for x in seen if x)}, threads/fds {base} -> {now}), "
          f"then 768x576 frames; gone {down:.0f} s (states {sorted(x for x in seen2 if x)}, threads/fds {base2} -> "
          f"{now2}), back with 1 reconnect, outage {f['outage_s']:.1f} s")


def mjpeg_server(port, frames_dir):
    """Runs in a child process: HTTP multipart MJPEG at 10 fps, looping over the JPEGs of frames_dir."""
    import glob
    import http.server
    frames = [open(f, "rb").read() for f in sorted(glob.glob(os.path.join(frames_dir, "*.jpg")))]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "multipart/x-mixed-replace; boundary=zcpframe")
            self.end_headers()
            i = 0
            try:
                while True:
                    f = frames[i % len(frames)]
                    i += 1
                    self.wfile.write(b"--zcpframe\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n"
                                     % len(f) + f + b"\r\n")
                    time.sleep(0.1)
            except OSError:
                pass

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print("READY", flush=True)
    srv.serve_forever()


def case_mjpeg():
    """HTTP MJPEG (multipart): frames flow, the server restarts 3 times, the stream comes back each time."""
    need_gst()
    if not shutil.which("ffmpeg"):
        skip("ffmpeg not installed (tools/setup.sh installs it): cannot make the JPEG frames")
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=320x240:rate=10", "-frames:v", "10", os.path.join(TMP, "f%02d.jpg"))
    port, hport = free_port(), free_port()

    def start():
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "mjpeg-server", str(port), TMP],
                             stdout=subprocess.PIPE, text=True)
        if p.stdout.readline().strip() != "READY":
            fail("mjpeg server did not start")
        return p

    out = os.path.join(TMP, "mjpeg.jsonl")
    src = (f"      type: network\n      path: http://127.0.0.1:{port}/stream.mjpg\n      timeout_ms: 1000\n"
           "      connect_timeout_ms: 3000\n      backoff_max_ms: 400")
    srv = start()
    d = Daemon("mjpeg", write("mjpeg.yaml", head(hport) + stream("mj", src, out)))
    cycles = 3
    try:
        for i in range(cycles + 1):
            wait_for(f"frames after start {i}", lambda: stats(hport).get("mj", {}).get("state") == "up" and
                     stats(hport)["mj"]["frames"]["published"] >= 5 * (i + 1), 30)
            if i == cycles:
                break
            srv.kill()
            srv.wait()
            wait_for(f"cycle {i}: the loss noticed", lambda: stats(hport).get("mj", {}).get("state") != "up", 10)
            srv = start()
        s = stats(hport)["mj"]
        rc, _ = d.stop()
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
        srv.kill()
        srv.wait()
    if rc != 0 or s["frames"]["reconnects"] != cycles or s["width"] != 320:
        fail(f"mjpeg: exit {rc}, {s}\n{d.log()[-3000:]}")
    print(f"mjpeg: ok: {s['frames']['published']} frames, {cycles} server restarts, {cycles} reconnects")


# ---- files made with ffmpeg ------------------------------------------------------------------


def ffmpeg(*args):
    r = subprocess.run(["ffmpeg", "-v", "error", "-y", *args], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("ffmpeg " + " ".join(args) + "\n" + r.stderr)


def packets(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v", "-show_packets", "-show_entries",
                          "packet=pos,size,flags", "-of", "json", path], capture_output=True, text=True,
                         timeout=60).stdout
    return json.loads(out)["packets"]


def play(name, path, extra=""):
    """Runs one file to its end; returns (exit code, log, rows, accounting dict from the end-of-file line)."""
    out = os.path.join(TMP, name + ".jsonl")
    src = f"      type: file\n      path: {path}\n      pace: fast" + extra
    cfg = write(name + ".yaml", head() + stream(name, src, out))
    p = subprocess.run([ZCPIPE, "--config", cfg], capture_output=True, text=True, timeout=120)
    m = re.search(r"end of file \(pass 1\): (\d+) frames expected, (\d+) delivered, (\d+) missing.*?"
                  r"(\d+) corrupt, (\d+) pts repeats", p.stderr)
    acc = dict(zip(["expected", "delivered", "missing", "corrupt", "repeats"], map(int, m.groups()))) if m else None
    return p.returncode, p.stderr, rows(out), acc


def expect(name, path, expected, delivered, repeats=0):
    rc, log, res, acc = play(name, path)
    if rc != 0 or not acc:
        fail(f"{name}: exit {rc}\n{log[-3000:]}")
    if (acc["expected"], acc["delivered"], acc["missing"], acc["repeats"]) != \
            (expected, delivered, expected - delivered, repeats):
        fail(f"{name}: {acc}, expected {expected} expected, {delivered} delivered, {repeats} repeats\n{log[-3000:]}")
    published = len(res)
    if published + acc["corrupt"] != delivered:
        fail(f"{name}: {published} published + {acc['corrupt']} corrupt != {delivered} delivered")
    flagged = sum(1 for r in res if r.get("pts_repeat"))
    if flagged != repeats:
        fail(f"{name}: {flagged} lines flagged pts_repeat, {repeats} counted")
    print(f"accounting {name}: ok: {acc}")
    return acc


def case_accounting():
    need_gst()
    if not shutil.which("ffmpeg") or not shutil.which("ffprobe"):
        skip("ffmpeg/ffprobe not installed (tools/setup.sh installs them): cannot make the test files")
    t = lambda n: os.path.join(TMP, n)   # noqa: E731
    src = ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25"]

    # Intact files: nothing missing, whatever their timestamps look like.
    ffmpeg(*src, "-frames:v", "270", "-c:v", "mpeg4", "-bf", "2", "-vtag", "DX50", t("bframes.avi"))
    # B-frames in AVI: its index gives decode-order times, so a few pts repeat: flagged, not lost
    rc, log, res, acc = play("bframes-avi", t("bframes.avi"))
    if rc != 0 or not acc or acc["missing"] != 0 or acc["expected"] != 270 or acc["delivered"] != 270:
        fail(f"bframes-avi: {acc}\n{log[-3000:]}")
    if sum(1 for r in res if r.get("pts_repeat")) != acc["repeats"]:
        fail("bframes-avi: pts_repeat flags disagree with the count")
    print(f"accounting bframes-avi: ok: {acc}")
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=320x240:rate=15", "-frames:v", "68", "-c:v", "cinepak",
           t("cinepak.avi"))
    expect("cinepak-avi", t("cinepak.avi"), 68, 68)
    # 100 frames at 25 fps with a 1 s pause after frame 50 (variable rate)
    ffmpeg(*src, "-frames:v", "100", "-vf", "setpts='if(gte(N,50),PTS+25,PTS)'", "-fps_mode", "passthrough",
           "-c:v", "libx264", "-pix_fmt", "yuv420p", t("vfr.mp4"))
    expect("vfr-mp4", t("vfr.mp4"), 100, 100)
    ffmpeg(*src, "-frames:v", "100", "-vf", "interlace", "-c:v", "libx264", "-pix_fmt", "yuv420p",
           "-flags", "+ilme+ildct", t("interlaced.mp4"))
    expect("interlaced-mp4", t("interlaced.mp4"), 100, 100)
    # An MPEG-2 program stream: its packets each carry a part of a frame (about 2 KiB), several a frame.
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=720x576:rate=25", "-frames:v", "36", "-flags", "+ilme+ildct",
           "-c:v", "mpeg2video", "-b:v", "8M", "-f", "vob", t("interlaced.mpg"))
    expect("interlaced-mpg", t("interlaced.mpg"), 36, 36)

    # A recording cut after 77 of 200 frames (index first, as a camera's recorder writes it).
    ffmpeg(*src, "-frames:v", "200", "-c:v", "libx264", "-bf", "0", "-g", "25", "-pix_fmt", "yuv420p",
           "-movflags", "+faststart", t("full.mp4"))
    pk = packets(t("full.mp4"))
    end = int(pk[76]["pos"]) + int(pk[76]["size"])
    with open(t("full.mp4"), "rb") as f, open(t("cut.mp4"), "wb") as g:
        g.write(f.read(end))
    expect("cut-mp4", t("cut.mp4"), 200, 77)

    # Cut without re-encoding, 0.5 s in: an edit list starts the track at frame 12, whose GOP begins at frame 0;
    # the 12 frames before the edit are handed out for reference, decoded and dropped: not frames of the video.
    ffmpeg("-ss", "0.5", "-i", t("full.mp4"), "-c", "copy", t("trim.mp4"))
    rc, log, res, acc = play("trim-mp4", t("trim.mp4"))
    if rc != 0 or not acc or acc["missing"] != 0 or acc["expected"] != acc["delivered"] or \
            not 187 <= acc["delivered"] <= 189 or len(res) + acc["corrupt"] != acc["delivered"]:
        fail(f"trim-mp4: {acc}, {len(res)} published, expected about 188 frames, none missing\n{log[-3000:]}")
    print(f"accounting trim-mp4: ok: {acc}")

    # A leading corrupt GOP: the first keyframe overwritten; frames until the next one are lost.
    with open(t("full.mp4"), "rb") as f:
        data = bytearray(f.read())
    key = int(pk[0]["pos"])
    for i in range(16, int(pk[0]["size"])):
        data[key + i] = (i * 131 + 7) & 0xff
    with open(t("badgop.mp4"), "wb") as g:
        g.write(data)
    rc, log, res, acc = play("badgop-mp4", t("badgop.mp4"))
    if rc != 0 or not acc or acc["expected"] != 200 or acc["delivered"] + acc["missing"] != 200 or \
            acc["missing"] < 1 or acc["delivered"] != len(res) + acc["corrupt"]:
        fail(f"badgop-mp4: {acc}, {len(res)} published\n{log[-3000:]}")
    print(f"accounting badgop-mp4: ok: {acc}")

    # Frozen timestamps: frames 40..79 all carry the pts of frame 40 (Matroska takes equal timestamps).
    ffmpeg(*src, "-frames:v", "120", "-c:v", "mjpeg", "-q:v", "5", t("steady.mkv"))
    # Matroska's time base is 1 ms: frame 40 is at 1600
    ffmpeg("-i", t("steady.mkv"), "-c", "copy", "-bsf:v", "setts=ts='if(between(N,40,79),1600,PTS)'", t("frozen.mkv"))
    rc, log, res, acc = play("frozen-mkv", t("frozen.mkv"))
    if rc != 0 or not acc or acc["repeats"] != 39 or acc["delivered"] != 120 or acc["missing"] != 0:
        fail(f"frozen-mkv: {acc}\n{log[-3000:]}")
    flagged = [r["seq"] for r in res if r.get("pts_repeat")]
    if flagged != list(range(41, 80)):
        fail(f"frozen-mkv: pts_repeat on {flagged}, expected frames 41..79")
    print(f"accounting frozen-mkv: ok: {acc}, frames 41..79 flagged pts_repeat")

    # Exported: /stats and /metrics, a looped cut file (200 expected, 77 delivered a pass).
    hport = free_port()
    out = t("loop.jsonl")
    cfg = write("loop.yaml", head(hport) + stream("loop", f"      type: file\n      path: {t('cut.mp4')}\n"
                                                          "      pace: fast\n      loop: true", out))
    d = Daemon("loop", cfg)
    try:
        def consistent():
            s = stats(hport).get("loop", {}).get("frames", {})
            e, dl = s.get("file_expected", 0), s.get("file_delivered", 0)
            return (e, dl) if e >= 400 and e * 77 == dl * 200 else None
        e, dl = wait_for("two passes in /stats", consistent, 60)
        text = get(hport, "/metrics")
        me = metric(text, "zcpipe_file_frames_expected_total", "loop")
        md = metric(text, "zcpipe_file_frames_delivered_total", "loop")
        if me is None or md is None or me * 77 != md * 200:
            fail(f"/metrics: expected {me}, delivered {md}")
    finally:
        d.stop()
    print(f"accounting export: ok: /stats {e} expected, {dl} delivered; /metrics {me:.0f}, {md:.0f}")


# ---- formats the decoders give that convert does not take -------------------------------------


def gst_encode(desc):
    r = subprocess.run(["gst-launch-1.0", "-q"] + desc.split(), capture_output=True, text=True, timeout=120)
    return r.returncode == 0


def has_element(name):
    return subprocess.run(["gst-inspect-1.0", "--exists", name], capture_output=True).returncode == 0


def case_formats():
    need_gst()
    t = lambda n: os.path.join(TMP, n)   # noqa: E731
    n = 20
    made = []
    src = f"videotestsrc num-buffers={n} ! video/x-raw,width=320,height=240,framerate=25/1"
    if has_element("x264enc"):
        for fmt, label in [("Y444", "h264-444"), ("Y42B", "h264-422"), ("I420_10LE", "h264-high10")]:
            path = t(label + ".mkv")
            if gst_encode(f"{src} ! videoconvert ! video/x-raw,format={fmt} ! x264enc ! h264parse ! matroskamux "
                          f"! filesink location={path}"):
                made.append((label, path))
            else:
                print(f"formats {label}: x264enc cannot encode {fmt} here: not tested")
    else:
        print("formats h264-*: no x264enc (gstreamer1.0-plugins-ugly): not tested")
    if has_element("x265enc"):
        path = t("hevc-main10.mkv")
        if gst_encode(f"{src} ! videoconvert ! video/x-raw,format=I420_10LE ! x265enc ! h265parse ! matroskamux "
                      f"! filesink location={path}"):
            made.append(("hevc-main10", path))
        else:
            print("formats hevc-main10: x265enc cannot encode 10-bit here: not tested")
    else:
        print("formats hevc-main10: no x265enc: not tested")
    if shutil.which("ffmpeg"):
        ffmpeg("-f", "lavfi", "-i", "testsrc=size=320x240:rate=10", "-frames:v", str(n), t("anim.gif"))
        made.append(("gif", t("anim.gif")))
    else:
        print("formats gif: no ffmpeg: not tested")
    if not made:
        skip("no encoder for any of the formats")
    for label, path in made:
        rc, log, res, acc = play(label, path)
        conv = re.search(r"the decoder delivers (\S+), which convert does not take: converted to (\S+)", log)
        summ = re.search(r"(\d+) conversions", log)
        if rc != 0 or len(res) != n or not conv or not summ or int(summ.group(1)) != n:
            fail(f"formats {label}: exit {rc}, {len(res)} of {n} published, conversion said: {bool(conv)}, "
                 f"counted: {summ.group(1) if summ else None}\n{log[-3000:]}")
        print(f"formats {label}: ok: {n} frames, the decoder's {conv.group(1)} converted to {conv.group(2)}")


# ---- never hangs, always stops -------------------------------------------------------------------


def case_signals():
    need_gst()
    fifo = os.path.join(TMP, "fifo")
    os.mkfifo(fifo)

    # A FIFO nobody writes to: start-up waits for a writer at most 10 s, and SIGTERM/SIGINT end it at once.
    for name, path, sig in [("fifo", fifo, signal.SIGTERM), ("fifo-uri", "file://" + fifo, signal.SIGINT),
                            ("fifo-wait", fifo, None)]:
        cfg = write(name + ".yaml", head() + stream(name, f"      type: file\n      path: {path}",
                                                    os.path.join(TMP, name + ".jsonl")))
        d = Daemon(name, cfg)
        if sig:
            time.sleep(1.0)
            rc, took = d.stop(sig, timeout=10)
            if rc != 0 or took > 2.0 or "during start-up" not in d.log():
                fail(f"{name}: {sig.name} while waiting for a writer: exit {rc} after {took:.2f} s\n{d.log()}")
            print(f"signals {name}: ok: {sig.name} while waiting for a FIFO writer: exit 0 in {took:.2f} s")
        else:
            t0 = time.monotonic()
            rc = d.wait(30)
            took = time.monotonic() - t0
            if rc != 66 or "no data from a writer" not in d.log() or took > 20:
                fail(f"{name}: exit {rc} after {took:.1f} s\n{d.log()}")
            print(f"signals {name}: ok: no writer: exit 66 after {took:.1f} s")

    # A writer that goes quiet (YUV4MPEG, 10 frames, then nothing, the FIFO held open): SIGTERM still stops.
    if subprocess.run(["gst-inspect-1.0", "--exists", "y4mdec"], capture_output=True).returncode == 0:
        out = os.path.join(TMP, "quiet.jsonl")
        cfg = write("quiet.yaml", head() + stream("quiet", f"      type: file\n      path: {fifo}", out))
        d = Daemon("quiet", cfg)
        wfd = os.open(fifo, os.O_RDWR)   # both ends: the reader never sees EOF
        frame = b"FRAME\n" + bytes([16]) * (64 * 48) + bytes([128]) * (64 * 48 // 2)
        os.write(wfd, b"YUV4MPEG2 W64 H48 F10:1 Ip A1:1 C420jpeg\n")
        for _ in range(10):
            os.write(wfd, frame)
        try:
            wait_for("frames from the FIFO", lambda: len(rows(out)) >= 9, 20)
            time.sleep(6)   # quiet for longer than any stall guard
            rc, took = d.stop(signal.SIGTERM, timeout=10)
        finally:
            os.close(wfd)
        if rc != 0 or took > 2.0:
            fail(f"quiet writer: exit {rc} after {took:.2f} s\n{d.log()}")
        print(f"signals quiet-writer: ok: {len(rows(out))} frames, then a quiet writer; SIGTERM: exit 0 in {took:.2f} s")
    else:
        print("signals quiet-writer: no y4mdec (gstreamer1.0-plugins-bad): not tested")

    # A server that accepts and never answers: the stream is opening for up to 30 s.
    with socket.socket() as lst:
        lst.bind(("127.0.0.1", 0))
        lst.listen(8)
        port = lst.getsockname()[1]
        for sig in (signal.SIGTERM, signal.SIGINT):
            src = f"      type: network\n      path: rtsp://127.0.0.1:{port}/x\n      connect_timeout_ms: 30000"
            cfg = write("silent.yaml", head() + stream("silent", src, os.path.join(TMP, "silent.jsonl")))
            d = Daemon("silent-" + sig.name, cfg)
            conn, _ = lst.accept()   # zcpipe is opening the stream now
            time.sleep(0.5)
            rc, took = d.stop(sig, timeout=10)
            conn.close()
            if rc != 0 or took > 2.0 or "during start-up" not in d.log():
                fail(f"{sig.name} while opening: exit {rc} after {took:.2f} s\n{d.log()}")
            print(f"signals {sig.name} while a stream opens: ok: exit 0 in {took:.2f} s")


CASES = {"rtsp": case_rtsp, "outage": case_outage, "mjpeg": case_mjpeg, "accounting": case_accounting, "formats": case_formats,
         "signals": case_signals}

if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "mjpeg-server":
        mjpeg_server(int(sys.argv[2]), sys.argv[3])
        sys.exit(0)
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print(__doc__, file=sys.stderr)
        sys.exit(64)
    CASES[sys.argv[1]]()
