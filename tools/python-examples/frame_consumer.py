#!/usr/bin/env python3
"""Read images of any shape from a ringcast ring, in place.

    tools/python-examples/frame_consumer.py [--path /dev/shm/ringcast-frames.ring] [--count N]

view_wait sleeps until a frame arrives (the GIL is released, Ctrl-C works) and
returns a MessageView: the frame's bytes in the ring itself, which NumPy reads
without a copy. Leaving the with block releases the view, which lets the
producer reuse those bytes, so every array made from it must be gone by then
(check() returns plain numbers). Checks each frame's sequence and pixels and
stops after --count frames or on Ctrl-C.
"""

import argparse
import sys

import numpy as np

from consumer import open_when_created
from frame import DEFAULT_PATH, header_and_image, pixels


def check(view):
    """The frame's sequence number, and whether its pixels are the ones it should have."""
    header, image = header_and_image(view)
    seq = int(header["seq"])
    return seq, np.array_equal(image, pixels(seq, *image.shape))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", default=DEFAULT_PATH, help="ring file (default %(default)s)")
    ap.add_argument("--count", type=int, default=0, help="stop after this many frames (default: never)")
    ap.add_argument("--open-timeout", type=float, default=10, help="seconds to wait for the ring (default %(default)s)")
    args = ap.parse_args()

    received = in_place = 0
    with open_when_created(args.path, args.open_timeout) as ring, ring.register_consumer() as me:
        print(f"consumer {me.id} on {args.path} (max_message {ring.max_message})", flush=True)
        try:
            while not args.count or received < args.count:
                view = me.view_wait(timeout=1.0)
                if view is None:
                    continue
                with view:
                    seq, whole = check(view)
                    in_place += view.in_place
                if seq != received or not whole:
                    print(f"frame {received}: got frame {seq}, {'whole' if whole else 'damaged'}", file=sys.stderr)
                    return 1
                received += 1
        except KeyboardInterrupt:
            pass
    print(f"received {received} frames, in order ({in_place} read in place)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
