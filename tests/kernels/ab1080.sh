#!/bin/bash
# SPDX-License-Identifier: MIT
# 1080p A/B of bench_gpu configurations in one device call: each config ROUNDS times, interleaved
# (round r runs them all in turn), then a table of p50s (zero-copy, copy, kern, network alone, the
# zero-copy timeline). A config is NAME=ENV, ENV being VAR=VALUE pairs joined by commas (empty: the
# defaults). AB_FIRST_ENV (VAR=VALUE ...) is added to round 1 only (ZCP_BENCH_VARIANTS=1: every
# conv variant timed in that round's per-kernel list).
#
#   bash tests/kernels/ab1080.sh BUNDLE OUTDIR ROUNDS 'tiled=' 'split=ZCP_CONV_TILED=0'
set -u
B=$1 O=$2 R=$3
shift 3
mkdir -p "$O"
for i in $(seq 1 "$R"); do
        for cfg in "$@"; do
                e=${cfg#*=}
                first=
                [ "$i" = 1 ] && first=${AB_FIRST_ENV:-}
                # shellcheck disable=SC2086
                env ${e//,/ } $first ZCP_BENCH_SIZE=1920x1080 "$B/env" "$B/bin/bench_gpu" 1000 \
                        >"$O/ab-${cfg%%=*}-$i.log" 2>&1
        done
done
echo "== A/B 1080p (p50 us): config round | zc | copy | kern | kern scan path | net alone | timeline"
for i in $(seq 1 "$R"); do
        for cfg in "$@"; do
                f=$O/ab-${cfg%%=*}-$i.log
                zc=$(grep '^1920x1080 (' "$f" | sed 's/.*zc p50 \([0-9.]*\).*/\1/')
                cp=$(grep '^1920x1080 (' "$f" | sed 's/.*copy p50 \([0-9.]*\).*/\1/')
                kn=$(grep '^1920x1080 (' "$f" | sed 's/.*kern \([0-9.]*\).*/\1/')
                ks=$(grep '^1920x1080 (' "$f" | sed -n 's/.*scan path \([0-9.]*\).*/\1/p')
                na=$(grep '^1920x1080 network paths' "$f" | sed 's/.*network alone layers \([0-9.]*\).*/\1/')
                tl=$(grep '^1920x1080 zero-copy timeline' "$f" | sed 's/.*: //')
                echo "${cfg%%=*} $i | $zc | $cp | $kn | ${ks:--} | $na | $tl"
                tail -n 2 "$f" | grep -i "fail\|error" | head -2
        done
done
