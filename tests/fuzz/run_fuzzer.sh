#!/bin/sh
# SPDX-License-Identifier: MIT
# run_fuzzer.sh FUZZER SEEDS SECONDS: runs a libFuzzer binary for SECONDS on a
# scratch copy of its seed corpus (the tree is never written), leaving any
# crashing input in $ZCP_BUILD_ROOT/fuzz-artifacts/. Exit status: the fuzzer's,
# 1 for a finding (libFuzzer's own default, 77, is what meson counts as a skip:
# every finding passed as one).
set -eu
fuzzer=$1 seeds=$2 seconds=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/zcp-fuzz-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
artifacts="${ZCP_BUILD_ROOT:-.}/fuzz-artifacts"
mkdir -p "$artifacts"
"$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=65536 -error_exitcode=1 -timeout_exitcode=1 \
        -print_final_stats=1 -artifact_prefix="$artifacts/$(basename "$fuzzer")-" "$work" "$seeds"
