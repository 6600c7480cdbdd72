// Base64 (RFC 4648 §4, standard alphabet, with padding): the handshake's
// Sec-WebSocket-Accept and binary payloads in JSON ("encoding":"base64").
#pragma once

#include <string>
#include <string_view>

namespace ringcast::broker::ws {

// Appends the base64 text of `bytes` to `out`.
void base64_encode(std::string_view bytes, std::string& out);

// Appends the bytes `text` encodes to `out`. Strict: the length must be a
// multiple of 4, only the alphabet and trailing '=' padding (at most two), and
// the unused bits of the last character zero; false otherwise (`out` then holds
// an unspecified prefix).
[[nodiscard]] bool base64_decode(std::string_view text, std::string& out);

}  // namespace ringcast::broker::ws
