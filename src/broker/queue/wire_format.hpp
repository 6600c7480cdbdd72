// The wire formats a subscriber's messages can be encoded in, and the table of
// their codecs. The subscription index encodes each run of messages once per
// format that has subscribers, through this table, never through an if/else
// per format (docs/broker.md, "Wire formats").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "broker/queue/frame.hpp"
#include "ringcast/broker/message.hpp"

namespace ringcast::broker {

enum class WireFormat : std::uint8_t {
  kResp2 = 0,  // RESP2: messages are arrays
  kResp3 = 1,  // RESP3: messages are pushes
  kJson = 2,   // WebSocket text frames holding one JSON object each (ringcast's protocol)
  // The same frames in PopSub's types (docs/broker.md, "PopSub's frames and
  // ringcast's"): message_id a string. A separate format because the bytes
  // differ, so each is encoded once and shared by its own subscribers.
  kPopSubJson = 3,
};
inline constexpr std::size_t kWireFormatCount = 4;

// "resp2", "resp3" or "ws": the protocol a client speaks, as CLIENT LIST and
// ConnectionStats::protocol show it.
[[nodiscard]] constexpr std::string_view protocol_label(WireFormat f) noexcept {
  switch (f) {
    case WireFormat::kResp3:
      return "resp3";
    case WireFormat::kJson:
    case WireFormat::kPopSubJson:
      return "ws";
    case WireFormat::kResp2:
      break;
  }
  return "resp2";
}

// Which delivery a frame is: an exact subscription's (`message`), a pattern's
// (`pmessage`) or a shard subscription's (`smessage`).
enum class DeliveryKind : std::uint8_t { kMessage, kPattern, kShard };

// A run to encode: consecutive messages on one channel, with what every format
// may need besides the bytes.
struct DeliveryRun {
  DeliveryKind kind = DeliveryKind::kMessage;
  std::string_view pattern;       // kPattern: the matching pattern
  std::span<const Message> msgs;  // >= 1, all on one channel
  std::uint64_t first_id = 0;     // message i has id first_id + i (0: no id, e.g. loss notices)
  std::int64_t timestamp_ms = 0;  // wall clock, ms since the Unix epoch
  // 1: the frames go to a QoS 1 subscriber, who owes an ack for each (only the
  // JSON format carries it; docs/guarantees.md). The run's messages share it.
  std::uint8_t qos = 0;
};

struct WireCodec {
  // One droppable frame per message of the run, back to back in one block.
  // Allocates the block (and nothing else once per-thread scratch has grown).
  FrameRef (*encode)(const DeliveryRun& run);
  // The conflation key of one of this codec's message frames: the bytes that
  // name its kind, pattern and channel, so that only frames of the same key
  // replace each other (connection_queue.hpp, invariant 6). A frame the codec
  // does not recognise is its own key.
  std::string_view (*conflation_key)(std::string_view frame) noexcept;
};

// The codec of `f`. Defined by the broker's wiring (src/broker/wire_formats.cpp),
// next to the transports that own the formats: the core calls it, and knows no
// transport.
[[nodiscard]] const WireCodec& wire_codec(WireFormat f) noexcept;

// A one-frame block holding one `message` delivery in format `f`, with no id
// and the current time: loss notices, and tests.
[[nodiscard]] FrameRef encode_message(WireFormat f, std::string_view channel, std::string_view payload);

}  // namespace ringcast::broker
