// The test oracle for glob_match: Redis 7.0's stringmatchlen_impl (util.c)
// transcribed as it is, recursion per `*` and all, which is what the broker
// ran before issue 40 made matching iterative. Only for inputs short enough
// that its recursion is shallow (the glob test and the glob fuzzer bound them).
#pragma once

#include <cstddef>
#include <string_view>

namespace ringcast::broker::testing {

namespace glob_oracle_detail {

// A byte range that reads NUL past its end, as Redis reads the sds terminator.
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

inline bool match(Cursor pat, Cursor str, bool& skip_longer) noexcept {
  while (pat.len > 0 && str.len > 0) {
    switch (pat.at(0)) {
      case '*': {
        while (pat.len > 0 && pat.at(1) == '*') pat.advance();
        if (pat.len == 1) return true;
        const Cursor rest{pat.p + 1, pat.len - 1};
        while (str.len > 0) {
          if (match(rest, str, skip_longer)) return true;
          if (skip_longer) return false;
          str.advance();
        }
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
            --pat.p;
            ++pat.len;
            break;
          } else if (pat.len >= 3 && pat.at(1) == '-') {
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

}  // namespace glob_oracle_detail

inline bool glob_oracle(std::string_view pattern, std::string_view str) noexcept {
  bool skip_longer = false;
  return glob_oracle_detail::match({pattern.data(), pattern.size()}, {str.data(), str.size()}, skip_longer);
}

}  // namespace ringcast::broker::testing
