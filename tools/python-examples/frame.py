"""The message both frame examples exchange: a header, then a float32 image of any shape.

    seq: u8, rows: u4, cols: u4, then rows * cols float32 pixels (row-major)

16 bytes plus 4 per pixel: 20 bytes to 16 KiB, one message each.
"""

import numpy as np

HEADER = np.dtype([("seq", "<u8"), ("rows", "<u4"), ("cols", "<u4")])
MAX_SIDE = 64
MAX_MESSAGE = HEADER.itemsize + 4 * MAX_SIDE * MAX_SIDE

DEFAULT_PATH = "/dev/shm/ringcast-frames.ring"


def pixels(seq, rows, cols):
    """The image of frame `seq`: every pixel names its frame and its place."""
    return ((np.arange(rows * cols, dtype=np.uint32) + seq) % 65536).astype("<f4").reshape(rows, cols)


def header_and_image(buffer):
    """NumPy arrays over a frame's bytes (a claim, a view, a bytearray), without a copy."""
    header = np.frombuffer(buffer, HEADER, count=1)[0]
    image = np.frombuffer(buffer, "<f4", offset=HEADER.itemsize).reshape(header["rows"], header["cols"])
    return header, image
