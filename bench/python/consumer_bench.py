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
measured at the consumer, from its first message to its last, in wall-clock
time and per CPU-second of the consumer process (its CPU time over the same
span, all its threads: pyzmq's I/O thread included; an idle ringcast consumer
sleeps in recv_wait rather than spinning). On a loaded
machine the second says what the consumer could do with a core of its own.
Prints a Markdown table (per-round figures and medians) for docs/benchmarks.md.
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
    # An idle consumer sleeps on the futex instead of spinning (on every ring), so
    # its CPU time is the work it did; `wakeups` makes both sides fence instead
    # of using membarrier(2), as when the recorded figures were taken.
    ring = ringcast.Ring.create(path, 16384, replace=True, claim_producer=False, wakeups=True)
    c = ring.register_consumer()
    proc = spawn([producer, "ring", path, str(count)])

    def wait_one(received):
        """The ring is empty: sleep until the next message (the GIL released)."""
        m = c.recv_wait(timeout=STALL)
        if m is None:
            sys.exit(f"ring {mode}: nothing for {STALL} s at message {received}")
        check_one(m, received)

    wait_one(0)
    t0, c0 = time.perf_counter(), time.process_time()
    received = 1
    if mode == "try_recv":
        try_recv = c.try_recv
        while received < count:
            m = try_recv()
            if m is None:
                wait_one(received)
            else:
                check_one(m, received)
            received += 1
    else:
        out = np.empty(4096, dtype=PATTERN)
        full = mode == "drain_into_full"
        while received < count:
            if mode == "drain":
                batch = c.drain(4096, dtype=PATTERN)
            else:
                batch = out[:c.drain_into(out)]
            if len(batch):
                check_batch(batch, received, full)
                received += len(batch)
            else:
                wait_one(received)
                received += 1
    t1, c1 = time.perf_counter(), time.process_time()
    finish(proc)
    c.close()
    ring.close()
    os.unlink(path)
    return (count - 1) / (t1 - t0), (count - 1) / (c1 - c0)


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
        t0, c0 = time.perf_counter(), time.process_time()
        recv = sub.recv
        for seq in range(1, count):
            check_one(recv(), seq)
    except zmq.Again:
        sys.exit(f"zmq: nothing for {STALL} s")
    t1, c1 = time.perf_counter(), time.process_time()
    finish(proc)
    sub.close()
    ctx.term()
    return (count - 1) / (t1 - t0), (count - 1) / (c1 - c0)


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
    cpu_results = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm, tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for mode in modes:
                if mode == "zmq":
                    rate, per_cpu = run_zmq(zmq, producer, os.path.join(tmp, "bench.ipc"), args.single_count)
                else:
                    count = args.single_count if mode == "try_recv" else args.batch_count
                    rate, per_cpu = run_ring(ringcast, producer, os.path.join(shm, "bench.ring"), count, mode)
                results[mode].append(rate)
                cpu_results[mode].append(per_cpu)
                print(f"round {r + 1} {mode:>15}: {rate / 1e6:7.2f} M msgs/s, {per_cpu / 1e6:7.2f} M msgs per "
                      f"consumer CPU-s", file=sys.stderr, flush=True)

    print(f"load: {open('/proc/loadavg').read().split()[:3]}; python {sys.version.split()[0]}, "
          f"numpy {np.__version__}, pyzmq {zmq.__version__} (libzmq {zmq.zmq_version()})")
    print()
    print("| consumer (Python) | M msgs/s per round | median | vs zmq | M msgs per consumer CPU-s, per round | median | vs zmq |")
    print("|---|---|---:|---:|---|---:|---:|")

    def cells(values, ref):
        med = statistics.median(values)
        ratio = f"{med / statistics.median(ref):.1f}x" if ref else "-"
        return f"{', '.join(f'{x / 1e6:.2f}' for x in values)} | {med / 1e6:.2f} | {ratio}"

    for mode in modes:
        print(f"| {mode} | {cells(results[mode], results.get('zmq'))} | "
              f"{cells(cpu_results[mode], cpu_results.get('zmq'))} |")


if __name__ == "__main__":
    main()
