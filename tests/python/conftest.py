"""Shared fixtures for the ringcast Python tests (run by ctest: tests/python/CMakeLists.txt).

ctest sets PYTHONPATH to the build tree's package, RING_TEST_HELPER to the C++
helper of the cross-process tests and RINGCAST_SOURCE_DIR to the checkout.
"""

import ctypes
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import ringcast

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # A child outlives nothing: if the test process dies, the kernel kills it.
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Children:
    """Child processes of one test; every one is killed and reaped at teardown."""

    def __init__(self):
        self._procs = []

    def spawn(self, args, **kwargs):
        """A child running a C++ program (the helper).

        It does not inherit LD_PRELOAD: in sanitizer builds ctest preloads the
        runtime for the uninstrumented interpreter, and a clang-built program,
        which carries its runtime linked in, refuses to start with a second one.
        """
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        return self._start(args, env=env, **kwargs)

    def python(self, args, **kwargs):
        """A child running this interpreter with the build tree's ringcast."""
        return self._start([sys.executable, *args], **kwargs)

    def _start(self, args, **kwargs):
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_die_with_parent, **kwargs)
        self._procs.append(proc)
        return proc

    def close(self):
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.fixture
def children():
    c = Children()
    yield c
    c.close()


@pytest.fixture
def ring_path(tmp_path):
    return str(tmp_path / "test.ring")


@pytest.fixture
def helper():
    path = os.environ.get("RING_TEST_HELPER")
    if not path:
        pytest.fail("RING_TEST_HELPER is not set (run these tests through ctest)")
    return path


@pytest.fixture
def source_dir():
    path = os.environ.get("RINGCAST_SOURCE_DIR")
    if not path:
        pytest.fail("RINGCAST_SOURCE_DIR is not set (run these tests through ctest)")
    return path


def read_line(proc):
    """The child's next stdout line, without the newline ('' at EOF)."""
    return proc.stdout.readline().rstrip("\n")


def pattern(seq):
    """The payload tests/ring/message_pattern.hpp makes for `seq` (52 bytes)."""
    return seq.to_bytes(8, "little") * 6 + (seq & 0xFFFFFFFF).to_bytes(4, "little")


def pattern_batch(first, n):
    """pattern(first) .. pattern(first + n - 1) as n 52-byte records (dtype V52)."""
    seqs = np.arange(first, first + n, dtype="<u8")
    b = np.empty((n, 52), dtype=np.uint8)
    b[:, :48] = np.repeat(seqs, 6).view(np.uint8).reshape(n, 48)
    b[:, 48:] = (seqs & 0xFFFFFFFF).astype("<u4").view(np.uint8).reshape(n, 4)
    return b.view(np.dtype((np.void, 52)))[:, 0]


def check_pattern_batch(batch, first):
    """Asserts a RAW_DTYPE batch holds pattern(first), pattern(first + 1), ... whole."""
    n = len(batch)
    assert (batch["length"] == ringcast.MAX_PAYLOAD).all()
    words = batch["data"][:, :48].copy().view("<u8")          # (n, 6)
    low = batch["data"][:, 48:52].copy().view("<u4")[:, 0]    # (n,)
    expected = np.arange(first, first + n, dtype=np.uint64)
    assert (words == expected[:, None]).all(), "torn or out-of-order message"
    assert (low == (expected & 0xFFFFFFFF).astype(np.uint32)).all()


# Messages of 0 .. 64 KiB (the tests of any size across processes): each one
# names its sequence number in every byte's value, offset by the byte's index.
VARIABLE_SIZES = [0, 1, 52, 53, 700, 4096, 65536, 30000]


def variable_payload(seq):
    size = VARIABLE_SIZES[seq % len(VARIABLE_SIZES)]
    return ((np.arange(size, dtype=np.uint32) + seq) & 0xFF).astype(np.uint8)


def produce_variable(ring, count, timeout=120):
    """Pushes variable_payload(0 .. count-1): even ones through a claim (in place), odd ones by copy."""
    for seq in range(count):
        p = variable_payload(seq)
        if seq % 2:
            assert ring.push_wait(p.tobytes(), timeout=timeout)
            continue
        claim = ring.try_claim(len(p))
        while claim is None:            # full; there is no waiting claim (push_wait waits, but copies)
            time.sleep(0.0001)
            claim = ring.try_claim(len(p))
        with claim:
            np.frombuffer(claim, dtype=np.uint8)[:] = p


def consume_variable(me, count, timeout=120):
    """Receives variable_payload(0 .. count-1) through a view, bytes and a reused buffer in turn."""
    out = np.empty(max(VARIABLE_SIZES), dtype=np.uint8)
    for seq in range(count):
        expected = variable_payload(seq)
        if seq % 3 == 0:
            with me.view_wait(timeout=timeout) as view:
                whole = np.array_equal(np.frombuffer(view, dtype=np.uint8), expected)
        elif seq % 3 == 1:
            whole = me.recv_wait(timeout=timeout) == expected.tobytes()
        else:
            n = me.recv_wait_into(out, timeout=timeout)
            whole = n == len(expected) and np.array_equal(out[:n], expected)
        assert whole, f"message {seq} is not whole"
