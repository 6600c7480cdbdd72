#!/usr/bin/env python3
"""C++ producer -> Python consumer, across processes: ringcast vs pyzmq.

    /usr/bin/python3 bench/python/consumer_bench.py [--build build/release] [--rounds 3]

One C++ producer process (ringcast_bench_py_producer) sends 52-byte messages
as fast as the transport takes them; this process consumes them in Python:

  drain_into       Consumer.drain_into a preallocated NumPy structured array
                   (4096 records); each message's sequence number checked,
                   vectorised
  drain_into_full  the same, and every byte of every message checked
  drain            Consumer.drain(4096, dtype): a new array per batch; sequence
                   numbers checked
  try_recv         Consumer.try_recv per message (a bytes object each); length
                   and sequence number checked
  zmq              pyzmq SUB over ipc:// from a libzmq XPUB (XPUB_NODROP, so
                   nothing is dropped); Socket.recv per message; checked as try_recv

Rounds alternate the modes, so a noisy machine slows each alike. Throughput is
measured at the consumer, from its first message to its last. Prints a
Markdown table (per-round figures and the median) for docs/benchmarks.md.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# tests/ring/message_pattern.hpp: the sequence in six u64 words, its low half in a u32.
PATTERN = np.dtype([("words", "<u8", (6,)), ("low", "<u4")])
assert PATTERN.itemsize == 52


STALL = 30.0  # seconds without a message: the run failed (never reached by a working run)


def spawn(args):
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def finish(proc):
    if proc.wait(60) != 0:
        sys.exit(f"producer failed ({proc.returncode})")


def check_batch(batch, first, full):
    seqs = np.arange(first, first + len(batch), dtype=np.uint64)
    if full:
        ok = (batch["words"] == seqs[:, None]).all() and (batch["low"] == seqs.astype(np.uint32)).all()
    else:
        ok = (batch["words"][:, 0] == seqs).all()
    if not ok:
        sys.exit(f"bad message in batch from {first}")


def check_one(m, seq):
    if len(m) != 52 or int.from_bytes(m[:8], "little") != seq:
        sys.exit(f"bad message {seq}")


def run_ring(ringcast, producer, path, count, mode):
    ring = ringcast.Ring.create(path, 16384, replace=True, claim_producer=False)
    c = ring.register_consumer()
    proc = spawn([producer, "ring", path, str(count)])
    received = 0
    if mode == "try_recv":
        m = c.recv_wait(timeout=STALL)
        t0, first = time.perf_counter(), 1
        check_one(m, 0)
        received = 1
        try_recv = c.try_recv
        while received < count:
            m = try_recv()
            if m is None and (m := c.recv_wait(timeout=STALL)) is None:
                sys.exit(f"ring try_recv: nothing for {STALL} s at message {received}")
            check_one(m, received)
            received += 1

    else:
        out = np.empty(4096, dtype=PATTERN)
        t0 = first = None
        progress = time.perf_counter()
        while received < count:
            if mode.startswith("drain_into"):
                n = c.drain_into(out)
                batch = out[:n]
            else:
                batch = c.drain(4096, dtype=PATTERN)
                n = len(batch)
            if n:
                if t0 is None:
                    t0, first = time.perf_counter(), n
                check_batch(batch, received, mode == "drain_into_full")
                received += n
                progress = time.perf_counter()
            elif time.perf_counter() - progress > STALL:
                sys.exit(f"ring {mode}: nothing for {STALL} s at message {received}")
    t1 = time.perf_counter()
    finish(proc)
    c.close()
    ring.close()
    os.unlink(path)
    return (count - first) / (t1 - t0)


def run_zmq(zmq, producer, path, count):
    endpoint = "ipc://" + path
    proc = spawn([producer, "zmq", endpoint, str(count)])
    if proc.stdout.readline().strip() != "bound":
        sys.exit("zmq producer did not bind")
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.connect(endpoint)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVTIMEO, int(STALL * 1000))
    try:
        check_one(sub.recv(), 0)
        t0 = time.perf_counter()
        recv = sub.recv
        for seq in range(1, count):
            check_one(recv(), seq)
    except zmq.Again:
        sys.exit(f"zmq: nothing for {STALL} s")
    t1 = time.perf_counter()
    finish(proc)
    sub.close()
    ctx.term()
    return (count - 1) / (t1 - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"), help="build directory")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-count", type=int, default=20_000_000, help="messages per drain run")
    ap.add_argument("--single-count", type=int, default=2_000_000, help="messages per try_recv / zmq run")
    ap.add_argument("--modes", default="drain_into,drain_into_full,drain,try_recv,zmq")
    args = ap.parse_args()

    sys.path.insert(0, os.path.join(args.build, "python"))
    import ringcast
    import zmq

    producer = os.path.join(args.build, "bench", "python", "ringcast_bench_py_producer")
    modes = args.modes.split(",")
    results = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm, tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for mode in modes:
                if mode == "zmq":
                    rate = run_zmq(zmq, producer, os.path.join(tmp, "bench.ipc"), args.single_count)
                else:
                    count = args.single_count if mode == "try_recv" else args.batch_count
                    rate = run_ring(ringcast, producer, os.path.join(shm, "bench.ring"), count, mode)
                results[mode].append(rate)
                print(f"round {r + 1} {mode:>10}: {rate / 1e6:7.2f} M msgs/s", file=sys.stderr, flush=True)

    print(f"load: {open('/proc/loadavg').read().split()[:3]}; python {sys.version.split()[0]}, "
          f"numpy {np.__version__}, pyzmq {zmq.__version__} (libzmq {zmq.zmq_version()})")
    print()
    print("| consumer (Python) | M msgs/s per round | median | vs zmq |")
    print("|---|---|---|---|")
    zmq_median = statistics.median(results["zmq"]) if "zmq" in results else None
    for mode in modes:
        med = statistics.median(results[mode])
        rounds = ", ".join(f"{x / 1e6:.2f}" for x in results[mode])
        ratio = f"{med / zmq_median:.1f}x" if zmq_median else "-"
        print(f"| {mode} | {rounds} | {med / 1e6:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
