// Loopback plumbing for the broker and relay load generators: how servers are
// started and their CPU time (server_process.hpp). The sockets, processes,
// polling and RESP encoding (resp_client.hpp) come from tests/common.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <string>
#include <string_view>

#include <fmt/format.h>

#include "child_process.hpp"
#include "eventually.hpp"
#include "fd_io.hpp"
#include "server_process.hpp"
#include "tcp_loopback.hpp"

namespace ringcast::bench {

using test::ChildProcess;
using test::eventually;
using test::free_port;
using test::wait_accepting;

// How the load generators start servers: with stdout and stderr on /dev/null,
// so the tables are all the terminal shows. A ChildProcess dies with the
// benchmark and is stopped and reaped when it goes away.
inline const test::SpawnOptions kQuiet{.out = test::Stream::kDiscard, .err = test::Stream::kDiscard};

// The servers a load generator starts unless told otherwise (--broker and the
// like): the ones built with it, whose paths CMake passes as BROKER_EXE and
// RELAY_EXE, else the ones on PATH.
#ifdef BROKER_EXE
inline constexpr const char* kDefaultBrokerExe = BROKER_EXE;
#else
inline constexpr const char* kDefaultBrokerExe = "ringcast-broker";
#endif
#ifdef RELAY_EXE
inline constexpr const char* kDefaultRelayExe = RELAY_EXE;
#else
inline constexpr const char* kDefaultRelayExe = "ringcast-relay";
#endif

// 1.23 M, 4.5 k, 12.
inline std::string si(double v) {
  if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f} k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

}  // namespace ringcast::bench
