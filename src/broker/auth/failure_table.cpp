#include "broker/auth/failure_table.hpp"

#include <algorithm>

namespace ringcast::broker {

FailureTable::Verdict FailureTable::record(std::string_view source, std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = table_.find(std::string(source));
  if (it == table_.end()) {
    if (table_.size() >= kMaxSources) make_room(now);
    it = table_.emplace(std::string(source), Entry{}).first;
  } else if (now - it->second.last > kForgetAfter) {
    it->second.failures = 0;
  }
  Entry& e = it->second;
  e.failures = std::min(e.failures + 1, std::uint32_t{1} << 30);
  e.last = now;
  // Invariant 2: kMaxDelay is reached by the 7th failure; shifting further
  // would only overflow.
  const std::uint32_t doublings = std::min(e.failures - 1, std::uint32_t{16});
  return {e.failures, std::min(kBaseDelay * (std::int64_t{1} << doublings), std::chrono::milliseconds(kMaxDelay))};
}

std::size_t FailureTable::sources() const {
  std::lock_guard lock(mu_);
  return table_.size();
}

void FailureTable::make_room(std::chrono::steady_clock::time_point now) {
  std::erase_if(table_, [now](const auto& kv) { return now - kv.second.last > kForgetAfter; });
  if (table_.size() < kMaxSources) return;
  const auto oldest = std::min_element(table_.begin(), table_.end(),
                                       [](const auto& a, const auto& b) { return a.second.last < b.second.last; });
  table_.erase(oldest);
}

}  // namespace ringcast::broker
