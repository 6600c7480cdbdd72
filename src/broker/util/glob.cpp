#include "broker/util/glob.hpp"

namespace ringcast::broker {
namespace {

// A byte of `s` at `i`, NUL past the end. Redis's matcher peeks one byte beyond
// the pattern (pattern[1] at the last `*`, the trailing `*` skip), which reads
// the sds terminator; reading 0 here reproduces that without the overrun. Bytes
// compare as plain (signed) char, as Redis's stringmatchlen does: unsigned
// would order bytes >= 0x80 unlike redis-server.
signed char at(std::string_view s, std::size_t i) noexcept {
  return i < s.size() ? static_cast<signed char>(s[i]) : static_cast<signed char>(0);
}

// Matches the one pattern element at pattern[p] (anything but `*`) against the
// byte c. Returns whether it matched; sets `next` to the position after the
// element. The element grammar is stringmatchlen_impl's in Redis 7.0 util.c,
// quirks included (unterminated classes, escapes inside classes, reversed
// ranges, a trailing backslash matching itself).
bool match_element(std::string_view pattern, std::size_t p, signed char c, std::size_t& next) noexcept {
  const std::size_t n = pattern.size();
  switch (at(pattern, p)) {
    case '?':
      next = p + 1;
      return true;
    case '[': {
      ++p;
      const bool negate = at(pattern, p) == '^';
      if (negate) ++p;
      bool matched = false;
      for (;;) {
        if (at(pattern, p) == '\\' && n - p >= 2) {
          ++p;
          if (at(pattern, p) == c) matched = true;
        } else if (at(pattern, p) == ']') {
          break;
        } else if (p == n) {
          --p;  // unterminated: step back so the step below lands on the end
          break;
        } else if (n - p >= 3 && at(pattern, p + 1) == '-') {
          // NOLINTBEGIN(bugprone-signed-char-misuse)
          int lo = at(pattern, p);
          int hi = at(pattern, p + 2);
          // NOLINTEND(bugprone-signed-char-misuse)
          if (lo > hi) {
            const int t = lo;
            lo = hi;
            hi = t;
          }
          p += 2;
          if (c >= lo && c <= hi) matched = true;
        } else if (at(pattern, p) == c) {
          matched = true;
        }
        ++p;
      }
      next = p + 1;
      return negate ? !matched : matched;
    }
    case '\\':
      if (n - p >= 2) ++p;
      [[fallthrough]];
    default:
      next = p + 1;
      return at(pattern, p) == c;
  }
}

}  // namespace

// Every element but `*` consumes exactly one byte, so a match exists iff the
// greedy scan below finds one when, on a mismatch, it lets only the most
// recent `*` absorb one more byte: an earlier star absorbing more can only
// shift where the later star's segment starts, which the later star's own
// retries already cover. No recursion; the work is bounded by
// str.size() x the longest run of the pattern between two stars.
bool glob_match(std::string_view pattern, std::string_view str) noexcept {
  // Redis's loop never runs on an empty string: only an empty pattern matches
  // it (not even "*").
  if (str.empty()) return pattern.empty();
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t p = 0;
  std::size_t s = 0;
  std::size_t star_p = kNone;  // the pattern after the most recent star
  std::size_t star_s = 0;      // where in `str` that star's absorbed bytes end
  for (;;) {
    if (s == str.size()) {
      while (at(pattern, p) == '*') ++p;
      return p >= pattern.size();
    }
    if (p < pattern.size() && pattern[p] == '*') {
      while (at(pattern, p + 1) == '*') ++p;
      if (p + 1 == pattern.size()) return true;  // a trailing star matches anything
      star_p = ++p;
      star_s = s;
      continue;
    }
    std::size_t next = 0;
    if (p < pattern.size() && match_element(pattern, p, at(str, s), next)) {
      p = next;
      ++s;
      continue;
    }
    if (star_p == kNone) return false;
    p = star_p;
    s = ++star_s;
  }
}

std::string pattern_too_long(std::string_view pattern) {
  return "pattern of " + std::to_string(pattern.size()) + " bytes is longer than the " +
         std::to_string(kMaxGlobPatternBytes) + "-byte limit";
}

std::size_t glob_literal_prefix(std::string_view pattern) noexcept {
  const std::size_t n = pattern.find_first_of("*?[\\");
  return n == std::string_view::npos ? pattern.size() : n;
}

}  // namespace ringcast::broker
