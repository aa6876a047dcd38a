#!/bin/bash
# SPDX-License-Identifier: MIT
# The Debian package as a Debian 12 user gets it (meson test --suite package):
#
#   1. dpkg-buildpackage -us -uc -b on a copy of the source tree (the default build: CUDA when
#      the toolkit is here); the .deb depends on no CUDA or NVIDIA package, its zcpipe needs no
#      libcudart/libcuda at load time, /etc/zcpipe/camera.yaml is its conffile, the weights, the
#      dashboard, the man pages and the unit are where they belong (with CUDA, zcpipe-bench and its
#      man page too; without a driver it exits 69); lintian finds no error or
#      warning (debian/zcpipe.lintian-overrides says why for each override);
#   2. a fresh Debian 12 chroot (debootstrap --variant=minbase, the base cached as a tarball in
#      WORKDIR/cache) installs it with apt: the unit is enabled, not started; the installed
#      binary checks the installed config (--check) and runs the bundled sample through the CPU
#      backend (no NVIDIA driver in the chroot: it says so), with the installed default weights,
#      giving the same results, frame by frame, as the build tree's zcpipe ($ZCPIPE);
#   3. the operator edits /etc/zcpipe/camera.yaml; a rebuilt package (version bumped in
#      debian/changelog, the shipped camera.yaml changed too, built with -Pnocuda to save the
#      GPU code's compile time) upgrades it: the edit survives (dpkg --force-confold, what an
#      unattended apt upgrade does; the new default lands beside it as camera.yaml.dpkg-dist);
#   4. purge removes the binary, the unit's enablement and /etc/zcpipe.
#
# Exits 77 where it cannot run: not root, a tool missing (tools/setup.sh installs them), no
# mount permission, or no network to the Debian mirror.
#
#   tests/package/test_deb.sh SOURCE_ROOT WORKDIR        (env ZCPIPE: the build tree's zcpipe)
set -euo pipefail
SRC=$(cd "$1" && pwd)
mkdir -p "$2"
W=$(cd "$2" && pwd)
MIRROR=${ZCP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
C=$W/chroot
T0=$SECONDS

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
step() { echo "== [$((SECONDS - T0)) s] $*"; }

[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, chroot, mount)"
for t in dpkg-buildpackage dh debootstrap dpkg-deb lintian chroot readelf curl python3; do
        command -v "$t" >/dev/null || skip "$t is not installed (tools/setup.sh test installs it)"
done
mkdir -p "$W/probe"
mount -t tmpfs none "$W/probe" 2>/dev/null && umount "$W/probe" || skip "cannot mount here (no CAP_SYS_ADMIN)"
curl -sfI --max-time 15 "$MIRROR/dists/bookworm/Release" >/dev/null || skip "no network to $MIRROR"

mounted=()
cleanup() {
        for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT

# ---- 1. build ------------------------------------------------------------------------------
copy_tree() {   # copy_tree DEST: the tracked and untracked-not-ignored files (no build trees)
        rm -rf "$1"
        mkdir -p "$1"
        if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
                (cd "$SRC" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$1")
        else
                tar -C "$SRC" --exclude='./build*' --exclude=./.gpu -cf - . | tar -C "$1" -xf -
        fi
}
version=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)
arch=$(dpkg --print-architecture)
deb=$W/zcpipe_${version}_${arch}.deb
if [ "${ZCP_TEST_DEB_REUSE:-0}" = 1 ] && [ -f "$deb" ]; then
        step "reusing $deb (ZCP_TEST_DEB_REUSE=1, for working on this test)"
else
        step "dpkg-buildpackage -us -uc -b (log: $W/build.log)"
        rm -f "$W"/*.deb "$W"/*.changes "$W"/*.buildinfo
        copy_tree "$W/src"
        (cd "$W/src" && dpkg-buildpackage -us -uc -b >"$W/build.log" 2>&1) ||
                { tail -40 "$W/build.log"; fail "dpkg-buildpackage"; }
fi
[ -f "$deb" ] || fail "no $deb"
ls -l "$deb"

step "what the package holds"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
echo "$depends" | grep -Eiq 'cuda|nvidia' && fail "the package depends on a CUDA/NVIDIA package: $depends"
x=$W/extract
rm -rf "$x" && dpkg-deb -R "$deb" "$x"
for f in usr/bin/zcpipe etc/zcpipe/camera.yaml usr/share/zcpipe/zcnet-default.safetensors \
         usr/share/zcpipe/grafana-dashboard.json usr/share/zcpipe/examples/camera.yaml \
         usr/share/man/man8/zcpipe.8.gz usr/share/man/man5/zcpipe.yaml.5.gz etc/logrotate.d/zcpipe; do
        [ -f "$x/$f" ] || fail "the package lacks /$f"
done
[ -f "$x/lib/systemd/system/zcpipe.service" ] || fail "the package lacks /lib/systemd/system/zcpipe.service"
grep -qx /etc/zcpipe/camera.yaml "$x/DEBIAN/conffiles" || fail "camera.yaml is not a conffile: $(cat "$x/DEBIAN/conffiles")"
cmp -s "$x/etc/zcpipe/camera.yaml" "$SRC/config/camera.yaml" || fail "/etc/zcpipe/camera.yaml is not config/camera.yaml"
needed=$(readelf -d "$x/usr/bin/zcpipe" | grep NEEDED || true)
echo "$needed" | grep -Eq 'libcuda|libcudart' && fail "zcpipe needs a CUDA library at load time: $needed"
grep -q "$SRC" "$x/usr/bin/zcpipe" && echo "note: the binary holds the source path (only used when run from its build tree)"
# zcpipe-bench comes with the GPU backend (tools/bench): its man page with it, no CUDA library needed.
if [ -f "$x/usr/bin/zcpipe-bench" ]; then
        [ -f "$x/usr/share/man/man1/zcpipe-bench.1.gz" ] || fail "the package has zcpipe-bench but not its man page"
        needed=$(readelf -d "$x/usr/bin/zcpipe-bench" | grep NEEDED || true)
        echo "$needed" | grep -Eq 'libcuda|libcudart' && fail "zcpipe-bench needs a CUDA library at load time: $needed"
fi

step "lintian"
lintian --fail-on error,warning --display-info "$deb" | tee "$W/lintian.log" || fail "lintian (log: $W/lintian.log)"

# ---- 2. install into a fresh Debian 12 -----------------------------------------------------
base=$W/cache/bookworm-minbase.tar.gz
if [ ! -f "$base" ]; then
        step "debootstrap --variant=minbase bookworm (cached as $base)"
        rm -rf "$W/cache/root" && mkdir -p "$W/cache"
        debootstrap --variant=minbase bookworm "$W/cache/root" "$MIRROR" >"$W/debootstrap.log" 2>&1 ||
                { tail -20 "$W/debootstrap.log"; skip "debootstrap failed (network?), log $W/debootstrap.log"; }
        tar -C "$W/cache/root" -czf "$base.tmp" . && mv "$base.tmp" "$base"
        rm -rf "$W/cache/root"
fi
step "fresh chroot from $base"
# A run killed before its exit trap (SIGKILL) leaves its mounts behind: take them down before the
# rm, which would otherwise fail on proc and empty the package cache through the bind mount.
for m in "$C/var/cache/apt/archives" "$C/proc"; do
        if mountpoint -q "$m" 2>/dev/null; then umount "$m" || umount -l "$m" || fail "cannot unmount $m, left by an earlier run"; fi
done
rm -rf "$C" && mkdir -p "$C" && tar -C "$C" -xzf "$base"
mount -t proc proc "$C/proc" && mounted+=("$C/proc")
# Downloaded packages stay in the cache for the next run.
mkdir -p "$W/cache/apt" "$C/var/cache/apt/archives"
mount --bind "$W/cache/apt" "$C/var/cache/apt/archives" && mounted+=("$C/var/cache/apt/archives")
cp /etc/resolv.conf "$C/etc/resolv.conf" 2>/dev/null || true
echo "deb $MIRROR bookworm main" >"$C/etc/apt/sources.list"
in_chroot() { chroot "$C" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }

step "apt-get install ./zcpipe (and the H.264 decoders it recommends)"
cp "$deb" "$C/tmp/"
in_chroot apt-get update -qq >/dev/null
in_chroot apt-get install -y -qq --no-install-recommends "/tmp/$(basename "$deb")" \
        gstreamer1.0-plugins-good gstreamer1.0-plugins-bad >"$W/install.log" 2>&1 ||
        { tail -30 "$W/install.log"; fail "apt-get install"; }
unit_link=$C/etc/systemd/system/multi-user.target.wants/zcpipe.service
[ -L "$unit_link" ] || fail "the unit is not enabled after install"
echo "enabled: $(readlink "$unit_link")"
in_chroot zcpipe --version | tee "$W/version.txt"
# The package has the GPU backend when its build found the CUDA toolkit (debian/rules: nvcc on
# PATH, $CUDA_PATH or /usr/local/cuda); a build machine without the toolkit makes a CPU-only
# package, which must say so at start instead of looking for a driver.
if grep -q "cuda yes" "$W/version.txt"; then
        want_cpu="no NVIDIA driver"
        # zcpipe-bench is installed with the GPU backend; with no driver it says so and exits 69.
        [ -x "$C/usr/bin/zcpipe-bench" ] || fail "a package built with CUDA lacks /usr/bin/zcpipe-bench"
        rc=0
        in_chroot zcpipe-bench --quick --png "" >"$W/bench.log" 2>&1 || rc=$?
        cat "$W/bench.log"
        [ "$rc" = 69 ] || fail "zcpipe-bench without a driver: exit $rc, expected 69"
        grep -q "no GPU to measure: no NVIDIA driver" "$W/bench.log" || fail "zcpipe-bench did not say why it cannot measure"
else
        want_cpu="this build has no CUDA support"
        echo "note: the package was built without CUDA; its build log says:"
        grep -iE "^ *(cuda|nvcc)|cuda.*(NO|not found)" "$W/build.log" | head -5 || true
fi

step "zcpipe --check --config /etc/zcpipe/camera.yaml"
in_chroot zcpipe --check --config /etc/zcpipe/camera.yaml || fail "--check of the installed config"

step "the sample through the installed zcpipe (CPU backend, installed default weights)"
cp "$SRC/samples/vtest-h264.mp4" "$C/tmp/vtest.mp4"
sample_yaml() {   # sample_yaml VIDEO OUTPUT
        cat <<EOF
streams:
  - name: sample
    source:
      type: file
      path: $1
      pace: fast
    model:
      weights: ""
    output:
      type: file
      path: $2
metrics:
  http:
    enabled: false
log:
  summary_interval_s: 0
EOF
}
sample_yaml /tmp/vtest.mp4 /tmp/sample.jsonl >"$C/tmp/sample.yaml"
rm -f "$C/tmp/sample.jsonl"
in_chroot zcpipe --config /tmp/sample.yaml >"$W/sample.log" 2>&1 || { cat "$W/sample.log"; fail "the sample"; }
grep -E "backend: auto -> cpu|end-to-end" "$W/sample.log"
grep -q "backend: auto -> cpu ($want_cpu" "$W/sample.log" || fail "expected the CPU backend ($want_cpu)"
frames=$(wc -l <"$C/tmp/sample.jsonl")
[ "$frames" = 150 ] || fail "the sample gave $frames result lines, expected 150"
if [ -n "${ZCPIPE:-}" ] && [ -x "$ZCPIPE" ]; then
        # The build tree's zcpipe on the same input (its default weights: the build tree's copy).
        sample_yaml "$SRC/samples/vtest-h264.mp4" "$W/sample-build.jsonl" >"$W/sample-build.yaml"
        sed -i 's/^    model:/    gpu:\n      backend: cpu\n    model:/' "$W/sample-build.yaml"
        rm -f "$W/sample-build.jsonl"
        "$ZCPIPE" --config "$W/sample-build.yaml" >"$W/sample-build.log" 2>&1 || fail "the build tree's zcpipe"
        python3 "$SRC/tests/kernels/compare_exact.py" "$W/sample-build.jsonl" "$C/tmp/sample.jsonl" ||
                fail "installed and build-tree results differ"
fi

# ---- 3. upgrade over an edited conffile ----------------------------------------------------
step "operator edit, then a rebuilt package with a bumped version"
sed -i -e 's/^      fps: 30 /      fps: 25 /' "$C/etc/zcpipe/camera.yaml"
echo "# operator: the lobby camera" >>"$C/etc/zcpipe/camera.yaml"
cp "$C/etc/zcpipe/camera.yaml" "$W/camera-edited.yaml"
copy_tree "$W/src2"
new_version="$version+test1"
{
        echo "zcpipe ($new_version) bookworm; urgency=medium"
        echo
        echo "  * Test upgrade (tests/package/test_deb.sh): a new default camera.yaml."
        echo
        echo " -- zcpipe maintainers <maintainers@users.noreply.a-seed-d48cff2b.example>  $(date -R)"
        echo
        cat "$W/src2/debian/changelog"
} >"$W/src2/debian/changelog.new"
mv "$W/src2/debian/changelog.new" "$W/src2/debian/changelog"
echo "# $new_version: a new default" >>"$W/src2/config/camera.yaml"
(cd "$W/src2" && DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -us -uc -b -Pnocuda >"$W/build2.log" 2>&1) ||
        { tail -40 "$W/build2.log"; fail "dpkg-buildpackage of the upgrade"; }
deb2=$W/zcpipe_${new_version}_${arch}.deb
[ -f "$deb2" ] || fail "no $deb2"
cp "$deb2" "$C/tmp/"
step "dpkg -i --force-confold zcpipe $new_version"
in_chroot dpkg --force-confold -i "/tmp/$(basename "$deb2")" >"$W/upgrade.log" 2>&1 || { cat "$W/upgrade.log"; fail "upgrade"; }
[ "$(in_chroot dpkg-query -W -f='${Version}' zcpipe)" = "$new_version" ] || fail "not upgraded"
cmp "$W/camera-edited.yaml" "$C/etc/zcpipe/camera.yaml" || fail "the operator's edit did not survive the upgrade"
grep -q "^# $new_version: a new default" "$C/etc/zcpipe/camera.yaml.dpkg-dist" || fail "no camera.yaml.dpkg-dist with the new default"
grep -q "^# $new_version" "$C/usr/share/zcpipe/examples/camera.yaml" || fail "the example was not updated"
[ -L "$unit_link" ] || fail "the unit is no longer enabled after the upgrade"
in_chroot zcpipe --check --config /etc/zcpipe/camera.yaml || fail "--check of the edited config after the upgrade"
echo "edit kept: $(grep -c 'operator: the lobby camera' "$C/etc/zcpipe/camera.yaml") line; new default in camera.yaml.dpkg-dist"

# ---- 4. purge ------------------------------------------------------------------------------
step "apt-get purge zcpipe"
in_chroot apt-get purge -y -qq zcpipe >"$W/purge.log" 2>&1 || { cat "$W/purge.log"; fail "purge"; }
[ ! -e "$C/usr/bin/zcpipe" ] || fail "/usr/bin/zcpipe left after purge"
[ ! -e "$C/etc/zcpipe" ] || fail "/etc/zcpipe left after purge: $(ls -la "$C/etc/zcpipe")"
[ ! -L "$unit_link" ] || fail "the unit is still enabled after purge"
in_chroot dpkg-query -W zcpipe >/dev/null 2>&1 && fail "zcpipe still known to dpkg after purge"

cleanup
mounted=()
rm -rf "$C" "$W/src" "$W/src2" "$x"
step "done: built, installed, checked, ran the sample, upgraded over an edit, purged"
