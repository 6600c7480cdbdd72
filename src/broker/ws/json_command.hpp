// PopSub's client messages (docs/broker.md, "WebSocket"): one JSON object per
// text message, with a "type":
//   {"type":"auth","token":"..."}
//   {"type":"subscribe","topic":"md.*"}        glob characters make it a pattern
//   {"type":"subscribe","topic":"t","qos":1,"client_id":"c1"}   QoS 1 (durable with client_id)
//   {"type":"subscribe","topic":"t","since":{"offset":17,"epoch":"..."}}  recovery
//   {"type":"subscribe","topic":"t","history":10}                        the last 10 first
//   {"type":"unsubscribe","topic":"md.*"}
//   {"type":"publish","topic":"t","payload":...,"message_id":"id-1","qos":1}
//   {"type":"ack","message_id":7,"topic":"t"}   topic optional when unambiguous
//   {"type":"login","username":"u","password":"p"}   PopSub's; refused by the session
//                                                    (ringcast takes signed tokens only)
// Unknown fields are ignored. Payloads: a JSON string is published as its UTF-8
// bytes; a string with "encoding":"base64" as the bytes it encodes (binary
// payloads, the same form deliveries use); any other JSON value as its compact
// JSON text.
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace ringcast::broker::ws {

struct JsonCommand {
  enum class Type : std::uint8_t { kAuth, kSubscribe, kUnsubscribe, kPublish, kAck, kLogin };

  Type type = Type::kAuth;
  std::string token;    // auth
  std::string topic;    // subscribe, unsubscribe, publish: never empty; ack: optional (empty: none)
  std::string payload;  // publish: the bytes to publish
  // publish (optional) and ack (required): a JSON string as is, a non-negative
  // integer as its decimal text. The broker numbers messages per channel itself;
  // a publisher's id is what PopSub's dialect delivers (Message::message_id).
  std::optional<std::string> message_id;
  std::uint8_t qos = 0;    // publish, subscribe: 0 or 1
  bool qos_given = false;  // publish, subscribe: "qos" was present (PopSub's subscribe has none)
  std::string client_id;   // subscribe (optional): the durable session's name (docs/guarantees.md)
  // subscribe (optional, at most one of the two; docs/guarantees.md "Recovery"):
  // recover every message after `since`, or send the last `history` first.
  struct Since {
    std::uint64_t offset = 0;
    std::string epoch;
  };
  std::optional<Since> since;
  std::optional<std::uint64_t> history;
};

// The deepest nesting of arrays and objects accepted (a payload is re-serialised,
// and a deeper one would cost stack for nothing).
inline constexpr int kMaxJsonDepth = 64;

// Parses one client text message. The error is a sentence for the client's
// {"type":"error","message":...} reply. Never throws on malformed input.
[[nodiscard]] tl::expected<JsonCommand, std::string> parse_json_command(std::string_view text);

}  // namespace ringcast::broker::ws
