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

# 1b. The ring alone, COMPONENTS ring, with every package of the broker's
# turned off (a find_dependency of one fails the configure), and none of their
# headers reached by the application's includes.
cmake -S "$(dirname "$consumer")/ring_only" -B "$work/ring-build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" --no-warn-unused-cli \
  -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON >/dev/null
cmake --build "$work/ring-build" >/dev/null
"$work/ring-build/ring_only"
if c++ -std=c++20 -M -I"$work/prefix/include" "$consumer/main.cpp" | grep -E '/(boost|openssl|nlohmann|fmt)/|lmdb\.h'; then
  echo "install test: the ring's headers include a header of the broker's dependencies (above)" >&2
  exit 1
fi

# 2. pkg-config.
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/lib/x86_64-linux-gnu/pkgconfig"
# shellcheck disable=SC2046
c++ -o "$work/pkgconfig-consumer" "$consumer/main.cpp" $(pkg-config --cflags --libs ringcast)
"$work/pkgconfig-consumer"
# ringcast.pc is the ring alone; ringcast-broker.pc brings the broker's libraries.
if pkg-config --libs ringcast | grep -E -- '-l(fmt|ssl|crypto|lmdb)'; then
  echo "install test: ringcast.pc links a library of the broker's (above)" >&2
  exit 1
fi
pkg-config --libs ringcast-broker | grep -q -- '-lringcast_broker'

# 3. The C ABI, from C, through pkg-config.
# shellcheck disable=SC2046
cc -std=c11 -o "$work/c-consumer" "$consumer/main.c" $(pkg-config --cflags --libs ringcast-c)
"$work/c-consumer"
echo "install test: the C++, ring-only, pkg-config and C consumers built and ran"
