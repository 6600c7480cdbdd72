"""Every call of ringcast.Ring and ringcast.Consumer, in one process."""

import gc
import os

import numpy as np
import pytest

import ringcast
from ringcast import Errc, Ring, RingError, StartAt


def test_create_then_open_see_the_same_ring(ring_path):
    with Ring.create(ring_path, 64, wakeups=True) as producer:
        assert producer.capacity == 64 and producer.max_message == ringcast.max_message_for(64)
        assert producer.is_producer and producer.wakeups and not producer.lossy
        assert producer.name == ring_path
        assert "capacity=64" in repr(producer) and "producer" in repr(producer)
        with Ring.open(ring_path) as other:
            assert other.capacity == 64 and other.wakeups and not other.is_producer
            assert other.max_message == producer.max_message
            c = other.register_consumer()
            assert producer.try_push(b"hello")
            assert c.try_recv() == b"hello"
            assert c.try_recv() is None
            assert producer.producer_position() == 1
        assert os.stat(ring_path).st_mode & 0o777 == 0o600


def test_create_accepts_a_path_object_and_a_mode(tmp_path):
    path = tmp_path / "p.ring"
    with Ring.create(path, 16, mode=0o640) as ring:
        assert ring.name == str(path)
    assert os.stat(path).st_mode & 0o777 == 0o640


def test_messages_arrive_in_order_and_whole_from_any_bytes_like(ring_path):
    ring = Ring.create(ring_path, 16)
    c = ring.register_consumer()
    payloads = [b"", b"a", bytes(range(52)), bytearray(b"xyz"), memoryview(b"0123456789")[2:6],
                np.arange(3, dtype="<u8")]
    for p in payloads:
        assert ring.try_push(p)
    got = [c.try_recv() for _ in payloads]
    assert got == [bytes(p) if not isinstance(p, np.ndarray) else p.tobytes() for p in payloads]
    assert c.try_recv() is None


def test_late_consumer_starts_at_the_current_position(ring_path):
    ring = Ring.create(ring_path, 16)
    early = ring.register_consumer()
    ring.try_push(b"before")
    late = ring.register_consumer()
    ring.try_push(b"after")
    assert early.try_recv() == b"before"
    assert early.try_recv() == b"after"
    assert late.try_recv() == b"after"
    assert late.try_recv() is None


def test_oldest_consumer_gets_the_retained_messages_in_order_then_live_ones(ring_path):
    # One slot per message: the history is exactly the last `capacity`
    # messages (as tests/ring's OldestJoinerTest; on a ring of longer
    # messages, history not yet safe to read is reported as lapped).
    ring = Ring.create(ring_path, 4, max_message=ringcast.MAX_PAYLOAD)
    for i in range(3):
        assert ring.try_push(bytes([i]))
    with ring.register_consumer(StartAt.oldest) as before_wrap:
        assert [before_wrap.try_recv() for _ in range(4)] == [bytes([0]), bytes([1]), bytes([2]), None]
    for i in range(3, 10):
        assert ring.try_push(bytes([i]))
    c = ring.register_consumer(start=StartAt.oldest)
    assert c.lag() == 4
    assert [c.try_recv() for _ in range(4)] == [bytes([i]) for i in range(6, 10)]
    assert ring.try_push(b"live")
    assert c.try_recv() == b"live" and c.try_recv() is None
    assert ring.register_consumer(StartAt.latest).try_recv() is None


def test_lag_position_and_drained_track_the_consumer(ring_path):
    ring = Ring.create(ring_path, 16)
    assert ring.is_fully_drained()
    c = ring.register_consumer()
    for i in range(5):
        ring.try_push(bytes([i]))
    assert ring.producer_position() == 5
    assert c.lag() == 5 and ring.lag(c) == 5 and ring.lag(c.id) == 5
    assert not ring.is_fully_drained()
    c.try_recv()
    assert c.lag() == 4
    c.drain(10)
    assert c.lag() == 0 and ring.is_fully_drained()
    assert ring.lag(15) == 0 and ring.lag(1000) == 0  # inactive / out of range


def test_blocking_ring_reports_full_and_lossy_ring_laps(ring_path):
    ring = Ring.create(ring_path, 4)
    c = ring.register_consumer()
    assert all(ring.try_push(b"x") for _ in range(4))
    assert not ring.try_push(b"x")                       # full: the consumer is 4 behind
    assert not ring.push_wait(b"x", timeout=0.01)        # still full after the wait
    c.try_recv()
    assert ring.push_wait(b"y", timeout=1)

    lossy = Ring.create(ring_path + ".lossy", 4, lossy=True)
    lc = lossy.register_consumer()
    for i in range(10):
        assert lossy.try_push(bytes([i]))
    with pytest.raises(RingError) as e:
        lc.try_recv()
    assert e.value.errc == Errc.lapped and 6 <= e.value.missed < 10
    rest = [lc.try_recv() for _ in range(10 - e.value.missed)]
    assert rest == [bytes([i]) for i in range(e.value.missed, 10)]   # nothing else lost
    assert lc.try_recv() is None


def test_consumer_context_close_and_drop_unregister(ring_path):
    ring = Ring.create(ring_path, 16)
    with ring.register_consumer() as c:
        assert ring.active_consumer_count() == 1
        assert "Consumer 0" in repr(c)
    assert ring.active_consumer_count() == 0 and c.closed
    with pytest.raises(ValueError):
        c.try_recv()
    c.close()  # idempotent

    c2 = ring.register_consumer()
    c2.close()
    assert ring.active_consumer_count() == 0

    c3 = ring.register_consumer()
    assert ring.active_consumer_count() == 1
    del c3
    gc.collect()
    assert ring.active_consumer_count() == 0


def test_ring_context_unregisters_its_consumers_and_releases_the_producer(ring_path):
    observer = Ring.create(ring_path, 16, claim_producer=False)
    with Ring.open(ring_path) as ring:
        c = ring.register_consumer()
        ring.claim_producer()
        assert observer.active_consumer_count() == 1
    assert ring.closed and "closed" in repr(ring)
    assert observer.active_consumer_count() == 0
    observer.claim_producer()       # the role was given up
    assert c.closed
    with pytest.raises(ValueError):
        c.try_recv()
    with pytest.raises(ValueError):
        ring.try_push(b"x")
    ring.close()  # idempotent


def test_a_second_handle_cannot_produce_until_the_first_releases(ring_path):
    first = Ring.create(ring_path, 16)
    second = Ring.open(ring_path)
    with pytest.raises(RingError) as e:
        second.claim_producer()
    assert e.value.errc == Errc.producer_busy
    with pytest.raises(RingError) as e:
        second.try_push(b"x")
    assert e.value.errc == Errc.producer_busy
    first.release_producer()
    assert not first.is_producer
    assert second.try_push(b"x") and second.is_producer


def test_sixteen_consumers_then_no_consumer_slot(ring_path):
    ring = Ring.create(ring_path, 16)
    consumers = [ring.register_consumer() for _ in range(ringcast.MAX_CONSUMERS)]
    assert sorted(c.id for c in consumers) == list(range(16))
    with pytest.raises(RingError) as e:
        ring.register_consumer()
    assert e.value.errc == Errc.no_consumer_slot
    ring.try_push(b"all")
    assert all(c.try_recv() == b"all" for c in consumers)


def test_reap_finds_nothing_to_free_while_owners_live(ring_path):
    ring = Ring.create(ring_path, 16)
    ring.register_consumer()
    assert ring.reap_dead_consumers() == 0


def test_existing_path_needs_replace(ring_path):
    Ring.create(ring_path, 16).close()
    with pytest.raises(RingError) as e:
        Ring.create(ring_path, 16)
    assert e.value.errc == Errc.already_exists
    with Ring.create(ring_path, 32, replace=True) as ring:
        assert ring.capacity == 32


def test_shared_memory_names_and_anonymous_rings():
    name = f"/ringcast-pytest-{os.getpid()}"
    try:
        with Ring.create_shm(name, 8, lossy=True) as ring, Ring.open_shm(name) as other:
            c = other.register_consumer()
            ring.try_push(b"shm")
            assert c.try_recv() == b"shm" and other.lossy
    finally:
        Ring.remove_shm(name)
    with pytest.raises(RingError):
        Ring.open_shm(name)

    anon = Ring.create_anonymous(8)
    c = anon.register_consumer()
    anon.try_push(b"anon")
    assert c.try_recv() == b"anon"


def test_every_idle_strategy_receives_a_ready_message(ring_path):
    ring = Ring.create(ring_path, 16)
    c = ring.register_consumer()
    for idle in ringcast.IdleStrategy.__members__.values():
        ring.try_push(idle.name.encode())
        assert c.recv_wait(timeout=5, idle=idle) == idle.name.encode()
    assert c.recv_wait(timeout=0) is None
    assert ring.push_wait(b"p", timeout=0, idle=ringcast.IdleStrategy.spin)


def test_module_constants_and_docstrings():
    assert ringcast.MAX_PAYLOAD == 52 and ringcast.MAX_CONSUMERS == 16
    assert ringcast.MIN_CAPACITY == 2 and ringcast.MAX_CAPACITY == 2**30
    assert ringcast.DEFAULT_MAX_MESSAGE == 64 * 1024
    assert ringcast.RAW_DTYPE.itemsize == 56
    # docs/layout.md: a message may take at most half the ring; 48 bytes in a
    # record's header slot, 64 in each slot after it.
    assert ringcast.max_message_for(16) == 48 + 7 * 64
    assert ringcast.max_message_for(2) == ringcast.max_message_for(3) == 52
    assert ringcast.max_message_for(2050) >= ringcast.DEFAULT_MAX_MESSAGE > ringcast.max_message_for(2048)
    for obj in (Ring, Ring.create, Ring.open, Ring.try_push, Ring.push_batch, Ring.try_claim, ringcast.Consumer.drain,
                ringcast.Consumer.recv_wait, ringcast.Consumer.try_recv_into, ringcast.Consumer.try_view,
                ringcast.Consumer.view_wait, ringcast.Claim, ringcast.MessageView, ringcast.RingError):
        assert obj.__doc__ and len(obj.__doc__) > 40, obj


def test_type_stubs_list_every_public_name_and_method():
    import ast
    stub_path = os.path.join(os.path.dirname(ringcast.__file__), "__init__.pyi")
    with open(stub_path) as f:
        tree = ast.parse(f.read())
    stub = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            stub[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.AnnAssign):
            stub[node.target.id] = set()
        elif isinstance(node, ast.FunctionDef):
            stub[node.name] = set()
    assert set(ringcast.__all__) <= set(stub)
    # The dunders a stub declares beyond the public names: the context
    # managers', and a buffer exporter's __len__ / __buffer__ (PEP 688).
    dunders = {Ring: {"__enter__", "__exit__"}, ringcast.Consumer: {"__enter__", "__exit__"},
               ringcast.Claim: {"__enter__", "__exit__", "__len__", "__buffer__"},
               ringcast.MessageView: {"__enter__", "__exit__", "__len__", "__buffer__"},
               ringcast.RingStatus: set(), ringcast.ConsumerStatus: set()}
    for cls, extra in dunders.items():
        public = {n for n in dir(cls) if not n.startswith("_")} | extra
        assert public == stub[cls.__name__], cls
