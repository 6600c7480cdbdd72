// The first bytes of every payload the WebSocket load generator publishes:
// "<sequence> <send time> " as two 16-digit lowercase hex numbers (34 bytes),
// then filler. Text, so it travels unchanged in PopSub's JSON string and in a
// NATS payload; the sequence number checks order and loss, the send time
// (steady clock, ns, same host) gives latency.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringcast::bench::ws {

inline constexpr std::size_t kStampBytes = 34;

inline void write_hex16(char* out, std::uint64_t v) noexcept {
  constexpr char kDigits[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i) {
    out[i] = kDigits[v & 0xF];
    v >>= 4;
  }
}

// Writes the stamp into out[0, kStampBytes).
inline void write_stamp(char* out, std::uint64_t seq, std::int64_t sent_ns) noexcept {
  write_hex16(out, seq);
  out[16] = ' ';
  write_hex16(out + 17, static_cast<std::uint64_t>(sent_ns));
  out[33] = ' ';
}

// Reads the stamp at `in`; false if those bytes are not one.
inline bool read_stamp(const char* in, std::uint64_t& seq, std::int64_t& sent_ns) noexcept {
  std::uint64_t v[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    const char* p = in + 17 * k;
    for (int i = 0; i < 16; ++i) {
      const char c = p[i];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return false;
      v[k] = (v[k] << 4) | static_cast<std::uint64_t>(d);
    }
  }
  seq = v[0];
  sent_ns = static_cast<std::int64_t>(v[1]);
  return true;
}

}  // namespace ringcast::bench::ws
