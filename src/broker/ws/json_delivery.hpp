// WebSocket-JSON deliveries (docs/broker.md, "JSON deliveries"): the kJson row
// of the wire-format table (src/broker/wire_formats.cpp). Each message of a run
// becomes one complete server text frame (frame_header.hpp) whose payload is
//
//   {"type":"message",["pattern":P,]"topic":T,"payload":X,
//    "timestamp":MS,"message_id":ID,"qos":Q}
//
// in that order. Q is 1 for a QoS 1 publish delivered to a QoS 1 subscription,
// which owes an {"type":"ack"} for it (docs/guarantees.md), else 0; a QoS 1
// redelivery appends "dup":true (json_redelivery). A value that is valid UTF-8 (is_valid_utf8) is a JSON string,
// escaped per RFC 8259 (quote, backslash and the controls U+0000..U+001F;
// \b \f \n \r \t by name, the rest as \u00XX; nothing else). Any other value is
// base64 (RFC 4648, padded) and flagged: "encoding":"base64" after the payload,
// "topic_encoding":"base64" after the topic, "pattern_encoding":"base64" after
// the pattern. message_id is the channel's sequence number, a JSON number (0 for
// a loss notice); timestamp is wall-clock ms since the Unix epoch.
//
// The kPopSubJson row (encode_popsub_run) writes the same object with one
// difference, so that PopSub's clients parse it with PopSub's types
// (`message_id: String`): message_id is the publisher's own id
// (Message::message_id) when it gave one, as PopSub keeps it, else the string
// "<topic>#<id>" (the topic as escaped in "topic"; just "<id>" when the topic
// is base64). The topic in it makes an ack that echoes it name its channel, as
// PopSub's unique ids do, although ids are per channel. Its redeliveries
// (popsub_redelivery) are the same bytes again: PopSub has no dup flag.
//
// Thread safety: the functions may be called from any thread concurrently; the
// encoder's scratch buffers are per thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "broker/queue/frame.hpp"
#include "broker/queue/wire_format.hpp"

namespace ringcast::broker::ws {

// One droppable text frame per message of `run`, back to back in one block.
// Cost: two passes over each payload (validate and size, then write); no
// allocation but the block once the per-thread scratch has grown.
[[nodiscard]] FrameRef encode_json_run(const DeliveryRun& run);
// The same in PopSub's types (WireFormat::kPopSubJson), at the same cost.
[[nodiscard]] FrameRef encode_popsub_run(const DeliveryRun& run);

// A QoS 1 redelivery in PopSub's types: a copy of `frame` (one allocation).
[[nodiscard]] FrameRef popsub_redelivery(std::string_view frame);

// Whether `frame` (one of encode_popsub_run's) shows `id` as its message_id:
// what a PopSub ack echoes. O(frame + id); no allocation once the per-thread
// scratch has grown.
[[nodiscard]] bool popsub_id_is(std::string_view frame, std::string_view id);

// Splits an ack's message_id as encode_popsub_run writes it, "<topic>#<id>",
// into the topic and the id; a plain "<id>" gives an empty topic. nullopt when
// the text after the last '#' (or the whole text) is not a decimal id.
struct AckId {
  std::string_view topic;
  std::uint64_t id = 0;
};
[[nodiscard]] std::optional<AckId> parse_ack_id(std::string_view message_id) noexcept;

// A QoS 1 redelivery of `frame` (one of encode_json_run's frames): the same
// object with "dup":true appended, as MQTT's DUP flag. One allocation; the
// redelivery timer's path, not the publisher's.
[[nodiscard]] FrameRef json_redelivery(std::string_view frame);

// The conflation key of a JSON delivery frame: its JSON text up to the payload
// ({"type":"message", the pattern and the topic), so each topic and each
// pattern's deliveries conflate apart. A frame without a payload member is its
// own key. The key can be found this way because `,"payload":` cannot occur
// inside an escaped JSON string nor in base64.
[[nodiscard]] std::string_view json_conflation_key(std::string_view frame) noexcept;

}  // namespace ringcast::broker::ws
