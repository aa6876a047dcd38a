#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Which backend a stream runs on, and why, as an operator sees it (no GPU needed).

The CUDA probe's fault injection (ZCP_FAULT_GPU, infer/backend.h) makes it fail
exactly as on a GPU with that fault, through the same code that explains real
failures. For each of no-kernel-image, driver-too-old and out-of-memory:
  - backend: auto runs the stream on the CPU backend, and says so loudly: a
    warning line naming the cause and the fix, the same reason in /stats
    (backend, backend_reason) and in STATUS= (sd_notify, fake NOTIFY_SOCKET);
  - backend: cuda exits 69 with the same reason on one error line.
no-device (a host without a GPU) is the quiet case: an info line, the reason
in /stats, nothing in STATUS=. Without any injection, the real probe's verdict
on this machine is checked the same way (CPU with a reason here; CUDA with a
zcpipe_gpu_info metric on a GPU machine). A build without CUDA: backend: cuda
exits 69 saying so, auto runs cpu with that reason.

Usage: test_backend.py   (env ZCPIPE set by meson)
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zcptest import HOST, ZCPIPE, check, free_port, skip, tmpdir, write  # noqa: E402

TMP = tmpdir("zcp-backend-")

# fault -> what the reason must say (cause, then fix)
FAULTS = {
    "no-kernel-image": ("no kernel image for GPU 0 (injected GPU, compute capability 6.1)", "-Dcuda-arch=61"),
    "driver-too-old": ("the NVIDIA driver is too old: it supports CUDA 11.8", "install an NVIDIA driver for CUDA"),
    "out-of-memory": ("out of memory on GPU 0 (injected GPU)", "stop what holds the GPU"),
}


def features():
    out = subprocess.run([ZCPIPE, "--version"], capture_output=True, text=True, timeout=60).stdout
    return {k: v == "yes" for k, v in re.findall(r"(\w+) (yes|no)", out)}


def config(name, backend, port):
    return write(name + ".yaml", f"""log:
  summary_interval_s: 0
metrics:
  http:
    port: {port}
streams:
  - name: cam
    source:
      type: synthetic
      width: 96
      height: 64
      fps: 30
      pace: realtime
    gpu:
      backend: {backend}
    model:
      enabled: false
    output:
      type: none
""")


class Notify:
    """The service manager's end of sd_notify: the STATUS= values received."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.status = []
        self.done = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.done:
            try:
                data = self.sock.recv(65536).decode()
            except socket.timeout:
                continue
            except OSError:
                return
            for line in data.split("\n"):
                if line.startswith("STATUS="):
                    self.status.append(line[len("STATUS="):])

    def close(self):
        self.done = True
        self.thread.join()
        self.sock.close()


def get(port, path):
    with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=5) as r:
        return r.read().decode()


def run_daemon(name, backend, fault):
    """Runs zcpipe until /stats lists the stream; returns (stats stream, STATUS= list, stderr, /metrics)."""
    port = free_port()
    env = dict(os.environ)
    env.pop("ZCP_FAULT_GPU", None)
    if fault:
        env["ZCP_FAULT_GPU"] = fault
    notify = Notify(os.path.join(TMP, name + ".notify"))
    env["NOTIFY_SOCKET"] = notify.path
    err_path = os.path.join(TMP, name + ".stderr")
    with open(err_path, "w") as err:
        proc = subprocess.Popen([ZCPIPE, "--config", config(name, backend, port)], stdout=subprocess.DEVNULL,
                                stderr=err, env=env)
    stream = metrics = None
    end = time.monotonic() + 30
    try:
        while time.monotonic() < end and proc.poll() is None:
            try:
                streams = json.loads(get(port, "/stats"))["streams"]
                if streams and notify.status:
                    stream = streams[0]
                    metrics = get(port, "/metrics")
                    break
            except OSError:
                pass
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = "killed"
        notify.close()
    with open(err_path) as f:
        stderr = f.read()
    check(stream is not None, f"{name}: /stats never listed the stream (exit {rc})\n{stderr}")
    check(rc == 0, f"{name}: exit {rc} after SIGTERM, expected 0\n{stderr}")
    return stream, notify.status, stderr, metrics


def run_cuda(name, fault):
    env = dict(os.environ)
    env.pop("ZCP_FAULT_GPU", None)
    if fault:
        env["ZCP_FAULT_GPU"] = fault
    p = subprocess.run([ZCPIPE, "--config", config(name, "cuda", free_port())], capture_output=True, text=True,
                       timeout=60, env=env)
    return p.returncode, p.stderr


def main():
    feats = features()
    have_systemd = feats.get("systemd", False)
    if not feats.get("http", False):
        skip("built without libmicrohttpd (no /stats to read)")

    if not feats.get("cuda", False):
        rc, err = run_cuda("nocuda", None)
        check(rc == 69 and "backend: cuda asked for, but this build has no CUDA support" in err,
              f"cuda without CUDA support: exit {rc}\n{err}")
        stream, _, err, _ = run_daemon("nocuda-auto", "auto", None)
        check(stream["backend"] == "cpu" and stream["backend_reason"] == "this build has no CUDA support",
              f"auto without CUDA support: {stream}")
        print("no CUDA support: backend cuda exits 69, auto runs cpu with the reason")
        return

    for fault, (cause, fix) in FAULTS.items():
        stream, status, err, _ = run_daemon("auto-" + fault, "auto", fault)
        reason = stream["backend_reason"]
        check(stream["backend"] == "cpu", f"{fault}: backend {stream['backend']}, expected cpu")
        check(reason.startswith("GPU 0 cannot be used: " + cause) and "; fix: " in reason and fix in reason,
              f"{fault}: /stats backend_reason {reason!r}")
        warn = [line for line in err.splitlines() if "backend: auto -> cpu" in line]
        check(len(warn) == 1 and warn[0].endswith("warn: backend: auto -> cpu, " + reason),
              f"{fault}: expected one warning with the reason {reason!r}, got {warn}\n{err}")
        if have_systemd:
            check(any(f"[backend cpu: {reason}]" in s for s in status),
                  f"{fault}: STATUS= does not carry the reason: {status[-1:]}")
        rc, err = run_cuda("cuda-" + fault, fault)
        want = "backend: cuda asked for, but " + reason
        check(rc == 69 and any(line.endswith(want) and "error:" in line for line in err.splitlines()),
              f"{fault}: backend cuda: exit {rc}, expected 69 and a line ending {want!r}\n{err}")
        print(f"{fault}: auto -> cpu with a warning, /stats and STATUS= say why; cuda exits 69 with the same reason")

    stream, status, err, _ = run_daemon("auto-no-device", "auto", "no-device")
    check(stream["backend"] == "cpu" and stream["backend_reason"] == "no CUDA device", f"no-device: {stream}")
    check("info: backend: auto -> cpu (no CUDA device)" in err and "warn: backend" not in err,
          f"no-device: expected an info line and no warning\n{err}")
    check(not any("[backend" in s for s in status), f"no-device: STATUS= should not flag it: {status[-1:]}")
    print("no-device: auto -> cpu quietly (info), reason in /stats")

    rc, err = run_cuda("cuda-unknown", "no-such-fault")
    check(rc == 69 and "ZCP_FAULT_GPU=no-such-fault: unknown fault" in err, f"unknown fault: exit {rc}\n{err}")

    # The real probe, whatever this machine has.
    stream, status, err, metrics = run_daemon("auto-real", "auto", None)
    if stream["backend"] == "cuda":
        check(re.search(r'^zcpipe_gpu_info\{device="0",name="[^"]+",compute_capability="\d+\.\d+",driver="[^"]*",'
                        r'driver_cuda="\d+\.\d+",runtime="\d+\.\d+",code="(native|ptx-jit)"\} 1$', metrics, re.M),
              f"GPU in use but no zcpipe_gpu_info:\n{metrics}")
        check(re.search(r"info: cuda: GPU 0: .*, compute capability \d+\.\d+, driver .* code (native|ptx-jit)", err),
              f"GPU in use but no info line about it\n{err}")
        print("this machine: cuda, zcpipe_gpu_info exported:")
        print("  " + re.search(r"^zcpipe_gpu_info\{.*$", metrics, re.M).group(0))
        print("  " + re.search(r"info: cuda: GPU 0: .*$", err, re.M).group(0))
    else:
        check(stream["backend_reason"] in ("no CUDA device", "no NVIDIA driver: libcuda.so.1 not found")
              or stream["backend_reason"].startswith("GPU 0 cannot be used: "), f"real probe: {stream}")
        check(not re.search(r"^zcpipe_gpu_info\{", metrics, re.M), "no GPU used, yet zcpipe_gpu_info samples")
        print(f"this machine: cpu ({stream['backend_reason']})")


if __name__ == "__main__":
    main()
