// The NATS sink against real nats-server processes on loopback: a single
// server, a two-node cluster (publish to A, subscribe on B), a server restart
// (libnats reconnect and buffering: what was published during the outage
// arrives; past the reconnect buffer it is refused and counted), and the
// broker and NATS sinks together.
#include <nats/nats.h>

#include <thread>

#include <gtest/gtest.h>

#include "prometheus_text.hpp"
#include "relay_fixture.hpp"
#include "relay_test_support.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "ringcast/relay/continuity.hpp"
#include "ringcast/relay/relay.hpp"
#include "tcp_gate.hpp"

namespace ringcast::relay {
namespace {

using namespace std::chrono_literals;
using testing::as_bytes;
using testing::deadline_in;
using testing::eventually;
using testing::NatsServer;
using testing::TcpGate;

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
    std::pair<std::string, std::string> out{
        natsMsg_GetSubject(m), std::string(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m)))};
    natsMsg_Destroy(m);
    return out;
  }
  // The next message's data and its sequence headers ("" when absent), or
  // nullopt after `timeout`.
  struct Sequenced {
    std::string data, source, seq, from;
  };
  std::optional<Sequenced> next_sequenced(std::chrono::milliseconds timeout = 10s) {
    natsMsg* m = nullptr;
    if (natsSubscription_NextMsg(&m, sub_, timeout.count()) != NATS_OK) return std::nullopt;
    const auto header = [m](const char* name) {
      const char* value = nullptr;
      (void)natsMsgHeader_Get(m, name, &value);
      return std::string(value != nullptr ? value : "");
    };
    Sequenced out{std::string(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m))),
                  header(kSourceHeader), header(kSeqHeader), header(kFromHeader)};
    natsMsg_Destroy(m);
    return out;
  }
  // The next message's (Ringcast-Source, Ringcast-Seq) header values ("" when
  // absent), or nullopt after `timeout`.
  std::optional<std::pair<std::string, std::string>> next_headers(std::chrono::milliseconds timeout = 10s) {
    auto m = next_sequenced(timeout);
    if (!m) return std::nullopt;
    return std::pair<std::string, std::string>{m->source, m->seq};
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
    ASSERT_EQ(ring.push_wait(as_bytes(p), {10s, IdleStrategy::kSpinThenYield}), Errc::ok);
  }
}

// The next messages `sub` receives are exactly from..to-1 on `subject`, in
// order (wait_for_interest's probes aside).
void expect_sequence(NatsSubscriber& sub, const std::string& subject, int from, int to) {
  for (int i = from; i < to; ++i) {
    auto m = sub.next();
    ASSERT_TRUE(m) << "missing message " << i;
    if (m->second == "probe") {
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
  EXPECT_EQ(checker.check(first->first, std::stoull(first->second)).kind, Continuity::kFirst);
  EXPECT_EQ(first->second, "0");
  const SourceName name = split_source(first->first);
  EXPECT_NE(name.stream.find(":" + path_), std::string_view::npos) << first->first;
  EXPECT_FALSE(name.instance.empty());
  for (int i = 1; i < 200; ++i) {
    auto h = sub.next_headers();
    ASSERT_TRUE(h) << "missing message " << i;
    EXPECT_EQ(h->first, first->first);
    ASSERT_EQ(h->second, std::to_string(i));
    EXPECT_EQ(checker.check_headers(h->first.c_str(), h->second.c_str()).kind, Continuity::kInOrder);
  }
  EXPECT_EQ(checker.stats().gaps, 0u);
}

// A message longer than 52 bytes takes several slots of the ring, and one
// that does not fit the rest of a block follows a padding: Ringcast-Seq names
// its last slot and Ringcast-From the first position it accounts for, so
// consecutive messages leave no hole (docs/scale-out.md, "Sequence headers").
TEST_F(RelayNatsTest, MessagesOfSeveralSlotsArriveUnchangedAndTheirSequencesCoverEverySlot) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  NatsSubscriber sub(server->url(), "sizes");
  ASSERT_TRUE(sub.ok());
  // 4100 slots: blocks of 1025, so a 64 KiB message fits one.
  ASSERT_NO_FATAL_FAILURE(RingRelayTest::start_relay(
      "sizes.ring", 4100, "sizes", [&](RelayConfig& c) { c.nats = testing::nats_sink(server->url()); }));
  std::string medium(200, 'm');
  std::string large(64 * 1024, '\0');
  for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i % 256);
  // position 0; 1..4 (200 bytes: 48 in the header slot, 152 in three more);
  // a padding 5..1024, then 1025..2049 (64 KiB: a whole block); 2050.
  const struct {
    std::string data, seq, from;
  } want[] = {{"a", "0", ""}, {medium, "4", "1"}, {large, "2049", "5"}, {"b", "2050", ""}};
  for (const auto& w : want) ASSERT_EQ(ring_->push_wait(as_bytes(w.data), 10s), Errc::ok);
  ContinuityChecker checker;
  for (const auto& w : want) {
    auto m = sub.next_sequenced();
    ASSERT_TRUE(m) << "missing message with sequence " << w.seq << "\n" << log_.all();
    EXPECT_EQ(m->data.size(), w.data.size());
    EXPECT_TRUE(m->data == w.data) << "sequence " << w.seq;
    EXPECT_EQ(m->seq, w.seq);
    EXPECT_EQ(m->from, w.from) << "sequence " << w.seq;
    (void)checker.check_headers("src", m->seq.c_str(), nullptr, m->from.empty() ? nullptr : m->from.c_str());
  }
  EXPECT_EQ(checker.stats().gaps, 0u);
  EXPECT_EQ(checker.stats().checked, std::size(want));
  EXPECT_EQ(relay_->ring_stats().at(0).nats_failed, 0u);
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

// The relay reaches its server through a TcpGate, so the test decides when it
// reconnects: libnats flushes what it buffered during the outage the moment it
// does, and the subscriber is on the restarted server (its SUB flushed, so the
// server has the interest) before the gate lets the relay through.
TEST_F(RelayNatsTest, MessagesPublishedWhileTheServerIsDownArriveAfterItRestarts) {
  TcpGate gate;
  ASSERT_TRUE(gate.ok());
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  gate.open_to(server->port());
  ASSERT_NO_FATAL_FAILURE(start_relay("restart.ring", "restart", gate.url()));
  {
    NatsSubscriber sub(server->url(), "restart");
    ASSERT_TRUE(sub.ok());
    push_all(*ring_, 0, 100);
    expect_sequence(sub, "restart", 0, 100);
  }

  gate.shut();
  server->kill();
  ASSERT_TRUE(eventually([&] { return relay_->nats_stats().disconnects >= 1; })) << log_.all();
  // While the server is down libnats buffers what the relay publishes; the
  // ring keeps draining.
  push_all(*ring_, 100, 200);
  ASSERT_TRUE(eventually([&] { return relay_->ring_stats().at(0).relayed == 200; }));
  // Counted just after libnats takes it: poll.
  ASSERT_TRUE(eventually([&] { return relay_->nats_stats().published == 200; }));
  const NatsStats down = relay_->nats_stats();
  EXPECT_NE(down.status, "connected");
  EXPECT_EQ(down.buffer_full + down.failed, 0u);

  server = NatsServer::start();  // a new process; the relay only knows the gate
  ASSERT_TRUE(server);
  NatsSubscriber sub(server->url(), "restart");
  ASSERT_TRUE(sub.ok());
  gate.open_to(server->port());
  ASSERT_TRUE(eventually([&] { return relay_->nats_stats().reconnects >= 1; })) << log_.all();
  expect_sequence(sub, "restart", 100, 200);  // every buffered message, in order
  push_all(*ring_, 200, 300);
  expect_sequence(sub, "restart", 200, 300);
  const NatsStats up = relay_->nats_stats();
  EXPECT_EQ(up.status, "connected");
  EXPECT_EQ(up.disconnects, 1u);
  EXPECT_EQ(up.reconnects, 1u);
  EXPECT_EQ(up.published, 300u);
  EXPECT_EQ(up.buffer_full + up.failed, 0u);
  // Counted, then logged (nats_connection.cpp): wait for the line.
  EXPECT_TRUE(eventually([&] { return log_.contains("NATS reconnected"); })) << log_.all();
}

// A reconnect buffer too small for the outage: libnats takes publishes until it
// is full and refuses the rest, which the relay counts as buffer_full (docs/
// relay.md "Statistics", docs/scale-out.md). The messages it took arrive after
// the restart, the refused ones never do, and later ones flow again.
TEST_F(RelayNatsTest, PublishesBeyondTheReconnectBufferAreRefusedCountedAndNeverSent) {
  TcpGate gate;
  ASSERT_TRUE(gate.ok());
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  gate.open_to(server->port());
  ASSERT_NO_FATAL_FAILURE(RingRelayTest::start_relay("full.ring", 1024, "full", [&](RelayConfig& c) {
    c.nats = testing::nats_sink(gate.url());
    c.nats->reconnect_buffer_bytes = 2048;  // "PUB full 4\r\nn123\r\n" is 20 bytes: about 100 fit
  }));
  {
    NatsSubscriber sub(server->url(), "full");
    ASSERT_TRUE(sub.ok());
    push_all(*ring_, 0, 100);
    expect_sequence(sub, "full", 0, 100);
  }

  gate.shut();
  server->kill();
  ASSERT_TRUE(eventually([&] { return relay_->nats_stats().disconnects >= 1; })) << log_.all();
  // 1000 messages, each at least as long as the one before, so once one is
  // refused every later one is too: libnats takes a prefix of them.
  constexpr int kOutage = 1000;
  push_all(*ring_, 100, 100 + kOutage);
  ASSERT_TRUE(eventually([&] { return relay_->ring_stats().at(0).relayed == 100u + kOutage; }));
  ASSERT_TRUE(eventually([&] {
    const NatsStats ns = relay_->nats_stats();
    return ns.published + ns.buffer_full + ns.failed == 100u + kOutage;
  }));
  const NatsStats down = relay_->nats_stats();
  const std::uint64_t taken = down.published - 100;
  EXPECT_GT(taken, 0u) << "the buffer takes some";
  EXPECT_EQ(down.buffer_full, kOutage - taken) << "the rest is refused as buffer_full";
  EXPECT_GT(down.buffer_full, 0u);
  EXPECT_EQ(down.failed, 0u);
  EXPECT_FALSE(down.last_error.empty());
  // Per ring: a refused publish is nats_failed; /metrics carries the count.
  const RingStats rs = relay_->ring_stats().at(0);
  EXPECT_EQ(rs.nats_published, down.published);
  EXPECT_EQ(rs.nats_failed, down.buffer_full);
  const auto metrics = test::parse_prometheus(relay_->prometheus_text());
  ASSERT_TRUE(metrics.ok()) << metrics.error;
  EXPECT_EQ(metrics.value("ringcast_relay_nats_buffer_full_total"), static_cast<double>(down.buffer_full));
  EXPECT_EQ(metrics.value("ringcast_relay_nats_published_total"), static_cast<double>(down.published));

  server = NatsServer::start();
  ASSERT_TRUE(server);
  NatsSubscriber sub(server->url(), "full");
  ASSERT_TRUE(sub.ok());
  gate.open_to(server->port());
  ASSERT_TRUE(eventually([&] { return relay_->nats_stats().reconnects >= 1; })) << log_.all();
  const int first_refused = 100 + static_cast<int>(taken);
  expect_sequence(sub, "full", 100, first_refused);  // what libnats took, in order
  // Next comes what is published after the reconnect: nothing refused slips in.
  push_all(*ring_, 100 + kOutage, 200 + kOutage);
  expect_sequence(sub, "full", 100 + kOutage, 200 + kOutage);
  const NatsStats up = relay_->nats_stats();
  EXPECT_EQ(up.buffer_full, down.buffer_full) << "nothing refused once connected";
  EXPECT_EQ(up.published, down.published + 100);
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
