// The payload every stress and cross-process test pushes for sequence `seq`:
// the sequence in each of the six 64-bit words and the low half in the last
// four bytes, so a reader can prove a payload is whole (no torn read) and is
// the message it expected.
#pragma once

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

}  // namespace ringcast::test
