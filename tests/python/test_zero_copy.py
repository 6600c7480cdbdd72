"""Claims and views: ring memory lent to Python and NumPy without a copy, and
the rules that keep a lent buffer from outliving what it points into
(src/python/zero_copy.hpp).
"""

import gc
import os
import threading

import numpy as np
import pytest

import ringcast
from ringcast import Errc, Ring, RingError

FRAME = np.dtype([("seq", "<u8"), ("pixels", "<f4", (32, 32))])    # 4104 bytes: a record of 65 slots


def ring_mappings(path):
    """The address ranges at which this process maps the file `path`."""
    real = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].rstrip("\n") == real:
                low, high = (int(x, 16) for x in fields[0].split("-"))
                yield low, high


def address(buffer):
    """Where a buffer's bytes start (the array made here is gone when this returns)."""
    return np.frombuffer(buffer, dtype=np.uint8).__array_interface__["data"][0]


def in_ring(path, buffer):
    a = address(buffer)
    return any(low <= a and a + len(buffer) <= high for low, high in ring_mappings(path))


def frame(seq):
    f = np.zeros((), dtype=FRAME)
    f["seq"] = seq
    f["pixels"] = np.arange(1024, dtype=np.float32).reshape(32, 32) + seq
    return f


@pytest.fixture
def ring(ring_path):
    with Ring.create(ring_path, 1024) as r:
        yield r


# --- zero copy ----------------------------------------------------------------------


def test_a_numpy_frame_goes_through_claim_and_view_in_the_rings_own_memory(ring, ring_path):
    c = ring.register_consumer()
    sent = frame(7)
    claim = ring.try_claim(FRAME.itemsize)
    with claim:
        assert len(claim) == FRAME.itemsize and in_ring(ring_path, claim)
        written_at = address(claim)
        np.frombuffer(claim, dtype=FRAME)[0] = sent         # the array is gone at the end of the line
    assert claim.closed and len(claim) == 0
    with c.try_view() as view:
        assert view.in_place and len(view) == FRAME.itemsize
        assert address(view) == written_at                  # the very bytes the producer wrote
        got = np.frombuffer(view, dtype=FRAME)
        assert not got.flags.writeable
        assert got[0]["seq"] == 7 and np.array_equal(got[0]["pixels"], sent["pixels"])
        assert np.shares_memory(got, np.frombuffer(view, dtype=np.uint8))
        del got
    assert c.try_view() is None and c.lag() == 0


def mapping_permissions(buffer):
    """The permissions ("r--s", "rw-s") of the mapping a buffer's bytes lie in."""
    a = address(buffer)
    with open("/proc/self/maps") as f:
        for line in f:
            span, perms = line.split()[:2]
            low, high = (int(x, 16) for x in span.split("-"))
            if low <= a < high:
                return perms
    return None


def test_a_reader_with_read_only_slots_views_the_message_in_a_read_only_mapping(ring, ring_path):
    with Ring.open(ring_path, read_only_slots=True) as reader:
        guarded, plain = reader.register_consumer(), ring.register_consumer()
        with ring.try_claim(FRAME.itemsize) as claim:
            np.frombuffer(claim, dtype=FRAME)[0] = frame(3)
        with guarded.try_view() as view, plain.try_view() as other:
            assert view.in_place and other.in_place and bytes(view) == bytes(other)
            assert mapping_permissions(view) == "r--s"      # a write through it would fault
            assert mapping_permissions(other) == "rw-s"
        with pytest.raises(RingError) as e:
            reader.claim_producer()
        assert e.value.errc == Errc.not_producer


def test_a_ring_with_separate_slots_keeps_them_in_a_file_readers_need_only_read(ring_path):
    slots = str(ring_path) + ".slots"
    with Ring.create(ring_path, 1024, mode=0o660, separate_slots=True) as producer:
        assert os.stat(ring_path).st_size == 1280 and os.stat(ring_path).st_mode & 0o777 == 0o660
        assert os.stat(slots).st_mode & 0o777 == 0o640    # only the owner writes the slots
        with Ring.open(ring_path, read_only_slots=True) as reader:
            c = reader.register_consumer()
            with producer.try_claim(FRAME.itemsize) as claim:
                np.frombuffer(claim, dtype=FRAME)[0] = frame(5)
                assert in_ring(slots, claim)
            with c.try_view() as view:
                assert view.in_place and in_ring(slots, view)
                assert mapping_permissions(view) == "r--s"
                assert np.frombuffer(view, dtype=FRAME)[0]["seq"] == 5
    Ring.remove(ring_path)
    assert not os.path.exists(ring_path) and not os.path.exists(slots)


def test_try_recv_and_try_recv_into_copy_once_out_of_the_ring(ring, ring_path):
    c = ring.register_consumer()
    sent = frame(3)
    ring.try_push(sent.tobytes())
    ring.try_push(sent.tobytes())
    assert c.try_recv() == sent.tobytes()
    out = np.zeros(1, dtype=FRAME)
    assert c.try_recv_into(out) == FRAME.itemsize and out[0] == sent
    assert not in_ring(ring_path, out)


def test_a_lossy_ring_and_short_messages_go_through_a_buffer_of_the_handle(ring_path):
    with Ring.create(ring_path, 1024, lossy=True) as lossy:
        c = lossy.register_consumer()
        with lossy.try_claim(1000) as claim:
            assert not in_ring(ring_path, claim)           # copied in by commit
            memoryview(claim)[:] = bytes(range(250)) * 4
        with c.try_view() as view:
            assert not view.in_place and not in_ring(ring_path, view)   # a validated copy
            assert bytes(view) == bytes(range(250)) * 4
    with Ring.create(ring_path, 1024, replace=True) as ring:
        c = ring.register_consumer()
        with ring.try_claim(52) as claim:                   # one slot: written by commit
            assert not in_ring(ring_path, claim)
            memoryview(claim)[:] = b"s" * 52
        with c.try_view() as view:
            assert not view.in_place and bytes(view) == b"s" * 52


# --- claims -------------------------------------------------------------------------


def test_commit_publishes_a_prefix_and_abort_or_an_exception_publishes_nothing(ring):
    c = ring.register_consumer()
    claim = ring.try_claim(1000)
    memoryview(claim)[:5] = b"hello"
    with pytest.raises(ValueError):
        claim.commit(1001)
    claim.commit(5)
    assert c.try_recv() == b"hello"
    with pytest.raises(ValueError):
        claim.commit()                                      # once only
    claim.abort()                                           # a no-op once closed

    ring.try_claim(100).abort()
    with pytest.raises(ZeroDivisionError):
        with ring.try_claim(2000) as claim:
            memoryview(claim)[:4] = b"lost"
            1 / 0
    assert claim.closed
    assert c.try_recv() is None                              # nothing reached the consumer
    with ring.try_claim(0):
        pass
    assert c.try_recv() == b""


def test_a_closed_claim_lends_nothing(ring):
    claim = ring.try_claim(100)
    claim.commit()
    for use in (memoryview, bytes, lambda b: np.frombuffer(b, dtype=np.uint8)):
        with pytest.raises(ValueError):
            use(claim)


def test_an_open_claim_keeps_other_pushes_and_claims_out(ring):
    c = ring.register_consumer()
    claim = ring.try_claim(64)
    for call in (lambda: ring.try_push(b"x"), lambda: ring.push_wait(b"x", timeout=0), lambda: ring.try_claim(8),
                 lambda: ring.push_batch(np.zeros(2, dtype="<u8")), ring.release_producer, ring.claim_producer):
        with pytest.raises(RuntimeError, match="claim is open"):
            call()
    claim.commit()
    assert ring.try_push(b"x") and len(c.try_recv()) == 64 and c.try_recv() == b"x"


def test_try_claim_is_none_when_full_and_a_claim_fits_where_a_push_would(ring_path):
    ring = Ring.create(ring_path, 16)
    c = ring.register_consumer()
    assert ring.try_claim(ring.max_message) is not None     # dropped at once: aborted
    assert ring.try_push(bytes(ring.max_message)) and ring.try_push(bytes(ring.max_message))
    assert ring.try_claim(1) is None
    assert c.try_recv() == bytes(ring.max_message)
    with ring.try_claim(ring.max_message) as claim:
        memoryview(claim)[:] = b"m" * ring.max_message
    assert c.try_recv() == bytes(ring.max_message) and c.try_recv() == b"m" * ring.max_message


def test_claim_wait_times_out_when_full_and_claims_once_a_consumer_makes_room(ring_path):
    ring = Ring.create(ring_path, 16)
    c = ring.register_consumer()
    assert ring.try_push(bytes(ring.max_message)) and ring.try_push(bytes(ring.max_message))
    assert ring.claim_wait(100, timeout=0.02) is None
    reader = threading.Thread(target=lambda: c.recv_wait(timeout=20))
    reader.start()
    claim = ring.claim_wait(100, timeout=20)    # the GIL is released while it waits
    reader.join()
    assert claim is not None
    with claim:
        memoryview(claim)[:] = b"w" * 100
    assert c.try_recv() == bytes(ring.max_message) and c.try_recv() == b"w" * 100
    with pytest.raises(RingError) as e:
        ring.claim_wait(ring.max_message + 1, timeout=0)
    assert e.value.errc == Errc.payload_too_large


def test_commit_and_abort_refuse_while_the_claims_buffer_is_exported(ring):
    c = ring.register_consumer()
    claim = ring.try_claim(800)
    values = np.frombuffer(claim, dtype="<f8")
    values[:] = np.arange(100)
    for end in (claim.commit, claim.abort):
        with pytest.raises(BufferError, match="export"):
            end()
    with pytest.raises(BufferError):
        ring.close()
    assert not claim.closed and c.try_recv() is None
    del values
    claim.commit()
    assert np.array_equal(np.frombuffer(c.try_recv(), dtype="<f8"), np.arange(100))


def test_a_with_block_that_keeps_an_array_of_its_claim_raises_buffer_error_and_keeps_the_claim(ring):
    c = ring.register_consumer()
    with pytest.raises(BufferError):
        with ring.try_claim(16) as claim:
            kept = np.frombuffer(claim, dtype="<u8")
            kept[:] = [1, 2]
    assert not claim.closed
    del kept
    claim.commit()
    assert c.try_recv() == np.array([1, 2], dtype="<u8").tobytes()


def test_an_exception_with_the_buffer_still_exported_leaves_the_claim_until_it_is_collected(ring):
    c = ring.register_consumer()
    with pytest.raises(KeyError):
        with ring.try_claim(16) as claim:
            kept = np.frombuffer(claim, dtype="<u8")
            raise KeyError("the producer's own error")        # not hidden by a BufferError
    assert not claim.closed
    with pytest.raises(RuntimeError):
        ring.try_push(b"x")
    del kept, claim
    gc.collect()
    assert ring.try_push(b"x") and c.try_recv() == b"x"       # the claim was aborted when collected


def test_closing_the_ring_aborts_an_open_claim(ring_path):
    ring = Ring.create(ring_path, 64)
    claim = ring.try_claim(500)
    ring.close()
    assert claim.closed and len(claim) == 0
    with pytest.raises(ValueError):
        memoryview(claim)
    claim.abort()
    with Ring.open(ring_path) as again:
        assert again.status().messages == 0


def test_a_claim_keeps_its_ring_alive(ring_path):
    ring = Ring.create(ring_path, 64)
    c = ring.register_consumer()
    claim = ring.try_claim(100)
    del ring
    gc.collect()
    memoryview(claim)[:] = b"k" * 100
    claim.commit()
    assert c.try_recv() == b"k" * 100


# --- views --------------------------------------------------------------------------


def test_a_view_is_read_only(ring):
    c = ring.register_consumer()
    ring.try_push(bytes(100))
    with c.try_view() as view:
        with pytest.raises(TypeError):
            memoryview(view)[0] = 1
        values = np.frombuffer(view, dtype=np.uint8)
        assert not values.flags.writeable
        with pytest.raises(ValueError):
            values.flags.writeable = True
        del values


def test_release_consumes_and_an_exception_in_the_block_leaves_the_message_unread(ring):
    c = ring.register_consumer()
    ring.try_push(b"v" * 500)
    with pytest.raises(ZeroDivisionError):
        with c.try_view() as view:
            assert bytes(view) == b"v" * 500
            1 / 0
    assert view.closed and c.lag() > 0
    with pytest.raises(ValueError, match="unread"):
        view.release()
    with c.try_view() as again:                              # the same message again
        assert bytes(again) == b"v" * 500
    assert again.closed and c.lag() == 0
    again.release()                                          # a no-op once released
    for use in (memoryview, bytes):
        with pytest.raises(ValueError):
            use(again)


def test_a_receive_before_release_ends_the_view_and_gets_the_same_message(ring):
    c = ring.register_consumer()
    ring.try_push(b"first" * 20)
    ring.try_push(b"second")
    first = c.try_view()
    second = c.try_view()
    assert first.closed and not second.closed
    with pytest.raises(ValueError, match="later receive"):
        first.release()
    assert bytes(second) == b"first" * 20
    assert c.try_recv() == b"first" * 20                      # ends `second` unconsumed, takes the message
    with pytest.raises(ValueError):
        second.release()
    assert c.try_recv() == b"second"


def test_nothing_ends_a_view_while_an_array_of_it_lives(ring):
    c = ring.register_consumer()
    ring.try_push(np.arange(100, dtype="<f8").tobytes())
    ring.try_push(b"next")
    view = c.try_view()
    values = np.frombuffer(view, dtype="<f8")
    for call in (view.release, c.try_recv, c.try_view, lambda: c.recv_wait(timeout=0), c.drain,
                 lambda: c.try_recv_into(bytearray(1000)), lambda: c.view_wait(timeout=0), c.close, ring.close):
        with pytest.raises(BufferError, match="export"):
            call()
    with pytest.raises(BufferError):
        with view:
            pass
    assert np.array_equal(values, np.arange(100)) and not view.closed   # untouched throughout
    del values
    view.release()
    assert c.try_recv() == b"next"


def test_a_slice_or_scalar_of_the_array_keeps_the_view_exported(ring):
    c = ring.register_consumer()
    ring.try_push(frame(5).tobytes())
    with c.try_view() as view:
        record = np.frombuffer(view, dtype=FRAME)[0]         # a numpy.void that points into the view
        pixels = np.frombuffer(view, dtype=FRAME)["pixels"][0, 3:5]
        with pytest.raises(BufferError):
            view.release()
        del record
        with pytest.raises(BufferError):
            view.release()
        kept = pixels.copy()                                 # copy what you keep
        del pixels
    assert np.array_equal(kept, frame(5)["pixels"][3:5])


def test_closing_a_consumer_or_its_ring_ends_an_unexported_view(ring_path):
    ring = Ring.create(ring_path, 64)
    c = ring.register_consumer()
    ring.try_push(b"a" * 100)
    view = c.try_view()
    c.close()
    assert view.closed
    with pytest.raises(ValueError):
        memoryview(view)
    c2 = ring.register_consumer(ringcast.StartAt.oldest)
    view = c2.try_view()
    ring.close()
    assert view.closed
    for call in (view.release, lambda: memoryview(view)):
        with pytest.raises(ValueError):
            call()


def test_a_view_keeps_its_consumer_and_ring_alive(ring_path):
    ring = Ring.create(ring_path, 64)
    c = ring.register_consumer()
    ring.try_push(b"alive" * 30)
    view = c.try_view()
    del c, ring
    gc.collect()
    assert bytes(view) == b"alive" * 30
    view.release()


def test_view_wait_returns_a_view_and_takes_a_zero_byte_message_as_it_ends(ring):
    c = ring.register_consumer()
    assert c.view_wait(timeout=0) is None and c.view_wait(timeout=0.01) is None
    ring.try_push(b"")
    ring.try_push(b"w" * 300)
    empty = c.view_wait(timeout=5)
    assert len(empty) == 0 and bytes(empty) == b""
    with c.view_wait(timeout=5) as view:                     # ends `empty`: it was consumed already
        assert view.in_place and bytes(view) == b"w" * 300
    assert empty.closed
    empty.release()                                          # a no-op: released
    assert c.lag() == 0


def test_a_view_on_a_lossy_ring_reports_a_lap_and_then_the_oldest_message(ring_path):
    ring = Ring.create(ring_path, 64, lossy=True, max_message=500)
    c = ring.register_consumer()
    for seq in range(20):
        ring.try_push(bytes([seq]) * 500)
    with pytest.raises(RingError) as e:
        c.try_view()
    assert e.value.errc == Errc.lapped
    with c.try_view() as view:
        oldest = bytes(view)[0]
    assert 0 < oldest < 20
