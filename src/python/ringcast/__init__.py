"""ringcast: shared-memory broadcast rings, from Python.

One producer, up to 16 consumers in any processes, messages of any size up to
the ring's max_message (64 KiB by default), every consumer sees every message in
order. Batches move between the ring and NumPy arrays with no Python object per
message (Consumer.drain, Ring.push_batch); a Claim (Ring.try_claim) and a
MessageView (Consumer.try_view) lend the ring's own memory to NumPy, so a large
message is written and read without a copy.

    import ringcast
    with ringcast.Ring.open("/dev/shm/ticks.ring") as ring, ring.register_consumer() as me:
        batch = me.drain(4096, dtype=TICK)     # a NumPy structured array

The guide is docs/python.md; the contract is the C++ header
include/ringcast/broadcast_ring.hpp.
"""

from ._ringcast import (
    DEFAULT_MAX_MESSAGE,
    MAX_CAPACITY,
    MAX_CONSUMERS,
    MAX_PAYLOAD,
    MIN_CAPACITY,
    RAW_DTYPE,
    Claim,
    Consumer,
    ConsumerStatus,
    Errc,
    IdleStrategy,
    MessageView,
    Ring,
    RingError,
    RingStatus,
    StartAt,
    WaitSet,
    WakePolicy,
    max_message_for,
)

__all__ = [
    "DEFAULT_MAX_MESSAGE",
    "MAX_CAPACITY",
    "MAX_CONSUMERS",
    "MAX_PAYLOAD",
    "MIN_CAPACITY",
    "RAW_DTYPE",
    "Claim",
    "Consumer",
    "ConsumerStatus",
    "Errc",
    "IdleStrategy",
    "MessageView",
    "Ring",
    "RingError",
    "RingStatus",
    "StartAt",
    "WaitSet",
    "WakePolicy",
    "max_message_for",
]
