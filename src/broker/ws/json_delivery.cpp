#include "broker/ws/json_delivery.hpp"

#include <cassert>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "broker/util/base64.hpp"
#include "broker/util/decimal_digits.hpp"
#include "broker/ws/frame_header.hpp"
#include "broker/ws/utf8.hpp"

namespace ringcast::broker::ws {

namespace {

constexpr std::string_view kHead = R"({"type":"message",)";
constexpr std::string_view kBase64Flag = R"("encoding":"base64")";
constexpr char kHex[] = "0123456789abcdef";

// One text value as it goes into JSON: a string, or base64 when not UTF-8.
struct Value {
  std::string_view raw;
  bool base64 = false;
  std::size_t size = 0;  // bytes of the JSON value, quotes included
};

// True for the bytes a JSON string cannot hold as they are: '"', '\\' and
// the control characters below 0x20.
constexpr bool needs_escape(unsigned char c) noexcept { return c < 0x20 || c == '"' || c == '\\'; }

// How many bytes at the start of s[0, n) need no escaping. Eight at a time:
// a word is plain unless some byte is below 0x20 or equals '"' or '\\'
// (the "has a zero / has less than" bit tricks: a borrow from a byte that is
// zero, or below the bound, sets its top bit; bytes >= 0x80 are masked out
// by ~w and are always plain).
std::size_t plain_prefix(const char* s, std::size_t n) noexcept {
  constexpr std::uint64_t kOnes = 0x0101010101010101ull;
  constexpr std::uint64_t kHigh = 0x8080808080808080ull;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s + i, 8);
    const std::uint64_t quote = w ^ (kOnes * '"');
    const std::uint64_t backslash = w ^ (kOnes * '\\');
    const std::uint64_t special = ((w - kOnes * 0x20) | (quote - kOnes) | (backslash - kOnes)) & ~w & kHigh;
    if (special != 0) break;
  }
  while (i < n && !needs_escape(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

// Bytes the escape of `c` (needs_escape(c)) takes: \" \\ \b \f \n \r \t, else \u00XX.
constexpr std::size_t escape_size(unsigned char c) noexcept {
  return c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t' ? 2 : 6;
}

std::size_t escaped_size(std::string_view s) noexcept {
  std::size_t n = 2 + s.size();
  for (std::size_t i = plain_prefix(s.data(), s.size()); i < s.size();) {
    n += escape_size(static_cast<unsigned char>(s[i])) - 1;
    ++i;
    i += plain_prefix(s.data() + i, s.size() - i);
  }
  return n;
}

Value value_of(std::string_view s) noexcept {
  if (is_valid_utf8(s)) return {s, false, escaped_size(s)};
  return {s, true, 2 + (s.size() + 2) / 3 * 4};
}

char* put(char* p, std::string_view s) noexcept {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

// The characters of `v` between its quotes.
char* put_value_body(char* p, const Value& v) {
  if (v.base64) {
    thread_local std::string scratch;  // keeps its capacity
    scratch.clear();
    base64_encode(v.raw, Base64::kStandard, scratch);
    p = put(p, scratch);
  } else {
    const std::string_view raw = v.raw;
    std::size_t i = 0;
    while (i < raw.size()) {
      const std::size_t plain = plain_prefix(raw.data() + i, raw.size() - i);
      p = put(p, raw.substr(i, plain));
      i += plain;
      if (i == raw.size()) break;
      const auto c = static_cast<unsigned char>(raw[i++]);
      char named = 0;
      switch (c) {
        case '"':
          named = '"';
          break;
        case '\\':
          named = '\\';
          break;
        case '\b':
          named = 'b';
          break;
        case '\f':
          named = 'f';
          break;
        case '\n':
          named = 'n';
          break;
        case '\r':
          named = 'r';
          break;
        case '\t':
          named = 't';
          break;
        default:
          break;
      }
      if (named != 0) {
        *p++ = '\\';
        *p++ = named;
      } else {
        p = put(p, "\\u00");
        *p++ = kHex[c >> 4];
        *p++ = kHex[c & 0xF];
      }
    }
  }
  return p;
}

char* put_value(char* p, const Value& v) {
  *p++ = '"';
  p = put_value_body(p, v);
  *p++ = '"';
  return p;
}

// `"name":value,` and its flag `"name_encoding":"base64",` when base64.
std::size_t field_size(std::string_view name, const Value& v) noexcept {
  std::size_t n = name.size() + 4 + v.size;  // quotes, colon, comma
  if (v.base64) n += name.size() + 21;       // "<name>_encoding":"base64",
  return n;
}

char* put_field(char* p, std::string_view name, const Value& v) {
  *p++ = '"';
  p = put(p, name);
  p = put(p, "\":");
  p = put_value(p, v);
  *p++ = ',';
  if (v.base64) {
    *p++ = '"';
    p = put(p, name);
    p = put(p, R"(_encoding":"base64",)");
  }
  return p;
}

char* put_number(char* p, std::uint64_t v) noexcept { return std::to_chars(p, p + 20, v).ptr; }

// PopSub's message_id beside the digits: the quotes, and "<topic>#" when the
// topic is UTF-8 (a base64 topic is left out: the id is then the digits only).
std::size_t popsub_id_extra(const Value& topic) noexcept { return 2 + (topic.base64 ? 0 : topic.size - 2 + 1); }

char* put_popsub_id(char* p, const Value& topic, std::uint64_t id) {
  *p++ = '"';
  if (!topic.base64) {
    p = put_value_body(p, topic);
    *p++ = '#';
  }
  p = put_number(p, id);
  *p++ = '"';
  return p;
}

// Both JSON formats: `popsub` writes message_id as PopSub's string, the
// publisher's own when it gave one (see json_delivery.hpp), otherwise as a number.
FrameRef encode_run(const DeliveryRun& run, bool popsub) {
  // Per thread, keeping their capacity: a steady publisher does not allocate here.
  thread_local std::vector<Value> payloads;
  thread_local std::vector<std::uint32_t> sizes;  // frames
  thread_local std::vector<std::uint32_t> jsons;  // their JSON texts
  payloads.clear();
  sizes.clear();
  jsons.clear();
  const bool pattern = run.kind == DeliveryKind::kPattern;
  const Value pat = pattern ? value_of(run.pattern) : Value{};
  const Value topic = value_of(run.msgs.front().channel);
  const std::uint64_t ts = run.timestamp_ms < 0 ? 0 : static_cast<std::uint64_t>(run.timestamp_ms);
  // Everything but the payload value and the id's digits.
  const std::size_t fixed = kHead.size() + (pattern ? field_size("pattern", pat) : 0) + field_size("topic", topic) +
                            std::string_view(R"("payload":)").size() + std::string_view(R"(,"timestamp":)").size() +
                            decimal_digits(ts) + std::string_view(R"(,"message_id":)").size() +
                            std::string_view(R"(,"qos":0})").size();
  for (std::size_t i = 0; i < run.msgs.size(); ++i) {
    const Value v = value_of(run.msgs[i].payload);
    const std::uint64_t id = run.first_id == 0 ? 0 : run.first_id + i;
    const std::string_view own = popsub ? run.msgs[i].message_id : std::string_view();
    assert(is_valid_utf8(own));  // it came from a JSON string (message.hpp)
    const std::size_t id_size = !own.empty() ? escaped_size(own)
                                : popsub     ? popsub_id_extra(topic) + decimal_digits(id)
                                             : decimal_digits(id);
    const std::size_t json = fixed + v.size + (v.base64 ? 1 + kBase64Flag.size() : 0) + id_size;
    payloads.push_back(v);
    jsons.push_back(static_cast<std::uint32_t>(json));
    sizes.push_back(static_cast<std::uint32_t>(server_header_size(json) + json));
  }
  FrameRef f = FrameRef::allocate_frames(sizes, /*droppable=*/true);
  char* p = f.mutable_data();
  for (std::size_t i = 0; i < run.msgs.size(); ++i) {
    const std::uint64_t id = run.first_id == 0 ? 0 : run.first_id + i;
    p += write_server_header(p, Opcode::kText, jsons[i]);
    p = put(p, kHead);
    if (pattern) p = put_field(p, "pattern", pat);
    p = put_field(p, "topic", topic);
    p = put(p, R"("payload":)");
    p = put_value(p, payloads[i]);
    if (payloads[i].base64) {
      *p++ = ',';
      p = put(p, kBase64Flag);
    }
    p = put(p, R"(,"timestamp":)");
    p = put_number(p, ts);
    p = put(p, R"(,"message_id":)");
    if (popsub && !run.msgs[i].message_id.empty()) {
      p = put_value(p, Value{run.msgs[i].message_id, false, 0});  // the publisher's, as given
    } else if (popsub) {
      p = put_popsub_id(p, topic, id);
    } else {
      p = put_number(p, id);
    }
    p = put(p, run.qos == 1 ? std::string_view(R"(,"qos":1})") : std::string_view(R"(,"qos":0})"));
  }
  assert(p == f->data() + f->size());  // the sizes above are exact
  return f;
}

}  // namespace

FrameRef encode_json_run(const DeliveryRun& run) { return encode_run(run, false); }

FrameRef encode_popsub_run(const DeliveryRun& run) { return encode_run(run, true); }

FrameRef popsub_redelivery(std::string_view frame) {
  FrameRef f = FrameRef::allocate(frame.size(), /*droppable=*/true);
  std::memcpy(f.mutable_data(), frame.data(), frame.size());
  return f;
}

std::optional<AckId> parse_ack_id(std::string_view text) noexcept {
  const std::size_t hash = text.rfind('#');
  const std::string_view digits = hash == std::string_view::npos ? text : text.substr(hash + 1);
  AckId r;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), r.id);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  if (hash != std::string_view::npos) r.topic = text.substr(0, hash);
  return r;
}

bool popsub_id_is(std::string_view frame, std::string_view id) {
  // Neither marker can occur inside an escaped string, so the last of each
  // delimits the value (see json_conflation_key).
  constexpr std::string_view kKey = R"(,"message_id":")";
  constexpr std::string_view kTail = R"(","qos":)";
  const std::size_t at = frame.rfind(kKey);
  const std::size_t end = frame.rfind(kTail);
  if (at == std::string_view::npos || end == std::string_view::npos || end < at + kKey.size()) return false;
  const std::string_view shown = frame.substr(at + kKey.size(), end - at - kKey.size());
  if (shown.size() != escaped_size(id) - 2) return false;
  thread_local std::string escaped;  // keeps its capacity
  escaped.resize(shown.size());
  put_value_body(escaped.data(), Value{id, false, 0});
  return shown == escaped;
}

FrameRef json_redelivery(std::string_view frame) {
  const auto len7 = static_cast<unsigned char>(frame[1]) & 0x7F;
  const std::size_t header = len7 < 126 ? 2 : len7 == 126 ? 4 : 10;
  constexpr std::string_view kDup = R"(,"dup":true})";
  // The JSON text without its closing brace, then the flag.
  const std::string_view body = frame.substr(header, frame.size() - header - 1);
  const std::size_t json = body.size() + kDup.size();
  FrameRef f = FrameRef::allocate(server_header_size(json) + json, /*droppable=*/true);
  char* p = f.mutable_data();
  p += write_server_header(p, Opcode::kText, json);
  p = put(p, body);
  p = put(p, kDup);
  assert(p == f->data() + f->size());
  return f;
}

std::string_view json_conflation_key(std::string_view f) noexcept {
  if (f.size() < 2) return f;
  const auto len7 = static_cast<unsigned char>(f[1]) & 0x7F;
  const std::size_t header = len7 < 126 ? 2 : len7 == 126 ? 4 : 10;
  if (f.size() < header) return f;
  const std::size_t at = f.find(R"(,"payload":)", header);
  return at == std::string_view::npos ? f : f.substr(header, at - header);
}

}  // namespace ringcast::broker::ws
