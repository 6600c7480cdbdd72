// How many characters the decimal text of a number takes: encoders size a
// frame exactly before writing it (resp/resp_delivery.cpp, ws/json_delivery.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringcast::broker {

[[nodiscard]] constexpr std::size_t decimal_digits(std::uint64_t v) noexcept {
  std::size_t n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

static_assert(decimal_digits(0) == 1 && decimal_digits(9) == 1 && decimal_digits(10) == 2);
static_assert(decimal_digits(UINT64_MAX) == 20);

}  // namespace ringcast::broker
