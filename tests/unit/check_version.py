#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`zcpipe --version` names every optional feature of the build, built in or not: each meson
`feature` option of meson_options.txt as "NAME yes" or "NAME no", and the live page's snapshots
(http with libturbojpeg). Packagers read it to see what a build left out (issue 39: a package
built without MQTT did not say so).

Usage: check_version.py   (env ZCPIPE, ZCP_SOURCE_ROOT)
"""
import os
import re
import subprocess
import sys

root = os.environ.get("ZCP_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
with open(os.path.join(root, "meson_options.txt")) as f:
    features = re.findall(r"option\('([\w-]+)',\s*type:\s*'feature'", f.read())
out = subprocess.run([os.environ["ZCPIPE"], "--version"], capture_output=True, text=True, check=True).stdout
missing = [n for n in features + ["snapshots"] if not re.search(rf"\b{re.escape(n)} (yes|no)\b", out)]
if len(features) < 5 or missing:
    print(f"FAIL: zcpipe --version does not say whether it has {missing} (features {features}): {out.strip()}")
    sys.exit(1)
print(f"zcpipe --version names every feature: {out.strip()}")
