#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""zcpipe-bench's PNG writer (tools/bench/plot.c) read by another decoder:
test_plot writes its sample plot, and Python's zlib inflates it. Checks the
chunk CRCs (zlib.crc32), the header, the inflated size and each row's filter
byte, and that the plot is a plot (a white background, dark text and axes,
and each series' colour).

    check_png.py TEST_PLOT_BINARY
"""
import os
import struct
import subprocess
import sys
import tempfile
import zlib


def main():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "plot.png")
        subprocess.run([sys.argv[1], path], check=True)
        data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "no PNG signature"
    pos, chunks = 8, []
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert zlib.crc32(typ + body) == crc, f"chunk {typ}: bad CRC"
        chunks.append((typ, body))
        pos += 12 + n
    assert [c[0] for c in chunks] == [b"IHDR", b"IDAT", b"IEND"], [c[0] for c in chunks]
    w, h, depth, ctype, comp, filt, inter = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (w, h, depth, ctype, comp, filt, inter) == (1000, 620, 8, 2, 0, 0, 0), (w, h, depth, ctype)
    raw = zlib.decompress(chunks[1][1])   # checks the Adler-32 too
    row = 1 + 3 * w
    assert len(raw) == row * h, (len(raw), row * h)
    assert all(raw[y * row] == 0 for y in range(h)), "a row with a filter byte other than 0"
    px = {}
    for y in range(h):
        r = raw[y * row + 1:(y + 1) * row]
        for x in range(0, len(r), 3):
            c = r[x:x + 3]
            px[c] = px.get(c, 0) + 1
    white = px.get(b"\xff\xff\xff", 0)
    assert white > w * h // 2, f"only {white} white pixels"
    assert px.get(b"\x00\x00\x00", 0) > 1000, "no black text or axes"
    for c in (bytes([31, 119, 180]), bytes([255, 127, 14])):
        assert px.get(c, 0) > 300, f"series colour {tuple(c)}: {px.get(c, 0)} pixels"
    print(f"plot.png: {len(data)} bytes, {w}x{h}, CRCs and Adler-32 good (zlib), {len(px)} colours")


if __name__ == "__main__":
    main()
