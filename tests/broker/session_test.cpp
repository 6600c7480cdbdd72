// Protocol behaviour of one connection, byte for byte, without sockets. Expected
// replies were captured from redis-server 7.0.15 for the same input, except where
// a comment says the broker differs on purpose.
#include <memory>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "broker/core/broker_core.hpp"
#include "broker/resp/session.hpp"
#include "test_support.hpp"

namespace ringcast::broker {
namespace {

class TestSession final : public RespSession {
 public:
  explicit TestSession(BrokerCore& core) : RespSession(core, "127.0.0.1:1", testing::null_waker()) {}
  // Everything the writer would have sent so far.
  std::string output() { return testing::concat(testing::drain_all(queue())); }
  std::string send(std::string_view in) {
    last = on_input(in);
    return output();
  }
  InputResult last = InputResult::kOk;
};

class SessionTest : public ::testing::Test {
 protected:
  explicit SessionTest(BrokerConfig cfg = {}) : core_(std::move(cfg)) {}
  std::unique_ptr<TestSession> connect() { return std::make_unique<TestSession>(core_); }
  BrokerCore core_;
};

TEST_F(SessionTest, SubscribeConfirmsEachChannelWithRunningCount) {
  auto s = connect();
  EXPECT_EQ(s->send("SUBSCRIBE a b\r\n"),
            "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n");
  EXPECT_EQ(s->send("PSUBSCRIBE c*\r\n"), "*3\r\n$10\r\npsubscribe\r\n$2\r\nc*\r\n:3\r\n");
}

TEST_F(SessionTest, PingInResp2SubscribedModeRepliesWithPongArray) {
  auto s = connect();
  s->send("SUBSCRIBE a\r\n");
  EXPECT_EQ(s->send("PING\r\nPING x\r\n"), "*2\r\n$4\r\npong\r\n$0\r\n\r\n*2\r\n$4\r\npong\r\n$1\r\nx\r\n");
  EXPECT_EQ(s->send("PING a b\r\n"), "-ERR wrong number of arguments for 'ping' command\r\n");
}

TEST_F(SessionTest, Resp2SubscribedModeRejectsOtherCommandsWithRedisText) {
  auto s = connect();
  s->send("SUBSCRIBE a\r\n");
  EXPECT_EQ(s->send("PUBLISH a b\r\nCLIENT SETNAME x\r\nHELLO 3\r\n"),
            "-ERR Can't execute 'publish': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
            "RESET are allowed in this context\r\n"
            "-ERR Can't execute 'client|setname': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
            "QUIT / RESET are allowed in this context\r\n"
            "-ERR Can't execute 'hello': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
            "RESET are allowed in this context\r\n");
}

TEST_F(SessionTest, BareUnsubscribeReportsEachChannelThenNullWhenNone) {
  auto s = connect();
  s->send("SUBSCRIBE a b\r\n");
  EXPECT_EQ(s->send("UNSUBSCRIBE\r\nUNSUBSCRIBE\r\nPUNSUBSCRIBE\r\n"),
            "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:0\r\n"
            "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n");
}

TEST_F(SessionTest, Resp3UsesPushesAndAllowsCommandsWhileSubscribed) {
  auto s = connect();
  const std::string hello = s->send("HELLO 3\r\n");
  EXPECT_EQ(hello.substr(0, 4), "%7\r\n");
  EXPECT_NE(hello.find("$5\r\nproto\r\n:3\r\n"), std::string::npos);
  EXPECT_EQ(s->send("UNSUBSCRIBE\r\nPING\r\nSUBSCRIBE a\r\nPING\r\nPUBLISH a x\r\n"),
            ">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n+PONG\r\n>3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
            "+PONG\r\n>3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nx\r\n:1\r\n");
}

TEST_F(SessionTest, HelloRejectsBadVersionsAndReportsInResp2AsFlatArray) {
  auto s = connect();
  EXPECT_EQ(s->send("HELLO 4\r\nHELLO x\r\n"),
            "-NOPROTO unsupported protocol version\r\n"
            "-ERR Protocol version is not an integer or out of range\r\n");
  const std::string r = s->send("HELLO\r\n");
  EXPECT_EQ(r.substr(0, 5), "*14\r\n");
  EXPECT_EQ(s->send("HELLO 3 FOO\r\n"), "-ERR Syntax error in HELLO option 'FOO'\r\n");
}

TEST_F(SessionTest, UnknownCommandsAndSubcommandsGetRedisErrors) {
  auto s = connect();
  EXPECT_EQ(s->send("FOO\r\nFOO bar baz\r\nCLIENT FOO\r\nPUBSUB\r\nCLIENT SETNAME\r\n"),
            "-ERR unknown command 'FOO', with args beginning with: \r\n"
            "-ERR unknown command 'FOO', with args beginning with: 'bar' 'baz' \r\n"
            "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n"
            "-ERR wrong number of arguments for 'pubsub' command\r\n"
            "-ERR wrong number of arguments for 'client|setname' command\r\n");
}

TEST_F(SessionTest, AuthWithoutPasswordConfiguredMatchesRedis) {
  auto s = connect();
  EXPECT_EQ(s->send("AUTH x\r\nAUTH a b c\r\nAUTH a b\r\nAUTH default anything\r\n"),
            "-ERR AUTH <password> called without any password configured for the default user. "
            "Are you sure your configuration is correct?\r\n"
            "-ERR syntax error\r\n"
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
            "+OK\r\n");
}

TEST_F(SessionTest, ClientNameIdAndOverflowPolicy) {
  auto s = connect();
  EXPECT_EQ(s->send("CLIENT GETNAME\r\nCLIENT SETNAME \"a b\"\r\nCLIENT SETNAME me\r\nCLIENT GETNAME\r\n"),
            "$-1\r\n-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
            "+OK\r\n$2\r\nme\r\n");
  EXPECT_EQ(s->send("CLIENT ID\r\n"), ":" + std::to_string(s->id()) + "\r\n");
  EXPECT_EQ(s->send("CLIENT OVERFLOW\r\n"), "$10\r\ndisconnect\r\n");
  EXPECT_EQ(s->send("CLIENT OVERFLOW drop-oldest\r\nCLIENT OVERFLOW\r\n"), "+OK\r\n$11\r\ndrop-oldest\r\n");
  EXPECT_EQ(s->queue().policy(), OverflowPolicy::kDropOldest);
  EXPECT_EQ(s->send("CLIENT OVERFLOW sometimes\r\n"),
            "-ERR overflow policy must be drop-oldest, drop-newest, disconnect, block or conflate\r\n");
  const std::string list = s->send("CLIENT LIST\r\n");
  EXPECT_NE(list.find("name=me"), std::string::npos);
  EXPECT_NE(list.find("policy=drop-oldest dropped-hard=0 dropped-soft=0 dropped-disconnect=0"), std::string::npos);
}

TEST_F(SessionTest, PublishReachesOtherSessionsAndCountsReceivers) {
  auto a = connect();
  auto b = connect();
  auto c = connect();
  a->send("SUBSCRIBE news\r\n");
  b->send("PSUBSCRIBE n*\r\n");
  EXPECT_EQ(c->send("PUBLISH news hi\r\n"), ":2\r\n");
  EXPECT_EQ(a->output(), "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
  EXPECT_EQ(b->output(), "*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
  EXPECT_EQ(c->send("PUBSUB NUMSUB news x\r\nPUBSUB NUMPAT\r\nPUBSUB CHANNELS\r\n"),
            "*4\r\n$4\r\nnews\r\n:1\r\n$1\r\nx\r\n:0\r\n:1\r\n*1\r\n$4\r\nnews\r\n");
}

TEST_F(SessionTest, PipelinedPublishesAreBatchedButRepliedInOrder) {
  auto sub = connect();
  auto pub = connect();
  sub->send("SUBSCRIBE a b\r\n");
  (void)sub->output();
  EXPECT_EQ(pub->send("PUBLISH a 1\r\nPUBLISH a 2\r\nPING\r\nPUBLISH b 3\r\nPUBLISH a\r\nPUBLISH c 4\r\n"),
            ":1\r\n:1\r\n+PONG\r\n:1\r\n-ERR wrong number of arguments for 'publish' command\r\n:0\r\n");
  EXPECT_EQ(sub->output(),
            "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\n1\r\n"
            "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\n2\r\n"
            "*3\r\n$7\r\nmessage\r\n$1\r\nb\r\n$1\r\n3\r\n");
  EXPECT_EQ(core_.stats().messages_published, 4u);
  EXPECT_EQ(core_.stats().deliveries, 3u);
}

TEST_F(SessionTest, ALargePayloadIsPublishedOnItsOwnInOrder) {
  auto sub = connect();
  auto pub = connect();
  sub->send("SUBSCRIBE a\r\n");
  (void)sub->output();
  const std::string big(100u << 10, 'b');  // over the 64 KiB batching threshold
  const std::string in = "PUBLISH a 1\r\n*3\r\n$7\r\nPUBLISH\r\n$1\r\na\r\n$" + std::to_string(big.size()) + "\r\n" +
                         big + "\r\nPUBLISH a 3\r\n";
  EXPECT_EQ(pub->send(in), ":1\r\n:1\r\n:1\r\n");
  const std::string out = sub->output();
  const auto one = out.find("$1\r\n1\r\n");
  const auto two = out.find(big);
  const auto three = out.find("$1\r\n3\r\n");
  ASSERT_NE(one, std::string::npos);
  ASSERT_NE(two, std::string::npos);
  ASSERT_NE(three, std::string::npos);
  EXPECT_LT(one, two);
  EXPECT_LT(two, three);
}

TEST_F(SessionTest, ABatchLargerThanItsCapIsPublishedInFull) {
  auto sub = connect();
  auto pub = connect();
  sub->send("SUBSCRIBE a\r\n");
  (void)sub->output();
  constexpr int kCount = 2500;  // above the session's cap of 1024 batched PUBLISHes
  std::string in;
  std::string replies;
  for (int i = 0; i < kCount; ++i) {
    in += "*3\r\n$7\r\nPUBLISH\r\n$1\r\na\r\n$" + std::to_string(std::to_string(i).size()) + "\r\n" +
          std::to_string(i) + "\r\n";
    replies += ":1\r\n";
  }
  EXPECT_EQ(pub->send(in), replies);
  const std::string out = sub->output();
  std::size_t frames = 0;
  for (std::size_t at = out.find("message"); at != std::string::npos; at = out.find("message", at + 1)) ++frames;
  EXPECT_EQ(frames, static_cast<std::size_t>(kCount));
  EXPECT_NE(out.rfind("$4\r\n2499\r\n"), std::string::npos);
}

TEST_F(SessionTest, QuitAndProtocolErrorsCloseAfterTheReply) {
  auto s = connect();
  EXPECT_EQ(s->send("QUIT\r\nPING\r\n"), "+OK\r\n");
  EXPECT_EQ(s->last, Client::InputResult::kClose);
  auto t = connect();
  EXPECT_EQ(t->send("PING\r\n*1\r\n$600000000\r\n"), "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n");
  EXPECT_EQ(t->last, Client::InputResult::kClose);
}

TEST_F(SessionTest, ResetUnsubscribesSilentlyAndReturnsToResp2) {
  auto s = connect();
  s->send("HELLO 3\r\nSUBSCRIBE a\r\nCLIENT SETNAME n\r\nCLIENT OVERFLOW drop-newest\r\n");
  EXPECT_EQ(s->send("RESET\r\n"), "+RESET\r\n");
  EXPECT_EQ(s->subscription_count(), 0u);
  EXPECT_EQ(s->send("CLIENT GETNAME\r\nCLIENT OVERFLOW\r\n"), "$-1\r\n$10\r\ndisconnect\r\n");
  EXPECT_EQ(s->format(), WireFormat::kResp2);
}

TEST_F(SessionTest, InfoReportsBrokerSections) {
  auto s = connect();
  const std::string info = s->send("INFO\r\n");
  for (const char* section : {"# Server", "# Clients", "# Stats", "# Pubsub", "# Drops"}) {
    EXPECT_NE(info.find(section), std::string::npos) << section;
  }
  EXPECT_NE(info.find("connected_clients:1"), std::string::npos);
  const std::string pubsub = s->send("INFO pubsub\r\n");
  EXPECT_EQ(pubsub.find("# Server"), std::string::npos);
  s->send("HELLO 3\r\n");
  EXPECT_EQ(s->send("INFO clients\r\n").substr(0, 1), "=") << "RESP3 gets a verbatim string";
}

TEST_F(SessionTest, IncompleteCommandWaitsForMoreBytes) {
  auto s = connect();
  EXPECT_EQ(s->send("*2\r\n$9\r\nSUBSCR"), "");
  EXPECT_EQ(s->send("IBE\r\n$1\r\na\r"), "");
  EXPECT_EQ(s->send("\n"), "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n");
}

// Redis 7 sharded pub/sub. Standalone Redis is one shard: SSUBSCRIBE and
// SPUBLISH work on any channel, and shard channels are a namespace of their own.
TEST_F(SessionTest, ShardSubscriptionsAreCountedApartFromChannelsAndPatterns) {
  auto s = connect();
  EXPECT_EQ(s->send("SSUBSCRIBE a b\r\n"),
            "*3\r\n$10\r\nssubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$10\r\nssubscribe\r\n$1\r\nb\r\n:2\r\n");
  EXPECT_EQ(s->send("SSUBSCRIBE a\r\n"), "*3\r\n$10\r\nssubscribe\r\n$1\r\na\r\n:2\r\n");
  EXPECT_EQ(s->send("SUBSCRIBE x\r\n"), "*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n");
  EXPECT_EQ(s->send("PSUBSCRIBE y*\r\n"), "*3\r\n$10\r\npsubscribe\r\n$2\r\ny*\r\n:2\r\n");
  EXPECT_EQ(s->send("SUNSUBSCRIBE a\r\n"), "*3\r\n$12\r\nsunsubscribe\r\n$1\r\na\r\n:1\r\n");
  EXPECT_EQ(s->send("SUNSUBSCRIBE\r\n"), "*3\r\n$12\r\nsunsubscribe\r\n$1\r\nb\r\n:0\r\n");
  EXPECT_EQ(s->send("SUNSUBSCRIBE\r\n"), "*3\r\n$12\r\nsunsubscribe\r\n$-1\r\n:0\r\n");
  EXPECT_EQ(s->send("UNSUBSCRIBE\r\n"), "*3\r\n$11\r\nunsubscribe\r\n$1\r\nx\r\n:1\r\n");
  EXPECT_EQ(s->send("PUNSUBSCRIBE\r\n"), "*3\r\n$12\r\npunsubscribe\r\n$2\r\ny*\r\n:0\r\n");
  EXPECT_EQ(s->send("PING\r\n"), "+PONG\r\n") << "no subscription left: out of the RESP2 pub/sub context";
}

TEST_F(SessionTest, SpublishReachesOnlyShardSubscribersOfThatChannel) {
  auto s = connect();
  auto p = connect();
  s->send("SSUBSCRIBE a b\r\nSUBSCRIBE x\r\nPSUBSCRIBE *\r\n");
  (void)s->output();
  EXPECT_EQ(p->send("SPUBLISH a hi\r\n"), ":1\r\n");
  EXPECT_EQ(s->output(), "*3\r\n$8\r\nsmessage\r\n$1\r\na\r\n$2\r\nhi\r\n");
  EXPECT_EQ(p->send("SPUBLISH x hi\r\nSPUBLISH y1 hi\r\n"), ":0\r\n:0\r\n")
      << "neither a plain nor a pattern subscription matches SPUBLISH";
  EXPECT_EQ(s->output(), "");
  EXPECT_EQ(p->send("PUBLISH b hi\r\n"), ":1\r\n") << "only the pattern matches PUBLISH b";
  EXPECT_EQ(s->output(), "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$1\r\nb\r\n$2\r\nhi\r\n");
  EXPECT_EQ(core_.stats().shard_channels, 2u);
}

TEST_F(SessionTest, PubsubShardChannelsAndShardNumsubMatchRedis) {
  auto s = connect();
  auto p = connect();
  s->send("SSUBSCRIBE a b\r\nSUBSCRIBE x\r\n");
  EXPECT_EQ(p->send("PUBSUB SHARDCHANNELS a*\r\nPUBSUB SHARDNUMSUB a b x zz\r\nPUBSUB SHARDNUMSUB\r\n"
                    "PUBSUB CHANNELS\r\nPUBSUB NUMSUB a x\r\nPUBSUB SHARDCHANNELS a b\r\n"
                    "PUBSUB CHANNELS a b\r\n"),
            "*1\r\n$1\r\na\r\n*8\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n:1\r\n$1\r\nx\r\n:0\r\n$2\r\nzz\r\n:0\r\n*0\r\n"
            "*1\r\n$1\r\nx\r\n*4\r\n$1\r\na\r\n:0\r\n$1\r\nx\r\n:1\r\n"
            "-ERR unknown subcommand or wrong number of arguments for 'SHARDCHANNELS'. Try PUBSUB HELP.\r\n"
            "-ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP.\r\n");
  const std::string all = p->send("PUBSUB SHARDCHANNELS\r\n");  // hash order, as Redis
  EXPECT_TRUE(all == "*2\r\n$1\r\na\r\n$1\r\nb\r\n" || all == "*2\r\n$1\r\nb\r\n$1\r\na\r\n") << all;
}

TEST_F(SessionTest, ShardCommandsArityErrorsAndPubsubHelpMatchRedis) {
  auto s = connect();
  EXPECT_EQ(
      s->send("SSUBSCRIBE\r\nSPUBLISH a\r\nSPUBLISH a b c\r\nSUNSUBSCRIBE\r\nPUBSUB SHARDNUMSUB\r\nPUBSUB HELP\r\n"),
      "-ERR wrong number of arguments for 'ssubscribe' command\r\n"
      "-ERR wrong number of arguments for 'spublish' command\r\n"
      "-ERR wrong number of arguments for 'spublish' command\r\n"
      "*3\r\n$12\r\nsunsubscribe\r\n$-1\r\n:0\r\n*0\r\n"
      "*14\r\n+PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
      "+CHANNELS [<pattern>]\r\n"
      "+    Return the currently active channels matching a <pattern> (default: '*').\r\n"
      "+NUMPAT\r\n+    Return number of subscriptions to patterns.\r\n"
      "+NUMSUB [<channel> ...]\r\n"
      "+    Return the number of subscribers for the specified channels, excluding\r\n"
      "+    pattern subscriptions(default: no channels).\r\n"
      "+SHARDCHANNELS [<pattern>]\r\n"
      "+    Return the currently active shard level channels matching a <pattern> (default: '*').\r\n"
      "+SHARDNUMSUB [<shardchannel> ...]\r\n"
      "+    Return the number of subscribers for the specified shard level channel(s)\r\n"
      "+HELP\r\n+    Prints this help.\r\n");
  auto t = connect();
  EXPECT_EQ(t->send("SUNSUBSCRIBE x y\r\nPUBSUB NUMPAT\r\n"),
            "*3\r\n$12\r\nsunsubscribe\r\n$1\r\nx\r\n:0\r\n*3\r\n$12\r\nsunsubscribe\r\n$1\r\ny\r\n:0\r\n:0\r\n");
}

TEST_F(SessionTest, ShardSubscriptionAloneEntersTheResp2PubSubContext) {
  auto s = connect();
  s->send("SSUBSCRIBE c1 c2 c3\r\n");
  EXPECT_EQ(s->send("PUBLISH x y\r\nSPUBLISH a b\r\nPUBSUB SHARDCHANNELS\r\nCLIENT REPLY OFF\r\nPING\r\n"),
            "-ERR Can't execute 'publish': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are "
            "allowed in this context\r\n"
            "-ERR Can't execute 'spublish': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are "
            "allowed in this context\r\n"
            "-ERR Can't execute 'pubsub|shardchannels': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
            "RESET are allowed in this context\r\n"
            "-ERR Can't execute 'client|reply': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET "
            "are allowed in this context\r\n"
            "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
  // Bare SUNSUBSCRIBE reports in subscription order (Redis: hash order, c1 c3 c2 here).
  EXPECT_EQ(s->send("SUNSUBSCRIBE\r\nPING\r\n"),
            "*3\r\n$12\r\nsunsubscribe\r\n$2\r\nc1\r\n:2\r\n*3\r\n$12\r\nsunsubscribe\r\n$2\r\nc2\r\n:1\r\n"
            "*3\r\n$12\r\nsunsubscribe\r\n$2\r\nc3\r\n:0\r\n+PONG\r\n");
}

TEST_F(SessionTest, Resp3ShardPushesMatchRedis) {
  auto s = connect();
  s->send("HELLO 3\r\n");
  EXPECT_EQ(s->send("SSUBSCRIBE s1 s2\r\nSUBSCRIBE s1\r\n"),
            ">3\r\n$10\r\nssubscribe\r\n$2\r\ns1\r\n:1\r\n>3\r\n$10\r\nssubscribe\r\n$2\r\ns2\r\n:2\r\n"
            ">3\r\n$9\r\nsubscribe\r\n$2\r\ns1\r\n:1\r\n");
  EXPECT_EQ(s->send("SPUBLISH s1 m\r\n"), ">3\r\n$8\r\nsmessage\r\n$2\r\ns1\r\n$1\r\nm\r\n:1\r\n");
  EXPECT_EQ(s->send("PUBLISH s1 n\r\n"), ">3\r\n$7\r\nmessage\r\n$2\r\ns1\r\n$1\r\nn\r\n:1\r\n");
  EXPECT_EQ(s->send("SUNSUBSCRIBE nope\r\nSUNSUBSCRIBE\r\nSUNSUBSCRIBE\r\n"),
            ">3\r\n$12\r\nsunsubscribe\r\n$4\r\nnope\r\n:2\r\n>3\r\n$12\r\nsunsubscribe\r\n$2\r\ns1\r\n:1\r\n"
            ">3\r\n$12\r\nsunsubscribe\r\n$2\r\ns2\r\n:0\r\n>3\r\n$12\r\nsunsubscribe\r\n_\r\n:0\r\n");
  EXPECT_EQ(s->send("PUBSUB SHARDNUMSUB s1\r\nPUBSUB SHARDCHANNELS\r\n"), "*2\r\n$2\r\ns1\r\n:0\r\n*0\r\n");
}

// CLIENT REPLY ON|OFF|SKIP. Replies (errors included) are suppressed; messages
// and (un)subscribe confirmations are pushes and still arrive, as in Redis 7.0.
TEST_F(SessionTest, ClientReplyOffSkipAndOnMatchRedis) {
  auto s = connect();
  EXPECT_EQ(s->send("CLIENT REPLY OFF\r\nPING\r\nCLIENT ID\r\n"), "");
  EXPECT_EQ(s->send("CLIENT REPLY ON\r\nPING\r\n"), "+OK\r\n+PONG\r\n");
  EXPECT_EQ(s->send("CLIENT REPLY SKIP\r\nPING\r\nPING x\r\n"), "$1\r\nx\r\n");
  EXPECT_EQ(s->send("CLIENT REPLY SKIP\r\nCLIENT REPLY SKIP\r\nPING 1\r\nPING 2\r\n"), "$1\r\n2\r\n");
  EXPECT_EQ(s->send("CLIENT REPLY SKIP\r\nCLIENT REPLY OFF\r\nPING 1\r\nCLIENT REPLY ON\r\nPING 2\r\n"),
            "+OK\r\n$1\r\n2\r\n");
  EXPECT_EQ(s->send("CLIENT REPLY SKIP\r\nCLIENT REPLY ON\r\nPING 3\r\n"), "+OK\r\n$1\r\n3\r\n");
  EXPECT_EQ(s->send("CLIENT REPLY\r\nCLIENT REPLY MAYBE\r\nCLIENT REPLY on\r\nCLIENT REPLY ON x\r\n"),
            "-ERR wrong number of arguments for 'client|reply' command\r\n-ERR syntax error\r\n+OK\r\n"
            "-ERR wrong number of arguments for 'client|reply' command\r\n");
  EXPECT_EQ(s->send("CLIENT REPLY OFF\r\nFOO\r\nCLIENT REPLY MAYBE\r\nCLIENT REPLY ON\r\n"), "+OK\r\n");
  EXPECT_EQ(s->send("CLIENT REPLY SKIP\r\nFOO\r\nPING 4\r\n"), "$1\r\n4\r\n");
  EXPECT_EQ(s->send("CLIENT REPLY SKIP\r\nCLIENT REPLY OFF\r\nCLIENT REPLY SKIP\r\nPING a\r\nCLIENT REPLY ON\r\n"),
            "+OK\r\n");
  EXPECT_EQ(s->send("CLIENT REPLY OFF\r\nRESET\r\nPING\r\n"), "+RESET\r\n+PONG\r\n");
  EXPECT_EQ(s->send("CLIENT REPLY SKIP\r\nRESET\r\nPING\r\n"), "+PONG\r\n");
  EXPECT_EQ(s->send("CLIENT REPLY OFF\r\nUNSUBSCRIBE\r\nSUNSUBSCRIBE\r\nSSUBSCRIBE\r\nCLIENT REPLY ON\r\n"),
            "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n*3\r\n$12\r\nsunsubscribe\r\n$-1\r\n:0\r\n+OK\r\n");
}

TEST_F(SessionTest, ClientReplyOffStillDeliversPushesInBothProtocols) {
  auto s = connect();
  auto p = connect();
  EXPECT_EQ(s->send("CLIENT REPLY OFF\r\nSUBSCRIBE ch\r\nSSUBSCRIBE sh\r\n"),
            "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n*3\r\n$10\r\nssubscribe\r\n$2\r\nsh\r\n:1\r\n");
  EXPECT_EQ(p->send("PUBLISH ch hi\r\nSPUBLISH sh ho\r\n"), ":1\r\n:1\r\n");
  EXPECT_EQ(s->output(),
            "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n*3\r\n$8\r\nsmessage\r\n$2\r\nsh\r\n$2\r\nho\r\n");
  EXPECT_EQ(s->send("PING\r\nUNSUBSCRIBE\r\nSUNSUBSCRIBE\r\nCLIENT REPLY ON\r\n"),
            "*3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n*3\r\n$12\r\nsunsubscribe\r\n$2\r\nsh\r\n:0\r\n+OK\r\n");

  auto c = connect();
  c->send("HELLO 3\r\n");
  EXPECT_EQ(c->send("CLIENT REPLY OFF\r\nSUBSCRIBE ch\r\nSSUBSCRIBE sh\r\nPING\r\n"),
            ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n>3\r\n$10\r\nssubscribe\r\n$2\r\nsh\r\n:1\r\n");
  EXPECT_EQ(p->send("PUBLISH ch hi\r\nSPUBLISH sh ho\r\n"), ":1\r\n:1\r\n");
  EXPECT_EQ(c->output(),
            ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n>3\r\n$8\r\nsmessage\r\n$2\r\nsh\r\n$2\r\nho\r\n");
  EXPECT_EQ(c->send("CLIENT REPLY ON\r\nPING\r\n"), "+OK\r\n+PONG\r\n");
  EXPECT_EQ(c->send("CLIENT REPLY SKIP\r\nSUBSCRIBE ch2\r\nPING\r\n"),
            ">3\r\n$9\r\nsubscribe\r\n$3\r\nch2\r\n:2\r\n+PONG\r\n");
  EXPECT_EQ(c->send("CLIENT REPLY SKIP\r\nPUBLISH ch me\r\nPING\r\n"),
            ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nme\r\n+PONG\r\n");
  EXPECT_EQ(c->send("CLIENT REPLY OFF\r\nPUBLISH ch me2\r\nCLIENT REPLY ON\r\n"),
            ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\nme2\r\n+OK\r\n");
  EXPECT_EQ(c->send("CLIENT REPLY OFF\r\nUNSUBSCRIBE ch\r\nCLIENT REPLY ON\r\n"),
            ">3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:1\r\n+OK\r\n");
}

TEST_F(SessionTest, ClientReplyAppliesToEachBatchedPublish) {
  auto s = connect();
  auto p = connect();
  s->send("SUBSCRIBE a\r\n");
  (void)s->output();
  EXPECT_EQ(p->send("CLIENT REPLY SKIP\r\nPUBLISH a 1\r\nPUBLISH a 2\r\n"), ":1\r\n");
  EXPECT_EQ(p->send("CLIENT REPLY OFF\r\nPUBLISH a 1\r\nPUBLISH a 2\r\nCLIENT REPLY ON\r\nPUBLISH a 3\r\n"),
            "+OK\r\n:1\r\n");
  EXPECT_EQ(p->send("CLIENT REPLY SKIP\r\n*1\r\n$x\r\n"), "") << "the protocol error reply is skipped too";
  EXPECT_EQ(s->output(),
            "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\n1\r\n*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\n2\r\n"
            "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\n1\r\n*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\n2\r\n"
            "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\n3\r\n");
}

class SessionLimitsTest : public SessionTest {
 protected:
  static BrokerConfig config() {
    BrokerConfig c;
    c.max_subscriptions = 2;
    c.requirepass = "s3cret";
    return c;
  }
  SessionLimitsTest() : SessionTest(config()) {}
};

TEST_F(SessionLimitsTest, UnauthenticatedClientsMayOnlyAuthHelloPingQuitReset) {
  auto s = connect();
  EXPECT_FALSE(s->authenticated());
  EXPECT_EQ(s->send("SUBSCRIBE a\r\nPUBLISH a b\r\nPING\r\n"),
            "-NOAUTH Authentication required.\r\n-NOAUTH Authentication required.\r\n+PONG\r\n");
  EXPECT_EQ(s->send("HELLO 3\r\n").rfind("-NOAUTH HELLO must be called with the client already", 0), 0u);
  EXPECT_EQ(s->send("AUTH wrong\r\n"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_EQ(s->send("AUTH s3cret\r\nSUBSCRIBE a\r\n"), "+OK\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n");
  EXPECT_EQ(s->send("RESET\r\nPUBLISH a b\r\n"), "+RESET\r\n-NOAUTH Authentication required.\r\n");
}

TEST_F(SessionLimitsTest, HelloWithAuthAuthenticatesAndSwitchesProtocol) {
  auto s = connect();
  const std::string r = s->send("HELLO 3 AUTH default s3cret SETNAME me\r\n");
  EXPECT_EQ(r.substr(0, 4), "%7\r\n");
  EXPECT_TRUE(s->authenticated());
  EXPECT_EQ(s->send("CLIENT GETNAME\r\n"), "$2\r\nme\r\n");
  auto t = connect();
  EXPECT_EQ(t->send("HELLO 3 AUTH default nope\r\n"),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_FALSE(t->authenticated());
}

TEST_F(SessionLimitsTest, RefusesSubscriptionsBeyondTheLimit) {
  auto s = connect();
  s->send("AUTH s3cret\r\n");
  EXPECT_EQ(s->send("SUBSCRIBE a b c\r\n"), "-ERR max subscriptions per client reached (2)\r\n");
  EXPECT_EQ(s->subscription_count(), 0u);
  s->send("SUBSCRIBE a b\r\n");
  EXPECT_EQ(s->send("PSUBSCRIBE x*\r\n"), "-ERR max subscriptions per client reached (2)\r\n");
  EXPECT_EQ(s->send("SUBSCRIBE a\r\n"), "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:2\r\n") << "re-subscribing is free";
}

}  // namespace
}  // namespace ringcast::broker

namespace ringcast::broker {
namespace {

class SessionDedupeTest : public SessionTest {
 protected:
  static BrokerConfig config() {
    BrokerConfig c;
    c.dedupe = true;
    return c;
  }
  SessionDedupeTest() : SessionTest(config()) {}
};

TEST_F(SessionDedupeTest, DedupeSendsOneFramePerConnectionAndCountsConnections) {
  auto a = connect();
  auto p = connect();
  a->send("SUBSCRIBE news\r\nPSUBSCRIBE n* news*\r\n");
  EXPECT_EQ(p->send("PUBLISH news hi\r\n"), ":1\r\n");
  EXPECT_EQ(a->output(), "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
}

}  // namespace
}  // namespace ringcast::broker

namespace ringcast::broker {
namespace {

class SessionConflateTest : public SessionTest {
 protected:
  static BrokerConfig config() {
    BrokerConfig c;
    c.overflow_policy = OverflowPolicy::kConflate;
    c.queue_limits.hard_bytes = 2048;
    c.queue_limits.soft_bytes = 0;
    return c;
  }
  SessionConflateTest() : SessionTest(config()) {}
};

TEST_F(SessionConflateTest, BrokerDefaultConflateKeepsTheNewestPerChannelAndCountsIt) {
  auto s = connect();
  auto p = connect();
  EXPECT_EQ(s->send("CLIENT OVERFLOW\r\n"), "$8\r\nconflate\r\n");
  EXPECT_EQ(p->send("CLIENT OVERFLOW drop-newest\r\nCLIENT OVERFLOW CONFLATE\r\nCLIENT OVERFLOW\r\n"),
            "+OK\r\n+OK\r\n$8\r\nconflate\r\n");
  s->send("SUBSCRIBE a b\r\n");
  (void)s->output();
  std::string in;
  std::string replies;
  const std::string pad(60, '.');
  for (int i = 0; i < 100; ++i) {  // about 90 bytes a frame: some 22 fit in 2 KiB
    in += fmt::format("PUBLISH {} {:03}{}\r\n", i % 2 == 0 ? "a" : "b", i, pad);
    replies += ":1\r\n";
  }
  EXPECT_EQ(p->send(in), replies);
  const std::string list = p->send("CLIENT LIST\r\n");
  EXPECT_NE(list.find(fmt::format("id={} ", s->id())), std::string::npos);
  EXPECT_NE(list.find("policy=conflate dropped-hard=0 dropped-soft=0 dropped-disconnect=0 conflated=98"),
            std::string::npos)
      << list;
  EXPECT_NE(p->send("INFO stats\r\n").find("conflated:98\r\n"), std::string::npos);
  EXPECT_EQ(core_.stats().conflated, 98u);
  EXPECT_EQ(s->output(), fmt::format("*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$63\r\n098{0}\r\n"
                                     "*3\r\n$7\r\nmessage\r\n$1\r\nb\r\n$63\r\n099{0}\r\n"
                                     "*3\r\n$7\r\nmessage\r\n$17\r\n__ringcast__:loss\r\n$45\r\n"
                                     "lost=98 total=98 policy=conflate conflated=98\r\n",
                                     pad));
  const auto stats = core_.connection_stats();
  ASSERT_FALSE(stats.empty());
  EXPECT_EQ(stats.front().conflated, 98u);
}

}  // namespace
}  // namespace ringcast::broker
