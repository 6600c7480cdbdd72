// Cross-process futex wait/wake on a 32-bit word in a shared mapping (not
// FUTEX_PRIVATE: waiters and wakers are different processes). The bitset
// variants let a waker pick which sleepers it wakes: a wake reaches only the
// sleepers whose bitset shares a bit with its own (futex(2), FUTEX_WAIT_BITSET).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

namespace ringcast::detail {

// Matches every sleeper (FUTEX_BITSET_MATCH_ANY).
inline constexpr std::uint32_t kFutexAnyBits = 0xFFFF'FFFFU;

// Sleeps while *word == expected, until a futex_wake whose bitset shares a bit
// with `bits`, a signal, or CLOCK_MONOTONIC reaching `deadline_ns`. Returns
// true only when woken by a wake (or, rarely, spuriously); false on timeout,
// signal, or a value that already differed. Callers re-check their condition.
bool futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::uint32_t bits,
                std::int64_t deadline_ns) noexcept;
// Wakes at most `count` sleepers of `word` whose bits share one with `bits`;
// returns how many it woke.
int futex_wake(std::atomic<std::uint32_t>& word, int count, std::uint32_t bits) noexcept;

// The most words one futex_wait_any takes (FUTEX_WAITV_MAX).
inline constexpr std::size_t kFutexWaitAnyMax = 128;
// One word of a futex_wait_any: sleep while *word == expected.
struct FutexWaiter {
  std::atomic<std::uint32_t>* word;
  std::uint32_t expected;
};
// What futex_wait_any saw.
enum class WaitAny : std::uint8_t {
  kWoken,        // a wake on one of the words (or, rarely, spuriously)
  kNotSleeping,  // timeout, signal, or a word that already differed
  kUnsupported,  // the kernel has no futex_waitv (ENOSYS: before Linux 5.16)
};
// Sleeps on every word of `waiters` (at most kFutexWaitAnyMax) at once, until
// a futex_wake on any of them (whatever its bits), a signal, or
// CLOCK_MONOTONIC reaching `deadline_ns`: futex_waitv(2). Callers re-check
// their conditions, on every word: one return may stand for several wakes.
WaitAny futex_wait_any(std::span<const FutexWaiter> waiters, std::int64_t deadline_ns) noexcept;

}  // namespace ringcast::detail
