#include "broker/ws/base64.hpp"

#include <array>
#include <cstdint>

namespace ringcast::broker::ws {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// 0..63 for alphabet characters, 64 for everything else.
constexpr std::array<std::uint8_t, 256> make_reverse() {
  std::array<std::uint8_t, 256> r{};
  for (auto& v : r) v = 64;
  for (std::uint8_t i = 0; i < 64; ++i) r[static_cast<unsigned char>(kAlphabet[i])] = i;
  return r;
}
constexpr auto kReverse = make_reverse();

}  // namespace

void base64_encode(std::string_view bytes, std::string& out) {
  out.reserve(out.size() + (bytes.size() + 2) / 3 * 4);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = (std::uint32_t{p[i]} << 16) | (std::uint32_t{p[i + 1]} << 8) | p[i + 2];
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  const std::size_t left = bytes.size() - i;
  if (left == 0) return;
  std::uint32_t v = std::uint32_t{p[i]} << 16;
  if (left == 2) v |= std::uint32_t{p[i + 1]} << 8;
  out += kAlphabet[(v >> 18) & 63];
  out += kAlphabet[(v >> 12) & 63];
  out += left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
  out += '=';
}

bool base64_decode(std::string_view text, std::string& out) {
  if (text.size() % 4 != 0) return false;
  std::size_t pad = 0;
  if (!text.empty() && text.back() == '=') pad = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  out.reserve(out.size() + text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const std::size_t real = last ? 4 - pad : 4;  // alphabet characters in this group
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      std::uint8_t d = 0;
      if (k < real) {
        d = kReverse[static_cast<unsigned char>(text[i + k])];
        if (d == 64) return false;
      }
      v = (v << 6) | d;
    }
    out += static_cast<char>(v >> 16);
    if (real >= 3) out += static_cast<char>((v >> 8) & 0xFF);
    if (real == 4) out += static_cast<char>(v & 0xFF);
    // Non-canonical: bits the padding drops must be zero.
    if ((real == 2 && (v & 0xFFFF) != 0) || (real == 3 && (v & 0xFF) != 0)) return false;
  }
  return true;
}

}  // namespace ringcast::broker::ws
