#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Results sinks under a hostile world: nothing lost silently, the pipeline never stalls.

  fulldisk     the file sink's file cannot grow (RLIMIT_FSIZE, and a 64 KiB tmpfs where
               mount is permitted): the file holds only whole, strictly valid JSON lines,
               exactly as many as the summary says were written, and published = written
               + lost (write_error > 0).
  closedpipe   `zcpipe | head -1` on an endless source ends by itself, exit 0, and head
               got one valid line.
  stopped      stdout is a pipe nobody reads: a 3000-frame run still ends by itself
               (publish never blocks), the lines that did not fit are counted
               (queue_full), published = written + lost; then an endless run with the same
               stopped reader stops on SIGTERM.
  unixowner    a second zcpipe with the same unix socket refuses to start and leaves the
               first one's socket alone (clients still reach the first), whether it fails on
               the metrics port (same config) or on the socket's lock; the first one removes
               its socket and lock at exit.
  unixreload   a reload that adds a stream on the running stream's socket is refused (two
               streams on one socket: the file is refused whole, nothing stops), the next reload
               leaves the socket working.
  deleted      the results file deleted while running, then its directory (issue 40, 3): the
               file is made again at once (counted in reconnects), with no line written into
               the deleted file after it went; without its directory the lines are counted lost
               (write_error), the log and /stats say why and /healthz is 503 ("results are not
               leaving"); once the directory is back the file is made again, /healthz is 200,
               and published = written + lost, the lines in the files equal written.
  noreader     issue 40, 5: a unix socket nobody connects to counts every line lost as
               no_reader, none written; a client that connects and never reads is cut once its
               socket buffer is full: then it reads what is there, and the lines it got whole
               are exactly the lines counted written, the rest lost (slow_reader, no_reader).
  closedsocket stdout is a stream socket (as the journal's under systemd) whose reader
               leaves: the service keeps running (a logger going away is not a stop), the
               lines it cannot send are counted lost, SIGTERM then ends it with exit 0.

Usage: test_sink.py [case...]   (env ZCPIPE, ZCP_SOURCE_ROOT set by meson)
"""
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zcpjson  # noqa: E402
from zcptest import ZCPIPE, check, fail, free_port, skip, tmpdir, write  # noqa: E402

TMP = tmpdir("zcp-sink-")
zcpjson.watch(TMP)

def stream(name, frames, output, size=(64, 48)):
    return f"""  - name: {name}
    source:
      type: synthetic
      width: {size[0]}
      height: {size[1]}
      frames: {frames}
      pace: fast
    ring:
      slots: 4
    gpu:
      backend: cpu
    model:
      enabled: false
{output}"""


def config(name, frames, output, size=(64, 48), port=None, extra=""):
    """A synthetic stream without the model (fast on any machine); `port`: the metrics port, None = off."""
    http = f"    enabled: true\n    port: {port}\n" if port else "    enabled: false\n"
    return write(name + ".yaml", "log:\n  summary_interval_s: 0\nmetrics:\n  http:\n" + http + "streams:\n" +
                 stream(name, frames, output, size) + extra)


def output_file(path):
    return f"    output:\n      type: file\n      path: {path}\n"


STDOUT = "    output:\n      type: stdout\n"


def sink_summary(err, stream):
    """(published, written, lost by reason) from the exit summary."""
    m = re.search(r"^stream " + re.escape(stream) + r": \d+ frames captured, (\d+) published", err, re.M)
    check(m, f"no summary for {stream}:\n{err}")
    published = int(m.group(1))
    m = re.search(r"^  output: (\d+) lines written, (\d+) lost(.*)$", err[m.end():], re.M)
    check(m, f"no output line in the summary of {stream}:\n{err}")
    lost = {k: int(v) for v, k in re.findall(r", (\d+) (queue_full|write_error|too_long|no_reader|slow_reader)",
                                             m.group(3))}
    check(sum(lost.values()) == int(m.group(2)), f"lost by reason does not add up: {m.group(0)}")
    return published, int(m.group(1)), lost


def check_accounting(err, stream, what):
    published, written, lost = sink_summary(err, stream)
    check(published == written + sum(lost.values()),
          f"{what}: published {published} != written {written} + lost {lost}")
    return published, written, lost


def full_file_run(path, tag, preexec=None):
    cfg = config("full" + tag, 400, output_file(path), size=(96, 64))
    p = subprocess.run([ZCPIPE, "--config", cfg], capture_output=True, text=True, timeout=300, preexec_fn=preexec)
    check(p.returncode == 0, f"fulldisk {tag}: exit {p.returncode}\n{p.stderr}")
    rows = zcpjson.read_lines(path)   # whole lines only, each strict JSON
    published, written, lost = check_accounting(p.stderr, "full" + tag, "fulldisk " + tag)
    check(published == 400, f"fulldisk {tag}: {published} published of 400")
    check(len(rows) == written, f"fulldisk {tag}: the file has {len(rows)} lines, the summary says {written} written")
    check(lost.get("write_error", 0) > 0, f"fulldisk {tag}: nothing counted lost: {lost}\n{p.stderr}")
    check([r["seq"] for r in rows] == list(range(len(rows))), f"fulldisk {tag}: lines out of order or missing")
    check("write failed" in p.stderr, f"fulldisk {tag}: no log line about the failed writes:\n{p.stderr}")
    return written, lost


def case_fulldisk():
    limit = 64 * 1024

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    written, lost = full_file_run(os.path.join(TMP, "rlimit.jsonl"), "rlimit", small_files)
    print(f"fulldisk: RLIMIT_FSIZE {limit}: {written} lines written whole, {lost} lost")

    mnt = os.path.join(TMP, "mnt")
    os.mkdir(mnt)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"fulldisk: tmpfs variant skipped (mount not permitted: {r.stderr.strip()})")
        return
    try:
        written, lost = full_file_run(os.path.join(mnt, "full.jsonl"), "tmpfs")
        print(f"fulldisk: 64 KiB tmpfs: {written} lines written whole, {lost} lost")
    finally:
        subprocess.run(["umount", mnt])


def case_closedpipe():
    cfg = config("closed", 0, STDOUT)
    cmd = f"'{ZCPIPE}' --config '{cfg}' 2>'{cfg}.stderr' | head -1; echo \"rc=${{PIPESTATUS[0]}}\""
    p = subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, _ = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        fail("closedpipe: `zcpipe | head -1` on an endless source did not end within 120 s")
    with open(cfg + ".stderr") as f:
        err = f.read()
    lines = stdout.splitlines()
    check(len(lines) == 2 and lines[1] == "rc=0", f"closedpipe: {stdout!r}\n{err}")
    check(zcpjson.loads(lines[0])["stream"] == "closed", f"closedpipe: first line {lines[0]!r}")
    check("the reader went away" in err, f"closedpipe: no log line saying why it stopped:\n{err}")
    published, written, lost = check_accounting(err, "closed", "closedpipe")
    check(written >= 1, f"closedpipe: {written} written")
    print(f"closedpipe: ended, exit 0; {published} published, {written} written, {lost} lost")


def case_stopped():
    # Finite: the run must end by itself although nobody ever reads its stdout.
    frames = 3000
    cfg = config("stopped", frames, STDOUT)
    r, w = os.pipe()
    err = open(cfg + ".stderr", "w+")
    proc = subprocess.Popen([ZCPIPE, "--config", cfg], stdout=w, stderr=err)
    os.close(w)
    try:
        rc = proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        fail("stopped: publish stalled behind a reader that does not read (no exit within 300 s)")
    err.seek(0)
    text = err.read()
    check(rc == 0, f"stopped: exit {rc}\n{text}")
    published, written, lost = check_accounting(text, "stopped", "stopped")
    check(published == frames, f"stopped: {published} of {frames} published:\n{text}")
    check(lost.get("queue_full", 0) > 0, f"stopped: nothing counted queue_full: {lost}")
    check("does not keep up" in text, f"stopped: no log line about the dropped lines:\n{text}")
    # What the pipe holds is whole lines, strictly valid.
    os.set_blocking(r, False)
    data = b""
    while True:
        try:
            chunk = os.read(r, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    os.close(r)
    rows = zcpjson.parse_lines(data, "stopped pipe")
    check(len(rows) == written, f"stopped: the pipe holds {len(rows)} lines, the summary says {written} written")
    print(f"stopped: {frames} published with a stopped reader: {written} written, {lost} lost")

    # Endless, same stopped reader: SIGTERM still stops it.
    cfg = config("stopterm", 0, STDOUT)
    r, w = os.pipe()
    err = open(cfg + ".stderr", "w+")
    proc = subprocess.Popen([ZCPIPE, "--config", cfg], stdout=w, stderr=err)
    os.close(w)
    # Until the pipe is surely full: more than a pipe's worth of lines published.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        err.seek(0)
        if "does not keep up" in err.read():
            break
        time.sleep(0.2)
    else:
        proc.kill()
        fail("stopterm: the queue never filled")
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        fail("stopterm: SIGTERM did not stop zcpipe within 30 s while its stdout reader was stopped")
    os.close(r)
    err.seek(0)
    text = err.read()
    check(rc == 0, f"stopterm: exit {rc}\n{text}")
    check_accounting(text, "stopterm", "stopterm")
    print("stopterm: SIGTERM stopped it with the reader stopped")


def case_closedsocket():
    cfg = config("closedsock", 0, STDOUT)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    err = open(cfg + ".stderr", "w+")
    proc = subprocess.Popen([ZCPIPE, "--config", cfg], stdout=theirs, stderr=err)
    theirs.close()
    ours.settimeout(60)
    first = ours.makefile("rb").readline()
    check(zcpjson.loads(first.decode())["stream"] == "closedsock", f"closedsocket: first line {first!r}")
    ours.close()
    # The reader is gone; the daemon must keep running (and publishing) until told to stop.
    time.sleep(2)
    check(proc.poll() is None, f"closedsocket: zcpipe exited ({proc.returncode}) when its stdout socket closed")
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        fail("closedsocket: SIGTERM did not stop zcpipe within 30 s")
    err.seek(0)
    text = err.read()
    check(rc == 0, f"closedsocket: exit {rc}\n{text}")
    check("the reader went away" not in text, f"closedsocket: stopped as if on SIGTERM:\n{text}")
    published, written, lost = check_accounting(text, "closedsock", "closedsocket")
    check(lost.get("write_error", 0) > 0, f"closedsocket: nothing counted lost after the reader left: {lost}")
    print(f"closedsocket: kept running; {published} published, {written} written, {lost} lost")


def connect_unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    return s


def read_one_line(s):
    data = b""
    while b"\n" not in data:
        chunk = s.recv(65536)
        check(chunk, "unixowner: the socket closed before a line came")
        data += chunk
    return zcpjson.loads(data.split(b"\n")[0])


def second_instance(cfg, want):
    """Runs zcpipe on cfg while the first holds the socket: it must refuse, saying `want`."""
    second = subprocess.Popen([ZCPIPE, "--config", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    try:
        _, err = second.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        second.kill()
        second.wait()
        fail("unixowner: a second instance with the same socket is running (it took the socket over)")
    check(second.returncode != 0, f"unixowner: a second instance with the same socket started:\n{err}")
    check(want in err, f"unixowner: the second instance does not say {want!r}:\n{err}")


def case_unixowner():
    sock = os.path.join(TMP, "results.sock")
    out = f"    output:\n      type: unix\n      path: {sock}\n"
    port = free_port()
    cfg = config("owner", 0, out, port=port)
    err1 = open(cfg + ".first", "w+")
    first = subprocess.Popen([ZCPIPE, "--config", cfg], stdout=subprocess.DEVNULL, stderr=err1)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.1)
        check(os.path.exists(sock), "unixowner: the first instance made no socket")
        ino = os.stat(sock).st_ino
        c1 = connect_unix(sock)
        check(read_one_line(c1)["stream"] == "owner", "unixowner: first instance: no line")

        # The same config: the metrics port is taken, and it fails before it opens any sink (a
        # build without the HTTP server opens no port: there the socket's lock refuses it).
        http = "http yes" in subprocess.run([ZCPIPE, "--version"], capture_output=True, text=True).stdout
        second_instance(cfg, "Address already in use" if http else "another running zcpipe")
        check(os.path.exists(sock) and os.stat(sock).st_ino == ino,
              "unixowner: a second instance (same config) replaced or removed the first one's socket")
        # Another metrics port: the socket's lock refuses it.
        second_instance(config("owner2", 0, out), "another running zcpipe")
        check(os.path.exists(sock) and os.stat(sock).st_ino == ino,
              "unixowner: a second instance replaced or removed the first one's socket")
        c2 = connect_unix(sock)
        check(read_one_line(c2)["stream"] == "owner", "unixowner: a new client cannot reach the first instance")
        c1.close()
        c2.close()

        first.send_signal(signal.SIGTERM)
        rc = first.wait(timeout=60)
        check(rc == 0, f"unixowner: first instance exit {rc}")
        check(not os.path.exists(sock) and not os.path.exists(sock + ".lock"),
              "unixowner: the socket or its lock was left behind")
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    print("unixowner: the second instance refused, the first kept its socket")


def case_unixreload():
    """A reload that adds a stream on the running one's socket, then one that removes it again."""
    sock = os.path.join(TMP, "reload.sock")
    out = f"    output:\n      type: unix\n      path: {sock}\n"
    cfg = config("keep", 0, out)
    with open(cfg) as f:
        base = f.read()
    err = open(cfg + ".stderr", "w+")
    d = subprocess.Popen([ZCPIPE, "--config", cfg], stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.1)
        check(os.path.exists(sock), "unixreload: no socket")
        ino = os.stat(sock).st_ino

        def reload(text, marker):
            with open(cfg, "w") as f:
                f.write(text)
            d.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                err.seek(0)
                if err.read().count(marker) >= 1:
                    return
                time.sleep(0.1)
            err.seek(0)
            fail(f"unixreload: no {marker!r} after SIGHUP:\n{err.read()}")

        # two streams on one socket: the new file is refused whole, before anything stops
        reload(base + stream("intruder", 0, out), "reload refused")
        check(os.path.exists(sock) and os.stat(sock).st_ino == ino, "unixreload: the added stream took the socket")
        reload(base.replace("summary_interval_s: 0", "summary_interval_s: 0\n  level: info"), "reloaded")
        check(os.path.exists(sock) and os.stat(sock).st_ino == ino, "unixreload: removing the stream broke the socket")
        c = connect_unix(sock)
        check(read_one_line(c)["stream"] == "keep", "unixreload: the running stream is unreachable")
        c.close()
        d.send_signal(signal.SIGTERM)
        check(d.wait(timeout=60) == 0, "unixreload: exit status")
    finally:
        if d.poll() is None:
            d.kill()
            d.wait()
    err.seek(0)
    text = err.read()
    check(f"stream intruder: output.path {sock} is also the output of stream keep" in text,
          f"unixreload: the refusal is not explained:\n{text}")
    print("unixreload: the added stream was refused, the running one kept its socket")


def paced(cfg, fps):
    """The config at `cfg` with its source at `fps` frames a second instead of as fast as it can."""
    with open(cfg) as f:
        text = f.read()
    return write(cfg, text.replace("      pace: fast\n", f"      fps: {fps}\n"))


def lines_of(path):
    """The whole lines of a file (every one strict JSON) and whether a torn tail follows."""
    with open(path, "rb") as f:
        data = f.read()
    return [zcpjson.loads(x) for x in data.split(b"\n")[:-1]], not data.endswith(b"\n") and data != b""


def get(port, path):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def wait_until(what, fn, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    fail(f"timed out waiting for {what}")
    return None


def case_deleted():
    import json
    if "http yes" not in subprocess.run([ZCPIPE, "--version"], capture_output=True, text=True).stdout:
        skip("built without http: /stats and /healthz are what this case reads")
    port = free_port()
    d = os.path.join(TMP, "results")
    os.makedirs(d)
    path = os.path.join(d, "del.jsonl")
    cfg = paced(config("del", 0, output_file(path), port=port), 50)
    err = open(cfg + ".stderr", "w+")
    proc = subprocess.Popen([ZCPIPE, "--config", cfg], stdout=subprocess.DEVNULL, stderr=err)

    def stats():
        st, body = get(port, "/stats")
        return json.loads(body)["streams"][0] if st == 200 else None
    try:
        wait_until("40 lines", lambda: os.path.exists(path) and len(lines_of(path)[0]) >= 40)
        # 1. The file alone: held open here to see what goes into it after it is gone.
        old = open(path, "rb")
        at = os.fstat(old.fileno()).st_size
        os.unlink(path)
        wait_until("the file made again", lambda: os.path.exists(path) and len(lines_of(path)[0]) >= 10)
        late = old.read()[max(0, at - 1):].count(b"\n") - (1 if at else 0)
        check(late <= 2, f"deleted: {late} lines went into the deleted file after it was deleted")
        check(stats()["sink"]["reconnects"] == 1, f"deleted: made again not counted: {stats()['sink']}")
        # 2. Its directory: the lines are lost, counted, and /healthz says why.
        second = open(path, "rb")
        shutil.rmtree(d)
        wait_until("/healthz 503", lambda: get(port, "/healthz")[0] == 503)
        st, body = get(port, "/healthz")
        check("stream del: results are not leaving (output file: No such file or directory)" in body,
              f"deleted: /healthz {st} {body!r}")
        s1 = wait_until("lines lost", lambda: (lambda s: s if s["sink"]["lost"]["write_error"] >= 20 else None)(stats()))
        check(not s1["sink"]["up"] and s1["sink"]["error"] == "No such file or directory", f"deleted: {s1['sink']}")
        # 3. The directory is back: so is the file, and /healthz is 200.
        os.makedirs(d)
        wait_until("the file made again in the new directory", lambda: os.path.exists(path) and len(lines_of(path)[0]) >= 10)
        wait_until("/healthz 200", lambda: get(port, "/healthz")[0] == 200)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
        old.seek(0)
        second.seek(0)
        in_files = old.read().count(b"\n") + second.read().count(b"\n") + len(lines_of(path)[0])
        old.close()
        second.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err.seek(0)
    log = err.read()
    check(rc == 0, f"deleted: exit {rc}\n{log[-2000:]}")
    for want in ("the file was deleted or moved away: making it again", "cannot make it again (No such file or directory)",
                 "results are written again"):
        check(want in log, f"deleted: the log does not say {want!r}\n{log[-3000:]}")
    published, written, lost = check_accounting(log, "del", "deleted")
    check(lost.get("write_error", 0) >= 20, f"deleted: lost {lost}")
    check(in_files == written, f"deleted: {in_files} lines in the three files, {written} counted written")
    print(f"deleted: ok: {published} published = {written} written + {lost} lost; made again twice, "
          f"{late} lines into the deleted file")


def case_noreader():
    sock = os.path.join(TMP, "nobody.sock")
    out = f"    output:\n      type: unix\n      path: {sock}\n"
    p = subprocess.run([ZCPIPE, "--config", config("nobody", 300, out)], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"noreader: exit {p.returncode}\n{p.stderr}")
    published, written, lost = check_accounting(p.stderr, "nobody", "noreader")
    check(written == 0 and lost.get("no_reader") == published == 300, f"noreader: {written} written, lost {lost}")

    # A client that never reads: cut when its buffer is full; what it got whole is what was written.
    sock = os.path.join(TMP, "deaf.sock")
    out = f"    output:\n      type: unix\n      path: {sock}\n"
    cfg = paced(config("deaf", 0, out, size=(160, 120)), 1000)
    proc = subprocess.Popen([ZCPIPE, "--config", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until("the socket", lambda: os.path.exists(sock))
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.connect(sock)
        time.sleep(3)   # it fills and is cut, long before this
        c.settimeout(10)
        data = b""
        while True:
            chunk = c.recv(1 << 16)
            if not chunk:
                break
            data += chunk
        c.close()
        proc.send_signal(signal.SIGTERM)
        _, log = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    got = data.count(b"\n")
    for line in data.split(b"\n")[:-1]:
        zcpjson.loads(line)
    published, written, lost = check_accounting(log, "deaf", "noreader")
    check("dropping a client" in log, f"noreader: the client was not cut\n{log[-2000:]}")
    check(got == written and lost.get("slow_reader", 0) > 0 and lost.get("no_reader", 0) > 0,
          f"noreader: the client got {got} whole lines, {written} counted written, lost {lost}")
    print(f"noreader: ok: nobody connected: 300 of 300 lost as no_reader; a deaf client got {got} lines = written, "
          f"lost {lost}")


CASES = {"fulldisk": case_fulldisk, "closedpipe": case_closedpipe, "stopped": case_stopped,
         "unixowner": case_unixowner, "unixreload": case_unixreload, "closedsocket": case_closedsocket,
         "deleted": case_deleted, "noreader": case_noreader}

if __name__ == "__main__":
    for n in sys.argv[1:] or list(CASES):
        CASES[n]()
