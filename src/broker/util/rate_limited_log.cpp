#include "broker/util/rate_limited_log.hpp"

#include <chrono>
#include <cstdio>
#include <string>

#include <fmt/format.h>

namespace ringcast::broker {

void RateLimitedLog::write(std::string_view line) noexcept {
  const std::int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  // relaxed (all three): a rate limit, approximate under races.
  if (second_.exchange(now, std::memory_order_relaxed) != now) lines_.store(0, std::memory_order_relaxed);
  if (lines_.fetch_add(1, std::memory_order_relaxed) >= kBurst) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::uint64_t dropped = dropped_.exchange(0, std::memory_order_relaxed);
  try {
    const std::string text =
        dropped == 0 ? fmt::format("ringcast broker: {}: {}\n", topic_, line)
                     : fmt::format("ringcast broker: {}: {} ({} earlier lines not logged)\n", topic_, line, dropped);
    std::fputs(text.c_str(), stderr);
  } catch (...) {  // out of memory for a log line: nothing to do
  }
}

}  // namespace ringcast::broker
