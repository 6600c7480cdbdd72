// Base64 (RFC 4648) in its two uses here: the standard alphabet with padding
// (§4: Sec-WebSocket-Accept, binary payloads in JSON) and the URL-safe alphabet
// without padding (§5: JWS compact serialisation, RFC 7515 §2, for tokens).
//
// Thread safety: pure functions over their arguments; callable from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ringcast::broker {

enum class Base64 : std::uint8_t {
  kStandard,  // A-Z a-z 0-9 + /, '=' padding to a multiple of 4
  kUrl,       // A-Z a-z 0-9 - _, no padding
};

// Appends the base64 text of `bytes` to `out`.
void base64_encode(std::string_view bytes, Base64 alphabet, std::string& out);

// Appends the bytes `text` encodes to `out`. Canonical encodings only, so every
// byte string has exactly one accepted text (a token cannot be altered without
// changing the signed text): the alphabet's characters, kStandard's padding
// exactly as the encoder writes it and kUrl's none, no whitespace, and zero bits
// after the last whole byte. False otherwise (`out` then holds an unspecified
// prefix).
[[nodiscard]] bool base64_decode(std::string_view text, Base64 alphabet, std::string& out);

}  // namespace ringcast::broker
