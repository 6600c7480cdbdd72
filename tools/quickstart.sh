#!/usr/bin/env bash
# Quick start on a fresh machine: install what is missing, build the library,
# the tools and the Python module (release; the `ringcast-tools` target, 85
# build steps: about 2 CPU-minutes, under 6 minutes on a busy 2-core machine),
# run the demo. Tests and benchmarks are built by tools/test.sh and
# tools/bench.sh. Arguments go to the demo (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake --preset release >/dev/null
echo "quickstart: building the library, the tools and the Python module (the first build takes a few minutes)"
cmake --build --preset release --target ringcast-tools
exec build/release/tools/demo/ringcast-demo "$@"
