#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The live page of a running zcpipe (127.0.0.1 only; every loop bounded).

  snapshot  the bundled sample at its own rate (file, drop: block, CPU backend)
            while ten clients poll its snapshots, the page and /api/latency
            as fast as they can: every frame is published (captured == published
            + dropped, none dropped) and the results equal those of a run
            nobody watched; every due frame was taken or counted as skipped;
            the JPEGs decode (PIL) to the frame they name, decoded separately by
            GStreamer and turned to RGB by DESIGN.md's BT.601 formulas (PSNR
            above 30 dB, and closer to it than to a frame far away); each
            snapshot JSON's moving mask is its frame's: popcount == its
            "moving" == the frame's moving_cells (in it and in the unwatched
            run's results), set cells inside the frame's bbox and spanning it;
            the latency ring counts every published frame; unknown streams
            and paths 404.
  browser   headless Chromium loads / while the sample plays (screenshot, no
            script error, no CSP violation), then after it ended: the DOM lists
            both streams with the numbers /stats gives (counters, state, paths,
            latency), draws the charts, and shows a running stream's frame with
            its top classes, whose labels (a labels file full of markup and
            quotes: stream names cannot carry any, config.c allows
            [A-Za-z0-9_.-] only) are text, not elements, and its moving
            cells: the squares drawn (the canvas' data-cells) number the
            frame's moving_cells in the stream's results file, as many as
            its mask declares, and its box is that frame's.

Usage: test_page.py CASE   (env ZCPIPE, ZCP_SOURCE_ROOT set by meson; ZCP_PAGE_SCREENSHOT=PATH
keeps the browser case's screenshot there)
"""
import html.parser
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

SYSTEM_PYTHON = "/usr/bin/python3"
try:
    import PIL  # noqa: F401
except ImportError:
    # Debian's python3-pil serves the system python; another python3 first in PATH (pyenv) lacks it.
    if os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON) and os.access(SYSTEM_PYTHON, os.X_OK) \
            and not os.environ.get("ZCP_PAGE_SYSTEM_PYTHON"):
        os.environ["ZCP_PAGE_SYSTEM_PYTHON"] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_http as th  # noqa: E402  (the daemon and HTTP helpers of the metrics tests)
import zcptest  # noqa: E402
from zcptest import check, fail, wait_for  # noqa: E402

request, try_request = th.request, th.try_request
# The page's own directory, not the metrics tests': write() and the helpers of test_http use it.
shutil.rmtree(th.TMP, ignore_errors=True)
TMP = th.TMP = zcptest.TMP = tempfile.mkdtemp(prefix="zcp-page-")
SAMPLE_FRAMES, SAMPLE_W, SAMPLE_H = 150, 768, 576


def skip(why):
    shutil.rmtree(TMP, ignore_errors=True)
    zcptest.skip(why)


def pil():
    try:
        from PIL import Image, ImageChops, ImageMath, ImageStat  # noqa: F401
        import PIL
        return PIL
    except ImportError:
        skip("python3-pil is not installed (tools/setup.sh installs it)")


def stream_yaml(name, source, labels=None, out="none", drop=None, model=True):
    # A small model input keeps the CPU model cheap (sanitizer builds, busy machines): the page does not care.
    model = f"      weights: {th.WEIGHTS}\n      input_width: 64\n      input_height: 64\n" + \
        (f"      labels: {labels}\n" if labels else "")
    if not model:
        model = "      enabled: false\n"
    ring = f"    ring:\n      drop: {drop}\n" if drop else ""
    return f"""
  - name: {name}
    source:
{source}
{ring}    gpu:
      backend: cpu
    model:
{model}    output:
      type: {out}
""" + (f"      path: {os.path.join(TMP, name + '.jsonl')}\n" if out == "file" else "")


def sample_source(pace):
    return f"      type: file\n      path: {th.SAMPLE}\n      pace: {pace}"


def config(name, port, streams, snapshot_fps=2, enabled=True):
    return th.write(name, f"""log:
  summary_interval_s: 0
metrics:
  http:
    enabled: {"true" if enabled else "false"}
    port: {port}
    snapshot_fps: {snapshot_fps}
streams:""" + "".join(streams))


def get_json(port, path):
    status, headers, body = request(port, path)
    check(status == 200 and headers.get("content-type") == "application/json", f"{path}: HTTP {status} {headers}")
    return json.loads(body)


def wait_ended(port, name, d, timeout=400):
    """/stats of stream `name` once it ended with every frame accounted for."""
    last = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        check(d.proc.poll() is None, "zcpipe exited early:\n" + d.stderr())
        status, _, body = try_request(port, "/stats")   # while clients crowd the server, a try may be refused
        if status == 200:
            last = {x["name"]: x for x in json.loads(body)["streams"]}[name]
            fr = last["frames"]
            if last["state"] == "ended" and fr["captured"] == fr["published"] + fr["dropped"]:
                return last
        time.sleep(0.2)
    fail(f"stream {name} did not end within {timeout} s: {last}")


def first_snapshot_answer(port, name, d):
    """Status and headers of the first answer of /snapshot/<name>.jpg; skips where snapshots are not built."""
    def answered():
        check(d.proc.poll() is None, "zcpipe exited early:\n" + d.stderr())
        r = try_request(port, f"/snapshot/{name}.jpg")
        # The port opens before the streams do: "no such stream" until they are registered.
        return r if r[0] is not None and not (r[0] == 404 and r[2] == b"no such stream\n") else None
    status, headers, body = wait_for(f"an answer from /snapshot/{name}.jpg", answered, 30)
    if status == 404 and b"not built" in body:
        d.stop()
        skip("zcpipe built without snapshots (libturbojpeg)")
    check(status in (200, 503), f"first snapshot of {name}: HTTP {status} {body!r}")
    return status, headers


def check_mask(info, base=None):
    """The snapshot JSON's mask against its own result (and the unwatched run's result of that frame)."""
    mask, res = info["mask"], info["result"]
    check(mask is not None and res is not None, f"snapshot {info['seq']} without a mask or a result: {info}")
    gw, gh, cell = mask["grid_w"], mask["grid_h"], info["cell"]
    check(gw == -(-info["width"] // cell) and gh == -(-info["height"] // cell), f"mask grid {gw}x{gh}: {info}")
    raw = bytes.fromhex(mask["hex"])
    check(len(raw) == (gw * gh + 7) // 8, f"mask of {len(raw)} bytes for {gw}x{gh} cells")
    bits = int.from_bytes(raw, "little")   # cell i is bit i % 8 of byte i / 8 (output/snapshot.h)
    check(bits >> (gw * gh) == 0, "mask bits past the last cell")
    cells = [i for i in range(gw * gh) if bits >> i & 1]
    motion = res["motion"]
    check(len(cells) == mask["moving"] == motion["moving_cells"],
          f"snapshot {info['seq']}: mask popcount {len(cells)}, declared {mask['moving']}, "
          f"moving_cells {motion['moving_cells']}")
    if base is not None:
        check(base[info["seq"]][0] == motion, f"snapshot {info['seq']}: motion {motion}, unwatched {base[info['seq']]}")
    if not cells:
        check(motion["bbox"] is None, f"no moving cell but bbox {motion['bbox']}")
        return 0
    xs, ys = [i % gw for i in cells], [i // gw for i in cells]
    span = [min(xs) * cell, min(ys) * cell, min((max(xs) + 1) * cell, info["width"]),
            min((max(ys) + 1) * cell, info["height"])]
    check(motion["bbox"] == span, f"snapshot {info['seq']}: bbox {motion['bbox']}, the mask's cells span {span}")
    return len(cells)


def results(path):
    """{seq: (motion, topk)} of a results file."""
    out = {}
    with open(path) as f:
        for line in f:
            o = json.loads(line)
            out[o["seq"]] = (o["motion"], o["topk"])
    return out


# ---- the reference: the sample decoded by GStreamer, and DESIGN.md's BT.601 ----

def reference_frames(wanted):
    """{seq: (y, u, v) bytes} of the sample's frames, decoded by an explicit GStreamer pipeline."""
    gst = shutil.which("gst-launch-1.0")
    if not gst:
        skip("gst-launch-1.0 is not installed (gstreamer1.0-tools)")
    dec = None
    for name in ("avdec_h264", "openh264dec"):
        if subprocess.run(["gst-inspect-1.0", name], capture_output=True).returncode == 0:
            dec = name
            break
    if not dec:
        skip("neither avdec_h264 nor openh264dec is installed")
    ysize, csize = SAMPLE_W * SAMPLE_H, SAMPLE_W * SAMPLE_H // 4
    p = subprocess.Popen([gst, "-q", "filesrc", f"location={th.SAMPLE}", "!", "qtdemux", "!", "h264parse", "!", dec,
                          "!", "video/x-raw,format=I420", "!", "fdsink", "fd=1"], stdout=subprocess.PIPE)
    out = {}
    try:
        for seq in range(max(wanted) + 1):
            frame = p.stdout.read(ysize + 2 * csize)
            check(len(frame) == ysize + 2 * csize, f"reference decode ended at frame {seq}")
            if seq in wanted:
                out[seq] = (frame[:ysize], frame[ysize:ysize + csize], frame[ysize + csize:])
    finally:
        p.kill()
        p.wait()
    return out


def reference_rgb(y, u, v):
    """RGB of an I420 frame: each pixel the chroma of its 2x2 block, BT.601 limited range (DESIGN.md §4)."""
    from PIL import Image, ImageMath
    size = (SAMPLE_W, SAMPLE_H)
    Y = Image.frombytes("L", size, y).convert("F")
    U = Image.frombytes("L", (SAMPLE_W // 2, SAMPLE_H // 2), u).resize(size, Image.NEAREST).convert("F")
    V = Image.frombytes("L", (SAMPLE_W // 2, SAMPLE_H // 2), v).resize(size, Image.NEAREST).convert("F")
    exprs = ["1.164 * (y - 16) + 1.596 * (v - 128)",
             "1.164 * (y - 16) - 0.392 * (u - 128) - 0.813 * (v - 128)",
             "1.164 * (y - 16) + 2.017 * (u - 128)"]
    bands = []
    for e in exprs:
        f = ImageMath.eval(e, y=Y, u=U, v=V)
        f = ImageMath.eval("min(max(f, 0), 255) + 0.5", f=f)   # clamp, round
        bands.append(f.convert("L"))
    return Image.merge("RGB", bands)


def psnr(a, b):
    from PIL import ImageChops, ImageStat
    check(a.size == b.size and a.mode == b.mode, f"{a.size} {a.mode} vs {b.size} {b.mode}")
    sq = sum(ImageStat.Stat(ImageChops.difference(a, b)).sum2)
    mse = sq / (a.size[0] * a.size[1] * 3)
    return math.inf if mse == 0 else 10 * math.log10(255 * 255 / mse)


# ---- case snapshot ----

def case_snapshot():
    pil()
    from PIL import Image
    if "gstreamer yes" not in th.version():
        skip("zcpipe built without GStreamer: no file source for the sample")

    # A run nobody watches: the results every watched run must equal.
    base_cfg = config("base.yaml", th.free_port(), [stream_yaml("sample", sample_source("fast"), out="file",
                                                                drop="block")], enabled=False)
    d = th.Daemon(base_cfg)
    rc = d.proc.wait(timeout=300)
    check(rc == 0, f"baseline run exited {rc}:\n{d.stderr()}")
    d.stop()
    base = results(os.path.join(TMP, "sample.jsonl"))
    check(len(base) == SAMPLE_FRAMES, f"baseline published {len(base)} frames")
    os.rename(os.path.join(TMP, "sample.jsonl"), os.path.join(TMP, "base.jsonl"))

    port = th.free_port()
    # A small endless stream keeps zcpipe up after the sample ended.
    idle = stream_yaml("idle", "      type: synthetic\n      width: 64\n      height: 64\n      fps: 5\n"
                               "      pace: realtime", model=False)
    cfg = config("watched.yaml", port, [stream_yaml("sample", sample_source("realtime"), out="file", drop="block"),
                                        idle], snapshot_fps=30)
    d = th.Daemon(cfg)
    shots = []           # (seq, jpeg bytes)
    stop = threading.Event()
    tally = {}
    tally_lock = threading.Lock()
    try:
        # The first request starts the taking; until a frame is there, 503 with Retry-After.
        status, headers = first_snapshot_answer(port, "sample", d)
        if status == 503:
            check(headers.get("retry-after") == "1", f"503 without Retry-After: {headers}")

        def got_jpeg():
            s, h, body = try_request(port, "/snapshot/sample.jpg")
            return (s, h, body) if s == 200 else None
        status, headers, body = wait_for("a snapshot of sample", got_jpeg, 30)
        check(headers.get("content-type") == "image/jpeg", f"content type {headers.get('content-type')}")
        first_seq = int(headers["x-zcp-seq"])
        shots.append((first_seq, body))
        info = get_json(port, "/snapshot/sample.json")
        check(info["stream"] == "sample" and info["width"] == SAMPLE_W and info["height"] == SAMPLE_H and
              info["cell"] == 16 and info["fps"] == 30 and info["seq"] >= first_seq, f"snapshot json: {info}")
        check(info["result"]["seq"] == info["seq"] and "motion" in info["result"] and
              len(info["result"]["topk"]) == 5, f"snapshot json result: {info}")
        infos = [info]   # snapshot JSONs whose masks are checked against the unwatched run after it

        # Clients as fast as they can: snapshots, the page, the latency ring, 404s.
        paths = ["/snapshot/sample.jpg", "/snapshot/sample.json", "/snapshot/sample.jpg", "/api/latency", "/",
                 "/live.js", "/stats", "/snapshot/nosuch.jpg"]

        def client(k):
            i = k
            while not stop.is_set():
                path = paths[i % len(paths)]
                i += 1
                s, h, b = try_request(port, path, timeout=5)
                with tally_lock:
                    tally[(path, s)] = tally.get((path, s), 0) + 1
                    if path == "/snapshot/sample.json" and s == 200 and len(infos) < 200:
                        infos.append(json.loads(b))
                if path.endswith(".jpg") and s == 200 and path == "/snapshot/sample.jpg" and k == 0 and \
                        len(shots) < 6 and int(h["x-zcp-seq"]) >= shots[-1][0] + 25:
                    shots.append((int(h["x-zcp-seq"]), b))
        # Ten of them: one address may hold 12 of the default 16 connections, the test's own polls need one.
        clients = [threading.Thread(target=client, args=(k,)) for k in range(10)]
        for c in clients:
            c.start()
        s = wait_ended(port, "sample", d)
        stop.set()
        for c in clients:
            c.join(timeout=30)
        time.sleep(1.5)   # one more latency point after the last frame

        fr = s["frames"]
        check(fr["captured"] == SAMPLE_FRAMES and fr["published"] == SAMPLE_FRAMES and fr["dropped"] == 0,
              f"watched run: {fr}")
        info = get_json(port, "/snapshot/sample.json")
        c = info["counters"]
        # Watched all along at 30 a second of a 10 fps file: most frames were due (not all: frames published
        # closer than 1/30 s after a stall are not); each due one was taken or counted as skipped
        # (tests/unit/test_snapshot.c checks that exactly), a JPEG made at most once per frame taken.
        due = c["taken"] + c["skipped_busy"]
        check(c["skipped_size"] == 0 and c["taken"] >= 10 and due <= SAMPLE_FRAMES and c["encoded"] <= c["taken"],
              f"snapshot counters {c} (first seq {first_seq})")
        ok_jpegs = tally.get(("/snapshot/sample.jpg", 200), 0)
        check(ok_jpegs >= 10, f"the clients got {ok_jpegs} snapshots: {tally}")
        check(tally.get(("/snapshot/nosuch.jpg", 404), 0) > 0, f"no 404 for an unknown stream: {tally}")

        lat = get_json(port, "/api/latency")
        ls = {x["name"]: x for x in lat["streams"]}["sample"]
        check(sum(ls["frames"]) == SAMPLE_FRAMES, f"latency ring counts {sum(ls['frames'])} frames")
        check(len(ls["t"]) == len(ls["frames"]) == len(ls["p99"]["e2e"]) and ls["t"][-1] <= 0,
              "latency ring arrays differ in length")
        check(all(v is None or v > 0 for v in ls["p50"]["e2e"] + ls["p99"]["e2e"]), "latency values")

        for path in ("/snapshot/nosuch.jpg", "/snapshot/sample.png", "/snapshot/.jpg", "/snapshot/sample",
                     "/snapshot/", "/api/nothing"):
            check(request(port, path)[0] == 404, f"{path} is not 404")
        status, headers, body = request(port, "/", method="HEAD")
        check(status == 200 and body == b"" and "script-src 'self'" in headers.get("content-security-policy", ""),
              f"HEAD /: {status} {headers}")
        for path in ("/", "/live.js", "/live.css"):
            status, headers, body = request(port, path)
            text = body.decode()
            check(status == 200 and "http://" not in text and "https://" not in text and "@import" not in text and
                  "url(" not in text, f"{path} refers to something outside zcpipe")
    finally:
        stop.set()
        rc = d.stop()
    check(rc == 0, f"zcpipe exited {rc}:\n{d.stderr()}")

    watched = results(os.path.join(TMP, "sample.jsonl"))
    check(watched == base, "results of the watched run differ from the run nobody watched: " +
          str(sorted(k for k in base if watched.get(k) != base[k])[:10]))
    masks = [i for i in infos if i["seq"] is not None]
    moving = sum(check_mask(i, base) > 0 for i in masks)
    check(len(masks) >= 10 and moving > 0, f"{len(masks)} snapshot masks checked, {moving} with moving cells")

    ref = reference_frames({seq for seq, _ in shots} | {(seq + 75) % SAMPLE_FRAMES for seq, _ in shots})
    for seq, jpeg in shots:
        img = Image.open(io.BytesIO(jpeg))
        check(img.format == "JPEG" and img.size == (SAMPLE_W, SAMPLE_H), f"snapshot {seq}: {img.format} {img.size}")
        img = img.convert("RGB")
        p = psnr(img, reference_rgb(*ref[seq]))
        far = psnr(img, reference_rgb(*ref[(seq + 75) % SAMPLE_FRAMES]))
        print(f"snapshot of frame {seq}: PSNR {p:.1f} dB against it, {far:.1f} dB against frame "
              f"{(seq + 75) % SAMPLE_FRAMES}")
        check(p > 30 and p > far, f"snapshot of frame {seq}: PSNR {p:.1f} dB (frame {(seq + 75) % 150}: {far:.1f})")
    print(f"ok snapshot: {len(shots)} snapshots checked; counters {c}; {ok_jpegs} JPEGs to the clients; "
          f"all {SAMPLE_FRAMES} frames published with the unwatched run's results; {len(masks)} masks "
          f"({moving} with moving cells) are their frames'")


# ---- case browser ----

CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-extensions", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]


def chromium_exe():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        exe = shutil.which(name)
        if exe:
            return exe
    return None


def run_chromium(exe, args, timeout=180):
    profile = tempfile.mkdtemp(dir=TMP, prefix="profile-")
    try:
        return subprocess.run([exe] + CHROME_FLAGS + [f"--user-data-dir={profile}"] + args, capture_output=True,
                              text=True, timeout=timeout)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def probe_chromium():
    exe = chromium_exe()
    if not exe:
        skip("chromium is not installed (tools/setup.sh installs it)")
    try:
        p = run_chromium(exe, ["--dump-dom", "data:text/html,<p id=x></p><script>"
                               "document.getElementById('x').textContent='js ran'</script>"], timeout=120)
    except subprocess.TimeoutExpired:
        skip("chromium did not finish loading a data: URL in 120 s")
    if p.returncode != 0 or "js ran" not in p.stdout:
        skip(f"chromium cannot run here (exit {p.returncode}): {p.stderr[-800:]}")
    return exe


def console_problems(stderr):
    """Script errors and CSP violations the page logged (a 503 or 404 of a poll is no problem)."""
    bad = []
    for line in stderr.splitlines():
        if ":CONSOLE" in line and any(w in line for w in ("Uncaught", "Refused", "Content Security Policy",
                                                           "Content-Security-Policy", "TypeError")):
            bad.append(line)
    return bad


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.walk()

    def find_all(self, tag=None, **attrs):
        return [n for n in self.walk() if (tag is None or n.tag == tag) and
                all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def find(self, tag=None, **attrs):
        found = self.find_all(tag, **attrs)
        return found[0] if found else None


class DomBuilder(html.parser.HTMLParser):
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        if tag not in self.VOID:
            self.cur = n

    def handle_endtag(self, tag):
        n = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def parse_dom(text):
    b = DomBuilder()
    b.feed(text)
    b.close()
    return b.root


MARKUP_LABEL = "<img src=x onerror=\"document.title='pwned'\"> \"q\" & 'a' </script><b>{}</b>"


def case_browser():
    pil()
    from PIL import Image, ImageStat
    exe = probe_chromium()
    if "gstreamer yes" not in th.version():
        skip("zcpipe built without GStreamer: no file source for the sample")
    labels = th.write("labels.txt", "".join(MARKUP_LABEL.format(i) + "\n" for i in range(1000)))
    cam = "cam.front-1_a"
    port = th.free_port()
    cfg = config("browser.yaml", port, [
        stream_yaml("sample", sample_source("realtime"), drop="block"),
        stream_yaml(cam, "      type: synthetic\n      width: 320\n      height: 240\n      fps: 10\n"
                         "      pace: realtime", labels=labels, out="file"),
    ])
    url = f"http://127.0.0.1:{port}/"
    shot = os.path.join(TMP, "live.png")
    d = th.Daemon(cfg)
    try:
        wait_for("/healthz 200", lambda: try_request(port, "/healthz")[0] == 200 or d.proc.poll() is not None, 30)
        check(d.proc.poll() is None, "zcpipe exited early:\n" + d.stderr())
        first_snapshot_answer(port, "sample", d)

        # While the sample plays: the page as a user sees it.
        p = run_chromium(exe, ["--window-size=1280,1900", "--virtual-time-budget=8000", f"--screenshot={shot}", url])
        check(p.returncode == 0 and os.path.exists(shot), f"chromium --screenshot exit {p.returncode}:\n{p.stderr}")
        bad = console_problems(p.stderr)
        check(not bad, "the page logged errors:\n" + "\n".join(bad))
        img = Image.open(shot)
        check(img.size == (1280, 1900), f"screenshot is {img.size}")
        spread = ImageStat.Stat(img.convert("L")).stddev[0]
        check(spread > 10, f"the screenshot is nearly uniform (stddev {spread:.1f})")
        keep = os.environ.get("ZCP_PAGE_SCREENSHOT")
        if keep:
            shutil.copyfile(shot, keep)

        # After it ended its numbers stay put: the page must show exactly what /stats says.
        wait_ended(port, "sample", d)
        time.sleep(1.5)   # a latency point after the last frame
        p = run_chromium(exe, ["--virtual-time-budget=8000", "--dump-dom", url])
        check(p.returncode == 0 and "<html" in p.stdout, f"chromium --dump-dom exit {p.returncode}:\n{p.stderr}")
        bad = console_problems(p.stderr)
        check(not bad, "the page logged errors:\n" + "\n".join(bad))
        stats = {s["name"]: s for s in get_json(port, "/stats")["streams"]}
        dom = parse_dom(p.stdout)
        with open(os.path.join(TMP, "dom.html"), "w") as f:
            f.write(p.stdout)
    finally:
        rc = d.stop()
    check(rc == 0, f"zcpipe exited {rc}:\n{d.stderr()}")

    title = dom.find("title")
    check(title is not None and title.text() == "zcpipe live", f"title {title and title.text()!r}")
    check(not dom.find_all("img") and not dom.find_all("b"),
          "markup from a label became elements: " + repr([n.parent.attrs for n in dom.find_all("img") +
                                                          dom.find_all("b")][:3]))
    body = dom.find("body")
    check(int(body.attrs.get("data-polls", "0")) >= 2, f"the page polled /stats {body.attrs.get('data-polls')} times")
    check(dom.find(id="status").attrs.get("data-ok") == "true", "the status line says zcpipe does not answer")
    sections = [n for n in dom.find_all("section") if "data-stream" in n.attrs]   # not the <template>'s
    check([s.attrs.get("data-stream") for s in sections] == ["sample", cam],
          f"stream cards {[s.attrs.get('data-stream') for s in sections]}")

    def fields(sec):
        return {n.attrs["data-f"]: n.text() for n in sec.walk() if "data-f" in n.attrs}

    # The ended sample: every number as /stats has it.
    sec, s = sections[0], stats["sample"]
    f = fields(sec)
    check(f["name"] == "sample" and f["state"] == s["state"] == "ended", f"sample name/state {f['name']} {f['state']}")
    for k in ("source", "capture_path", "backend", "transfer"):
        check(f[k] == s[k], f"sample {k}: page {f[k]!r}, /stats {s[k]!r}")
    for k in ("captured", "published", "dropped", "decode_gaps", "copies", "reconnects"):
        check(f[k] == str(s["frames"][k]), f"sample {k}: page {f[k]!r}, /stats {s['frames'][k]}")
    check(f["captured"] == str(SAMPLE_FRAMES) and f["drops"] == "none", f"sample frames {f['captured']} {f['drops']}")
    check(f["ring"] == f"{s['ring']['in_flight']} of {s['ring']['slots']} slots in use", f"ring {f['ring']}")
    if "sink" in s:
        k = s["sink"]
        check(f["output"] == f"{k['type']}: {k['written']} written, {k['queued']} queued, lost: none",
              f"output: page {f['output']!r}, /stats {k}")
    rows = {tr.attrs["data-row"]: tr for tr in sec.find_all("tr") if "data-row" in tr.attrs}
    check(len(rows) == 7, f"latency rows {list(rows)}")
    for label, h in [("end to end", s["latency_ms"]["e2e"])] + \
            [(f"{st} {part}", s["latency_ms"][st][part]) for st in ("convert", "infer", "publish")
             for part in ("wait", "busy")]:
        for q in ("p50", "p99", "max"):
            text = rows[label].find("td", data_q=q).text()
            decimals = len(text.partition(".")[2])   # the page rounds to what it shows
            check(abs(float(text) - h[q]) <= 0.5 * 10 ** -decimals + 1e-9, f"{label} {q}: page {text}, /stats {h[q]}")
    for chart in sec.find_all("canvas"):
        if "data-chart" in chart.attrs:
            check(int(chart.attrs.get("data-points", "0")) > 0, f"chart {chart.attrs['data-chart']} drew nothing")

    # The running camera stand-in: a frame drawn, its top classes with their labels as text.
    sec = sections[1]
    f = fields(sec)
    check(f["name"] == cam and f["state"] == "up", f"{cam}: {f['name']} {f['state']}")
    check("data-snap-seq" in sec.attrs and sec.find("canvas", **{"class": "frame"}) is not None,
          f"no frame drawn for {cam}: {f['snapshot']!r}")
    items = sec.find("ol").find_all("li")
    check(len(items) == 5, f"{len(items)} top classes shown")
    wanted = {MARKUP_LABEL.format(i) for i in range(1000)}
    for li in items:
        label = li.find("span", **{"class": "label"}).text()
        check(label in wanted, f"label shown as {label!r}")
    # Its moving cells: as many squares drawn as the frame's results say moved and its mask declares.
    frame = sec.find("canvas", **{"class": "frame"})
    seq = int(sec.attrs["data-snap-seq"])
    cam_results = results(os.path.join(TMP, cam + ".jsonl"))
    check(seq in cam_results, f"frame {seq} is not in {cam}'s results")
    motion = cam_results[seq][0]
    drawn = frame.attrs.get("data-cells")
    check(drawn == frame.attrs.get("data-mask-moving") == str(motion["moving_cells"]),
          f"{cam} frame {seq}: {drawn} cells drawn, the mask declares {frame.attrs.get('data-mask-moving')}, "
          f"the results say {motion['moving_cells']}")
    check(motion["moving_cells"] > 0, f"{cam} frame {seq}: the moving square moved no cell: {motion}")
    check(f["bbox"] == ", ".join(map(str, motion["bbox"])), f"{cam} frame {seq}: box {f['bbox']!r}, results {motion}")
    print(f"ok browser: DOM equals /stats for sample, {cam} shows frame {seq} with {len(items)} labelled classes "
          f"as text and its {drawn} moving cells drawn; screenshot {shot}")


CASES = {"snapshot": case_snapshot, "browser": case_browser}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: test_page.py " + "|".join(CASES), file=sys.stderr)
        sys.exit(64)
    if "http yes" not in th.version():
        skip("zcpipe built without http (libmicrohttpd)")
    try:
        CASES[sys.argv[1]]()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
