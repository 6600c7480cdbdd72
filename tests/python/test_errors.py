"""Bad files and misuse: every failure is a Python exception, RingError carrying the Errc."""

import errno
import os

import numpy as np
import pytest

import ringcast
from ringcast import Errc, Ring, RingError

HEADER_BYTES = 1152  # docs/layout.md: the header before the slots


def open_error(path, **kwargs):
    with pytest.raises(RingError) as e:
        Ring.open(path, **kwargs)
    return e.value


def test_missing_file_is_io_error_with_errno(tmp_path):
    err = open_error(str(tmp_path / "nope.ring"))
    assert err.errc == Errc.io_error and err.errc.name == "io_error"
    assert err.errno == errno.ENOENT
    assert "nope.ring" in str(err) and "io_error" in str(err)


def test_empty_file_is_layout_mismatch(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert open_error(str(path)).errc == Errc.layout_mismatch


def test_not_a_ring_is_layout_mismatch_naming_the_magic(tmp_path):
    path = tmp_path / "text"
    path.write_bytes(b"not a ring" * 1000)
    err = open_error(str(path))
    assert err.errc == Errc.layout_mismatch and "magic" in str(err)


def test_zero_header_is_not_ready(tmp_path):
    path = tmp_path / "zeros"
    path.write_bytes(bytes(HEADER_BYTES + 64 * 16))
    assert open_error(str(path)).errc == Errc.not_ready


def test_truncated_ring_is_layout_mismatch(ring_path):
    Ring.create(ring_path, 1024).close()
    os.truncate(ring_path, os.path.getsize(ring_path) // 2)
    assert open_error(ring_path).errc == Errc.layout_mismatch


def test_capacity_other_than_expected_is_layout_mismatch(ring_path):
    Ring.create(ring_path, 64).close()
    assert open_error(ring_path, expected_capacity=128).errc == Errc.layout_mismatch
    with Ring.open(ring_path, expected_capacity=64) as ring:
        assert ring.capacity == 64


def test_capacity_out_of_range_is_refused(ring_path):
    for capacity in (0, 1, ringcast.MAX_CAPACITY + 1):
        with pytest.raises(RingError) as e:
            Ring.create(ring_path, capacity)
        assert e.value.errc == Errc.layout_mismatch
    with pytest.raises(TypeError):
        Ring.create(ring_path, -1)


def test_read_only_handle_cannot_consume_or_produce(ring_path):
    Ring.create(ring_path, 16).close()
    with Ring.open(ring_path, read_only=True) as ring:
        with pytest.raises(RingError) as e:
            ring.register_consumer()
        assert e.value.errc == Errc.io_error and e.value.errno == errno.EROFS
        with pytest.raises(RingError) as e:
            ring.try_push(b"x")
        assert e.value.errc == Errc.not_producer
        assert ring.producer_position() == 0


def test_oversized_payload_is_payload_too_large(ring_path):
    ring = Ring.create(ring_path, 16)
    c = ring.register_consumer()
    largest = ring.max_message
    assert largest == ringcast.max_message_for(16)
    for push in (ring.try_push, ring.push_wait, ring.try_claim):
        with pytest.raises(RingError) as e:
            push(b"x" * (largest + 1) if push != ring.try_claim else largest + 1)
        assert e.value.errc == Errc.payload_too_large
        assert f"payload_too_large ({largest + 1} bytes, at most {largest})" in str(e.value)
    assert ring.producer_position() == 0
    assert ring.try_push(b"x" * largest)
    assert c.try_recv() == b"x" * largest


def test_a_one_slot_ring_refuses_what_does_not_fit_one_slot(ring_path):
    ring = Ring.create(ring_path, 16, max_message=52)
    assert ring.max_message == 52
    assert ring.try_push(b"x" * 52)
    with pytest.raises(RingError) as e:
        ring.try_push(b"x" * 53)
    assert e.value.errc == Errc.payload_too_large


def test_max_message_larger_than_the_capacity_allows_is_refused(ring_path):
    with pytest.raises(RingError) as e:
        Ring.create(ring_path, 16, max_message=ringcast.max_message_for(16) + 1)
    assert e.value.errc == Errc.payload_too_large
    assert not os.path.exists(ring_path)
    with Ring.create(ring_path, 16, max_message=ringcast.max_message_for(16)) as ring:
        assert ring.max_message == ringcast.max_message_for(16)


def test_a_short_buffer_is_buffer_too_small_with_the_length_needed(ring_path):
    ring = Ring.create(ring_path, 64)
    c = ring.register_consumer()
    ring.try_push(b"y" * 100)
    ring.try_push(b"z" * 10)
    for call in (c.try_recv_into, lambda b: c.recv_wait_into(b, timeout=1)):
        for short in (bytearray(99), bytearray(10), np.zeros(3, dtype="<u8")):
            with pytest.raises(RingError) as e:
                call(short)
            assert e.value.errc == Errc.buffer_too_small and e.value.needed == 100
            assert "100 bytes" in str(e.value)
    assert c.lag() > 0                                         # nothing was consumed
    out = bytearray(100)
    assert c.try_recv_into(out) == 100 and out == b"y" * 100
    assert c.try_recv_into(out) == 10 and out[:10] == b"z" * 10


def test_read_only_and_non_contiguous_buffers_cannot_receive(ring_path):
    ring = Ring.create(ring_path, 16)
    c = ring.register_consumer()
    ring.try_push(b"kept")
    readonly = np.zeros(8, dtype=np.uint8)
    readonly.flags.writeable = False
    for bad in (b"immutable bytes", readonly, memoryview(bytearray(8)).toreadonly()):
        with pytest.raises((BufferError, ValueError)):
            c.try_recv_into(bad)
    with pytest.raises((BufferError, ValueError)):
        c.try_recv_into(np.zeros(16, dtype=np.uint8)[::2])
    with pytest.raises(TypeError):
        c.try_recv_into("text")
    assert c.try_recv() == b"kept"


def test_non_contiguous_buffer_and_non_buffer_are_refused(ring_path):
    ring = Ring.create(ring_path, 16)
    with pytest.raises((BufferError, ValueError)):   # NumPy says ValueError
        ring.try_push(np.arange(8, dtype=np.uint8)[::2])
    with pytest.raises(TypeError):
        ring.try_push("text is not bytes")


def test_bad_timeouts_are_value_errors(ring_path):
    ring = Ring.create(ring_path, 16)
    c = ring.register_consumer()
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError):
            c.recv_wait(timeout=bad)
        with pytest.raises(ValueError):
            ring.push_wait(b"x", timeout=bad)


def test_bad_batch_arrays_are_refused_before_touching_the_ring(ring_path):
    ring = Ring.create(ring_path, 16)
    c = ring.register_consumer()
    ring.try_push(b"12345678")
    with pytest.raises(ValueError):
        c.drain(4, dtype=np.dtype((np.void, ring.max_message + 1)))   # a record longer than a message
    with pytest.raises(TypeError):
        c.drain(4, dtype=np.dtype([("a", "O")]))             # Python objects in a record
    with pytest.raises(TypeError):
        c.drain_into([0] * 4)                                # not an array
    with pytest.raises(ValueError):
        c.drain_into(np.zeros((2, 2), dtype="<u8"))          # not 1-D
    with pytest.raises(ValueError):
        c.drain_into(np.zeros(8, dtype="<u8")[::2])          # not contiguous
    readonly = np.zeros(4, dtype="<u8")
    readonly.flags.writeable = False
    with pytest.raises(ValueError):
        c.drain_into(readonly)
    with pytest.raises(TypeError):
        ring.push_batch(b"not an array")
    raw = np.zeros(2, dtype=ringcast.RAW_DTYPE)
    raw["length"] = [4, 53]
    with pytest.raises(ValueError):
        ring.push_batch(raw)
    assert ring.producer_position() == 1                      # nothing was pushed
    assert c.try_recv() == b"12345678"                        # nothing was consumed


def test_ring_error_is_an_exception_with_class_defaults():
    assert issubclass(RingError, Exception)
    assert RingError.__module__ == "ringcast"
    e = RingError("made by hand")
    assert e.errno == 0 and e.missed == 0 and e.needed == 0
