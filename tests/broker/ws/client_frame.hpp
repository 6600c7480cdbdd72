// Test helper: the bytes of a frame as a WebSocket client sends it (masked).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ringcast::broker::ws::test {

struct ClientFrame {
  std::uint8_t opcode = 0x1;
  bool fin = true;
  bool masked = true;
  std::uint8_t rsv = 0;  // bits 0x70 of the first byte
  int len_bytes = 0;     // 0: minimal; 2 or 8: force that extended length
  std::uint32_t mask = 0x37fa213d;
};

inline std::string client_frame(std::string_view payload, ClientFrame f = {}) {
  std::string out;
  out += static_cast<char>((f.fin ? 0x80 : 0) | (f.rsv & 0x70) | (f.opcode & 0x0F));
  const std::uint8_t m = f.masked ? 0x80 : 0;
  const std::uint64_t n = payload.size();
  int lb = f.len_bytes;
  if (lb == 0) lb = n < 126 ? 0 : n <= 0xFFFF ? 2 : 8;
  if (lb == 0) {
    out += static_cast<char>(m | n);
  } else if (lb == 2) {
    out += static_cast<char>(m | 126);
    out += static_cast<char>(n >> 8);
    out += static_cast<char>(n);
  } else {
    out += static_cast<char>(m | 127);
    for (int i = 0; i < 8; ++i) out += static_cast<char>(n >> (56 - 8 * i));
  }
  unsigned char key[4] = {static_cast<unsigned char>(f.mask >> 24), static_cast<unsigned char>(f.mask >> 16),
                          static_cast<unsigned char>(f.mask >> 8), static_cast<unsigned char>(f.mask)};
  if (f.masked) out.append(reinterpret_cast<const char*>(key), 4);
  for (std::size_t i = 0; i < payload.size(); ++i) {
    out += f.masked ? static_cast<char>(static_cast<unsigned char>(payload[i]) ^ key[i % 4]) : payload[i];
  }
  return out;
}

// A close frame's payload: the code in network order, then the reason.
inline std::string close_payload(std::uint16_t code, std::string_view reason = {}) {
  std::string p;
  p += static_cast<char>(code >> 8);
  p += static_cast<char>(code & 0xFF);
  p += reason;
  return p;
}

}  // namespace ringcast::broker::ws::test
