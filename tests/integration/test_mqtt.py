#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The MQTT results sink against a real broker (Debian's mosquitto on 127.0.0.1, a random port,
its own config) and a real subscriber (paho, persistent session, QoS 1).

  qos1      300 frames at QoS 1: every seq arrives exactly once on zcpipe/<host>/<stream>/results,
            the payload names the stream; the availability topic says a retained "online", then
            "offline" at a clean exit; the counters on /metrics add up (written == published);
            a QoS 0 stream alongside delivers too. Then a zcpipe killed with SIGKILL: the broker
            publishes its last will "offline".
  tls       TLS with a CA, server and client certificates made here with openssl, and password
            auth from a mode-600 file: every result arrives. A wrong password: one clear error
            line, nothing delivered, everything counted lost. A password file readable by others:
            refused at start (exit 78) with a line that says so. An untrusted CA: a clear TLS error.
  outage    the broker stopped for ~3 s mid-stream and restarted, the queue large enough: nothing
            lost (every seq arrives), reconnects counted, queued seen > 0 during the outage,
            /healthz 503 naming the stream whose results are not leaving, 200 again after.
  stall     the broker frozen (SIGSTOP) for a few seconds with the connection open: frames keep
            flowing through the pipeline meanwhile (the publish thread never waits for the
            network), results queue, and every one arrives after SIGCONT.
  overflow  a longer outage than the queue (20 results) holds: what arrived plus what the
            counters say was lost equals what was published, exactly; the lost ones are one
            contiguous run of seqs (the oldest are dropped, the newest kept).
  toolong   MQTT's 4,096-byte message limit against the longest line a config can produce
            (issue 40, 4): a classifier with 250-byte labels and top_k 16, a detector (the
            default CenterNet) with max_detections 100: --check and the start refuse them (78)
            naming the top_k or max_detections that fits; the same to a file passes; at the
            top_k the message names, every result reaches the broker, none lost as too_long.

Usage: test_mqtt.py [--have-mqtt=0|1] CASE
"""
import json
import os
import re
import signal
import subprocess
import time

from zcptest import WEIGHTS, ZCPIPE, check, free_port, skip, tmpdir, write
from test_mqtt_common import (Broker, Daemon, Subscriber, case_arg, daemon_config, healthz, keepalive_stream,
                              mqtt_output, need_mqtt_build, seqs_by_topic, settled, sink_counts, synthetic_stream,
                              wait_for)

CASES = ("qos1", "tls", "outage", "stall", "overflow", "toolong")


def exactly_once(sub, topic, c, frames):
    """Every published result of the stream (counters `c`) arrived once: as many distinct seqs
    as published, no duplicate, none outside 0..frames-1. (All of 0..frames-1 unless the source
    dropped some, which the counters then say.)"""
    seqs = seqs_by_topic(sub.results()).get(topic, [])
    check(len(seqs) == len(set(seqs)) == c["published"] and set(seqs) <= set(range(frames)),
          f"{topic}: {len(seqs)} results, {len(set(seqs))} distinct, published {c['published']} of {frames}; "
          f"duplicates {len(seqs) - len(set(seqs))}")
    if c["dropped"] == 0:
        check(sorted(seqs) == list(range(frames)), f"{topic}: not each of 0..{frames - 1}")


def status_values(sub, topic):
    return [p.decode() for t, p, _ in sub.snapshot() if t == topic]


def case_qos1(tmp):
    broker = Broker(tmp)
    sub = Subscriber(broker.port, "zcpipe/#")
    http = free_port()
    cfg = daemon_config(tmp, "qos1", [
        synthetic_stream("cam", 300, 100, mqtt_output(broker.port, "hostA")),
        synthetic_stream("q0", 100, 100, mqtt_output(broker.port, "hostA", qos=0)),
        keepalive_stream()], http)
    d = Daemon(cfg, http)
    c = wait_for("cam's 300 results delivered", lambda: settled(http, "cam", 300), 60)
    check(c["written"] == c["published"] and sum(c["lost"].values()) == 0 and c["reconnects"] == 0,
          f"cam counters {c}")
    c0 = wait_for("q0's 100 results delivered", lambda: settled(http, "q0", 100), 30)
    check(c0["written"] == c0["published"], f"q0 counters {c0}")
    wait_for("every result at the subscriber",
             lambda: len(sub.results()) >= c["published"] + c0["published"] or None, 20)
    exactly_once(sub, "zcpipe/hostA/cam/results", c, 300)
    # QoS 0 on loopback with a live broker loses nothing either (not guaranteed in general).
    exactly_once(sub, "zcpipe/hostA/q0/results", c0, 100)
    for topic, obj in sub.results():
        check(topic.split("/")[2] == obj["stream"], f"topic {topic} carries stream {obj['stream']}")
    rc = d.stop()
    check(rc == 0, f"zcpipe exit {rc}\n{d.stderr()}")
    err = d.stderr()
    check("cam: mqtt connected to 127.0.0.1:%d" % broker.port in err, "no 'connected' line:\n" + err)
    check("cam: mqtt: %d results delivered, 0 lost" % c["published"] in err, "no final count line:\n" + err)
    wait_for("offline after a clean exit",
             lambda: status_values(sub, "zcpipe/hostA/cam/status")[-1:] == ["offline"], 10)
    check(status_values(sub, "zcpipe/hostA/cam/status")[0] == "online", "online first")

    # The last will: the broker says offline for a zcpipe that died without a word.
    n_before = len(status_values(sub, "zcpipe/hostB/cam/status"))
    cfg = daemon_config(tmp, "will", [synthetic_stream("cam", 0, 10, mqtt_output(broker.port, "hostB"))], free_port())
    d = Daemon(cfg)
    wait_for("online", lambda: "online" in status_values(sub, "zcpipe/hostB/cam/status")[n_before:], 20)
    d.kill()
    wait_for("the last will", lambda: status_values(sub, "zcpipe/hostB/cam/status")[-1:] == ["offline"], 20)
    # A new subscriber gets the retained state.
    late = Subscriber(broker.port, "zcpipe/hostB/cam/status", client_id="zcp-test-late")
    wait_for("retained offline", lambda: [(p, r) for t, p, r in late.snapshot()] == [(b"offline", True)], 10)
    late.close()
    sub.close()
    broker.stop()
    print("qos1: 300 + 100 results exactly once, online/offline retained, last will delivered")


def openssl(*args):
    p = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "openssl %s failed: %s" % (" ".join(args), p.stderr))


def make_pki(tmp):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all made here."""
    k = lambda n: os.path.join(tmp, n)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=zcpipe test CA",
            "-keyout", k("ca.key"), "-out", k("ca.crt"))
    ext = write(k("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, cn in (("server", "127.0.0.1"), ("client", "zcpipe-client")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + cn, "-keyout", k(name + ".key"),
                "-out", k(name + ".csr"))
        openssl("x509", "-req", "-in", k(name + ".csr"), "-CA", k("ca.crt"), "-CAkey", k("ca.key"),
                "-CAcreateserial", "-days", "2", "-out", k(name + ".crt"), "-extfile", ext)
    # A second CA that signed nothing of ours.
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=other CA",
            "-keyout", k("other.key"), "-out", k("other.crt"))
    for n in ("ca.key", "server.key", "client.key", "other.key"):
        os.chmod(k(n), 0o600)
    return k


def case_tls(tmp):
    import shutil
    for tool, package in (("openssl", "openssl"), ("mosquitto_passwd", "mosquitto")):
        if not shutil.which(tool):
            skip(f"{package} is not installed (tools/setup.sh installs it)")
    k = make_pki(tmp)
    pw = os.path.join(tmp, "passwd")
    p = subprocess.run(["mosquitto_passwd", "-b", "-c", pw, "zcp", "s3cret"], capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 0, "mosquitto_passwd: " + p.stderr)
    listener = (f"listener PORT 127.0.0.1\nallow_anonymous false\npassword_file {pw}\n"
                f"cafile {k('ca.crt')}\ncertfile {k('server.crt')}\nkeyfile {k('server.key')}\n"
                f"require_certificate true\n")
    broker = Broker(tmp, listener=listener)
    sub = Subscriber(broker.port, "zcpipe/#", tls={"ca": k("ca.crt"), "cert": k("client.crt"), "key": k("client.key")},
                     auth=("zcp", "s3cret"))
    good = write(os.path.join(tmp, "good.pw"), "s3cret\n", 0o600)
    bad = write(os.path.join(tmp, "bad.pw"), "wrong\n", 0o600)
    loose = write(os.path.join(tmp, "loose.pw"), "s3cret\n", 0o644)
    tls = dict(ca_file=k("ca.crt"), cert_file=k("client.crt"), key_file=k("client.key"), username="zcp")

    http = free_port()
    cfg = daemon_config(tmp, "tls", [synthetic_stream("cam", 100, 100, mqtt_output(broker.port, "secure", password_file=good, **tls)),
                                     keepalive_stream()], http)
    d = Daemon(cfg, http)
    c = wait_for("100 results over TLS", lambda: settled(http, "cam", 100), 60)
    check(c["written"] == c["published"], f"counters {c}")
    wait_for("results at the subscriber", lambda: len(sub.results()) >= c["published"] or None, 20)
    exactly_once(sub, "zcpipe/secure/cam/results", c, 100)
    check(d.stop() == 0, d.stderr())
    check("cam: mqtt connected to 127.0.0.1:%d as zcpipe-secure-cam (TLS)" % broker.port in d.stderr(), d.stderr())

    # Wrong password: a clear error, once; nothing delivered; all of it counted lost.
    http = free_port()
    cfg = daemon_config(tmp, "badpw", [synthetic_stream("cam", 30, 30, mqtt_output(broker.port, "intruder", password_file=bad, **tls)),
                                       keepalive_stream()], http)
    d = Daemon(cfg, http)
    wait_for("the refusal", lambda: "refused the connection" in d.stderr(), 20)
    c = wait_for("30 frames through", lambda: (lambda c: c if c and c["published"] + c["dropped"] == 30 else None)(
        sink_counts(http, "cam")), 30)
    # Queued while the stream runs; counted lost once it ended and its sink closed.
    check(c["written"] == 0 and c["queued"] + c["lost"]["write_error"] == c["published"] > 0,
          f"nothing delivered, all queued or lost: {c}")
    check(d.stop() == 0, d.stderr())
    err = d.stderr()
    lines = [l for l in err.splitlines() if "refused the connection" in l]
    check(len(lines) == 1, "expected one refusal line (one per state change), got:\n" + "\n".join(lines))
    check("not authorised" in lines[0] and "output.password_file" in lines[0], "unclear refusal: " + lines[0])
    check("cam: mqtt: 0 results delivered, %d lost (queue_full 0, write_error %d, too_long 0)"
          % (c["published"], c["published"]) in err, err)
    check(not [t for t, _ in sub.results() if "/intruder/" in t], "a result got through with a wrong password")

    # A password file others can read: refused before anything starts.
    cfg = daemon_config(tmp, "loose", [synthetic_stream("cam", 30, 30, mqtt_output(broker.port, "x", password_file=loose, **tls))],
                        free_port())
    d = Daemon(cfg)
    rc = d.wait(30)
    check(rc == 78, f"exit {rc} for a mode 644 password file\n{d.stderr()}")
    check("is open to group or others (mode 0644); chmod 600 it" in d.stderr(), d.stderr())

    # A CA that did not sign the broker's certificate: a TLS error that says why.
    http = free_port()
    other = dict(tls, ca_file=k("other.crt"))
    cfg = daemon_config(tmp, "badca", [synthetic_stream("cam", 0, 10, mqtt_output(broker.port, "y", password_file=good, **other))],
                        http)
    d = Daemon(cfg, http)
    wait_for("a TLS error line", lambda: "certificate verify failed" in d.stderr(), 20)
    check(d.stop() == 0, d.stderr())
    sub.close()
    broker.stop()
    print("tls: 100 results over TLS with a client certificate and a password; wrong password, loose "
          "password file and untrusted CA each refused with one clear line")


def outage_run(tmp, frames, queue, min_held, freeze=False):
    """Broker stopped mid-stream until at least `min_held` more frames went through, then
    restarted (freeze: SIGSTOP/SIGCONT instead, so the connection stays open and silent).
    Returns (final counters, subscriber results, max queued seen, stderr)."""
    broker = Broker(tmp)
    sub = Subscriber(broker.port, "zcpipe/#")
    http = free_port()
    cfg = daemon_config(tmp, "outage", [synthetic_stream("cam", frames, 50, mqtt_output(broker.port, "h", queue=queue)),
                                        keepalive_stream()], http)
    d = Daemon(cfg, http)
    wait_for("the first 50 results", lambda: len(sub.results()) >= 50 or None, 30)
    if freeze:
        broker.proc.send_signal(signal.SIGSTOP)
    else:
        broker.stop()
    before = sink_counts(http, "cam")
    before = before["published"] + before["dropped"]
    held = wait_for(f"{min_held} frames through while the broker is down",
                    lambda: (lambda c: c if c and c["published"] + c["dropped"] >= min(before + min_held, frames) else None)(
                        sink_counts(http, "cam")), 30)
    time.sleep(0.5)
    down = sink_counts(http, "cam")
    check(down["queued"] > 0, f"nothing queued during the outage: {down}")
    if not freeze:
        # results are not leaving: /healthz says so while the broker is away (issue 40, 5)
        status, body = healthz(http)
        check(status == 503 and "stream cam: results are not leaving (output mqtt" in body,
              f"/healthz while the broker is down: {status} {body!r}")
    if freeze:
        broker.proc.send_signal(signal.SIGCONT)
    else:
        broker.start()
    if not freeze:
        wait_for("/healthz 200 once the broker is back", lambda: healthz(http)[0] == 200, 30)
    c = wait_for("everything settled", lambda: settled(http, "cam", frames), 60)
    check(c["reconnects"] >= (0 if freeze else 1), f"no reconnect counted: {c}")
    wait_for("the subscriber to catch up",
             lambda: len(set(s for s in seqs_by_topic(sub.results()).get("zcpipe/h/cam/results", []))) >= c["written"]
             or None, 30, interval=0.3)
    time.sleep(0.5)   # anything later would be a duplicate or an excess: look for those too
    check(d.stop() == 0, d.stderr())
    res = sub.results()
    sub.close()
    broker.stop()
    return c, res, max(held["queued"], down["queued"]), d.stderr()


def case_outage(tmp):
    frames = 300
    c, res, queued, err = outage_run(tmp, frames, queue=1000, min_held=100)
    seqs = seqs_by_topic(res)["zcpipe/h/cam/results"]
    check(len(set(seqs)) == c["published"] and set(seqs) <= set(range(frames)),
          f"{len(set(seqs))} distinct results arrived of {c['published']} published with the queue holding them")
    if c["dropped"] == 0:
        check(set(seqs) == set(range(frames)), "not every seq arrived")
    check(sum(c["lost"].values()) == 0 and c["written"] == c["published"], f"counters {c}")
    check("connection lost" in err and "reconnects" in err, err)
    print(f"outage: {int(c['published'])} published ({int(c['dropped'])} dropped at the source), all {len(set(seqs))} arrived ({len(seqs) - len(set(seqs))} QoS 1 duplicates), "
          f"{int(queued)} queued at most, {int(c['reconnects'])} reconnect(s)")


def case_stall(tmp):
    """A broker that stops answering (SIGSTOP) but keeps the connection open: the stream's
    frames keep flowing (the publish thread never waits for the network; `outage_run` requires
    100 frames through while it is frozen), results queue, and all arrive once it resumes."""
    frames = 300
    c, res, queued, err = outage_run(tmp, frames, queue=1000, min_held=100, freeze=True)
    seqs = seqs_by_topic(res)["zcpipe/h/cam/results"]
    check(len(set(seqs)) == c["published"] and sum(c["lost"].values()) == 0 and c["written"] == c["published"],
          f"{len(set(seqs))} arrived, counters {c}")
    print(f"stall: {int(c['published'])} published, {int(queued)} queued while the broker was frozen, "
          f"all {len(set(seqs))} arrived")


def case_overflow(tmp):
    frames, queue = 300, 20
    c, res, queued, err = outage_run(tmp, frames, queue=queue, min_held=100)
    seqs = set(seqs_by_topic(res)["zcpipe/h/cam/results"])
    lost = c["lost"]
    check(lost["queue_full"] > 0 and lost["write_error"] == 0 and lost["too_long"] == 0, f"counters {c}")
    check(len(seqs) + sum(lost.values()) == c["published"],
          f"arrived {len(seqs)} + lost {sum(lost.values())} != published {c['published']}")
    check(len(seqs) == c["written"], f"arrived {len(seqs)} != written {c['written']}")
    missing = sorted(set(range(frames)) - seqs)
    if c["dropped"] == 0:   # else the source's own drops (counted) may sit anywhere
        check(missing == list(range(missing[0], missing[0] + len(missing))),
              f"the lost seqs are not one run (oldest dropped): {missing[:10]}...")
    check("mqtt queue full (20 results), dropping the oldest" in err, err)
    check(queued <= queue + 16, f"queued {queued} above the queue + in flight")
    print(f"overflow: {int(c['published'])} published = {len(seqs)} arrived + {int(lost['queue_full'])} dropped "
          f"(seqs {missing[0]}..{missing[-1]}), queue {queue}")


def case_toolong(tmp):
    # zcnet's default weights have 1000 classes: labels of 250 bytes, each different, one with quotes to escape
    labels = write(os.path.join(tmp, "long-labels.txt"),
                   "".join(f"{i:04d} " + ("q\"" if i == 7 else "") + "x" * (245 - (2 if i == 7 else 0)) + "\n"
                           for i in range(1000)))
    http = free_port()

    def config(name, top_k, output, model=None):
        model = model or f"{{path: {WEIGHTS}, labels: {labels}, top_k: {top_k}}}"
        return write(os.path.join(tmp, name + ".yaml"),
                     f"streams:\n  - name: cam\n    source: {{type: synthetic, frames: 30, pace: fast, width: 160, "
                     f"height: 120}}\n    ring: {{drop: block}}\n    gpu: {{backend: cpu}}\n    model: {model}\n    output: {output}\n"
                     f"metrics:\n  http: {{port: {http}}}\nlog:\n  summary_interval_s: 0\n")

    def run(cfg, *args):
        return subprocess.run([ZCPIPE, "--config", cfg, *args], capture_output=True, text=True, timeout=120)

    mqtt = mqtt_output(1, "hostA")   # nothing is sent: refused before any connection
    fit = None
    for what, cfg, key in [("classifier", config("cls", 16, mqtt), "model.top_k"),
                           ("detector", config("det", 0, mqtt, "{max_detections: 100}"), "model.max_detections")]:
        for args in (["--check"], []):
            p = run(cfg, *args)
            m = re.search(rf"a result line can be (\d+) bytes .*over the 4096-byte message limit of output type "
                          rf"mqtt; fix: {key}: (\d+) fits", p.stderr)
            check(p.returncode == 78 and m and int(m.group(1)) > 4096,
                  f"{what} {args}: exit {p.returncode}\n{p.stderr[-2000:]}")
            if what == "classifier":
                fit = int(m.group(2))
        print(f"toolong: {what}: refused at --check and at start, {m.group(1)} bytes, {key}: {m.group(2)} fits")
    check(0 < fit < 16, f"the top_k that fits: {fit}")
    p = run(config("file", 16, f"{{type: file, path: {os.path.join(tmp, 'long.jsonl')}}}"), "--check")
    check(p.returncode == 0, f"the same to a file: exit {p.returncode}\n{p.stderr}")
    p = run(config("fit", fit, mqtt), "--check")
    check(p.returncode == 0, f"top_k {fit}: exit {p.returncode}\n{p.stderr}")

    # At the top_k that fits, every line is delivered: the bound is not too low.
    broker = Broker(tmp)
    sub = Subscriber(broker.port, "zcpipe/#")
    cfg = config("deliver", fit, mqtt_output(broker.port, "hostA"))
    d = Daemon(cfg)   # not waiting for its metrics port: its 30 frames may be done before a probe
    rc = d.wait(120)
    check(rc == 0, f"deliver: exit {rc}\n{d.stderr()[-2000:]}")
    topic = "zcpipe/hostA/cam/results"
    wait_for("30 results at the subscriber", lambda: len(seqs_by_topic(sub.results()).get(topic, [])) >= 30, 30)
    seqs = seqs_by_topic(sub.results()).get(topic, [])
    longest = max(len(json.dumps(obj, separators=(",", ":"))) for _, obj in sub.results())
    check(sorted(seqs) == list(range(30)) and "too_long 0" in d.stderr(),
          f"deliver: {len(seqs)} of 30 results arrived\n{d.stderr()[-2000:]}")
    print(f"toolong: ok: top_k {fit}: 30 of 30 results arrived, the longest {longest} bytes")
    sub.close()
    broker.stop()


def main():
    case = case_arg(CASES)
    need_mqtt_build()
    tmp = tmpdir("zcp-mqtt-")
    {"qos1": case_qos1, "tls": case_tls, "outage": case_outage, "stall": case_stall,
     "overflow": case_overflow, "toolong": case_toolong}[case](tmp)


if __name__ == "__main__":
    main()
