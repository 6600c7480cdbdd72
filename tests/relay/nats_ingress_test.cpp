// NATS into rings and brokers against real nats-server processes on loopback
// (docs/scale-out.md, "Ring ingress", "Broker ingress"): a two-node cluster
// with one ring directory per "host", gaps introduced on purpose with a
// skipped Ringcast-Seq, and the broker ingress feeding RESP and WebSocket
// subscribers.
#include <nats/nats.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "relay_fixture.hpp"
#include "relay_test_support.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "ringcast/relay/broker_nats_ingress.hpp"
#include "ringcast/relay/continuity.hpp"
#include "ringcast/relay/relay.hpp"
#include "ws_client.hpp"

namespace ringcast::relay {
namespace {

using namespace std::chrono_literals;
using broker::ws::test::WsClient;
using testing::as_bytes;
using testing::deadline_in;
using testing::eventually;
using testing::NatsServer;

constexpr const char* kProbe = "probe";

// A plain libnats publisher that can set the sequence headers itself.
class NatsPublisher {
 public:
  explicit NatsPublisher(const std::string& url) { ok_ = natsConnection_ConnectTo(&conn_, url.c_str()) == NATS_OK; }
  NatsPublisher(const NatsPublisher&) = delete;
  NatsPublisher& operator=(const NatsPublisher&) = delete;
  ~NatsPublisher() {
    if (conn_ != nullptr) {
      natsConnection_Close(conn_);
      natsConnection_Destroy(conn_);
    }
  }
  [[nodiscard]] bool ok() const { return ok_; }
  // Publishes `body` on `subject` with Ringcast-Source `source` and
  // Ringcast-Seq `seq` (no headers when `source` is empty).
  bool publish(const std::string& subject, const std::string& body, const std::string& source = {},
               std::uint64_t seq = 0) {
    natsMsg* m = nullptr;
    natsStatus s = natsMsg_Create(&m, subject.c_str(), nullptr, body.data(), static_cast<int>(body.size()));
    if (s == NATS_OK && !source.empty()) {
      s = natsMsgHeader_Set(m, kSourceHeader, source.c_str());
      if (s == NATS_OK) s = natsMsgHeader_Set(m, kSeqHeader, std::to_string(seq).c_str());
    }
    if (s == NATS_OK) s = natsConnection_PublishMsg(conn_, m);
    natsMsg_Destroy(m);
    return s == NATS_OK && natsConnection_FlushTimeout(conn_, 5000) == NATS_OK;
  }

 private:
  natsConnection* conn_ = nullptr;
  bool ok_ = false;
};

std::string numbered(int i) {
  std::string s(1, 'n');
  s += std::to_string(i);
  return s;
}

// Reads ring messages as a registered consumer, skipping interest probes.
class RingConsumer {
 public:
  explicit RingConsumer(const std::string& path) {
    auto r = BroadcastRing::open(path);
    if (!r) return;
    ring_.emplace(std::move(*r));
    auto id = ring_->register_consumer(StartAt::kOldest);
    if (id) id_ = *id;
    ok_ = id.has_value();
  }
  [[nodiscard]] bool ok() const { return ok_; }
  // The next message that is not a probe, or nullopt after 10 s.
  std::optional<std::string> next() {
    std::vector<std::byte> buf(ring_->max_message());  // room for any message of the ring
    const auto d = deadline_in(10s);
    while (testing::ms_left(d) > 0) {
      const RecvResult r = ring_->recv_wait(id_, buf, 100ms);
      if (r.status == Errc::timed_out || r.status == Errc::empty) continue;
      if (r.status != Errc::ok) return std::nullopt;
      std::string s(reinterpret_cast<const char*>(buf.data()), r.length);
      if (s != kProbe) return s;
    }
    return std::nullopt;
  }
  [[nodiscard]] RingStatus status() const { return ring_->status(); }

 private:
  std::optional<BroadcastRing> ring_;
  ConsumerId id_ = 0;
  bool ok_ = false;
};

// Publishes probes (no headers) through `url` until `arrived` says one got
// through: proves the subscription's interest has reached that server (across
// the route, in a cluster) before the test starts.
template <class Arrived>
bool wait_for_interest(const std::string& url, const std::string& subject, Arrived&& arrived) {
  NatsPublisher p(url);
  if (!p.ok()) return false;
  const auto d = deadline_in(20s);
  while (testing::ms_left(d) > 0) {
    p.publish(subject, kProbe);
    if (eventually([&] { return arrived(); }, 50ms)) return true;
  }
  return false;
}

class NatsIngressTest : public ::testing::Test {
 protected:
  // A relay with only a ring ingress: `subject` into dir_b_/`file`, a ring
  // it creates with `capacity` slots and max message `max_message` (0: the
  // default the capacity allows).
  void start_ring_ingress(const std::string& url, const std::string& subject, const std::string& file,
                          std::uint64_t capacity = 1024, std::size_t max_message = 0) {
    RelayConfig c;
    c.log = log_.fn();
    c.nats = testing::nats_sink(url);
    ring_b_ = dir_b_.file(file);
    c.nats_rings_in.push_back({subject, ring_b_});
    c.nats_in.ring_capacity = capacity;
    c.nats_in.ring_max_message = max_message;
    auto r = Relay::start(c);
    ASSERT_TRUE(r) << r.error().message() << log_.all();
    ingress_ = std::move(*r);
  }
  [[nodiscard]] NatsIngressStats ingress_stats() const { return ingress_->ingress_stats().at(0); }

  testing::TempDir dir_a_;  // "host A"'s ring directory
  testing::TempDir dir_b_;  // "host B"'s
  testing::LogSink log_;
  std::string ring_b_;
  std::unique_ptr<Relay> ingress_;
};

TEST_F(NatsIngressTest, EveryMessageOfHostARingArrivesAtHostBConsumerInOrderAcrossTheRoute) {
  auto a = NatsServer::start({.cluster = true});
  ASSERT_TRUE(a);
  auto b = NatsServer::start({.cluster = true, .route_to = a->cluster_port()});
  ASSERT_TRUE(b);
  // Host B: NATS node B -> ingress -> ring B -> consumer.
  ASSERT_NO_FATAL_FAILURE(start_ring_ingress(b->url(), "hosts.ticks", "ticks-b.ring"));
  RingConsumer consumer(ring_b_);
  ASSERT_TRUE(consumer.ok());
  ASSERT_TRUE(wait_for_interest(a->url(), "hosts.ticks", [&] { return ingress_stats().received > 0; }))
      << "route A-B never carried the ingress's interest";
  // Host A: ring A -> relay -> NATS node A.
  const std::string ring_a = dir_a_.file("ticks-a.ring");
  auto ring = BroadcastRing::create(ring_a, 1024);
  ASSERT_TRUE(ring) << ring.error().message();
  RelayConfig c = testing::relay_config({{ring_a, "hosts.ticks", false}}, log_);
  c.nats = testing::nats_sink(a->url());
  auto relay = Relay::start(c);
  ASSERT_TRUE(relay) << relay.error().message();
  ASSERT_TRUE(eventually([&] { return (*relay)->ring_stats().at(0).consumer_id >= 0; }));

  const int n = static_cast<int>(testing::scaled(20'000, 5'000));
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(ring->push_wait(as_bytes(numbered(i)), 10s), Errc::ok);
  }
  for (int i = 0; i < n; ++i) {
    auto m = consumer.next();
    ASSERT_TRUE(m) << "missing message " << i << "\n" << log_.all();
    ASSERT_EQ(*m, numbered(i));
  }
  const NatsIngressStats s = ingress_stats();
  EXPECT_EQ(s.gaps, 0u);
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(s.dropped, 0);
  EXPECT_EQ(consumer.status().upstream_gaps, 0u);
  EXPECT_GE(s.unsequenced, 1u);  // the probes
}

// Credit window acks (docs/scale-out.md, "Credit window"): a message that
// asks for acks (a reply subject and a Ringcast-Msg) is acknowledged with its
// position once in the ring; one asking without a Ringcast-Seq, or a probe
// without one, is taken as unsequenced (no ack, no crash).
TEST_F(NatsIngressTest, AcksGoToTheReplySubjectOnlyForSequencedMessagesInTheRing) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  ASSERT_NO_FATAL_FAILURE(start_ring_ingress(server->url(), "acked", "acked.ring"));
  RingConsumer consumer(ring_b_);
  ASSERT_TRUE(consumer.ok());
  ASSERT_TRUE(wait_for_interest(server->url(), "acked", [&] { return ingress_stats().received > 0; }));
  natsConnection* nc = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, server->url().c_str()), NATS_OK);
  natsSubscription* acks = nullptr;
  ASSERT_EQ(natsConnection_SubscribeSync(&acks, nc, "_INBOX.test-acks"), NATS_OK);
  ASSERT_EQ(natsConnection_FlushTimeout(nc, 5000), NATS_OK);
  const auto publish = [&](const char* body, const char* seq, const char* msgno, bool probe) {
    natsMsg* m = nullptr;
    natsStatus s = natsMsg_Create(&m, "acked", "_INBOX.test-acks", body, static_cast<int>(std::strlen(body)));
    if (s == NATS_OK) s = natsMsgHeader_Set(m, kSourceHeader, "hostA:/dev/shm/acked.ring@1.2");
    if (s == NATS_OK && seq != nullptr) s = natsMsgHeader_Set(m, kSeqHeader, seq);
    if (s == NATS_OK) s = natsMsgHeader_Set(m, kMsgHeader, msgno);
    if (s == NATS_OK && probe) s = natsMsgHeader_Set(m, kProbeHeader, "1");
    if (s == NATS_OK) s = natsConnection_PublishMsg(nc, m);
    natsMsg_Destroy(m);
    return s == NATS_OK && natsConnection_FlushTimeout(nc, 5000) == NATS_OK;
  };
  ASSERT_TRUE(publish("no-seq", nullptr, "7.0", false));
  ASSERT_TRUE(publish("", nullptr, "7.1", true));
  ASSERT_TRUE(publish("first", "10", "7.1", false));
  auto m = consumer.next();
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, "no-seq");  // delivered unchecked
  m = consumer.next();
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, "first");
  // The first ack of a new relay goes at once: "<ingress id> 7 10".
  natsMsg* ack = nullptr;
  ASSERT_EQ(natsSubscription_NextMsg(&ack, acks, 10000), NATS_OK);
  const std::string text(natsMsg_GetData(ack), static_cast<std::size_t>(natsMsg_GetDataLength(ack)));
  natsMsg_Destroy(ack);
  EXPECT_NE(text.find(" 7 10"), std::string::npos) << text;
  EXPECT_EQ(text.find(" 7 10"), text.size() - 5) << text;
  EXPECT_GE(ingress_stats().acks, 1u);
  natsSubscription_Destroy(acks);
  natsConnection_Close(nc);
  natsConnection_Destroy(nc);
}

// Two relays feeding one ingress subscription: each gets its own acks, and
// each is told when the ingress leaves, so neither waits for an ingress
// that only acknowledges the other.
TEST_F(NatsIngressTest, EverySourceGetsItsOwnAcksAndIsToldWhenTheIngressLeaves) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  ASSERT_NO_FATAL_FAILURE(start_ring_ingress(server->url(), "two", "two.ring"));
  RingConsumer consumer(ring_b_);
  ASSERT_TRUE(consumer.ok());
  ASSERT_TRUE(wait_for_interest(server->url(), "two", [&] { return ingress_stats().received > 0; }));
  natsConnection* nc = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, server->url().c_str()), NATS_OK);
  natsSubscription* acks_a = nullptr;
  natsSubscription* acks_b = nullptr;
  ASSERT_EQ(natsConnection_SubscribeSync(&acks_a, nc, "_INBOX.relay-a"), NATS_OK);
  ASSERT_EQ(natsConnection_SubscribeSync(&acks_b, nc, "_INBOX.relay-b"), NATS_OK);
  ASSERT_EQ(natsConnection_FlushTimeout(nc, 5000), NATS_OK);
  const auto publish = [&](const char* inbox, const char* source, const char* seq, const char* msgno) {
    natsMsg* m = nullptr;
    natsStatus s = natsMsg_Create(&m, "two", inbox, "x", 1);
    if (s == NATS_OK) s = natsMsgHeader_Set(m, kSourceHeader, source);
    if (s == NATS_OK) s = natsMsgHeader_Set(m, kSeqHeader, seq);
    if (s == NATS_OK) s = natsMsgHeader_Set(m, kMsgHeader, msgno);
    if (s == NATS_OK) s = natsConnection_PublishMsg(nc, m);
    natsMsg_Destroy(m);
    return s == NATS_OK && natsConnection_FlushTimeout(nc, 5000) == NATS_OK;
  };
  // The last ack an inbox received within a second of quiet.
  const auto last_ack = [](natsSubscription* sub) {
    std::string text;
    natsMsg* ack = nullptr;
    while (natsSubscription_NextMsg(&ack, sub, text.empty() ? 10000 : 1000) == NATS_OK) {
      text.assign(natsMsg_GetData(ack), static_cast<std::size_t>(natsMsg_GetDataLength(ack)));
      natsMsg_Destroy(ack);
    }
    return text;
  };
  // Interleaved: a, b, a.
  ASSERT_TRUE(publish("_INBOX.relay-a", "hostA:/dev/shm/a.ring@1.2", "5", "a1.0"));
  ASSERT_TRUE(publish("_INBOX.relay-b", "hostB:/dev/shm/b.ring@3.4", "9", "b2.0"));
  ASSERT_TRUE(publish("_INBOX.relay-a", "hostA:/dev/shm/a.ring@1.2", "6", "a1.1"));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(consumer.next());
  std::string a = last_ack(acks_a);
  std::string b = last_ack(acks_b);
  EXPECT_EQ(a.substr(a.find(' ')), " a1 6") << a;
  EXPECT_EQ(b.substr(b.find(' ')), " b2 9") << b;
  // Stopping: "left" ("<id> <run> -") to both.
  ingress_->stop();
  a = last_ack(acks_a);
  b = last_ack(acks_b);
  EXPECT_EQ(a.substr(a.find(' ')), " a1 -") << a;
  EXPECT_EQ(b.substr(b.find(' ')), " b2 -") << b;
  natsSubscription_Destroy(acks_a);
  natsSubscription_Destroy(acks_b);
  natsConnection_Close(nc);
  natsConnection_Destroy(nc);
}

TEST_F(NatsIngressTest, SkippedSequenceIsCountedInTheRingHeaderAndTheIngressStats) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  ASSERT_NO_FATAL_FAILURE(start_ring_ingress(server->url(), "gap", "gap.ring"));
  RingConsumer consumer(ring_b_);
  ASSERT_TRUE(consumer.ok());
  ASSERT_TRUE(wait_for_interest(server->url(), "gap", [&] { return ingress_stats().received > 0; }));
  NatsPublisher p(server->url());
  ASSERT_TRUE(p.ok());
  const std::string source = "hostA:/dev/shm/gap.ring@1.2";
  for (std::uint64_t seq : {0UL, 1UL, 2UL, 5UL, 6UL})
    ASSERT_TRUE(p.publish("gap", numbered(static_cast<int>(seq)), source, seq));
  ASSERT_TRUE(p.publish("gap", numbered(2), source, 2));  // a duplicate: dropped
  ASSERT_TRUE(p.publish("gap", numbered(7), source, 7));
  for (int want : {0, 1, 2, 5, 6, 7}) {
    auto m = consumer.next();
    ASSERT_TRUE(m);
    ASSERT_EQ(*m, numbered(want));
  }
  const RingStatus st = consumer.status();
  EXPECT_EQ(st.upstream_lost, 2u);
  EXPECT_EQ(st.upstream_gaps, 1u);
  // The counters move after the push the consumer already saw, and a probe
  // published just before interest was confirmed may still arrive: wait until
  // every message, probes included, is counted as delivered.
  ASSERT_TRUE(eventually([&] {
    const NatsIngressStats now = ingress_stats();
    return now.delivered == now.unsequenced + 6;
  })) << ingress_->info_text();
  const NatsIngressStats s = ingress_stats();
  EXPECT_EQ(s.received, s.unsequenced + 7);
  EXPECT_EQ(s.gaps, 1u);
  EXPECT_EQ(s.lost, 2u);
  EXPECT_EQ(s.duplicates, 1u);
  EXPECT_GE(s.unsequenced, 1u);  // the probes
  EXPECT_NE(ingress_->info_text().find("nats_in_0:subject=gap,ring=" + ring_b_ + ","), std::string::npos)
      << ingress_->info_text();
  EXPECT_NE(ingress_->info_text().find(",gaps=1,lost=2,"), std::string::npos) << ingress_->info_text();
}

TEST_F(NatsIngressTest, BatchesArriveAsSeparateRingMessagesAndAMalformedBatchIsDroppedWhole) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  ASSERT_NO_FATAL_FAILURE(start_ring_ingress(server->url(), "batch", "batch.ring"));
  RingConsumer consumer(ring_b_);
  ASSERT_TRUE(consumer.ok());
  // Host A's relay batches 64 ring messages per NATS message.
  const std::string ring_a = dir_a_.file("batch-a.ring");
  auto ring = BroadcastRing::create(ring_a, 1024);
  ASSERT_TRUE(ring);
  RelayConfig c = testing::relay_config({{ring_a, "batch", false}}, log_);
  c.nats = testing::nats_sink(server->url());
  c.nats->batch = 64;
  auto relay = Relay::start(c);
  ASSERT_TRUE(relay) << relay.error().message();
  ASSERT_TRUE(eventually([&] { return (*relay)->ring_stats().at(0).consumer_id >= 0; }));
  const int n = 1000;
  for (int i = 0; i < n; ++i) ASSERT_EQ(ring->push_wait(as_bytes(numbered(i)), 10s), Errc::ok);
  for (int i = 0; i < n; ++i) {
    auto m = consumer.next();
    ASSERT_TRUE(m) << "missing message " << i;
    ASSERT_EQ(*m, numbered(i));
  }
  ASSERT_TRUE(eventually([&] { return ingress_stats().delivered == static_cast<std::uint64_t>(n); }));
  EXPECT_EQ(ingress_stats().received, static_cast<std::uint64_t>(n));
  EXPECT_EQ(ingress_stats().gaps, 0u);
  EXPECT_LT((*relay)->nats_stats().published, static_cast<std::uint64_t>(n));  // fewer NATS messages than ring ones

  // A batch whose records do not add up is dropped whole and counted.
  natsConnection* nc = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, server->url().c_str()), NATS_OK);
  natsMsg* m = nullptr;
  const std::string bad(
      "\x05"
      "abc",
      4);  // says 5 bytes, has 3
  ASSERT_EQ(natsMsg_Create(&m, "batch", nullptr, bad.data(), static_cast<int>(bad.size())), NATS_OK);
  natsMsgHeader_Set(m, kSourceHeader, "x:/y@1.2");
  natsMsgHeader_Set(m, kSeqHeader, "0");
  natsMsgHeader_Set(m, kCountHeader, "1");
  ASSERT_EQ(natsConnection_PublishMsg(nc, m), NATS_OK);
  natsMsg_Destroy(m);
  natsConnection_FlushTimeout(nc, 5000);
  natsConnection_Close(nc);
  natsConnection_Destroy(nc);
  EXPECT_TRUE(eventually([&] { return ingress_stats().malformed == 1u; }));
  EXPECT_EQ(ingress_stats().delivered, static_cast<std::uint64_t>(n));
}

// `length` bytes that differ from one message to the next (every byte value).
std::string sized_body(std::size_t length, std::size_t seed) {
  std::string s(length, '\0');
  for (std::size_t i = 0; i < length; ++i) s[i] = static_cast<char>((i * 31 + seed) % 256);
  return s;
}

// Ring A -> relay -> NATS -> ingress -> ring B with messages of every size up
// to 64 KiB (4100-slot rings hold them), one NATS message each and in
// batches: each arrives unchanged and in order, and the sequence headers
// account for every slot of ring A, paddings included, so the ingress sees no
// gap. --nats-batch packs the short ones and sends the long ones alone.
class NatsIngressSizesTest : public NatsIngressTest, public ::testing::WithParamInterface<std::size_t> {};

INSTANTIATE_TEST_SUITE_P(UnbatchedAndBatched, NatsIngressSizesTest, ::testing::Values(1, 64),
                         [](const ::testing::TestParamInfo<std::size_t>& i) {
                           return i.param == 1 ? std::string("Unbatched") : std::string("Batched");
                         });

TEST_P(NatsIngressSizesTest, MessagesOfAnySizeCrossFromRingToRingUnchangedAndWithoutAGap) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  ASSERT_NO_FATAL_FAILURE(start_ring_ingress(server->url(), "sizes", "sizes-b.ring", 4100));
  RingConsumer consumer(ring_b_);
  ASSERT_TRUE(consumer.ok());
  ASSERT_TRUE(wait_for_interest(server->url(), "sizes", [&] { return ingress_stats().received > 0; }));
  const std::string ring_a = dir_a_.file("sizes-a.ring");
  auto ring = BroadcastRing::create(ring_a, 4100);
  ASSERT_TRUE(ring) << ring.error().message();
  RelayConfig c = testing::relay_config({{ring_a, "sizes", false}}, log_);
  c.nats = testing::nats_sink(server->url());
  c.nats->batch = GetParam();
  auto relay = Relay::start(c);
  ASSERT_TRUE(relay) << relay.error().message();
  ASSERT_TRUE(eventually([&] { return (*relay)->ring_stats().at(0).consumer_id >= 0; }));

  // Short ones (one slot), 200 bytes (four), 64 KiB (1025, after a padding to
  // the next block), three times round the ring.
  std::vector<std::string> sent;
  for (std::size_t round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < 5; ++i) sent.push_back(numbered(static_cast<int>(round * 10 + i)));
    sent.push_back(sized_body(200, round));
    sent.push_back(sized_body(64 * 1024, round + 7));
    sent.push_back(sized_body(52, round + 9));
    sent.push_back(sized_body(53, round + 11));
  }
  for (const std::string& m : sent) ASSERT_EQ(ring->push_wait(as_bytes(m), 10s), Errc::ok);
  for (std::size_t i = 0; i < sent.size(); ++i) {
    auto m = consumer.next();
    ASSERT_TRUE(m) << "missing message " << i << "\n" << log_.all();
    ASSERT_EQ(m->size(), sent[i].size()) << "message " << i;
    ASSERT_TRUE(*m == sent[i]) << "message " << i;
  }
  ASSERT_TRUE(eventually([&] { return ingress_stats().delivered >= ingress_stats().unsequenced + sent.size(); }));
  const NatsIngressStats s = ingress_stats();
  EXPECT_EQ(s.gaps, 0u);
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(s.duplicates, 0u);
  EXPECT_EQ(s.oversize, 0u);
  EXPECT_EQ(consumer.status().upstream_gaps, 0u);
  EXPECT_EQ((*relay)->ring_stats().at(0).nats_failed, 0u);
}

TEST_F(NatsIngressTest, MessageLongerThanTheRingsMaxMessageIsCountedAndLoggedAndTheNextArrives) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  ASSERT_NO_FATAL_FAILURE(start_ring_ingress(server->url(), "big", "big.ring", 1024, 1024));
  RingConsumer consumer(ring_b_);
  ASSERT_TRUE(consumer.ok());
  ASSERT_TRUE(wait_for_interest(server->url(), "big", [&] { return ingress_stats().received > 0; }));
  NatsPublisher p(server->url());
  ASSERT_TRUE(p.ok());
  const std::string fits = sized_body(1024, 1);
  ASSERT_TRUE(p.publish("big", fits));
  ASSERT_TRUE(p.publish("big", sized_body(1025, 2)));
  ASSERT_TRUE(p.publish("big", sized_body(70000, 3)));
  ASSERT_TRUE(p.publish("big", "after"));
  auto m = consumer.next();
  ASSERT_TRUE(m);
  EXPECT_TRUE(*m == fits);
  m = consumer.next();
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, "after");
  ASSERT_TRUE(eventually([&] { return ingress_stats().oversize == 2u; })) << ingress_->info_text();
  // The first is logged at once with its length, subject and the limit; the
  // second falls in the same interval and is counted only.
  EXPECT_TRUE(log_.contains("a NATS message of 1025 bytes on big is over the ring's max message of 1024 bytes"))
      << log_.all();
  EXPECT_FALSE(log_.contains("70000 bytes")) << log_.all();
  EXPECT_NE(ingress_->info_text().find(",oversize=2,"), std::string::npos) << ingress_->info_text();
  // Once idle (a late probe may still be on its way): every message received
  // was delivered or refused.
  EXPECT_TRUE(eventually([&] {
    const NatsIngressStats now = ingress_stats();
    return now.received == now.delivered + now.oversize;
  })) << ingress_->info_text();
}

TEST_F(NatsIngressTest, IngressRefusesARingWithAnotherLiveProducer) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  const std::string path = dir_b_.file("taken.ring");
  auto ring = BroadcastRing::create(path, 64);  // claims the producer role
  ASSERT_TRUE(ring);
  RelayConfig c;
  c.log = log_.fn();
  c.nats = testing::nats_sink(server->url());
  c.nats_rings_in.push_back({"taken", path});
  auto r = Relay::start(c);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("cannot become its producer"), std::string::npos) << r.error().message();
}

// A broker fed from NATS, with a RESP and a WebSocket subscriber.
class BrokerIngressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = NatsServer::start();
    ASSERT_TRUE(server_);
    broker::BrokerConfig bc = testing::loopback_broker();
    bc.ws_port = 0;
    auto b = broker::Broker::start(bc);
    ASSERT_TRUE(b) << b.error().message();
    broker_ = std::move(*b);
  }
  void start_ingress(std::vector<NatsBrokerIngressRoute> routes) {
    auto in = BrokerNatsIngress::start(*broker_, testing::nats_sink(server_->url()), routes, {}, log_.fn());
    ASSERT_TRUE(in) << in.error().message();
    ingress_ = std::move(*in);
  }
  void TearDown() override {
    if (ingress_) ingress_->stop();
    if (broker_) {
      broker_->stop();
      broker_->wait();
    }
  }

  testing::LogSink log_;
  std::unique_ptr<NatsServer> server_;
  std::unique_ptr<broker::Broker> broker_;
  std::unique_ptr<BrokerNatsIngress> ingress_;
};

void ws_subscribe(WsClient& c, std::string_view topic) {
  ASSERT_TRUE(c.upgraded());
  ASSERT_TRUE(c.send_json({{"type", "subscribe"}, {"topic", topic}}));
  const auto r = c.read_json();
  ASSERT_TRUE(r);
  ASSERT_EQ((*r)["type"], "subscribed");
}

TEST_F(BrokerIngressTest, RespAndWebSocketSubscribersGetEveryMessageAndALossNoticeForAGap) {
  ASSERT_NO_FATAL_FAILURE(start_ingress({{"md.>", ""}}));  // channel = the message's subject
  testing::RespClient resp(broker_->port());
  ASSERT_TRUE(resp.subscribe("md.*", /*pattern=*/true));
  WsClient ws(broker_->ws_port());
  ASSERT_NO_FATAL_FAILURE(ws_subscribe(ws, "md.eu"));
  // Probes reach both subscribers before the data (one server, flushed in
  // turn); they are skipped below.
  ASSERT_TRUE(wait_for_interest(server_->url(), "md.eu", [&] { return ingress_->stats().at(0).received > 0; }));

  NatsPublisher p(server_->url());
  ASSERT_TRUE(p.ok());
  const std::string source = "hostA:/dev/shm/md.ring@1.2";
  for (std::uint64_t seq : {10UL, 11UL, 14UL, 15UL})
    ASSERT_TRUE(p.publish("md.eu", numbered(static_cast<int>(seq)), source, seq));

  std::vector<std::string> got;
  std::string notice;
  while (got.size() < 4) {
    auto r = resp.next(deadline_in(10s));
    ASSERT_TRUE(r) << "RESP: got " << got.size() << "\n" << log_.all();
    if (r->elems[0].str == "message") {  // the loss notice, on __ringcast__:loss
      ASSERT_EQ(r->elems[1].str, "__ringcast__:loss");
      EXPECT_EQ(got.size(), 2u) << "the notice comes before the message after the gap";
      notice = r->elems[2].str;
      continue;
    }
    ASSERT_EQ(r->elems[0].str, "pmessage");
    EXPECT_EQ(r->elems[2].str, "md.eu");
    if (r->elems[3].str == kProbe) continue;
    got.emplace_back(r->elems[3].str);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"n10", "n11", "n14", "n15"}));
  EXPECT_NE(notice.find("lost=2 "), std::string::npos) << notice;
  EXPECT_NE(notice.find("upstream=2"), std::string::npos) << notice;

  got.clear();
  bool ws_notice = false;
  while (got.size() < 4) {
    auto m = ws.read_json();
    ASSERT_TRUE(m) << "WebSocket: got " << got.size();
    ASSERT_EQ((*m)["type"], "message");
    if ((*m)["topic"] == "__ringcast__:loss") {
      ws_notice = (*m)["payload"].get<std::string>().find("upstream=2") != std::string::npos;
      continue;
    }
    EXPECT_EQ((*m)["topic"], "md.eu");
    if ((*m)["payload"] == kProbe) continue;
    got.push_back((*m)["payload"].get<std::string>());
  }
  EXPECT_EQ(got, (std::vector<std::string>{"n10", "n11", "n14", "n15"}));
  EXPECT_TRUE(ws_notice);

  const NatsIngressStats s = ingress_->stats().at(0);
  EXPECT_EQ(s.gaps, 1u);
  EXPECT_EQ(s.lost, 2u);
  EXPECT_EQ(s.loss_notices, 2u);  // one per subscribed connection
  EXPECT_EQ(s.target, "{subject}");
}

TEST_F(BrokerIngressTest, FixedChannelAndTemplateMapSubjectsToChannels) {
  ASSERT_NO_FATAL_FAILURE(start_ingress({{"fx.*", "fx"}, {"eq.>", "nats.{subject}"}}));
  testing::RespClient fx(broker_->port());
  ASSERT_TRUE(fx.subscribe("fx"));
  testing::RespClient eq(broker_->port());
  ASSERT_TRUE(eq.subscribe("nats.eq.us"));
  ASSERT_TRUE(wait_for_interest(server_->url(), "fx.eur", [&] { return ingress_->stats().at(0).received > 0; }));
  ASSERT_TRUE(wait_for_interest(server_->url(), "eq.us", [&] { return ingress_->stats().at(1).received > 0; }));
  NatsPublisher p(server_->url());
  ASSERT_TRUE(p.publish("fx.eur", "1.08"));
  ASSERT_TRUE(p.publish("eq.us", "spx"));
  const auto next_payload = [](testing::RespClient& c) -> std::string {
    for (;;) {
      auto r = c.next(deadline_in(10s));
      if (!r) return "<none>";
      if (r->elems[2].str != kProbe) return std::string(r->elems[1].str) + " " + std::string(r->elems[2].str);
    }
  };
  EXPECT_EQ(next_payload(fx), "fx 1.08");
  EXPECT_EQ(next_payload(eq), "nats.eq.us spx");
}

#if defined(BROKER_EXE)
// The executables: ringcast-broker --nats-in feeding redis-cli.
TEST(NatsIngressToolTest, RedisCliSubscriberOfRingcastBrokerGetsNatsMessagesAndALossNotice) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  testing::ChildProcess broker =
      testing::ChildProcess::spawn({BROKER_EXE, "--port", "0", "--nats", server->url(), "--nats-in", "md.>"},
                                   {.err = ringcast::test::Stream::kPipe});
  ASSERT_TRUE(broker.read_stdout_until("into channel {subject}\n", deadline_in(20s))) << broker.stdout_text();
  const std::string out = broker.stdout_text();
  const std::string marker = "listening on 127.0.0.1:";
  ASSERT_NE(out.find(marker), std::string::npos) << out;
  const std::string port = std::to_string(std::strtoul(out.c_str() + out.find(marker) + marker.size(), nullptr, 10));
  testing::ChildProcess cli = testing::ChildProcess::spawn({"/usr/bin/redis-cli", "-p", port, "psubscribe", "md.*"});
  ASSERT_TRUE(cli.read_stdout_until("psubscribe\nmd.*\n1\n", deadline_in(20s))) << cli.stdout_text();
  NatsPublisher p(server->url());
  ASSERT_TRUE(p.ok());
  const std::string source = "hostA:/dev/shm/md.ring@1.2";
  for (std::uint64_t seq : {0UL, 1UL, 4UL})
    ASSERT_TRUE(p.publish("md.eu", numbered(static_cast<int>(seq)), source, seq));
  ASSERT_TRUE(cli.read_stdout_until("n4\n", deadline_in(20s))) << cli.stdout_text();
  EXPECT_NE(cli.stdout_text().find("pmessage\nmd.*\nmd.eu\nn0\npmessage\nmd.*\nmd.eu\nn1\n"
                                   "message\n__ringcast__:loss\nlost=2 total=2 policy=disconnect upstream=2\n"
                                   "pmessage\nmd.*\nmd.eu\nn4\n"),
            std::string::npos)
      << cli.stdout_text();
  testing::ChildProcess info = testing::ChildProcess::spawn({"/usr/bin/redis-cli", "-p", port, "info", "nats-in"});
  ASSERT_TRUE(info.wait_exit(deadline_in(10s)).has_value());
  EXPECT_NE(info.stdout_text().find("gaps=1,lost=2,"), std::string::npos) << info.stdout_text();
  EXPECT_EQ(ringcast::test::exit_code(broker.stop(SIGTERM)), 0) << broker.stderr_text();
}
#endif

TEST(NatsIngressOptionsTest, RoutesParseAndRejectWhatIsMissing) {
  auto r = parse_nats_ring_route("md.>=/dev/shm/md=1.ring");
  ASSERT_TRUE(r) << r.error().detail;
  EXPECT_EQ(r->subject, "md.>");
  EXPECT_EQ(r->path, "/dev/shm/md=1.ring");
  EXPECT_FALSE(parse_nats_ring_route("md.>"));
  EXPECT_FALSE(parse_nats_ring_route("=/dev/shm/x"));
  EXPECT_FALSE(parse_nats_ring_route("md="));
  auto b = parse_nats_broker_route("md.>");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->channel, "");
  auto c = parse_nats_broker_route("md.>=nats.{subject}");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->channel, "nats.{subject}");
  EXPECT_FALSE(parse_nats_broker_route("md.>="));
  EXPECT_FALSE(parse_nats_broker_route("=x"));
  EXPECT_EQ(parse_nats_ring_route("md=").error().code, RelayError::Code::kInvalidConfig);
}

}  // namespace
}  // namespace ringcast::relay
