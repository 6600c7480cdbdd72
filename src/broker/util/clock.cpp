#include "broker/util/clock.hpp"

namespace ringcast::broker {

namespace {

class SteadyClockSource final : public Clock {
 public:
  [[nodiscard]] std::chrono::nanoseconds now() const noexcept override {
    return std::chrono::steady_clock::now().time_since_epoch();
  }
};

}  // namespace

const Clock& steady_clock_source() noexcept {
  static const SteadyClockSource kClock;
  return kClock;
}

std::int64_t wall_clock_ms() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace ringcast::broker
