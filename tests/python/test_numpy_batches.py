"""drain / drain_into / push_batch: batches straight between the ring and NumPy."""

import tracemalloc

import numpy as np
import pytest

import ringcast
from ringcast import Errc, Ring, RingError

# A market-data tick as a C++ producer would lay it out: 40 bytes, one message each.
TICK = np.dtype([("seq", "<u8"), ("ts_ns", "<i8"), ("price", "<f8"), ("qty", "<i4"),
                 ("side", "u1"), ("symbol", "S11")])


def ticks(first, n):
    t = np.zeros(n, dtype=TICK)
    t["seq"] = np.arange(first, first + n)
    t["ts_ns"] = t["seq"] * 1000
    t["price"] = 100.0 + t["seq"] * 0.25
    t["qty"] = t["seq"] % 7
    t["side"] = t["seq"] % 2
    t["symbol"] = b"EURUSD"
    return t


@pytest.fixture
def ring(ring_path):
    with Ring.create(ring_path, 1024) as r:
        yield r


def test_records_round_trip_through_push_batch_and_drain(ring):
    c = ring.register_consumer()
    sent = ticks(0, 500)
    assert ring.push_batch(sent) == 500
    got = c.drain(1000, dtype=TICK)
    assert got.dtype == TICK and len(got) == 500
    assert (got == sent).all()
    assert len(c.drain(10, dtype=TICK)) == 0


def test_records_pushed_one_by_one_are_drained_as_records(ring):
    c = ring.register_consumer()
    sent = ticks(7, 3)
    for record in sent:
        assert ring.try_push(record.tobytes())
    assert (c.drain(3, dtype=TICK) == sent).all()


def test_raw_drain_gives_lengths_and_zero_padded_bytes(ring):
    c = ring.register_consumer()
    for p in (b"", b"abc", bytes(range(52))):
        ring.try_push(p)
    raw = c.drain(8)
    assert raw.dtype == ringcast.RAW_DTYPE
    assert list(raw["length"]) == [0, 3, 52]
    assert bytes(raw["data"][1][:3]) == b"abc" and not raw["data"][1][3:].any()
    assert bytes(raw["data"][2]) == bytes(range(52))


def test_raw_push_batch_sends_each_records_length(ring):
    c = ring.register_consumer()
    raw = np.zeros(3, dtype=ringcast.RAW_DTYPE)
    raw["length"] = [1, 0, 52]
    raw["data"][0][0] = 9
    raw["data"][2] = 7
    assert ring.push_batch(raw) == 3
    assert [c.try_recv() for _ in range(3)] == [b"\x09", b"", b"\x07" * 52]


def test_drain_respects_max_and_the_array_size(ring):
    c = ring.register_consumer()
    ring.push_batch(np.arange(100, dtype="<u8"))
    assert list(c.drain(10, dtype="<u8")) == list(range(10))
    out = np.full(25, 12345, dtype="<u8")
    assert c.drain_into(out) == 25 and list(out) == list(range(10, 35))
    out[:] = 12345
    assert c.drain_into(out) == 25
    assert c.drain_into(out[:0]) == 0
    rest = np.zeros(100, dtype="<u8")
    n = c.drain_into(rest)
    assert n == 40 and list(rest[:n]) == list(range(60, 100)) and not rest[n:].any()


def test_push_batch_stops_when_full_and_the_rest_goes_later(ring_path):
    ring = Ring.create(ring_path, 64)
    c = ring.register_consumer()
    data = np.arange(200, dtype="<u4")
    assert ring.push_batch(data) == 64
    received = list(c.drain(1000, dtype="<u4"))
    sent = 64
    while sent < len(data):
        sent += ring.push_batch(data[sent:])
        received += list(c.drain(1000, dtype="<u4"))
    assert received == list(range(200))


def test_a_message_of_another_length_stops_the_batch_before_it(ring):
    c = ring.register_consumer()
    ring.push_batch(np.arange(3, dtype="<u8"))
    ring.try_push(b"short")
    ring.push_batch(np.arange(3, 5, dtype="<u8"))
    assert list(c.drain(10, dtype="<u8")) == [0, 1, 2]       # the records before it
    with pytest.raises(ValueError, match="5 bytes but a record is 8"):
        c.drain(10, dtype="<u8")
    raw = c.drain(1)                                          # read (skip) it raw
    assert raw["length"][0] == 5
    assert list(c.drain(10, dtype="<u8")) == [3, 4]


def test_lapped_drain_raises_then_continues_after_the_gap(ring_path):
    ring = Ring.create(ring_path, 8, lossy=True)
    c = ring.register_consumer()
    assert ring.push_batch(np.arange(20, dtype="<u8")) == 20
    with pytest.raises(RingError) as e:
        c.drain(100, dtype="<u8")
    assert e.value.errc == Errc.lapped
    rest = c.drain(100, dtype="<u8")
    assert list(rest) == list(range(e.value.missed, 20))


def test_push_batch_needs_the_producer_role(ring_path):
    Ring.create(ring_path, 16).close()
    with Ring.open(ring_path, read_only=True) as ro:
        with pytest.raises(RingError) as e:
            ro.push_batch(np.arange(4, dtype="<u8"))
        assert e.value.errc == Errc.not_producer


def test_a_hundred_thousand_records_in_batches_arrive_in_order(ring_path):
    ring = Ring.create(ring_path, 4096)
    c = ring.register_consumer()
    sent_all = ticks(0, 100_000)
    out = np.empty(3000, dtype=TICK)
    sent = received = 0
    while received < len(sent_all):
        sent += ring.push_batch(sent_all[sent:sent + 5000])
        n = c.drain_into(out)
        assert (out[:n] == sent_all[received:received + n]).all()
        received += n
    assert ring.is_fully_drained()


def test_drain_into_makes_no_python_object_per_message(ring_path):
    ring = Ring.create(ring_path, 8192)
    c = ring.register_consumer()
    out = np.empty(8192, dtype="<u8")
    batch = np.arange(8192, dtype="<u8")
    ring.push_batch(batch)
    c.drain_into(out)                      # warm up (first-call caches)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        pushed = ring.push_batch(batch) + ring.push_batch(batch)   # the second finds it full
        received = c.drain_into(out)
        pushed += ring.push_batch(batch)
        received += c.drain_into(out)
        grew = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert pushed == received == 2 * 8192
    # A bytes object per message would be over 30 bytes each (500 KB here).
    assert grew < 16 * 1024, f"{grew} bytes allocated for {received} messages"


def test_drain_max_is_capped_at_the_capacity(ring_path):
    ring = Ring.create(ring_path, 16)
    c = ring.register_consumer()
    ring.push_batch(np.arange(16, dtype="<u8"))
    assert list(c.drain(10**12, dtype="<u8")) == list(range(16))
