#include "broker/auth/base64url.hpp"

#include <gtest/gtest.h>

namespace ringcast::broker::auth {
namespace {

TEST(Base64urlTest, EncodesRfc4648VectorsWithoutPadding) {
  EXPECT_EQ(base64url_encode(""), "");
  EXPECT_EQ(base64url_encode("f"), "Zg");
  EXPECT_EQ(base64url_encode("fo"), "Zm8");
  EXPECT_EQ(base64url_encode("foo"), "Zm9v");
  EXPECT_EQ(base64url_encode("foob"), "Zm9vYg");
  EXPECT_EQ(base64url_encode("fooba"), "Zm9vYmE");
  EXPECT_EQ(base64url_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64url_encode("\xfb\xff"), "-_8") << "the URL-safe alphabet";
}

TEST(Base64urlTest, DecodeRoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (std::size_t n = 0; n <= all.size(); n += 37) {
    const std::string s = all.substr(0, n);
    EXPECT_EQ(base64url_decode(base64url_encode(s)), s);
  }
}

TEST(Base64urlTest, DecodeRefusesNonCanonicalInput) {
  EXPECT_FALSE(base64url_decode("Zg==")) << "padding";
  EXPECT_FALSE(base64url_decode("Zm9v+A")) << "the standard alphabet's +";
  EXPECT_FALSE(base64url_decode("Zm9v/A")) << "the standard alphabet's /";
  EXPECT_FALSE(base64url_decode("Zm9 v")) << "whitespace";
  EXPECT_FALSE(base64url_decode("Zm9vY")) << "length 1 mod 4";
  EXPECT_FALSE(base64url_decode("Zh")) << "non-zero trailing bits";
  EXPECT_EQ(base64url_decode("Zg"), "f");
}

}  // namespace
}  // namespace ringcast::broker::auth
