// Time sources of the core.
//
// Thread safety: every function and Clock::now() may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace ringcast::broker {

// Injected monotonic time source, so soft-limit and pacing timing is testable
// without sleeping.
class Clock {
 public:
  virtual ~Clock() = default;
  [[nodiscard]] virtual std::chrono::nanoseconds now() const noexcept = 0;
};

// std::chrono::steady_clock. Lives for the whole program.
[[nodiscard]] const Clock& steady_clock_source() noexcept;

// Wall-clock milliseconds since the Unix epoch (std::chrono::system_clock): the
// `timestamp` of a delivered message. Not monotonic; never used for timing.
[[nodiscard]] std::int64_t wall_clock_ms() noexcept;

}  // namespace ringcast::broker
