"""recv_wait / push_wait release the GIL while they wait, and Ctrl-C interrupts them.

No test sleeps to synchronise: a thread that waits sets Consumer.waiting /
Ring.producer_waiting before it releases the GIL, and the main thread can see
that flag only because the GIL was released.
"""

import os
import signal
import threading
import time

import pytest

from ringcast import MAX_CONSUMERS, IdleStrategy, Ring, WakePolicy

LONG = 60.0  # a wait no passing test reaches


def until(predicate):
    """Spins in Python (which needs the GIL) until predicate() holds; fails after LONG."""
    deadline = time.monotonic() + LONG
    while not predicate():
        assert time.monotonic() < deadline, "condition never held"


class Waiter(threading.Thread):
    def __init__(self, call):
        super().__init__(daemon=True)
        self.call, self.result, self.error = call, None, None

    def run(self):
        try:
            self.result = self.call()
        except BaseException as e:  # noqa: B036 - reported to the test thread
            self.error = e


@pytest.fixture(params=[False, True], ids=["polling", "wakeups"])
def ring(request, ring_path):
    with Ring.create(ring_path, 4, wakeups=request.param) as r:
        yield r


def test_recv_wait_lets_other_threads_run_and_returns_their_message(ring):
    c = ring.register_consumer()
    waiter = Waiter(lambda: c.recv_wait(timeout=LONG))
    waiter.start()
    until(lambda: c.waiting)               # reachable only with the GIL released
    assert ring.try_push(b"from the main thread")
    waiter.join(LONG)
    assert waiter.error is None and waiter.result == b"from the main thread"
    assert not c.waiting


def take_view(view):
    with view:
        return bytes(view)


def into(c, out):
    n = c.recv_wait_into(out, timeout=LONG)
    return bytes(out[:n])


@pytest.mark.parametrize("receive", [
    lambda c: c.recv_wait(timeout=LONG),
    lambda c: into(c, bytearray(200)),
    lambda c: take_view(c.view_wait(timeout=LONG)),
], ids=["recv_wait", "recv_wait_into", "view_wait"])
@pytest.mark.parametrize("size", [5, 100])
def test_every_wait_lets_other_threads_run_and_takes_a_message_of_any_size(ring_path, receive, size):
    with Ring.create(ring_path, 16) as ring:
        c = ring.register_consumer()
        waiter = Waiter(lambda: receive(c))
        waiter.start()
        until(lambda: c.waiting)           # reachable only with the GIL released
        assert ring.try_push(b"m" * size)
        waiter.join(LONG)
        assert waiter.error is None and waiter.result == b"m" * size
        assert not c.waiting and c.lag() == 0


def blocked_pusher(ring, payload):
    """A consumer of `ring`, and a thread blocked in push_wait(payload) because it is full."""
    c = ring.register_consumer()
    while ring.try_push(b"fill"):
        pass
    waiter = Waiter(lambda: ring.push_wait(payload, timeout=LONG))
    waiter.start()
    until(lambda: ring.producer_waiting)   # reachable only with the GIL released
    return c, waiter


def test_push_wait_lets_other_threads_run_and_completes_when_they_drain(ring):
    c, waiter = blocked_pusher(ring, b"last")
    assert len(c.drain(100)) == 4
    waiter.join(LONG)
    assert waiter.error is None and waiter.result is True
    assert c.try_recv() == b"last"


def test_a_waiting_consumer_and_ring_refuse_what_would_race(ring):
    c = ring.register_consumer()
    waiter = Waiter(lambda: c.recv_wait(timeout=LONG))
    waiter.start()
    until(lambda: c.waiting)
    for call in (c.try_recv, c.drain, c.close, ring.close, lambda: c.recv_wait(timeout=0), c.try_view,
                 lambda: c.view_wait(timeout=0), lambda: c.try_recv_into(bytearray(64))):
        with pytest.raises(RuntimeError):
            call()
    other = ring.register_consumer()       # other ids stay usable
    ring.try_push(b"wake")
    waiter.join(LONG)
    assert waiter.result == b"wake" and other.try_recv() == b"wake"
    c.close()


def test_a_thread_in_push_wait_keeps_other_pushes_out(ring):
    c, waiter = blocked_pusher(ring, b"x")
    for call in (lambda: ring.try_push(b"y"), ring.release_producer, lambda: ring.set_wake_policy(WakePolicy.chain),
                 ring.close, lambda: ring.try_claim(8)):
        with pytest.raises(RuntimeError):
            call()
    c.drain(100)
    waiter.join(LONG)
    assert waiter.result is True and c.try_recv() == b"x"


@pytest.mark.parametrize("policy", list(WakePolicy.__members__.values()), ids=lambda p: p.name)
def test_one_push_wakes_every_sleeping_consumer_under_each_wake_policy(ring_path, policy):
    # More sleepers than CPUs: under chain (and auto when busy) the producer
    # wakes only some of them and they pass the wake-up on.
    with Ring.create(ring_path, 16, wakeups=True) as ring:
        ring.set_wake_policy(policy)
        sleepers = min(MAX_CONSUMERS, max(4, 2 * (os.cpu_count() or 1)))
        consumers = [ring.register_consumer() for _ in range(sleepers)]
        waiters = [Waiter(lambda c=c: c.recv_wait(timeout=LONG, idle=IdleStrategy.block)) for c in consumers]
        for w in waiters:
            w.start()
        until(lambda: all(c.waiting for c in consumers))
        assert ring.try_push(b"one")
        for w in waiters:
            w.join(LONG)
        assert [(w.error, w.result) for w in waiters] == [(None, b"one")] * len(waiters)
        assert ring.late_wakeups == 0  # none was left to its capped sleep


def test_ctrl_c_interrupts_recv_wait_without_a_timeout(ring):
    c = ring.register_consumer()

    def interrupt():
        until(lambda: c.waiting)
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=interrupt, daemon=True)
    t.start()
    with pytest.raises(KeyboardInterrupt):
        c.recv_wait()
    t.join()
    assert not c.waiting
    ring.try_push(b"still usable")
    assert c.recv_wait(timeout=LONG) == b"still usable"


def test_ctrl_c_interrupts_push_wait(ring):
    c = ring.register_consumer()  # noqa: F841 - keeps the ring full
    while ring.try_push(b"fill"):
        pass

    def interrupt():
        until(lambda: ring.producer_waiting)
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=interrupt, daemon=True)
    t.start()
    with pytest.raises(KeyboardInterrupt):
        ring.push_wait(b"never")
    t.join()
    assert not ring.producer_waiting


def test_timeouts_return_none_and_false(ring):
    c = ring.register_consumer()
    assert c.recv_wait(timeout=0) is None
    assert c.recv_wait(timeout=0.01) is None
    while ring.try_push(b"fill"):
        pass
    assert ring.push_wait(b"x", timeout=0.01) is False



# Runs in a new interpreter, whose main thread first drops any custom slice
# it inherited (a thread inherits its creator's, and this process's threads
# may have slept in a wait already): sched_setattr(2) with sched_runtime 0.
SLICE_PROBE = """
import ctypes, platform, sys
from ringcast import IdleStrategy, Ring

SYS_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}.get(platform.machine())
if SYS_SCHED_SETATTR is None:
    print(-1, -1)
    raise SystemExit(0)

class SchedAttr(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("policy", ctypes.c_uint32), ("flags", ctypes.c_uint64),
                ("nice", ctypes.c_int32), ("priority", ctypes.c_uint32), ("runtime", ctypes.c_uint64),
                ("deadline", ctypes.c_uint64), ("period", ctypes.c_uint64), ("util_min", ctypes.c_uint32),
                ("util_max", ctypes.c_uint32)]

def own_slice_ns():
    try:
        with open("/proc/thread-self/sched") as f:
            for line in f:
                if line.startswith("se.slice"):
                    return int(line.split(":")[1])
    except OSError:
        pass
    return -1

attr = SchedAttr(size=ctypes.sizeof(SchedAttr))  # SCHED_OTHER, nice 0, the kernel's default slice
ctypes.CDLL(None, use_errno=True).syscall(SYS_SCHED_SETATTR, 0, ctypes.byref(attr), 0)
with Ring.create(sys.argv[1], 8) as ring:
    assert ring.waiter_slice == 100  # microseconds, the default
    try:
        ring.waiter_slice = -1
        raise SystemExit("a negative waiter_slice was accepted")
    except ValueError:
        pass
    ring.waiter_slice = 300
    c = ring.register_consumer()
    before = own_slice_ns()
    assert c.recv_wait(timeout=0.01, idle=IdleStrategy.block) is None
    print(before, own_slice_ns())
"""


def test_a_thread_that_sleeps_in_recv_wait_gets_the_handles_waiter_slice(ring_path, children):
    proc = children.python(["-c", SLICE_PROBE, ring_path])
    out, err = proc.communicate(timeout=LONG)
    assert proc.returncode == 0, err
    before, after = map(int, out.split())
    if before <= 300_000:
        pytest.skip("this kernel shows no slice longer than 300 us for a new thread (Linux >= 6.12 does)")
    assert after == 300_000
