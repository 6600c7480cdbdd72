// base64url without padding (RFC 4648 section 5, as JWS compact serialisation
// uses it, RFC 7515 section 2).
//
// Thread safety: pure functions over their arguments; callable from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ringcast::broker::auth {

// Encodes `bytes` with the URL-safe alphabet (`-`, `_`) and no `=` padding.
[[nodiscard]] std::string base64url_encode(std::string_view bytes);

// Decodes the canonical encoding only: the URL-safe alphabet, no padding, no
// whitespace, a length that is not 1 mod 4, and zero bits after the last whole
// byte (so every byte string has exactly one accepted encoding, and a token
// cannot be altered without changing the signed text). nullopt otherwise.
[[nodiscard]] std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace ringcast::broker::auth
