#include "futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

namespace ringcast::detail {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t),
              "the kernel reads the futex word as a plain 32-bit integer");
static_assert(kFutexAnyBits == FUTEX_BITSET_MATCH_ANY);

bool futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::uint32_t bits,
                std::int64_t deadline_ns) noexcept {
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline.
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(deadline_ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(deadline_ns % 1'000'000'000);
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_BITSET, expected, &ts, nullptr,
                   bits) == 0;
}

int futex_wake(std::atomic<std::uint32_t>& word, int count, std::uint32_t bits) noexcept {
  const long woken =
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_BITSET, count, nullptr, nullptr, bits);
  return woken > 0 ? static_cast<int>(woken) : 0;
}

WaitAny futex_wait_any(std::span<const FutexWaiter> waiters, std::int64_t deadline_ns) noexcept {
  static_assert(kFutexWaitAnyMax == FUTEX_WAITV_MAX);
  struct futex_waitv v[FUTEX_WAITV_MAX] {};
  const std::size_t n = std::min(waiters.size(), kFutexWaitAnyMax);
  for (std::size_t i = 0; i < n; ++i) {
    v[i].val = waiters[i].expected;
    v[i].uaddr = reinterpret_cast<std::uintptr_t>(waiters[i].word);
    v[i].flags = FUTEX_32;  // shared: no FUTEX_PRIVATE_FLAG, the wakers are other processes
  }
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(deadline_ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(deadline_ns % 1'000'000'000);
  if (::syscall(SYS_futex_waitv, v, static_cast<unsigned>(n), 0U, &ts, CLOCK_MONOTONIC) >= 0) return WaitAny::kWoken;
  return errno == ENOSYS ? WaitAny::kUnsupported : WaitAny::kNotSleeping;
}

}  // namespace ringcast::detail
