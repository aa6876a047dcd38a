# SPDX-License-Identifier: MIT
"""Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe): no
websocket library, no port. Chromium reads commands on its fd 3 and writes answers and events on
its fd 4, each a JSON object ended by a NUL byte.

  b = Browser(exe, profile_dir)      starts it (headless) with one page attached
  b.call(method, **params)           a command on the page's session; its result, or raises
  b.size(w, h)                       the viewport, in CSS pixels (device scale 1)
  b.goto(url)                        navigates and waits for the load event
  b.js(expr)                         the value of a JavaScript expression (awaits promises)
  b.wait(what, expr, timeout)        polls expr until it is truthy; returns its value
  b.click(x, y)                      a real mouse click (pressed and released) at CSS pixels
  b.screenshot(path)                 a PNG of the viewport
  b.problems                         script exceptions, CSP violations and errors the page logged
  b.close()

Every read has a deadline: a browser that stops answering fails the test, never hangs it.
"""
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--mute-audio", "--remote-debugging-pipe"]


class CdpError(Exception):
    pass


def executable():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        exe = shutil.which(name)
        if exe:
            return exe
    return None


class Browser:
    def __init__(self, exe, profile, timeout=120):
        to_chrome = os.pipe()
        from_chrome = os.pipe()
        # Out of the way of 3 and 4 first, so that the child's dup2()s cannot overwrite each other.
        ours = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_chrome[0], from_chrome[1])]
        for fd in to_chrome[:1] + from_chrome[1:]:
            os.close(fd)

        def child_fds():
            os.dup2(ours[0], 3)
            os.dup2(ours[1], 4)

        self.stderr_path = os.path.join(profile, "chromium.log")
        self._err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen([exe] + FLAGS + [f"--user-data-dir={profile}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._err,
                                     preexec_fn=child_fds, close_fds=False)   # Python's fds are not inherited
        for fd in ours:
            os.close(fd)
        self._w, self._r = to_chrome[1], from_chrome[0]
        self._buf = b""
        self._id = 0
        self.timeout = timeout
        self.session = None
        self.problems = []
        self.events = []
        try:
            target = self.call("Target.createTarget", _session=False, url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", _session=False, targetId=target,
                                     flatten=True)["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                self.call(domain + ".enable")
        except Exception:
            self.close()
            raise

    # ---- the wire ----

    def _send(self, msg):
        data = json.dumps(msg).encode() + b"\0"
        while data:
            n = os.write(self._w, data)
            data = data[n:]

    def _read_one(self, deadline):
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError("chromium did not answer in time")
            ready, _, _ = select.select([self._r], [], [], min(left, 1.0))
            if not ready:
                if self.proc.poll() is not None:
                    raise CdpError(f"chromium exited ({self.proc.returncode}); see {self.stderr_path}")
                continue
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise CdpError(f"chromium closed the pipe; see {self.stderr_path}")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def _event(self, msg):
        method, p = msg.get("method"), msg.get("params", {})
        self.events.append(method)
        if method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.problems.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
        elif method == "Log.entryAdded":
            e = p.get("entry", {})
            text = str(e.get("text", ""))
            # A 404 or 503 of a poll is no problem; a script error or a CSP refusal is.
            if e.get("source") in ("security", "javascript") or \
                    any(w in text for w in ("Refused", "Content Security Policy", "Uncaught", "TypeError")):
                self.problems.append(f"log ({e.get('source')}, {e.get('level')}): {text}")
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            args = p.get("args", [])
            self.problems.append("console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in args))

    def call(self, method, _session=True, _timeout=None, **params):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if _session:
            msg["sessionId"] = self.session
        self._send(msg)
        deadline = time.monotonic() + (_timeout or self.timeout)
        while True:
            m = self._read_one(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise CdpError(f"{method}: {m['error']}")
                return m.get("result", {})
            if "method" in m:
                self._event(m)

    def pump(self, seconds):
        """Reads events for `seconds` (the page keeps running meanwhile anyway)."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                m = self._read_one(deadline)
                if "method" in m:
                    self._event(m)
        except CdpError as e:
            if "in time" not in str(e):
                raise

    # ---- what tests use ----

    def size(self, width, height):
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=False)

    def goto(self, url, timeout=60):
        self.events.clear()
        r = self.call("Page.navigate", url=url)
        if "errorText" in r:
            raise CdpError(f"{url}: {r['errorText']}")
        if not r.get("loaderId"):
            return   # the same document, another #fragment: no load
        deadline = time.monotonic() + timeout
        while "Page.loadEventFired" not in self.events:
            m = self._read_one(deadline)
            if "method" in m:
                self._event(m)

    def js(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise CdpError(f"{expr[:80]!r}: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r.get("result", {}).get("value")

    def wait(self, what, expr, timeout=60, interval=0.25):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.js(expr)
            if last:
                return last
            self.pump(interval)
        raise CdpError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")

    def click(self, x, y):
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            extra = {"button": "left", "clickCount": 1} if kind != "mouseMoved" else {}
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            if self.proc.poll() is None:
                self.call("Browser.close", _session=False, _timeout=10)
        except (CdpError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._w, self._r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._err.close()
