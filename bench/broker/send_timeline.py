#!/usr/bin/env python3
"""Where a fan-out's time goes inside each server, from the kernel's side.

Runs ringcast-broker-bench with the arguments given after `--` and, while it
runs, records the read/write system calls of both servers it starts with perf
tracepoints. Then, for every PUBLISH the server read on its own (one message per
read, as at a low offered rate), it follows the sends that came next, up to the
next read, and reports per server:

  first send   time from the read returning to the first send starting
  last send    time from the read returning to the N-th send returning
  in kernel    mean time inside one send call
  between      mean time in user space between two sends

Needs perf with the syscalls tracepoints (root, tracefs mounted). Tracing adds
about a microsecond to each call, on both servers alike: compare the servers,
not these figures with the bench's own.

Example (N = 100 subscribers, 52 B: a PUBLISH is 87 bytes):
  python3 bench/broker/send_timeline.py --subscribers 100 --publish-bytes 87 -- \\
      build/release/bench/broker/ringcast-broker-bench --subscribers 1 \\
      --payloads 52 --latency-subscribers 100 --io-threads 1 --seconds 3
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

SENDS = ("sendmsg", "write", "writev")
READS = ("read", "recvfrom")
EVENTS = ",".join(f"syscalls:sys_{edge}_{call}" for call in SENDS + READS for edge in ("enter", "exit"))


def server_pids(bench_pid, deadline_s=10.0):
    """The two servers the bench starts: its children named like the servers."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        kids = subprocess.run(["pgrep", "-P", str(bench_pid)], capture_output=True, text=True).stdout.split()
        names = {}
        for pid in kids:
            try:
                with open(f"/proc/{pid}/comm") as f:
                    names[pid] = f.read().strip()
            except OSError:
                continue
        found = [p for p, n in names.items() if n in ("ringcast-broker", "redis-server")]
        if len(found) == 2:
            return found
        time.sleep(0.05)
    sys.exit("send_timeline: the bench did not start both servers")


def timelines(script_lines, publish_bytes):
    """Per server name: one dict per lone PUBLISH read, with the sends after it
    (from any of the server's threads)."""
    out, current, send_started = {}, {}, {}
    for line in script_lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        comm, tid, t_us = fields[0], fields[1], float(fields[2].rstrip(":")) * 1e6
        edge_call = fields[3].rstrip(":").split(":")[1]  # sys_exit_read
        edge, call = edge_call.split("_", 2)[1:]
        if call in READS and edge == "exit":
            if comm in current:
                out.setdefault(comm, []).append(current.pop(comm))
            if int(fields[4], 16) == publish_bytes:
                current[comm] = {"read": t_us, "sends": []}
        elif call in SENDS and edge == "enter":
            send_started[tid] = t_us
        elif call in SENDS and comm in current and tid in send_started:
            current[comm]["sends"].append((send_started.pop(tid), t_us))
    return out


def report(name, messages, n):
    full = [m for m in messages if len(m["sends"]) >= n]
    if not full:
        print(f"{name}: no read was followed by {n} sends")
        return

    def pct(values, q):
        values = sorted(values)
        return values[int((len(values) - 1) * q)]

    first = [m["sends"][0][0] - m["read"] for m in full]
    last = [m["sends"][n - 1][1] - m["read"] for m in full]
    in_kernel = statistics.mean(b - a for m in full for a, b in m["sends"][:n])
    between = statistics.mean(m["sends"][i + 1][0] - m["sends"][i][1] for m in full for i in range(n - 1)) if n > 1 else 0
    print(f"| {name} | {len(full)} | {pct(first, .5):.0f} | {pct(last, .5):.0f} | {pct(last, .99):.0f} "
          f"| {in_kernel:.2f} | {between:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--subscribers", type=int, required=True, help="N: sends that follow one PUBLISH")
    ap.add_argument("--publish-bytes", type=int, required=True, help="size of one PUBLISH request on the wire")
    ap.add_argument("bench", nargs=argparse.REMAINDER, help="-- then the bench command line")
    args = ap.parse_args()
    bench = args.bench[1:] if args.bench[:1] == ["--"] else args.bench
    if not bench:
        ap.error("give the bench command line after --")

    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        proc = subprocess.Popen(bench, stdout=sys.stderr)
        pids = server_pids(proc.pid)
        perf = subprocess.Popen(["perf", "record", "-q", "-e", EVENTS, "-p", ",".join(pids), "-o", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        proc.wait()
        perf.send_signal(2)
        perf.wait()
        script = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,time,event,trace"],
                                capture_output=True, text=True, check=True).stdout.splitlines()

    print("| server | messages | first send us | last send p50 us | last send p99 us | in kernel us/send "
          "| between sends us |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, messages in sorted(timelines(script, args.publish_bytes).items()):
        report(name, messages, args.subscribers)


if __name__ == "__main__":
    main()
