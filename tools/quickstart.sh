#!/usr/bin/env bash
# Quick start on a fresh machine: install what is missing, build (release),
# run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target ringcast-demo ringcast-cli
exec build/release/tools/demo/ringcast-demo "$@"
