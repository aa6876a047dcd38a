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
                        relative names
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
import importlib
import os
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

TMP = None   # the first tmpdir(): where write() puts relative names


def fail(msg):
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
    if TMP is None:
        TMP = d
    return d


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
