// Setup errors of the broker (docs/design.md, "Errors"): what Broker::start
// and validate() return in a tl::expected, never as an exception.
#pragma once

#include <cstdint>
#include <string>

namespace ringcast::broker {

struct BrokerError {
  enum class Code : std::uint8_t {
    kInvalidConfig,  // a limit is zero or inconsistent (detail says which)
    kBadAddress,     // bind_address is not an IP address
    kBind,           // bind/listen failed; sys_errno says why
    kThread,         // an I/O thread could not be started; sys_errno says why
    kHistory,        // the history data directory cannot be used (corrupt, foreign, newer, I/O)
  };
  Code code = Code::kInvalidConfig;
  int sys_errno = 0;  // errno of the failing call, 0 when not a system error
  std::string detail;

  // "cannot listen 127.0.0.1:6390: Address already in use" and the like:
  // what failed, the detail, and strerror(sys_errno) when it is set.
  [[nodiscard]] std::string message() const;
};

}  // namespace ringcast::broker
