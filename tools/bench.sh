#!/usr/bin/env bash
# Builds ringcast in release mode and runs the whole ring benchmark set:
# the Google Benchmark suite (single-thread, threads, baseline, layout
# variants) and the cross-process harness (ringcast vs ZeroMQ vs
# Boost.Interprocess). Writes the JSON into a results directory, regenerates
# the Markdown tables and the latency plot, and splices the tables into
# docs/benchmarks.md between its "bench:tables" markers.
#
# usage: tools/bench.sh [--out DIR] [--repetitions N] [--quick] [--realtime]
#                       [--no-docs] [-- extra ringcast_bench_xproc flags]
#   --out DIR         results directory (default: bench/ring/results)
#   --repetitions N   repetitions of every benchmark (default 5; medians reported)
#   --quick           fewer messages and repetitions: a smoke run, not a measurement
#   --realtime        run the benchmarks under SCHED_FIFO priority 1 (chrt; needs
#                     root or CAP_SYS_NICE) so that other work on a shared machine
#                     does not time-slice the spinning producer and consumers
#   --no-docs         do not touch docs/benchmarks.md
# Benchmarks are measurements, not tests: nothing here fails on a slow figure.
# It fails only if a build fails or a message does not verify.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/bench/ring/results"
reps=5
quick=0
realtime=0
docs=1
xproc_extra=()
while (($#)); do
  case $1 in
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --repetitions) reps=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --realtime) realtime=1; shift ;;
    --no-docs) docs=0; shift ;;
    --) shift; xproc_extra=("$@"); break ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

cd "$root"
cmake --preset release >/dev/null
cmake --build --preset release --target ringcast_bench_micro ringcast_bench_xproc
bin="$root/build/release/bench/ring"
mkdir -p "$out"

run=()
# A hard time limit in realtime mode: a spinning SCHED_FIFO process that never
# yields would otherwise keep everything else on the machine off its CPU.
if ((realtime)); then run=(timeout --signal=KILL 1800 chrt -f 1); fi

micro_flags=(--benchmark_repetitions="$reps" --benchmark_display_aggregates_only=true
             --benchmark_out="$out/micro.json" --benchmark_out_format=json)
xproc_flags=(--repetitions "$reps" --json "$out/xproc.json")
if ((quick)); then
  micro_flags=(--benchmark_repetitions=2 --benchmark_min_time=0.05 --benchmark_display_aggregates_only=true
               --benchmark_out="$out/micro.json" --benchmark_out_format=json)
  xproc_flags=(--repetitions 1 --messages 1000000 --peer-messages 100000 --rate-messages 10000
               --json "$out/xproc.json")
fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "kernel: $(uname -srm)"
  echo "realtime: $realtime"
  lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|L1d|L2|L3|Hypervisor)'
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/machine.txt"

echo "== micro-benchmarks (Google Benchmark) -> $out/micro.json"
"${run[@]}" "$bin/ringcast_bench_micro" "${micro_flags[@]}"

echo "== cross-process harness -> $out/xproc.json"
"${run[@]}" "$bin/ringcast_bench_xproc" "${xproc_flags[@]}" "${xproc_extra[@]}" | tee "$out/xproc.txt"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"

echo "== tables -> $out/tables.md"
python3 "$root/bench/ring/report.py" "$out" > "$out/tables.md"

echo "== latency plot -> $out/latency.png"
"$root/tools/plot-latency.sh" "$out/xproc.json" "$out/latency.png" rate 1
"$root/tools/plot-latency.sh" "$out/xproc.json" "$out/latency-saturation.png" saturation 1

if ((docs)); then
  doc="$root/docs/benchmarks.md"
  if grep -q '<!-- bench:tables:begin -->' "$doc" 2>/dev/null; then
    python3 - "$doc" "$out/tables.md" "$out/machine.txt" <<'PY'
import sys
doc, tables, machine = sys.argv[1:4]
text = open(doc).read()
begin, end = "<!-- bench:tables:begin -->", "<!-- bench:tables:end -->"
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
body = open(tables).read().rstrip() + "\n\nMachine and run:\n\n```\n" + open(machine).read().rstrip() + "\n```\n"
open(doc, "w").write(head + begin + "\n" + body + end + tail)
PY
    echo "== spliced the tables into docs/benchmarks.md"
    # The summary follows the new cells; the two bench:figure markers above
    # the tables carry the run's date and load, which only a person knows.
    "$root/tools/bench-summary.py"
    echo "== rewrote the summary: set the date and load of the bench:figure markers above bench:tables, then run tools/bench-summary.py again"
  else
    echo "bench.sh: docs/benchmarks.md has no bench:tables markers; left it alone" >&2
  fi
fi
echo "done: $out"
