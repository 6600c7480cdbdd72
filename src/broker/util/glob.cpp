#include "broker/util/glob.hpp"

namespace ringcast::broker {
namespace {

// A cursor over a byte range that reads NUL past the end. Redis's matcher peeks one
// byte beyond the pattern (pattern[1] at the last `*`, the trailing `*` skip), which
// reads the sds terminator; reading 0 here reproduces that without the overrun.
struct Cursor {
  const char* p;
  std::size_t len;
  [[nodiscard]] signed char at(std::size_t i) const noexcept {
    return i < len ? static_cast<signed char>(p[i]) : static_cast<signed char>(0);
  }
  void advance() noexcept {
    ++p;
    --len;
  }
};

// The structure follows stringmatchlen_impl in Redis 7.0 util.c so that edge cases
// (unterminated classes, escapes inside classes, reversed ranges) agree exactly.
bool match_impl(Cursor pat, Cursor str, bool& skip_longer) noexcept {
  while (pat.len > 0 && str.len > 0) {
    switch (pat.at(0)) {
      case '*': {
        while (pat.len > 0 && pat.at(1) == '*') pat.advance();
        if (pat.len == 1) return true;  // a trailing star matches anything
        Cursor rest{pat.p + 1, pat.len - 1};
        while (str.len > 0) {
          if (match_impl(rest, str, skip_longer)) return true;
          if (skip_longer) return false;
          str.advance();
        }
        // The rest of the pattern matched nowhere in the rest of the string, so no
        // earlier star can help by consuming more: stop the whole search.
        skip_longer = true;
        return false;
      }
      case '?':
        str.advance();
        break;
      case '[': {
        pat.advance();
        const bool negate = pat.at(0) == '^';
        if (negate) pat.advance();
        bool matched = false;
        for (;;) {
          if (pat.at(0) == '\\' && pat.len >= 2) {
            pat.advance();
            if (pat.at(0) == str.at(0)) matched = true;
          } else if (pat.at(0) == ']') {
            break;
          } else if (pat.len == 0) {
            // Unterminated class: step back so the advance below lands on the end.
            --pat.p;
            ++pat.len;
            break;
          } else if (pat.len >= 3 && pat.at(1) == '-') {
            // Bytes compare as plain (signed) char, as Redis's stringmatchlen
            // does: unsigned would order bytes >= 0x80 unlike redis-server.
            // NOLINTBEGIN(bugprone-signed-char-misuse)
            int lo = pat.at(0);
            int hi = pat.at(2);
            const int c = str.at(0);
            // NOLINTEND(bugprone-signed-char-misuse)
            if (lo > hi) {
              const int t = lo;
              lo = hi;
              hi = t;
            }
            pat.advance();
            pat.advance();
            if (c >= lo && c <= hi) matched = true;
          } else if (pat.at(0) == str.at(0)) {
            matched = true;
          }
          pat.advance();
        }
        if (negate) matched = !matched;
        if (!matched) return false;
        str.advance();
        break;
      }
      case '\\':
        if (pat.len >= 2) pat.advance();
        [[fallthrough]];
      default:
        if (pat.at(0) != str.at(0)) return false;
        str.advance();
        break;
    }
    pat.advance();
    if (str.len == 0) {
      while (pat.at(0) == '*') pat.advance();
      break;
    }
  }
  return pat.len == 0 && str.len == 0;
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view str) noexcept {
  bool skip_longer = false;
  return match_impl(Cursor{pattern.data(), pattern.size()}, Cursor{str.data(), str.size()}, skip_longer);
}

std::size_t glob_literal_prefix(std::string_view pattern) noexcept {
  const std::size_t n = pattern.find_first_of("*?[\\");
  return n == std::string_view::npos ? pattern.size() : n;
}

}  // namespace ringcast::broker
