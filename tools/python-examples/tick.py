"""The message both examples exchange: one market-data tick, 40 bytes (at most 52).

A C++ producer would push the same bytes from

    struct Tick { uint64_t seq; int64_t ts_ns; double price; int32_t qty; uint8_t side; char symbol[11]; };
"""

import numpy as np

TICK = np.dtype([("seq", "<u8"), ("ts_ns", "<i8"), ("price", "<f8"), ("qty", "<i4"),
                 ("side", "u1"), ("symbol", "S11")])
assert TICK.itemsize == 40

DEFAULT_PATH = "/dev/shm/ringcast-ticks.ring"
