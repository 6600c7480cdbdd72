// QoS 1 over the WebSocket port (docs/guarantees.md, "QoS 1"): an in-process
// broker with short ack timeouts, raw loopback WebSocket clients. PopSub's
// flaws inverted: one subscriber's ack clears only its own delivery, and a
// redelivery goes only to the subscriber that owes the ack.
//
// No test asserts a duration: a timeout only decides when a redelivery comes,
// and each test waits for the frames it expects (bounded by the client's
// 20 s read deadline).
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "resp_client.hpp"
#include "ringcast/broker/broker.hpp"
#include "temp_dir.hpp"
#include "ws_client.hpp"

namespace ringcast::broker::ws {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::WsClient;

std::unique_ptr<Broker> start_broker(std::chrono::milliseconds ack_timeout, std::uint32_t max_retries,
                                     std::size_t max_in_flight = 1000, std::vector<std::string> history = {}) {
  BrokerConfig cfg;
  cfg.history = std::move(history);
  cfg.port = 0;
  cfg.ws_port = 0;
  cfg.io_threads = 2;
  cfg.ack_timeout = ack_timeout;
  cfg.max_retries = max_retries;
  cfg.max_in_flight = max_in_flight;
  auto b = Broker::start(cfg);
  EXPECT_TRUE(b.has_value()) << (b ? "" : b.error().message());
  return b ? std::move(*b) : nullptr;
}

json next(WsClient& c) {
  auto j = c.read_json();
  EXPECT_TRUE(j.has_value()) << "no frame";
  return j ? *j : json();
}

void subscribe_qos1(WsClient& c, std::string_view topic) {
  ASSERT_TRUE(c.send_json({{"type", "subscribe"}, {"topic", topic}, {"qos", 1}}));
  EXPECT_EQ(next(c), (json{{"type", "subscribed"}, {"topic", topic}, {"qos", 1}}));
}

// Publishes at QoS 1 and returns the puback's message_id.
std::uint64_t publish_qos1(WsClient& pub, std::string_view topic, std::string_view payload) {
  EXPECT_TRUE(pub.send_json({{"type", "publish"}, {"topic", topic}, {"payload", payload}, {"qos", 1}}));
  const json ack = next(pub);
  EXPECT_EQ(ack["type"], "puback");
  EXPECT_EQ(ack["topic"], topic);
  return ack.value("message_id", std::uint64_t{0});
}

void ack(WsClient& c, std::string_view topic, std::uint64_t id) {
  ASSERT_TRUE(c.send_json({{"type", "ack"}, {"topic", topic}, {"message_id", id}}));
}

// Sends an ack nobody awaits and returns the frames that came before its
// error reply: everything the broker had queued for `c` by then.
std::vector<json> frames_before_probe(WsClient& c) {
  EXPECT_TRUE(c.send_json({{"type", "ack"}, {"topic", "probe"}, {"message_id", 424242}}));
  std::vector<json> out;
  for (;;) {
    json j = next(c);
    if (j.is_null() || j["type"] == "error") return out;
    out.push_back(std::move(j));
  }
}

TEST(WsQos1Test, PubackCarriesTheChannelsMessageIdAndThePublishersOwnId) {
  auto b = start_broker(60s, 5);
  ASSERT_NE(b, nullptr);
  WsClient pub(b->ws_port());
  ASSERT_TRUE(
      pub.send_json({{"type", "publish"}, {"topic", "t"}, {"payload", "x"}, {"qos", 1}, {"message_id", "id-123"}}));
  EXPECT_EQ(next(pub), (json{{"type", "puback"}, {"topic", "t"}, {"message_id", 1}, {"client_message_id", "id-123"}}));
  EXPECT_EQ(publish_qos1(pub, "t", "y"), 2u);
  ASSERT_TRUE(pub.send_json({{"type", "publish"}, {"topic", "t"}, {"payload", "z"}}));
  EXPECT_TRUE(frames_before_probe(pub).empty()) << "a QoS 0 publish gets no puback";
}

TEST(WsQos1Test, OneSubscriberAcksAndOnlyTheOtherTwoAreResent) {
  // The acker must ack within the timeout; 2 s leaves a loaded machine room.
  auto b = start_broker(2s, 5);
  ASSERT_NE(b, nullptr);
  WsClient s1(b->ws_port()), s2(b->ws_port()), s3(b->ws_port()), pub(b->ws_port());
  for (WsClient* s : {&s1, &s2, &s3}) subscribe_qos1(*s, "critical");
  const std::uint64_t id = publish_qos1(pub, "critical", "Important");
  for (WsClient* s : {&s1, &s2, &s3}) {
    const json m = next(*s);
    EXPECT_EQ(m["type"], "message");
    EXPECT_EQ(m["message_id"], id);
    EXPECT_EQ(m["qos"], 1);
    EXPECT_FALSE(m.contains("dup"));
  }
  ack(s1, "critical", id);
  EXPECT_TRUE(frames_before_probe(s1).empty()) << "the ack is taken: no error for it";
  // Two redeliveries each to s2 and s3; then they ack.
  for (WsClient* s : {&s2, &s3}) {
    for (int round = 0; round < 2; ++round) {
      const json m = next(*s);
      EXPECT_EQ(m["message_id"], id);
      EXPECT_EQ(m["dup"], true);
      EXPECT_EQ(m["payload"], "Important");
    }
    ack(*s, "critical", id);
  }
  // s1's next frames: the next publish, never a redelivery of `id`.
  const std::uint64_t id2 = publish_qos1(pub, "critical", "next");
  const json m = next(s1);
  EXPECT_EQ(m["message_id"], id2);
  EXPECT_FALSE(m.contains("dup"));
}

TEST(WsQos1Test, AckForAnUnknownIdIsAnErrorAndKeepsTheConnection) {
  auto b = start_broker(60s, 5);
  ASSERT_NE(b, nullptr);
  WsClient s(b->ws_port());
  subscribe_qos1(s, "t");
  ASSERT_TRUE(s.send_json({{"type", "ack"}, {"topic", "t"}, {"message_id", 99}}));
  const json e = next(s);
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["message"], "ack: no delivery awaits an ack with message_id 99 on 't'");
  ASSERT_TRUE(s.send_json({{"type", "ack"}, {"message_id", "not-a-number"}}));
  EXPECT_EQ(next(s)["type"], "error");
  WsClient pub(b->ws_port());
  const std::uint64_t id = publish_qos1(pub, "t", "still here");
  EXPECT_EQ(next(s)["message_id"], id);
  ASSERT_TRUE(s.send_json({{"type", "ack"}, {"message_id", id}}));  // no topic: unambiguous
  EXPECT_TRUE(frames_before_probe(s).empty());
}

TEST(WsQos1Test, UnackedDeliveryExpiresAfterMaxRetriesWithALossNotice) {
  auto b = start_broker(50ms, 2);
  ASSERT_NE(b, nullptr);
  WsClient s(b->ws_port());
  subscribe_qos1(s, "t");
  WsClient pub(b->ws_port());
  const std::uint64_t id = publish_qos1(pub, "t", "lost cause");
  EXPECT_FALSE(next(s).contains("dup"));
  EXPECT_EQ(next(s)["dup"], true);
  EXPECT_EQ(next(s)["dup"], true);
  const json notice = next(s);
  EXPECT_EQ(notice["topic"], "__ringcast__:loss");
  EXPECT_EQ(notice["payload"], "expired topic=t message_id=" + std::to_string(id) + " sends=3 total=1");
  ASSERT_TRUE(s.send_json({{"type", "ack"}, {"topic", "t"}, {"message_id", id}}));
  EXPECT_EQ(next(s)["type"], "error") << "an expired delivery is no longer awaited";
}

TEST(WsQos1Test, InFlightWindowHoldsLaterDeliveriesUntilAcksMakeRoom) {
  auto b = start_broker(60s, 5, /*max_in_flight=*/2);
  ASSERT_NE(b, nullptr);
  WsClient s(b->ws_port());
  subscribe_qos1(s, "t");
  WsClient pub(b->ws_port());
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(publish_qos1(pub, "t", "m" + std::to_string(i)), std::uint64_t(i));
  auto ids = [](const std::vector<json>& frames) {
    std::vector<int> out;
    for (const json& j : frames) out.push_back(j["message_id"].get<int>());
    return out;
  };
  EXPECT_EQ(ids(frames_before_probe(s)), (std::vector<int>{1, 2})) << "two in flight, three waiting";
  ack(s, "t", 1);
  EXPECT_EQ(ids(frames_before_probe(s)), (std::vector<int>{3}));
  ack(s, "t", 2);
  ack(s, "t", 3);
  EXPECT_EQ(ids(frames_before_probe(s)), (std::vector<int>{4, 5}));
}

TEST(WsQos1Test, QosZeroSubscribersGetQosOnePublishesAsQosZero) {
  auto b = start_broker(50ms, 5);
  ASSERT_NE(b, nullptr);
  WsClient s(b->ws_port());
  ASSERT_TRUE(s.send_json({{"type", "subscribe"}, {"topic", "t"}}));
  EXPECT_EQ(next(s)["type"], "subscribed");
  WsClient pub(b->ws_port());
  const std::uint64_t id = publish_qos1(pub, "t", "x");
  const json m = next(s);
  EXPECT_EQ(m["message_id"], id);
  EXPECT_EQ(m["qos"], 0);
  // Many timeouts later: a probe round trip shows no redelivery was queued.
  WsClient q(b->ws_port());
  subscribe_qos1(q, "u");
  const std::uint64_t u = publish_qos1(pub, "u", "y");
  EXPECT_EQ(next(q)["message_id"], u);
  EXPECT_EQ(next(q)["dup"], true) << "a timeout has passed";
  EXPECT_TRUE(frames_before_probe(s).empty());
}

TEST(WsQos1Test, PublishToAClosedSubscriberIsStillAcknowledged) {
  auto b = start_broker(60s, 1);
  ASSERT_NE(b, nullptr);
  WsClient live(b->ws_port());
  subscribe_qos1(live, "t");
  WsClient pub(b->ws_port());
  {
    WsClient gone(b->ws_port());
    subscribe_qos1(gone, "t");
    const std::uint64_t id = publish_qos1(pub, "t", "before");
    EXPECT_EQ(next(gone)["message_id"], id);
    EXPECT_EQ(next(live)["message_id"], id);
    ack(live, "t", id);
  }  // closed with a delivery unacked: its tracker and timer go with it
  for (int i = 0; i < 3; ++i) {
    const std::uint64_t id = publish_qos1(pub, "t", "after");
    const json m = next(live);
    EXPECT_EQ(m["message_id"], id);
    EXPECT_FALSE(m.contains("dup"));
    ack(live, "t", id);
  }
  EXPECT_TRUE(frames_before_probe(live).empty());
}

TEST(WsQos1Test, PatternSubscriptionAtQosOneOwesAcksPerChannel) {
  auto b = start_broker(60s, 5);
  ASSERT_NE(b, nullptr);
  WsClient s(b->ws_port());
  subscribe_qos1(s, "md.*");
  WsClient pub(b->ws_port());
  const std::uint64_t a = publish_qos1(pub, "md.a", "x");
  const std::uint64_t c = publish_qos1(pub, "md.c", "y");
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(c, 1u);  // ids are per channel
  EXPECT_EQ(next(s)["topic"], "md.a");
  EXPECT_EQ(next(s)["topic"], "md.c");
  ASSERT_TRUE(s.send_json({{"type", "ack"}, {"message_id", 1}}));
  const json e = next(s);
  EXPECT_EQ(e["type"], "error") << "id 1 is awaited on two topics";
  ack(s, "md.a", 1);
  ack(s, "md.c", 1);
  EXPECT_TRUE(frames_before_probe(s).empty());
}

// Subscribes durably; retries while the previous connection of the same
// client id is still being closed by the broker ("in use"). Returns the
// confirmation.
json subscribe_durable(WsClient& c, std::string_view topic, std::string_view client_id) {
  for (int attempt = 0; attempt < 2000; ++attempt) {
    EXPECT_TRUE(c.send_json({{"type", "subscribe"}, {"topic", topic}, {"qos", 1}, {"client_id", client_id}}));
    json r = next(c);
    if (r["type"] != "error" || r["message"].get<std::string>().find("in use") == std::string::npos) return r;
    std::this_thread::sleep_for(10ms);  // the old connection's close is in flight
  }
  return json();
}

std::vector<int> ids_of(const std::vector<json>& frames) {
  std::vector<int> out;
  for (const json& j : frames) out.push_back(j.value("message_id", 0));
  return out;
}

TEST(WsQos1Test, DurableSubscriberGetsItsUnackedAndMissedMessagesOnReconnect) {
  auto b = start_broker(60s, 5, 1000, {"*=1000"});
  ASSERT_NE(b, nullptr);
  WsClient pub(b->ws_port());
  {
    WsClient s(b->ws_port());
    const json r = subscribe_durable(s, "t", "dash-1");
    EXPECT_EQ(r["type"], "subscribed");
    EXPECT_EQ(r["qos"], 1);
    EXPECT_EQ(r["client_id"], "dash-1");
    EXPECT_EQ(r["offset"], 0) << "a retained channel's reply carries its offset";
    EXPECT_EQ(publish_qos1(pub, "t", "m1"), 1u);
    EXPECT_EQ(publish_qos1(pub, "t", "m2"), 2u);
    EXPECT_EQ(next(s)["message_id"], 1);
    EXPECT_EQ(next(s)["message_id"], 2);
    ack(s, "t", 1);
    EXPECT_TRUE(frames_before_probe(s).empty());
  }  // gone with 2 unacked
  EXPECT_EQ(publish_qos1(pub, "t", "m3"), 3u);
  EXPECT_EQ(publish_qos1(pub, "t", "m4"), 4u);
  WsClient s(b->ws_port());
  EXPECT_EQ(subscribe_durable(s, "t", "dash-1")["type"], "subscribed");
  const json m2 = next(s);
  EXPECT_EQ(m2["message_id"], 2);
  EXPECT_EQ(m2["dup"], true) << "sent before, unacked";
  // 3 and 4 come from the history, or, if the old connection was still being
  // closed when they were published, as redeliveries: either way, in order.
  const json m3 = next(s);
  EXPECT_EQ(m3["message_id"], 3);
  EXPECT_EQ(m3["payload"], "m3");
  EXPECT_EQ(m3["qos"], 1);
  EXPECT_EQ(next(s)["message_id"], 4);
  const std::uint64_t id5 = publish_qos1(pub, "t", "m5");
  EXPECT_EQ(next(s)["message_id"], id5) << "then live, with no gap and no repeat at the seam";
  for (int id : {2, 3, 4, 5}) ack(s, "t", static_cast<std::uint64_t>(id));
  EXPECT_TRUE(frames_before_probe(s).empty());
}

TEST(WsQos1Test, DurableSubscriptionMadeBeforeAnyMessageGetsEverythingItMissed) {
  auto b = start_broker(60s, 5, 1000, {"*=1000"});
  ASSERT_NE(b, nullptr);
  {
    WsClient s(b->ws_port());
    EXPECT_EQ(subscribe_durable(s, "t", "c")["type"], "subscribed");
  }
  WsClient pub(b->ws_port());
  for (int i = 0; i < 3; ++i) (void)publish_qos1(pub, "t", "x");
  WsClient s(b->ws_port());
  EXPECT_EQ(subscribe_durable(s, "t", "c")["type"], "subscribed");
  EXPECT_EQ(ids_of(frames_before_probe(s)), (std::vector<int>{1, 2, 3}));
}

TEST(WsQos1Test, AClientIdIsHeldByOneConnectionAtATime) {
  auto b = start_broker(60s, 5, 1000, {"*=1000"});
  ASSERT_NE(b, nullptr);
  WsClient a(b->ws_port()), other(b->ws_port());
  EXPECT_EQ(subscribe_durable(a, "t", "same")["type"], "subscribed");
  ASSERT_TRUE(other.send_json({{"type", "subscribe"}, {"topic", "t"}, {"qos", 1}, {"client_id", "same"}}));
  const json e = next(other);
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["message"], "subscribe: client_id 'same' is in use by another connection");
  ASSERT_TRUE(other.send_json({{"type", "subscribe"}, {"topic", "t"}, {"client_id", "x"}}));
  EXPECT_EQ(next(other)["type"], "error") << "client_id without qos 1";
  ASSERT_TRUE(other.send_json({{"type", "subscribe"}, {"topic", "t"}, {"qos", 1}, {"client_id", "x"}, {"history", 5}}));
  EXPECT_EQ(next(other)["type"], "error") << "a durable subscription resumes; history: N is for the others";
}

// The value of an unlabelled series in Broker::metrics_text(); -1 if absent.
double metric(const Broker& b, std::string_view name) {
  const std::string text = b.metrics_text();
  std::string key = "\n";  // not "\n" + std::string(name): g++ 12 warns (-Wrestrict) on that
  key += name;
  key += ' ';
  const auto at = text.find(key);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + key.size()));
}

// The value of `field` in `INFO section`, asked over RESP.
std::string info_field(const Broker& b, std::string_view section, std::string_view field) {
  ::ringcast::test::RespClient r(b.port());
  const auto reply = r.call({"INFO", section});
  if (!reply) return {};
  const std::string text(reply->str);
  const auto at = text.find("\r\n" + std::string(field) + ":");
  if (at == std::string::npos) return {};
  const auto begin = at + field.size() + 3;
  return text.substr(begin, text.find("\r\n", begin) - begin);
}

// Polls `metric` until it reads `want`, at most 20 s (a connection's close, a
// session's expiry, runs on the broker's threads); returns the last value.
double await_metric(const Broker& b, std::string_view name, double want) {
  double v = metric(b, name);
  for (int i = 0; i < 2000 && v != want; ++i) {
    std::this_thread::sleep_for(10ms);
    v = metric(b, name);
  }
  return v;
}

// What a user debugging "my subscriber misses messages" reads: where each
// QoS 1 delivery is (in flight, waiting, acked, redelivered, expired,
// abandoned with its subscriber), in INFO qos1 and /metrics, after a scenario
// that puts deliveries in each place.
TEST(WsQos1Test, InfoAndMetricsCountWhereEveryQosOneDeliveryIs) {
  auto b = start_broker(60s, 5, /*max_in_flight=*/1);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(metric(*b, "ringcast_broker_qos1_trackers"), 0);
  WsClient pub(b->ws_port());
  {
    WsClient s(b->ws_port());
    subscribe_qos1(s, "t");
    for (int i = 0; i < 3; ++i) (void)publish_qos1(pub, "t", "m");
    EXPECT_EQ(next(s)["message_id"], 1);
    EXPECT_EQ(metric(*b, "ringcast_broker_qos1_trackers"), 1);
    EXPECT_EQ(metric(*b, "ringcast_broker_qos1_in_flight"), 1);
    EXPECT_EQ(metric(*b, "ringcast_broker_qos1_waiting"), 2) << "past the window of 1";
    EXPECT_EQ(metric(*b, "ringcast_broker_qos1_pubacks_total"), 3);
    ack(s, "t", 1);
    EXPECT_EQ(next(s)["message_id"], 2);
    ASSERT_TRUE(s.send_json({{"type", "ack"}, {"topic", "t"}, {"message_id", 99}}));
    EXPECT_EQ(next(s)["type"], "error");
    EXPECT_EQ(metric(*b, "ringcast_broker_qos1_acked_total"), 1);
    EXPECT_EQ(metric(*b, "ringcast_broker_qos1_delivered_total"), 2);
    EXPECT_EQ(metric(*b, "ringcast_broker_qos1_unknown_acks_total"), 1);
    EXPECT_EQ(info_field(*b, "qos1", "qos1_in_flight"), "1");
    EXPECT_EQ(info_field(*b, "qos1", "qos1_waiting"), "1");
    EXPECT_EQ(info_field(*b, "qos1", "qos1_max_in_flight"), "1");
  }  // gone with message 2 in flight and 3 waiting: both abandoned
  EXPECT_EQ(await_metric(*b, "ringcast_broker_qos1_trackers", 0), 0);
  EXPECT_EQ(metric(*b, "ringcast_broker_qos1_abandoned_total"), 2);
  EXPECT_EQ(metric(*b, "ringcast_broker_qos1_in_flight"), 0);
  EXPECT_EQ(metric(*b, "ringcast_broker_qos1_waiting"), 0);
  EXPECT_EQ(metric(*b, "ringcast_broker_qos1_acked_total"), 1) << "a gone tracker's counters stay in the totals";
  EXPECT_EQ(info_field(*b, "qos1", "qos1_abandoned"), "2");
  EXPECT_EQ(info_field(*b, "", "qos1_abandoned"), "2") << "in the default sections";
}

TEST(WsQos1Test, InfoAndMetricsCountRedeliveriesExpiriesAndDurableSessions) {
  auto b = start_broker(50ms, 1, 1000, {"*=100"});
  ASSERT_NE(b, nullptr);
  WsClient pub(b->ws_port());
  {
    WsClient s(b->ws_port());
    EXPECT_EQ(subscribe_durable(s, "t", "d1")["type"], "subscribed");
    EXPECT_EQ(metric(*b, "ringcast_broker_qos1_durable_sessions{state=\"attached\"}"), 1);
    const std::uint64_t id = publish_qos1(pub, "t", "never acked");
    EXPECT_FALSE(next(s).contains("dup"));
    EXPECT_EQ(next(s)["dup"], true);
    const json notice = next(s);
    EXPECT_EQ(notice["payload"], "expired topic=t message_id=" + std::to_string(id) + " sends=2 total=1");
    EXPECT_EQ(metric(*b, "ringcast_broker_qos1_redelivered_total"), 1);
    EXPECT_EQ(metric(*b, "ringcast_broker_qos1_expired_total"), 1);
    EXPECT_EQ(info_field(*b, "qos1", "qos1_expired"), "1");
  }
  EXPECT_EQ(await_metric(*b, "ringcast_broker_qos1_durable_sessions{state=\"detached\"}", 1), 1);
  EXPECT_EQ(metric(*b, "ringcast_broker_qos1_durable_sessions{state=\"attached\"}"), 0);
  EXPECT_EQ(metric(*b, "ringcast_broker_qos1_trackers"), 1) << "a detached session keeps its tracker";
  EXPECT_EQ(info_field(*b, "qos1", "qos1_durable_detached"), "1");
}

// The durable resume reads its backlog before the index lock and only what
// was appended meanwhile under it (docs/guarantees.md, "Durable
// subscribers"): with a publisher running throughout, the returning session
// gets every message exactly once, in id order, from history then live.
TEST(WsQos1Test, DurableResumeWhilePublishingHasNoGapAndNoDuplicateAtTheSeam) {
  auto b = start_broker(60s, 5, /*max_in_flight=*/100'000, {"*=100000"});
  ASSERT_NE(b, nullptr);
  {
    WsClient s(b->ws_port());
    EXPECT_EQ(subscribe_durable(s, "t", "seam")["type"], "subscribed");
  }
  // Away for real before the backlog: a connection still closing would take
  // some of it live (and get it again as dup).
  ASSERT_EQ(await_metric(*b, "ringcast_broker_qos1_durable_sessions{state=\"detached\"}", 1), 1);
  constexpr int kBacklog = 20'000, kTotal = 40'000;
  const auto publish = [&](int from, int to) {
    const std::string payload(64, 'p');
    for (int i = from; i < to; i += 100) {
      std::vector<Message> burst(static_cast<std::size_t>(std::min(100, to - i)), Message{"t", payload, 1});
      std::vector<std::size_t> receivers(burst.size());
      const PublishResult r = b->publish(burst, receivers);
      ASSERT_EQ(r.status, PublishStatus::kPublished);
    }
  };
  publish(0, kBacklog);  // missed while away
  std::thread publisher([&] { publish(kBacklog, kTotal); });
  WsClient s(b->ws_port());
  EXPECT_EQ(subscribe_durable(s, "t", "seam")["type"], "subscribed");
  std::uint64_t expect = 1;
  while (expect <= static_cast<std::uint64_t>(kTotal)) {
    const json m = next(s);
    if (m.is_null()) break;
    ASSERT_EQ(m.value("message_id", std::uint64_t{0}), expect) << m;
    ASSERT_FALSE(m.contains("dup")) << m;
    ASSERT_EQ(m["qos"], 1);
    ++expect;
  }
  publisher.join();
  EXPECT_EQ(expect, static_cast<std::uint64_t>(kTotal) + 1);
  EXPECT_TRUE(frames_before_probe(s).empty()) << "nothing after the last one";
}

// A pruned range of a durable session's backlog is told, then the rest follows.
TEST(WsQos1Test, DurableResumeAcrossPrunedHistorySaysWhatIsLostThenSendsTheRest) {
  auto b = start_broker(60s, 5, 1000, {"t=3"});
  ASSERT_NE(b, nullptr);
  {
    WsClient s(b->ws_port());
    EXPECT_EQ(subscribe_durable(s, "t", "late")["type"], "subscribed");
  }
  ASSERT_EQ(await_metric(*b, "ringcast_broker_qos1_durable_sessions{state=\"detached\"}", 1), 1);
  WsClient pub(b->ws_port());
  for (int i = 0; i < 5; ++i) (void)publish_qos1(pub, "t", "x");
  WsClient s(b->ws_port());
  EXPECT_EQ(subscribe_durable(s, "t", "late")["type"], "subscribed");
  const json notice = next(s);
  EXPECT_EQ(notice["topic"], "__ringcast__:loss");
  EXPECT_EQ(notice["payload"], "history-lost topic=t from=1 to=2 (pruned from the history)");
  EXPECT_EQ(ids_of(frames_before_probe(s)), (std::vector<int>{3, 4, 5}));
}

std::unique_ptr<Broker> start_broker_with_ttl(std::chrono::milliseconds ttl, std::string data_dir = {}) {
  BrokerConfig cfg;
  cfg.history = {"*=1000"};
  cfg.data_dir = std::move(data_dir);
  cfg.port = 0;
  cfg.ws_port = 0;
  cfg.io_threads = 2;
  cfg.ack_timeout = 60s;
  cfg.session_ttl = ttl;
  auto b = Broker::start(cfg);
  EXPECT_TRUE(b.has_value()) << (b ? "" : b.error().message());
  return b ? std::move(*b) : nullptr;
}

// --session-ttl: a detached session is dropped with its unacked deliveries
// and its floors; a held one never is. Each wait polls /metrics until the
// state changes (bounded), never a sleep in place of it.
TEST(WsQos1Test, DetachedDurableSessionExpiresAfterItsTtlAndItsClientIdStartsAfresh) {
  auto b = start_broker_with_ttl(200ms);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(info_field(*b, "qos1", "qos1_session_ttl_ms"), "200");
  WsClient keep(b->ws_port()), pub(b->ws_port());
  EXPECT_EQ(subscribe_durable(keep, "t", "keep")["type"], "subscribed");
  {
    WsClient gone(b->ws_port());
    EXPECT_EQ(subscribe_durable(gone, "t", "gone")["type"], "subscribed");
    EXPECT_EQ(publish_qos1(pub, "t", "m1"), 1u);
    EXPECT_EQ(next(gone)["message_id"], 1);  // never acked
  }
  EXPECT_EQ(next(keep)["message_id"], 1);
  ack(keep, "t", 1);
  EXPECT_EQ(await_metric(*b, "ringcast_broker_qos1_durable_expired_total", 1), 1);
  EXPECT_EQ(metric(*b, "ringcast_broker_qos1_durable_sessions{state=\"detached\"}"), 0);
  EXPECT_EQ(metric(*b, "ringcast_broker_qos1_durable_sessions{state=\"attached\"}"), 1)
      << "held longer than the TTL, but held: kept";
  EXPECT_EQ(metric(*b, "ringcast_broker_qos1_abandoned_total"), 1) << "message 1 expired with the session";
  EXPECT_EQ(info_field(*b, "qos1", "qos1_durable_expired"), "1");
  EXPECT_EQ(publish_qos1(pub, "t", "m2"), 2u);
  EXPECT_EQ(next(keep)["message_id"], 2);
  WsClient back(b->ws_port());
  const json r = subscribe_durable(back, "t", "gone");
  EXPECT_EQ(r["type"], "subscribed");
  EXPECT_EQ(r["offset"], 2);
  EXPECT_TRUE(frames_before_probe(back).empty()) << "a new session: no redelivery of 1, no replay of 2";
  EXPECT_EQ(publish_qos1(pub, "t", "m3"), 3u);
  EXPECT_EQ(next(back)["message_id"], 3);
}

// After a restart the floors in LMDB are detached sessions too: they expire
// after the TTL, counted from the start.
TEST(WsQos1Test, StoredSessionsOfAnEarlierRunExpireAfterTheTtl) {
  ::ringcast::test::TempDir dir;
  {
    auto b = start_broker_with_ttl(0ms, dir.file("data"));
    ASSERT_NE(b, nullptr);
    WsClient s(b->ws_port()), pub(b->ws_port());
    EXPECT_EQ(subscribe_durable(s, "t", "old")["type"], "subscribed");
    EXPECT_EQ(publish_qos1(pub, "t", "m1"), 1u);
    EXPECT_EQ(next(s)["message_id"], 1);  // never acked: its floor stays 0
  }
  auto b = start_broker_with_ttl(300ms, dir.file("data"));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(await_metric(*b, "ringcast_broker_qos1_durable_expired_total", 1), 1);
  EXPECT_EQ(metric(*b, "ringcast_broker_qos1_durable_sessions{state=\"detached\"}"), 0);
  WsClient pub(b->ws_port());
  EXPECT_EQ(publish_qos1(pub, "t", "m2"), 2u);
  WsClient s(b->ws_port());
  EXPECT_EQ(subscribe_durable(s, "t", "old")["type"], "subscribed");
  EXPECT_TRUE(frames_before_probe(s).empty()) << "its floor is gone: nothing is replayed";
}

// Keeps this process's files from growing past `bytes` (RLIMIT_FSIZE: a write
// past it fails with EFBIG, as a full disk fails with ENOSPC) until destroyed.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    (void)std::signal(SIGXFSZ, SIG_IGN);  // the write fails instead of killing the process
    EXPECT_EQ(::getrlimit(RLIMIT_FSIZE, &saved_), 0);
    rlimit l = saved_;
    l.rlim_cur = bytes;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &l), 0);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  ~FileSizeLimit() { (void)::setrlimit(RLIMIT_FSIZE, &saved_); }

 private:
  rlimit saved_{};
};

// puback means stored (docs/guarantees.md, "When history cannot store"): a
// real LMDB store whose file may not grow fails the append. The publisher gets
// an error naming its publish and no puback; no subscriber gets the message;
// it takes no id, so the next message follows without a gap and a recovery
// across it is complete.
TEST(WsQos1Test, PublishHistoryCannotStoreGetsAnErrorNoPubackAndReachesNobody) {
  ::ringcast::test::TempDir dir;
  BrokerConfig cfg;
  cfg.port = 0;
  cfg.ws_port = 0;
  cfg.io_threads = 2;
  cfg.ack_timeout = 60s;
  cfg.history = {"t=1000"};
  cfg.data_dir = dir.file("data");
  cfg.fsync = FsyncMode::kAlways;
  auto started = Broker::start(cfg);
  ASSERT_TRUE(started.has_value()) << started.error().message();
  Broker& b = **started;
  WsClient s1(b.ws_port()), s0(b.ws_port()), pub(b.ws_port());
  ASSERT_TRUE(s1.send_json({{"type", "subscribe"}, {"topic", "t"}, {"qos", 1}}));
  const json sub = next(s1);
  EXPECT_EQ(sub["type"], "subscribed");
  const std::string epoch = sub.value("epoch", "");
  ASSERT_TRUE(s0.send_json({{"type", "subscribe"}, {"topic", "t"}}));
  EXPECT_EQ(next(s0)["type"], "subscribed");
  EXPECT_EQ(publish_qos1(pub, "t", "stored"), 1u);
  EXPECT_EQ(next(s1)["message_id"], 1);
  EXPECT_EQ(next(s0)["message_id"], 1);
  {
    struct stat st {};
    ASSERT_EQ(::stat((cfg.data_dir + "/data.mdb").c_str(), &st), 0);
    const FileSizeLimit limit(static_cast<rlim_t>(st.st_size));
    // 256 KiB needs new pages past the end of data.mdb: the commit fails.
    ASSERT_TRUE(pub.send_json({{"type", "publish"},
                               {"topic", "t"},
                               {"payload", std::string(256 * 1024, 'x')},
                               {"qos", 1},
                               {"message_id", "big-1"}}));
    const json e = next(pub);
    EXPECT_EQ(e["type"], "error");
    EXPECT_EQ(e["topic"], "t");
    EXPECT_EQ(e["client_message_id"], "big-1");
    EXPECT_EQ(e["message"].get<std::string>().rfind("not stored: the history of 't' could not store the message", 0),
              0u)
        << e;
    EXPECT_TRUE(frames_before_probe(pub).empty()) << "no puback after the error";
  }
  EXPECT_TRUE(frames_before_probe(s1).empty()) << "a QoS 1 subscriber never sees the message";
  EXPECT_TRUE(frames_before_probe(s0).empty()) << "nor does a QoS 0 one";
  EXPECT_EQ(metric(b, "ringcast_broker_history_append_errors_total"), 1);
  EXPECT_EQ(metric(b, "ringcast_broker_qos1_not_stored_total"), 1);
  EXPECT_EQ(metric(b, "ringcast_broker_qos1_pubacks_total"), 1);
  EXPECT_EQ(publish_qos1(pub, "t", "after"), 2u) << "the refused message took no id";
  EXPECT_EQ(next(s1)["message_id"], 2);
  EXPECT_EQ(next(s0)["message_id"], 2);
  WsClient late(b.ws_port());
  ASSERT_TRUE(late.send_json({{"type", "subscribe"}, {"topic", "t"}, {"since", {{"offset", 0}, {"epoch", epoch}}}}));
  const json r = next(late);
  EXPECT_EQ(r["recovered"], true) << r;
  EXPECT_EQ(r["offset"], 2);
  EXPECT_EQ(ids_of(frames_before_probe(late)), (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace ringcast::broker::ws
