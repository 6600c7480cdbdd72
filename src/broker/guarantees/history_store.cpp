#include "broker/guarantees/history_store.hpp"

#include <random>

#include <fmt/format.h>

#include "ringcast/error.hpp"

namespace ringcast::broker {

std::string HistoryError::message() const { return error_message({}, detail, sys_errno); }

std::string_view to_string(FsyncMode m) noexcept {
  switch (m) {
    case FsyncMode::kAlways:
      return "always";
    case FsyncMode::kBatch:
      return "batch";
    case FsyncMode::kOff:
      return "off";
  }
  return "?";
}

tl::expected<FsyncMode, std::string> parse_fsync_mode(std::string_view s) {
  for (FsyncMode m : {FsyncMode::kAlways, FsyncMode::kBatch, FsyncMode::kOff})
    if (s == to_string(m)) return m;
  return tl::unexpected(fmt::format("--fsync '{}': expected always, batch or off", s));
}

std::string new_history_epoch() {
  std::random_device rd;
  const std::uint64_t v = (std::uint64_t{rd()} << 32) ^ rd();
  return fmt::format("{:016x}", v);
}

}  // namespace ringcast::broker
