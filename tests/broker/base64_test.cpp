// Both base64 forms (util/base64.hpp): the RFC 4648 vectors, round trips of
// every byte, and every non-canonical text refused.
#include "broker/util/base64.hpp"

#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace ringcast::broker {
namespace {

std::string encode(std::string_view s, Base64 a) {
  std::string out;
  base64_encode(s, a, out);
  return out;
}

std::optional<std::string> decode(std::string_view s, Base64 a) {
  std::string out;
  if (!base64_decode(s, a, out)) return std::nullopt;
  return out;
}

TEST(Base64Test, EncodesRfc4648VectorsWithAndWithoutPadding) {
  const std::pair<std::string_view, std::string_view> vectors[] = {{"", ""},
                                                                   {"f", "Zg=="},
                                                                   {"fo", "Zm8="},
                                                                   {"foo", "Zm9v"},
                                                                   {"foob", "Zm9vYg=="},
                                                                   {"fooba", "Zm9vYmE="},
                                                                   {"foobar", "Zm9vYmFy"}};
  for (const auto& [bytes, text] : vectors) {
    EXPECT_EQ(encode(bytes, Base64::kStandard), text);
    std::string unpadded(text);
    while (!unpadded.empty() && unpadded.back() == '=') unpadded.pop_back();
    EXPECT_EQ(encode(bytes, Base64::kUrl), unpadded);
  }
  EXPECT_EQ(encode("\xfb\xff", Base64::kStandard), "+/8=");
  EXPECT_EQ(encode("\xfb\xff", Base64::kUrl), "-_8") << "the URL-safe alphabet";
}

TEST(Base64Test, EncodeAppendsToWhatIsThere) {
  std::string out = "x:";
  base64_encode("foo", Base64::kStandard, out);
  EXPECT_EQ(out, "x:Zm9v");
}

TEST(Base64Test, DecodeRoundTripsEveryByteInBothForms) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (Base64 a : {Base64::kStandard, Base64::kUrl}) {
    for (std::size_t n = 0; n <= all.size(); ++n) {
      const std::string s = all.substr(0, n);
      EXPECT_EQ(decode(encode(s, a), a), s) << n;
    }
  }
}

TEST(Base64Test, StandardDecodeRefusesNonCanonicalText) {
  for (std::string_view bad : {"Zm9", "Zm9=v", "Zm!v", "Zh==", "====", "Zm=v", "Z===", "Zg", "Zm9v-_8=", " Zm9v"}) {
    EXPECT_FALSE(decode(bad, Base64::kStandard)) << bad;
  }
  EXPECT_EQ(decode("Zg==", Base64::kStandard), "f");
}

TEST(Base64Test, UrlDecodeRefusesNonCanonicalText) {
  EXPECT_FALSE(decode("Zg==", Base64::kUrl)) << "padding";
  EXPECT_FALSE(decode("Zm9v+A", Base64::kUrl)) << "the standard alphabet's +";
  EXPECT_FALSE(decode("Zm9v/A", Base64::kUrl)) << "the standard alphabet's /";
  EXPECT_FALSE(decode("Zm9 v", Base64::kUrl)) << "whitespace";
  EXPECT_FALSE(decode("Zm9vY", Base64::kUrl)) << "length 1 mod 4";
  EXPECT_FALSE(decode("Zh", Base64::kUrl)) << "non-zero trailing bits";
  EXPECT_EQ(decode("Zg", Base64::kUrl), "f");
}

}  // namespace
}  // namespace ringcast::broker
