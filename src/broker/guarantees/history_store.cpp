#include "broker/guarantees/history_store.hpp"

#include <random>

#include <fmt/format.h>

#include "ringcast/error.hpp"

namespace ringcast::broker {

std::string HistoryError::message() const { return error_message({}, detail, sys_errno); }

std::string new_history_epoch() {
  std::random_device rd;
  const std::uint64_t v = (std::uint64_t{rd()} << 32) ^ rd();
  return fmt::format("{:016x}", v);
}

}  // namespace ringcast::broker
