#include <cstring>

#include <fmt/format.h>

#include "ringcast/broker/broker.hpp"
#include "ringcast/broker/config.hpp"

namespace ringcast::broker {

std::string_view to_string(OverflowPolicy p) noexcept {
  switch (p) {
    case OverflowPolicy::kDropOldest:
      return "drop-oldest";
    case OverflowPolicy::kDropNewest:
      return "drop-newest";
    case OverflowPolicy::kDisconnect:
      return "disconnect";
  }
  return "unknown";
}

std::optional<OverflowPolicy> parse_overflow_policy(std::string_view s) noexcept {
  auto eq = [s](std::string_view name) {
    if (s.size() != name.size()) return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const char c = (s[i] >= 'A' && s[i] <= 'Z') ? static_cast<char>(s[i] - 'A' + 'a') : s[i];
      if (c != name[i]) return false;
    }
    return true;
  };
  for (OverflowPolicy p :
       {OverflowPolicy::kDropOldest, OverflowPolicy::kDropNewest, OverflowPolicy::kDisconnect}) {
    if (eq(to_string(p))) return p;
  }
  return std::nullopt;
}

std::string BrokerError::message() const {
  std::string_view what;
  switch (code) {
    case Code::kInvalidConfig:
      what = "invalid configuration";
      break;
    case Code::kBadAddress:
      what = "bad bind address";
      break;
    case Code::kBind:
      what = "cannot listen";
      break;
    case Code::kThread:
      what = "cannot start I/O thread";
      break;
  }
  if (sys_errno != 0) return fmt::format("{} {}: {}", what, detail, std::strerror(sys_errno));
  return fmt::format("{}: {}", what, detail);
}

}  // namespace ringcast::broker
