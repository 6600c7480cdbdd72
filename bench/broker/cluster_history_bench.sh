#!/usr/bin/env bash
# What a broker node accepts on a retained channel when the cluster keeps the
# history in JetStream (docs/cluster.md, "History"; issue 36's "History/QoS 1
# mode" target), against one node keeping it in memory, in one run:
#   * QoS 1: one WebSocket publisher, each publish answered by puback once
#     stored (ringcast-ws-bench --mode qos1, one acking subscriber);
#   * QoS 0: PUBLISH pipelined 64 deep by redis-benchmark, no subscriber.
# Three setups: one broker with --history in memory; a broker with --cluster on
# one JetStream nats-server (R1); a broker with --cluster on three routed
# JetStream nats-servers (R3). The script starts every server on loopback
# ports of a private range, in a temp dir, and stops them at the end.
#
#   bench/broker/cluster_history_bench.sh [BUILD_DIR] [MESSAGES]
set -euo pipefail
build=${1:-build/release}
messages=${2:-20000}
broker="$build/tools/ringcast-broker/ringcast-broker"
ws_bench="$build/bench/ws/ringcast-ws-bench"
nats=$(command -v nats-server)
for exe in "$broker" "$ws_bench" "$nats" "$(command -v redis-benchmark)"; do
  [[ -x $exe ]] || { echo "missing: $exe (build the release preset; tools/install-deps.sh)" >&2; exit 1; }
done
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# One JetStream server on 24333; three routed ones on 24441-24443.
# shellcheck source=bench/broker/jetstream_servers.sh
source "$(dirname "$0")/jetstream_servers.sh"
start_jetstream_servers "$tmp"

declare -A cluster_args=(
  [memory]=""
  [r1]="--cluster=nats://127.0.0.1:24333 --cluster-history-replicas=1"
  [r3]="--cluster=nats://127.0.0.1:24441,nats://127.0.0.1:24442,nats://127.0.0.1:24443 --cluster-history-replicas=3"
)
declare -A qos1 qos0
port=24500
for setup in memory r1 r3; do
  echo "== $setup: QoS 1, one WebSocket publisher, $messages messages" >&2
  args=(--broker-arg=--history=bench=1000000)
  for a in ${cluster_args[$setup]}; do args+=("--broker-arg=$a"); done
  qos1[$setup]=$("$ws_bench" --broker "$broker" --mode qos1 --servers ringcast --subscribers 1 --payload 52 \
    --messages "$messages" --runs 3 "${args[@]}" | awk -F'|' '/^\| 1 \| 52 /{gsub(/ /, "", $5); print $5}')
  echo "== $setup: QoS 0, PUBLISH pipelined 64 deep, $((messages * 10)) messages" >&2
  port=$((port + 1))
  # shellcheck disable=SC2086 # the cluster flags split on purpose
  "$broker" --port "$port" --ws-port 0 --history 'bench=1000000' ${cluster_args[$setup]} >"$tmp/broker-$setup.log" 2>&1 &
  bpid=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  qos0[$setup]=$(redis-benchmark -p "$port" -P 64 -c 1 -n $((messages * 10)) -q \
    PUBLISH bench "$(printf 'x%.0s' $(seq 52))" 2>/dev/null | tr '\r' '\n' | awk '/requests per second/{print $(NF-5)}' | tail -1)
  kill "$bpid"
  wait "$bpid" 2>/dev/null || true
done
echo
echo "| setup | QoS 1 pubacks/s (one publisher) | QoS 0 PUBLISH/s (pipelined) |"
echo "|---|---|---|"
echo "| one node, history in memory | ${qos1[memory]} | ${qos0[memory]} |"
echo "| cluster, JetStream R1 (one nats-server) | ${qos1[r1]} | ${qos0[r1]} |"
echo "| cluster, JetStream R3 (three nats-servers) | ${qos1[r3]} | ${qos0[r3]} |"
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
