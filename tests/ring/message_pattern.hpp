// The payload every stress and cross-process test pushes for sequence `seq`:
// the sequence in each of the six 64-bit words and the low half in the last
// four bytes, so a reader can prove a payload is whole (no torn read) and is
// the message it expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

#include "ringcast/layout.hpp"

namespace ringcast::test {

inline void make_message(std::uint64_t seq, std::span<std::byte, kMaxPayload> out) {
  for (std::size_t off = 0; off + 8 <= kMaxPayload; off += 8) std::memcpy(out.data() + off, &seq, 8);
  const auto low = static_cast<std::uint32_t>(seq);
  std::memcpy(out.data() + 48, &low, 4);
}

// The sequence a payload carries, or nullopt if its words disagree (torn) or
// its length is wrong.
inline std::optional<std::uint64_t> check_message(std::span<const std::byte> payload) {
  if (payload.size() != kMaxPayload) return std::nullopt;
  std::uint64_t first = 0;
  std::memcpy(&first, payload.data(), 8);
  for (std::size_t off = 8; off + 8 <= kMaxPayload; off += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, payload.data() + off, 8);
    if (word != first) return std::nullopt;
  }
  std::uint32_t low = 0;
  std::memcpy(&low, payload.data() + 48, 4);
  if (low != static_cast<std::uint32_t>(first)) return std::nullopt;
  return first;
}

// Variable-size messages (rings of records): message `seq` is
// sized_length(seq, max) bytes, 8..max, a quarter of them inline (at most 52
// bytes); every whole 8-byte word holds the sequence and a partial last word
// its low bytes. A reader proves a message whole (every word agrees, and the
// length is the one its sequence implies) and knows which it is.
inline std::size_t sized_length(std::uint64_t seq, std::size_t max) {
  std::uint64_t h = seq * 0x9E3779B97F4A7C15ULL;  // a cheap mix, so sizes vary lap to lap
  h ^= h >> 29;
  const std::size_t small_max = max < kMaxPayload ? max : kMaxPayload;
  if (h % 4 == 0) return 8 + static_cast<std::size_t>((h >> 8) % (small_max - 7));
  return 8 + static_cast<std::size_t>((h >> 8) % (max - 7));
}

inline void make_sized_message(std::uint64_t seq, std::span<std::byte> out) {
  std::size_t off = 0;
  for (; off + 8 <= out.size(); off += 8) std::memcpy(out.data() + off, &seq, 8);
  std::memcpy(out.data() + off, &seq, out.size() - off);
}

inline std::optional<std::uint64_t> check_sized_message(std::span<const std::byte> payload, std::size_t max) {
  if (payload.size() < 8) return std::nullopt;
  std::uint64_t seq = 0;
  std::memcpy(&seq, payload.data(), 8);
  if (payload.size() != sized_length(seq, max)) return std::nullopt;
  std::size_t off = 8;
  for (; off + 8 <= payload.size(); off += 8) {
    if (std::memcmp(payload.data() + off, &seq, 8) != 0) return std::nullopt;
  }
  if (std::memcmp(payload.data() + off, &seq, payload.size() - off) != 0) return std::nullopt;
  return seq;
}

}  // namespace ringcast::test
