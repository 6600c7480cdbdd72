// Setup errors of the relay (docs/design.md, "Error model"): what Relay::start
// and MetricsServer::start return in a tl::expected, never as an exception.
#pragma once

#include <cstdint>
#include <string>

namespace ringcast::relay {

// Setup errors of the relay, in the shape every setup error of the public
// headers has (docs/design.md, "Errors"): a code, the errno of the failing
// system call (0 if none), text naming what failed, and message().
struct RelayError {
  enum class Code : std::uint8_t {
    kInvalidConfig,  // no rings, bad route, no sink, bad NATS subject
    kBroker,         // the broker did not start (detail: its message; sys_errno: its errno)
    kNats,           // the NATS options or connection could not be set up
    kThread,         // a reader thread could not be started; sys_errno says why
    kMetrics,        // the --metrics endpoint could not bind or start (MetricsServer)
    kRing,           // a --ring path holds a file that is not a ring (Relay::start)
  };
  Code code = Code::kInvalidConfig;
  int sys_errno = 0;  // errno of the failing call, 0 when not a system error
  std::string detail;
  // "invalid configuration: no --ring given", "thread: reader thread: Resource
  // temporarily unavailable": the code's name, the detail, and strerror(sys_errno)
  // when set (except for kBroker, whose detail already holds it).
  [[nodiscard]] std::string message() const;
};

}  // namespace ringcast::relay
