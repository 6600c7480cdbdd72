// What every sleeper on a ring's data_wait line shares, whether it sleeps on
// that line alone (BroadcastRing::recv_wait, waiting.cpp) or on many rings'
// lines at once (WaitSet, wait_set.cpp): the futex bits of an epoch, the wake
// chain's pass-on rule and the caps on a sleep. docs/memory-ordering.md,
// "Sleeping and waking", argues the handshake.
#pragma once

#include <atomic>
#include <cstdint>

#include "ringcast/layout.hpp"

namespace ringcast::detail {

// A sleep not covered by a heavy barrier (membarrier refused, ring without
// wakeups) is capped: a wake-up lost to the race is then at most this late.
inline constexpr std::int64_t kUncoveredSleepNs = 1'000'000;

// A consumer asleep on data_wait re-checks at least this often: if the
// consumer woken before it is stopped (SIGSTOP, a debugger) or killed before
// it passes the wake-up on, the rest of the chain is this late, not asleep
// until its timeout. Idle consumers pay one futex round trip per interval.
inline constexpr std::int64_t kChainRescueNs = 100'000'000;

// The futex bits of the sleepers of one epoch (the epoch modulo 32). A wake
// passed on reaches only the sleepers of the epoch that ended, not consumers
// that went back to sleep since; a sleeper 32 epochs older is woken too,
// which costs one spurious wake-up.
inline std::uint32_t epoch_bits(std::uint32_t signal) noexcept { return 1U << ((signal / kSignalEpochStep) % 32U); }

// Whether a consumer woken from the epoch value `slept` must wake the rest of
// its epoch: yes unless the word shows that the wake which ended that epoch
// woke every sleeper of it (the next epoch, kSignalChained clear). Only the
// producer's CAS writes bit 2, and the later modifications within an epoch
// keep it, so a relaxed load suffices: a stale value shows an older epoch,
// and the consumer passes the wake on, which is never wrong.
inline bool must_pass_on(const layout::WaitLine& line, std::uint32_t slept) noexcept {
  const std::uint32_t now = line.signal.load(std::memory_order_relaxed);
  const bool next_epoch = now / kSignalEpochStep == slept / kSignalEpochStep + 1;
  return !next_epoch || (now & kSignalChained) != 0;
}

}  // namespace ringcast::detail
