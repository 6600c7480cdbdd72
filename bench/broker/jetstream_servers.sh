# Sourced by the cluster history benchmarks (cluster_history_bench.sh,
# store_backlog_bench.sh): starts one JetStream nats-server on
# 127.0.0.1:24333 (R1) and three routed ones on 24441-24443 (R3, routes on
# 26441-26443), with their stores and logs under DIR, and adds their pids to
# the caller's `pids` array. NATS_DEBUG set: the servers log with -D (why a
# client connection closed, for diagnosis).
#
#   start_jetstream_servers DIR
start_jetstream_servers() {
  local dir=$1 nats i
  local dbg=()
  nats=$(command -v nats-server)
  [[ -n ${NATS_DEBUG:-} ]] && dbg=(-D)
  "$nats" "${dbg[@]}" -js -sd "$dir/r1" -a 127.0.0.1 -p 24333 >"$dir/r1.log" 2>&1 &
  pids+=($!)
  for i in 1 2 3; do
    "$nats" "${dbg[@]}" -js -sd "$dir/r3-$i" -n "r3-$i" -a 127.0.0.1 -p "2444$i" \
      --cluster "nats://127.0.0.1:2644$i" --cluster_name bench \
      --routes nats://127.0.0.1:26441,nats://127.0.0.1:26442,nats://127.0.0.1:26443 >"$dir/r3-$i.log" 2>&1 &
    pids+=($!)
  done
}
