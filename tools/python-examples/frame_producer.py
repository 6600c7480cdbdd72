#!/usr/bin/env python3
"""Publish images of random shapes into a ringcast ring, rendered in place.

    tools/python-examples/frame_producer.py --count 100000 &
    tools/python-examples/frame_consumer.py --count 100000

Each frame is one message of its own size (frame.py). Ring.claim_wait waits
for room, then lends the ring's memory and NumPy renders the image straight
into it: the message is never copied. Waits for
--wait-consumers consumers first, and for all of them to read everything at
the end; removes the ring when done.
"""

import argparse
import os
import sys
import time

import numpy as np

import ringcast
from frame import DEFAULT_PATH, HEADER, MAX_MESSAGE, MAX_SIDE, header_and_image, pixels


def render(buffer, seq, rows, cols):
    """Writes frame `seq` into `buffer` (a claim or a bytearray) through NumPy arrays over it."""
    np.frombuffer(buffer, HEADER, count=1)[0] = (seq, rows, cols)
    _, image = header_and_image(buffer)
    image[:] = pixels(seq, rows, cols)
    # The arrays die as this returns: a claim commits only once nothing made from it lives.


def publish(ring, seq, rows, cols):
    size = HEADER.itemsize + 4 * rows * cols
    with ring.claim_wait(size) as claim:    # committed at the end of the block (aborted on an exception)
        render(claim, seq, rows, cols)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", default=DEFAULT_PATH, help="ring file (default %(default)s)")
    ap.add_argument("--capacity", type=int, default=16384, help="64-byte slots (default %(default)s)")
    ap.add_argument("--count", type=int, default=100_000, help="frames to publish (default %(default)s)")
    ap.add_argument("--wait-consumers", type=int, default=1, metavar="N",
                    help="wait for N registered consumers before publishing (default %(default)s)")
    args = ap.parse_args()

    rng = np.random.default_rng(26)
    with ringcast.Ring.create(args.path, args.capacity, replace=True, max_message=MAX_MESSAGE) as ring:
        print(f"ring ready: {args.path} (capacity {ring.capacity}, max_message {ring.max_message})", flush=True)
        try:
            while ring.active_consumer_count() < args.wait_consumers:
                time.sleep(0.01)
            start = time.monotonic()
            for seq in range(args.count):
                rows, cols = (int(n) for n in rng.integers(1, MAX_SIDE + 1, size=2))
                publish(ring, seq, rows, cols)
            elapsed = time.monotonic() - start
            while not ring.is_fully_drained():
                time.sleep(0.01)
            status = ring.status()
            print(f"published {status.messages} frames, {status.payload_bytes / 1e6:.1f} MB in {elapsed:.2f} s",
                  flush=True)
        except KeyboardInterrupt:
            print(f"interrupted after {ring.status().messages} frames", file=sys.stderr)
            return 130
        finally:
            os.unlink(args.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
