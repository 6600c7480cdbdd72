#!/usr/bin/env bash
# usage: run_install_test.sh BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1 consumer=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null

# 1. CMake package.
cmake -S "$consumer" -B "$work/cmake-build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
"$work/cmake-build/consumer"
"$work/cmake-build/c_consumer"

# 2. pkg-config.
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/lib/x86_64-linux-gnu/pkgconfig"
# shellcheck disable=SC2046
c++ -o "$work/pkgconfig-consumer" "$consumer/main.cpp" $(pkg-config --cflags --libs ringcast)
"$work/pkgconfig-consumer"

# 3. The C ABI, from C, through pkg-config.
# shellcheck disable=SC2046
cc -std=c11 -o "$work/c-consumer" "$consumer/main.c" $(pkg-config --cflags --libs ringcast-c)
"$work/c-consumer"
echo "install test: the four consumers built and ran"
