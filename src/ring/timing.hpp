// The ring's clock and a spin loop's pause, shared by the slow paths
// (broadcast_ring.cpp) and the blocking waits (waiting.cpp).
#pragma once

#include <cstdint>
#include <ctime>

namespace ringcast::detail {

// CLOCK_MONOTONIC in nanoseconds: spin budgets, timeouts, reap_on_full's
// default clock.
inline std::int64_t monotonic_ns() noexcept {
  struct timespec ts {};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// One pause in a spin loop: lets a sibling hyperthread run and saves power.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace ringcast::detail
