// The NATS sink against real nats-server processes on loopback: a single
// server, a two-node cluster (publish to A, subscribe on B), a server restart
// (libnats reconnect and buffering, reported in the stats), and the broker and
// NATS sinks together.
#include <nats/nats.h>

#include <thread>

#include <gtest/gtest.h>

#include "relay_fixture.hpp"
#include "relay_test_support.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "ringcast/relay/continuity.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {
namespace {

using namespace std::chrono_literals;
using testing::as_bytes;
using testing::deadline_in;
using testing::eventually;
using testing::NatsServer;

// A libnats subscriber with unlimited pending limits (so the test client never
// drops as a slow consumer).
class NatsSubscriber {
 public:
  NatsSubscriber(const std::string& url, const std::string& subject) {
    natsOptions* o = nullptr;
    natsOptions_Create(&o);
    natsOptions_SetURL(o, url.c_str());
    natsOptions_SetMaxReconnect(o, -1);
    natsOptions_SetReconnectWait(o, 50);
    ok_ = natsConnection_Connect(&conn_, o) == NATS_OK &&
          natsConnection_SubscribeSync(&sub_, conn_, subject.c_str()) == NATS_OK &&
          natsSubscription_SetPendingLimits(sub_, -1, -1) == NATS_OK &&
          natsConnection_FlushTimeout(conn_, 5000) == NATS_OK;
    natsOptions_Destroy(o);
  }
  NatsSubscriber(const NatsSubscriber&) = delete;
  NatsSubscriber& operator=(const NatsSubscriber&) = delete;
  ~NatsSubscriber() {
    if (sub_ != nullptr) natsSubscription_Destroy(sub_);
    if (conn_ != nullptr) {
      natsConnection_Close(conn_);
      natsConnection_Destroy(conn_);
    }
  }
  [[nodiscard]] bool ok() const { return ok_; }
  // The next message's (subject, data), or nullopt after `timeout`.
  std::optional<std::pair<std::string, std::string>> next(std::chrono::milliseconds timeout = 10s) {
    natsMsg* m = nullptr;
    if (natsSubscription_NextMsg(&m, sub_, timeout.count()) != NATS_OK) return std::nullopt;
    std::pair<std::string, std::string> out{natsMsg_GetSubject(m),
                                            std::string(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m)))};
    natsMsg_Destroy(m);
    return out;
  }
  // The next message's (Ringcast-Source, Ringcast-Seq) header values ("" when
  // absent), or nullopt after `timeout`.
  std::optional<std::pair<std::string, std::string>> next_headers(std::chrono::milliseconds timeout = 10s) {
    natsMsg* m = nullptr;
    if (natsSubscription_NextMsg(&m, sub_, timeout.count()) != NATS_OK) return std::nullopt;
    const char* source = nullptr;
    const char* seq = nullptr;
    (void)natsMsgHeader_Get(m, kSourceHeader, &source);
    (void)natsMsgHeader_Get(m, kSeqHeader, &seq);
    std::pair<std::string, std::string> out{source != nullptr ? source : "", seq != nullptr ? seq : ""};
    natsMsg_Destroy(m);
    return out;
  }

 private:
  natsConnection* conn_ = nullptr;
  natsSubscription* sub_ = nullptr;
  bool ok_ = false;
};

// Publishes on `subject` through `url` until the subscriber sees one: proves
// interest has propagated (across routes, in a cluster) before the test starts.
bool wait_for_interest(const std::string& url, const std::string& subject, NatsSubscriber& sub) {
  natsConnection* nc = nullptr;
  if (natsConnection_ConnectTo(&nc, url.c_str()) != NATS_OK) return false;
  bool seen = false;
  const auto d = deadline_in(20s);
  while (!seen && testing::ms_left(d) > 0) {
    natsConnection_PublishString(nc, subject.c_str(), "probe");
    natsConnection_FlushTimeout(nc, 1000);
    while (auto m = sub.next(50ms)) {
      if (m->second == "probe") seen = true;
    }
  }
  natsConnection_Close(nc);
  natsConnection_Destroy(nc);
  return seen;
}

// "n<i>" (built without operator+ on a literal, which trips g++ 12's -Wrestrict).
std::string numbered(int i) {
  std::string s(1, 'n');
  s += std::to_string(i);
  return s;
}

void push_all(BroadcastRing& ring, int from, int to) {
  for (int i = from; i < to; ++i) {
    const std::string p = numbered(i);
    ASSERT_EQ(ring.push_wait(as_bytes(p), 10s, IdleStrategy::spin_then_yield), Errc::ok);
  }
}

void expect_sequence(NatsSubscriber& sub, const std::string& subject, int from, int to) {
  for (int i = from; i < to; ++i) {
    auto m = sub.next();
    ASSERT_TRUE(m) << "missing message " << i;
    // Probes, and messages buffered across a restart that reach a subscriber
    // which joined after them, are not part of the sequence under test.
    if (m->second == "probe" || (m->second.size() > 1 && std::stoi(m->second.substr(1)) < from)) {
      --i;
      continue;
    }
    ASSERT_EQ(m->first, subject);
    ASSERT_EQ(m->second, numbered(i));
  }
}

// A 1024-slot ring relayed to NATS.
class RelayNatsTest : public testing::RingRelayTest {
 protected:
  // RingRelayTest::start_relay, publishing the ring on `subject` through the
  // server at `url`. Call through ASSERT_NO_FATAL_FAILURE.
  void start_relay(std::string_view file, const std::string& subject, const std::string& url) {
    RingRelayTest::start_relay(file, 1024, subject, [&](RelayConfig& c) { c.nats = testing::nats_sink(url); });
  }
};

TEST_F(RelayNatsTest, PublishesEveryRingMessageToTheSubjectInOrder) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  NatsSubscriber sub(server->url(), "ticks");
  ASSERT_TRUE(sub.ok());
  ASSERT_NO_FATAL_FAILURE(start_relay("nats.ring", "ticks", server->url()));
  EXPECT_EQ(relay_->broker(), nullptr);
  const int n = static_cast<int>(testing::scaled(20'000, 5'000));
  push_all(*ring_, 0, n);
  expect_sequence(sub, "ticks", 0, n);
  // Ring counters are published after each batch's last publish: poll.
  ASSERT_TRUE(eventually([&] { return relay_->ring_stats().at(0).nats_published == static_cast<std::uint64_t>(n); }));
  const RingStats rs = relay_->ring_stats().at(0);
  EXPECT_EQ(rs.nats_published, static_cast<std::uint64_t>(n));
  EXPECT_EQ(rs.nats_failed, 0u);
  ASSERT_TRUE(eventually([&] { return relay_->nats_stats().published == static_cast<std::uint64_t>(n); }));
  const NatsStats ns = relay_->nats_stats();
  EXPECT_TRUE(ns.enabled);
  EXPECT_EQ(ns.status, "connected");
  EXPECT_EQ(ns.published, static_cast<std::uint64_t>(n));
  EXPECT_EQ(ns.buffer_full + ns.failed, 0u);
}

TEST_F(RelayNatsTest, PublishesCarryTheRingSourceAndConsecutiveRingSequences) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  NatsSubscriber sub(server->url(), "seq");
  ASSERT_TRUE(sub.ok());
  ASSERT_NO_FATAL_FAILURE(start_relay("seq.ring", "seq", server->url()));
  push_all(*ring_, 0, 3);
  auto first = sub.next_headers();
  ASSERT_TRUE(first);
  push_all(*ring_, 3, 200);
  ContinuityChecker checker;
  EXPECT_EQ(checker.check(first->first, std::stoull(first->second)).kind, Continuity::first);
  EXPECT_EQ(first->second, "0");
  const SourceName name = split_source(first->first);
  EXPECT_NE(name.stream.find(":" + path_), std::string_view::npos) << first->first;
  EXPECT_FALSE(name.instance.empty());
  for (int i = 1; i < 200; ++i) {
    auto h = sub.next_headers();
    ASSERT_TRUE(h) << "missing message " << i;
    EXPECT_EQ(h->first, first->first);
    ASSERT_EQ(h->second, std::to_string(i));
    EXPECT_EQ(checker.check_headers(h->first.c_str(), h->second.c_str()).kind, Continuity::in_order);
  }
  EXPECT_EQ(checker.stats().gaps, 0u);
}

TEST_F(RelayNatsTest, SubscriberOnNodeBReceivesWhatTheRelayPublishesToNodeA) {
  auto a = NatsServer::start({.cluster = true});
  ASSERT_TRUE(a);
  auto b = NatsServer::start({.cluster = true, .route_to = a->cluster_port()});
  ASSERT_TRUE(b);
  NatsSubscriber on_b(b->url(), "cluster.ticks");
  ASSERT_TRUE(on_b.ok());
  ASSERT_TRUE(wait_for_interest(a->url(), "cluster.ticks", on_b)) << "route A-B never carried the interest";

  ASSERT_NO_FATAL_FAILURE(start_relay("cluster.ring", "cluster.ticks", a->url()));
  const int n = static_cast<int>(testing::scaled(10'000, 2'000));
  push_all(*ring_, 0, n);
  expect_sequence(on_b, "cluster.ticks", 0, n);
}

TEST_F(RelayNatsTest, ServerRestartIsRiddenOutByLibnatsAndReported) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  const std::uint16_t port = server->port();  // the restarted server takes it again
  ASSERT_NO_FATAL_FAILURE(start_relay("restart.ring", "restart", server->url()));
  {
    NatsSubscriber sub(server->url(), "restart");
    ASSERT_TRUE(sub.ok());
    push_all(*ring_, 0, 100);
    expect_sequence(sub, "restart", 0, 100);
  }

  server->kill();
  ASSERT_TRUE(eventually([&] { return relay_->nats_stats().disconnects >= 1; })) << log_.all();
  // While the server is down libnats buffers what the relay publishes; the
  // ring keeps draining.
  push_all(*ring_, 100, 200);
  ASSERT_TRUE(eventually([&] { return relay_->ring_stats().at(0).relayed == 200; }));
  EXPECT_NE(relay_->nats_stats().status, "connected");

  server = NatsServer::start({.port = port});
  ASSERT_TRUE(server);
  ASSERT_TRUE(eventually([&] { return relay_->nats_stats().reconnects >= 1; })) << log_.all();
  EXPECT_EQ(relay_->nats_stats().status, "connected");
  NatsSubscriber sub(server->url(), "restart");
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(wait_for_interest(server->url(), "restart", sub));
  push_all(*ring_, 200, 300);
  expect_sequence(sub, "restart", 200, 300);
  // Every relayed message is accounted for (counted just after libnats takes it: poll).
  EXPECT_TRUE(eventually([&] {
    const NatsStats ns = relay_->nats_stats();
    return ns.published + ns.buffer_full + ns.failed == 300u;
  }));
  // Counted, then logged (nats_sink.cpp): wait for the line.
  EXPECT_TRUE(eventually([&] { return log_.all().find("NATS reconnected") != std::string::npos; })) << log_.all();
}

TEST_F(RelayNatsTest, BrokerAndNatsSinksRunTogether) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  NatsSubscriber nsub(server->url(), "both");
  ASSERT_TRUE(nsub.ok());
  ASSERT_NO_FATAL_FAILURE(RingRelayTest::start_relay("both.ring", 1024, "both", [&](RelayConfig& c) {
    c.nats = testing::nats_sink(server->url());
    c.broker = testing::loopback_broker();
  }));
  testing::RespClient rsub(relay_->broker()->port());
  ASSERT_TRUE(rsub.subscribe("both"));
  push_all(*ring_, 0, 1000);
  expect_sequence(nsub, "both", 0, 1000);
  for (int i = 0; i < 1000; ++i) {
    auto r = rsub.next(deadline_in(20s));
    ASSERT_TRUE(r && r->is_message("both"));
    ASSERT_EQ(r->elems[2].str, numbered(i));
  }
  ASSERT_TRUE(eventually([&] { return relay_->ring_stats().at(0).relayed == 1000u; }));
  const RingStats rs = relay_->ring_stats().at(0);
  EXPECT_EQ(rs.deliveries, 1000u);
  EXPECT_EQ(rs.nats_published, 1000u);
}

TEST_F(RelayNatsTest, RejectsSubjectsNatsWouldRefuse) {
  RelayConfig cfg = testing::relay_config({{"/dev/shm/x.ring", "bad subject", false}}, log_);
  cfg.nats = testing::nats_sink("nats://127.0.0.1:1");
  auto relay = Relay::start(cfg);
  ASSERT_FALSE(relay);
  EXPECT_EQ(relay.error().code, RelayError::Code::kInvalidConfig);
}

}  // namespace
}  // namespace ringcast::relay
