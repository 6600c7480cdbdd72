#!/usr/bin/env bash
# Installs the Debian packages ringcast builds, tests and benchmarks with.
# Idempotent: asks apt only for what dpkg does not already have.
set -euo pipefail

packages=(
  cmake g++ clang libclang-rt-14-dev ninja-build pkg-config
  # LLVM's linker: the asan preset links with it (RINGCAST_LINKER=lld), about
  # 1 s less per executable than GNU ld there.
  lld
  libboost-dev libexpected-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libncurses-dev tmux nlohmann-json3-dev
  libhiredis-dev redis-tools redis-server
  libnats-dev nats-server
  libzmq3-dev gnuplot-nox python3
  # The large-message benchmark's iceoryx peer (bench/large): iox-roudi and the
  # posh C++ API (2.0.x in Debian 12); without them that peer is skipped.
  iceoryx libiceoryx-posh-dev
  # The Python module (src/python), its tests and benchmark; for /usr/bin/python3.
  pybind11-dev python3-dev python3-numpy python3-pytest python3-zmq
  # WebSocket transport: token HMAC (OpenSSL), the WebSocket client tests use,
  # and the headless browser that opens the live page in CI.
  libssl-dev python3-websockets chromium
  # TLS tests: redis-py with ssl=True (tests/broker/tls; skipped without it) and
  # the openssl CLI that makes their certificates (and the README's).
  python3-redis openssl
  # Persisted history and QoS 1 state (--data-dir).
  liblmdb-dev
  # The cluster's fault test makes network namespaces and veth links (ip), and
  # drops packets on one link (nft; the kernel here has no netem for delay).
  iproute2 nftables
  # The Go and Rust bindings (src/bindings, tests/bindings): Debian's own
  # toolchains, used offline (the bindings have no dependencies).
  golang-go rustc cargo
  # Format and lint checks (tools/test.sh, tools/lint.sh).
  clang-format clang-tidy
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# redis-server's package starts a system instance on 6379; ringcast's tests
# start their own on loopback ports, so the system one is not needed.
echo "install-deps: done"
