// Incremental UTF-8 validation (RFC 3629, as RFC 6455 §8.1 requires of text
// messages and close reasons): no overlong forms, no surrogates (U+D800..DFFF),
// nothing above U+10FFFF. A message may be fed in any number of pieces; a
// sequence may be split across them.
//
// Thread safety: none; one validator per message, used by one thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace ringcast::broker::ws {

class Utf8Validator {
 public:
  // Validates the next piece. False once the bytes so far cannot start valid
  // UTF-8 (the validator then stays failed until reset()). Allocation-free,
  // O(piece) with an 8-byte ASCII fast path.
  [[nodiscard]] bool feed(std::string_view piece) noexcept;
  // True if everything fed so far is valid and ends on a character boundary.
  [[nodiscard]] bool complete() const noexcept { return need_ == 0 && !failed_; }
  void reset() noexcept { *this = Utf8Validator{}; }

 private:
  std::uint8_t need_ = 0;      // continuation bytes still expected
  std::uint8_t lower_ = 0x80;  // bounds of the next continuation byte
  std::uint8_t upper_ = 0xBF;
  bool failed_ = false;
};

// Whole-string convenience: true if `s` is valid UTF-8.
[[nodiscard]] bool is_valid_utf8(std::string_view s) noexcept;

}  // namespace ringcast::broker::ws
