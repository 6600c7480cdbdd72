#include "broker/guarantees/retention.hpp"

#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "broker/util/glob.hpp"
#include "ringcast/broker/config.hpp"

namespace ringcast::broker {
namespace {

// A decimal integer filling all of `s`, or nullopt.
std::optional<std::uint64_t> parse_u64(std::string_view s) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

tl::expected<RetentionRule, std::string> parse_retention(std::string_view spec) {
  auto fail = [&](std::string_view why) {
    return tl::unexpected(
        fmt::format("--history '{}': {} (expected GLOB=SIZE[,TTL], e.g. 'chat.*=1000,10m')", spec, why));
  };
  const std::size_t eq = spec.rfind('=');
  if (eq == std::string_view::npos) return fail("no '='");
  RetentionRule rule;
  rule.pattern = std::string(spec.substr(0, eq));
  if (rule.pattern.empty()) return fail("empty channel pattern");
  std::string_view rest = spec.substr(eq + 1);
  std::string_view size_text = rest;
  std::string_view ttl_text;
  const bool has_ttl = rest.find(',') != std::string_view::npos;
  if (has_ttl) {
    size_text = rest.substr(0, rest.find(','));
    ttl_text = rest.substr(rest.find(',') + 1);
  }
  const auto size = parse_u64(size_text);
  if (!size) return fail(fmt::format("size '{}' is not a whole number", size_text));
  if (*size == 0 || *size > kMaxHistorySize)
    return fail(fmt::format("size {} is outside 1..{}", *size, kMaxHistorySize));
  rule.size = *size;
  if (has_ttl) {
    std::size_t digits = 0;
    while (digits < ttl_text.size() && ttl_text[digits] >= '0' && ttl_text[digits] <= '9') ++digits;
    // Well formed: digits, then a unit parse_duration knows (tried on 0).
    if (!parse_u64(ttl_text.substr(0, digits)) || !parse_duration("0" + std::string(ttl_text.substr(digits))))
      return fail(fmt::format("TTL '{}' is not a number with unit ms, s, m, h or d", ttl_text));
    const auto ttl = parse_duration(ttl_text);
    if (!ttl || ttl->count() == 0) return fail(fmt::format("TTL '{}' is outside 1ms..100 years", ttl_text));
    rule.ttl = *ttl;
  }
  return rule;
}

const RetentionRule* find_retention(std::span<const RetentionRule> rules, std::string_view channel) noexcept {
  for (const RetentionRule& r : rules)
    if (glob_match(r.pattern, channel)) return &r;
  return nullptr;
}

}  // namespace ringcast::broker
