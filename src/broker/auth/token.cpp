#include "ringcast/broker/token.hpp"

#include <array>
#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "broker/util/base64.hpp"

namespace ringcast::broker {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::system_clock;

constexpr std::size_t kMacBytes = 32;  // SHA-256
// NumericDates are accepted from 1970 to the end of year 9999: no overflow in
// time_point arithmetic, and nothing a real token carries is outside.
constexpr double kMaxNumericDate = 253402300799.0;

using Mac = std::array<unsigned char, kMacBytes>;

std::optional<Mac> hmac_sha256(std::string_view secret, std::string_view text) {
  Mac mac{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac.data(), &len) == nullptr ||
      len != kMacBytes) {
    return std::nullopt;
  }
  return mac;
}

// The bytes a base64url part (canonical, unpadded) holds, or nullopt.
std::optional<std::string> decode_part(std::string_view part) {
  std::string bytes;
  if (!base64_decode(part, Base64::kUrl, bytes)) return std::nullopt;
  return bytes;
}

// The JSON object a base64url part holds, or nullopt.
std::optional<json> decode_object(std::string_view part) {
  const auto bytes = decode_part(part);
  if (!bytes) return std::nullopt;
  json j = json::parse(*bytes, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// A NumericDate claim: a number of seconds in range, else nullopt.
std::optional<Clock::time_point> numeric_date(const json& v) {
  if (!v.is_number()) return std::nullopt;
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < 0 || d > kMaxNumericDate) return std::nullopt;
  return Clock::time_point(std::chrono::seconds(static_cast<std::int64_t>(std::floor(d))));
}

// An optional array-of-globs claim; false when present with the wrong shape.
bool read_globs(const json& claims, const char* name, std::optional<std::vector<std::string>>& out) {
  const auto it = claims.find(name);
  if (it == claims.end()) return true;
  if (!it->is_array()) return false;
  std::vector<std::string> globs;
  globs.reserve(it->size());
  for (const json& g : *it) {
    if (!g.is_string() || g.get_ref<const std::string&>().empty()) return false;
    globs.push_back(g.get<std::string>());
  }
  out = std::move(globs);
  return true;
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto l = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
    if (l(a[i]) != l(b[i])) return false;
  }
  return true;
}

// The header checks: alg, then typ and crit.
std::optional<TokenError> check_header(const json& header) {
  const auto alg = header.find("alg");
  if (alg == header.end() || !alg->is_string()) return TokenError::kMalformed;
  const auto& name = alg->get_ref<const std::string&>();
  if (iequals(name, "none")) return TokenError::kAlgNone;
  if (name != "HS256") return TokenError::kWrongAlgorithm;
  const auto typ = header.find("typ");
  if (typ != header.end() && !(typ->is_string() && iequals(typ->get_ref<const std::string&>(), "JWT"))) {
    return TokenError::kBadClaim;
  }
  // RFC 7515 4.1.11: extensions listed in `crit` must be understood; we know none.
  if (header.contains("crit")) return TokenError::kMalformed;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(TokenError e) noexcept {
  switch (e) {
    case TokenError::kMalformed:
      return "malformed";
    case TokenError::kAlgNone:
      return "alg_none";
    case TokenError::kWrongAlgorithm:
      return "wrong_algorithm";
    case TokenError::kBadSignature:
      return "bad_signature";
    case TokenError::kMissingClaim:
      return "missing_claim";
    case TokenError::kBadClaim:
      return "bad_claim";
    case TokenError::kExpired:
      return "expired";
    case TokenError::kNotYetValid:
      return "not_yet_valid";
    case TokenError::kWeakSecret:
      return "weak_secret";
  }
  return "unknown";
}

std::string_view describe(TokenError e) noexcept {
  switch (e) {
    case TokenError::kMalformed:
      return "the token is malformed (expected three base64url parts holding JSON objects)";
    case TokenError::kAlgNone:
      return "unsigned tokens (alg none) are not accepted";
    case TokenError::kWrongAlgorithm:
      return "the token's algorithm is not HS256";
    case TokenError::kBadSignature:
      return "the token's signature is invalid";
    case TokenError::kMissingClaim:
      return "the token lacks a required claim (sub, exp)";
    case TokenError::kBadClaim:
      return "a token claim has the wrong type or value";
    case TokenError::kExpired:
      return "the token has expired";
    case TokenError::kNotYetValid:
      return "the token is not valid yet (nbf)";
    case TokenError::kWeakSecret:
      return "the token secret is shorter than 32 bytes";
  }
  return "the token was refused";
}

tl::expected<Grant, TokenError> verify_token(std::string_view token, std::string_view secret, Clock::time_point now) {
  if (secret.size() < kMinTokenSecretBytes) return tl::unexpected(TokenError::kWeakSecret);
  if (token.size() > kMaxTokenBytes) return tl::unexpected(TokenError::kMalformed);
  const std::size_t dot1 = token.find('.');
  const std::size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    return tl::unexpected(TokenError::kMalformed);
  }
  const std::string_view signed_text = token.substr(0, dot2);
  const std::string_view header_part = token.substr(0, dot1);
  const std::string_view claims_part = token.substr(dot1 + 1, dot2 - dot1 - 1);
  const std::string_view signature_part = token.substr(dot2 + 1);

  // The header decides how to check the signature, so it is read first; the
  // claims are not parsed before the signature holds.
  const auto header = decode_object(header_part);
  if (!header) return tl::unexpected(TokenError::kMalformed);
  if (const auto e = check_header(*header)) return tl::unexpected(*e);

  const auto signature = decode_part(signature_part);
  if (!signature) return tl::unexpected(TokenError::kMalformed);
  const auto mac = hmac_sha256(secret, signed_text);
  if (!mac) return tl::unexpected(TokenError::kBadSignature);
  // CRYPTO_memcmp: time independent of where the bytes differ.
  if (signature->size() != kMacBytes || CRYPTO_memcmp(signature->data(), mac->data(), kMacBytes) != 0) {
    return tl::unexpected(TokenError::kBadSignature);
  }

  const auto claims = decode_object(claims_part);
  if (!claims) return tl::unexpected(TokenError::kMalformed);
  Grant grant;
  const auto sub = claims->find("sub");
  const auto exp = claims->find("exp");
  if (sub == claims->end() || exp == claims->end()) return tl::unexpected(TokenError::kMissingClaim);
  if (!sub->is_string() || sub->get_ref<const std::string&>().empty()) return tl::unexpected(TokenError::kBadClaim);
  grant.subject = sub->get<std::string>();
  const auto expiry = numeric_date(*exp);
  if (!expiry) return tl::unexpected(TokenError::kBadClaim);
  grant.expiry = *expiry;
  std::optional<Clock::time_point> not_before;
  if (const auto nbf = claims->find("nbf"); nbf != claims->end()) {
    not_before = numeric_date(*nbf);
    if (!not_before) return tl::unexpected(TokenError::kBadClaim);
  }
  if (const auto iat = claims->find("iat"); iat != claims->end() && !numeric_date(*iat)) {
    return tl::unexpected(TokenError::kBadClaim);
  }
  if (!read_globs(*claims, "subscribe", grant.subscribe) || !read_globs(*claims, "publish", grant.publish)) {
    return tl::unexpected(TokenError::kBadClaim);
  }

  if (now > grant.expiry + kTokenLeeway) return tl::unexpected(TokenError::kExpired);
  if (not_before && now + kTokenLeeway < *not_before) return tl::unexpected(TokenError::kNotYetValid);
  return grant;
}

tl::expected<std::string, TokenError> mint_token(const Grant& grant, std::string_view secret,
                                                 Clock::time_point issued_at) {
  if (secret.size() < kMinTokenSecretBytes) return tl::unexpected(TokenError::kWeakSecret);
  if (grant.subject.empty()) return tl::unexpected(TokenError::kBadClaim);
  for (const auto* globs : {&grant.subscribe, &grant.publish}) {
    if (!*globs) continue;
    for (const std::string& g : **globs) {
      if (g.empty()) return tl::unexpected(TokenError::kBadClaim);  // verify_token refuses it too
    }
  }
  auto seconds = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  };
  json claims = {{"sub", grant.subject}, {"iat", seconds(issued_at)}, {"exp", seconds(grant.expiry)}};
  if (grant.subscribe) claims["subscribe"] = *grant.subscribe;
  if (grant.publish) claims["publish"] = *grant.publish;
  std::string claims_text;
  try {
    claims_text = claims.dump();
  } catch (const json::type_error&) {  // a string that is not UTF-8 (error 316)
    return tl::unexpected(TokenError::kBadClaim);
  }
  std::string token;
  base64_encode(R"({"alg":"HS256","typ":"JWT"})", Base64::kUrl, token);
  token += '.';
  base64_encode(claims_text, Base64::kUrl, token);
  const auto mac = hmac_sha256(secret, token);
  if (!mac) return tl::unexpected(TokenError::kWeakSecret);  // OpenSSL refused the key
  token += '.';
  base64_encode(std::string_view(reinterpret_cast<const char*>(mac->data()), mac->size()), Base64::kUrl, token);
  return token;
}

}  // namespace ringcast::broker
