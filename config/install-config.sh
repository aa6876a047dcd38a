#!/bin/sh
# SPDX-License-Identifier: MIT
# meson install: puts the example configuration in place as SYSCONF/camera.yaml only when
# there is none, so that reinstalling never overwrites an operator's edits. Honours DESTDIR.
#
#   install-config.sh EXAMPLE TARGET      (absolute paths, without DESTDIR)
set -eu
example="${DESTDIR:-}$1"
target="${DESTDIR:-}$2"
if [ -e "$target" ] || [ -L "$target" ]; then
        echo "zcpipe: keeping the existing $2 (the example is $1)" >&2
        exit 0
fi
mkdir -p "$(dirname "$target")"
cp "$example" "$target.tmp.$$"
chmod 0644 "$target.tmp.$$"
mv "$target.tmp.$$" "$target"
echo "zcpipe: installed $2 from $1" >&2
