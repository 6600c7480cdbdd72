#include "broker/resp/resp_delivery.hpp"

#include <charconv>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "broker/util/decimal_digits.hpp"

namespace ringcast::broker::resp {

namespace {

std::size_t bulk_size(std::size_t len) noexcept { return 1 + decimal_digits(len) + 2 + len + 2; }

char* put_bulk(char* p, std::string_view s) noexcept {
  *p++ = '$';
  p = std::to_chars(p, p + 20, s.size()).ptr;
  *p++ = '\r';
  *p++ = '\n';
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  p += s.size();
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

// Encodes one push per message of `run`: the fixed head (type byte, array
// header, kind and the optional pattern bulk), then channel and payload bulks.
// The sizes vector is per thread and keeps its capacity: a steady publisher does
// not allocate for it.
FrameRef encode_run(bool resp3, std::string_view head, const std::string_view* pattern, std::span<const Message> run) {
  thread_local std::vector<std::uint32_t> sizes;
  sizes.clear();
  const std::size_t fixed = 1 + head.size() + (pattern != nullptr ? bulk_size(pattern->size()) : 0);
  for (const Message& m : run) {
    sizes.push_back(static_cast<std::uint32_t>(fixed + bulk_size(m.channel.size()) + bulk_size(m.payload.size())));
  }
  FrameRef f = FrameRef::allocate_frames(sizes, true);
  char* p = f.mutable_data();
  for (const Message& m : run) {
    *p++ = resp3 ? '>' : '*';
    std::memcpy(p, head.data(), head.size());
    p += head.size();
    if (pattern != nullptr) p = put_bulk(p, *pattern);
    p = put_bulk(p, m.channel);
    p = put_bulk(p, m.payload);
  }
  return f;
}

FrameRef encode(bool resp3, const DeliveryRun& run) {
  switch (run.kind) {
    case DeliveryKind::kPattern:
      return encode_run(resp3, "4\r\n$8\r\npmessage\r\n", &run.pattern, run.msgs);
    case DeliveryKind::kShard:
      return encode_run(resp3, "3\r\n$8\r\nsmessage\r\n", nullptr, run.msgs);
    case DeliveryKind::kMessage:
      break;
  }
  return encode_run(resp3, "3\r\n$7\r\nmessage\r\n", nullptr, run.msgs);
}

}  // namespace

FrameRef encode_resp2_run(const DeliveryRun& run) { return encode(false, run); }

FrameRef encode_resp3_run(const DeliveryRun& run) { return encode(true, run); }

std::string_view conflation_key(std::string_view f) noexcept {
  constexpr std::size_t kBad = std::string_view::npos;
  // Skips the bulk string at `at`, storing its value; kBad if there is none.
  const auto bulk = [f](std::size_t at, std::string_view* value) -> std::size_t {
    if (at >= f.size() || f[at] != '$') return kBad;
    std::size_t len = 0;
    const auto r = std::from_chars(f.data() + at + 1, f.data() + f.size(), len);
    if (r.ec != std::errc()) return kBad;
    const auto body = static_cast<std::size_t>(r.ptr - f.data()) + 2;
    if (body > f.size() || f.size() - body < len + 2) return kBad;
    if (value != nullptr) *value = f.substr(body, len);
    return body + len + 2;
  };
  const std::size_t eol = f.find("\r\n");
  std::string_view kind;
  std::size_t at = eol == kBad ? kBad : bulk(eol + 2, &kind);
  if (at != kBad && kind == "pmessage") at = bulk(at, nullptr);
  if (at != kBad) at = bulk(at, nullptr);
  return at == kBad ? f : f.substr(0, at);
}

}  // namespace ringcast::broker::resp
