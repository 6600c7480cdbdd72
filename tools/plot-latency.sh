#!/usr/bin/env bash
# Plots the one-way latency histograms of a ringcast_bench_xproc JSON file.
#
# usage: tools/plot-latency.sh XPROC_JSON OUT_PNG [MODE] [CONSUMERS]
#   MODE       rate (default) or saturation
#   CONSUMERS  consumer count to plot (default 1)
#
# Left: share of messages per histogram bucket (log-scale latency axis), one
# curve per transport (first repetition). Right: latency by percentile
# (the same data as a cumulative distribution, tail to the right).
# Needs python3 (JSON -> data files) and gnuplot (gnuplot-nox).
set -euo pipefail

json=${1:?usage: plot-latency.sh XPROC_JSON OUT_PNG [MODE] [CONSUMERS]}
png=${2:?usage: plot-latency.sh XPROC_JSON OUT_PNG [MODE] [CONSUMERS]}
mode=${3:-rate}
consumers=${4:-1}
command -v gnuplot >/dev/null || { echo "plot-latency: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

title=$(python3 - "$json" "$work" "$mode" "$consumers" <<'PY'
import json, math, sys
path, work, mode, consumers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
doc = json.load(open(path))
seen = set()
for r in doc["runs"]:
    key = (r["transport"], r["api"])
    if r["mode"] != mode or r["consumers"] != consumers or key in seen:
        continue
    seen.add(key)
    total = sum(c for _, _, c in r["histogram"]) or 1
    name = r["transport"] if r["transport"] != "ringcast" else f"ringcast-{r['api']}"
    with open(f"{work}/{name}.hist", "w") as f:
        for lo, hi, c in r["histogram"]:
            f.write(f"{math.sqrt(max(lo, 1) * (hi + 1))} {c / total}\n")
    with open(f"{work}/{name}.pct", "w") as f:
        cum = 0
        for lo, hi, c in r["histogram"]:
            cum += c
            q = min(cum / total, 1 - 1e-7)
            f.write(f"{1 / (1 - q)} {hi}\n")
    lat = r["latency_ns"]
    print(f"{name} p50={lat['p50']} p99={lat['p99']} p99.9={lat['p999']} max={lat['max']}", file=sys.stderr)
rate = next((r["offered_rate"] for r in doc["runs"] if r["mode"] == mode), 0)
print(f"{mode} {'%.0f msgs/s' % rate if mode == 'rate' else ''}, {consumers} consumer(s)")
PY
)

plots_h="" plots_p=""
for f in "$work"/*.hist; do
  [[ -e $f ]] || { echo "plot-latency: no runs with mode=$mode consumers=$consumers in $json" >&2; exit 1; }
  n=$(basename "$f" .hist)
  plots_h+="${plots_h:+, }'$f' using 1:2 with steps lw 2 title '$n'"
  plots_p+="${plots_p:+, }'$work/$n.pct' using 1:2 with lines lw 2 title '$n'"
done

gnuplot <<GP
set terminal pngcairo size 1400,560 noenhanced font ",10"
set output '$png'
set multiplot layout 1,2 title "ringcast one-way latency, $title (from $(basename "$json"))"
set logscale x
set grid
set format x "%.0s%c"
set xlabel "one-way latency (ns, log scale)"
set ylabel "share of messages per bucket"
set key top right
plot $plots_h
set logscale xy
set format x "%g"
set format y "%.0s%c"
set xtics ("p50" 2, "p90" 10, "p99" 100, "p99.9" 1000, "p99.99" 10000, "p99.999" 100000)
set xrange [1:1e6]
set xlabel "percentile"
set ylabel "latency (ns, log scale)"
set key top left
plot $plots_p
unset multiplot
GP
echo "plot-latency: wrote $png"
