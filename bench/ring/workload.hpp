// The benchmark workload shared by the micro-benchmarks and the cross-process
// harness: a 52-byte message that carries its own sequence number, a send
// timestamp and a fill derived from the sequence, so a receiver can verify
// every byte of every message it gets (order, gaps, duplicates, torn copies).
//
//   bytes  0..8   seq        (little-endian u64)
//   bytes  8..16  stamp_ns   CLOCK_MONOTONIC of the intended send time
//   bytes 16..52  fill       nine u32 words, fill_word(seq, k)
#pragma once

#include <sched.h>
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <thread>

#include "ringcast/layout.hpp"

namespace ringcast::bench {

inline constexpr std::size_t kMessageBytes = kMaxPayload;  // 52
inline constexpr std::size_t kFillWords = (kMessageBytes - 16) / 4;
static_assert(16 + 4 * kFillWords == kMessageBytes);

struct alignas(8) Message {
  std::byte bytes[kMessageBytes];
  [[nodiscard]] std::span<const std::byte> span() const noexcept { return {bytes, kMessageBytes}; }
};

[[nodiscard]] constexpr std::uint32_t fill_word(std::uint64_t seq, std::size_t k) noexcept {
  // Distinct per sequence and per word; a multiply and a shift.
  return static_cast<std::uint32_t>(((seq + 1) * 0x9E3779B97F4A7C15ULL) >> 32) ^
         static_cast<std::uint32_t>(k * 0x01000193U);
}

inline void fill_message(Message& m, std::uint64_t seq, std::uint64_t stamp_ns) noexcept {
  std::memcpy(m.bytes, &seq, 8);
  std::memcpy(m.bytes + 8, &stamp_ns, 8);
  for (std::size_t k = 0; k < kFillWords; ++k) {
    const std::uint32_t w = fill_word(seq, k);
    std::memcpy(m.bytes + 16 + 4 * k, &w, 4);
  }
}

[[nodiscard]] inline std::uint64_t message_seq(std::span<const std::byte> m) noexcept {
  std::uint64_t seq = 0;
  std::memcpy(&seq, m.data(), 8);
  return seq;
}

[[nodiscard]] inline std::uint64_t message_stamp(std::span<const std::byte> m) noexcept {
  std::uint64_t stamp = 0;
  std::memcpy(&stamp, m.data() + 8, 8);
  return stamp;
}

// True when `m` is exactly the message fill_message(expected_seq, *) wrote.
[[nodiscard]] inline bool verify_message(std::span<const std::byte> m, std::uint64_t expected_seq) noexcept {
  if (m.size() != kMessageBytes || message_seq(m) != expected_seq) return false;
  std::uint32_t bad = 0;
  for (std::size_t k = 0; k < kFillWords; ++k) {
    std::uint32_t w = 0;
    std::memcpy(&w, m.data() + 16 + 4 * k, 4);
    bad |= w ^ fill_word(expected_seq, k);
  }
  return bad == 0;
}

[[nodiscard]] inline std::uint64_t monotonic_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// What a thread does when it finds nothing to do (empty on receive, full on
// push). Spinning is right when every busy thread has a core of its own;
// with more busy threads than cores a spinner holds the core its peer needs,
// so after a short spin it yields (Backoff) or, in the cross-process harness,
// sleeps on the ring's futex (block: recv_wait/push_wait, the default wait).
enum class Idle : std::uint8_t { kSpin, kYield, kBlock };

class Backoff {
 public:
  explicit Backoff(Idle idle) noexcept : idle_(idle) {}
  void pause() noexcept {
    if (idle_ != Idle::kSpin && ++spins_ >= kSpinsBeforeYield) {
      spins_ = 0;
      std::this_thread::yield();
      return;
    }
    cpu_relax();
  }
  void reset() noexcept { spins_ = 0; }

 private:
  static constexpr int kSpinsBeforeYield = 64;
  Idle idle_;
  int spins_ = 0;
};

// Default idle strategy: spin only when every busy thread/process can have a core.
[[nodiscard]] inline Idle default_idle(unsigned busy) noexcept {
  const unsigned cores = std::thread::hardware_concurrency();
  return (cores != 0 && busy <= cores) ? Idle::kSpin : Idle::kYield;
}

// Pins the calling thread to `cpu`; returns false (and leaves it unpinned) on error.
inline bool pin_to_cpu(int cpu) noexcept {
  if (cpu < 0) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<unsigned>(cpu), &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

}  // namespace ringcast::bench
