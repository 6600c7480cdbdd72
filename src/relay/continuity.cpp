#include "ringcast/relay/continuity.hpp"

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
    case Continuity::in_order: return "in_order";
    case Continuity::first: return "first";
    case Continuity::gap: return "gap";
    case Continuity::restart: return "restart";
    case Continuity::duplicate: return "duplicate";
    case Continuity::unsequenced: return "unsequenced";
    case Continuity::untracked: return "untracked";
  }
  return "unknown";
}

ContinuityResult ContinuityChecker::check(std::string_view source, std::uint64_t seq) {
  if (source.empty()) {
    ++stats_.unsequenced;
    return {Continuity::unsequenced};
  }
  const SourceName name = split_source(source);
  auto it = streams_.find(name.stream);
  if (it == streams_.end()) {
    if (streams_.size() >= max_sources_) {
      ++stats_.untracked;
      return {Continuity::untracked};
    }
    streams_.emplace(std::string(name.stream), Stream{std::string(name.instance), seq});
    stats_.sources = streams_.size();
    ++stats_.checked;
    return {Continuity::first};
  }
  ++stats_.checked;
  Stream& s = it->second;
  if (s.instance != name.instance) {  // invariant 3
    s.instance.assign(name.instance);
    s.last = seq;
    ++stats_.restarts;
    return {Continuity::restart};
  }
  if (seq == s.last + 1) {
    s.last = seq;
    return {Continuity::in_order};
  }
  if (seq <= s.last) {  // invariant 2
    ++stats_.duplicates;
    return {Continuity::duplicate};
  }
  const std::uint64_t lost = seq - s.last - 1;
  s.last = seq;
  ++stats_.gaps;
  stats_.lost += lost;
  return {Continuity::gap, lost};
}

ContinuityResult ContinuityChecker::check_headers(const char* source, const char* seq) {
  std::uint64_t n = 0;
  if (source == nullptr || seq == nullptr) return check({}, 0);
  const char* end = seq + std::strlen(seq);
  const auto r = std::from_chars(seq, end, n);
  if (r.ec != std::errc() || r.ptr != end || seq == end) return check({}, 0);
  return check(source, n);
}

}  // namespace ringcast::relay
