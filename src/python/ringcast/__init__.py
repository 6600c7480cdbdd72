"""ringcast: shared-memory broadcast rings, from Python.

One producer, up to 16 consumers in any processes, 52-byte messages, every
consumer sees every message in order. Batches move between the ring and NumPy
arrays with no Python object per message (Consumer.drain, Ring.push_batch).

    import ringcast
    with ringcast.Ring.open("/dev/shm/ticks.ring") as ring, ring.register_consumer() as me:
        batch = me.drain(4096, dtype=TICK)     # a NumPy structured array

The guide is docs/python.md; the contract is the C++ header
include/ringcast/broadcast_ring.hpp.
"""

from ._ringcast import (
    MAX_CAPACITY,
    MAX_CONSUMERS,
    MAX_PAYLOAD,
    MIN_CAPACITY,
    RAW_DTYPE,
    Consumer,
    Errc,
    IdleStrategy,
    Ring,
    RingError,
    StartAt,
    WakePolicy,
)

__all__ = [
    "MAX_CAPACITY",
    "MAX_CONSUMERS",
    "MAX_PAYLOAD",
    "MIN_CAPACITY",
    "RAW_DTYPE",
    "Consumer",
    "Errc",
    "IdleStrategy",
    "Ring",
    "RingError",
    "StartAt",
    "WakePolicy",
]
