#!/usr/bin/env python3
"""Compares two builds' 52-byte ring benchmarks run alternately in one run
(tools/bench.sh --baseline REV) and prints Markdown tables.

usage: ab_report.py DIR > ab.md

DIR holds, for rounds R = 1, 2, ...: {old,new}-micro-R.json (Google Benchmark,
ringcast_bench_micro) and {old,new}-xproc-R.json (ringcast_bench_xproc). Each
row shows each build's median over the rounds and the median of the per-round
ratios, as speed: new / old >= 1 means the new build is as fast or faster
(time and latency ratios are old / new, throughput ratios new / old). Rounds
are paired because they ran back to back, so the per-round ratio cancels
most of what other load on the machine did to both; use an odd number of
rounds (the median of an even count averages the middle two). Standard
library only.
"""
import glob
import json
import os
import re
import statistics
import sys


def rounds(directory, build, program):
    """{round: parsed JSON} for one build and program."""
    out = {}
    for path in glob.glob(os.path.join(directory, f"{build}-{program}-*.json")):
        m = re.search(r"-(\d+)\.json$", path)
        if m:
            with open(path) as f:
                out[int(m.group(1))] = json.load(f)
    return out


def micro_figures(doc):
    """{benchmark: (value, higher_is_better, unit)}; median over repetitions."""
    values = {}
    for b in doc["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        if "msgs_per_s" in b:
            values.setdefault(b["run_name"], ([], True, "msgs/s"))[0].append(b["msgs_per_s"])
        else:
            values.setdefault(b["run_name"], ([], False, "ns"))[0].append(b["cpu_time"])
    return {k: (statistics.median(v), hib, unit) for k, (v, hib, unit) in values.items()}


def xproc_figures(doc):
    """{scenario: (value, higher_is_better, unit)}; median over repetitions."""
    values = {}
    for r in doc["runs"]:
        key = f"{r['transport']} {r['api']} N={r['consumers']}"
        if r["mode"] == "saturation":
            values.setdefault(f"{key} saturation msgs/s", ([], True, "msgs/s"))[0].append(r["msgs_per_sec"])
        else:
            rate = f"{r['offered_rate'] / 1000:g} k"
            for q in ("p50", "p99"):
                values.setdefault(f"{key} {q} at {rate} msgs/s", ([], False, "ns"))[0].append(r["latency_ns"][q])
    return {k: (statistics.median(v), hib, unit) for k, (v, hib, unit) in values.items()}


def show(value, unit):
    if unit == "msgs/s":
        return f"{value / 1e6:.2f} M" if value >= 1e6 else f"{value / 1e3:.1f} k"
    if value >= 1e6:
        return f"{value / 1e6:.2f} ms"
    if value >= 1e4:
        return f"{value / 1e3:.1f} us"
    return f"{value:.2f} ns" if value < 100 else f"{value:.0f} ns"


def table(title, directory, program, figures):
    old, new = rounds(directory, "old", program), rounds(directory, "new", program)
    paired = sorted(set(old) & set(new))
    if not paired:
        return
    per_round = {r: (figures(old[r]), figures(new[r])) for r in paired}
    names = list(per_round[paired[0]][0])
    print(f"### {title} ({len(paired)} rounds, alternated; new / old is speed, the median of the rounds' ratios)\n")
    print("| benchmark | old | new | new / old | per round |")
    print("|---|---:|---:|---:|---|")
    for name in names:
        olds, news, ratios = [], [], []
        for r in paired:
            o, n = per_round[r][0].get(name), per_round[r][1].get(name)
            if o is None or n is None or o[0] == 0 or n[0] == 0:
                continue
            olds.append(o[0])
            news.append(n[0])
            ratios.append(n[0] / o[0] if o[1] else o[0] / n[0])
        if not ratios:
            continue
        unit = per_round[paired[0]][0][name][2]
        print(f"| {name} | {show(statistics.median(olds), unit)} | {show(statistics.median(news), unit)} | "
              f"{statistics.median(ratios):.2f}x | {', '.join(f'{x:.2f}' for x in ratios)} |")
    print()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    directory = sys.argv[1]
    table("ringcast_bench_micro: CPU time per operation, or msgs/s for Threads", directory, "micro", micro_figures)
    table("ringcast_bench_xproc: 52 B across processes", directory, "xproc", xproc_figures)


if __name__ == "__main__":
    main()
