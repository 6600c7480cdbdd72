#!/usr/bin/env python3
"""Read ticks from a ringcast ring into NumPy, in batches.

    tools/python-examples/consumer.py [--path /dev/shm/ringcast-ticks.ring] [--count N]

Opens the ring (waiting for its producer to create it), registers a consumer,
and loops: recv_wait sleeps until a tick arrives (the GIL is released, Ctrl-C
works), then drain_into takes everything else that is ready into one
preallocated structured array. It checks the sequence numbers, prints the rate
and lag once a second, and stops after --count ticks or on Ctrl-C. The with
blocks unregister the consumer however it ends.
"""

import argparse
import sys
import time

import numpy as np

import ringcast
from tick import DEFAULT_PATH, TICK


def open_when_created(path, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return ringcast.Ring.open(path)
        except ringcast.RingError as e:
            # io_error: no file yet; not_ready: the producer is still creating it.
            if e.errc not in (ringcast.Errc.io_error, ringcast.Errc.not_ready) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", default=DEFAULT_PATH, help="ring file (default %(default)s)")
    ap.add_argument("--count", type=int, default=0, help="stop after this many ticks (default: never)")
    ap.add_argument("--open-timeout", type=float, default=10, help="seconds to wait for the ring (default %(default)s)")
    args = ap.parse_args()

    batch = np.empty(8192, dtype=TICK)
    received = 0
    expected_seq = None
    with open_when_created(args.path, args.open_timeout) as ring, ring.register_consumer() as me:
        print(f"consumer {me.id} on {args.path}", flush=True)
        start = last_report = time.monotonic()
        try:
            while not args.count or received < args.count:
                first = me.recv_wait(timeout=1.0)
                if first is None:
                    continue
                batch[0] = np.frombuffer(first, dtype=TICK)[0]
                n = 1 + me.drain_into(batch[1:])
                ticks = batch[:n]
                if expected_seq is None:
                    expected_seq = int(ticks["seq"][0])
                if not (ticks["seq"] == np.arange(expected_seq, expected_seq + n)).all():
                    print(f"out of order after tick {expected_seq}", file=sys.stderr)
                    return 1
                expected_seq += n
                received += n
                now = time.monotonic()
                if now - last_report >= 1.0:
                    print(f"{received:>12} ticks  {received / (now - start) / 1e6:6.2f} M/s  lag {me.lag():>6}  "
                          f"last {ticks['symbol'][-1].decode()} {ticks['price'][-1]:.2f}", flush=True)
                    last_report = now
        except KeyboardInterrupt:
            pass
    print(f"received {received} ticks, in order", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
