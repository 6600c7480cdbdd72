// The glob matcher against Redis 7's stringmatchlen. Every row was checked
// against a real redis-server 7.0.15 (KEYS for most rows, PUBSUB CHANNELS for the
// empty-string rows), so the table is Redis's semantics, not our reading of it.
#include <random>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "broker/util/glob.hpp"
#include "glob_oracle.hpp"

namespace ringcast::broker {
namespace {

struct GlobCase {
  std::string_view pattern;
  std::string_view str;
  bool matches;
};

// NOLINTNEXTLINE(cert-err58-cpp)
const GlobCase kRedisCases[] = {
    {"*", "", false},  // Redis: the loop never runs, so "*" does not match ""
    {"", "", true},
    {"", "a", false},
    {"*", "anything", true},
    {"h?llo", "hello", true},
    {"h?llo", "hllo", false},
    {"h*llo", "heeeello", true},
    {"h*llo", "hllo", true},
    {"h[ae]llo", "hello", true},
    {"h[ae]llo", "hillo", false},
    {"h[^e]llo", "hallo", true},
    {"h[^e]llo", "hello", false},
    {"h[a-b]llo", "hbllo", true},
    {"h[a-b]llo", "hcllo", false},
    {"h[b-a]llo", "hallo", true},
    {"h\\*llo", "h*llo", true},
    {"h\\*llo", "hello", false},
    {"[abc", "a", true},
    {"[abc", "d", false},
    {"[abc", "ab", false},
    {"[a\\]]", "]", true},
    {"[\\]", "]", true},
    {"[\\]", "\\", false},
    {"a\\", "a\\", true},
    {"\\", "\\", true},
    {"*a", "ba", true},
    {"*a", "bb", false},
    {"a*b*c", "axxbyyc", true},
    {"a*b*c", "axxbyy", false},
    {"[a-]", "_", true},
    {"[a-]", "-", false},
    {"?", "", false},
    {"a?", "a", false},
    {"*?", "a", true},
    {"**a", "a", true},
    {"[\x80"
     "-\xff"
     "]",
     "\x90"
     "",
     true},
    {"[a-\xff"
     "]",
     "b", false},
    {"[a-\xff"
     "]",
     "\x90"
     "",
     false},
    {"a*a*a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
    {"news.*", "news.art", true},
    {"news.*", "news", false},
    {"[^]", "a", true},
    {"[^", "a", true},
    {"[]", "a", false},
    {"[", "a", false},
    {"x[]]", "x]", false},
    {"a*", "a", true},
    {"*\\", "x\\", true},
    {"[^a-c]x", "dx", true},
    {"[^a-c]x", "bx", false},
    {"?*?", "ab", true},
    {"?*?", "a", false},
    {"[\\-]", "-", true},
    {"[a\\-z]", "m", false},
    {"[a\\-z]", "-", true},
};

TEST(GlobTest, MatchesRedisStringmatchlenTable) {
  for (const GlobCase& c : kRedisCases) {
    EXPECT_EQ(glob_match(c.pattern, c.str), c.matches) << "pattern '" << c.pattern << "' string '" << c.str << "'";
  }
}

TEST(GlobTest, EmbeddedNulIsAnOrdinaryByte) {
  using namespace std::string_view_literals;
  EXPECT_TRUE(glob_match("a\0b"sv, "a\0b"sv));
  EXPECT_FALSE(glob_match("a\0b"sv, "a\0c"sv));
  EXPECT_TRUE(glob_match("a?b"sv, "a\0b"sv));
}

TEST(GlobTest, PathologicalStarsFinishQuickly) {
  // CVE-2022-36021: without the early exit this is exponential.
  const std::string pattern = "a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
  const std::string str(200, 'a');
  EXPECT_FALSE(glob_match(pattern, str));
}

// Issue 40: matching recursed once per `*`, so a 300,000-star pattern
// overflowed the stack (SIGSEGV). Iterative now: any number of stars.
TEST(GlobTest, HundredsOfThousandsOfStarsDoNotRecurse) {
  std::string pattern;
  for (int i = 0; i < 300'000; ++i) pattern += "*a";
  const std::string str(300'000, 'a');
  EXPECT_TRUE(glob_match(pattern, str));
  EXPECT_FALSE(glob_match(pattern + "b", str));
  EXPECT_FALSE(glob_match(pattern, std::string(299'999, 'a')));
}

// The iterative matcher against Redis's recursive one (glob_oracle.hpp) on
// random patterns and strings over a small alphabet rich in the grammar's edge
// cases (classes, ranges, escapes, unterminated brackets, NUL, a byte >= 0x80).
TEST(GlobTest, AgreesWithRedisRecursiveMatcherOnRandomInputs) {
  using namespace std::string_view_literals;
  // '\\' is one backslash; "\0"sv keeps its NUL; '\x80' is negative as a char.
  constexpr std::string_view kPatternBytes = "ab*?[]^-\\\0\x80"sv;
  constexpr std::string_view kStringBytes = "ab]^-\\\0\x80"sv;
  std::mt19937 rng(40);
  auto random_string = [&rng](std::string_view alphabet, std::size_t max_len) {
    std::string s(std::uniform_int_distribution<std::size_t>(0, max_len)(rng), ' ');
    for (char& c : s) c = alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(rng)];
    return s;
  };
  for (int i = 0; i < 200'000; ++i) {
    const std::string pattern = random_string(kPatternBytes, 10);
    const std::string str = random_string(kStringBytes, 10);
    ASSERT_EQ(glob_match(pattern, str), testing::glob_oracle(pattern, str))
        << "pattern '" << pattern << "' string '" << str << "'";
  }
}

TEST(GlobTest, PatternLengthLimit) {
  EXPECT_TRUE(glob_pattern_fits(std::string(kMaxGlobPatternBytes, '*')));
  EXPECT_FALSE(glob_pattern_fits(std::string(kMaxGlobPatternBytes + 1, 'a')));
}

TEST(GlobTest, LiteralPrefixStopsAtFirstSpecialByte) {
  EXPECT_EQ(glob_literal_prefix("news.*"), 5u);
  EXPECT_EQ(glob_literal_prefix("news"), 4u);
  EXPECT_EQ(glob_literal_prefix("*"), 0u);
  EXPECT_EQ(glob_literal_prefix("a?b"), 1u);
  EXPECT_EQ(glob_literal_prefix("ab[c]"), 2u);
  EXPECT_EQ(glob_literal_prefix("ab\\*"), 2u);
}

}  // namespace
}  // namespace ringcast::broker
