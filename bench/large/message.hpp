// The large-message benchmark's message: any size from 32 bytes up, the same
// bytes on every transport.
//
//   bytes  0..8     seq       (u64, native order) counts every message of a cell from 0
//   bytes  8..16    stamp_ns  CLOCK_MONOTONIC: the intended send time (latency cells),
//                             or the time the timed phase started (throughput cells)
//   bytes 16..24    flags     kWarmup, kLastWarmup, kLast
//   bytes 24..n-8   body      Touch::kAll: body_word(seq, k) per 8-byte word (the tail
//                             end of a size that is not a multiple of 8 is left alone);
//                             Touch::kEnds: left as the transport hands it over
//   bytes n-8..n    tail      seq ^ kTailMagic
//
// With Touch::kEnds (the default) a sender writes 32 bytes of a message and a
// receiver reads them: enough to catch a loss, a duplicate, a reordering or a
// message of the wrong length, and what iceoryx's own iceperf does with a
// loaned chunk. A copying transport still moves every byte. Touch::kAll
// makes the sender produce and every receiver check every word.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace ringcast::bench {

inline constexpr std::size_t kMinMessageBytes = 32;
inline constexpr std::size_t kHeaderBytes = 24;
inline constexpr std::uint64_t kTailMagic = 0xA5C3'96F0'0F69'3C5AULL;

// MessageHeader::flags
inline constexpr std::uint64_t kWarmup = 1;      // not measured
inline constexpr std::uint64_t kLastWarmup = 2;  // the last warm-up message: the receiver tells the harness
inline constexpr std::uint64_t kLast = 4;        // the last message of the cell: the receiver reports and exits

enum class Touch : std::uint8_t { kEnds, kAll };

struct MessageHeader {
  std::uint64_t seq = 0;
  std::uint64_t stamp_ns = 0;
  std::uint64_t flags = 0;
};

[[nodiscard]] constexpr std::uint64_t body_word(std::uint64_t seq, std::size_t k) noexcept {
  return (seq + 1) * 0x9E37'79B9'7F4A'7C15ULL ^ static_cast<std::uint64_t>(k) * 0x0100'0000'01B3ULL;
}

inline void store_u64(std::byte* at, std::uint64_t v) noexcept { std::memcpy(at, &v, 8); }
[[nodiscard]] inline std::uint64_t load_u64(const std::byte* at) noexcept {
  std::uint64_t v = 0;
  std::memcpy(&v, at, 8);
  return v;
}

// Writes message `h` into `m` (m.size() >= kMinMessageBytes).
inline void write_message(std::span<std::byte> m, const MessageHeader& h, Touch touch) noexcept {
  store_u64(m.data(), h.seq);
  store_u64(m.data() + 8, h.stamp_ns);
  store_u64(m.data() + 16, h.flags);
  if (touch == Touch::kAll) {
    const std::size_t words = (m.size() - kHeaderBytes - 8) / 8;
    for (std::size_t k = 0; k < words; ++k) store_u64(m.data() + kHeaderBytes + 8 * k, body_word(h.seq, k));
  }
  store_u64(m.data() + m.size() - 8, h.seq ^ kTailMagic);
}

[[nodiscard]] inline MessageHeader read_header(std::span<const std::byte> m) noexcept {
  return {load_u64(m.data()), load_u64(m.data() + 8), load_u64(m.data() + 16)};
}

// True when `m` is message `seq` of `size` bytes as write_message wrote it.
[[nodiscard]] inline bool check_message(std::span<const std::byte> m, std::uint64_t seq, std::size_t size,
                                        Touch touch) noexcept {
  if (m.size() != size || load_u64(m.data()) != seq || load_u64(m.data() + m.size() - 8) != (seq ^ kTailMagic)) {
    return false;
  }
  if (touch == Touch::kEnds) return true;
  std::uint64_t bad = 0;
  const std::size_t words = (m.size() - kHeaderBytes - 8) / 8;
  for (std::size_t k = 0; k < words; ++k) bad |= load_u64(m.data() + kHeaderBytes + 8 * k) ^ body_word(seq, k);
  return bad == 0;
}

}  // namespace ringcast::bench
