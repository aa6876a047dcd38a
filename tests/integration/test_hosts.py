#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Many hosts, one broker, one Prometheus (docs/deploy.md), simulated on one machine, and the
Kubernetes manifest in deploy/.

  sim   three zcpipe processes with distinct host names (gpu-1..gpu-3) and metrics ports, two
        streams each, all publishing to one mosquitto, all scraped by one Prometheus (each target
        labelled with its host, as docs/deploy.md configures it): every result of every process
        arrives exactly once, with its host and stream in the topic
        (zcpipe/<host>/<stream>/results) and the same stream in the payload; Prometheus sees all
        three up, and the result counts it stored per host equal what arrived.
  k8s   deploy/zcpipe-daemonset.yaml parses (python3-yaml) and holds what the deployment relies
        on: a DaemonSet selecting its own pods, a GPU limit, the camera as a CharDevice hostPath
        mounted where the config says, the config from the ConfigMap at the path given to
        --config, Prometheus scrape annotations naming the container's metrics port, metrics
        listening beyond loopback on that port, the container running as the image's numeric user
        (deploy/Dockerfile's USER); then, as root, the pod's volumes laid out as the kubelet does
        (a Secret's files root's with its defaultMode, group-readable and the fsGroup's when the
        pod sets one; a ConfigMap's 0644; an emptyDir 0777), the init containers' commands run as
        their user with only their capabilities, and `zcpipe --check` as the container's user on
        the ConfigMap's config: every file it names (the MQTT password and CA, the model) must be
        readable by that user, and the password closed to group and others.

Usage: test_hosts.py [--have-mqtt=0|1] sim|k8s
"""
import os
import posixpath
import shutil
import subprocess

from zcptest import ROOT, ZCPIPE, check, free_port, import_debian, tmpdir, write
from test_mqtt_common import (Broker, Daemon, Prometheus, Subscriber, case_arg, daemon_config,
                              keepalive_stream, mqtt_output, need_mqtt_build, seqs_by_topic, settled,
                              synthetic_stream, wait_for)

HOSTS = ("gpu-1", "gpu-2", "gpu-3")
STREAMS = {"cam0": 80, "cam1": 50}   # name: frames


def case_sim(tmp):
    need_mqtt_build()
    broker = Broker(tmp)
    sub = Subscriber(broker.port, "zcpipe/+/+/results")
    daemons, ports = {}, {}
    for h in HOSTS:
        ports[h] = free_port()
        streams = [synthetic_stream(s, n, 50, mqtt_output(broker.port, h)) for s, n in STREAMS.items()]
        daemons[h] = Daemon(daemon_config(tmp, h, streams + [keepalive_stream()], ports[h]), ports[h])
    prom = Prometheus(tmp, [(ports[h], {"host": h}) for h in HOSTS])

    published, dropped = {}, {}
    for h in HOSTS:
        for s, n in STREAMS.items():
            c = wait_for(f"{h}/{s} settled", lambda: settled(ports[h], s, n), 60)
            check(c["written"] == c["published"], f"{h}/{s}: counters {c}")
            published[h, s] = c["published"]
            dropped[h, s] = c["dropped"]
    total = int(sum(published.values()))
    wait_for("every result at the subscriber", lambda: len(sub.results()) >= total or None, 30)
    by_topic = seqs_by_topic(sub.results())
    want = {f"zcpipe/{h}/{s}/results" for h in HOSTS for s in STREAMS}
    check(set(by_topic) == want, f"topics {sorted(by_topic)} != {sorted(want)}")
    for h in HOSTS:
        for s, n in STREAMS.items():
            seqs = by_topic[f"zcpipe/{h}/{s}/results"]
            check(len(seqs) == len(set(seqs)) == published[h, s] and set(seqs) <= set(range(n)),
                  f"{h}/{s}: {len(seqs)} results ({len(set(seqs))} distinct) of {published[h, s]} published")
            if dropped[h, s] == 0:
                check(sorted(seqs) == list(range(n)), f"{h}/{s}: not each of 0..{n - 1} once")
    for topic, obj in sub.results():
        check(topic.split("/")[2] == obj["stream"], f"{topic} carries stream {obj['stream']}")

    def all_up():
        r = prom.query('up{job="zcpipe"}')
        return r if len(r) == len(HOSTS) and all(x["value"][1] == "1" for x in r) else None
    up = wait_for("prometheus to see all three up", all_up, 60, interval=0.5)
    check(sorted(x["metric"]["host"] for x in up) == list(HOSTS), f"up series {up}")

    def stored():
        r = prom.query('sum by (host) (zcpipe_sink_written_total{job="zcpipe",sink="mqtt"})')
        got = {x["metric"]["host"]: float(x["value"][1]) for x in r}
        want = {h: float(sum(published[h, s] for s in STREAMS)) for h in HOSTS}
        return got if got == want else None
    wait_for("prometheus to hold every host's final count", stored, 60, interval=0.5)

    prom.stop()
    for h in HOSTS:
        check(daemons[h].stop() == 0, daemons[h].stderr())
    sub.close()
    broker.stop()
    print(f"sim: {len(HOSTS)} hosts x {len(STREAMS)} streams, {total} results exactly once with host and stream "
          f"in the topic; prometheus sees all {len(HOSTS)} up with their counts")


def find(docs, kind):
    hits = [d for d in docs if d and d.get("kind") == kind]
    check(len(hits) == 1, f"expected one {kind}, found {len(hits)}")
    return hits[0]


def case_k8s(tmp):
    yaml = import_debian("yaml", "python3-yaml")
    path = os.path.join(ROOT, "deploy", "zcpipe-daemonset.yaml")
    with open(path) as f:
        docs = list(yaml.safe_load_all(f))
    cm, ds = find(docs, "ConfigMap"), find(docs, "DaemonSet")
    check(ds["apiVersion"] == "apps/v1", "DaemonSet apiVersion")
    ns = ds["metadata"].get("namespace")
    check(cm["metadata"].get("namespace") == ns, "ConfigMap and DaemonSet in different namespaces")
    spec, tpl = ds["spec"], ds["spec"]["template"]
    labels = tpl["metadata"]["labels"]
    check(all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items()),
          "the selector does not select the pod template's labels")
    pod = tpl["spec"]
    check(pod.get("hostNetwork") is True, "hostNetwork: the node's name is <host> in the topics")
    containers = pod["containers"]
    check(len(containers) == 1, "one container")
    c = containers[0]
    check(c.get("image"), "no image")

    # GPU
    gpus = c["resources"]["limits"].get("nvidia.com/gpu")
    check(gpus is not None and int(gpus) >= 1, "no nvidia.com/gpu limit")
    check(any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])), "no GPU node toleration")

    # Config from the ConfigMap, at the path --config names.
    args = c.get("args", [])
    check("--config" in args, "no --config argument")
    cfg_path = args[args.index("--config") + 1]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    m = mounts.get(cfg_path)
    check(m and "configMap" in volumes[m["name"]], f"{cfg_path} is not mounted from a ConfigMap")
    check(volumes[m["name"]]["configMap"]["name"] == cm["metadata"]["name"], "mounts another ConfigMap")
    key = m.get("subPath") or posixpath.basename(cfg_path)
    check(key in cm["data"], f"ConfigMap has no key {key}")
    config = yaml.safe_load(cm["data"][key])

    # The camera: a CharDevice hostPath where the config's device is.
    stream = config["streams"][0]
    device = stream["source"]["device"]
    check(stream["source"]["type"] == "v4l2" and device.startswith("/dev/video"), "the stream is not a camera")
    dm = mounts.get(device)
    check(dm, f"{device} is not mounted into the container")
    hp = volumes[dm["name"]].get("hostPath", {})
    check(hp.get("path") == device and hp.get("type") == "CharDevice", f"{device}: hostPath {hp}")
    check(c.get("securityContext", {}).get("privileged") is True,
          "a hostPath camera needs the device cgroup opened (privileged) or a device plugin")

    # MQTT: a broker; the password and the CA from volumes (what the kubelet makes of them, and whether
    # the image's user can read them, is the simulation below).
    out = stream["output"]
    check(out["type"] == "mqtt" and out.get("broker"), "output is not mqtt to a broker")
    for k in ("password_file", "ca_file"):
        check(mount_of(mounts, out[k]), f"output.{k} {out[k]} is on no volume of the container")

    # Prometheus: annotations naming the metrics port, zcpipe listening there beyond loopback.
    ann = tpl["metadata"].get("annotations", {})
    http = config["metrics"]["http"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check(ann.get("prometheus.io/scrape") == "true", "no prometheus.io/scrape annotation")
    check(ann.get("prometheus.io/port") == str(ports["metrics"]) == str(http["port"]),
          f"scrape port {ann.get('prometheus.io/port')}, container port {ports['metrics']}, zcpipe port {http['port']}")
    check(ann.get("prometheus.io/path", "/metrics") == "/metrics", "scrape path")
    check(http["listen"] == "0.0.0.0" and http["allow_non_loopback"] is True, "metrics only on loopback")
    for probe in ("readinessProbe", "livenessProbe"):
        check(c[probe]["httpGet"]["port"] in ("metrics", ports["metrics"]), f"{probe} port")

    # The files as the kubelet lays them out, the init containers run, and `zcpipe --check` as the
    # container's user: every file the config names must be readable by it, as the service reads it.
    run_pod(tmp, pod, c, cm, config)
    print(f"k8s: DaemonSet {ds['metadata']['name']} checked; the ConfigMap's {key} passes zcpipe --check "
          f"as uid {c['securityContext']['runAsUser']} with the volumes the kubelet makes")


def mount_of(mounts, path):
    """The mount (longest mountPath) holding `path`, or None."""
    best = None
    for mp, m in mounts.items():
        if (path == mp or path.startswith(mp.rstrip("/") + "/")) and (not best or len(mp) > len(best["mountPath"])):
            best = m
    return best


def image_user():
    """uid, gid of deploy/Dockerfile's last USER line (numeric: Kubernetes' runAsNonRoot checks it)."""
    user = None
    with open(os.path.join(ROOT, "deploy", "Dockerfile")) as f:
        for line in f:
            if line.startswith("USER "):
                user = line.split()[1]
    check(user and user.replace(":", "").isdigit(), f"deploy/Dockerfile: USER {user!r} is not numeric uid:gid")
    uid, _, gid = user.partition(":")
    return int(uid), int(gid or uid)


def run_pod(tmp, pod, c, cm, config):
    """Volumes made as the kubelet makes them (a Secret's files root's with its defaultMode, plus group
    read and the fsGroup when the pod sets one; a ConfigMap's 0644; an emptyDir 0777), each container's
    mountPaths mapped onto them; the init containers' commands run as their user with only their
    capabilities (setpriv), then `zcpipe --check` as the main container's user. Needs root."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        print("k8s: the pod's files not simulated (needs root and setpriv): only the manifest was checked")
        return
    uid, gid = image_user()
    sc = c.get("securityContext", {})
    check((sc.get("runAsUser"), sc.get("runAsGroup")) == (uid, gid) and sc.get("runAsNonRoot") is True,
          f"the container runs as {sc.get('runAsUser')}:{sc.get('runAsGroup')}, the image's user is {uid}:{gid}")
    pod_sc = pod.get("securityContext", {})
    fs_group = pod_sc.get("fsGroup")
    root = os.path.join(tmp, "pod")
    os.makedirs(root)
    os.chmod(tmp, 0o755)
    os.chmod(root, 0o755)
    volumes = {}
    for v in pod["volumes"]:
        d = os.path.join(root, v["name"])
        if "secret" in v:
            check(v["secret"]["secretName"] == "zcpipe-mqtt", f"unknown secret {v['secret']}")
            files = {"password": "s3cret\n"}   # kubectl -n zcpipe create secret generic zcpipe-mqtt --from-file=password=...
            mode = v["secret"].get("defaultMode", 0o644)
        elif "configMap" in v:
            files = {"ca.crt": "-----BEGIN CERTIFICATE-----\n"} if v["configMap"]["name"] == "zcpipe-mqtt-ca" \
                else dict(cm["data"])
            mode = v["configMap"].get("defaultMode", 0o644)
        elif "emptyDir" in v:
            files, mode = {}, None
        else:
            continue   # hostPath: the node's own file (the camera: --check does not open devices)
        os.makedirs(d)
        os.chmod(d, 0o777 if mode is None else 0o755)
        volumes[v["name"]] = d
        for name, text in files.items():
            f = write(os.path.join(d, name), text)
            os.chown(f, 0, fs_group if fs_group is not None else 0)
            os.chmod(f, mode | (0o440 if fs_group is not None else 0))

    def mapped(container, text):
        """`text` with each mountPath of the container replaced by where its volume lies here."""
        for m in sorted(container.get("volumeMounts", []), key=lambda m: -len(m["mountPath"])):
            if m["name"] in volumes:
                src = volumes[m["name"]] + ("/" + m["subPath"] if m.get("subPath") else "")
                text = text.replace(m["mountPath"], src)
        return text

    def as_user(csc, groups):
        u, g = csc.get("runAsUser", 0), csc.get("runAsGroup", csc.get("runAsUser", 0))
        caps = csc.get("capabilities", {})
        args = ["setpriv", f"--reuid={u}", f"--regid={g}"]
        args += [f"--groups={','.join(str(x) for x in groups)}"] if groups else ["--clear-groups"]
        if "ALL" in caps.get("drop", []):
            keep = ",".join("+" + x.lower() for x in caps.get("add", []))
            args += ["--bounding-set=-all" + ("," + keep if keep else "")]
            if u != 0:
                args += ["--inh-caps=-all"]
        return args

    groups = pod_sc.get("supplementalGroups", [])
    for init in pod.get("initContainers", []):
        check(init.get("image") == c.get("image"), f"init container {init['name']} runs another image")
        cmd = [mapped(init, a) for a in init.get("command", []) + init.get("args", [])]
        p = subprocess.run(as_user(init.get("securityContext", {}), groups) + ["--"] + cmd,
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, f"init container {init['name']}: {' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")

    # The installed default model, as the image has it (/usr/share/zcpipe, world-readable).
    models = os.path.join(root, "share")
    shutil.copytree(os.environ["ZCP_MODELDIR"], models)
    for dirpath, dirs, names in os.walk(models):
        os.chmod(dirpath, 0o755)
        for n in names:
            os.chmod(os.path.join(dirpath, n), 0o644)
    cfg_path = config_path_of(c)
    cfg_file = mapped(c, cfg_path)
    check(os.path.exists(cfg_file), f"{cfg_path} is mounted from nothing")
    text = mapped(c, open(cfg_file).read())
    cfg = write(os.path.join(root, "camera-mapped.yaml"), text)
    os.chmod(cfg, 0o644)
    p = subprocess.run(as_user(c["securityContext"], groups) + ["--", ZCPIPE, "--check", "--config", cfg],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, ZCP_MODELDIR=models))
    check(p.returncode == 0, f"zcpipe --check as uid {uid} in the pod's volumes: exit {p.returncode}\n"
          f"{p.stdout}{p.stderr}")


def config_path_of(c):
    args = c.get("args", [])
    return args[args.index("--config") + 1]


def main():
    case = case_arg(("sim", "k8s"))
    tmp = tmpdir("zcp-hosts-")
    {"sim": case_sim, "k8s": case_k8s}[case](tmp)


if __name__ == "__main__":
    main()
