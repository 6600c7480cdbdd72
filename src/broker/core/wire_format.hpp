// The wire formats a subscriber's messages can be encoded in. The subscription
// index encodes each run of messages once per format that has subscribers
// (docs/broker.md, "Wire formats").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ringcast::broker {

enum class WireFormat : std::uint8_t {
  kResp2 = 0,  // RESP2: messages are arrays
  kResp3 = 1,  // RESP3: messages are pushes
  kJson = 2,   // WebSocket text frames holding one JSON object each
};
inline constexpr std::size_t kWireFormatCount = 3;

// "resp2", "resp3" or "ws": the protocol a client speaks, as CLIENT LIST and
// ConnectionStats::protocol show it.
[[nodiscard]] constexpr std::string_view protocol_label(WireFormat f) noexcept {
  switch (f) {
    case WireFormat::kResp3:
      return "resp3";
    case WireFormat::kJson:
      return "ws";
    case WireFormat::kResp2:
      break;
  }
  return "resp2";
}

}  // namespace ringcast::broker
