#include "broker/ws/utf8.hpp"

#include <cstring>

namespace ringcast::broker::ws {

bool Utf8Validator::feed(std::string_view piece) noexcept {
  if (failed_) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(piece.data());
  const auto* const end = p + piece.size();
  while (p < end) {
    if (need_ == 0) {
      // ASCII fast path: eight bytes at a time while none has its top bit set.
      while (end - p >= 8) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);
        if ((w & 0x8080808080808080ULL) != 0) break;
        p += 8;
      }
      if (p == end) break;
      const unsigned char b = *p++;
      if (b < 0x80) continue;
      lower_ = 0x80;
      upper_ = 0xBF;
      if (b >= 0xC2 && b <= 0xDF) {
        need_ = 1;
      } else if (b >= 0xE0 && b <= 0xEF) {
        need_ = 2;
        if (b == 0xE0) lower_ = 0xA0;  // overlong
        if (b == 0xED) upper_ = 0x9F;  // surrogates
      } else if (b >= 0xF0 && b <= 0xF4) {
        need_ = 3;
        if (b == 0xF0) lower_ = 0x90;  // overlong
        if (b == 0xF4) upper_ = 0x8F;  // above U+10FFFF
      } else {
        failed_ = true;  // 0x80..0xC1 as a lead byte, or 0xF5..0xFF
        return false;
      }
    } else {
      const unsigned char b = *p++;
      if (b < lower_ || b > upper_) {
        failed_ = true;
        return false;
      }
      lower_ = 0x80;
      upper_ = 0xBF;
      --need_;
    }
  }
  return true;
}

bool is_valid_utf8(std::string_view s) noexcept {
  Utf8Validator v;
  return v.feed(s) && v.complete();
}

}  // namespace ringcast::broker::ws
