#!/usr/bin/env bash
# Quick start on a fresh machine: install what is missing, build everything
# (release: library, tools, tests, benchmarks), run the demo. Arguments go to
# the demo (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
exec build/release/tools/demo/ringcast-demo "$@"
