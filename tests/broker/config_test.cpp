#include <gtest/gtest.h>

#include "ringcast/broker/config.hpp"

namespace ringcast::broker {
namespace {

TEST(ConfigTest, SizesTakeRedisSuffixes) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("64k"), 64u << 10);
  EXPECT_EQ(parse_size("8MB"), 8u << 20);
  EXPECT_EQ(parse_size("1gb"), std::size_t{1} << 30);
  EXPECT_FALSE(parse_size("mb"));
  EXPECT_FALSE(parse_size("12x"));
  EXPECT_FALSE(parse_size(""));
  EXPECT_FALSE(parse_size("99999999999999999999gb"));
}

TEST(ConfigTest, OverflowPolicyNamesRoundTripCaseInsensitively) {
  for (OverflowPolicy p : {OverflowPolicy::kDropOldest, OverflowPolicy::kDropNewest, OverflowPolicy::kDisconnect,
                           OverflowPolicy::kBlock, OverflowPolicy::kConflate}) {
    EXPECT_EQ(parse_overflow_policy(to_string(p)), p);
  }
  EXPECT_EQ(parse_overflow_policy("DROP-OLDEST"), OverflowPolicy::kDropOldest);
  EXPECT_EQ(parse_overflow_policy("Block"), OverflowPolicy::kBlock);
  EXPECT_EQ(parse_overflow_policy("Conflate"), OverflowPolicy::kConflate);
  EXPECT_FALSE(parse_overflow_policy("drop"));
}

}  // namespace
}  // namespace ringcast::broker
