"""The examples in tools/python-examples run end to end."""

import os
import re

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


def test_frame_examples_exchange_images_of_every_shape_in_place(tmp_path, source_dir, children):
    examples = os.path.join(source_dir, "tools", "python-examples")
    path = str(tmp_path / "frames.ring")
    count = 20_000
    producer = children.python([os.path.join(examples, "frame_producer.py"), "--path", path, "--capacity", "4096",
                                "--count", str(count)])
    assert read_line(producer).startswith("ring ready")
    consumer = children.python([os.path.join(examples, "frame_consumer.py"), "--path", path, "--count", str(count)])
    out, err = consumer.communicate(timeout=TIMEOUT)
    assert consumer.returncode == 0, err
    m = re.fullmatch(rf"received {count} frames, in order \((\d+) read in place\)", out.splitlines()[-1])
    assert m and int(m.group(1)) > 0, out
    out, err = producer.communicate(timeout=TIMEOUT)
    assert producer.returncode == 0, err
    assert out.splitlines()[-1].startswith(f"published {count} frames")
    assert not os.path.exists(path)


def test_examples_print_help(source_dir, children):
    for name in ("producer.py", "consumer.py", "frame_producer.py", "frame_consumer.py"):
        proc = children.python([os.path.join(source_dir, "tools", "python-examples", name), "--help"])
        out, _ = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0 and "--path" in out
