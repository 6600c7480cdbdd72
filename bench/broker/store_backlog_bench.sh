#!/usr/bin/env bash
# Deeper variant of bench/broker/cluster_history_bench.sh's QoS 0 part, made to
# reach --cluster-max-pending-stores (65,536 stores awaiting JetStream's ack):
# redis-benchmark -P 1024 -c 4 PUBLISH of 52 B on the retained channel, against
# a broker with --cluster on one JetStream nats-server (R1) and one on three
# routed ones (R3), each broker with --io-threads 1 so the publishers and a
# second client share one I/O thread. The second client (ping_probe.py) sends
# PING every 100 ms on its own connection during the run and times each PONG.
# After each run: the broker's INFO cluster (history stalls/pending/stored/
# failed/timeouts) and INFO stats (refused_publishes), and redis-benchmark's
# first error (redis-benchmark 7 stops at the first error reply: -e has no
# effect). Then it polls INFO until every message is stored (or failed, timed
# out or refused; at most 60 s) for the rate of stores. The columns stalls to
# error_lines are at the end of redis-benchmark's run; final_* after that wait,
# and broker_cpu_s is the broker's user+system CPU from its start to then.
# Same servers and ports as the repository script: never run both at once.
#
#   store_backlog_bench.sh BUILD_DIR [MESSAGES] [OUT_DIR]
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
build=${1:?BUILD_DIR}
messages=${2:-400000}
out=${3:-$(mktemp -d)}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
broker="$build/tools/ringcast-broker/ringcast-broker"
nats=$(command -v nats-server)
for exe in "$broker" "$nats" "$(command -v redis-benchmark)"; do
  [[ -x $exe ]] || { echo "missing: $exe" >&2; exit 1; }
done
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  cp "$tmp"/*.log "$out/" 2>/dev/null || true  # the nats-servers' logs
  rm -rf "$tmp"
}
trap cleanup EXIT
# shellcheck source=bench/broker/jetstream_servers.sh
source "$here/jetstream_servers.sh"
start_jetstream_servers "$tmp"

declare -A cluster_args=(
  [r1]="--cluster=nats://127.0.0.1:24333 --cluster-history-replicas=1"
  [r3]="--cluster=nats://127.0.0.1:24441,nats://127.0.0.1:24442,nats://127.0.0.1:24443 --cluster-history-replicas=3"
)
field() { tr -d '\r' <"$1" | awk -F: -v k="$2" '$1 == k {print $2; f = 1} END {if (!f) print "-"}'; }
payload=$(printf 'x%.0s' $(seq 52))
port=24600
printf 'setup\trps\twall_s\tall_stored_s\tstored_per_s\tstalls\tpending\tstored\tstore_failed\tstore_timeouts\trefused_publishes\terror_lines\tfinal_stored\tfinal_timeouts\tbroker_cpu_s\tcpu_us_per_stored\tpings\tping_p50_ms\tping_p99_ms\tping_max_ms\tpings_over_100ms\n'
for setup in r1 r3; do
  port=$((port + 1))
  # shellcheck disable=SC2086 # the cluster flags split on purpose
  "$broker" --port "$port" --ws-port 0 --io-threads 1 --history 'bench=1000000' ${cluster_args[$setup]} \
    >"$out/broker-$setup.log" 2>&1 &
  bpid=$!
  pids+=("$bpid")
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  rm -f "$tmp/stop"
  python3 "$here/ping_probe.py" "$port" "$out/ping-$setup.txt" "$tmp/stop" &
  ppid=$!
  sleep 0.5  # a few idle PINGs first
  t0=$(date +%s.%N)
  redis-benchmark -p "$port" -P 1024 -c 4 -n "$messages" -e --csv PUBLISH bench "$payload" \
    >"$out/rb-$setup.txt" 2>"$out/rb-$setup.err" || true
  t1=$(date +%s.%N)
  redis-cli -p "$port" info cluster >"$out/info-cluster-$setup.txt"
  redis-cli -p "$port" info stats >"$out/info-stats-$setup.txt"
  touch "$tmp/stop"
  # Then until every message is acknowledged by JetStream (or failed, timed
  # out or refused), at most 60 s: the rate of stores, not of acceptance.
  give_up=$((SECONDS + 60))
  while ((SECONDS < give_up)); do
    redis-cli -p "$port" info cluster >"$tmp/c.txt"
    redis-cli -p "$port" info stats >"$tmp/s.txt"
    done_=$(( $(field "$tmp/c.txt" cluster_history_stored) + $(field "$tmp/c.txt" cluster_history_store_failed) \
      + $(field "$tmp/c.txt" cluster_history_store_timeouts) + $(field "$tmp/s.txt" refused_publishes) ))
    ((done_ >= messages)) && break
    sleep 0.1
  done
  t2=$(date +%s.%N)
  cp "$tmp/c.txt" "$out/info-cluster-drained-$setup.txt"
  wait "$ppid" 2>/dev/null || true
  tck=$(getconf CLK_TCK)
  cpu=$(awk -v t="$tck" '{printf "%.2f", ($14 + $15) / t}' "/proc/$bpid/stat")  # the broker's user+system CPU, start to drained
  kill "$bpid"
  wait "$bpid" 2>/dev/null || true
  rps=$(tr '\r' '\n' <"$out/rb-$setup.txt" | awk -F'","' '/^"PUBLISH/{print $2}' | tail -1)
  errs=$(grep -c 'Error from server' "$out/rb-$setup.txt" || true)
  ping=$(grep -v error "$out/ping-$setup.txt" | sort -n | awk '{a[NR] = $1} END {
    if (NR == 0) {print "0\t-\t-\t-\t-"; exit}
    o = 0; for (i = 1; i <= NR; i++) if (a[i] > 100) o++
    i50 = int((NR + 1) * 0.5); if (i50 < 1) i50 = 1; i99 = int(NR * 0.99 + 0.5); if (i99 < 1) i99 = 1
    printf "%d\t%s\t%s\t%s\t%d", NR, a[i50], a[i99], a[NR], o}')
  c="$out/info-cluster-$setup.txt"
  printf '%s\t%s\t%.2f\t%.2f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\n' "$setup" "${rps:--}" "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t0" | bc)" \
    "$(echo "$(field "$tmp/c.txt" cluster_history_stored) / ($t2 - $t0)" | bc -l)" \
    "$(field "$c" cluster_history_stalls)" "$(field "$c" cluster_history_pending)" \
    "$(field "$c" cluster_history_stored)" "$(field "$c" cluster_history_store_failed)" \
    "$(field "$c" cluster_history_store_timeouts)" "$(field "$out/info-stats-$setup.txt" refused_publishes)" \
    "$errs" "$(field "$tmp/c.txt" cluster_history_stored)" "$(field "$tmp/c.txt" cluster_history_store_timeouts)" \
    "$cpu" "$(echo "$cpu * 1000000 / $(field "$tmp/c.txt" cluster_history_stored)" | bc -l)" "$ping"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
