#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layers of src/ (docs/design.md): every #include "..." points down, or
sideways inside one folder.

    main.c -> daemon/ -> pipeline.c/.h -> stages (capture/ convert/ infer/ output/)
           -> kernels/ (the CUDA kernels' C ABI) -> model/ (model files, plans) -> core/

A stage folder may not include another stage folder (capture/ including
convert/ was such an arrow), core/ includes only core/. Prints each arrow
that points up or sideways and exits 1; 0 when there is none.
"""
import os
import re
import sys

ROOT = os.environ.get("ZCP_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
RANK = {"main": 0, "daemon": 1, "pipeline": 2, "capture": 3, "convert": 3, "infer": 3, "output": 3,
        "kernels": 4, "model": 4.5, "core": 5}


def unit_of(rel):
    """The layer unit of a path relative to the source root: 'core', 'pipeline', ..."""
    parts = rel.split("/")
    if parts[0] == "kernels":
        return "kernels"
    if parts[0] != "src":
        return None
    if len(parts) == 2:
        return "main" if parts[1] == "main.c" else "pipeline"
    return parts[1]


def resolve(inc):
    for base in ("src", "kernels", "."):
        if os.path.exists(os.path.join(ROOT, base, inc)):
            return os.path.normpath(os.path.join(base, inc))
    return None


def main():
    bad, arrows = [], 0
    for top in ("src", "kernels"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, ROOT)
                src = unit_of(rel)
                if src not in RANK:
                    bad.append(f"{rel}: not in any layer (add its folder to check_layers.py and design.md)")
                    continue
                with open(path, encoding="utf-8") as fh:
                    for n, line in enumerate(fh, 1):
                        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                        if not m:
                            continue
                        target = resolve(m.group(1))
                        if target is None:
                            continue   # generated (zcp_build.h) or test-only
                        dst = unit_of(target)
                        arrows += 1
                        if dst == src:
                            continue
                        if dst not in RANK or RANK[dst] <= RANK[src]:
                            bad.append(f"{rel}:{n}: {src} includes {target} ({dst}): "
                                       + ("sideways" if dst in RANK and RANK[dst] == RANK[src] else "up"))
    for b in bad:
        print(b)
    print(f"check_layers: {arrows} include arrows, {len(bad)} pointing up or sideways")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
