#include "ringcast/broker/token.hpp"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <nlohmann/json.hpp>

#include "broker/util/base64.hpp"

namespace ringcast::broker {
namespace {

using json = nlohmann::json;
using std::chrono::seconds;
using Clock = std::chrono::system_clock;

const std::string kSecret = "0123456789abcdef0123456789abcdef-test";
const Clock::time_point kNow = Clock::time_point(seconds(1'800'000'000));

std::string b64(std::string_view s) {
  std::string out;
  base64_encode(s, Base64::kUrl, out);
  return out;
}

std::string sign(std::string_view text, std::string_view secret = kSecret) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac, &len);
  return b64(std::string_view(reinterpret_cast<const char*>(mac), len));
}

// A token with the given header and claims texts, signed with HS256 and `secret`.
std::string token_of(std::string_view header, std::string_view claims, std::string_view secret = kSecret) {
  const std::string text = b64(header) + "." + b64(claims);
  return text + "." + sign(text, secret);
}

std::string token_of(const json& claims) { return token_of(R"({"alg":"HS256","typ":"JWT"})", claims.dump()); }

json good_claims() { return {{"sub", "alice"}, {"exp", 1'800'000'600}}; }

TokenError error_of(std::string_view token) {
  const auto r = verify_token(token, kSecret, kNow);
  EXPECT_FALSE(r.has_value()) << token;
  return r ? TokenError::kWeakSecret : r.error();
}

TEST(TokenTest, GoodTokenGrantsItsClaims) {
  json c = good_claims();
  c["subscribe"] = {"md.*"};
  c["publish"] = json::array();
  const auto g = verify_token(token_of(c), kSecret, kNow);
  ASSERT_TRUE(g) << describe(g.error());
  EXPECT_EQ(g->subject, "alice");
  EXPECT_EQ(g->expiry, Clock::time_point(seconds(1'800'000'600)));
  EXPECT_EQ(g->subscribe, std::vector<std::string>{"md.*"});
  EXPECT_EQ(g->publish, std::vector<std::string>{});
}

TEST(TokenTest, AbsentPermissionClaimsStayAbsent) {
  const auto g = verify_token(token_of(good_claims()), kSecret, kNow);
  ASSERT_TRUE(g);
  EXPECT_FALSE(g->subscribe);
  EXPECT_FALSE(g->publish);
}

TEST(TokenTest, MintedTokenVerifiesToTheSameGrant) {
  const Grant in{"bob", kNow + seconds(3600), std::vector<std::string>{"md.*", "fx.?"}, std::nullopt};
  const auto token = mint_token(in, kSecret, kNow);
  ASSERT_TRUE(token);
  const auto out = verify_token(*token, kSecret, kNow);
  ASSERT_TRUE(out) << describe(out.error());
  EXPECT_EQ(out->subject, in.subject);
  EXPECT_EQ(out->expiry, in.expiry);
  EXPECT_EQ(out->subscribe, in.subscribe);
  EXPECT_FALSE(out->publish);
}

TEST(TokenTest, ForgedSignatureIsRefused) {
  const std::string other_secret(40, 'x');
  EXPECT_EQ(error_of(token_of(R"({"alg":"HS256"})", good_claims().dump(), other_secret)), TokenError::kBadSignature);
}

TEST(TokenTest, AlteredClaimsAreRefused) {
  const std::string good = token_of(good_claims());
  json c = good_claims();
  c["sub"] = "mallory";
  const std::size_t dot1 = good.find('.');
  const std::size_t dot2 = good.find('.', dot1 + 1);
  const std::string altered = good.substr(0, dot1 + 1) + b64(c.dump()) + good.substr(dot2);
  EXPECT_EQ(error_of(altered), TokenError::kBadSignature);
}

TEST(TokenTest, TruncatedSignatureIsRefused) {
  const std::string good = token_of(good_claims());
  // 43 characters hold 32 bytes; 40 hold 30 and decode canonically.
  EXPECT_EQ(error_of(good.substr(0, good.size() - 3)), TokenError::kBadSignature);
}

TEST(TokenTest, AlgNoneIsRefusedWithOrWithoutSignature) {
  const std::string unsigned_text = b64(R"({"alg":"none"})") + "." + b64(good_claims().dump());
  EXPECT_EQ(error_of(unsigned_text + "."), TokenError::kAlgNone);
  EXPECT_EQ(error_of(unsigned_text + "." + sign(unsigned_text)), TokenError::kAlgNone);
  EXPECT_EQ(error_of(token_of(R"({"alg":"NoNe"})", good_claims().dump())), TokenError::kAlgNone);
}

TEST(TokenTest, OtherAlgorithmsAreRefused) {
  for (const char* alg : {"HS512", "HS384", "RS256", "ES256", "hs256"}) {
    EXPECT_EQ(error_of(token_of(json{{"alg", alg}}.dump(), good_claims().dump())), TokenError::kWrongAlgorithm) << alg;
  }
}

TEST(TokenTest, HeaderWithoutStringAlgIsMalformed) {
  EXPECT_EQ(error_of(token_of(R"({"typ":"JWT"})", good_claims().dump())), TokenError::kMalformed);
  EXPECT_EQ(error_of(token_of(R"({"alg":256})", good_claims().dump())), TokenError::kMalformed);
  EXPECT_EQ(error_of(token_of(R"({"alg":"HS256","crit":["exp"]})", good_claims().dump())), TokenError::kMalformed);
}

TEST(TokenTest, WrongTypIsABadClaim) {
  EXPECT_EQ(error_of(token_of(R"({"alg":"HS256","typ":"JOSE+JSON"})", good_claims().dump())), TokenError::kBadClaim);
  EXPECT_TRUE(verify_token(token_of(R"({"alg":"HS256","typ":"jwt"})", good_claims().dump()), kSecret, kNow));
  EXPECT_TRUE(verify_token(token_of(R"({"alg":"HS256"})", good_claims().dump()), kSecret, kNow));
}

TEST(TokenTest, MalformedShapesAreRefused) {
  const std::string good = token_of(good_claims());
  EXPECT_EQ(error_of(""), TokenError::kMalformed);
  EXPECT_EQ(error_of("abc"), TokenError::kMalformed);
  EXPECT_EQ(error_of("a.b"), TokenError::kMalformed);
  EXPECT_EQ(error_of(good + ".x"), TokenError::kMalformed) << "four parts";
  EXPECT_EQ(error_of("!!." + good.substr(good.find('.') + 1)), TokenError::kMalformed) << "bad base64url";
  EXPECT_EQ(error_of(good + "="), TokenError::kMalformed) << "padded signature";
  EXPECT_EQ(error_of(std::string(kMaxTokenBytes + 1, 'a')), TokenError::kMalformed) << "too long";
}

TEST(TokenTest, PartsThatAreNotJsonObjectsAreMalformed) {
  EXPECT_EQ(error_of(token_of("not json", good_claims().dump())), TokenError::kMalformed);
  EXPECT_EQ(error_of(token_of(R"(["HS256"])", good_claims().dump())), TokenError::kMalformed);
  EXPECT_EQ(error_of(token_of(R"({"alg":"HS256"})", "[1,2]")), TokenError::kMalformed);
  EXPECT_EQ(error_of(token_of(R"({"alg":"HS256"})", "{\"sub\":")), TokenError::kMalformed);
  EXPECT_EQ(error_of(token_of(R"({"alg":"HS256"})", "{\"sub\":\"\xff\",\"exp\":1}")), TokenError::kMalformed)
      << "not UTF-8";
}

TEST(TokenTest, MissingSubOrExpIsRefused) {
  json c = good_claims();
  c.erase("sub");
  EXPECT_EQ(error_of(token_of(c)), TokenError::kMissingClaim);
  c = good_claims();
  c.erase("exp");
  EXPECT_EQ(error_of(token_of(c)), TokenError::kMissingClaim);
}

TEST(TokenTest, ClaimsOfTheWrongTypeAreRefused) {
  const std::vector<std::pair<const char*, json>> bad{
      {"sub", 42},
      {"sub", ""},
      {"sub", json::array({"a"})},
      {"exp", "1800000600"},
      {"exp", -1},
      {"exp", 1e300},
      {"exp", nullptr},
      {"nbf", "soon"},
      {"iat", true},
      {"subscribe", "md.*"},
      {"subscribe", json::array({1})},
      {"subscribe", json::array({""})},
      {"publish", json::object()},
      {"publish", json::array({nullptr})},
  };
  for (const auto& [name, value] : bad) {
    json c = good_claims();
    c[name] = value;
    EXPECT_EQ(error_of(token_of(c)), TokenError::kBadClaim) << name << " = " << value.dump();
  }
}

TEST(TokenTest, ExpiryHasASmallLeeway) {
  json c = good_claims();
  c["exp"] = 1'800'000'000 - kTokenLeeway.count();
  EXPECT_TRUE(verify_token(token_of(c), kSecret, kNow)) << "exactly at the leeway";
  c["exp"] = 1'800'000'000 - kTokenLeeway.count() - 1;
  EXPECT_EQ(error_of(token_of(c)), TokenError::kExpired);
  c["exp"] = 1'700'000'000.5;
  EXPECT_EQ(error_of(token_of(c)), TokenError::kExpired) << "fractional NumericDate";
}

TEST(TokenTest, NotBeforeInTheFutureIsRefused) {
  json c = good_claims();
  c["nbf"] = 1'800'000'000 + kTokenLeeway.count();
  EXPECT_TRUE(verify_token(token_of(c), kSecret, kNow)) << "within the leeway";
  c["nbf"] = 1'800'000'000 + kTokenLeeway.count() + 1;
  EXPECT_EQ(error_of(token_of(c)), TokenError::kNotYetValid);
}

TEST(TokenTest, ShortSecretIsRefusedForVerifyAndMint) {
  const std::string short_secret(kMinTokenSecretBytes - 1, 's');
  const auto v = verify_token(token_of(good_claims()), short_secret, kNow);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error(), TokenError::kWeakSecret);
  const auto m = mint_token(Grant{"a", kNow, std::nullopt, std::nullopt}, short_secret, kNow);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error(), TokenError::kWeakSecret);
}

TEST(TokenTest, MintRefusesWhatVerifyWouldRefuse) {
  EXPECT_EQ(mint_token(Grant{"", kNow, std::nullopt, std::nullopt}, kSecret, kNow).error(), TokenError::kBadClaim);
  EXPECT_EQ(mint_token(Grant{"a", kNow, std::vector<std::string>{""}, std::nullopt}, kSecret, kNow).error(),
            TokenError::kBadClaim);
  EXPECT_EQ(mint_token(Grant{"\xff", kNow, std::nullopt, std::nullopt}, kSecret, kNow).error(), TokenError::kBadClaim);
}

TEST(TokenTest, EveryErrorHasANameAndASentence) {
  for (std::size_t i = 0; i < kTokenErrorCount; ++i) {
    const auto e = static_cast<TokenError>(i);
    EXPECT_NE(to_string(e), "unknown");
    EXPECT_NE(describe(e), "the token was refused");
  }
}

}  // namespace
}  // namespace ringcast::broker
