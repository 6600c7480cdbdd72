// Cross-process futex wait/wake on a 32-bit word in a shared mapping (not
// FUTEX_PRIVATE: waiters and wakers are different processes). The bitset
// variants let a waker pick which sleepers it wakes: a wake reaches only the
// sleepers whose bitset shares a bit with its own (futex(2), FUTEX_WAIT_BITSET).
#pragma once

#include <atomic>
#include <cstdint>

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

}  // namespace ringcast::detail
