// AUTH <sub> <token> and channel permissions on one RESP connection, byte for
// byte, without sockets (invariant 6 of session.hpp, docs/security.md "Tokens").
#include <chrono>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "broker/core/broker_core.hpp"
#include "broker/resp/info.hpp"
#include "broker/resp/session.hpp"
#include "ringcast/broker/token.hpp"
#include "test_support.hpp"

namespace ringcast::broker {
namespace {

using std::chrono::seconds;
using Clock = std::chrono::system_clock;

const std::string kSecret = "a-test-secret-of-at-least-32-bytes!!";

class TokenSession final : public RespSession {
 public:
  explicit TokenSession(BrokerCore& core) : RespSession(core, "127.0.0.1:1", testing::null_waker()) {}
  std::string send(std::string_view in) {
    on_input(in);
    return testing::concat(testing::drain_all(queue()));
  }
};

BrokerConfig token_config(std::string requirepass = {}) {
  BrokerConfig c;
  c.token_secret = kSecret;
  c.requirepass = std::move(requirepass);
  return c;
}

std::string token(const std::string& sub, std::optional<std::vector<std::string>> subscribe,
                  std::optional<std::vector<std::string>> publish, seconds ttl = seconds(3600)) {
  return mint_token(Grant{sub, Clock::now() + ttl, std::move(subscribe), std::move(publish)}, kSecret).value();
}

std::string auth(const std::string& user, const std::string& tok) {
  return fmt::format("*3\r\n$4\r\nAUTH\r\n${}\r\n{}\r\n${}\r\n{}\r\n", user.size(), user, tok.size(), tok);
}

class SessionTokenTest : public ::testing::Test {
 protected:
  explicit SessionTokenTest(BrokerConfig cfg = token_config()) : core_(std::move(cfg)) {}
  std::unique_ptr<TokenSession> connect() { return std::make_unique<TokenSession>(core_); }
  std::unique_ptr<TokenSession> connect_as(const std::string& sub, std::optional<std::vector<std::string>> subscribe,
                                           std::optional<std::vector<std::string>> publish) {
    auto s = connect();
    EXPECT_EQ(s->send(auth(sub, token(sub, std::move(subscribe), std::move(publish)))), "+OK\r\n");
    return s;
  }
  BrokerCore core_;
};

TEST_F(SessionTokenTest, ATokenSecretRequiresAuthentication) {
  auto s = connect();
  EXPECT_FALSE(s->authenticated());
  EXPECT_EQ(s->send("SUBSCRIBE a\r\n"), "-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(
      s->send("AUTH default anything\r\n"),
      "-WRONGPASS invalid token: the token is malformed (expected three base64url parts holding JSON objects)\r\n")
      << "no password is set: `default` is not a way around the token";
}

TEST_F(SessionTokenTest, GoodTokenAuthenticatesAndIsCounted) {
  auto s = connect();
  EXPECT_EQ(s->send(auth("alice", token("alice", std::nullopt, std::nullopt))), "+OK\r\n");
  EXPECT_TRUE(s->authenticated());
  EXPECT_NE(info_text(core_, "auth").find("token_auth_accepted:1\r\n"), std::string::npos);
}

TEST_F(SessionTokenTest, OneArgumentAuthIsATokenWithoutAPassword) {
  // What a client configured with only a password sends (redis://:<token>@host).
  const std::string tok = token("alice", std::vector<std::string>{"md.*"}, std::nullopt);
  auto s = connect();
  EXPECT_EQ(
      s->send("AUTH not-a-token\r\n"),
      "-WRONGPASS invalid token: the token is malformed (expected three base64url parts holding JSON objects)\r\n");
  EXPECT_FALSE(s->authenticated());
  EXPECT_EQ(s->send(fmt::format("*2\r\n$4\r\nAUTH\r\n${}\r\n{}\r\n", tok.size(), tok)), "+OK\r\n");
  EXPECT_TRUE(s->authenticated());
  EXPECT_EQ(s->send("SUBSCRIBE b\r\n"), "-NOPERM User alice has no permissions to access the 'b' channel\r\n")
      << "the token's grant applies";
  EXPECT_NE(info_text(core_, "auth").find("token_auth_accepted:1\r\n"), std::string::npos);
}

TEST_F(SessionTokenTest, UsernameMustBeTheTokensSubject) {
  auto s = connect();
  EXPECT_EQ(s->send(auth("bob", token("alice", std::nullopt, std::nullopt))),
            "-WRONGPASS invalid token: the username is not the token's subject (sub)\r\n");
  EXPECT_FALSE(s->authenticated());
  EXPECT_NE(info_text(core_, "auth").find("token_subject_mismatch:1\r\n"), std::string::npos);
}

TEST_F(SessionTokenTest, RefusedTokensAreCountedByKind) {
  auto s = connect();
  std::string forged = token("alice", std::nullopt, std::nullopt);
  forged.back() = forged.back() == 'A' ? 'Q' : 'A';  // keeps the last character's zero bits
  EXPECT_EQ(s->send(auth("alice", forged)), "-WRONGPASS invalid token: the token's signature is invalid\r\n");
  EXPECT_EQ(s->send(auth("alice", token("alice", std::nullopt, std::nullopt, seconds(-3600)))),
            "-WRONGPASS invalid token: the token has expired\r\n");
  EXPECT_FALSE(s->authenticated());
  const std::string info = info_text(core_, "auth");
  EXPECT_NE(info.find("token_refused_bad_signature:1\r\n"), std::string::npos) << info;
  EXPECT_NE(info.find("token_refused_expired:1\r\n"), std::string::npos) << info;
  EXPECT_NE(info.find("token_auth_refused:2\r\n"), std::string::npos) << info;
}

TEST_F(SessionTokenTest, SubscribeOutsideTheGrantIsRefusedWhole) {
  auto s = connect_as("alice", std::vector<std::string>{"md.*"}, std::vector<std::string>{});
  EXPECT_EQ(s->send("SUBSCRIBE md.a secret md.b\r\n"),
            "-NOPERM User alice has no permissions to access the 'secret' channel\r\n");
  EXPECT_EQ(s->subscription_count(), 0u) << "md.a was not subscribed either, as in Redis";
  EXPECT_EQ(s->send("SUBSCRIBE md.a\r\n"), "*3\r\n$9\r\nsubscribe\r\n$4\r\nmd.a\r\n:1\r\n");
  EXPECT_NE(info_text(core_, "auth").find("permission_denied:1\r\n"), std::string::npos);
}

TEST_F(SessionTokenTest, PatternsAndShardChannelsAreChecked) {
  auto s = connect_as("alice", std::vector<std::string>{"md.*"}, std::nullopt);
  EXPECT_EQ(s->send("PSUBSCRIBE *\r\n"), "-NOPERM User alice has no permissions to access the '*' channel\r\n");
  EXPECT_EQ(s->send("PSUBSCRIBE md.eu.*\r\n"), "*3\r\n$10\r\npsubscribe\r\n$7\r\nmd.eu.*\r\n:1\r\n");
  EXPECT_EQ(s->send("SSUBSCRIBE fx\r\n"), "-NOPERM User alice has no permissions to access the 'fx' channel\r\n");
  EXPECT_EQ(s->send("SSUBSCRIBE md.x\r\n"), "*3\r\n$10\r\nssubscribe\r\n$4\r\nmd.x\r\n:1\r\n");
}

TEST_F(SessionTokenTest, PublishOutsideTheGrantIsRefusedInOrder) {
  auto s = connect_as("alice", std::nullopt, std::vector<std::string>{"x.*"});
  auto sub = connect_as("bob", std::nullopt, std::nullopt);
  sub->send("SUBSCRIBE x.1 y\r\n");
  // Batched PUBLISHes before and after the refused one keep their reply order.
  EXPECT_EQ(s->send("PUBLISH x.1 a\r\nPUBLISH y b\r\nPUBLISH x.1 c\r\n"),
            ":1\r\n-NOPERM User alice has no permissions to access the 'y' channel\r\n:1\r\n");
  EXPECT_EQ(s->send("SPUBLISH y b\r\n"), "-NOPERM User alice has no permissions to access the 'y' channel\r\n");
  const std::string got = sub->send("");
  EXPECT_EQ(got.find("$1\r\ny\r\n$1\r\nb"), std::string::npos) << "nothing reached y: " << got;
  EXPECT_NE(got.find("$3\r\nx.1\r\n$1\r\nc"), std::string::npos) << got;
}

TEST_F(SessionTokenTest, EmptyClaimAllowsNothingAbsentClaimAllowsEverything) {
  auto s = connect_as("alice", std::vector<std::string>{}, std::nullopt);
  EXPECT_EQ(s->send("SUBSCRIBE a\r\n"), "-NOPERM User alice has no permissions to access the 'a' channel\r\n");
  s->send("RESET\r\n");
  EXPECT_EQ(s->send(auth("alice", token("alice", std::nullopt, std::vector<std::string>{}))), "+OK\r\n");
  EXPECT_EQ(s->send("PUBLISH a b\r\n"), "-NOPERM User alice has no permissions to access the 'a' channel\r\n");
  EXPECT_EQ(s->send("SUBSCRIBE a\r\n"), "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n");
}

TEST_F(SessionTokenTest, ResetDropsTheGrantAndTheAuthentication) {
  auto s = connect_as("alice", std::vector<std::string>{}, std::nullopt);
  EXPECT_EQ(s->send("RESET\r\n"), "+RESET\r\n");
  EXPECT_FALSE(s->authenticated());
  EXPECT_EQ(s->send("SUBSCRIBE a\r\n"), "-NOAUTH Authentication required.\r\n");
}

TEST_F(SessionTokenTest, HelloAuthTakesATokenToo) {
  auto s = connect();
  const std::string tok = token("alice", std::vector<std::string>{"a"}, std::nullopt);
  const std::string reply = s->send(fmt::format("HELLO 3 AUTH alice {}\r\n", tok));
  EXPECT_EQ(reply.substr(0, 2), "%7") << reply;
  EXPECT_EQ(s->send("SUBSCRIBE b\r\n"), "-NOPERM User alice has no permissions to access the 'b' channel\r\n");
}

class SessionTokenAndPasswordTest : public SessionTokenTest {
 protected:
  SessionTokenAndPasswordTest() : SessionTokenTest(token_config("pw")) {}
};

TEST_F(SessionTokenAndPasswordTest, PasswordGivesEveryChannelTokenGivesItsGrant) {
  auto admin = connect();
  EXPECT_EQ(admin->send("AUTH pw\r\n"), "+OK\r\n");
  EXPECT_EQ(admin->send("SUBSCRIBE anything\r\n"), "*3\r\n$9\r\nsubscribe\r\n$8\r\nanything\r\n:1\r\n");
  auto admin2 = connect();
  EXPECT_EQ(admin2->send("AUTH default pw\r\n"), "+OK\r\n");
  EXPECT_EQ(admin2->send("AUTH default wrong\r\n"),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_TRUE(admin2->authenticated()) << "a failed AUTH keeps the earlier authentication, as in Redis";
  auto alice = connect_as("alice", std::vector<std::string>{"md.*"}, std::nullopt);
  EXPECT_EQ(alice->send("SUBSCRIBE anything\r\n"),
            "-NOPERM User alice has no permissions to access the 'anything' channel\r\n");
  EXPECT_EQ(alice->send("AUTH pw\r\n"), "+OK\r\n") << "a password AUTH replaces the grant";
  EXPECT_EQ(alice->send("SUBSCRIBE anything\r\n"), "*3\r\n$9\r\nsubscribe\r\n$8\r\nanything\r\n:1\r\n");
  EXPECT_NE(info_text(core_, "auth").find("password_auth_refused:1\r\n"), std::string::npos);
}

}  // namespace
}  // namespace ringcast::broker
