#!/usr/bin/env bash
# Checks formatting (tools/format.sh --check, before anything is built), then
# builds and runs the tests: release (g++ -O3, test drivers outside tests/ring
# at -O0) runs the whole suite; ASan+UBSan
# (clang -O0, with the libFuzzer smoke runs) and TSan (g++ -O1), both unity
# builds (CMAKE_UNITY_BUILD in CMakePresets.json), build and run
# the parts whose code shares memory between threads (RINGCAST_TEST_PARTS in
# CMakePresets.json: ring, broker, relay, top, python; not tools, browser,
# install or bindings), except the cluster's namespace test, whose brokers are
# SIGKILLed so that a report would fail nothing (tests/relay/CMakeLists.txt;
# cluster_test drives the same failover in process). TSan also leaves out the
# hostile suite, for the same reason (tests/broker/CMakeLists.txt), and the
# test executables that never run a second thread (ONE_THREAD in
# tests/CMakeLists.txt). The fuzz smoke runs are 2 s each, after every seed.
# docs/design.md, "The test suite's budget", has the rule and the numbers.
# Installs missing packages first.
# The benchmarks are built in one tree only, ASan's when it is built (clang -O0
# compiles them for about half of what g++ -O2 costs, and a sanitizer tree
# compiles their own code uninstrumented), else
# release's; there ctest starts each with --help (bench/CMakeLists.txt).
# After the builds, tools/readme-test.py runs every block of README.md,
# docs/python.md and docs/relay.md against the release build (the benchmark
# blocks against the tree that has them) and checks docs/ring-top.md's
# captured output.
# Not run here: tools/mutants.py (minutes per mutation), which breaks each
# critical invariant in turn and checks that a test fails; tools/lint.sh
# (clang-tidy over src/ and include/, about 6 CPU-minutes: too much for the
# suite's time budget), which is run by hand before sending a change.
# First of all, tools/bench-summary.py --check: docs/benchmarks.md's summary
# must match the notebook's marked tables; and tools/layout-docs.py: every
# offset in docs/layout.md must be the one include/ringcast/layout.hpp asserts;
# and tools/include-floors.py: src/broker's includes run down the floors that
# docs/architecture.md draws.
# A failed test's output is printed again after the summary, so the end of the
# log (often all a CI record keeps) names the test and shows why.
#
#   tools/test.sh                 everything (what CI runs)
#   tools/test.sh release asan    only the named configurations
set -euo pipefail
cd "$(dirname "$0")/.."

configs=("$@")
((${#configs[@]})) || configs=(release asan tsan)

tools/install-deps.sh
# Formatting first: it takes seconds, and a tree that fails it fails CI anyway.
echo "=== format: tools/format.sh --check"
if ! tools/format.sh --check; then
  printf '%s\n' "=== summary" "format: FAILED (nothing built; tools/format.sh fixes it)"
  exit 1
fi
jobs=$(nproc)
bench_tree=release
[[ " ${configs[*]} " == *" asan "* ]] && bench_tree=asan
summary=()
failed=0
failures=()   # ctest logs (build/<preset>/ctest.log) of the presets with a failed test
echo "=== docs/benchmarks.md: the summary against the notebook's marked tables"
if tools/bench-summary.py --check; then
  summary+=("bench summary: passed")
else
  summary+=("bench summary: FAILED (run tools/bench-summary.py)")
  failed=1
fi
echo "=== docs/layout.md: every offset against include/ringcast/layout.hpp"
if tools/layout-docs.py; then
  summary+=("layout docs: passed")
else
  summary+=("layout docs: FAILED (docs/layout.md and layout.hpp disagree)")
  failed=1
fi
echo "=== src/broker: includes run down the floors of docs/architecture.md"
if tools/include-floors.py; then
  summary+=("include floors: passed")
else
  summary+=("include floors: FAILED (an include runs upward or sideways; see above)")
  failed=1
fi
for preset in "${configs[@]}"; do
  start=$SECONDS
  echo "=== $preset: configure and build"
  benchmarks=OFF
  [[ $preset == "$bench_tree" ]] && benchmarks=ON
  cmake --preset "$preset" -DRINGCAST_BUILD_BENCHMARKS=$benchmarks >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "=== $preset: test"
  label_args=()
  [[ $preset == fuzz ]] && label_args=(-L fuzz)
  log="build/$preset/ctest.log"
  if ctest --test-dir "build/$preset" -j "$jobs" --output-on-failure "${label_args[@]}" | tee "$log"; then
    summary+=("$preset: passed ($((SECONDS - start)) s)")
  else
    names=$(sed 's/^[0-9]*://' "build/$preset/Testing/Temporary/LastTestsFailed.log" 2>/dev/null | tr '\n' ' ')
    summary+=("$preset: FAILED ($((SECONDS - start)) s): ${names:-see above}")
    failures+=("$log")
    failed=1
  fi
done
# The README as a newcomer runs it, against the release build.
if [[ " ${configs[*]} " == *" release "* ]]; then
  start=$SECONDS
  echo "=== readme: every block of README.md and the docs it runs; the tools' reference pages"
  if tools/readme-test.py --build build/release --bench-build "build/$bench_tree" \
    README.md docs/python.md docs/relay.md docs/ring-top.md &&
    tools/tool-docs.py --build build/release --check; then
    summary+=("readme: passed ($((SECONDS - start)) s)")
  else
    summary+=("readme: FAILED ($((SECONDS - start)) s)")
    failed=1
  fi
fi
for log in "${failures[@]}"; do
  echo "=== failed in $log (each failed test's output, first 60 lines)"
  # A failed test's block runs from its "***Failed"/"***Timeout"/"***Exception"
  # line to the next test's "Start" or result line, or ctest's closing count.
  awk '/Test +#[0-9]+: .*\*\*\*(Failed|Timeout|Exception)/ { on = 1; n = 0; print; next }
       on && (/^ +Start +[0-9]+: / || /^[0-9]+\/[0-9]+ Test +#/ || /^[0-9]+% tests passed/) { on = 0 }
       on && ++n <= 60 { print }' "$log"
done
printf '%s\n' "=== summary" "${summary[@]}"
exit $failed
