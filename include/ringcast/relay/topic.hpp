// Topic-in-payload: one ring carrying several channels (docs/relay.md,
// "Topic in payload"; normative).
//
// A ring routed with `--ring PATH=PREFIX*` carries messages framed as
//
//   byte 0        n = topic length, 1..kMaxTopic (255)
//   bytes 1..n    the topic (any bytes except NUL; NATS subjects also refuse
//                 space, tab, '*' and '>', see is_valid_subject)
//   bytes n+1..   the body, possibly empty
//
// and the relay publishes the body on channel/subject PREFIX + topic. A
// message that does not parse is counted as malformed and not published. A
// framed message is an ordinary ring message: it may be as long as the
// ring's max_message (on a ring of one slot per message, 52 bytes hold the
// length byte, topic and body together).
//
// Thread safety: pure functions on caller-owned buffers; no allocation.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>

namespace ringcast::relay {

// The longest topic: what its one length byte counts.
inline constexpr std::size_t kMaxTopic = 255;

// Frames `topic` and `body` into `out` (size it for the ring's max_message,
// or 1 + topic + body). Returns the payload length to push, or 0 when the
// topic is empty, longer than kMaxTopic, contains NUL, or the framed message
// does not fit `out`.
[[nodiscard]] inline std::size_t encode_topic_payload(std::string_view topic, std::span<const std::byte> body,
                                                      std::span<std::byte> out) noexcept {
  if (topic.empty() || topic.size() > kMaxTopic) return 0;
  if (topic.find('\0') != std::string_view::npos) return 0;
  const std::size_t total = 1 + topic.size() + body.size();
  if (total > out.size()) return 0;
  out[0] = static_cast<std::byte>(topic.size());
  std::memcpy(out.data() + 1, topic.data(), topic.size());
  if (!body.empty()) std::memcpy(out.data() + 1 + topic.size(), body.data(), body.size());
  return total;
}

struct TopicView {
  bool ok = false;  // false: malformed, topic and body are empty
  std::string_view topic;
  std::string_view body;  // views into the payload passed to decode
};

// Splits a payload framed by encode_topic_payload. O(topic length).
[[nodiscard]] inline TopicView decode_topic_payload(std::span<const std::byte> payload) noexcept {
  if (payload.empty()) return {};
  const auto n = static_cast<std::size_t>(payload[0]);
  if (n == 0 || n > kMaxTopic || 1 + n > payload.size()) return {};
  const char* p = reinterpret_cast<const char*>(payload.data());
  const std::string_view topic(p + 1, n);
  if (topic.find('\0') != std::string_view::npos) return {};
  return {true, topic, std::string_view(p + 1 + n, payload.size() - 1 - n)};
}

// True when `s` is usable as a NATS subject to publish on: non-empty, no
// whitespace, no NUL, no wildcard token ('*' or '>'), no empty token.
[[nodiscard]] inline bool is_valid_subject(std::string_view s) noexcept {
  if (s.empty() || s.front() == '.' || s.back() == '.') return false;
  char prev = 0;
  for (const char c : s) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\0' || c == '*' || c == '>') return false;
    if (c == '.' && prev == '.') return false;
    prev = c;
  }
  return true;
}

}  // namespace ringcast::relay
