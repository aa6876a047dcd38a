# SPDX-License-Identifier: MIT
"""What the integration test scripts share, so that each reads as its cases.

  ZCPIPE, ROOT, BUILD   the binary under test, the source and build trees (meson test's env)
  WEIGHTS               the default model: $ZCP_MODELDIR's, else the one generated into the
                        build tree (models/meson.build)
  HOST, SKIP            127.0.0.1; 77, the exit code meson counts as skipped

  fail(msg)             "FAIL: msg" on stderr, exit 1
  check(cond, msg)      fail(msg) unless cond
  skip(why)             "SKIP: why", exit 77: a test that lacks what it needs says so
  tmpdir(prefix)        a fresh directory; the first one made is where write() puts
                        relative names. At exit it is removed if the test passed or skipped,
                        kept if it failed, with one line on stderr: "kept for inspection:
                        /tmp/zcp-itest-abcd". Failed: fail(), an uncaught exception, or
                        sys.exit() with a status other than 0, None and 77 (sys.exit is wrapped
                        for that: atexit cannot see the status; so no `raise SystemExit`).
                        A process removes only what it made: a helper child started from the
                        same script leaves its parent's directories alone.
  kept()                the test failed: keep the directories, say where (once); zcpjson
                        calls it before its os._exit(), which skips atexit
  write(name, text, mode=None)
                        the file `name` (relative: in the first tmpdir()) holding `text`,
                        chmod'ed to `mode` if given; returns its path
  free_port(host=HOST)  a TCP port that nothing listens on right now
  wait_for(what, fn, timeout, interval=0.1, detail=None)
                        fn()'s first true value, polling every `interval` s; after
                        `timeout` s, fail naming `what`, fn's last value and detail()
                        (a log tail, counters) when given
  import_debian(module, package)
                        a module Debian packages as python3-<x>, also under another
                        python3; skip() naming the package when it is missing
"""
import atexit
import importlib
import os
import shutil
import socket
import sys
import tempfile
import time

ZCPIPE = os.path.abspath(os.environ.get("ZCPIPE", "build/zcpipe"))
ROOT = os.path.abspath(os.environ.get("ZCP_SOURCE_ROOT", "."))
BUILD = os.path.abspath(os.environ.get("ZCP_BUILD_ROOT", "build"))
WEIGHTS = os.path.join(os.environ.get("ZCP_MODELDIR") or os.path.join(BUILD, "models"), "zcnet-default.safetensors")
HOST = "127.0.0.1"
SKIP = 77

TMP = None      # the first tmpdir(): where write() puts relative names
MADE = []       # (pid, path) of every tmpdir(): the pid, so that a forked child leaves them alone
FAILED = False  # the directories stay for inspection
_SAID = False   # kept() has named them


def fail(msg):
    global FAILED
    FAILED = True
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def tmpdir(prefix):
    global TMP
    d = tempfile.mkdtemp(prefix=prefix)
    MADE.append((os.getpid(), d))
    if TMP is None:
        TMP = d
    return d


def _mine():
    return [d for pid, d in MADE if pid == os.getpid() and os.path.isdir(d)]


def kept():
    global FAILED, _SAID
    FAILED = True
    mine = _mine()
    if mine and not _SAID:
        _SAID = True
        print("kept for inspection: " + " ".join(mine), file=sys.stderr, flush=True)


@atexit.register
def _clean_up():
    """Registered on import, so before (and run after: atexit is LIFO) the handlers that still read
    the directories or use them: zcpjson.watch()'s check, test_mqtt_common's end of its servers."""
    if FAILED:
        kept()
        return
    for d in _mine():
        shutil.rmtree(d, ignore_errors=True)


def write(name, text, mode=None):
    path = name if os.path.isabs(name) else os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    if mode is not None:
        os.chmod(path, mode)
    return path


def free_port(host=HOST):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for(what, fn, timeout, interval=0.1, detail=None):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    more = detail() if detail else ""
    fail(f"timed out after {timeout} s waiting for {what} (last: {last!r})" + (f"\n{more}" if more else ""))
    return None


def import_debian(module, package):
    try:
        return importlib.import_module(module)
    except ImportError:
        if "/usr/lib/python3/dist-packages" not in sys.path:
            sys.path.append("/usr/lib/python3/dist-packages")
        try:
            return importlib.import_module(module)
        except ImportError:
            skip(f"{package} is not installed (tools/setup.sh installs it)")
    return None


_sys_exit = sys.exit
_excepthook = sys.excepthook


def _exit(status=None):
    """sys.exit that notes a failing status: the exit handler cannot see the status, and SystemExit
    never reaches sys.excepthook."""
    global FAILED
    if status not in (None, 0, SKIP):
        FAILED = True
    _sys_exit(status)


def _uncaught(*exc):
    global FAILED
    FAILED = True
    _excepthook(*exc)


sys.exit = _exit
sys.excepthook = _uncaught
