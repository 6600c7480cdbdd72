"""ringcast.WaitSet: one wait over many consumers, from Python.

Members and their guards (a member cannot be closed; a fixed set once fileno()
was called), wait() across C++ producer processes with every message once and
in order, the fd in a selector, and Ctrl-C reaching a wait with no timeout.
"""

import os
import selectors
import signal
import threading
import time

import pytest

from conftest import pattern, read_line
from ringcast import Ring, WaitSet

TIMEOUT = 120  # seconds; a cap on a hung child, never a measurement


def test_members_are_indexed_and_cannot_be_closed_while_in_the_set(tmp_path):
    rings = [Ring.create(str(tmp_path / f"r{i}"), 64) for i in range(3)]
    consumers = [r.register_consumer() for r in rings]
    with WaitSet() as ws:
        assert [ws.add(c) for c in consumers] == [0, 1, 2]
        assert len(ws) == 3
        with pytest.raises(RuntimeError, match="WaitSet"):
            consumers[1].close()
        with pytest.raises(RuntimeError, match="WaitSet"):
            rings[1].close()
        ws.remove(1)
        with pytest.raises(IndexError):
            ws.remove(1)
        consumers[1].close()
        assert ws.wait(timeout=0) == []
        rings[2].try_push(b"x")
        assert ws.ready(2) and not ws.ready(0)
        assert ws.wait(timeout=TIMEOUT) == [2]
    consumers[0].close()  # the closed set let its members go
    for r in rings:
        r.close()


def test_one_wait_receives_every_message_of_8_producer_processes_in_order(tmp_path, helper, children):
    count = 5000
    paths = [str(tmp_path / f"r{i}") for i in range(8)]
    rings = [Ring.create(p, 64, claim_producer=False) for p in paths]
    consumers = [r.register_consumer() for r in rings]
    ws = WaitSet()
    for c in consumers:
        ws.add(c)
    producers = [children.spawn([helper, "produce", p, str(count)]) for p in paths]
    for p in producers:
        assert read_line(p) == "ready"
    following = [0] * len(rings)
    while sum(following) < count * len(rings):
        ready = ws.wait(timeout=TIMEOUT)
        assert ready, f"{following} received"
        for i in ready:
            while (m := consumers[i].try_recv()) is not None:
                assert m == pattern(following[i]), f"ring {i}, message {following[i]}"
                following[i] += 1
    for p in producers:
        assert p.wait(TIMEOUT) == 0, p.stderr.read()
    assert all(c.try_recv() is None for c in consumers)
    ws.close()


def test_fileno_turns_readable_in_a_selector_and_arm_rearms_it(tmp_path):
    rings = [Ring.create(str(tmp_path / f"r{i}"), 64) for i in range(4)]
    consumers = [r.register_consumer() for r in rings]
    with WaitSet() as ws, selectors.DefaultSelector() as sel:
        for c in consumers:
            ws.add(c)
        sel.register(ws.fileno(), selectors.EVENT_READ)
        with pytest.raises(RuntimeError, match="fixed"):
            ws.remove(0)
        assert sel.select(timeout=0.02) == []
        threading.Thread(target=lambda: rings[3].try_push(b"late")).start()
        assert len(sel.select(timeout=TIMEOUT)) == 1
        assert ws.ready(3)
        assert consumers[3].try_recv() == b"late"
        ws.arm()
        assert sel.select(timeout=0.02) == []
        rings[0].try_push(b"a")
        assert len(sel.select(timeout=TIMEOUT)) == 1


def test_ctrl_c_interrupts_a_wait_without_timeout(tmp_path):
    ring = Ring.create(str(tmp_path / "r"), 64)
    with ring.register_consumer() as c, WaitSet() as ws:
        ws.add(c)
        timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            ws.wait()
        assert time.monotonic() - started < TIMEOUT
        ws.remove(0)
