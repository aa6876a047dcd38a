# SPDX-License-Identifier: MIT
"""Helpers shared by test_mqtt.py, test_prometheus.py and test_hosts.py: the real servers
(Debian's mosquitto and prometheus) started on 127.0.0.1 with their own config under a temp
dir, a paho subscriber, zcpipe in the background, /metrics read back. Every wait is bounded.
What every integration script shares (fail, skip, write, free_port...) is zcptest.py's."""
import atexit
import http.client
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zcptest  # noqa: E402
from zcptest import HOST, ZCPIPE, check, fail, free_port, import_debian, skip, write  # noqa: E402

CHILDREN = []   # every server and daemon started here, ended at exit whatever happens


@atexit.register
def end_children():
    for p in CHILDREN:
        if p.poll() is None:
            p.kill()
            p.wait()


def spawn(args, **kw):
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, **kw)
    CHILDREN.append(p)
    return p


def need_mqtt_build():
    """meson passes --have-mqtt=0|1 (the build's HAVE_MQTT)."""
    for a in sys.argv[1:]:
        if a.startswith("--have-mqtt=") and a != "--have-mqtt=1":
            skip("zcpipe was built without MQTT (libmosquitto-dev missing; meson -Dmqtt)")


def case_arg(cases):
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1 or args[0] not in cases:
        fail("usage: %s [--have-mqtt=0|1] %s" % (sys.argv[0], "|".join(cases)))
    return args[0]


def wait_for(what, fn, timeout, interval=0.1):
    """zcptest.wait_for, saying the last sink counters settled() read."""
    return zcptest.wait_for(what, fn, timeout, interval,
                            detail=lambda: f"counters {getattr(settled, 'last', None)}")


def port_open(port):
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


class Broker:
    """Debian's mosquitto on 127.0.0.1:port with its own config (no system service).
    Persistence is on so that a subscriber's session and its queued messages survive a restart."""

    def __init__(self, tmp, extra="", listener=None):
        exe = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)
        if not exe:
            skip("mosquitto is not installed (tools/setup.sh installs it)")
        self.exe, self.tmp = exe, tmp
        self.port = free_port()
        self.conf = os.path.join(tmp, "mosquitto-%d.conf" % self.port)
        os.makedirs(os.path.join(tmp, "mosq-data"), exist_ok=True)
        write(self.conf, (listener or f"listener {self.port} {HOST}\nallow_anonymous true\n") .replace("PORT", str(self.port))
              + "persistence true\npersistence_location %s/\nautosave_interval 0\n" % os.path.join(tmp, "mosq-data")
              + "log_dest stderr\nlog_type error\nlog_type warning\nlog_type notice\n"
              # Started as root, mosquitto would switch to user "mosquitto", who cannot read our temp dir.
              + "user %s\n" % pwd.getpwuid(os.getuid()).pw_name + extra)
        self.proc = None
        self.log = open(os.path.join(tmp, "mosquitto-%d.log" % self.port), "a")
        self.start()

    def start(self):
        self.proc = spawn([self.exe, "-c", self.conf], stdout=self.log, stderr=self.log)
        wait_for("mosquitto to listen on %d" % self.port,
                 lambda: port_open(self.port) or (self.proc.poll() is not None and fail("mosquitto exited: " + self.logtext())),
                 15)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def logtext(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()


class Subscriber:
    """A real MQTT client (paho) with a persistent session (clean_session False, QoS 1), so that
    messages published while it reconnects after a broker restart wait for it in the broker."""

    def __init__(self, port, topic, client_id="zcp-test-sub", tls=None, auth=None):
        mqtt = import_debian("paho.mqtt.client", "python3-paho-mqtt")
        self.lock = threading.Lock()
        self.messages = []          # (topic, payload bytes, retained)
        self.subscribed = threading.Event()
        self.c = mqtt.Client(client_id=client_id, clean_session=False)
        if tls:
            self.c.tls_set(ca_certs=tls["ca"], certfile=tls.get("cert"), keyfile=tls.get("key"))
        if auth:
            self.c.username_pw_set(auth[0], auth[1])
        self.c.reconnect_delay_set(min_delay=1, max_delay=1)
        self.c.on_connect = lambda c, u, f, rc: rc == 0 and c.subscribe(topic, qos=1)
        self.c.on_subscribe = lambda c, u, mid, q: self.subscribed.set()
        self.c.on_message = self._on_message
        self.c.connect(HOST, port, keepalive=30)
        self.c.loop_start()
        wait_for("the subscription", self.subscribed.is_set, 15)

    def _on_message(self, c, u, msg):
        with self.lock:
            self.messages.append((msg.topic, msg.payload, msg.retain))

    def snapshot(self):
        with self.lock:
            return list(self.messages)

    def results(self, suffix="/results"):
        return [(t, json.loads(p)) for t, p, _ in self.snapshot() if t.endswith(suffix)]

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()


class Daemon:
    """zcpipe running in the background; stderr goes to a file."""

    def __init__(self, cfg_path, http=None):
        self.err_path = cfg_path + ".stderr"
        self.err = open(self.err_path, "w")
        self.proc = spawn([ZCPIPE, "--config", cfg_path], stdout=subprocess.DEVNULL, stderr=self.err)
        if http:
            wait_for("zcpipe's metrics port %d" % http,
                     lambda: port_open(http) or (self.proc.poll() is not None and
                                                 fail("zcpipe exited %d:\n%s" % (self.proc.returncode, self.stderr()))),
                     30)

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail("zcpipe did not finish within %d s\n%s" % (timeout, self.stderr()))
        self.err.close()
        return rc

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        self.err.close()


def http_get(port, path, timeout=5.0):
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def metrics(port):
    """{(name, frozenset(labels.items())): value} from /metrics (values as float)."""
    status, body = http_get(port, "/metrics")
    check(status == 200, "/metrics answered %d" % status)
    out = {}
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        check(m, "unparsable /metrics line: " + line)
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(3))
    return out


def metric(ms, name, **labels):
    want = set((k, str(v)) for k, v in labels.items())
    hits = [v for (n, lab), v in ms.items() if n == name and want <= lab]
    check(len(hits) == 1, "%d samples of %s%s" % (len(hits), name, labels))
    return hits[0]


def sink_counts(port, stream):
    """published, written, queued, lost (by reason), reconnects of one stream, from /metrics;
    None while the stream is not listed yet."""
    ms = metrics(port)
    if not any(n == "zcpipe_sink_queued" and ("stream", stream) in lab for n, lab in ms):
        return None
    lost = {r: metric(ms, "zcpipe_sink_lost_total", stream=stream, reason=r)
            for r in ("queue_full", "write_error", "too_long", "no_reader", "slow_reader")}
    return {
        "published": metric(ms, "zcpipe_frames_published_total", stream=stream),
        "dropped": sum(v for (n, lab), v in ms.items()
                       if n == "zcpipe_frames_dropped_total" and ("stream", stream) in lab),
        "written": metric(ms, "zcpipe_sink_written_total", stream=stream),
        "queued": metric(ms, "zcpipe_sink_queued", stream=stream),
        "lost": lost,
        "reconnects": metric(ms, "zcpipe_sink_reconnects_total", stream=stream),
    }


def healthz(port):
    """(status, body) of /healthz."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/healthz")
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def settled(port, stream, frames):
    """Every one of the stream's `frames` was published or dropped (counted) and its sink has
    nothing left queued: its counters are final."""
    c = sink_counts(port, stream)
    if c is None:
        return None
    done = (c["published"] + c["dropped"] == frames and c["queued"] == 0
            and c["written"] + sum(c["lost"].values()) == c["published"])
    settled.last = c
    return c if done else None


class Prometheus:
    """Debian's prometheus on 127.0.0.1 with its own storage under tmp, scraping every 1 s."""

    def __init__(self, tmp, targets):
        exe = shutil.which("prometheus")
        if not exe:
            skip("prometheus is not installed (tools/setup.sh installs it)")
        self.port = free_port()
        groups = []
        for port, labels in targets:   # one job "zcpipe", one target group per daemon
            lab = "".join('\n          %s: "%s"' % kv for kv in labels.items())
            groups.append(f"""      - targets: ["{HOST}:{port}"]
        labels:{lab or " {}"}""")
        jobs = ["  - job_name: zcpipe\n    static_configs:\n" + "\n".join(groups)]
        conf = write(os.path.join(tmp, "prometheus.yml"),
                     "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                     "scrape_configs:\n" + "\n".join(jobs) + "\n")
        self.log = open(os.path.join(tmp, "prometheus.log"), "w")
        self.proc = spawn([exe, "--config.file=" + conf, "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
                           "--web.listen-address=%s:%d" % (HOST, self.port)],
                          stdout=self.log, stderr=self.log, cwd=tmp)
        wait_for("prometheus to be ready", lambda: self._ready(), 60, interval=0.3)

    def _ready(self):
        if self.proc.poll() is not None:
            fail("prometheus exited:\n" + open(self.log.name).read()[-3000:])
        try:
            return http_get(self.port, "/-/ready", timeout=2)[0] == 200
        except OSError:
            return False

    def query(self, q):
        """The result list of an instant query."""
        status, body = http_get(self.port, "/api/v1/query?query=" + urllib.parse.quote(q), timeout=10)
        check(status == 200, f"prometheus query {q!r} answered {status}: {body[:300]!r}")
        data = json.loads(body)
        check(data.get("status") == "success", f"prometheus query {q!r}: {data}")
        return data["data"]["result"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def synthetic_stream(name, frames, fps, output, extra=""):
    """YAML of one small synthetic stream (motion only, so it runs fast on any CPU), paced at `fps`.
    Paced like a camera, it drops (and counts, reason ring_full) a frame no slot can take when the
    machine is very busy: a ring of 128 slots makes that rare, and the tests reckon with
    `published` and the drop counters rather than assume every seq was published."""
    return (f"  - name: {name}\n    source: {{type: synthetic, frames: {frames}, fps: {fps}, width: 160, height: 120}}\n"
            f"    ring: {{drop: block, slots: 128}}\n    model: {{enabled: false}}\n    output: {output}\n{extra}")


def keepalive_stream():
    """An endless stream with no output: keeps the daemon (and /metrics) up after the others end."""
    return synthetic_stream("idle", 0, 5, "{type: none}")


def mqtt_output(broker_port, host_name, **keys):
    items = {"type": "mqtt", "port": broker_port, "host_name": host_name, "backoff_max_ms": 500}
    items.update(keys)
    return "{" + ", ".join(f"{k}: {v}" for k, v in items.items()) + "}"


def daemon_config(tmp, name, streams, http_port):
    return write(os.path.join(tmp, name + ".yaml"),
                 "streams:\n" + "".join(streams) +
                 f"metrics:\n  http: {{port: {http_port}}}\nlog:\n  level: info\n  summary_interval_s: 0\n")


def seqs_by_topic(results):
    out = {}
    for topic, obj in results:
        out.setdefault(topic, []).append(obj["seq"])
    return out
