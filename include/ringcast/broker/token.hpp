// HS256 JSON Web Tokens (RFC 7519, JWS compact form of RFC 7515) that name a
// client and the channels it may use: verified by the broker on AUTH (RESP)
// and `auth` (WebSocket), minted by `ringcast token` (docs/security.md,
// "Tokens").
//
// A token is base64url(header) "." base64url(claims) "." base64url(signature),
// unpadded, with header {"alg":"HS256","typ":"JWT"} ("typ" optional) and the
// signature HMAC-SHA256(secret, the first two parts as sent). Claims:
//   sub        string, required, non-empty: the client's name
//   exp        NumericDate (seconds since the epoch), required
//   nbf, iat   NumericDate, optional (nbf is enforced, iat only type-checked)
//   subscribe  array of channel globs, optional (Grant::subscribe)
//   publish    array of channel globs, optional (Grant::publish)
// Other claims are ignored.
//
// Thread safety: pure functions over their arguments; callable from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

#include "ringcast/broker/grant.hpp"

namespace ringcast::broker {

// Shortest secret accepted, in bytes (RFC 7518 section 3.2: a key at least as
// long as the hash output).
inline constexpr std::size_t kMinTokenSecretBytes = 32;
// Clock skew tolerated on `exp` and `nbf` between the minting host and the broker.
inline constexpr std::chrono::seconds kTokenLeeway{30};
// Longest token accepted, in bytes: bounds the work one AUTH can cause.
inline constexpr std::size_t kMaxTokenBytes = 8192;

// Why a token was refused (or could not be minted). Each kind is counted
// apart by the broker (INFO, section "auth").
enum class TokenError : std::uint8_t {
  kMalformed,       // not three base64url parts, parts not JSON objects, unknown `crit`, too long
  kAlgNone,         // header `alg` is "none" (an unsigned token)
  kWrongAlgorithm,  // header `alg` is anything but HS256 (HS512, RS256, ...)
  kBadSignature,    // the HMAC does not match: forged, altered or another secret
  kMissingClaim,    // no `sub` or no `exp`
  kBadClaim,        // a claim or header field of the wrong type or value (`sub` not a
                    // non-empty string, `exp` not a number, `subscribe` not an array
                    // of non-empty strings, `typ` not "JWT", ...)
  kExpired,         // now > exp + leeway
  kNotYetValid,     // now + leeway < nbf
  kWeakSecret,      // the secret is shorter than kMinTokenSecretBytes
};
inline constexpr std::size_t kTokenErrorCount = 9;

// A short snake_case name ("bad_signature"), used in INFO field names.
[[nodiscard]] std::string_view to_string(TokenError e) noexcept;
// One sentence for the client and the log ("the token has expired").
[[nodiscard]] std::string_view describe(TokenError e) noexcept;

// Verifies `token` with `secret` at time `now` and returns what it grants.
// Checks, in order: size and shape, header (alg before anything is trusted),
// signature (constant time), claims, then time. Costs one HMAC-SHA256 over the
// token and two small JSON parses; allocates.
[[nodiscard]] tl::expected<Grant, TokenError> verify_token(
    std::string_view token, std::string_view secret,
    std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

// Signs `grant` (subject, expiry truncated to whole seconds, subscribe and
// publish when set) with `secret`, adding `iat` = `issued_at`. Fails with
// kWeakSecret, or kBadClaim for an empty subject or a string that is not UTF-8.
[[nodiscard]] tl::expected<std::string, TokenError> mint_token(
    const Grant& grant, std::string_view secret,
    std::chrono::system_clock::time_point issued_at = std::chrono::system_clock::now());

}  // namespace ringcast::broker
