// Deadlines for tests and benchmarks: every wait on another thread, process or
// socket is bounded, so a broken peer fails a test instead of hanging it.
#pragma once

#include <chrono>

namespace ringcast::test {

using Deadline = std::chrono::steady_clock::time_point;

inline Deadline deadline_in(std::chrono::milliseconds d) { return std::chrono::steady_clock::now() + d; }

// Milliseconds until `d`, 0 once it has passed (a poll(2) timeout).
inline int ms_left(Deadline d) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - std::chrono::steady_clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

}  // namespace ringcast::test
