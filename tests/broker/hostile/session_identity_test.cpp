// Durable sessions and identity (issue 40, failure 2; docs/security.md,
// "Durable sessions and loss notices"). The attack: a token limited to pub.*
// subscribed with another identity's client_id and received that session's
// unacked messages on secret.x (marked dup), acked them, and their owner never
// got them. Each test drives it over the WebSocket port of the executable and
// asserts the refusal's text, the qos1_durable_refused counter, that the owner
// still gets its messages, and that the broker still serves the canary.
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "eventually.hpp"
#include "hostile_support.hpp"
#include "ringcast/broker/grant.hpp"
#include "ringcast/broker/token.hpp"
#include "temp_dir.hpp"
#include "ws_client.hpp"

namespace ringcast::broker::hostile {
namespace {

using nlohmann::json;
using ws::test::WsClient;

constexpr std::string_view kIdentitySecret = "hostile-session-identity-secret-0123456789";

// A token of `subject` that may subscribe and publish to `globs`.
std::string token(const std::string& subject, std::vector<std::string> globs) {
  Grant g;
  g.subject = subject;
  g.expiry = std::chrono::system_clock::now() + std::chrono::hours(1);
  g.subscribe = globs;
  g.publish = std::move(globs);
  const auto t = mint_token(g, kIdentitySecret);
  EXPECT_TRUE(t.has_value()) << "mint_token";
  return t ? *t : std::string();
}

// A broker with tokens (signed with kIdentitySecret, from a file in `dir`), QoS 1
// redeliveries far off (only a take-over resends), and `extra` flags; the
// canary and INFO authenticate with a token of their own.
Broker token_broker(const ringcast::test::TempDir& dir, std::vector<std::string> extra = {}) {
  const std::string secret = dir.file("secret");
  std::ofstream(secret) << kIdentitySecret << "\n";
  std::vector<std::string> args{"--token-secret-file", secret, "--ack-timeout", "1h"};
  args.insert(args.end(), extra.begin(), extra.end());
  Broker b(args);
  b.set_credential(token("operator", {"canary.*"}));
  return b;
}

// A WebSocket connection (ringcast's protocol) authenticated with `tok`.
std::unique_ptr<WsClient> connect_as(std::uint16_t port, const std::string& tok) {
  auto c = std::make_unique<WsClient>(port);
  EXPECT_TRUE(c->upgraded());
  EXPECT_TRUE(c->send_json({{"type", "auth"}, {"token", tok}}));
  const auto j = c->read_json();
  EXPECT_TRUE(j && (*j)["type"] == "authenticated") << (j ? j->dump() : "no reply");
  return c;
}

// The reply to a durable QoS 1 subscribe.
json subscribe_durable(WsClient& c, std::string_view topic, std::string_view client_id) {
  EXPECT_TRUE(c.send_json({{"type", "subscribe"}, {"topic", topic}, {"qos", 1}, {"client_id", client_id}}));
  const auto j = c.read_json();
  return j ? *j : json();
}

// Publishes at QoS 1 and returns the message id of its puback (0: none).
std::uint64_t publish(WsClient& c, std::string_view topic, std::string_view payload) {
  EXPECT_TRUE(c.send_json({{"type", "publish"}, {"topic", topic}, {"payload", payload}, {"qos", 1}}));
  const auto j = c.read_json();
  if (!j || (*j)["type"] != "puback") return 0;
  return (*j)["message_id"].get<std::uint64_t>();
}

// Every frame queued for `c` before a probe: an ack nobody awaits, whose
// error reply is queued behind them.
std::vector<json> everything_queued(WsClient& c) {
  std::vector<json> out;
  EXPECT_TRUE(c.send_json({{"type", "ack"}, {"topic", "probe"}, {"message_id", 424242}}));
  for (;;) {
    const auto j = c.read_json();
    if (!j) {
      ADD_FAILURE() << "the connection ended before the probe's reply";
      return out;
    }
    if ((*j)["type"] == "error" && (*j)["message"].get<std::string>().find("424242") != std::string::npos) return out;
    out.push_back(*j);
  }
}

// The messages among `frames` on `topic`.
std::vector<json> messages_on(const std::vector<json>& frames, std::string_view topic) {
  std::vector<json> out;
  for (const json& f : frames) {
    if (f["type"] == "message" && f["topic"] == topic) out.push_back(f);
  }
  return out;
}

// Waits until `n` durable sessions are detached (a closed connection lets go
// of its session on the broker's side, after the close).
bool detached(const Broker& b, int n) {
  return ringcast::test::eventually([&] { return b.info_field("qos1_durable_detached") == std::to_string(n); },
                                    std::chrono::seconds(20), std::chrono::milliseconds(20));
}

// The owner subscribes secret.x with client_id victim-42, gets one QoS 1
// message and leaves without acking it.
std::uint64_t owner_leaves_a_message_unacked(const Broker& b, const std::string& owner_token) {
  auto owner = connect_as(b.ws_port(), owner_token);
  EXPECT_EQ(subscribe_durable(*owner, "secret.x", "victim-42")["type"], "subscribed");
  auto pub = connect_as(b.ws_port(), owner_token);
  const std::uint64_t id = publish(*pub, "secret.x", "for the owner only");
  EXPECT_NE(id, 0u);
  const auto m = owner->read_json();
  EXPECT_TRUE(m && (*m)["type"] == "message" && (*m)["message_id"] == id) << (m ? m->dump() : "nothing");
  return id;
}

TEST(SessionIdentityTest, TokenLimitedToPubCannotResumeAnotherIdentitysSession) {
  ringcast::test::TempDir dir;
  Broker b = token_broker(dir);
  const std::string owner_token = token("owner", {"secret.*"});
  const std::uint64_t id = owner_leaves_a_message_unacked(b, owner_token);
  ASSERT_TRUE(detached(b, 1));

  auto attacker = connect_as(b.ws_port(), token("attacker", {"pub.*"}));
  const json r = subscribe_durable(*attacker, "pub.a", "victim-42");
  EXPECT_EQ(r["type"], "error") << r.dump();
  EXPECT_EQ(r["message"],
            "subscribe: client_id 'victim-42' belongs to another identity: a durable session is resumed only by the "
            "one that created it");
  // Nothing of the session reaches it, and its ack finds nothing to take.
  EXPECT_TRUE(messages_on(everything_queued(*attacker), "secret.x").empty());
  ASSERT_TRUE(attacker->send_json({{"type", "ack"}, {"topic", "secret.x"}, {"message_id", id}}));
  const auto ack = attacker->read_json();
  EXPECT_TRUE(ack && (*ack)["type"] == "error") << (ack ? ack->dump() : "nothing");
  EXPECT_EQ(b.info_field("qos1_durable_refused"), "1");

  // The owner resumes and gets its message again.
  auto owner = connect_as(b.ws_port(), owner_token);
  EXPECT_EQ(subscribe_durable(*owner, "secret.x", "victim-42")["type"], "subscribed");
  const auto again = messages_on(everything_queued(*owner), "secret.x");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0]["message_id"], id);
  EXPECT_EQ(again[0]["payload"], "for the owner only");
  EXPECT_EQ(again[0]["dup"], true);
  EXPECT_TRUE(b.serves_canary());
}

// Defence in depth: the owner's own subject with a narrower token (re-minted
// without secret.*) resumes the session, but the deliveries on channels it may
// not read are neither sent to it nor acked away by it.
TEST(SessionIdentityTest, NarrowerTokenOfTheOwnerGetsOnlyTheChannelsItMayRead) {
  ringcast::test::TempDir dir;
  Broker b = token_broker(dir);
  const std::string wide = token("owner", {"secret.*", "pub.*"});
  std::uint64_t secret_id = 0, pub_id = 0;
  {
    auto owner = connect_as(b.ws_port(), wide);
    ASSERT_EQ(subscribe_durable(*owner, "secret.x", "c7")["type"], "subscribed");
    ASSERT_EQ(subscribe_durable(*owner, "pub.a", "c7")["type"], "subscribed");
    auto pub = connect_as(b.ws_port(), wide);
    secret_id = publish(*pub, "secret.x", "secret");
    pub_id = publish(*pub, "pub.a", "public");
    const auto got = everything_queued(*owner);
    ASSERT_EQ(messages_on(got, "secret.x").size(), 1u);
    ASSERT_EQ(messages_on(got, "pub.a").size(), 1u);
  }
  ASSERT_TRUE(detached(b, 1));
  {
    auto narrow = connect_as(b.ws_port(), token("owner", {"pub.*"}));
    EXPECT_EQ(subscribe_durable(*narrow, "pub.a", "c7")["type"], "subscribed");
    const auto got = everything_queued(*narrow);
    EXPECT_TRUE(messages_on(got, "secret.x").empty()) << "a channel the token may not read was delivered";
    ASSERT_EQ(messages_on(got, "pub.a").size(), 1u);
    EXPECT_EQ(messages_on(got, "pub.a")[0]["message_id"], pub_id);
    ASSERT_TRUE(narrow->send_json({{"type", "ack"}, {"topic", "secret.x"}, {"message_id", secret_id}}));
    const auto ack = narrow->read_json();
    EXPECT_TRUE(ack && (*ack)["type"] == "error") << "acked a delivery it may not read";
  }
  ASSERT_TRUE(detached(b, 1));
  auto owner = connect_as(b.ws_port(), wide);
  EXPECT_EQ(subscribe_durable(*owner, "secret.x", "c7")["type"], "subscribed");
  const auto again = messages_on(everything_queued(*owner), "secret.x");
  ASSERT_EQ(again.size(), 1u) << "the owner lost its unacked delivery";
  EXPECT_EQ(again[0]["message_id"], secret_id);
  EXPECT_EQ(b.info_field("qos1_durable_refused"), "0");
  EXPECT_TRUE(b.serves_canary());
}

// With --data-dir the owner is saved with the session's floors: after a
// restart the client id is still the owner's.
TEST(SessionIdentityTest, BindingSurvivesARestartWithDataDir) {
  ringcast::test::TempDir dir;
  const std::string owner_token = token("owner", {"secret.*"});
  const std::string data = dir.file("data");
  const std::vector<std::string> persisted{"--history", "secret.*=100", "--data-dir", data, "--fsync", "always"};
  std::uint64_t id = 0;
  {
    Broker b = token_broker(dir, persisted);
    id = owner_leaves_a_message_unacked(b, owner_token);
    ASSERT_TRUE(detached(b, 1));
    ASSERT_TRUE(b.process().stop(SIGTERM).has_value());
  }
  Broker b = token_broker(dir, persisted);
  ASSERT_EQ(b.info_field("qos1_durable_detached"), "1") << "the session is not in the store";
  auto attacker = connect_as(b.ws_port(), token("attacker", {"pub.*"}));
  const json r = subscribe_durable(*attacker, "pub.a", "victim-42");
  EXPECT_EQ(r["type"], "error") << r.dump();
  EXPECT_NE(r.value("message", "").find("belongs to another identity"), std::string::npos) << r.dump();
  EXPECT_EQ(b.info_field("qos1_durable_refused"), "1");

  auto owner = connect_as(b.ws_port(), owner_token);
  EXPECT_EQ(subscribe_durable(*owner, "secret.x", "victim-42")["type"], "subscribed");
  const auto again = messages_on(everything_queued(*owner), "secret.x");
  ASSERT_EQ(again.size(), 1u) << "the owner did not get its unacked message back from history";
  EXPECT_EQ(again[0]["message_id"], id);
  EXPECT_TRUE(b.serves_canary());
}

}  // namespace
}  // namespace ringcast::broker::hostile
