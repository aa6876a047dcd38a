#!/bin/bash
# SPDX-License-Identifier: MIT
# The container recipe (deploy/Dockerfile) as an operator uses it (meson test --suite package):
#
#   1. Debian's podman builds the image from a copy of the source tree (the tracked and untracked
#      files, as .dockerignore leaves them); the debian:12 and debian:12-slim bases come from the
#      registry where one is reachable, else from a debootstrap of Debian 12 (minbase, cached as a
#      tarball in WORKDIR/cache, shared with test_deb.sh);
#   2. the image: `zcpipe --version` lists every feature the recipe enables as built in; it runs
#      as uid 10001 (the DaemonSet's runAsUser); `--check` passes on the installed sample and on
#      the installed camera.yaml;
#   3. the installed sample runs in it (no network: --network none, so its metrics port is its
#      own) with the installed default model, CPU backend: results with detections appear, and
#      `podman stop` ends it with exit 0.
#
# Podman here runs under a container manager of its own: it needs runc (crun refuses cgroups in
# hybrid mode), the host's network for the build's apt-get, and rlimits it may set (the defaults
# raise RLIMIT_NOFILE past the hard limit). Exits 77 where it cannot run: not root, podman, runc or
# debootstrap missing, no Debian mirror.
#
#   tests/package/test_container.sh SOURCE_ROOT WORKDIR
set -euo pipefail
SRC=$(cd "$1" && pwd)
mkdir -p "$2"
W=$(cd "$2" && pwd)
MIRROR=${ZCP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
IMAGE=localhost/zcpipe-test:latest
NAME=zcpipe-test-sample-$$
T0=$SECONDS

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
step() { echo "== [$((SECONDS - T0)) s] $*"; }

[ "$(id -u)" = 0 ] || skip "needs root (podman, debootstrap)"
for t in podman runc debootstrap curl; do
        command -v "$t" >/dev/null || skip "$t is not installed (apt-get install podman runc debootstrap)"
done
curl -sfI --max-time 15 "$MIRROR/dists/bookworm/Release" >/dev/null || skip "no network to $MIRROR"

nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] && nofile=1048576
# crun cannot run here (cgroup v1 and v2 mixed); podman's default ulimits would raise nofile past
# the hard limit, and the runtime may not set nproc above podman's own 32768.
OCI=(--runtime runc --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=32768:32768")

cleanup() {
        podman rm -f "$NAME" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# ---- 1. the base images and the build -------------------------------------------------------
base=$W/cache/bookworm-minbase.tar.gz
for tag in 12 12-slim; do
        podman image exists "docker.io/library/debian:$tag" && continue
        if timeout 60 podman pull -q "docker.io/library/debian:$tag" >/dev/null 2>&1; then
                echo "debian:$tag: pulled from the registry"
                continue
        fi
        if [ ! -f "$base" ]; then
                step "debootstrap --variant=minbase bookworm (cached as $base)"
                rm -rf "$W/cache/root" && mkdir -p "$W/cache"
                debootstrap --variant=minbase bookworm "$W/cache/root" "$MIRROR" >"$W/debootstrap.log" 2>&1 ||
                        { tail -20 "$W/debootstrap.log"; skip "debootstrap failed (network?), log $W/debootstrap.log"; }
                tar -C "$W/cache/root" -czf "$base.tmp" . && mv "$base.tmp" "$base"
                rm -rf "$W/cache/root"
        fi
        step "debian:$tag: no registry reachable, imported from the debootstrap of Debian 12"
        podman import -q "$base" "docker.io/library/debian:$tag" >/dev/null
done

step "podman build -f deploy/Dockerfile (log: $W/container-build.log)"
ctx=$W/container-src
rm -rf "$ctx" && mkdir -p "$ctx"
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
        (cd "$SRC" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$ctx")
else
        tar -C "$SRC" --exclude='./build*' -cf - . | tar -C "$ctx" -xf -
fi
# The build stage's downloads are kept for the next run (an imported base keeps them too).
mkdir -p "$W/cache/apt-container"
podman build "${OCI[@]}" --network host --pull=never -v "$W/cache/apt-container:/var/cache/apt/archives" \
        -f "$ctx/deploy/Dockerfile" -t "$IMAGE" "$ctx" >"$W/container-build.log" 2>&1 ||
        { tail -40 "$W/container-build.log"; fail "podman build of deploy/Dockerfile"; }
rm -rf "$ctx"
podman image inspect --format '{{.Size}}' "$IMAGE" | awk '{ printf "image size: %.0f MB\n", $1 / 1e6 }'

# ---- 2. what the image holds ------------------------------------------------------------------
run() { podman run --rm "${OCI[@]}" --network none "$@"; }
version=$(run "$IMAGE" --version)
echo "$version"
for f in gstreamer v4l2 http mqtt snapshots; do
        grep -q "$f yes" <<<"$version" || fail "the image's zcpipe lacks $f, which deploy/Dockerfile enables: $version"
done
uid=$(run --entrypoint id "$IMAGE" -u)
[ "$uid" = 10001 ] || fail "the image runs as uid $uid, not 10001 (deploy/zcpipe-daemonset.yaml's runAsUser)"
run "$IMAGE" --check --config /usr/share/zcpipe/examples/sample.yaml || fail "--check of the installed sample in the image"
run "$IMAGE" --check --config /etc/zcpipe/camera.yaml || fail "--check of the installed camera.yaml in the image"

# ---- 3. the sample runs ------------------------------------------------------------------------
step "the installed sample in the image (default model, CPU backend)"
podman run -d --name "$NAME" "${OCI[@]}" --network none "$IMAGE" --config /usr/share/zcpipe/examples/sample.yaml >/dev/null
lines=0
for _ in $(seq 1 240); do
        lines=$(podman exec "$NAME" sh -c 'grep -c "\"detections\"" /tmp/zcpipe-sample.jsonl 2>/dev/null || true')
        [ "${lines:-0}" -ge 3 ] && break
        [ "$(podman inspect --format '{{.State.Running}}' "$NAME")" = true ] ||
                { podman logs "$NAME" | tail -20; fail "the sample ended in the image"; }
        sleep 0.5
done
[ "${lines:-0}" -ge 3 ] || { podman logs "$NAME" | tail -20; fail "no results with detections from the sample after 120 s"; }
podman exec "$NAME" sh -c 'head -c 400 /tmp/zcpipe-sample.jsonl'; echo
podman stop -t 20 "$NAME" >/dev/null
rc=$(podman inspect --format '{{.State.ExitCode}}' "$NAME")
podman logs "$NAME" 2>&1 | grep -E "backend: auto|stopping|end-to-end" | head -5
[ "$rc" = 0 ] || { podman logs "$NAME" | tail -20; fail "podman stop: the sample exited $rc"; }
podman rm "$NAME" >/dev/null
podman rmi -f "$IMAGE" >/dev/null
step "done: deploy/Dockerfile built with podman, its image runs the sample ($lines results with detections), exit 0 on stop"
