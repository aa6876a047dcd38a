#!/bin/sh
# SPDX-License-Identifier: MIT
# One-step set-up for a fresh Debian 12 machine (run as root, or with sudo available).
#
#   tools/setup.sh demo   install what building and running zcpipe need, build zcpipe and its
#                         default model, run it on the bundled sample
#   tools/setup.sh test   install that and what the tests need, build everything, run the whole
#                         test suite (default build with every feature found, plus an ASan+UBSan
#                         CPU build and an NDEBUG build running the unit and integration suites,
#                         then the package suite: meson install, and the Debian package built,
#                         installed into a fresh Debian 12 chroot, upgraded and purged; and
#                         a build with every optional feature disabled, and a clang
#                         ASan+UBSan build running the unit suite and each libFuzzer target
#                         for ZCP_FUZZ_SECONDS, default 60)
#   tools/setup.sh repeat N [LOAD]
#                         the test set-up, then the whole suite N times in a row, with LOAD
#                         busy processes at nice 19 beside it (flakiness hunting)
#
# Build directories: build/ (default), build-asan/, build-ndebug/, build-minimal/, build-clang/.
# CUDA is used when nvcc is found (on PATH, in $CUDA_PATH or /usr/local/cuda); without it the
# CPU backend is built alone.
set -eu

cd "$(dirname "$0")/.."
mode=${1:-demo}
case "$mode" in
demo | test | repeat) ;;
*)
        echo "usage: $0 demo|test|repeat [N [LOAD]]" >&2
        exit 64
        ;;
esac

# What building zcpipe with every optional feature and running the demo need: a C compiler and
# meson (g++ too where a CUDA toolkit is found: nvcc's host compiler), the -dev packages of every
# feature (the demo's build is the full build), and GStreamer's plugins for the bundled sample
# (MP4 demuxer: -good; H.264 decoder: -libav).
DEMO_PACKAGES="gcc libc6-dev pkg-config meson ninja-build python3
libyaml-dev libyuv-dev libjansson-dev
libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-libav
libv4l-dev libturbojpeg0-dev libsystemd-dev libmicrohttpd-dev libmosquitto-dev"

# What only the tests use: more GStreamer plugins and tools (openh264dec, parsers, encoders,
# gst-launch, an RTSP server, ffmpeg), the servers and clients they talk to (mosquitto,
# Prometheus, curl, a browser), systemd-analyze, gnuplot for zcp-plot, the Debian packaging
# and chroot tools of the package suite (build-essential, git), clang for the sanitizer and
# fuzzing build, and the PyTorch peer.
TEST_PACKAGES="build-essential git
gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-tools
python3-gi gir1.2-gst-rtsp-server-1.0 ffmpeg
systemd curl gnuplot-nox
mosquitto mosquitto-clients python3-paho-mqtt openssl
prometheus python3-yaml
debhelper dpkg-dev fakeroot lintian debootstrap
clang libclang-rt-14-dev
chromium python3-pil python3-torch"

as_root() {
        if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

install_missing() { # packages...
        missing=""
        for p in "$@"; do
                dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
        done
        if [ -n "$missing" ]; then
                echo "setup: installing:$missing"
                as_root apt-get update -qq
                # shellcheck disable=SC2086
                DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends $missing
        else
                echo "setup: all packages present"
        fi
}

configure() { # dir, options...
        dir=$1; shift
        if [ -f "$dir/build.ninja" ]; then
                meson setup --reconfigure "$dir" "$@" >/dev/null
        else
                meson setup "$dir" "$@"
        fi
}

jobs=$(nproc 2>/dev/null || echo 2)
if command -v nvcc >/dev/null || [ -x "${CUDA_PATH:-/usr/local/cuda}/bin/nvcc" ]; then
        DEMO_PACKAGES="$DEMO_PACKAGES g++"
fi

case "$mode" in
demo)
        # shellcheck disable=SC2086
        install_missing $DEMO_PACKAGES
        configure build -Dwerror=true
        # zcpipe only (its default model, models/centernet, is copied by meson setup); `test` builds the rest.
        ninja -C build -j "$jobs" zcpipe
        ;;
*)
        # shellcheck disable=SC2086
        install_missing $DEMO_PACKAGES $TEST_PACKAGES
        # TensorFlow.js, the detector's independent oracle (tests/tfjs): pure JavaScript from npm,
        # pinned by tests/tfjs/package-lock.json; node and npm from Debian where none is there.
        command -v npm >/dev/null || install_missing nodejs npm
        npm ci --prefix tests/tfjs --no-audit --no-fund --loglevel=error
        configure build -Dwerror=true
        ninja -C build -j "$jobs"
        ;;
esac

# The whole suite over the three builds: the default build's suites, then an
# ASan+UBSan CPU build and an NDEBUG build running the unit and integration suites.
build_variants() {
        configure build-asan -Dwerror=true -Dcuda=disabled -Db_sanitize=address,undefined -Db_lundef=false
        ninja -C build-asan -j "$jobs"
        configure build-ndebug -Dwerror=true -Dcuda=disabled -Dbuildtype=release -Db_ndebug=true
        ninja -C build-ndebug -j "$jobs"
        # Every optional part off: the stubs and the feature-less build stay honest.
        configure build-minimal -Dwerror=true -Dcuda=disabled -Dgstreamer=disabled -Dv4l2=disabled \
                -Dsystemd=disabled -Dhttp=disabled -Dmqtt=disabled
        ninja -C build-minimal -j "$jobs"
        # clang (its own warnings), ASan+UBSan, and the libFuzzer targets of tests/fuzz.
        (CC=clang && export CC && configure build-clang -Dwerror=true -Dcuda=disabled \
                -Db_sanitize=address,undefined -Db_lundef=false -Dfuzzing=true -Dfuzz_seconds="${ZCP_FUZZ_SECONDS:-60}")
        ninja -C build-clang -j "$jobs"
}

run_suites() {
        meson test -C build --print-errorlogs --num-processes 2 --no-suite package
        meson test -C build-asan --print-errorlogs --num-processes 2 --suite unit --suite integration \
                --timeout-multiplier 3
        meson test -C build-ndebug --print-errorlogs --num-processes 2 --suite unit --suite integration
        meson test -C build-minimal --print-errorlogs --num-processes 2 --suite unit --suite integration
        meson test -C build-clang --print-errorlogs --num-processes 2 --suite unit --timeout-multiplier 3
        meson test -C build-clang --print-errorlogs --suite fuzz
}

case "$mode" in
demo)
        echo "setup: running build/zcpipe --config config/sample.yaml (results in /tmp/zcpipe-sample.jsonl;"
        echo "setup: watch it at http://127.0.0.1:9464/, Ctrl-C stops it and prints the latency table)"
        exec build/zcpipe --config config/sample.yaml
        ;;
test)
        build_variants
        run_suites
        # The package suite last: a dpkg-buildpackage of its own and a Debian 12 chroot (the
        # debootstrap base and downloaded packages cached in build/package/cache).
        t0=$(date +%s)
        meson test -C build --print-errorlogs --num-processes 1 --suite package
        echo "setup: package suite: $(($(date +%s) - t0)) s"
        ;;
repeat)
        # tools/setup.sh repeat N [LOAD]: the whole suite N times in a row (stops at the first
        # red run), optionally with LOAD busy processes at nice 19 competing for the CPU, as on
        # a shared CI machine. Prints one line per run and a closing count.
        runs=${2:-10}
        load=${3:-0}
        build_variants
        loaders=""
        i=0
        while [ "$i" -lt "$load" ]; do
                nice -n 19 sh -c 'while :; do :; done' &
                loaders="$loaders $!"
                i=$((i + 1))
        done
        # shellcheck disable=SC2086
        trap '[ -z "$loaders" ] || kill $loaders 2>/dev/null' EXIT INT TERM
        passed=0
        n=1
        while [ "$n" -le "$runs" ]; do
                start=$(date +%s)
                if run_suites >"build/repeat-$n.log" 2>&1; then
                        passed=$((passed + 1))
                        echo "setup: run $n of $runs green in $(($(date +%s) - start)) s (load $load)"
                else
                        echo "setup: run $n of $runs RED after $(($(date +%s) - start)) s: build/repeat-$n.log"
                        grep -E "^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT)" "build/repeat-$n.log" || true
                        break
                fi
                n=$((n + 1))
        done
        echo "$passed passed, $((n > runs ? 0 : 1)) failed"
        [ "$passed" -eq "$runs" ]
        ;;
*)
        echo "usage: $0 demo|test|repeat [N [LOAD]]" >&2
        exit 64
        ;;
esac
