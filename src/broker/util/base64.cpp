#include "broker/util/base64.hpp"

#include <array>
#include <cstdint>

namespace ringcast::broker {

namespace {

constexpr std::string_view kStandard = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view kUrl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// 0..63 for an alphabet byte, -1 for anything else.
constexpr std::array<std::int8_t, 256> make_decode_table(std::string_view alphabet) {
  std::array<std::int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (std::size_t i = 0; i < alphabet.size(); ++i) {
    t[static_cast<unsigned char>(alphabet[i])] = static_cast<std::int8_t>(i);
  }
  return t;
}
constexpr std::array<std::int8_t, 256> kStandardDecode = make_decode_table(kStandard);
constexpr std::array<std::int8_t, 256> kUrlDecode = make_decode_table(kUrl);

}  // namespace

void base64_encode(std::string_view bytes, Base64 alphabet, std::string& out) {
  const std::string_view a = alphabet == Base64::kStandard ? kStandard : kUrl;
  out.reserve(out.size() + (bytes.size() + 2) / 3 * 4);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = (std::uint32_t{p[i]} << 16) | (std::uint32_t{p[i + 1]} << 8) | p[i + 2];
    out += a[(v >> 18) & 63];
    out += a[(v >> 12) & 63];
    out += a[(v >> 6) & 63];
    out += a[v & 63];
  }
  const std::size_t left = bytes.size() - i;
  if (left == 0) return;
  std::uint32_t v = std::uint32_t{p[i]} << 16;
  if (left == 2) v |= std::uint32_t{p[i + 1]} << 8;
  out += a[(v >> 18) & 63];
  out += a[(v >> 12) & 63];
  if (left == 2) out += a[(v >> 6) & 63];
  if (alphabet == Base64::kStandard) out.append(3 - left, '=');
}

bool base64_decode(std::string_view text, Base64 alphabet, std::string& out) {
  if (alphabet == Base64::kStandard) {
    if (text.size() % 4 != 0) return false;
    // Exactly the padding the encoder writes: none, "=" or "==" at the end.
    std::size_t pad = 0;
    while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
    text.remove_suffix(pad);
    if (pad > 0 && text.size() % 4 == 1) return false;
  }
  if (text.size() % 4 == 1) return false;  // 6 bits cannot end a byte string
  const std::array<std::int8_t, 256>& table = alphabet == Base64::kStandard ? kStandardDecode : kUrlDecode;
  out.reserve(out.size() + text.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const std::int8_t v = table[static_cast<unsigned char>(c)];
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  // Left-over bits (2 or 4) must be zero for the encoding to be canonical.
  return (acc & ((1u << bits) - 1)) == 0;
}

}  // namespace ringcast::broker
