#!/bin/bash
# SPDX-License-Identifier: MIT
# The Debian package as the README's "Install (Debian 12)" section makes it, on a clean Debian 12
# (meson test --suite package). Every line of that section's command block is run as written
# (sudo dropped; `sudoedit` is the operator's edit below; journalctl is not emulated); a line this
# test does not know fails it, so the README and the test cannot drift apart.
#
#   1. build: a fresh chroot (debootstrap --variant=minbase bookworm, cached as a tarball in
#      WORKDIR/cache) gets a copy of the source tree and runs `apt-get build-dep ./` (the build
#      dependencies come from debian/control alone) and `dpkg-buildpackage -us -uc -b`. A feature
#      the package promises and cannot build is a build error: with libmosquitto-dev removed, the
#      configure step fails naming it.
#   2. the .deb: lintian finds no error or warning; it depends on no CUDA or NVIDIA package and on
#      gstreamer1.0-plugins-base (the file source's elements); it holds the binary, the conffile,
#      the unit, both man pages (zcpipe.yaml(5) with an entry for every key), every docs/*.md, the
#      default model, the sample clip and the example configs.
#   3. install: a second fresh chroot, with a recording systemctl (tests/package/fake-systemctl,
#      diverted over /usr/bin/systemctl) and /run/systemd/system, installs it with apt as the
#      README says; the install size is measured against --no-install-recommends (printed; no
#      GTK); `zcpipe --version` lists every feature as built in; the unit is enabled, not started;
#      the installed sample passes --check and runs with the installed default model (results
#      with detections, Ctrl-C ends it with exit 0); 150 frames of the sample (motion only) give
#      the same results, frame by frame, as the build tree's zcpipe ($ZCPIPE).
#   4. service: the operator edits /etc/zcpipe/camera.yaml, checks it and starts the service (the
#      README's lines); a rebuilt package (version bumped, the shipped camera.yaml changed, -Pnocuda)
#      upgrades it: the edit survives (dpkg --force-confold, what an unattended upgrade does; the
#      new default lands as camera.yaml.dpkg-dist) and the service runs again, a new process on
#      the new binary; an upgrade of a stopped service leaves it stopped; `apt-get remove` stops
#      it; purge removes the binary, the unit's enablement, /etc/zcpipe and /var/lib/zcpipe.
#
# Exits 77 where it cannot run: not root, a tool missing (tools/setup.sh installs them), no
# mount permission, or no network to the Debian mirror.
#
#   tests/package/test_deb.sh SOURCE_ROOT WORKDIR        (env ZCPIPE: the build tree's zcpipe)
set -euo pipefail
SRC=$(cd "$1" && pwd)
mkdir -p "$2"
W=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
MIRROR=${ZCP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
B=$W/build-chroot
C=$W/chroot
T0=$SECONDS

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
step() { echo "== [$((SECONDS - T0)) s] $*"; }

[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, chroot, mount)"
for t in debootstrap dpkg-deb dpkg-parsechangelog lintian chroot curl python3; do
        command -v "$t" >/dev/null || skip "$t is not installed (tools/setup.sh test installs it)"
done
mkdir -p "$W/probe"
mount -t tmpfs none "$W/probe" 2>/dev/null && umount "$W/probe" || skip "cannot mount here (no CAP_SYS_ADMIN)"
curl -sfI --max-time 15 "$MIRROR/dists/bookworm/Release" >/dev/null || skip "no network to $MIRROR"

mounted=()
pids=()
cleanup() {
        for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
        if [ -f "$C/run/fake-systemd/zcpipe.service.pid" ]; then
                kill -KILL "$(cat "$C/run/fake-systemd/zcpipe.service.pid")" 2>/dev/null || true
        fi
        for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT

# ---- the README's install --------------------------------------------------------------------
readme_commands() {   # the command block of the README's Install section, sudo and comments dropped
        python3 - "$SRC/README.md" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
sec = text.split("## Install (Debian 12)", 1)[1].split("\n## ", 1)[0]
block = re.search(r"\n\n((?:    .*\n)+)", sec)
for line in block.group(1).splitlines():
    cmd = line.strip()
    cmd = re.sub(r"\s+#.*$", "", cmd)
    print(re.sub(r"^sudo ", "", cmd))
EOF
}
mapfile -t README < <(readme_commands)
[ "${#README[@]}" -ge 5 ] || fail "no command block in the README's Install section"
readme() {   # readme PATTERN: the README line matching PATTERN (exactly one)
        local hits=() l
        for l in "${README[@]}"; do [[ $l =~ $1 ]] && hits+=("$l"); done
        [ "${#hits[@]}" = 1 ] || fail "the README's Install section has ${#hits[@]} lines matching /$1/, expected 1"
        echo "${hits[0]}"
}
known='^(apt-get build-dep|dpkg-buildpackage|apt-get install \.\./zcpipe_|zcpipe --config /usr/share/zcpipe/examples/sample.yaml$|sudoedit /etc/zcpipe/camera.yaml$|zcpipe --check --config /etc/zcpipe/camera.yaml$|systemctl (start|status) zcpipe$|journalctl )'
for l in "${README[@]}"; do
        [[ $l =~ $known ]] || fail "the README's Install section runs '$l', which this test does not run: teach it"
done
for pattern in '^apt-get build-dep' '^dpkg-buildpackage' '^apt-get install ' '^zcpipe --config /usr/share/zcpipe/examples/sample.yaml' \
               '^zcpipe --check' '^systemctl start' '^systemctl status'; do
        readme "$pattern" >/dev/null
done
version=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)
arch=$(dpkg --print-architecture)
deb_name=zcpipe_${version}_${arch}.deb
install_line=$(readme '^apt-get install ')
[ "$install_line" = "apt-get install ../$deb_name" ] ||
        fail "the README installs '${install_line#apt-get install }', the package is ../$deb_name"

# ---- chroots ---------------------------------------------------------------------------------
base=$W/cache/bookworm-minbase.tar.gz
if [ ! -f "$base" ]; then
        step "debootstrap --variant=minbase bookworm (cached as $base)"
        rm -rf "$W/cache/root" && mkdir -p "$W/cache"
        debootstrap --variant=minbase bookworm "$W/cache/root" "$MIRROR" >"$W/debootstrap.log" 2>&1 ||
                { tail -20 "$W/debootstrap.log"; skip "debootstrap failed (network?), log $W/debootstrap.log"; }
        tar -C "$W/cache/root" -czf "$base.tmp" . && mv "$base.tmp" "$base"
        rm -rf "$W/cache/root"
fi
fresh_chroot() {   # fresh_chroot DIR: Debian 12 minbase with proc, the shared package cache, apt -y
        local d=$1 m
        # A run killed before its exit trap leaves its mounts: take them down before the rm, which
        # would otherwise fail on proc and empty the package cache through the bind mount.
        for m in "$d/var/cache/apt/archives" "$d/proc"; do
                if mountpoint -q "$m" 2>/dev/null; then umount "$m" || umount -l "$m" || fail "cannot unmount $m"; fi
        done
        rm -rf "$d" && mkdir -p "$d" && tar -C "$d" -xzf "$base"
        mount -t proc proc "$d/proc" && mounted+=("$d/proc")
        mkdir -p "$W/cache/apt" "$d/var/cache/apt/archives"
        mount --bind "$W/cache/apt" "$d/var/cache/apt/archives" && mounted+=("$d/var/cache/apt/archives")
        cp /etc/resolv.conf "$d/etc/resolv.conf" 2>/dev/null || true
        echo "deb $MIRROR bookworm main" >"$d/etc/apt/sources.list"
        # the README's lines run as written: apt answers yes as an operator would
        echo 'APT::Get::Assume-Yes "true";' >"$d/etc/apt/apt.conf.d/90zcp-test-yes"
        echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' >"$d/etc/apt/apt.conf.d/90zcp-test-keep"
}
in_root() {   # in_root DIR [cd DIR2 &&] COMMAND...: a login-less shell in the chroot
        local d=$1
        shift
        chroot "$d" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 \
                HOME=/root bash -c "$*"
}
copy_tree() {   # copy_tree DEST: the tracked and untracked-not-ignored files (no build trees)
        rm -rf "$1"
        mkdir -p "$1"
        if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
                (cd "$SRC" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$1")
        else
                tar -C "$SRC" --exclude='./build*' --exclude=./.gpu -cf - . | tar -C "$1" -xf -
        fi
}

# ---- 1. build in a clean Debian 12 -------------------------------------------------------------
deb=$W/$deb_name
new_version="$version+test1"
deb2_name=zcpipe_${new_version}_${arch}.deb
deb2=$W/$deb2_name
if [ "${ZCP_TEST_DEB_REUSE:-0}" = 1 ] && [ -f "$deb" ] && [ -f "$deb2" ]; then
        step "reusing $deb and $deb2 (ZCP_TEST_DEB_REUSE=1, for working on this test)"
else
        step "fresh build chroot; apt-get update"
        fresh_chroot "$B"
        in_root "$B" apt-get update -qq >/dev/null
        copy_tree "$B/src/zcpipe"
        step "README: $(readme '^apt-get build-dep') (log: $W/build-dep.log)"
        in_root "$B" "cd /src/zcpipe && $(readme '^apt-get build-dep')" >"$W/build-dep.log" 2>&1 ||
                { tail -30 "$W/build-dep.log"; fail "apt-get build-dep ./ in a clean Debian 12"; }
        grep -E "newly installed" "$W/build-dep.log" || true
        step "README: $(readme '^dpkg-buildpackage') (log: $W/build.log)"
        in_root "$B" "cd /src/zcpipe && $(readme '^dpkg-buildpackage')" >"$W/build.log" 2>&1 ||
                { tail -40 "$W/build.log"; fail "dpkg-buildpackage in a clean Debian 12"; }
        cp "$B/src/$deb_name" "$deb" || fail "the build made no ../$deb_name"
        grep -E "^ *(cuda|gstreamer|v4l2|systemd|http|mqtt|live snapshots) *:" "$W/build.log" | head -8

        step "a promised feature that cannot build fails the build (libmosquitto-dev removed)"
        in_root "$B" apt-get remove -qq libmosquitto-dev >"$W/feature.log" 2>&1 || fail "apt-get remove libmosquitto-dev"
        rc=0
        in_root "$B" "cd /src/zcpipe && rm -rf obj-* && debian/rules override_dh_auto_configure" >>"$W/feature.log" 2>&1 || rc=$?
        [ "$rc" != 0 ] || fail "debian/rules' configure step succeeded without libmosquitto-dev: MQTT left out silently"
        grep -qi "mosquitto" "$W/feature.log" || { tail -20 "$W/feature.log"; fail "the failed configure does not name mosquitto"; }
        grep -i "dependency.*mosquitto.*not found" "$W/feature.log" | head -2
        in_root "$B" apt-get install -qq libmosquitto-dev >>"$W/feature.log" 2>&1 || fail "apt-get install libmosquitto-dev again"

        step "the upgrade: version bumped, the shipped camera.yaml changed, -Pnocuda, nocheck (log: $W/build2.log)"
        copy_tree "$B/src2/zcpipe"
        {
                echo "zcpipe ($new_version) bookworm; urgency=medium"
                echo
                echo "  * Test upgrade (tests/package/test_deb.sh): a new default camera.yaml."
                echo
                echo " -- zcpipe maintainers <maintainers@users.noreply.a-seed-d48cff2b.example>  $(date -R)"
                echo
                cat "$B/src2/zcpipe/debian/changelog"
        } >"$B/src2/zcpipe/debian/changelog.new"
        mv "$B/src2/zcpipe/debian/changelog.new" "$B/src2/zcpipe/debian/changelog"
        echo "# $new_version: a new default" >>"$B/src2/zcpipe/config/camera.yaml"
        in_root "$B" "cd /src2/zcpipe && DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -us -uc -b -Pnocuda" >"$W/build2.log" 2>&1 ||
                { tail -40 "$W/build2.log"; fail "dpkg-buildpackage of the upgrade"; }
        cp "$B/src2/$deb2_name" "$deb2" || fail "no $deb2_name"
        umount "$B/var/cache/apt/archives" "$B/proc"
        mounted=()
        rm -rf "$B"
fi

# ---- 2. the package ----------------------------------------------------------------------------
step "what the package holds"
ls -l "$deb"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
echo "Recommends: $(dpkg-deb -f "$deb" Recommends)"
echo "$depends" | grep -Eiq 'cuda|nvidia' && fail "the package depends on a CUDA/NVIDIA package: $depends"
echo "$depends" | grep -q 'gstreamer1.0-plugins-base' || fail "the package does not depend on gstreamer1.0-plugins-base"
x=$W/extract
rm -rf "$x" && dpkg-deb -R "$deb" "$x"
for f in usr/bin/zcpipe etc/zcpipe/camera.yaml usr/share/zcpipe/zcnet-default.safetensors \
         usr/share/zcpipe/centernet/model.json usr/share/zcpipe/centernet/centernet.bin \
         usr/share/zcpipe/centernet/labels.txt usr/share/zcpipe/samples/vtest-h264.mp4 \
         usr/share/zcpipe/samples/README.md usr/share/zcpipe/grafana-dashboard.json \
         usr/share/zcpipe/examples/camera.yaml usr/share/zcpipe/examples/sample.yaml \
         usr/share/man/man8/zcpipe.8.gz usr/share/man/man5/zcpipe.yaml.5.gz etc/logrotate.d/zcpipe; do
        [ -f "$x/$f" ] || fail "the package lacks /$f"
done
for md in "$SRC"/docs/*.md; do
        f=usr/share/doc/zcpipe/docs/$(basename "$md")
        [ -f "$x/$f" ] || [ -f "$x/$f.gz" ] || fail "the package lacks /$f (docs/$(basename "$md"))"
done
[ -f "$x/lib/systemd/system/zcpipe.service" ] || fail "the package lacks /lib/systemd/system/zcpipe.service"
grep -qx /etc/zcpipe/camera.yaml "$x/DEBIAN/conffiles" || fail "camera.yaml is not a conffile: $(cat "$x/DEBIAN/conffiles")"
cmp -s "$x/etc/zcpipe/camera.yaml" "$SRC/config/camera.yaml" || fail "/etc/zcpipe/camera.yaml is not config/camera.yaml"
cmp -s "$x/usr/share/zcpipe/examples/sample.yaml" "$SRC/config/sample.yaml" || fail "the example sample.yaml is not config/sample.yaml"
# zcpipe.yaml(5): an entry for every key (tools/zcp-keys builds it from the parser's table)
for k in source.connect_timeout_ms source.latency_ms output.password_file output.ca_file model.classes \
         convert.threads metrics.http.snapshot_fps pinned_budget; do
        zcat "$x/usr/share/man/man5/zcpipe.yaml.5.gz" | grep -qx ".B ${k//-/\\\\-}" ||
                fail "the installed zcpipe.yaml(5) has no entry for $k"
done
needed=$(readelf -d "$x/usr/bin/zcpipe" | grep NEEDED || true)
echo "$needed" | grep -Eq 'libcuda|libcudart' && fail "zcpipe needs a CUDA library at load time: $needed"
if [ -f "$x/usr/bin/zcpipe-bench" ]; then
        [ -f "$x/usr/share/man/man1/zcpipe-bench.1.gz" ] || fail "the package has zcpipe-bench but not its man page"
fi

step "lintian"
# Its ELF cache (mldbm-elf-*) outlives it in $TMPDIR: give it a directory that goes after.
mkdir -p "$W/lintian-tmp"
TMPDIR="$W/lintian-tmp" lintian --fail-on error,warning --display-info "$deb" | tee "$W/lintian.log" ||
        fail "lintian (log: $W/lintian.log)"
rm -rf "$W/lintian-tmp"

# ---- 3. install into a fresh Debian 12 -----------------------------------------------------------
step "fresh chroot, a recording systemctl in place of systemd"
fresh_chroot "$C"
in_root "$C" apt-get update -qq >/dev/null
# systemd may come with the install (a recommended package's dependency): its systemctl goes aside.
# Bookworm's systemd ships /bin/systemctl, which is /usr/bin/systemctl once /bin is a link.
for p in /bin/systemctl /usr/bin/systemctl; do
        in_root "$C" dpkg-divert --local --rename --add "$p" >/dev/null
done
install -m 0755 "$HERE/fake-systemctl" "$C/usr/bin/systemctl"
mkdir -p "$C/run/systemd/system"
mkdir -p "$C/src/zcpipe" && cp "$deb" "$C/src/"
unit_link=$C/etc/systemd/system/multi-user.target.wants/zcpipe.service
svc_pid() { cat "$C/run/fake-systemd/zcpipe.service.pid" 2>/dev/null || true; }
svc_running() {   # the service's process lives (a zombie does not count)
        local p
        p=$(svc_pid)
        [ -n "$p" ] && [ -r "/proc/$p/stat" ] && [ "$(sed 's/.*) //' "/proc/$p/stat" | cut -d' ' -f1)" != Z ]
}
calls_since() { [ ! -f "$C/var/log/fake-systemctl.log" ] || tail -n +"$(($1 + 1))" "$C/var/log/fake-systemctl.log" | sed 's/^/    /'; }
ncalls() { if [ -f "$C/var/log/fake-systemctl.log" ]; then wc -l <"$C/var/log/fake-systemctl.log"; else echo 0; fi; }

step "install size: the README's apt-get install against --no-install-recommends"
size_of() {   # size_of APT-ARGS...: "N packages, M MB"
        in_root "$C" "cd /src/zcpipe && apt-get install -o APT::Get::Assume-Yes=false --assume-no $*" 2>&1 |
                sed -n -e 's/^.* \([0-9]*\) newly installed.*/\1 packages/p' \
                        -e 's/^After this operation, \(.*\) of additional disk space will be used./\1/p' |
                paste -sd, - || true
}
echo "README (Recommends too):                  $(size_of "../$deb_name")"
echo "--no-install-recommends, plugins named:   $(size_of --no-install-recommends "../$deb_name" gstreamer1.0-plugins-good gstreamer1.0-libav)"
echo "--no-install-recommends, Depends only:    $(size_of --no-install-recommends "../$deb_name")"

calls=$(ncalls)
step "README: $install_line (log: $W/install.log)"
in_root "$C" "cd /src/zcpipe && $install_line" >"$W/install.log" 2>&1 ||
        { tail -30 "$W/install.log"; fail "apt-get install ../$deb_name"; }
grep -E "newly installed" "$W/install.log" || true
in_root "$C" "dpkg-query -W -f='\${Package} \${Status}\n' 'libgtk*'" 2>/dev/null | grep -q "ok installed" &&
        fail "the install pulled GTK"
grep -q "recording systemctl" "$C/usr/bin/systemctl" || fail "the install replaced the recording systemctl"
echo "maintainer scripts called:"
calls_since "$calls"
[ "$(ncalls)" -gt "$calls" ] || fail "the maintainer scripts called no systemctl (is /run/systemd/system there?)"
[ -L "$unit_link" ] || fail "the unit is not enabled after install"
svc_running && fail "the service was started at install (it waits for the operator's camera.yaml)"
echo "enabled, not started: $(readlink "$unit_link")"
in_root "$C" zcpipe --version | tee "$W/version.txt"
for f in gstreamer v4l2 systemd http mqtt snapshots; do
        grep -q "$f yes" "$W/version.txt" || fail "the package's zcpipe lacks $f, which debian/rules enables"
done
if grep -q "cuda yes" "$W/version.txt"; then want_cpu="no NVIDIA driver"; else want_cpu="this build has no CUDA support"; fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port_free() { python3 -c "import socket,sys; s = socket.socket(); s.bind(('127.0.0.1', $1))" 2>/dev/null; }
sample_line=$(readme '^zcpipe --config /usr/share/zcpipe/examples/sample.yaml')
step "README: $sample_line (the installed default model, CPU backend)"
in_root "$C" zcpipe --check --config /usr/share/zcpipe/examples/sample.yaml || fail "--check of the installed sample"
port_free 9464 || fail "port 9464 (the sample's metrics port) is taken on this machine"
rm -f "$C/tmp/zcpipe-sample.jsonl"
chroot "$C" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 ${sample_line} >"$W/sample.log" 2>&1 &
sample_pid=$!
pids+=("$sample_pid")
got=0
for _ in $(seq 1 240); do
        got=$(grep -c '"detections"' "$C/tmp/zcpipe-sample.jsonl" 2>/dev/null || true)
        [ "${got:-0}" -ge 3 ] && break
        kill -0 "$sample_pid" 2>/dev/null || { cat "$W/sample.log"; fail "the installed sample ended by itself"; }
        sleep 0.5
done
[ "${got:-0}" -ge 3 ] || { tail -20 "$W/sample.log"; fail "no results with detections from the installed sample in 120 s"; }
kill -INT "$sample_pid"   # Ctrl-C
rc=0
wait "$sample_pid" || rc=$?
pids=()
grep -E "backend: auto -> cpu|stopping" "$W/sample.log" | head -3
[ "$rc" = 0 ] || { tail -20 "$W/sample.log"; fail "Ctrl-C: the installed sample exited $rc"; }
grep -q "backend: auto -> cpu ($want_cpu" "$W/sample.log" || fail "expected the CPU backend ($want_cpu)"
head -c 300 "$C/tmp/zcpipe-sample.jsonl"; echo

step "the sample's 150 frames (motion only) through the installed zcpipe and the build tree's"
cp "$SRC/samples/vtest-h264.mp4" "$C/tmp/vtest.mp4"
frames_yaml() {   # frames_yaml VIDEO OUTPUT
        printf 'streams:\n  - name: sample\n    source: {type: file, path: %s, pace: fast}\n' "$1"
        printf '    gpu: {backend: cpu}\n    model: {enabled: false}\n    output: {type: file, path: %s}\n' "$2"
        printf 'metrics: {http: {enabled: false}}\nlog: {summary_interval_s: 0}\n'
}
frames_yaml /tmp/vtest.mp4 /tmp/frames.jsonl >"$C/tmp/frames.yaml"
rm -f "$C/tmp/frames.jsonl"
in_root "$C" zcpipe --config /tmp/frames.yaml >"$W/frames.log" 2>&1 || { cat "$W/frames.log"; fail "150 frames"; }
frames=$(wc -l <"$C/tmp/frames.jsonl")
[ "$frames" = 150 ] || fail "the sample gave $frames result lines, expected 150"
if [ -n "${ZCPIPE:-}" ] && [ -x "$ZCPIPE" ]; then
        frames_yaml "$SRC/samples/vtest-h264.mp4" "$W/frames-build.jsonl" >"$W/frames-build.yaml"
        rm -f "$W/frames-build.jsonl"
        "$ZCPIPE" --config "$W/frames-build.yaml" >"$W/frames-build.log" 2>&1 || fail "the build tree's zcpipe"
        python3 "$SRC/tests/kernels/compare_results.py" "$W/frames-build.jsonl" "$C/tmp/frames.jsonl" ||
                fail "installed and build-tree results differ"
fi

# ---- 4. the service: configured, started, upgraded, removed, purged ------------------------------
step "README: sudoedit /etc/zcpipe/camera.yaml (the operator's edit: frame rate, metrics port, a comment)"
port=$(free_port)
sed -i -e 's/^      fps: 30 /      fps: 25 /' -e "s/^    port: 9464 /    port: $port /" "$C/etc/zcpipe/camera.yaml"
echo "# operator: the lobby camera" >>"$C/etc/zcpipe/camera.yaml"
grep -q "^    port: $port " "$C/etc/zcpipe/camera.yaml" || fail "the test's edit of the metrics port did not apply"
cp "$C/etc/zcpipe/camera.yaml" "$W/camera-edited.yaml"
step "README: $(readme '^zcpipe --check')"
in_root "$C" "$(readme '^zcpipe --check')" || fail "--check of the edited config"
calls=$(ncalls)
step "README: $(readme '^systemctl start')"
in_root "$C" "$(readme '^systemctl start')" || fail "systemctl start zcpipe"
calls_since "$calls"
svc_running || fail "the service is not running after systemctl start"
status_line=$(readme '^systemctl status')
in_root "$C" "$status_line" || fail "$status_line: not active"
pid1=$(svc_pid)
for _ in $(seq 1 100); do
        curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break
        svc_running || { cat "$C/var/log/zcpipe-service.log"; fail "the service ended by itself"; }
        sleep 0.2
done
curl -s -o /dev/null "http://127.0.0.1:$port/healthz" || fail "the service's metrics port $port does not answer"
echo "running: pid $pid1, http://127.0.0.1:$port/ answers (no camera here: it waits for /dev/video0)"

calls=$(ncalls)
step "upgrade to $new_version while running: dpkg -i --force-confold"
cp "$deb2" "$C/tmp/"
in_root "$C" dpkg --force-confold -i "/tmp/$deb2_name" >"$W/upgrade.log" 2>&1 || { cat "$W/upgrade.log"; fail "upgrade"; }
calls_since "$calls"
[ "$(in_root "$C" "dpkg-query -W -f='\${Version}' zcpipe")" = "$new_version" ] || fail "not upgraded"
svc_running || { tail "$C/var/log/zcpipe-service.log"; fail "the service is not running after the upgrade"; }
pid2=$(svc_pid)
[ "$pid2" != "$pid1" ] || fail "the upgrade did not restart the service (still pid $pid1, the old binary)"
exe=$(readlink "/proc/$pid2/exe")
case $exe in *deleted*) fail "the service runs a deleted binary after the upgrade: $exe" ;; esac
[ "$(stat -L -c %i "/proc/$pid2/exe")" = "$(stat -c %i "$C/usr/bin/zcpipe")" ] ||
        fail "the service (pid $pid2) does not run the upgraded /usr/bin/zcpipe"
echo "running again: pid $pid1 -> $pid2, on the new /usr/bin/zcpipe"
cmp "$W/camera-edited.yaml" "$C/etc/zcpipe/camera.yaml" || fail "the operator's edit did not survive the upgrade"
grep -q "^# $new_version: a new default" "$C/etc/zcpipe/camera.yaml.dpkg-dist" || fail "no camera.yaml.dpkg-dist with the new default"
grep -q "^# $new_version" "$C/usr/share/zcpipe/examples/camera.yaml" || fail "the example was not updated"
[ -L "$unit_link" ] || fail "the unit is no longer enabled after the upgrade"
in_root "$C" zcpipe --check --config /etc/zcpipe/camera.yaml || fail "--check of the edited config after the upgrade"
echo "edit kept: $(grep -c 'operator: the lobby camera' "$C/etc/zcpipe/camera.yaml") line; new default in camera.yaml.dpkg-dist"

step "an upgrade of a stopped service leaves it stopped"
in_root "$C" systemctl stop zcpipe
svc_running && fail "systemctl stop did not stop it"
in_root "$C" dpkg --force-confold -i "/tmp/$deb2_name" >"$W/upgrade2.log" 2>&1 || { cat "$W/upgrade2.log"; fail "reinstall"; }
svc_running && fail "the upgrade started a service the operator had stopped"
in_root "$C" systemctl start zcpipe
svc_running || fail "systemctl start (again)"

calls=$(ncalls)
step "apt-get remove zcpipe"
pid3=$(svc_pid)
in_root "$C" apt-get remove -qq zcpipe >"$W/remove.log" 2>&1 || { cat "$W/remove.log"; fail "remove"; }
calls_since "$calls"
svc_running && fail "apt-get remove left the service running (pid $(svc_pid))"
[ -r "/proc/$pid3/stat" ] && [ "$(sed 's/.*) //' "/proc/$pid3/stat" | cut -d' ' -f1)" != Z ] &&
        fail "apt-get remove left pid $pid3 running"
[ ! -e "$C/usr/bin/zcpipe" ] || fail "/usr/bin/zcpipe left after remove"
[ -f "$C/etc/zcpipe/camera.yaml" ] || fail "remove took the conffile (only purge may)"
echo "stopped by remove; the conffile stays"

step "apt-get purge zcpipe"
[ -d "$C/var/lib/zcpipe" ] || fail "the service made no /var/lib/zcpipe (its StateDirectory=): nothing to purge"
in_root "$C" apt-get purge -qq zcpipe >"$W/purge.log" 2>&1 || { cat "$W/purge.log"; fail "purge"; }
[ ! -e "$C/etc/zcpipe" ] || fail "/etc/zcpipe left after purge: $(ls -la "$C/etc/zcpipe")"
[ ! -e "$C/var/lib/zcpipe" ] || fail "/var/lib/zcpipe left after purge"
[ ! -L "$unit_link" ] || fail "the unit is still enabled after purge"
in_root "$C" dpkg-query -W zcpipe >/dev/null 2>&1 && fail "zcpipe still known to dpkg after purge"

cleanup
mounted=()
rm -rf "$C" "$x"
step "done: built with apt-get build-dep in a clean Debian 12, installed, sample run, upgraded running, removed stopped, purged"
