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
  browser   headless Chromium (driven over the DevTools protocol, tests/integration/cdp.py)
            on 16 streams: the sample (ended by the last checks), CenterNet on three
            of its frames looped, a synthetic camera with a labels file full of
            markup and quotes (stream names cannot carry any, config.c allows
            [A-Za-z0-9_.-] only), a file that fails again and again (the
            supervisor's back-off), a V4L2 camera that is not there, and
            synthetic fillers. At 1920x1080 all 16 tiles are on the screen in
            config order, each linking to #<stream>; the detector's tile shows
            boxes; the failing and the absent streams' tiles say why (the
            failing one with /stats' last_error). A real click on the
            detector's tile opens it in full (#det): its boxes are its frame's
            detections in the results file, its objects list counts them by
            class; the page's "back" link returns to the grid. At 420x900 the
            grid has at most two columns; a link to #cam.front-1_a opens it:
            its labels are text, not elements, and its moving cells drawn (the
            canvas' data-cells) number the frame's moving_cells in its results
            file, as many as its mask declares, its box is that frame's; the
            absent camera in full says "waiting for the camera". In no view
            at either width is the page wider than the window. After the
            sample ended, its view shows exactly what /stats says (counters,
            state, paths, latency) and draws the charts. No script error, no
            CSP violation, the screenshots are not blank.
  mjpeg     /stream/<stream>.mjpg: a multipart/x-mixed-replace response whose parts
            are whole JPEGs of the stream's size, of distinct frames in order,
            at most snapshot_fps a second; a client that stops reading blocks
            neither the stream (it publishes at its rate) nor the other client,
            and is cut after timeout_s, which frees its place; beyond a quarter
            of max_connections a client gets 503 with Retry-After; an absent
            camera's stream sends only CRLFs (the preamble) until a frame
            comes; bad paths 404; SIGTERM with video clients connected, one of
            them waiting, exits 0.

Usage: test_page.py CASE   (env ZCPIPE, ZCP_SOURCE_ROOT set by meson; ZCP_PAGE_SCREENSHOT=PATH
keeps the grid's screenshot at 1920x1080 there (docs/live.png), ZCP_PAGE_SHOTS=DIR every
screenshot of the browser case)
"""
import http.client
import io
import json
import math
import os
import shutil
import socket
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
import cdp  # noqa: E402  (headless Chromium over the DevTools protocol)
import test_http as th  # noqa: E402  (the daemon and HTTP helpers of the metrics tests)
import zcptest  # noqa: E402
from zcptest import check, fail, skip, wait_for  # noqa: E402

request, try_request = th.request, th.try_request
# The page's own directory, not the metrics tests' (unused: gone now): write() and the helpers of
# test_http use it. zcptest removes it at exit, or keeps it when the case failed.
shutil.rmtree(th.TMP, ignore_errors=True)
TMP = th.TMP = zcptest.TMP = zcptest.tmpdir("zcp-page-")
SAMPLE_FRAMES, SAMPLE_W, SAMPLE_H = 150, 768, 576


def pil():
    try:
        from PIL import Image, ImageChops, ImageMath, ImageStat  # noqa: F401
        import PIL
        return PIL
    except ImportError:
        skip("python3-pil is not installed (tools/setup.sh installs it)")


def stream_yaml(name, source, labels=None, out="none", drop=None, model=True):
    """A stream: `model` True is the default weights at a small input, False none, a string its keys."""
    # A small model input keeps the CPU model cheap (sanitizer builds, busy machines): the page does not care.
    if model is True:
        model = f"      weights: {th.WEIGHTS}\n      input_width: 64\n      input_height: 64\n" + \
            (f"      labels: {labels}\n" if labels else "")
    elif not model:
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

MARKUP_LABEL = "<img src=x onerror=\"document.title='pwned'\"> \"q\" & 'a' </script><b>{}</b>"
SCREENS = ((1920, 1080), (420, 900))   # a desktop, a phone held upright


def probe_chromium():
    exe = cdp.executable()
    if not exe:
        skip("chromium is not installed (tools/setup.sh installs it)")
    return exe


def y4m(name, width, height, frames, rate="10:1", broken=None):
    """A Y4M file of I420 frames (bytes each); frame `broken` gets a bad FRAME marker (y4mdec fails there)."""
    path = os.path.join(TMP, name)
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{width} H{height} F{rate} Ip A1:1 C420jpeg\n".encode())
        for i, frame in enumerate(frames):
            f.write(b"XXXXX\n" if i == broken else b"FRAME\n")
            f.write(frame)
    return path


# What the page shows, read in the page itself: the tiles in order, one stream's card, the layout.
TILES_JS = """[...document.querySelectorAll('#grid .tile')].map((t) => {
  const r = t.getBoundingClientRect(), c = t.querySelector('canvas.frame'), why = t.querySelector('[data-f=why]');
  return {name: t.dataset.stream, href: t.getAttribute('href'), state: t.dataset.state, up: t.dataset.up,
          seq: t.dataset.snapSeq || null, boxes: c.dataset.boxes || null, objects: t.querySelector('[data-f=objects]').textContent,
          why: why.hidden ? null : why.querySelector('[data-f=why-title]').textContent,
          whyDetail: why.hidden ? null : why.querySelector('[data-f=why-detail]').textContent,
          left: r.left, right: r.right, top: r.top, bottom: r.bottom, shown: r.width > 0 && r.height > 0};
})"""

CARD_JS = """((name) => {
  const sec = [...document.querySelectorAll('section.stream')].find((s) => s.dataset.stream === name);
  if (!sec) return null;
  const f = {};
  for (const el of sec.querySelectorAll('[data-f]')) f[el.dataset.f] = {text: el.textContent, hidden: el.hidden};
  const frame = sec.querySelector('canvas.frame'), r = frame.getBoundingClientRect();
  return {shown: !sec.hidden && sec.getBoundingClientRect().height > 0, seq: sec.dataset.snapSeq || null,
          video: sec.querySelector('[data-f=video]').hidden ? null : sec.querySelector('[data-f=video]').getAttribute('href'),
          fields: f, frame: Object.assign({}, frame.dataset, {width: r.width, height: r.height}),
          items: [...sec.querySelectorAll('ol.topk li')].map((li) => ({label: (li.querySelector('.label') || li).textContent})),
          rows: Object.fromEntries([...sec.querySelectorAll('tr[data-row]')].map((tr) =>
                  [tr.dataset.row, Object.fromEntries([...tr.querySelectorAll('td[data-q]')].map((td) => [td.dataset.q, td.textContent]))])),
          charts: Object.fromEntries([...sec.querySelectorAll('canvas[data-chart]')].map((c) => [c.dataset.chart, +c.dataset.points]))};
})"""

LAYOUT_JS = """({view: document.body.dataset.view, hash: location.hash, title: document.title,
  scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth,
  bodyWidth: document.body.scrollWidth, innerWidth: window.innerWidth, innerHeight: window.innerHeight,
  cols: +document.getElementById('grid').dataset.cols, polls: +(document.body.dataset.polls || 0),
  status: document.getElementById('status').dataset.ok, summary: document.getElementById('summary').textContent,
  gridShown: document.getElementById('grid').getBoundingClientRect().height > 0,
  markup: document.querySelectorAll('img, b').length})"""


def card(b, name):
    return b.js(CARD_JS + "(" + json.dumps(name) + ")")


def no_overflow(b, where):
    lay = b.js(LAYOUT_JS)
    check(lay["scrollWidth"] <= lay["clientWidth"] and lay["bodyWidth"] <= lay["clientWidth"],
          f"{where}: the page is wider than the window: scrollWidth {lay['scrollWidth']}, body {lay['bodyWidth']}, "
          f"clientWidth {lay['clientWidth']}")
    return lay


def shot(b, name):
    """A screenshot in TMP (and in $ZCP_PAGE_SHOTS, a directory, when set): not blank."""
    from PIL import Image, ImageStat
    path = os.path.join(TMP, name)
    b.screenshot(path)
    img = Image.open(path)
    spread = ImageStat.Stat(img.convert("L")).stddev[0]
    check(spread > 10, f"{name}: the screenshot is nearly uniform (stddev {spread:.1f})")
    keep = os.environ.get("ZCP_PAGE_SHOTS")
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copyfile(path, os.path.join(keep, name))
    return path, img.size


def center(tile):
    return (tile["left"] + tile["right"]) / 2, (tile["top"] + tile["bottom"]) / 2


def boxes_of(line):
    """The detections of a result line the page can draw (a box of four numbers each)."""
    return [d for d in line.get("detections") or []
            if isinstance(d.get("box"), list) and len(d["box"]) == 4 and
            all(isinstance(v, (int, float)) for v in d["box"])]


def result_lines(path):
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.endswith("\n"):
                    o = json.loads(line)
                    out[o["seq"]] = o
    return out


def case_browser():
    pil()
    exe = probe_chromium()
    ver = th.version()
    if "gstreamer yes" not in ver:
        skip("zcpipe built without GStreamer: no file source for the sample")
    centernet = os.path.join(os.path.dirname(th.WEIGHTS), "centernet", "model.json")
    if not os.path.exists(centernet):
        skip(f"no CenterNet model at {centernet}")
    labels = th.write("labels.txt", "".join(MARKUP_LABEL.format(i) + "\n" for i in range(1000)))
    cam = "cam.front-1_a"
    # The detector's stream: three frames of the sample looped, one every three seconds, so that the
    # CenterNet on the CPU backend (seconds a frame today) keeps up without taking a core all along.
    ref = reference_frames({0, 60, 120})
    det_clip = y4m("det.y4m", SAMPLE_W, SAMPLE_H, [b"".join(ref[i]) for i in (0, 60, 120)], rate="1:3")
    # A file whose sixth frame is broken: its source fails there again and again, the supervisor
    # re-opens it after a back-off each time (stream_state backoff, last_error its error).
    grey = bytes([128]) * (160 * 120 * 3 // 2)
    bad = y4m("bad.y4m", 160, 120, [grey] * 10, rate="25:1", broken=5)
    streams = [
        ("sample", stream_yaml("sample", sample_source("realtime"), drop="block")),
        ("det", stream_yaml("det", f"      type: file\n      path: {det_clip}\n      pace: realtime\n      loop: true",
                            model=f"      path: {centernet}\n", out="file")),
        (cam, stream_yaml(cam, "      type: synthetic\n      width: 320\n      height: 240\n      fps: 10\n"
                               "      pace: realtime", labels=labels, out="file")),
        ("yard", stream_yaml("yard", f"      type: file\n      path: {bad}\n      loop: true", model=False)),
    ]
    door = None
    if "v4l2 yes" in ver:
        # A camera that is not plugged in: the stream runs, its source waits for the device.
        door = "door"
        streams.append((door, stream_yaml(door, f"      type: v4l2\n      device: {os.path.join(TMP, 'video-absent')}",
                                          model=False)))
    else:
        print("built without V4L2: no absent camera among the streams")
    for i in range(16 - len(streams)):
        name = f"tile{i + 1:02d}"
        streams.append((name, stream_yaml(name, "      type: synthetic\n      width: 160\n      height: 120\n"
                                                f"      fps: 5\n      pace: realtime\n      box_size: {16 + 4 * (i % 4)}\n"
                                                f"      speed: {1 + i % 5}", model=False)))
    names = [n for n, _ in streams]
    port = th.free_port()
    cfg = config("browser.yaml", port, [y for _, y in streams])
    url = f"http://127.0.0.1:{port}/"

    profile = tempfile.mkdtemp(dir=TMP, prefix="profile-")
    try:
        b = cdp.Browser(exe, profile)
    except cdp.CdpError as e:
        skip(f"chromium cannot run here: {e}")
    d = th.Daemon(cfg)
    try:
        def listed():
            check(d.proc.poll() is None, "zcpipe exited early:\n" + d.stderr())
            status, _, body = try_request(port, "/stats")
            return status == 200 and len(json.loads(body)["streams"]) == 16
        wait_for("/stats listing 16 streams", listed, 30)
        first_snapshot_answer(port, "sample", d)

        # ---- the grid on a desktop: 16 tiles on one screen, in config order ----
        b.size(*SCREENS[0])
        b.goto(url)
        b.wait("16 tiles", "document.querySelectorAll('#grid .tile').length === 16", 30)
        b.wait("a frame in every running synthetic tile",
               "[...document.querySelectorAll('#grid .tile')].filter((t) => /^tile|^cam/.test(t.dataset.stream))"
               ".every((t) => t.dataset.snapSeq)", 60)
        b.wait("the detector's boxes on its tile",
               "+document.querySelector('#grid .tile[data-stream=det] canvas.frame').dataset.boxes > 0", 120)
        b.wait("the failing file's tile saying it restarts",
               "(document.querySelector('#grid .tile[data-stream=yard] [data-f=why-title]') || {}).textContent"
               "?.startsWith('restarting after a failure')", 60)
        if door:
            b.wait("the absent camera's tile saying why",
                   "document.querySelector('#grid .tile[data-stream=door] [data-f=why-title]').textContent === "
                   "'waiting for the camera'", 30)
        tiles = b.js(TILES_JS)
        stats = {s["name"]: s for s in get_json(port, "/stats")["streams"]}
        lay = no_overflow(b, "grid at 1920")
        w, h = SCREENS[0]
        check([t["name"] for t in tiles] == names, f"tiles {[t['name'] for t in tiles]}, config {names}")
        for t in tiles:
            check(t["href"] == "#" + t["name"], f"tile {t['name']} links to {t['href']}")
            check(0 <= t["left"] and t["right"] <= w and 0 <= t["top"] and t["bottom"] <= h,
                  f"tile {t['name']} is not on the {w}x{h} screen: {t}")
        check(lay["cols"] >= 4 and lay["summary"].startswith("16 streams"), f"grid: {lay}")
        by = {t["name"]: t for t in tiles}
        check(by["det"]["up"] == "true" and "person" in by["det"]["objects"], f"detector tile: {by['det']}")
        yard = by["yard"]
        check(yard["state"] == "backoff" and stats["yard"]["last_error"] and
              yard["whyDetail"] == stats["yard"]["last_error"],
              f"failing file's tile {yard}, /stats last_error {stats['yard']['last_error']!r}")
        if door:
            t, s = by[door], stats[door]
            check(t["state"] == "backoff" and t["up"] == "false" and s["state"] == "backoff",
                  f"absent camera: tile {t}, /stats state {s['state']} stream_state {s['stream_state']}")
            check(s["source_error"] == "No such file or directory" and t["whyDetail"] == s["source_error"],
                  f"absent camera: /stats source_error {s['source_error']!r}, the tile says {t['whyDetail']!r}")
        path, size = shot(b, "grid-1920.png")
        check(size == SCREENS[0], f"screenshot is {size}")
        keep = os.environ.get("ZCP_PAGE_SCREENSHOT")
        if keep:
            shutil.copyfile(path, keep)

        # ---- a click on the detector's tile opens it in full; its boxes are its frame's detections ----
        b.click(*center(by["det"]))
        b.wait("#det in full", "location.hash === '#det' && document.body.dataset.view === 'detail'", 10)
        b.wait("the detector's frame in full with boxes",
               "+(([...document.querySelectorAll('section.stream')].find((s) => s.dataset.stream === 'det') || {})"
               ".querySelector?.('canvas.frame').dataset.boxes) > 0", 60)
        c = card(b, "det")
        lay = no_overflow(b, "#det at 1920")
        check(c["shown"] and not lay["gridShown"] and lay["title"] == "det · zcpipe live", f"#det: {lay}")
        check(c["video"] == "/stream/det.mjpg", f"#det's video link: {c['video']}")
        seq = int(c["seq"])
        line = wait_for(f"det's frame {seq} in its results file",
                        lambda: result_lines(os.path.join(TMP, "det.jsonl")).get(seq), 30)
        want = boxes_of(line)
        check(want and c["frame"]["boxes"] == str(len(want)) and c["frame"]["seq"] == str(seq),
              f"det frame {seq}: {c['frame'].get('boxes')} boxes drawn, its result line has {len(want)}")
        per_class = {}
        for dd in line["detections"]:
            per_class[dd["class"]] = per_class.get(dd["class"], 0) + 1
        shown = sorted(i["label"] for i in c["items"])
        check(shown == sorted(f"{n} × {k}" for k, n in per_class.items()), f"det objects {shown}, results {per_class}")
        shot(b, "detail-1920.png")

        # ---- back to the grid by the page's own link ----
        back = b.js("(() => { const r = document.getElementById('back').getBoundingClientRect();"
                    " return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; })()")
        b.click(*center(back))
        b.wait("the grid again", "location.hash === '' && document.body.dataset.view === 'grid'", 10)
        b.wait("tiles painted again", "document.querySelectorAll('#grid .tile[data-snap-seq]').length >= 12", 30)
        check(b.js(LAYOUT_JS)["gridShown"], "the grid is not shown after 'back'")

        # ---- a phone: the grid and the views in full, never wider than the screen ----
        b.size(*SCREENS[1])
        b.pump(1)
        lay = no_overflow(b, "grid at 420")
        check(1 <= lay["cols"] <= 2, f"grid at 420: {lay['cols']} columns")
        for t in b.js(TILES_JS):
            check(t["left"] >= 0 and t["right"] <= SCREENS[1][0], f"tile {t['name']} at 420: {t}")
        shot(b, "grid-420.png")

        # A link opens one stream: the markup-laden labels are text, its moving cells are its frame's.
        b.goto("about:blank")
        b.goto(url + "#" + cam)
        b.wait(f"{cam} in full with a frame",
               f"(() => {{ const c = ({CARD_JS})({json.dumps(cam)}); return c && c.shown && c.seq; }})()", 30)
        c = card(b, cam)
        classes = len(c["items"])
        no_overflow(b, f"#{cam} at 420")
        shot(b, "detail-420.png")
        check(len(c["items"]) == 5, f"{len(c['items'])} top classes shown")
        wanted = {MARKUP_LABEL.format(i) for i in range(1000)}
        for item in c["items"]:
            check(item["label"] in wanted, f"label shown as {item['label']!r}")
        seq = int(c["seq"])
        cam_line = wait_for(f"{cam}'s frame {seq} in its results file",
                            lambda: result_lines(os.path.join(TMP, cam + ".jsonl")).get(seq), 30)
        motion = cam_line["motion"]
        drawn = c["frame"].get("cells")
        check(drawn == c["frame"].get("maskMoving") == str(motion["moving_cells"]) and motion["moving_cells"] > 0,
              f"{cam} frame {seq}: {drawn} cells drawn, the mask declares {c['frame'].get('maskMoving')}, "
              f"the results say {motion}")
        check(c["fields"]["bbox"]["text"] == ", ".join(map(str, motion["bbox"])),
              f"{cam} frame {seq}: box {c['fields']['bbox']['text']!r}, results {motion}")

        if door:
            b.goto(url + "#" + door)   # the same document: the hash changes, the page follows
            b.wait("the absent camera in full", f"location.hash === '#{door}' && document.body.dataset.view === 'detail'", 10)
            b.wait("the absent camera's reason in full",
                   f"(() => {{ const c = ({CARD_JS})({json.dumps(door)}); return c && c.shown && "
                   "!c.fields.why.hidden && c.fields['why-title'].text === 'waiting for the camera:'; })()", 30)
            no_overflow(b, f"#{door} at 420")

        # ---- the sample ended: the page shows exactly what /stats says of it ----
        wait_ended(port, "sample", d)
        time.sleep(1.5)   # a latency point after the last frame
        b.size(*SCREENS[0])
        b.goto(url + "#sample")
        b.wait("the sample's charts", f"(() => {{ const c = ({CARD_JS})('sample'); return c && c.shown && "
               "c.charts.e2e > 0 && c.charts.stages > 0 && Object.keys(c.rows).length === 7; })()", 30)
        b.pump(1.5)   # one more /stats poll after the charts
        c = card(b, "sample")
        s = {x["name"]: x for x in get_json(port, "/stats")["streams"]}["sample"]
        lay = no_overflow(b, "#sample at 1920")
        problems = list(b.problems)
    finally:
        b.close()
        rc = d.stop()
    check(rc == 0, f"zcpipe exited {rc}:\n{d.stderr()}")
    check(not problems, "the page logged errors:\n" + "\n".join(problems))
    check(lay["markup"] == 0, f"markup from a label became {lay['markup']} elements")
    check(lay["polls"] >= 2 and lay["status"] == "true", f"the page's polls: {lay}")

    f = {k: v["text"] for k, v in c["fields"].items()}
    check(f["name"] == "sample" and f["state"] == "ended" and s["stream_state"] == "ended",
          f"sample name/state {f['name']} {f['state']} (/stats {s['state']}, {s['stream_state']})")
    check(not c["fields"]["why"]["hidden"] and f["why-title"] == "ended:", f"the ended sample says {f['why-title']!r}")
    for k in ("source", "capture_path", "backend", "transfer"):
        check(f[k] == s[k], f"sample {k}: page {f[k]!r}, /stats {s[k]!r}")
    for k in ("captured", "published", "dropped", "decode_gaps", "copies", "reconnects"):
        check(f[k] == str(s["frames"][k]), f"sample {k}: page {f[k]!r}, /stats {s['frames'][k]}")
    check(f["captured"] == str(SAMPLE_FRAMES) and f["drops"] == "none", f"sample frames {f['captured']} {f['drops']}")
    check(f["ring"] == f"{s['ring']['in_flight']} of {s['ring']['slots']} slots in use", f"ring {f['ring']}")
    k = s["sink"]
    check(f["output"] == f"{k['type']}: {k['written']} written, {k['queued']} queued, lost: none",
          f"output: page {f['output']!r}, /stats {k}")
    for label, hist in [("end to end", s["latency_ms"]["e2e"])] + \
            [(f"{st} {part}", s["latency_ms"][st][part]) for st in ("convert", "infer", "publish")
             for part in ("wait", "busy")]:
        for q in ("p50", "p99", "max"):
            text = c["rows"][label][q]
            decimals = len(text.partition(".")[2])   # the page rounds to what it shows
            check(abs(float(text) - hist[q]) <= 0.5 * 10 ** -decimals + 1e-9, f"{label} {q}: page {text}, /stats {hist[q]}")
    print(f"ok browser: 16 tiles on one {SCREENS[0][0]}x{SCREENS[0][1]} screen, none wider than {SCREENS[1][0]} px "
          f"in either view; det's frame drawn with its {len(want)} detections; {cam} opened by its link with "
          f"{classes} labelled classes as text and {drawn} moving cells; yard says "
          f"{yard['whyDetail']!r}" + (", door waits for its camera" if door else "") +
          "; the ended sample's numbers are /stats'")


# ---- case mjpeg ----

class Mjpeg:
    """A client of /stream/<name>.mjpg: the response's headers, then its parts one by one."""

    def __init__(self, port, name, timeout=10):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.conn.request("GET", f"/stream/{name}.mjpg")
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.type = self.resp.getheader("content-type", "")
        self.buf = b""
        self.preamble = b""

    def _fill(self):
        chunk = self.resp.read1(65536)
        if not chunk:
            raise EOFError("the body ended")
        self.buf += chunk

    def part(self):
        """(headers dict, body bytes) of the next part; CRLFs before the first one are the preamble."""
        while True:
            at = self.buf.find(b"--zcpframe\r\n")
            if at >= 0:
                break
            check(self.buf.strip(b"\r\n") == b"" or len(self.buf) < 12, f"bytes outside a part: {self.buf[:80]!r}")
            self._fill()
        self.preamble += self.buf[:at]
        self.buf = self.buf[at + len(b"--zcpframe\r\n"):]
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n"))
        n = int(headers["Content-Length"])
        while len(self.buf) < n + 2:
            self._fill()
        body, tail, self.buf = self.buf[:n], self.buf[n:n + 2], self.buf[n + 2:]
        check(tail == b"\r\n", f"a part does not end with CRLF: {tail!r}")
        return headers, body

    def close(self):
        self.conn.close()


def case_mjpeg():
    pil()
    from PIL import Image
    port = th.free_port()
    fps = 5
    v4l2 = "v4l2 yes" in th.version()
    streams = [stream_yaml("syn", "      type: synthetic\n      width: 640\n      height: 480\n      fps: 20\n"
                                  "      pace: realtime", model=False)]
    if v4l2:
        streams.append(stream_yaml("door", f"      type: v4l2\n      device: {os.path.join(TMP, 'video-absent')}",
                                   model=False))
    # max_connections 8: at most 2 video clients; timeout_s 2 cuts a client that stopped reading.
    cfg = th.write("mjpeg.yaml", f"""log:
  summary_interval_s: 0
metrics:
  http:
    port: {port}
    max_connections: 8
    timeout_s: 2
    snapshot_fps: {fps}
streams:""" + "".join(streams))
    d = th.Daemon(cfg)
    clients = []
    try:
        status, _ = first_snapshot_answer(port, "syn", d)

        # Video: parts of distinct frames, each a whole JPEG of the stream's size, at most fps a second.
        a = Mjpeg(port, "syn")
        clients.append(a)
        check(a.status == 200 and a.type == "multipart/x-mixed-replace; boundary=zcpframe", f"{a.status} {a.type}")
        seqs, t0 = [], None
        while len(seqs) < 8:
            h, body = a.part()
            t0 = t0 or time.monotonic()
            check(h.get("Content-Type") == "image/jpeg", f"part headers {h}")
            img = Image.open(io.BytesIO(body))
            img.load()
            check(img.format == "JPEG" and img.size == (640, 480), f"part {len(seqs)}: {img.format} {img.size}")
            seqs.append(int(h["X-Zcp-Seq"]))
        took = time.monotonic() - t0
        check(len(set(seqs)) == len(seqs) and seqs == sorted(seqs), f"frames of the parts: {seqs}")
        check(took >= (len(seqs) - 1) / fps * 0.8, f"{len(seqs)} parts in {took:.2f} s: faster than {fps} a second")

        # A client that stops reading blocks nothing: the stream publishes at its rate, the first client
        # keeps getting frames; a third client is refused while two are connected.
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", port))
        stalled.sendall(b"GET /stream/syn.mjpg HTTP/1.1\r\nHost: x\r\n\r\n")
        clients.append(stalled)
        time.sleep(0.5)
        status, headers, body = request(port, "/stream/syn.mjpg")
        check(status == 503 and headers.get("retry-after") == "5", f"a third video client: {status} {headers} {body!r}")
        before = get_json(port, "/stats")["streams"][0]["frames"]["published"]
        t1 = time.monotonic()
        more = [int(a.part()[0]["X-Zcp-Seq"]) for _ in range(10)]
        after = get_json(port, "/stats")["streams"][0]["frames"]["published"]
        rate = (after - before) / (time.monotonic() - t1)
        check(more[0] > seqs[-1] and len(set(more)) == len(more), f"the reading client's frames: {more}")
        check(rate > 15, f"syn published {rate:.1f} frames a second beside a stalled video client (20 expected)")

        # The stalled one is cut once its socket stays full past timeout_s: its slot is free again.
        def admitted():
            c = Mjpeg(port, "syn")
            if c.status == 200:
                clients.append(c)
                return c
            c.close()
            return None
        c = wait_for("a video client admitted after the stalled one was cut", admitted, 60, interval=1)
        c.part()

        # A camera that is not there: the response starts, and until a frame comes only CRLFs
        # (the multipart preamble) every few seconds, so that a client that left is noticed.
        if v4l2:
            a.close()
            clients.remove(a)
            time.sleep(1)
            door = Mjpeg(port, "door")
            clients.append(door)
            check(door.status == 200, f"door: {door.status}")
            t2 = time.monotonic()
            door._fill()
            check(door.buf and door.buf.strip(b"\r\n") == b"", f"door sent {door.buf!r}")
            check(time.monotonic() - t2 < 8, "door sent nothing in 8 s")

        for path in ("/stream/nosuch.mjpg", "/stream/syn.jpg", "/stream/.mjpg", "/stream/"):
            check(request(port, path)[0] == 404, f"{path} is not 404")
    finally:
        # SIGTERM with video clients connected (one waiting for a frame that never comes): a clean exit.
        rc = d.stop(timeout=20)
        for c in clients:
            c.close()
    check(rc == 0, f"zcpipe exited {rc} with video clients connected:\n{d.stderr()}")
    print(f"ok mjpeg: parts of frames {seqs} in {took:.2f} s (at most {fps} a second), whole 640x480 JPEGs; "
          f"a stalled client blocked nothing ({rate:.1f} frames/s published) and was cut; a third client 503; "
          + ("the absent camera's stream sends keep-alive CRLFs; " if v4l2 else "") + "clean exit with clients")


CASES = {"snapshot": case_snapshot, "browser": case_browser, "mjpeg": case_mjpeg}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: test_page.py " + "|".join(CASES), file=sys.stderr)
        sys.exit(64)
    if "http yes" not in th.version():
        skip("zcpipe built without http (libmicrohttpd)")
    CASES[sys.argv[1]]()
