#!/usr/bin/env bash
# Builds ringcast in release mode and runs the whole ring benchmark set:
# the Google Benchmark suite (single-thread, threads, baseline, layout
# variants) and the cross-process harness (ringcast vs ZeroMQ vs
# Boost.Interprocess). Writes the JSON into a results directory, regenerates
# the Markdown tables and the latency plot, splices the tables into the
# notebook, docs/bench-history/notebook.md, between its "bench:tables" markers,
# and rewrites the generated tables of docs/benchmarks.md
# (tools/bench-summary.py).
#
# usage: tools/bench.sh [--out DIR] [--repetitions N] [--quick] [--realtime]
#                       [--no-docs] [--build DIR] [--large | --baseline REV]
#                       [-- extra ringcast_bench_xproc (--large: ringcast_bench_large) flags]
#   --out DIR         results directory (default: bench/ring/results)
#   --repetitions N   repetitions of every benchmark (default 5; medians reported);
#                     with --large or --baseline, rounds of the alternation
#   --quick           fewer messages and repetitions: a smoke run, not a measurement
#   --realtime        run the benchmarks under SCHED_FIFO priority 1 (chrt; needs
#                     root or CAP_SYS_NICE) so that other work on a shared machine
#                     does not time-slice the spinning producer and consumers
#   --no-docs         do not touch docs/bench-history/notebook.md nor docs/benchmarks.md
#   --build DIR       build here (configured Release with Ninja) instead of the
#                     release preset's build/release
#   --large           instead of the ring set, the large-message set (bench/large:
#                     ringcast's copy and zero-copy APIs vs iceoryx, ZeroMQ and
#                     Boost at 52 B..1 MiB, N = 1 and 4, plus memcpy bandwidth):
#                     DIR/large.{txt,json}; its tables are recorded by hand
#   --baseline REV    instead of the ring set, the 52-byte regression floor: builds
#                     REV's micro and xproc benchmarks in a temporary git worktree
#                     (removed afterwards), runs them and this tree's alternately,
#                     one repetition per round, and writes DIR/baseline.md
#                     (bench/ring/ab_report.py) and the JSON under DIR/baseline/
# Benchmarks are measurements, not tests: nothing here fails on a slow figure.
# It fails only if a build fails or a message does not verify.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/bench/ring/results"
reps=5
quick=0
realtime=0
docs=1
build=""
large=0
baseline=""
xproc_extra=()
while (($#)); do
  case $1 in
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --repetitions) reps=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --realtime) realtime=1; shift ;;
    --no-docs) docs=0; shift ;;
    --build) build=$(realpath -m "$2"); shift 2 ;;
    --large) large=1; shift ;;
    --baseline) baseline=$2; shift 2 ;;
    --) shift; xproc_extra=("$@"); break ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if ((large)) && [[ -n $baseline ]]; then echo "bench.sh: --large and --baseline are separate runs" >&2; exit 2; fi

cd "$root"
targets=(ringcast_bench_micro ringcast_bench_xproc)
((large)) && targets=(ringcast_bench_large)
# build SRC DIR TARGET...: a Release build of the targets (DIR empty: the release preset).
build_in() {
  local src=$1 dir=$2
  shift 2
  if [[ -z $dir ]]; then
    (cd "$src" && cmake --preset release -DRINGCAST_BUILD_BENCHMARKS=ON >/dev/null && cmake --build --preset release --target "$@")
  else
    cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$dir" --target "$@"
  fi
}
build_in "$root" "$build" "${targets[@]}"
bin="${build:-$root/build/release}/bench/ring"
mkdir -p "$out"

run=()
# A hard time limit in realtime mode: a spinning SCHED_FIFO process that never
# yields would otherwise keep everything else on the machine off its CPU.
if ((realtime)); then run=(timeout --signal=KILL 1800 chrt -f 1); fi

machine_notes() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes')"
  echo "kernel: $(uname -srm)"
  echo "realtime: $realtime"
  lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|L1d|L2|L3|Hypervisor)'
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}

if ((large)); then
  large_bin="${build:-$root/build/release}/bench/large/ringcast_bench_large"
  large_flags=(--rounds "$reps" --json "$out/large.json")
  ((quick)) && large_flags=(--rounds 1 --seconds 0.2 --latency-seconds 0.2 --min-latency-messages 200
                            --memcpy-seconds 0.05 --json "$out/large.json")
  {
    machine_notes
    rc=0
    "${run[@]}" "$large_bin" "${large_flags[@]}" "${xproc_extra[@]}" || rc=$?
    echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
    exit "$rc"  # 1 if a run lost or garbled a message
  } | tee "$out/large.txt"
  exit 0
fi

if [[ -n $baseline ]]; then
  # REV's benchmarks from a worktree of its own, removed however this ends.
  worktree=$(mktemp -d /tmp/ringcast-baseline-XXXXXX)
  rmdir "$worktree"
  git -C "$root" worktree add --detach "$worktree" "$baseline" >/dev/null
  trap 'git -C "$root" worktree remove --force "$worktree"' EXIT
  build_in "$worktree" "$worktree/build" ringcast_bench_micro ringcast_bench_xproc
  ab="$out/baseline"
  rm -rf "$ab" && mkdir -p "$ab"
  # 52-byte ring figures: the single-thread micro-benchmarks (the Mutex+deque
  # baseline rows are a control: its code is the same in both builds), one
  # consumer thread, and the cross-process harness at N = 1 and 4.
  micro=(--benchmark_filter='^(Push|PushNoConsumer|Recv|Lag|IsFullyDrained)/(ringcast|baseline)(/|$)|^Threads/ringcast(_own_handles)?/consumers:1/'
         --benchmark_repetitions=1 --benchmark_out_format=json)
  # shellcheck disable=SC2054  # the commas are the flags' list syntax
  xproc=(--transports ringcast --consumers 1,4 --modes saturation,rate --apis batch,single --repetitions 1
         --rate 100000)
  if ((quick)); then
    micro+=(--benchmark_min_time=0.05)
    xproc+=(--messages 200000 --rate-messages 5000)
  else
    xproc+=(--messages 2000000 --rate-messages 50000)
  fi
  machine_notes > "$ab/machine.txt"
  echo "baseline: $baseline ($(git -C "$root" rev-parse --short "$baseline"))" >> "$ab/machine.txt"
  for ((round = 1; round <= reps; round++)); do
    order=(old new)
    ((round % 2 == 0)) && order=(new old)  # ABBA: neither build always runs first
    for who in "${order[@]}"; do
      dir=$bin
      [[ $who == old ]] && dir=$worktree/build/bench/ring
      echo "== round $round: $who micro"
      "${run[@]}" "$dir/ringcast_bench_micro" "${micro[@]}" --benchmark_out="$ab/$who-micro-$round.json" >/dev/null
      echo "== round $round: $who xproc"
      "${run[@]}" "$dir/ringcast_bench_xproc" "${xproc[@]}" "${xproc_extra[@]}" --json "$ab/$who-xproc-$round.json" \
        | sed "s/^/  /"
    done
  done
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$ab/machine.txt"
  { cat "$ab/machine.txt"; echo; python3 "$root/bench/ring/ab_report.py" "$ab"; } | tee "$out/baseline.md"
  exit 0
fi

micro_flags=(--benchmark_repetitions="$reps" --benchmark_display_aggregates_only=true
             --benchmark_out="$out/micro.json" --benchmark_out_format=json)
xproc_flags=(--repetitions "$reps" --json "$out/xproc.json")
if ((quick)); then
  micro_flags=(--benchmark_repetitions=2 --benchmark_min_time=0.05 --benchmark_display_aggregates_only=true
               --benchmark_out="$out/micro.json" --benchmark_out_format=json)
  xproc_flags=(--repetitions 1 --messages 1000000 --peer-messages 100000 --rate-messages 10000
               --json "$out/xproc.json")
fi

machine_notes > "$out/machine.txt"

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
  doc="$root/docs/bench-history/notebook.md"
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
    echo "== spliced the tables into docs/bench-history/notebook.md"
    # docs/benchmarks.md follows the new cells; the two bench:figure markers
    # above the tables carry the run's date, load and commit, which only a
    # person knows.
    "$root/tools/bench-summary.py"
    echo "== rewrote docs/benchmarks.md's generated tables: set the date, load and commit of the bench:figure markers above bench:tables in docs/bench-history/notebook.md, then run tools/bench-summary.py again"
  else
    echo "bench.sh: docs/bench-history/notebook.md has no bench:tables markers; left it alone" >&2
  fi
fi
echo "done: $out"
