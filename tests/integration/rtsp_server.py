#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A real RTSP server for the network source tests (gst-rtsp-server through python3-gi).

Serves FILE (H.264 in MP4, passed through without re-encoding) at rtsp://127.0.0.1:PORT/live,
in real time, from its start for every client; at the end it starts again (loop). Prints
"READY" once it listens. Loopback only.

Usage: rtsp_server.py PORT FILE
"""
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def main():
    port, path = sys.argv[1], sys.argv[2]
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(port)
    factory = GstRtspServer.RTSPMediaFactory()
    # qtdemux needs a seekable file; the sample is decoded to nothing: the H.264 goes out as it is.
    factory.set_launch(f'( filesrc location="{path}" ! qtdemux ! h264parse config-interval=-1 ! '
                       'rtph264pay name=pay0 pt=96 config-interval=-1 )')
    factory.set_shared(False)

    def on_configure(_factory, media):
        pipeline = media.get_element()
        bus = pipeline.get_bus()

        def on_eos(_bus, msg):
            # loop: back to the start, the stream goes on
            if msg.type == Gst.MessageType.EOS:
                pipeline.seek_simple(Gst.Format.TIME, Gst.SeekFlags.FLUSH | Gst.SeekFlags.KEY_UNIT, 0)
        bus.add_signal_watch()
        bus.connect("message", on_eos)

    factory.connect("media-configure", on_configure)
    server.get_mount_points().add_factory("/live", factory)
    if server.attach(None) == 0:
        print("cannot listen", file=sys.stderr)
        sys.exit(1)
    print("READY", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
