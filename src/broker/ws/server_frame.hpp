// Building the frames the WebSocket session sends besides deliveries: replies,
// pongs and the close frame (RFC 6455 §5.5.1). Deliveries are encoded once per
// message by the core's delivery encoder with the same header.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "broker/ws/frame_header.hpp"

namespace ringcast::broker::ws {

// Appends one final, unmasked frame of `op` carrying `payload` to `out`.
inline void append_server_frame(std::string& out, Opcode op, std::string_view payload) {
  char hdr[kMaxServerHeader];
  const std::size_t h = write_server_header(hdr, op, payload.size());
  out.append(hdr, h);
  out.append(payload);
}

// Appends a close frame with `code` and `reason` (cut to fit the 125-byte
// control payload; callers pass short ASCII reasons).
inline void append_close_frame(std::string& out, std::uint16_t code, std::string_view reason = {}) {
  constexpr std::size_t kMaxReason = 123;
  char body[2 + kMaxReason];
  body[0] = static_cast<char>(code >> 8);
  body[1] = static_cast<char>(code & 0xFF);
  const std::size_t n = reason.size() < kMaxReason ? reason.size() : kMaxReason;
  reason.copy(body + 2, n);
  append_server_frame(out, Opcode::kClose, std::string_view(body, 2 + n));
}

}  // namespace ringcast::broker::ws
