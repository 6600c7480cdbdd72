#!/usr/bin/env python3
"""Publish ticks into a ringcast ring from Python, in NumPy batches.

    tools/python-examples/producer.py --count 1000000 --wait-consumers 1 &
    tools/python-examples/consumer.py --count 1000000

Creates the ring (replacing an old file at the path), waits until the wanted
number of consumers registered (so none misses the start), then pushes the
ticks in batches with Ring.push_batch: no Python object per tick. When the ring
is full, push_wait blocks for room (the GIL is released, Ctrl-C works). At the
end it waits until every consumer has read everything, and removes the ring.
Needs the ringcast package on the path (PYTHONPATH=build/release/python after a
build, or `cmake --install`).
"""

import argparse
import os
import sys
import time

import numpy as np

import ringcast
from tick import DEFAULT_PATH, TICK

BATCH = 4096


def make_ticks(first, n):
    t = np.zeros(n, dtype=TICK)
    t["seq"] = np.arange(first, first + n)
    t["ts_ns"] = time.time_ns()
    t["price"] = 100.0 + (t["seq"] % 1000) * 0.01
    t["qty"] = 1 + t["seq"] % 100
    t["side"] = t["seq"] % 2
    t["symbol"] = b"EURUSD"
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", default=DEFAULT_PATH, help="ring file (default %(default)s)")
    ap.add_argument("--capacity", type=int, default=65536, help="slots (default %(default)s)")
    ap.add_argument("--count", type=int, default=1_000_000, help="ticks to publish (default %(default)s)")
    ap.add_argument("--rate", type=float, default=0, help="ticks per second (default: as fast as consumers go)")
    ap.add_argument("--wait-consumers", type=int, default=1, metavar="N",
                    help="wait for N registered consumers before publishing (default %(default)s)")
    args = ap.parse_args()

    with ringcast.Ring.create(args.path, args.capacity, replace=True) as ring:
        print(f"ring ready: {args.path} (capacity {ring.capacity})", flush=True)
        try:
            while ring.active_consumer_count() < args.wait_consumers:
                time.sleep(0.01)
            start = time.monotonic()
            sent = 0
            while sent < args.count:
                batch = make_ticks(sent, min(BATCH, args.count - sent))
                pushed = ring.push_batch(batch)
                while pushed < len(batch):
                    # Full: block until the slowest consumer frees a slot, then batch again.
                    ring.push_wait(batch[pushed].tobytes())
                    pushed += 1 + ring.push_batch(batch[pushed + 1:])
                sent += pushed
                if args.rate:
                    time.sleep(max(0.0, start + sent / args.rate - time.monotonic()))
            elapsed = time.monotonic() - start
            while not ring.is_fully_drained():
                time.sleep(0.01)
            print(f"published {sent} ticks in {elapsed:.2f} s ({sent / elapsed / 1e6:.2f} M/s)", flush=True)
        except KeyboardInterrupt:
            print(f"interrupted at tick {ring.producer_position()}", file=sys.stderr)
            return 130
        finally:
            os.unlink(args.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
