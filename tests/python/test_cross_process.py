"""Python and C++ on one ring across processes (tests/ring/ring_test_helper is the C++ side),
and Python processes exchanging messages of any size.

Every message carries tests/ring/message_pattern.hpp's pattern (or, for the
variable sizes, conftest.variable_payload's), so each one is checked whole and
in order.
"""

import os
import signal
import textwrap

import numpy as np

import ringcast
from conftest import check_pattern_batch, consume_variable, pattern, pattern_batch, produce_variable, read_line
from ringcast import Ring

TIMEOUT = 120  # seconds; a cap on a hung child, never a measurement


def test_cpp_producer_to_python_drain_checks_every_message(ring_path, helper, children):
    count = 300_000
    ring = Ring.create(ring_path, 4096, claim_producer=False)
    c = ring.register_consumer()
    producer = children.spawn([helper, "produce", ring_path, str(count)])
    assert read_line(producer) == "ready"
    out = np.empty(4096, dtype=ringcast.RAW_DTYPE)
    received = 0
    while received < count:
        first = c.recv_wait(timeout=TIMEOUT)        # sleep until something arrives...
        assert first == pattern(received), f"message {received}"
        received += 1
        n = c.drain_into(out)                       # ...then take the rest in one batch
        check_pattern_batch(out[:n], received)
        received += n
    assert producer.wait(TIMEOUT) == 0, producer.stderr.read()
    assert c.try_recv() is None and ring.is_fully_drained()


def test_cpp_producer_to_python_try_recv_checks_every_message(ring_path, helper, children):
    count = 50_000
    ring = Ring.create(ring_path, 1024, claim_producer=False, wakeups=True)
    c = ring.register_consumer()
    producer = children.spawn([helper, "produce", ring_path, str(count)])
    assert read_line(producer) == "ready"
    for seq in range(count):
        m = c.try_recv()
        if m is None:
            m = c.recv_wait(timeout=TIMEOUT)
        assert m == pattern(seq), f"message {seq}"
    assert producer.wait(TIMEOUT) == 0, producer.stderr.read()


def test_python_push_batch_to_cpp_consumers(ring_path, helper, children):
    count = 200_000
    ring = Ring.create(ring_path, 2048)
    consumers = [children.spawn([helper, "consume", ring_path, str(count)]) for _ in range(2)]
    for proc in consumers:
        assert read_line(proc) == "ready"
    sent = 0
    while sent < count:
        batch = pattern_batch(sent, 1000)
        pushed = 0
        while pushed < len(batch):
            pushed += ring.push_batch(batch[pushed:])
        sent += pushed
    for proc in consumers:
        assert proc.wait(TIMEOUT) == 0, proc.stderr.read()


def test_reap_frees_the_entry_of_a_killed_consumer_process(ring_path, helper, children):
    ring = Ring.create(ring_path, 16)
    holder = children.spawn([helper, "hold", ring_path])
    assert read_line(holder) == "ready"
    assert ring.active_consumer_count() == 1
    assert ring.reap_dead_consumers() == 0          # alive: never freed
    holder.kill()
    holder.wait(TIMEOUT)
    assert ring.reap_dead_consumers() == 1
    assert ring.active_consumer_count() == 0


def test_sigint_interrupts_a_consumer_process_blocked_in_recv_wait(ring_path, children):
    ring = Ring.create(ring_path, 16)
    script = textwrap.dedent(f"""
        import threading, time, ringcast
        ring = ringcast.Ring.open({ring_path!r})
        with ring.register_consumer() as me:
            def announce():
                while not me.waiting:
                    time.sleep(0.001)
                print("waiting", flush=True)
            threading.Thread(target=announce, daemon=True).start()
            try:
                me.recv_wait()
            except KeyboardInterrupt:
                print("interrupted", flush=True)
    """)
    child = children.python(["-c", script])
    assert read_line(child) == "waiting"
    assert ring.active_consumer_count() == 1
    child.send_signal(signal.SIGINT)
    assert read_line(child) == "interrupted"
    assert child.wait(TIMEOUT) == 0, child.stderr.read()
    assert ring.active_consumer_count() == 0        # the with block unregistered it


def test_a_forked_child_cannot_use_or_tear_down_the_parents_handles(ring_path):
    import gc

    ring = Ring.create(ring_path, 16)
    c = ring.register_consumer()
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status, never return into pytest
        status = 1
        try:
            for call in (lambda: ring.try_push(b"x"), c.try_recv, ring.register_consumer, lambda: ring.try_claim(8),
                         c.try_view):
                try:
                    call()
                    raise AssertionError("a call on an inherited handle worked")
                except RuntimeError:
                    pass
            assert "parent of a fork" in repr(ring)
            c.close()
            ring.close()
            gc.collect()
            with Ring.open(ring_path) as own:       # its own handle works
                assert own.active_consumer_count() == 1
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert ring.active_consumer_count() == 1        # the parent's consumer is still registered
    assert ring.try_push(b"after the fork") and ring.is_producer
    assert c.try_recv() == b"after the fork"



def peer(body):
    """A child script that can import this directory's conftest."""
    return f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r})\n" + textwrap.dedent(body)


def test_python_claims_to_a_consumer_process_messages_of_any_size(ring_path, children):
    count = 2000
    ring = Ring.create(ring_path, 4096)
    consumer = children.python(["-c", peer(f"""
        import ringcast
        from conftest import consume_variable
        with ringcast.Ring.open({ring_path!r}) as ring, ring.register_consumer() as me:
            print("ready", flush=True)
            consume_variable(me, {count})
        print("done", flush=True)
    """)])
    assert read_line(consumer) == "ready", consumer.stderr.read()
    produce_variable(ring, count)
    assert read_line(consumer) == "done", consumer.stderr.read()
    assert consumer.wait(TIMEOUT) == 0
    assert ring.status().messages == count


def test_a_producer_process_to_python_views_messages_of_any_size(ring_path, children):
    count = 2000
    ring = Ring.create(ring_path, 4096, claim_producer=False)
    me = ring.register_consumer()
    producer = children.python(["-c", peer(f"""
        import ringcast
        from conftest import produce_variable
        with ringcast.Ring.open({ring_path!r}) as ring:
            ring.claim_producer()
            print("ready", flush=True)
            produce_variable(ring, {count})
    """)])
    assert read_line(producer) == "ready", producer.stderr.read()
    consume_variable(me, count)
    assert producer.wait(TIMEOUT) == 0, producer.stderr.read()
    assert me.try_recv() is None
