"""The examples in tools/python-examples run end to end."""

import os

from conftest import read_line

TIMEOUT = 120


def test_producer_and_consumer_examples_exchange_every_tick(tmp_path, source_dir, children):
    examples = os.path.join(source_dir, "tools", "python-examples")
    path = str(tmp_path / "ticks.ring")
    count = 200_000
    producer = children.python([os.path.join(examples, "producer.py"), "--path", path, "--capacity", "1024",
                                "--count", str(count), "--wait-consumers", "1"])
    assert read_line(producer).startswith("ring ready")
    consumer = children.python([os.path.join(examples, "consumer.py"), "--path", path, "--count", str(count)])
    out, err = consumer.communicate(timeout=TIMEOUT)
    assert consumer.returncode == 0, err
    assert out.splitlines()[-1] == f"received {count} ticks, in order"
    out, err = producer.communicate(timeout=TIMEOUT)
    assert producer.returncode == 0, err
    assert out.startswith(f"published {count} ticks")
    assert not os.path.exists(path)


def test_examples_print_help(source_dir, children):
    for name in ("producer.py", "consumer.py"):
        proc = children.python([os.path.join(source_dir, "tools", "python-examples", name), "--help"])
        out, _ = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0 and "--path" in out
