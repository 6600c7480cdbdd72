// PopSub's clients against the broker (issue 27; docs/broker.md, "PopSub's
// frames and ringcast's"). PopSub's own transport and broker test scenarios
// (crates/popsub_transport/src/tests.rs, websocket_tests.rs,
// crates/popsub_broker/src/tests.rs) re-written against the real broker, once
// as an unchanged PopSub client (no subprotocol) and once over ringcast's
// richer protocol (subprotocol "ringcast.v1").
//
// Every frame a PopSub client receives goes through decode_popsub, a strict
// decoder that mirrors PopSub's serde types (`ServerMessage`, `tag = "type"`):
// an unknown variant, a missing field or a field of another JSON type fails
// the test, exactly as serde_json::from_str::<ServerMessage> would fail the
// client. Unknown fields are ignored, as serde does by default.
//
// No test asserts a duration: timeouts only decide when a redelivery or a
// pruning comes, and each test waits for what it expects (bounded by the
// client's 20 s read deadline).
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "deadline.hpp"
#include "ringcast/broker/broker.hpp"
#include "ringcast/broker/token.hpp"
#include "ws_client.hpp"

namespace ringcast::broker::ws {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::Protocol;
using test::WsClient;

constexpr std::string_view kSecret = "0123456789abcdef0123456789abcdef-popsub";

// ---- PopSub's ServerMessage, decoded as serde would ----------------------

// enum ServerMessage { LoginResponse { token: String }, Authenticated {},
//   Error { message: String }, Message { topic: String, payload: String,
//   timestamp: i64, message_id: String, qos: u8 } }  with #[serde(tag = "type")]
struct PopSubFrame {
  enum class Kind { kLoginResponse, kAuthenticated, kError, kMessage };
  Kind kind = Kind::kError;
  std::string token;    // LoginResponse
  std::string message;  // Error
  std::string topic;    // Message
  std::string payload;
  std::int64_t timestamp = 0;
  std::string message_id;
  std::uint8_t qos = 0;
};

// serde's String: a JSON string, nothing else (null and numbers are errors).
std::optional<std::string> string_field(const json& o, const char* name, std::string& why) {
  const auto it = o.find(name);
  if (it == o.end()) {
    why = std::string("missing field `") + name + "`";
    return std::nullopt;
  }
  if (!it->is_string()) {
    why = std::string("invalid type for `") + name + "`: " + it->type_name() + ", expected a string";
    return std::nullopt;
  }
  return it->get<std::string>();
}

// serde's integers: a JSON integer (never a float) in the type's range.
std::optional<std::int64_t> integer_field(const json& o, const char* name, std::int64_t min, std::int64_t max,
                                          std::string& why) {
  const auto it = o.find(name);
  if (it == o.end()) {
    why = std::string("missing field `") + name + "`";
    return std::nullopt;
  }
  if (it->is_number_unsigned() && it->get<std::uint64_t>() <= static_cast<std::uint64_t>(max))
    return static_cast<std::int64_t>(it->get<std::uint64_t>());
  if (it->is_number_integer() && !it->is_number_unsigned() && it->get<std::int64_t>() >= min &&
      it->get<std::int64_t>() <= max)
    return it->get<std::int64_t>();
  why = std::string("invalid value for `") + name + "`: " + it->dump();
  return std::nullopt;
}

// The frame as PopSub's client parses it, or a failure naming what serde
// would have refused.
tl::expected<PopSubFrame, std::string> decode_popsub(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return tl::unexpected("not JSON: " + std::string(text));
  if (!j.is_object()) return tl::unexpected("not an object: " + std::string(text));
  std::string why;
  const auto type = string_field(j, "type", why);
  if (!type) return tl::unexpected(why + " in " + std::string(text));
  PopSubFrame f;
  auto fail = [&] { return tl::unexpected(why + " in " + std::string(text)); };
  if (*type == "login_response") {
    f.kind = PopSubFrame::Kind::kLoginResponse;
    auto t = string_field(j, "token", why);
    if (!t) return fail();
    f.token = *t;
  } else if (*type == "authenticated") {
    f.kind = PopSubFrame::Kind::kAuthenticated;
  } else if (*type == "error") {
    f.kind = PopSubFrame::Kind::kError;
    auto m = string_field(j, "message", why);
    if (!m) return fail();
    f.message = *m;
  } else if (*type == "message") {
    f.kind = PopSubFrame::Kind::kMessage;
    auto topic = string_field(j, "topic", why);
    if (!topic) return fail();
    auto payload = string_field(j, "payload", why);
    if (!payload) return fail();
    auto ts = integer_field(j, "timestamp", std::numeric_limits<std::int64_t>::min(),
                            std::numeric_limits<std::int64_t>::max(), why);
    if (!ts) return fail();
    auto id = string_field(j, "message_id", why);
    if (!id) return fail();
    auto qos = integer_field(j, "qos", 0, 255, why);
    if (!qos) return fail();
    f.topic = *topic;
    f.payload = *payload;
    f.timestamp = *ts;
    f.message_id = *id;
    f.qos = static_cast<std::uint8_t>(*qos);
  } else {
    return tl::unexpected("unknown variant `" + *type + "` in " + std::string(text));
  }
  return f;
}

// ---- ringcast's richer frames, checked as strictly ------------------------

// The frame types ringcast's protocol has, with the fields every client may
// rely on and their JSON types; false, and `why`, otherwise.
bool valid_ringcast_frame(const json& j, std::string& why) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    why = "no type";
    return false;
  }
  const std::string t = j["type"];
  auto has = [&j](const char* name, bool (json::*is)() const noexcept) { return j.contains(name) && (j[name].*is)(); };
  bool ok = false;
  if (t == "authenticated") {
    ok = true;
  } else if (t == "error") {
    ok = has("message", &json::is_string);
  } else if (t == "subscribed" || t == "unsubscribed") {
    ok = has("topic", &json::is_string);
  } else if (t == "puback") {
    ok = has("message_id", &json::is_number_unsigned);
  } else if (t == "message") {
    ok = has("topic", &json::is_string) && has("payload", &json::is_string) &&
         has("timestamp", &json::is_number_integer) && has("message_id", &json::is_number_unsigned) &&
         has("qos", &json::is_number_unsigned) && (!j.contains("dup") || j["dup"].is_boolean());
  } else {
    why = "unknown type " + t;
    return false;
  }
  if (!ok) why = "a field of " + t + " is missing or of another type";
  return ok;
}

// ---- the client, either protocol -----------------------------------------

struct Frame {
  json raw;          // as sent
  PopSubFrame view;  // PopSub's fields (for ringcast's frames: the same fields, ids as text)
  std::string type;  // the JSON "type"
};

class Client {
 public:
  Client(std::uint16_t port, Protocol p) : c_(port, true, p), protocol_(p) {}

  [[nodiscard]] bool popsub() const { return protocol_ == Protocol::kPopSub; }
  WsClient& ws() { return c_; }

  // The next text frame, strictly decoded; a frame that does not decode fails
  // the test and is returned with an empty type.
  Frame next() {
    Frame f;
    auto sf = c_.read_frame();
    if (!sf) {
      ADD_FAILURE() << "no frame";
      return f;
    }
    if (sf->opcode != 0x1) {
      f.type = "<opcode " + std::to_string(sf->opcode) + ">";
      return f;
    }
    f.raw = json::parse(sf->payload, nullptr, false);
    if (popsub()) {
      auto d = decode_popsub(sf->payload);
      if (!d) {
        ADD_FAILURE() << "PopSub cannot parse: " << d.error();
        return f;
      }
      f.view = *d;
    } else {
      std::string why;
      if (!valid_ringcast_frame(f.raw, why)) {
        ADD_FAILURE() << "not a ringcast frame (" << why << "): " << sf->payload;
        return f;
      }
      if (f.raw["type"] == "message") {
        f.view.topic = f.raw["topic"];
        f.view.payload = f.raw["payload"];
        f.view.timestamp = f.raw["timestamp"].get<std::int64_t>();
        f.view.message_id = std::to_string(f.raw["message_id"].get<std::uint64_t>());
        f.view.qos = f.raw["qos"].get<std::uint8_t>();
      }
      if (f.raw["type"] == "error") f.view.message = f.raw["message"];
    }
    f.type = f.raw["type"];
    return f;
  }

  bool send(const json& j) { return c_.send_json(j); }

  // Sends PopSub's login (which every broker answers with an error) and
  // returns the frames that came before that error: all the broker had
  // queued for this client by then. A barrier both protocols have.
  std::vector<Frame> frames_before_probe() {
    EXPECT_TRUE(send({{"type", "login"}, {"username", "probe"}, {"password", "probe"}}));
    std::vector<Frame> out;
    for (;;) {
      Frame f = next();
      if (f.type.empty() || (f.type == "error" && f.view.message.rfind("login:", 0) == 0)) return out;
      out.push_back(std::move(f));
    }
  }

  // Subscribes as the protocol's clients do: PopSub's with the topic alone
  // (QoS 1 by default), ringcast's at qos 1 with its confirmation. Returns
  // once the subscription is in effect.
  void subscribe(std::string_view topic, std::optional<json> extra = std::nullopt) {
    json cmd{{"type", "subscribe"}, {"topic", topic}};
    if (!popsub()) cmd["qos"] = 1;
    if (extra) cmd.update(*extra);
    ASSERT_TRUE(send(cmd));
    if (popsub()) return;  // confirmed by the caller's next barrier, or not at all
    const Frame f = next();
    EXPECT_EQ(f.type, "subscribed");
    EXPECT_EQ(f.raw["topic"], topic);
  }
  void subscribe_and_wait(std::string_view topic) {
    subscribe(topic);
    if (popsub()) {
      EXPECT_TRUE(frames_before_probe().empty());
    }
  }

  // Publishes as PopSub's clients do (message_id and qos as serde writes
  // Option: null when absent); ringcast's publisher gets a puback for QoS 1,
  // which echoes the publisher's own id.
  void publish(std::string_view topic, std::string_view payload, int qos,
               std::optional<std::string> message_id = std::nullopt) {
    json cmd{{"type", "publish"}, {"topic", topic}, {"payload", payload}, {"message_id", nullptr}, {"qos", nullptr}};
    if (qos > 0) cmd["qos"] = qos;
    if (message_id) cmd["message_id"] = *message_id;
    ASSERT_TRUE(send(cmd));
    if (!popsub() && qos == 1) {
      const Frame puback = next();
      EXPECT_EQ(puback.type, "puback");
      if (message_id) {
        EXPECT_EQ(puback.raw["client_message_id"], *message_id);
      }
    }
  }

  // Acks a delivery by echoing its message_id, as PopSub's Ack { message_id }.
  void ack(const Frame& delivery) { ack(delivery.raw["message_id"]); }
  void ack(const json& message_id) { ASSERT_TRUE(send({{"type", "ack"}, {"message_id", message_id}})); }

 private:
  WsClient c_;
  Protocol protocol_;
};

struct Settings {
  std::string token_secret;
  std::chrono::milliseconds ack_timeout = 60s;
  std::uint32_t max_retries = 5;
  std::vector<std::string> history;
  std::chrono::milliseconds prune_interval = 1s;
};

Settings with_tokens() {
  Settings s;
  s.token_secret = std::string(kSecret);
  return s;
}

Settings with_ack_timeout(std::chrono::milliseconds timeout) {
  Settings s;
  s.ack_timeout = timeout;
  s.max_retries = 100;
  return s;
}

Settings with_history(std::string rule, std::chrono::milliseconds prune_interval = 1s) {
  Settings s;
  s.history = {std::move(rule)};
  s.prune_interval = prune_interval;
  return s;
}

std::unique_ptr<Broker> start_broker(const Settings& s = {}) {
  BrokerConfig cfg;
  cfg.port = 0;
  cfg.ws_port = 0;
  cfg.io_threads = 2;
  cfg.token_secret = s.token_secret;
  cfg.ack_timeout = s.ack_timeout;
  cfg.max_retries = s.max_retries;
  cfg.history = s.history;
  cfg.prune_interval = s.prune_interval;
  auto b = Broker::start(cfg);
  EXPECT_TRUE(b.has_value()) << (b ? "" : b.error().message());
  return b ? std::move(*b) : nullptr;
}

std::string token(std::chrono::seconds ttl = 1h) {
  Grant g;
  g.subject = "alice";
  g.expiry = std::chrono::system_clock::now() + ttl;
  auto t = mint_token(g, kSecret);
  EXPECT_TRUE(t.has_value());
  return t ? *t : std::string();
}

class WsPopSubTest : public ::testing::TestWithParam<Protocol> {
 protected:
  [[nodiscard]] bool popsub() const { return GetParam() == Protocol::kPopSub; }
  Client connect(const Broker& b) { return Client(b.ws_port(), GetParam()); }
};

// ---- the upgrade -----------------------------------------------------------

TEST(WsPopSubHandshakeTest, OnlyAClientOfferingRingcastsSubprotocolGetsItSelected) {
  auto b = start_broker();
  ASSERT_NE(b, nullptr);
  WsClient rich(b->ws_port(), true, Protocol::kRingcast);
  ASSERT_TRUE(rich.upgraded()) << rich.response();
  EXPECT_NE(rich.response().find("Sec-WebSocket-Protocol: ringcast.v1\r\n"), std::string::npos);
  WsClient plain(b->ws_port(), true, Protocol::kPopSub);
  ASSERT_TRUE(plain.upgraded()) << plain.response();
  EXPECT_EQ(plain.response().find("Sec-WebSocket-Protocol"), std::string::npos);
  // Offered among others, it is still the one selected.
  WsClient among(b->ws_port(), false);
  const std::string_view plain_req = test::kPopSubHandshake;
  const std::string req =
      std::string(plain_req.substr(0, plain_req.size() - 2)) + "Sec-WebSocket-Protocol: mqtt, ringcast.v1\r\n\r\n";
  ASSERT_TRUE(among.send_raw(req));
  std::string head;
  ASSERT_TRUE(ringcast::test::read_until(among.fd(), head, "\r\n\r\n", ringcast::test::deadline_in(20s)));
  EXPECT_NE(head.find("Sec-WebSocket-Protocol: ringcast.v1\r\n"), std::string::npos) << head;
}

// ---- PopSub's transport tests: login, auth, order ------------------------

TEST_P(WsPopSubTest, LoginIsAnsweredWithAnErrorPointingToTokensAndTheConnectionStays) {
  auto b = start_broker(with_tokens());
  ASSERT_NE(b, nullptr);
  Client c = connect(*b);
  ASSERT_TRUE(c.send({{"type", "login"}, {"username", "admin"}, {"password", "password"}}));
  const Frame e = c.next();
  EXPECT_EQ(e.type, "error");
  EXPECT_NE(e.view.message.find("signed HS256 token"), std::string::npos) << e.view.message;
  EXPECT_NE(e.view.message.find("\"auth\""), std::string::npos) << e.view.message;
  // Still open: a good auth follows, then the client works.
  ASSERT_TRUE(c.send({{"type", "auth"}, {"token", token()}}));
  EXPECT_EQ(c.next().type, "authenticated");
  c.subscribe_and_wait("chat");
  EXPECT_EQ(b->publish("chat", "after login").receivers, 1u);
  EXPECT_EQ(c.next().view.payload, "after login");
}

TEST_P(WsPopSubTest, BadTokenGetsAnErrorFrameThenTheConnectionIsClosed) {
  auto b = start_broker(with_tokens());
  ASSERT_NE(b, nullptr);
  for (const std::string& bad : {std::string("invalid-token"), token(-1h)}) {
    Client c = connect(*b);
    ASSERT_TRUE(c.send({{"type", "auth"}, {"token", bad}}));
    const Frame e = c.next();
    EXPECT_EQ(e.type, "error");
    EXPECT_EQ(e.view.message.rfind("invalid token: ", 0), 0u) << e.view.message;
    EXPECT_EQ(c.ws().read_close(), 1008);
    EXPECT_TRUE(c.ws().closed_by_server());
  }
}

TEST_P(WsPopSubTest, AnActionBeforeAuthGetsAnErrorFrameThenTheConnectionIsClosed) {
  auto b = start_broker(with_tokens());
  ASSERT_NE(b, nullptr);
  for (const json& first :
       {json{{"type", "subscribe"}, {"topic", "t"}}, json{{"type", "publish"}, {"topic", "t"}, {"payload", "x"}},
        json{{"type", "ack"}, {"message_id", "1"}}}) {
    Client c = connect(*b);
    ASSERT_TRUE(c.send(first));
    const Frame e = c.next();
    EXPECT_EQ(e.type, "error");
    EXPECT_NE(e.view.message.find("authenticate first"), std::string::npos) << e.view.message;
    EXPECT_EQ(c.ws().read_close(), 1008);
  }
}

// ---- publish and QoS ---------------------------------------------------------

TEST_P(WsPopSubTest, PublishReachesTheSubscriberWithPopSubsFieldsAndTypes) {
  auto b = start_broker();
  ASSERT_NE(b, nullptr);
  Client sub = connect(*b), pub = connect(*b);
  sub.subscribe_and_wait("chat");
  pub.publish("chat", "Hello", 0);
  pub.publish("chat", "Important", 1);
  const Frame first = sub.next(), second = sub.next();
  EXPECT_EQ(first.type, "message");
  EXPECT_EQ(first.view.topic, "chat");
  EXPECT_EQ(first.view.payload, "Hello");
  EXPECT_EQ(first.view.qos, 0);
  EXPECT_EQ(second.view.payload, "Important");
  EXPECT_EQ(second.view.qos, 1) << "a QoS 1 publish is at least once to a subscriber that did not ask for less";
  EXPECT_GT(first.view.timestamp, 0);
  EXPECT_LE(first.view.timestamp, second.view.timestamp);
  EXPECT_NE(first.view.message_id, second.view.message_id);
  if (popsub()) {
    EXPECT_EQ(first.view.message_id, "chat#1");
    EXPECT_EQ(second.view.message_id, "chat#2");
  } else {
    EXPECT_EQ(first.raw["message_id"], 1);
    EXPECT_EQ(second.raw["message_id"], 2);
  }
  sub.ack(second);
  EXPECT_TRUE(sub.frames_before_probe().empty()) << "the ack is taken: no error for it";
  EXPECT_TRUE(pub.frames_before_probe().empty()) << "nothing else for the publisher";
}

TEST_P(WsPopSubTest, QosOneWithAnAckIsNotSentAgain) {
  // The acker must ack within the timeout; 2 s leaves a loaded machine room.
  auto b = start_broker(with_ack_timeout(2s));
  ASSERT_NE(b, nullptr);
  Client acker = connect(*b), witness = connect(*b), pub = connect(*b);
  acker.subscribe_and_wait("critical");
  witness.subscribe_and_wait("witness");
  pub.publish("critical", "Important", 1);
  const Frame m = acker.next();
  EXPECT_EQ(m.view.qos, 1);
  acker.ack(m);
  // The witness never acks: its redelivery shows that a timeout has passed.
  pub.publish("witness", "w", 1);
  const Frame w = witness.next();
  const Frame again = witness.next();
  EXPECT_EQ(again.view.message_id, w.view.message_id);
  EXPECT_TRUE(acker.frames_before_probe().empty()) << "acked: not sent again";
}

TEST_P(WsPopSubTest, AnUnackedMessageIsSentAgainAfterTheTimeoutToThatSubscriberOnly) {
  auto b = start_broker(with_ack_timeout(2s));
  ASSERT_NE(b, nullptr);
  Client slow = connect(*b), quick = connect(*b), pub = connect(*b);
  slow.subscribe_and_wait("critical");
  quick.subscribe_and_wait("critical");
  pub.publish("critical", "Important", 1);
  const Frame q = quick.next();
  quick.ack(q);
  const Frame first = slow.next();
  const Frame retry = slow.next();
  EXPECT_EQ(retry.type, "message");
  EXPECT_EQ(retry.view.message_id, first.view.message_id);
  EXPECT_EQ(retry.view.payload, "Important");
  EXPECT_EQ(retry.view.qos, 1);
  if (popsub()) {
    EXPECT_FALSE(retry.raw.contains("dup")) << "dup only for clients that opted in to ringcast's frames";
  } else {
    EXPECT_EQ(retry.raw["dup"], true);
  }
  slow.ack(retry);
  // Per subscriber: the quick one, which acked, got it once.
  pub.publish("critical", "next", 1);
  const Frame n = quick.next();
  EXPECT_EQ(n.view.payload, "next") << "no redelivery of the acked message came first";
}

TEST_P(WsPopSubTest, AckNamesItsTopicSoEqualIdsOnTwoTopicsAreNotAmbiguous) {
  auto b = start_broker();
  ASSERT_NE(b, nullptr);
  Client sub = connect(*b), pub = connect(*b);
  sub.subscribe_and_wait("a");
  sub.subscribe_and_wait("b");
  pub.publish("a", "x", 1);
  pub.publish("b", "y", 1);
  const Frame fa = sub.next(), fb = sub.next();
  if (popsub()) {
    // PopSub's ids are unique strings; ringcast's name the channel.
    EXPECT_EQ(fa.view.message_id, "a#1");
    EXPECT_EQ(fb.view.message_id, "b#1");
    sub.ack(fa);
    sub.ack(fb);
    EXPECT_TRUE(sub.frames_before_probe().empty()) << "both acks taken";
  } else {
    // ringcast's numeric ids are per channel: an ack names the topic.
    EXPECT_EQ(fa.raw["message_id"], fb.raw["message_id"]);
    ASSERT_TRUE(sub.send({{"type", "ack"}, {"topic", "a"}, {"message_id", 1}}));
    ASSERT_TRUE(sub.send({{"type", "ack"}, {"topic", "b"}, {"message_id", 1}}));
    EXPECT_TRUE(sub.frames_before_probe().empty()) << "both acks taken";
  }
}

// PopSub keeps a publisher's message_id on every delivery and acks it by that
// id; ringcast's dialect keeps its per-channel numbers.
TEST_P(WsPopSubTest, APublishersOwnIdsAreWhatPopSubSubscribersSeeAndAck) {
  auto b = start_broker();
  ASSERT_NE(b, nullptr);
  Client sub = connect(*b), pub = connect(*b);
  sub.subscribe_and_wait("critical");
  pub.publish("critical", "Hello", 0, "id-122");
  pub.publish("critical", "Important", 1, "id-123");
  pub.publish("critical", "Also", 1, "id-124");
  pub.publish("critical", "No id", 1);
  const Frame hello = sub.next(), important = sub.next(), also = sub.next(), none = sub.next();
  EXPECT_EQ(important.view.payload, "Important");
  EXPECT_EQ(important.view.qos, 1);
  if (popsub()) {
    EXPECT_EQ(hello.view.message_id, "id-122");
    EXPECT_EQ(important.view.message_id, "id-123");
    EXPECT_EQ(also.view.message_id, "id-124");
    EXPECT_EQ(none.view.message_id, "critical#4") << "where the publisher gives none, the broker's";
    // Each ack settles the delivery it names, once: out of order, and the
    // repeats are errors.
    for (const char* id : {"id-124", "id-124", "id-123", "critical#4", "id-123", "id-122"}) sub.ack(json(id));
    std::vector<std::string> errors;
    for (const Frame& f : sub.frames_before_probe()) errors.push_back(f.view.message);
    EXPECT_EQ(errors, (std::vector<std::string>{"ack: no delivery awaits an ack with message_id id-124",
                                                "ack: no delivery awaits an ack with message_id id-123",
                                                "ack: no delivery awaits an ack with message_id id-122"}))
        << "id-122 was QoS 0: nothing awaits its ack";
  } else {
    EXPECT_EQ(hello.raw["message_id"], 1);
    EXPECT_EQ(important.raw["message_id"], 2);
    EXPECT_EQ(also.raw["message_id"], 3);
    EXPECT_EQ(none.raw["message_id"], 4);
    sub.ack(json("id-123"));
    EXPECT_EQ(sub.next().view.message, "ack: no delivery awaits an ack with message_id id-123")
        << "ringcast's dialect acks its own numbers";
    for (const Frame* f : {&important, &also, &none}) sub.ack(*f);
    EXPECT_TRUE(sub.frames_before_probe().empty()) << "the three acks taken";
  }
}

TEST_P(WsPopSubTest, TwoPublishersUsingOneIdEachGetTheirDeliveryAckedInTurn) {
  // Publishers' ids are kept as given, so two may collide: each ack settles
  // the oldest delivery awaiting one with that id, and a redelivery shows it.
  auto b = start_broker(with_ack_timeout(2s));
  ASSERT_NE(b, nullptr);
  Client sub = connect(*b), alice = connect(*b), bob = connect(*b);
  sub.subscribe_and_wait("t");
  alice.publish("t", "from alice", 1, "same");
  const Frame a = sub.next();  // before Bob publishes: two connections' publishes have no order
  bob.publish("t", "from bob", 1, "same");
  const Frame first_b = sub.next();
  EXPECT_EQ(first_b.view.payload, "from bob");
  if (!popsub()) {
    EXPECT_EQ(first_b.raw["message_id"], 2) << "ringcast's dialect keeps its numbers";
    return;
  }
  EXPECT_EQ(a.view.message_id, "same");
  EXPECT_EQ(first_b.view.message_id, "same");
  sub.ack(a);
  // Alice's, sent first, is settled: what comes again is Bob's.
  const Frame again = sub.next();
  EXPECT_EQ(again.view.payload, "from bob");
  EXPECT_EQ(again.view.message_id, "same");
  sub.ack(again);
  sub.ack(again);
  const std::vector<Frame> rest = sub.frames_before_probe();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].view.message, "ack: no delivery awaits an ack with message_id same") << "both settled";
}

TEST_P(WsPopSubTest, AckOfAnUnknownIdIsAnErrorFrameAndTheConnectionStays) {
  auto b = start_broker();
  ASSERT_NE(b, nullptr);
  Client sub = connect(*b), pub = connect(*b);
  sub.subscribe_and_wait("t");
  for (const json& id : {json("unknown-id"), json("t#99"), json(99)}) {
    ASSERT_TRUE(sub.send({{"type", "ack"}, {"message_id", id}}));
    const Frame e = sub.next();
    EXPECT_EQ(e.type, "error");
    EXPECT_EQ(e.view.message.rfind("ack: no delivery awaits", 0), 0u) << e.view.message;
  }
  pub.publish("t", "still here", 1);
  const Frame m = sub.next();
  EXPECT_EQ(m.view.payload, "still here");
  sub.ack(m);
  EXPECT_TRUE(sub.frames_before_probe().empty());
}

TEST_P(WsPopSubTest, PublishingToAClosedClientReachesTheOthersAndTheBrokerCarriesOn) {
  auto b = start_broker();
  ASSERT_NE(b, nullptr);
  Client live = connect(*b), pub = connect(*b);
  live.subscribe_and_wait("t");
  {
    Client gone = connect(*b);
    gone.subscribe_and_wait("t");
    pub.publish("t", "before", 1);
    EXPECT_EQ(gone.next().view.payload, "before");
    live.ack(live.next());
  }  // closed with a delivery unacked
  for (int i = 0; i < 3; ++i) {
    pub.publish("t", "after", 1);
    const Frame m = live.next();
    EXPECT_EQ(m.view.payload, "after");
    EXPECT_FALSE(m.raw.contains("dup"));
    live.ack(m);
  }
  EXPECT_TRUE(live.frames_before_probe().empty());
  EXPECT_TRUE(pub.frames_before_probe().empty());
}

TEST_P(WsPopSubTest, AfterUnsubscribeNothingMoreArrivesAndATopicNobodyHasTakesPublishes) {
  auto b = start_broker();
  ASSERT_NE(b, nullptr);
  Client sub = connect(*b), pub = connect(*b);
  sub.subscribe_and_wait("t");
  ASSERT_TRUE(sub.send({{"type", "unsubscribe"}, {"topic", "t"}}));
  if (!popsub()) {
    EXPECT_EQ(sub.next().type, "unsubscribed");
  }
  EXPECT_TRUE(sub.frames_before_probe().empty());
  pub.publish("t", "nobody", 1);
  pub.publish("nonexistent", "nobody either", 0);
  EXPECT_TRUE(pub.frames_before_probe().empty());
  EXPECT_TRUE(sub.frames_before_probe().empty()) << "unsubscribed: nothing arrives";
}

// ---- history: max-messages and TTL -------------------------------------------

// A PopSub subscriber gets what the topic retains (as PopSub replays its
// store); a ringcast subscriber asks for it with "history".
std::vector<Frame> replayed_on_subscribe(Client& c, std::string_view topic) {
  if (c.popsub()) {
    c.subscribe(topic);
  } else {
    c.subscribe(topic, json{{"history", 1000}});
  }
  return c.frames_before_probe();
}

TEST_P(WsPopSubTest, HistoryKeepsTheLastMaxMessagesAndANewSubscriberGetsThemInOrder) {
  auto b = start_broker(with_history("t=3"));
  ASSERT_NE(b, nullptr);
  const std::vector<std::string> published{"m1", "m2", "m3", "m4", "m5"};
  for (const std::string& p : published) ASSERT_EQ(b->publish("t", p).status, PublishStatus::kPublished);
  Client c = connect(*b);
  const std::vector<Frame> got = replayed_on_subscribe(c, "t");
  ASSERT_EQ(got.size(), 3u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].type, "message");
    EXPECT_EQ(got[i].view.payload, published[i + 2]);
    EXPECT_EQ(got[i].view.qos, 0) << "replayed messages owe no ack";
  }
  // Then live ones.
  ASSERT_EQ(b->publish("t", "m6").status, PublishStatus::kPublished);
  EXPECT_EQ(c.next().view.payload, "m6");
}

TEST_P(WsPopSubTest, HistoryDoesNotKeepAPublishersOwnIdSoAReplayShowsTheBrokers) {
  auto b = start_broker(with_history("t=10"));
  ASSERT_NE(b, nullptr);
  Client pub = connect(*b);
  pub.publish("t", "kept", 1, "id-1");
  EXPECT_TRUE(pub.frames_before_probe().empty()) << "stored";
  Client c = connect(*b);
  const std::vector<Frame> got = replayed_on_subscribe(c, "t");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].view.payload, "kept");
  if (popsub()) {
    EXPECT_EQ(got[0].view.message_id, "t#1");
  } else {
    EXPECT_EQ(got[0].raw["message_id"], 1);
  }
}

TEST_P(WsPopSubTest, HistoryPastItsTtlIsNotReplayed) {
  auto b = start_broker(with_history("t=100,50ms", 10ms));
  ASSERT_NE(b, nullptr);
  for (int i = 1; i <= 3; ++i) ASSERT_EQ(b->publish("t", "old").status, PublishStatus::kPublished);
  // Bounded wait for the pruning timer to pass the TTL.
  std::vector<Frame> got;
  const auto d = ringcast::test::deadline_in(20s);
  do {
    Client c = connect(*b);
    got = replayed_on_subscribe(c, "t");
    if (!got.empty()) std::this_thread::sleep_for(10ms);
  } while (!got.empty() && ringcast::test::ms_left(d) > 0);
  EXPECT_TRUE(got.empty()) << "expired messages are gone";
}

// ---- what only the opted-in protocol sends -----------------------------------

TEST_P(WsPopSubTest, OnlyTheOptedInClientGetsConfirmationsAndPubacks) {
  auto b = start_broker();
  ASSERT_NE(b, nullptr);
  Client c = connect(*b);
  ASSERT_TRUE(c.send({{"type", "subscribe"}, {"topic", "t"}}));
  ASSERT_TRUE(c.send({{"type", "publish"}, {"topic", "other"}, {"payload", "x"}, {"qos", 1}}));
  ASSERT_TRUE(c.send({{"type", "unsubscribe"}, {"topic", "t"}}));
  std::vector<std::string> types;
  for (const Frame& f : c.frames_before_probe()) types.push_back(f.type);
  if (popsub()) {
    EXPECT_TRUE(types.empty()) << "PopSub's ServerMessage has none of these";
  } else {
    EXPECT_EQ(types, (std::vector<std::string>{"subscribed", "puback", "unsubscribed"}));
  }
}

TEST_P(WsPopSubTest, EveryFrameOfAPatternSubscriptionAndABinaryPayloadParses) {
  auto b = start_broker();
  ASSERT_NE(b, nullptr);
  Client c = connect(*b);
  c.subscribe_and_wait("md.*");
  ASSERT_EQ(b->publish("md.eu", std::string("\xff\x00\x01", 3)).status, PublishStatus::kPublished);
  ASSERT_EQ(b->publish("md.eu", "tick \"quoted\"\n").status, PublishStatus::kPublished);
  const Frame bin = c.next(), text = c.next();
  EXPECT_EQ(bin.view.topic, "md.eu");
  EXPECT_EQ(bin.raw["encoding"], "base64");
  EXPECT_EQ(bin.view.payload, "/wAB");
  EXPECT_EQ(text.view.payload, "tick \"quoted\"\n");
  EXPECT_EQ(text.raw["pattern"], "md.*");
  EXPECT_TRUE(c.frames_before_probe().empty());
}

TEST(WsPopSubMixedTest, APopSubAndARingcastSubscriberOfOneQosOnePublishEachGetTheirOwnFrames) {
  auto b = start_broker();
  ASSERT_NE(b, nullptr);
  Client popsub(b->ws_port(), Protocol::kPopSub), rich(b->ws_port(), Protocol::kRingcast);
  popsub.subscribe_and_wait("t");
  rich.subscribe_and_wait("t");
  const Message m{"t", "both", 1};
  std::size_t receivers = 0;
  ASSERT_EQ(b->publish({&m, 1}, {&receivers, 1}).status, PublishStatus::kPublished);
  EXPECT_EQ(receivers, 2u);
  const Frame p = popsub.next(), r = rich.next();
  EXPECT_EQ(p.raw["message_id"], "t#1");
  EXPECT_EQ(r.raw["message_id"], 1);
  EXPECT_EQ(p.view.qos, 1);
  EXPECT_EQ(r.view.qos, 1);
  popsub.ack(p);
  rich.ack(r);
  EXPECT_TRUE(popsub.frames_before_probe().empty());
  EXPECT_TRUE(rich.frames_before_probe().empty());
}

TEST(WsPopSubMixedTest, ARingcastPublishersOwnIdReachesPopSubSubscribersAndTheirAcks) {
  auto b = start_broker();
  ASSERT_NE(b, nullptr);
  Client popsub(b->ws_port(), Protocol::kPopSub), rich(b->ws_port(), Protocol::kRingcast);
  Client pub(b->ws_port(), Protocol::kRingcast);
  popsub.subscribe_and_wait("t");
  rich.subscribe_and_wait("t");
  pub.publish("t", "both", 1, "order-7");
  const Frame p = popsub.next(), r = rich.next();
  EXPECT_EQ(p.raw["message_id"], "order-7");
  EXPECT_EQ(r.raw["message_id"], 1);
  popsub.ack(p);
  rich.ack(r);
  EXPECT_TRUE(popsub.frames_before_probe().empty());
  EXPECT_TRUE(rich.frames_before_probe().empty());
}

INSTANTIATE_TEST_SUITE_P(Protocols, WsPopSubTest, ::testing::Values(Protocol::kPopSub, Protocol::kRingcast),
                         [](const ::testing::TestParamInfo<Protocol>& p) {
                           return p.param == Protocol::kPopSub ? std::string("PopSub") : std::string("Ringcast");
                         });

}  // namespace
}  // namespace ringcast::broker::ws
