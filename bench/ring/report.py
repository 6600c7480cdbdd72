#!/usr/bin/env python3
"""Turns the benchmark JSON of one tools/bench.sh run into Markdown tables.

usage: report.py RESULTS_DIR > tables.md

Reads RESULTS_DIR/micro.json (Google Benchmark, with repetitions) and
RESULTS_DIR/xproc.json (ringcast_bench_xproc). Every figure is the median over
the repetitions of that run; ratios are computed within the run. Standard
library only.
"""
import json
import os
import sys

# The seed's published single-thread table (Windows 11 / Zen+ R7 2700,
# Criterion) and the calibration on this machine class.
SEED = {  # name: (ring ns, baseline ns)
    "push": (50.1, 172.6),
    "recv": (44.0, 121.0),
    "lag": (1.06, 49.2),
    "is_fully_drained/16": (50.0, None),  # "~50 ns", no baseline figure
}
CALIBRATION = {"push": (3.5, 79.0), "recv": (6.5, 32.0), "lag": (0.7, 20.0)}
TARGET_RATIO = {"push": 10.0, "recv": 4.0, "lag": 20.0}


def load(path):
    with open(path) as f:
        return json.load(f)


def median(values):
    v = sorted(values)
    return v[len(v) // 2] if v else None


def fmt_ns(x):
    if x is None:
        return "-"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def fmt_ratio(a, b):
    if a is None or b is None or a == 0:
        return "-"
    return f"{b / a:.1f}x"


def fmt_rate(x):
    if x is None:
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    return f"{x / 1e3:.0f} k"


def fmt_lat(ns):
    if ns is None:
        return "-"
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if ns >= 1e4:
        return f"{ns / 1e3:.0f} us"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} us"
    return f"{ns:.0f} ns"


class Micro:
    """Median aggregates of a Google Benchmark JSON file, by run name."""

    def __init__(self, doc):
        self.rows = {}
        self.reps = 1
        for b in doc.get("benchmarks", []):
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median":
                self.rows[b["run_name"]] = b
            if b.get("run_type") == "iteration":
                self.reps = max(self.reps, int(b.get("repetitions", 1)))
        self.context = doc.get("context", {})

    def ns(self, name):
        b = self.rows.get(name)
        if b is None:
            return None
        scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
        return b["cpu_time"] * scale

    def counter(self, name, key):
        b = self.rows.get(name)
        return None if b is None else b.get(key)


def single_thread_tables(m, out):
    out.append("### Single-thread micro-benchmarks (ns per operation, median of "
               f"{m.reps} repetitions, CPU time)\n")
    out.append("| operation | seed ring | seed baseline | seed ratio | calibration ring / baseline "
               "| **ringcast** | baseline (seed shape) | **ratio** | target | baseline (lazy trim) | ratio |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = [
        ("push", "Push", "push (cap 16, drain then push)"),
        ("push_nc", "PushNoConsumer", "push, no consumer (cap 16)"),
        ("recv", "Recv", "recv (cap 64, steady state)"),
        ("lag", "Lag", "lag"),
        ("is_fully_drained/1", "IsFullyDrained", "is_fully_drained, 1 consumer"),
        ("is_fully_drained/16", "IsFullyDrained", "is_fully_drained, 16 consumers"),
    ]
    for key, bench, label in rows:
        suffix = "/" + key.split("/")[1] if key.startswith("is_fully_drained") else ""
        ring = m.ns(f"{bench}/ringcast{suffix}")
        base = m.ns(f"{bench}/baseline{suffix}")
        lazy = m.ns(f"{bench}/baseline_lazy{suffix}")
        seed = SEED.get(key, (None, None))
        cal = CALIBRATION.get(key)
        target = TARGET_RATIO.get(key)
        if key == "is_fully_drained/16":
            target_text = "< 20 ns: " + ("met" if ring is not None and ring < 20 else "NOT met")
        elif target:
            ok = ring is not None and base is not None and base / ring >= target
            target_text = f">= {target:.0f}x: " + ("met" if ok else "NOT met")
        else:
            target_text = "-"
        out.append(
            f"| {label} | {fmt_ns(seed[0])} | {fmt_ns(seed[1])} | {fmt_ratio(seed[0], seed[1])} | "
            f"{(fmt_ns(cal[0]) + ' / ' + fmt_ns(cal[1])) if cal else '-'} | **{fmt_ns(ring)}** | {fmt_ns(base)} | "
            f"**{fmt_ratio(ring, base)}** | {target_text} | {fmt_ns(lazy)} | {fmt_ratio(ring, lazy)} |")
    out.append("")


def threads_table(m, out):
    out.append("### One producer and 1..3 consumer threads in one process "
               f"(median of {m.reps} repetitions; every message verified)\n")
    out.append("msgs/s counts messages published (each is delivered to every consumer); "
               "full = share of single pushes (or of batch calls) that found the ring full.\n")
    impls = [("ringcast", "ringcast (one shared handle)"),
             ("ringcast_own_handles", "ringcast (a handle per thread)"),
             ("baseline", "baseline (seed shape)"),
             ("baseline_lazy", "baseline (lazy trim)")]
    out.append("| structure | API | 1 consumer | 2 consumers | 3 consumers | full (1 / 2 / 3) |")
    out.append("|---|---|---:|---:|---:|---|")
    for impl, label in impls:
        for api, api_label in ((0, "single"), (1, "batch")):
            rates, fulls = [], []
            for c in (1, 2, 3):
                name = f"Threads/{impl}/consumers:{c}/batch:{api}/iterations:8/manual_time"
                rates.append(m.counter(name, "msgs_per_s"))
                f = m.counter(name, "full_share")
                fulls.append("-" if f is None else f"{100 * f:.1f}%")
            out.append(f"| {label} | {api_label} | " + " | ".join(fmt_rate(r) + "/s" if r else "-" for r in rates)
                       + " | " + " / ".join(fulls) + " |")
    out.append("")
    # Ratios within the run.
    out.append("| ratio ringcast / baseline (seed shape) | 1 consumer | 2 consumers | 3 consumers |")
    out.append("|---|---:|---:|---:|")
    for impl, label in (("ringcast", "shared handle"), ("ringcast_own_handles", "handle per thread")):
        for api, api_label in ((0, "single"), (1, "batch")):
            cells = []
            for c in (1, 2, 3):
                a = m.counter(f"Threads/{impl}/consumers:{c}/batch:{api}/iterations:8/manual_time", "msgs_per_s")
                b = m.counter(f"Threads/baseline/consumers:{c}/batch:{api}/iterations:8/manual_time", "msgs_per_s")
                cells.append(f"{a / b:.1f}x" if a and b else "-")
            out.append(f"| {label}, {api_label} API | " + " | ".join(cells) + " |")
    out.append("")


def layout_table(m, out):
    out.append("### Consumer-table layout (issue 2) against the seed's packed table\n")
    variants = [("layout_padded_cached", "entry per cache line + cached minimum (issue 2)"),
                ("layout_packed_scan", "packed cursors + scan every push (seed)"),
                ("layout_packed_cached", "packed cursors + cached minimum"),
                ("layout_padded_scan", "entry per cache line + scan every push")]
    out.append("| variant | push ns (cap 16) | is_fully_drained/16 ns | 1 thread msgs/s | 2 threads | 3 threads |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for v, label in variants:
        cells = [fmt_ns(m.ns(f"Push/{v}")), fmt_ns(m.ns(f"IsFullyDrained/{v}/16"))]
        for c in (1, 2, 3):
            r = m.counter(f"Threads/{v}/consumers:{c}/batch:0/iterations:8/manual_time", "msgs_per_s")
            cells.append(fmt_rate(r) + "/s" if r else "-")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")


def xproc_tables(x, out):
    runs = x.get("runs", [])
    ctx = x.get("context", {})
    groups = {}
    for r in runs:
        key = (r["mode"], r["transport"], r["api"], r["consumers"])
        groups.setdefault(key, []).append(r)

    def med(key, field, sub=None):
        rs = groups.get(key, [])
        vals = [(r[field][sub] if sub else r[field]) for r in rs]
        return median(vals)

    reps = ctx.get("repetitions", 1)
    out.append(f"### Cross-process throughput at saturation (median of {reps} runs; every message verified)\n")
    out.append(f"Ring capacity / queue length / ZeroMQ HWM: {ctx.get('capacity')}; realtime: "
               f"{ctx.get('realtime')}; idle: spin with one consumer, ringcast consumers sleep on the "
               "futex (recv_wait) with more. Latency at saturation is mostly queueing (one message "
               f"in {ctx.get('sample_every')} sampled).\n")
    out.append("| transport | API | N | msgs/s | vs zmq | vs boost | full | p50 | p99 | p99.9 | max |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    ns = sorted({k[3] for k in groups if k[0] == "saturation"})
    order = [("ringcast", "batch"), ("ringcast", "single"), ("zmq", "single"), ("boost", "single")]
    for n in ns:
        zmq = med(("saturation", "zmq", "single", n), "msgs_per_sec")
        boost = med(("saturation", "boost", "single", n), "msgs_per_sec")
        for t, a in order:
            key = ("saturation", t, a, n)
            if key not in groups:
                continue
            mps = med(key, "msgs_per_sec")
            full = median([100.0 * r["full_hits"] / r["send_calls"] if r["send_calls"] else 0 for r in groups[key]])
            api_label = a if t == "ringcast" else "native"
            out.append(
                f"| {t} | {api_label} | {n} | {fmt_rate(mps)}/s | {fmt_ratio(zmq, mps) if zmq else '-'} | "
                f"{fmt_ratio(boost, mps) if boost else '-'} | {full:.1f}% | "
                + " | ".join(fmt_lat(med(key, "latency_ns", p)) for p in ("p50", "p99", "p999", "max")) + " |")
    out.append("")
    rate_keys = [k for k in groups if k[0] == "rate"]
    if rate_keys:
        rate = groups[rate_keys[0]][0]["offered_rate"]
        out.append(f"### Cross-process one-way latency at a fixed offered rate of {rate:.0f} msgs/s "
                   f"(open loop, every message, median of {reps} runs)\n")
        out.append("| transport | N | p50 | p90 | p99 | p99.9 | max | achieved msgs/s |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for n in sorted({k[3] for k in rate_keys}):
            for t in ("ringcast", "zmq", "boost"):
                key = ("rate", t, "single", n)
                if key not in groups:
                    continue
                out.append(f"| {t} | {n} | " + " | ".join(
                    fmt_lat(med(key, "latency_ns", p)) for p in ("p50", "p90", "p99", "p999", "max"))
                    + f" | {fmt_rate(med(key, 'msgs_per_sec'))}/s |")
        out.append("")
    return groups, med


def targets_table(m, groups, med, out):
    out.append("### Targets (issue 3)\n")
    out.append("| target | measured | met |")
    out.append("|---|---|---|")
    if m:
        for key, bench in (("push", "Push"), ("recv", "Recv"), ("lag", "Lag")):
            r, b = m.ns(f"{bench}/ringcast"), m.ns(f"{bench}/baseline")
            if r and b:
                out.append(f"| {key} >= {TARGET_RATIO[key]:.0f}x the baseline | {fmt_ns(r)} vs {fmt_ns(b)} ns = "
                           f"{b / r:.1f}x | {'yes' if b / r >= TARGET_RATIO[key] else 'NO'} |")
        d = m.ns("IsFullyDrained/ringcast/16")
        if d is not None:
            out.append(f"| is_fully_drained < 20 ns at 16 consumers | {fmt_ns(d)} ns | {'yes' if d < 20 else 'NO'} |")
    if groups is not None:
        b1 = med(("saturation", "ringcast", "batch", 1), "msgs_per_sec")
        z1 = med(("saturation", "zmq", "single", 1), "msgs_per_sec")
        if b1:
            out.append(f"| cross-process 1 -> 1, batch API >= 30 M msgs/s | {fmt_rate(b1)}/s | "
                       f"{'yes' if b1 >= 30e6 else 'NO'} |")
        if b1 and z1:
            out.append(f"| >= 10x ZeroMQ ipc PUB/SUB | {b1 / z1:.1f}x ({fmt_rate(z1)}/s) | "
                       f"{'yes' if b1 / z1 >= 10 else 'NO'} |")
        p50 = med(("rate", "ringcast", "single", 1), "latency_ns", "p50")
        if p50 is not None:
            out.append(f"| one-way p50 < 300 ns at a modest rate | {fmt_lat(p50)} | {'yes' if p50 < 300 else 'NO'} |")
    out.append("")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    out = []
    m = None
    groups = med = None
    micro_path, xproc_path = os.path.join(d, "micro.json"), os.path.join(d, "xproc.json")
    if os.path.exists(micro_path):
        m = Micro(load(micro_path))
        ctx = m.context
        out.append(f"Micro-benchmarks: {ctx.get('date', '?')}, {ctx.get('num_cpus', '?')} CPUs at "
                   f"{ctx.get('mhz_per_cpu', '?')} MHz, library build {ctx.get('library_build_type', '?')}.\n")
    if os.path.exists(xproc_path):
        x = load(xproc_path)
        out.append(f"Cross-process: `{x['context'].get('command', '')}` on {x['context'].get('cpu', '?')}, "
                   f"{x['context'].get('kernel', '?')}.\n")
    if m:
        single_thread_tables(m, out)
    if os.path.exists(xproc_path):
        groups, med = xproc_tables(load(xproc_path), out)
    if m:
        threads_table(m, out)
        layout_table(m, out)
    targets_table(m, groups, med, out)
    print("\n".join(out))


if __name__ == "__main__":
    main()
