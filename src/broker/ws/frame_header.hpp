// RFC 6455 §5.2: the header of a frame the server sends (never masked, §5.1).
// Shared by the delivery encoder (one text frame per message, in shared
// blocks) and the WebSocket session (replies, pong, close).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringcast::broker::ws {

enum class Opcode : std::uint8_t {
  kContinuation = 0x0,
  kText = 0x1,
  kBinary = 0x2,
  kClose = 0x8,
  kPing = 0x9,
  kPong = 0xA,
};

// Close status codes we send (RFC 6455 §7.4.1).
enum class CloseCode : std::uint16_t {
  kNormal = 1000,
  kGoingAway = 1001,
  kProtocolError = 1002,
  kUnsupportedData = 1003,
  kInvalidPayload = 1007,   // e.g. a text message that is not UTF-8
  kPolicyViolation = 1008,  // e.g. a frame before a good auth
  kMessageTooBig = 1009,
  kInternalError = 1011,
};

// The most header bytes a server frame needs: 2 + 8 (64-bit length).
inline constexpr std::size_t kMaxServerHeader = 10;

// Header bytes for a final, unmasked frame with a payload of `len` bytes.
[[nodiscard]] constexpr std::size_t server_header_size(std::uint64_t len) noexcept {
  return len < 126 ? 2 : len <= 0xFFFF ? 4 : 10;
}

// Writes the header of a final (FIN), unmasked frame of `op` with a payload of
// `len` bytes into `out` (room for server_header_size(len) bytes); returns the
// bytes written.
constexpr std::size_t write_server_header(char* out, Opcode op, std::uint64_t len) noexcept {
  out[0] = static_cast<char>(0x80 | static_cast<std::uint8_t>(op));
  if (len < 126) {
    out[1] = static_cast<char>(len);
    return 2;
  }
  if (len <= 0xFFFF) {
    out[1] = static_cast<char>(126);
    out[2] = static_cast<char>(len >> 8);
    out[3] = static_cast<char>(len);
    return 4;
  }
  out[1] = static_cast<char>(127);
  for (int i = 0; i < 8; ++i) out[2 + i] = static_cast<char>(len >> (56 - 8 * i));
  return 10;
}

}  // namespace ringcast::broker::ws
