"""Messages of any size up to max_message, through every push and receive call.

Positions (producer_position, lag) count 64-byte slots: a message of more than
52 bytes takes several (docs/layout.md, "Records").
"""

import numpy as np
import pytest

import ringcast
from ringcast import Errc, Ring, RingError

SIZES = [0, 1, 52, 53, 100, 1000, 4096, 65536]


def payload(seq, size):
    """`size` bytes that name `seq` and their own offset: a torn or shifted copy shows."""
    return ((np.arange(size, dtype=np.uint32) * 7 + seq) & 0xFF).astype(np.uint8).tobytes()


@pytest.fixture
def ring(ring_path):
    # 4096 slots: room for 64 KiB messages (DEFAULT_MAX_MESSAGE).
    with Ring.create(ring_path, 4096) as r:
        assert r.max_message == ringcast.DEFAULT_MAX_MESSAGE
        yield r


@pytest.mark.parametrize("size", SIZES)
def test_each_size_round_trips_through_try_push_and_try_recv(ring, size):
    c = ring.register_consumer()
    assert ring.try_push(payload(size, size))
    assert c.try_recv() == payload(size, size)
    assert c.try_recv() is None and c.lag() == 0


@pytest.mark.parametrize("size", SIZES)
def test_each_size_round_trips_through_the_waiting_and_into_calls(ring, size):
    c = ring.register_consumer()
    assert ring.push_wait(payload(1, size), timeout=5)
    assert ring.push_wait(payload(2, size), timeout=5)
    assert ring.push_wait(payload(3, size), timeout=5)
    assert c.recv_wait(timeout=5) == payload(1, size)
    out = bytearray(size + 10)
    assert c.try_recv_into(out) == size and out[:size] == payload(2, size)
    arr = np.zeros(size, dtype=np.uint8)
    assert c.recv_wait_into(arr, timeout=5) == size and arr.tobytes() == payload(3, size)
    assert c.recv_wait(timeout=0) is None and c.recv_wait_into(out, timeout=0) is None


def test_mixed_sizes_arrive_in_order_across_many_wraps(ring_path):
    # 64 slots and 1000-byte messages of 17 slots: records padded at block
    # ends and at the ring's end, many laps.
    ring = Ring.create(ring_path, 64, max_message=1000)
    c = ring.register_consumer()
    rng = np.random.default_rng(26)
    sizes = rng.choice([0, 1, 40, 52, 53, 200, 999, 1000], size=3000)
    sent = received = 0
    while received < len(sizes):
        while sent < len(sizes) and ring.try_push(payload(sent, sizes[sent])):
            sent += 1
        while (m := c.try_recv()) is not None:
            assert m == payload(received, sizes[received]), f"message {received}"
            received += 1
    assert ring.is_fully_drained()


def test_positions_count_slots_and_status_counts_messages_and_bytes(ring):
    c = ring.register_consumer()
    for size in (10, 48 + 64, 1000):
        ring.try_push(bytes(size))
    # One inline slot; a header slot holds 48 payload bytes and each slot after it 64.
    slots = 1 + 2 + (1 + -(-(1000 - 48) // 64))
    assert ring.producer_position() == slots and c.lag() == slots
    s = ring.status()
    assert (s.messages, s.payload_bytes, s.producer_seq) == (3, 10 + 112 + 1000, slots)
    assert s.max_message == ring.max_message and s.capacity == 4096
    me = s.consumers[c.id]
    assert me.active and me.owner_alive and me.cursor == 0 and me.lag == slots
    assert not s.consumers[(c.id + 1) % ringcast.MAX_CONSUMERS].active
    assert len(s.consumers) == ringcast.MAX_CONSUMERS
    for _ in range(3):
        c.try_recv()
    assert ring.status().consumers[c.id].lag == 0


def test_a_consumer_learns_how_many_were_lost_just_before_each_message(ring):
    c = ring.register_consumer()
    ring.try_push(b"a")
    assert ring.mark_upstream_loss(5)
    ring.try_push(bytes(300))
    ring.try_push(b"c")
    seen = []
    while (m := c.try_recv()) is not None:
        seen.append((len(m), c.upstream_lost_seen()))
    assert seen == [(1, 0), (300, 5), (1, 5)]
    s = ring.status()
    assert (s.upstream_lost, s.upstream_gaps, s.messages) == (5, 1, 3)


def test_a_record_padded_into_the_rings_short_last_block_arrives_whole(ring_path):
    # Regression: reserve_record padded once, so this record crossed the
    # ring's end. 64 KiB records take 1025 slots: blocks start at 0, 1025,
    # 2050, 3075, and the last one is 1021 slots. A record that does not fit
    # the rest of block 2 is padded to 3075, where it does not fit either.
    ring = Ring.create(ring_path, 4096)
    c = ring.register_consumer()
    for p in (payload(0, 65536), payload(1, 65536), b"x", payload(3, 65536)):
        assert ring.try_push(p)
        assert c.try_recv() == p


def test_a_full_ring_refuses_a_long_message_that_a_short_one_still_fits(ring_path):
    ring = Ring.create(ring_path, 16)               # max_message 496: 8 slots, half the ring
    c = ring.register_consumer()
    assert ring.try_push(bytes(ring.max_message))   # slots 0..7
    assert ring.try_push(bytes(200))                # 4 slots: 8..11
    assert not ring.try_push(bytes(ring.max_message))
    assert not ring.push_wait(bytes(ring.max_message), timeout=0.01)
    assert ring.try_push(b"short")                  # slot 12
    assert len(c.try_recv()) == ring.max_message
    assert ring.push_wait(bytes(ring.max_message), timeout=5)
    assert [c.try_recv() for _ in range(4)] == [bytes(200), b"short", bytes(ring.max_message), None]


def test_a_lossy_ring_laps_long_messages_and_never_returns_a_torn_one(ring_path):
    ring = Ring.create(ring_path, 64, lossy=True, max_message=1000)
    c = ring.register_consumer()
    for seq in range(40):
        assert ring.try_push(payload(seq, 1000))
    with pytest.raises(RingError) as e:
        c.try_recv()
    assert e.value.errc == Errc.lapped and e.value.missed > 0
    rest = []
    while (m := c.try_recv()) is not None:
        rest.append(m)
    first = 40 - len(rest)
    assert rest and rest == [payload(seq, 1000) for seq in range(first, 40)]


def test_records_of_any_size_go_through_push_batch_and_drain(ring):
    frame = np.dtype([("seq", "<u8"), ("pixels", "u1", (40, 40))])    # 1608 bytes a message
    c = ring.register_consumer()
    sent = np.zeros(20, dtype=frame)
    sent["seq"] = np.arange(20)
    sent["pixels"] = (np.arange(20)[:, None, None] + np.arange(1600).reshape(40, 40)) & 0xFF
    assert ring.push_batch(sent) == 20
    got = c.drain(100, dtype=frame)
    assert got.dtype == frame and (got == sent).all()
    # drain's array is at most as many messages of that size as the ring holds.
    assert ring.push_batch(sent) == 20
    assert len(c.drain(10**9, dtype=frame)) == 20


def test_raw_drain_stops_before_a_message_longer_than_52_bytes(ring):
    c = ring.register_consumer()
    ring.try_push(b"a")
    ring.try_push(bytes(53))
    ring.try_push(b"b")
    assert list(c.drain(10)["length"]) == [1]               # the message before it
    with pytest.raises(ValueError, match="53 bytes but RAW_DTYPE holds at most 52"):
        c.drain(10)
    assert c.try_recv() == bytes(53)                        # left unread, and read here
    assert bytes(c.drain(10)["data"][0][:1]) == b"b"


def test_every_create_call_takes_max_message(tmp_path):
    import os
    with Ring.create(str(tmp_path / "r"), 64, max_message=100) as ring:
        assert ring.max_message == 100 and "max_message=100" in repr(ring)
    with Ring.create_anonymous(64, max_message=200) as ring:
        assert ring.max_message == 200
    name = f"/ringcast-pytest-max-{os.getpid()}"
    try:
        with Ring.create_shm(name, 64, max_message=300) as ring, Ring.open_shm(name) as other:
            assert ring.max_message == other.max_message == 300
    finally:
        Ring.remove_shm(name)
    with Ring.create(str(tmp_path / "small"), 64, max_message=1) as ring:
        assert ring.max_message == 52                       # never less than one slot holds
