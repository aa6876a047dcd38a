# SPDX-License-Identifier: MIT
"""Strict JSON for the integration tests: what zcpipe writes must parse anywhere.

Python's json accepts NaN, Infinity and -Infinity and decodes files leniently if asked;
a results consumer in another language will not. Here:

  loads(text)        json.loads that refuses NaN/Infinity, duplicate keys and a top level
                     that is not an object
  read_lines(path)   every line of a JSON-lines file: strict UTF-8, each line ends with '\\n'
                     (no torn last line), each line one strict object
  check_tree(dir)    read_lines() on every *.jsonl under dir (registered at exit by watch())
  watch(dir)         check every *.jsonl under dir when the test script exits, failing it
                     (and keeping zcptest's directories: the exit is os._exit, past atexit)
"""
import atexit
import json
import os
import sys

import zcptest


class StrictJSONError(ValueError):
    pass


def _constant(name):
    raise StrictJSONError(f"non-finite number {name} is not JSON")


def _pairs(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise StrictJSONError(f"duplicate keys in an object: {keys}")
    return dict(pairs)


def loads(text):
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="strict")
    v = json.loads(text, parse_constant=_constant, object_pairs_hook=_pairs)
    if not isinstance(v, dict):
        raise StrictJSONError(f"top level is a {type(v).__name__}, not an object")
    return v


def parse_lines(data, where):
    """Strictly parses bytes holding JSON lines; raises with the file and line number."""
    if data and not data.endswith(b"\n"):
        raise StrictJSONError(f"{where}: the last line is torn (no newline): {data[-80:]!r}")
    out = []
    for no, raw in enumerate(data.split(b"\n")[:-1] if data else [], 1):
        try:
            out.append(loads(raw))
        except (ValueError, UnicodeDecodeError) as e:
            raise StrictJSONError(f"{where}:{no}: not strict JSON ({e}): {raw[:200]!r}") from None
    return out


def read_lines(path):
    with open(path, "rb") as f:
        return parse_lines(f.read(), path)


def check_tree(root):
    """Every *.jsonl under root, strictly; returns the number of lines checked."""
    n = 0
    for d, _, files in os.walk(root):
        for name in files:
            if name.endswith(".jsonl"):
                n += len(read_lines(os.path.join(d, name)))
    return n


def watch(root):
    def at_exit():
        try:
            n = check_tree(root)
        except StrictJSONError as e:
            print("FAIL: output is not strict JSON lines: " + str(e), file=sys.stderr)
            zcptest.kept()
            os._exit(1)   # a SystemExit raised in an exit handler would not change the status
        print(f"strict JSON: {n} output lines under {root} parse", file=sys.stderr)
    atexit.register(at_exit)
