#!/bin/sh
# SPDX-License-Identifier: MIT
# meson install into a DESTDIR, twice (meson test --suite package):
#   - the first install puts the example configuration in place as SYSCONFDIR/zcpipe/camera.yaml
#     (equal to config/camera.yaml) and installs both man pages;
#   - an operator's edit of that file survives the second install, and so does a symlink there;
#   - the installed zcpipe, asked to --check a config with the default model, looks for it
#     in DATADIR (where meson installs it), never in the build or source tree; with ZCP_MODELDIR
#     it uses that folder;
#   - the installed examples/sample.yaml passes --check: the clip it names is installed beside it.
#
#   tests/package/test_install.sh BUILD_ROOT SOURCE_ROOT WORKDIR
set -eu
B=$1 S=$2 W=$3
fail() { echo "FAIL: $*"; exit 1; }
intro=$(meson introspect "$B" --buildoptions)
opt() { printf '%s' "$intro" | python3 -c "import json,sys; print([o['value'] for o in json.load(sys.stdin) if o['name']=='$1'][0])"; }
prefix=$(opt prefix)
sysconf=$(opt sysconfdir)
datadir=$(opt datadir)
mandir=$(opt mandir)
case $sysconf in /*) ;; *) sysconf=$prefix/$sysconf ;; esac
case $mandir in /*) ;; *) mandir=$prefix/$mandir ;; esac
conf=$W/dest$sysconf/zcpipe/camera.yaml
rm -rf "$W/dest" && mkdir -p "$W"

DESTDIR=$W/dest meson install -C "$B" --no-rebuild --quiet >"$W/install1.log" 2>&1 || { cat "$W/install1.log"; fail "meson install"; }
cmp "$conf" "$S/config/camera.yaml" || fail "$conf is not config/camera.yaml"
cmp "$W/dest$prefix/$datadir/zcpipe/examples/camera.yaml" "$S/config/camera.yaml" || fail "no example camera.yaml"
for m in man8/zcpipe.8 man5/zcpipe.yaml.5; do
        [ -f "$W/dest$mandir/$m" ] || fail "no $mandir/$m"
done
grep -q "^\.TH ZCPIPE 8 .*zcpipe [0-9]" "$W/dest$mandir/man8/zcpipe.8" || fail "zcpipe.8 has no version in .TH"

echo "# edited by the operator" >>"$conf"
cp "$conf" "$W/edited.yaml"
DESTDIR=$W/dest meson install -C "$B" --no-rebuild --quiet >"$W/install2.log" 2>&1 || { cat "$W/install2.log"; fail "meson install (2)"; }
cmp "$conf" "$W/edited.yaml" || fail "the second meson install overwrote the edited $conf"
mv "$conf" "$W/edited-real.yaml" && ln -s "$W/edited-real.yaml" "$conf"
DESTDIR=$W/dest meson install -C "$B" --no-rebuild --quiet >"$W/install3.log" 2>&1 || fail "meson install (3)"
[ -L "$conf" ] || fail "a symlinked camera.yaml was replaced"

# The installed binary and the default weights: DATADIR, not the build tree.
printf 'streams:\n  - source:\n      type: synthetic\n    output:\n      type: none\nmetrics:\n  http:\n    enabled: false\n' >"$W/default-weights.yaml"
bin=$W/dest$prefix/$(opt bindir)/zcpipe
unset ZCP_MODELDIR   # meson test points it at the build tree's models/
want=$prefix/$datadir/zcpipe/centernet/model.json
if [ -e "$want" ]; then
        echo "note: $want exists on this machine; the installed zcpipe must use it"
        "$bin" --check --config "$W/default-weights.yaml" >"$W/check.log" 2>&1 || fail "--check with $want present"
else
        if "$bin" --check --config "$W/default-weights.yaml" >"$W/check.log" 2>&1; then
                fail "the installed zcpipe found default weights without them being installed (the build tree's?)"
        fi
        grep -q "$want" "$W/check.log" || fail "the installed zcpipe did not look for $want:\n$(cat "$W/check.log")"
fi
ZCP_MODELDIR=$W/dest$prefix/$datadir/zcpipe "$bin" --check --config "$W/default-weights.yaml" >"$W/check2.log" 2>&1 ||
        fail "ZCP_MODELDIR=$W/dest$prefix/$datadir/zcpipe: --check failed:\n$(cat "$W/check2.log")"
# The shipped example names the bundled clip relative to itself: installed, it finds the installed
# one, and its model is the default (the installed one; here through ZCP_MODELDIR).
ex=$W/dest$prefix/$datadir/zcpipe/examples/sample.yaml
[ -f "$W/dest$prefix/$datadir/zcpipe/samples/vtest-h264.mp4" ] || fail "the sample clip is not installed"
ZCP_MODELDIR=$W/dest$prefix/$datadir/zcpipe "$bin" --check --config "$ex" >"$W/check3.log" 2>&1 ||
        fail "--check of the installed examples/sample.yaml:\n$(cat "$W/check3.log")"
rm -rf "$W/dest"
echo "meson install: camera.yaml installed once, edits and links kept, man pages in place, default weights from DATADIR, the installed sample checks"
