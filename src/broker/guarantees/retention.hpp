// Retention rules: which channels keep history and how much (--history
// GLOB=SIZE[,TTL], repeatable; docs/guarantees.md "Retention").
//
// Thread safety: plain values and pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace ringcast::broker {

struct RetentionRule {
  std::string pattern;               // Redis glob (broker/util/glob.hpp)
  std::uint64_t size = 0;            // keep at most this many messages (> 0)
  std::chrono::milliseconds ttl{0};  // and none older than this; 0: no TTL
};

inline constexpr std::uint64_t kMaxHistorySize = 1'000'000'000;

// Parses "GLOB=SIZE[,TTL]": SIZE a message count in [1, 1e9]; TTL a positive
// integer with unit ms, s, m, h or d (a bare integer is seconds). The glob is
// everything before the last '=' and must not be empty. The error text names
// the flag value and what is wrong with it.
[[nodiscard]] tl::expected<RetentionRule, std::string> parse_retention(std::string_view spec);

// The first rule whose pattern matches `channel` (flag order), or nullptr.
[[nodiscard]] const RetentionRule* find_retention(std::span<const RetentionRule> rules,
                                                  std::string_view channel) noexcept;

}  // namespace ringcast::broker
