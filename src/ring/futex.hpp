// Cross-process futex wait/wake on a 32-bit word in a shared mapping (not
// FUTEX_PRIVATE: waiters and wakers are different processes).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ringcast::detail {

// Sleeps while *word == expected, at most `timeout`. Returns on wake-up,
// value change, signal or timeout; callers re-check their condition.
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::chrono::nanoseconds timeout) noexcept;
void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept;

}  // namespace ringcast::detail
