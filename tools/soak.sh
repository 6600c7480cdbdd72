#!/usr/bin/env bash
# Crash soak (not in CI): 1e9 messages, 3 consumers, random SIGKILLs of
# consumers and the producer. Arguments go to ring_soak (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target ring_soak >/dev/null
exec build/release/tests/ring/ring_soak "$@"
