#include "ringcast/relay/continuity.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

namespace ringcast::relay {

SourceName split_source(std::string_view source) noexcept {
  const auto at = source.rfind('@');
  if (at == std::string_view::npos) return {source, {}};
  return {source.substr(0, at), source.substr(at + 1)};
}

std::string format_source(std::string_view host, std::string_view path, std::uint64_t dev, std::uint64_t ino) {
  return fmt::format("{}:{}@{:x}.{:x}", host, path, dev, ino);
}

std::string_view to_string(Continuity c) noexcept {
  switch (c) {
    case Continuity::kInOrder:
      return "in_order";
    case Continuity::kFirst:
      return "first";
    case Continuity::kGap:
      return "gap";
    case Continuity::kRestart:
      return "restart";
    case Continuity::kDuplicate:
      return "duplicate";
    case Continuity::kUnsequenced:
      return "unsequenced";
    case Continuity::kUntracked:
      return "untracked";
  }
  return "unknown";
}

std::uint64_t ContinuityChecker::missing(const Stream& s, std::uint64_t from, std::uint32_t run,
                                         std::uint64_t msg) noexcept {
  // Numbers of one run count messages exactly; anything else counts positions.
  if (msg != kNoMsg && s.next_msg != kNoMsg && run == s.run && msg >= s.next_msg) return msg - s.next_msg;
  return from - s.last - 1;
}

ContinuityResult ContinuityChecker::check_from(std::string_view source, std::uint64_t from, std::uint64_t seq,
                                               std::uint64_t count, std::uint32_t run, std::uint64_t msg) {
  if (count == 0) count = 1;
  if (from > seq) from = seq;
  if (source.empty()) {
    stats_.unsequenced += count;
    return {Continuity::kUnsequenced};
  }
  const std::uint64_t end = seq + count - 1;  // the batch's last sequence
  const std::uint64_t next_msg = msg == kNoMsg ? kNoMsg : msg + count;
  const SourceName name = split_source(source);
  auto it = streams_.find(name.stream);
  if (it == streams_.end()) {
    if (streams_.size() >= max_sources_) {
      stats_.untracked += count;
      return {Continuity::kUntracked};
    }
    streams_.emplace(std::string(name.stream), Stream{std::string(name.instance), end, run, next_msg});
    stats_.sources = streams_.size();
    stats_.checked += count;
    return {Continuity::kFirst};
  }
  stats_.checked += count;
  Stream& s = it->second;
  if (s.instance != name.instance) {  // invariant 3
    s.instance.assign(name.instance);
    s.last = end;
    s.run = run;
    s.next_msg = next_msg;
    ++stats_.restarts;
    return {Continuity::kRestart};
  }
  if (from == s.last + 1) {
    s.last = end;
    s.run = run;
    s.next_msg = next_msg;
    return {Continuity::kInOrder};
  }
  if (end <= s.last) {  // invariant 2
    stats_.duplicates += count;
    return {Continuity::kDuplicate, 0, count};
  }
  if (from <= s.last) {  // overlaps what was seen: deliver the new tail
    // The batch's messages seen already (one slot each); none of a single
    // message whose last slot is new.
    const std::uint64_t skip = seq <= s.last ? s.last - seq + 1 : 0;
    stats_.duplicates += skip;
    s.last = end;
    s.run = run;
    s.next_msg = next_msg;
    return {Continuity::kInOrder, 0, skip};
  }
  const std::uint64_t lost = missing(s, from, run, msg);
  s.last = end;
  s.run = run;
  s.next_msg = next_msg;
  if (lost == 0) return {Continuity::kInOrder};  // positions without messages (a lap of nothing, paddings)
  ++stats_.gaps;
  stats_.lost += lost;
  return {Continuity::kGap, lost};
}

namespace {

bool parse_u64(const char* text, std::uint64_t& out) {
  const char* end = text + std::strlen(text);
  const auto r = std::from_chars(text, end, out);
  return r.ec == std::errc() && r.ptr == end && text != end;
}

}  // namespace

bool parse_msg_number(const char* text, std::uint32_t& run, std::uint64_t& m) noexcept {
  const char* end = text + std::strlen(text);
  const char* dot = std::find(text, end, '.');
  if (dot == end || dot == text || dot + 1 == end) return false;
  const auto r = std::from_chars(text, dot, run, 16);
  if (r.ec != std::errc() || r.ptr != dot) return false;
  const auto n = std::from_chars(dot + 1, end, m);
  return n.ec == std::errc() && n.ptr == end && m != kNoMsg;
}

ContinuityResult ContinuityChecker::check_headers(const char* source, const char* seq, const char* count,
                                                  const char* from, const char* msg) {
  std::uint64_t n = 0;
  std::uint64_t k = 1;
  std::uint64_t f = 0;
  if (source == nullptr || seq == nullptr || !parse_u64(seq, n) ||
      (count != nullptr && (!parse_u64(count, k) || k == 0)) || (from != nullptr && (!parse_u64(from, f) || f > n))) {
    return check({}, 0, 1);
  }
  std::uint32_t run = 0;
  std::uint64_t m = kNoMsg;
  if (msg != nullptr && !parse_msg_number(msg, run, m)) m = kNoMsg;
  return check_from(source, from != nullptr ? f : n, n, k, run, m);
}

ContinuityResult ContinuityChecker::check_probe(const char* source, const char* seq, const char* msg) {
  std::uint64_t n = 0;
  std::uint32_t run = 0;
  std::uint64_t m = kNoMsg;
  if (source == nullptr || seq == nullptr || !parse_u64(seq, n)) return {Continuity::kUnsequenced};
  if (msg != nullptr && !parse_msg_number(msg, run, m)) m = kNoMsg;
  const SourceName name = split_source(source);
  auto it = streams_.find(name.stream);
  // Unknown, or another instance: nothing to compare with; the next message is the baseline.
  if (it == streams_.end() || it->second.instance != name.instance) return {Continuity::kFirst};
  Stream& s = it->second;
  if (n <= s.last) return {Continuity::kDuplicate};  // everything up to it arrived
  // Messages below m were published: the missing ones are m - next_msg.
  std::uint64_t lost = 0;
  if (m != kNoMsg && s.next_msg != kNoMsg && run == s.run) {
    lost = m >= s.next_msg ? m - s.next_msg : 0;
  } else {
    lost = n - s.last;
  }
  s.last = n;
  s.run = run;
  s.next_msg = m;
  if (lost == 0) return {Continuity::kInOrder};
  ++stats_.gaps;
  stats_.lost += lost;
  return {Continuity::kGap, lost};
}

}  // namespace ringcast::relay
