#!/usr/bin/env bash
# The benchmarks of issue 15: more consumer processes than cores. Runs the
# cross-process harness (ringcast vs Boost.Interprocess message_queue, in the
# same run) for N = 2, 4, 8 and 16 consumer processes at fixed offered rates
# of 1 k, 10 k and 100 k msgs/s (open loop, every message's one-way latency,
# each consumer's CPU use), then at saturation for N = 2 and 4 with both of
# ringcast's APIs. Consumers use the default wait (recv_wait, kSpinThenBlock)
# on a ring created without `wakeups`.
#
# usage: tools/bench-waits.sh [--realtime] [--repetitions N] [--out DIR]
#   --realtime       run under SCHED_FIFO priority 1 (chrt; needs CAP_SYS_NICE).
#                    The headline tables in docs/benchmarks.md use the normal
#                    scheduler; this is the second table.
#   --repetitions N  runs per cell (default 3; tables show medians)
#   --out DIR        where the text and JSON go (default: bench/ring/results)
# Prints the harness tables; writes DIR/waits[-realtime].{txt,json}.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/bench/ring/results"
reps=3
realtime=0
while (($#)); do
  case $1 in
    --realtime) realtime=1; shift ;;
    --repetitions) reps=$2; shift 2 ;;
    --out) out=$(realpath -m "$2"); shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench-waits.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

cd "$root"
cmake --preset release -DRINGCAST_BUILD_BENCHMARKS=ON >/dev/null
cmake --build --preset release --target ringcast_bench_xproc >/dev/null
bin="$root/build/release/bench/ring/ringcast_bench_xproc"
mkdir -p "$out"
run=()
tag=waits
if ((realtime)); then run=(timeout --signal=KILL 1800 chrt -f 1); tag=waits-realtime; fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "kernel: $(uname -srm)  cpus: $(nproc)  realtime: $realtime"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  "${run[@]}" "$bin" --transports ringcast,boost --consumers 2,4,8,16 --modes rate --rate 1000,10000,100000 \
    --rate-seconds 1 --repetitions "$reps" --idle auto --json "$out/$tag-rate.json"
  "${run[@]}" "$bin" --transports ringcast,boost --consumers 2,4 --modes saturation --apis single,batch \
    --messages 2000000 --peer-messages 1000000 --repetitions "$reps" --idle auto --json "$out/$tag-saturation.json"
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/$tag.txt"
