#include "ringcast/broker/grant.hpp"

#include <gtest/gtest.h>

namespace ringcast::broker {
namespace {

Grant with(std::optional<std::vector<std::string>> subscribe, std::optional<std::vector<std::string>> publish) {
  return Grant{"alice", {}, std::move(subscribe), std::move(publish)};
}

TEST(GrantTest, AbsentClaimsRestrictNothing) {
  const Grant g = with(std::nullopt, std::nullopt);
  EXPECT_TRUE(g.may_subscribe("anything"));
  EXPECT_TRUE(g.may_subscribe_pattern("*"));
  EXPECT_TRUE(g.may_publish("anything"));
}

TEST(GrantTest, EmptyClaimsAllowNothing) {
  const Grant g = with(std::vector<std::string>{}, std::vector<std::string>{});
  EXPECT_FALSE(g.may_subscribe("md.x"));
  EXPECT_FALSE(g.may_subscribe_pattern("md.*"));
  EXPECT_FALSE(g.may_publish("md.x"));
}

TEST(GrantTest, DirectionsAreIndependent) {
  const Grant g = with(std::vector<std::string>{"md.*"}, std::vector<std::string>{"orders.eu"});
  EXPECT_TRUE(g.may_subscribe("md.eurusd"));
  EXPECT_FALSE(g.may_subscribe("orders.eu"));
  EXPECT_TRUE(g.may_publish("orders.eu"));
  EXPECT_FALSE(g.may_publish("md.eurusd"));
  EXPECT_FALSE(g.may_publish("orders.eu2"));
}

TEST(GrantTest, ChannelsMatchWithRedisGlobSyntax) {
  const Grant g = with(std::vector<std::string>{"md.?", "fx.[a-c]*", "lit\\*"}, std::nullopt);
  EXPECT_TRUE(g.may_subscribe("md.a"));
  EXPECT_FALSE(g.may_subscribe("md.ab"));
  EXPECT_TRUE(g.may_subscribe("fx.b1"));
  EXPECT_FALSE(g.may_subscribe("fx.d1"));
  EXPECT_TRUE(g.may_subscribe("lit*"));
  EXPECT_FALSE(g.may_subscribe("litx"));
}

TEST(GrantTest, PatternEqualToAGrantedGlobIsAllowed) {
  const Grant g = with(std::vector<std::string>{"md.?", "fx.[a-c]*"}, std::nullopt);
  EXPECT_TRUE(g.may_subscribe_pattern("md.?"));
  EXPECT_TRUE(g.may_subscribe_pattern("fx.[a-c]*"));
}

TEST(GrantTest, PatternWithoutGlobSyntaxIsAnExactChannel) {
  const Grant g = with(std::vector<std::string>{"md.?"}, std::nullopt);
  EXPECT_TRUE(g.may_subscribe_pattern("md.a"));
  EXPECT_FALSE(g.may_subscribe_pattern("md.ab"));
}

TEST(GrantTest, PatternUnderAPrefixStarGlobIsAllowed) {
  const Grant g = with(std::vector<std::string>{"md.*"}, std::nullopt);
  EXPECT_TRUE(g.may_subscribe_pattern("md.eu.*"));
  EXPECT_TRUE(g.may_subscribe_pattern("md.[ab]*"));
  EXPECT_TRUE(g.may_subscribe_pattern("md.?"));
  EXPECT_FALSE(g.may_subscribe_pattern("*")) << "wider than the grant";
  EXPECT_FALSE(g.may_subscribe_pattern("m*"));
  EXPECT_FALSE(g.may_subscribe_pattern("md*")) << "matches mdx, which md.* does not";
  EXPECT_FALSE(g.may_subscribe_pattern("[m]d.*")) << "no literal prefix: refused though covered";
}

TEST(GrantTest, PatternThatAGlobMatchesAsTextIsNotEnough) {
  // `md.?` matches the string "md.*", but the pattern md.* reaches md.abc.
  const Grant g = with(std::vector<std::string>{"md.?", "md.[a-z]"}, std::nullopt);
  EXPECT_FALSE(g.may_subscribe_pattern("md.*"));
  EXPECT_FALSE(g.may_subscribe_pattern("md.[b]")) << "covered by md.[a-z], but not one of the rules";
}

TEST(GrantTest, StarGlobCoversEveryPattern) {
  const Grant g = with(std::vector<std::string>{"*"}, std::nullopt);
  EXPECT_TRUE(g.may_subscribe_pattern("*"));
  EXPECT_TRUE(g.may_subscribe_pattern("[x]?"));
}

}  // namespace
}  // namespace ringcast::broker
