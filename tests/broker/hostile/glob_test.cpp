// Issue 40, case 1: a long glob crashed the broker (SIGSEGV). Matching
// recursed once per `*`; a 300,000-star pattern overflowed the stack, from
// RESP without any permission and over WebSocket with a token limited to
// `pub.*`. Matching is iterative now, and a pattern longer than
// kMaxGlobPatternBytes is refused with the limit in the error.
#include <chrono>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hostile_support.hpp"
#include "ringcast/broker/token.hpp"
#include "temp_dir.hpp"
#include "ws_client.hpp"

namespace ringcast::broker::hostile {
namespace {

constexpr std::size_t kPatternLimit = 1024;  // kMaxGlobPatternBytes, as docs/security.md states it

std::string stars(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += "*a";
  return s;
}

TEST(HostileGlob, RespPubsubChannelsWithAStarPerByteIsRefusedAndTheBrokerServes) {
  Broker b;
  test::RespClient sub(b.port()), c(b.port());
  ASSERT_TRUE(sub.subscribe(std::string(300'000, 'a')));
  ASSERT_TRUE(c.send({"PUBSUB", "CHANNELS", stars(300'000)}));
  const auto r = c.next(test::deadline_in(std::chrono::seconds(20)));
  ASSERT_TRUE(r.has_value()) << "no reply: the broker died or hung";
  EXPECT_EQ(r->type, '-');
  EXPECT_EQ(r->str, "ERR pattern of 600000 bytes is longer than the 1024-byte limit");
  EXPECT_TRUE(b.alive());
  EXPECT_TRUE(b.serves_canary());
}

TEST(HostileGlob, RespPsubscribeOfALongPatternIsRefusedWithTheLimit) {
  Broker b;
  test::RespClient c(b.port());
  const auto r = c.call({"PSUBSCRIBE", "news.*", stars(600)});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->type, '-');
  EXPECT_EQ(r->str, "ERR pattern of 1200 bytes is longer than the 1024-byte limit");
  // Refused whole, as a permission refusal is: not even news.* was added.
  const auto numpat = c.call({"PUBSUB", "NUMPAT"});
  ASSERT_TRUE(numpat.has_value());
  EXPECT_EQ(numpat->num, 0);
  EXPECT_TRUE(b.serves_canary());
}

// The longest pattern allowed, built to be slow (a star, then a segment that
// matches almost everywhere and fails at its last byte), against a long
// channel name: |channel| x |segment| steps, and the publishes finish.
TEST(HostileGlob, TheSlowestAllowedPatternCostsBoundedWork) {
  Broker b;
  test::RespClient sub(b.port()), pub(b.port());
  const std::string slow = "*" + std::string(kPatternLimit - 2, 'a') + "b";
  ASSERT_TRUE(sub.subscribe(slow, /*pattern=*/true));
  const std::string channel(16 * 1024, 'a');
  for (int i = 0; i < 3; ++i) {
    const auto r = pub.call({"PUBLISH", channel, "x"});
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->num, 0);
  }
  EXPECT_TRUE(b.serves_canary());
}

TEST(HostileGlob, WebSocketTokenLimitedToPubCannotCrashWithAStarPattern) {
  test::TempDir dir;
  const std::string secret(40, 'k');
  const std::string secret_file = dir.path() + "/secret";
  std::ofstream(secret_file) << secret;
  Broker b({"--token-secret-file", secret_file});
  Grant g;
  g.subject = "mallory";
  g.expiry = std::chrono::system_clock::now() + std::chrono::hours(1);
  g.subscribe = std::vector<std::string>{"pub.*"};
  g.publish = std::vector<std::string>{"pub.*"};
  const auto token = mint_token(g, secret);
  ASSERT_TRUE(token.has_value());
  Grant canary = g;
  canary.subscribe.reset();
  canary.publish.reset();
  const auto canary_token = mint_token(canary, secret);
  ASSERT_TRUE(canary_token.has_value());
  b.set_credential(*canary_token);

  ws::test::WsClient c(b.ws_port());
  ASSERT_TRUE(c.upgraded());
  ASSERT_TRUE(c.send_json({{"type", "auth"}, {"token", *token}}));
  ASSERT_EQ(c.read_json(), (nlohmann::json{{"type", "authenticated"}}));
  ASSERT_TRUE(c.send_json({{"type", "subscribe"}, {"topic", "pub." + stars(300'000)}}));
  const auto r = c.read_json();
  ASSERT_TRUE(r.has_value()) << "no reply: the broker died or hung";
  EXPECT_EQ((*r)["type"], "error");
  EXPECT_EQ((*r)["message"], "subscribe: pattern of 600004 bytes is longer than the 1024-byte limit");
  // What crashed it: a publish the pattern must be matched against, one
  // recursion per byte of the channel.
  ASSERT_TRUE(c.send_json({{"type", "publish"}, {"topic", "pub." + std::string(300'000, 'a')}, {"payload", "x"}}));
  ASSERT_TRUE(c.send_json({{"type", "subscribe"}, {"topic", "pub.after"}}));
  const auto after = c.read_json();
  ASSERT_TRUE(after.has_value()) << "no reply after the publish: the broker died";
  EXPECT_EQ((*after)["type"], "subscribed") << *after;
  EXPECT_TRUE(b.alive());
  EXPECT_TRUE(b.serves_canary());
}

}  // namespace
}  // namespace ringcast::broker::hostile
