#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The shape of the product code (src/ and kernels/), as docs/design.md draws it.

1. Layers: every #include "..." points down, or sideways inside one folder.

       main.c -> daemon/ -> pipeline.c/.h -> stages (capture/ convert/ infer/ output/)
              -> kernels/ (the CUDA kernels' C ABI) -> model/ (model files, plans) -> core/

   A stage folder may not include another stage folder (capture/ including
   convert/ was such an arrow), core/ includes only core/.

2. No circles inside a folder. Sideways arrows are allowed, circles are not:
   the files of one folder must be ordered so that each one only uses the
   ones below it. Two graphs are checked per folder, over its .c and .cu
   files (the "units"; src/ itself, holding main.c and pipeline.c, is one
   folder too):
   - calls: unit A -> unit B when A names a function or object that B
     defines with external linkage. Definitions are found by scanning B's
     text (comments, strings and preprocessor lines removed) for top-level
     declarations that open a body `) {` or an initializer `= ...` or end in
     `;` without a parameter list, and that are not `static` or `extern`;
     a use is any identifier token in A, or in the body of a static inline
     function of a header of the folder that A includes, equal to such a
     name. Taking a pointer is a use (an ops table that names a function of
     the file that uses the table closes a circle too).
   - includes: file X -> file Y (any of .c .h .cu .cuh) when X includes Y
     and both are in the folder.
   A circle in either graph (a strongly connected set of more than one
   file) is printed with one concrete path and the names that make it,
   unless its exact set of files is on ALLOWED_CIRCLES; an entry there that
   matches no circle any more fails too.

3. Rooms of a size you can hold: no product file (.c .h .cu .cuh under src/
   or kernels/) over MAX_LINES lines, except the files on ALLOWED_LONG. An
   entry there that is no longer over the limit fails too, so the list
   only ever shrinks.

Prints every finding and exits 1; 0 when there is none.
"""
import os
import re
import sys

ROOT = os.environ.get("ZCP_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
RANK = {"main": 0, "daemon": 1, "pipeline": 2, "capture": 3, "convert": 3, "infer": 3, "output": 3,
        "kernels": 4, "model": 4.5, "core": 5}
EXTS = (".c", ".h", ".cu", ".cuh")
UNIT_EXTS = (".c", ".cu")
MAX_LINES = 1000
# Files allowed over MAX_LINES while they are rewritten into smaller ones (none now); an entry
# that is no longer too long is itself an error.
ALLOWED_LONG = set()
# Circles in code under a rewrite, by their exact set of files (none now).
ALLOWED_CIRCLES = set()


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


def product_files():
    """Every product file, relative to ROOT, sorted."""
    out = []
    for top in ("src", "kernels"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith(EXTS):
                    out.append(os.path.relpath(os.path.join(dirpath, f), ROOT))
    return sorted(out)


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
        return fh.read()


def includes(text):
    """(line number, target) of every #include "..." in text."""
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if m:
            yield n, m.group(1)


# ---- 1. layers ---------------------------------------------------------------------------

def check_layers(files, bad):
    arrows = 0
    for rel in files:
        src = unit_of(rel)
        if src not in RANK:
            bad.append(f"{rel}: not in any layer (add its folder to check_layers.py and design.md)")
            continue
        for n, inc in includes(read(rel)):
            target = resolve(inc)
            if target is None:
                continue   # generated (zcp_build.h) or test-only
            dst = unit_of(target)
            arrows += 1
            if dst == src:
                continue
            if dst not in RANK or RANK[dst] <= RANK[src]:
                bad.append(f"{rel}:{n}: {src} includes {target} ({dst}): "
                           + ("sideways" if dst in RANK and RANK[dst] == RANK[src] else "up"))
    return arrows


# ---- 2. circles --------------------------------------------------------------------------

TOKEN = re.compile(r"[A-Za-z_]\w*|\S")


LEXEME = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|^[ \t]*#(?:[^\n]*\\\n)*[^\n]*',
                    re.S | re.M)


def strip(text):
    """C text without comments, string and character literals, and preprocessor lines."""
    return LEXEME.sub(lambda m: "\n" * m.group(0).count("\n") or " ", text)


TAGS = ("struct", "union", "enum")


def definitions(tokens):
    """Names a unit defines with external linkage (functions and objects)."""
    names = set()
    decl = []      # the tokens of the top-level declaration being read; "{}" stands for a body read
    depth = 0
    keep = False   # the body being skipped belongs to the declaration (an initializer, a struct type)
    for t in tokens:
        if depth > 0:
            depth += t == "{"
            depth -= t == "}"
            if depth == 0:
                if keep:
                    decl.append("{}")
                else:
                    decl = []
            continue
        if t == "{":
            depth = 1
            keep = "=" in decl or any(x in TAGS for x in decl[-2:])
            if not keep and decl and decl[-1] == ")":
                name = function_name(decl)
                if name and not local(decl):
                    names.add(name)
            elif "=" in decl and not local(decl):
                name = object_name(decl[:decl.index("=")])
                if name:
                    names.add(name)
            continue
        if t == ";":
            if decl and not local(decl) and "typedef" not in decl:
                head = decl[:decl.index("=")] if "=" in decl else decl
                if "(" not in head:
                    name = object_name(head)
                    if name:
                        names.add(name)
            decl = []
            continue
        decl.append(t)
    return names


def local(decl):
    """A declaration that defines nothing another file can name."""
    return "static" in decl or "extern" in decl


def function_name(decl):
    """The name before the parameter list that closes `decl` (which ends with ')')."""
    level = 0
    for k in range(len(decl) - 1, -1, -1):
        level += decl[k] == ")"
        level -= decl[k] == "("
        if level == 0:
            return decl[k - 1] if k > 0 and re.match(r"[A-Za-z_]\w*$", decl[k - 1]) else None
    return None


def object_name(head):
    """The declared name in `type name[...]`: the last identifier outside brackets that is not a tag."""
    level = 0
    for k in range(len(head) - 1, -1, -1):
        t = head[k]
        level += t == "]"
        level -= t == "["
        if level or t == "{}" and k == len(head) - 1:
            continue
        if t == "{}":
            return None
        if re.match(r"[A-Za-z_]\w*$", t) and t not in TAGS and t != "const":
            return None if k > 0 and head[k - 1] in TAGS else t
    return None


def circles(nodes, edges):
    """Strongly connected sets of more than one node (Tarjan), each as a sorted list."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def cycle_path(comp, edges):
    """One closed path through the first node of a strongly connected set."""
    start = comp[0]
    inside = set(comp)
    # Breadth-first from start's successors back to start, inside the set.
    prev = {}
    frontier = [start]
    seen = {start}
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, ())):
                if w not in inside:
                    continue
                if w == start:
                    path = [start]
                    while v != start:
                        path.append(v)
                        v = prev[v]
                    return [start] + list(reversed(path[1:])) + [start]
                if w not in seen:
                    seen.add(w)
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp + [start]


def inline_bodies(tokens):
    """The tokens inside the function bodies a header defines (static inline functions)."""
    out, depth, decl = [], 0, []
    body = False
    for t in tokens:
        if depth:
            depth += t == "{"
            depth -= t == "}"
            if body and depth:
                out.append(t)
            continue
        if t == "{":
            depth, body = 1, bool(decl) and decl[-1] == ")" and "=" not in decl
            decl = []
        elif t == ";":
            decl = []
        else:
            decl.append(t)
    return out


def check_circles(files, bad):
    allowed_seen = set()
    folders = {}
    for rel in files:
        folders.setdefault(os.path.dirname(rel), []).append(rel)
    n_calls = n_incs = 0
    for folder, members in sorted(folders.items()):
        incs = {}
        for x in members:
            for _, inc in includes(read(x)):
                target = resolve(inc)
                if target in members and target != x:
                    incs.setdefault(x, set()).add(target)
                    n_incs += 1
        for comp in circles(members, incs):
            path = cycle_path(comp, incs)
            bad.append(f"{folder}/: a circle of includes: " + " -> ".join(os.path.basename(p) for p in path))

        units = [f for f in members if f.endswith(UNIT_EXTS)]
        tokens = {f: TOKEN.findall(strip(read(f))) for f in members}
        inline = {h: inline_bodies(tokens[h]) for h in members if not h.endswith(UNIT_EXTS)}
        defined = {u: definitions(tokens[u]) for u in units}
        calls = {}
        why = {}
        for a in units:
            # What a unit names: its own text, and the bodies of the inline functions of the
            # folder's headers it includes (directly or through another of them).
            used = set(t for t in tokens[a] if re.match(r"[A-Za-z_]", t))
            seen, todo = set(), [h for h in incs.get(a, ()) if h in inline]
            while todo:
                h = todo.pop()
                if h in seen:
                    continue
                seen.add(h)
                used.update(t for t in inline[h] if re.match(r"[A-Za-z_]", t))
                todo.extend(x for x in incs.get(h, ()) if x in inline)
            for b in units:
                if a == b:
                    continue
                names = sorted((defined[b] - defined[a]) & used)
                if names:
                    calls.setdefault(a, set()).add(b)
                    why[(a, b)] = names
                    n_calls += 1
        for comp in circles(units, calls):
            if frozenset(comp) in ALLOWED_CIRCLES:
                allowed_seen.add(frozenset(comp))
                continue
            path = cycle_path(comp, calls)
            steps = " -> ".join(
                f"{os.path.basename(path[k + 1])} ({', '.join(why[(path[k], path[k + 1])][:3])})"
                for k in range(len(path) - 1))
            bad.append(f"{folder}/: a circle of calls between {', '.join(os.path.basename(c) for c in comp)}: "
                       f"{os.path.basename(path[0])} -> {steps}")
    for gone in ALLOWED_CIRCLES - allowed_seen:
        bad.append(f"{', '.join(sorted(gone))}: on ALLOWED_CIRCLES but no such circle: take it off the list")
    return n_calls, n_incs


# ---- 3. sizes ----------------------------------------------------------------------------

def check_sizes(files, bad):
    for rel in files:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
            n = sum(1 for _ in fh)
        if n > MAX_LINES and rel not in ALLOWED_LONG:
            bad.append(f"{rel}: {n} lines, over {MAX_LINES}: split it by the state its parts own")
        elif n <= MAX_LINES and rel in ALLOWED_LONG:
            bad.append(f"{rel}: {n} lines: take it off ALLOWED_LONG in check_layers.py")
    for rel in sorted(ALLOWED_LONG - set(files)):
        bad.append(f"{rel}: on ALLOWED_LONG but not in the tree: take it off the list")


def main():
    files = product_files()
    bad = []
    arrows = check_layers(files, bad)
    n_calls, n_incs = check_circles(files, bad)
    check_sizes(files, bad)
    for b in bad:
        print(b)
    print(f"check_layers: {len(files)} files, {arrows} include arrows, {n_calls} call and {n_incs} include "
          f"arrows inside folders; {len(bad)} findings")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
