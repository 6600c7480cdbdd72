#!/usr/bin/env python3
# A second client of the broker while a publisher is held: one RESP connection
# sending PING every 100 ms (from the previous send) and timing each +PONG.
# Writes one latency in ms per line to OUT until STOP_FILE exists.
#   ping_probe.py PORT OUT STOP_FILE
import os
import socket
import sys
import time

port, out, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.settimeout(30)
with open(out, "w", buffering=1) as f:
    while not os.path.exists(stop):
        t0 = time.monotonic()
        s.sendall(b"PING\r\n")
        buf = b""
        try:
            while not buf.endswith(b"\r\n"):
                chunk = s.recv(64)
                if not chunk:
                    raise OSError("closed")
                buf += chunk
        except OSError as e:  # a timeout past 30 s, or the broker gone
            f.write(f"error {e}\n")
            break
        dt = (time.monotonic() - t0) * 1000
        f.write(f"{dt:.2f}\n")
        time.sleep(max(0.0, 0.1 - (time.monotonic() - t0)))
