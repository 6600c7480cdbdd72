// The JetStream publisher (`--jetstream`) against a real nats-server -js with
// its store in a temporary directory: stream creation and limit flags,
// acknowledged and deduplicated publishes, and a server killed and restarted
// under a publisher, after which every message is stored, none lost.
#include <nats/nats.h>

#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "relay/jetstream_ingress.hpp"
#include "relay/jetstream_publisher.hpp"
#include "relay_fixture.hpp"
#include "relay_test_support.hpp"
#include "resp_client.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "ringcast/broker/broker.hpp"
#include "ringcast/relay/broker_nats_ingress.hpp"

namespace ringcast::relay {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using testing::NatsServer;
using testing::TempDir;

// A plain libnats connection with a JetStream context, reconnecting forever.
class JsClient {
 public:
  explicit JsClient(const std::string& url) {
    natsOptions* o = nullptr;
    natsOptions_Create(&o);
    natsOptions_SetURL(o, url.c_str());
    natsOptions_SetMaxReconnect(o, -1);
    natsOptions_SetReconnectWait(o, 50);
    natsOptions_SetReconnectBufSize(o, 64 << 20);
    ok_ = natsConnection_Connect(&conn_, o) == NATS_OK && natsConnection_JetStream(&js_, conn_, nullptr) == NATS_OK;
    natsOptions_Destroy(o);
  }
  JsClient(const JsClient&) = delete;
  JsClient& operator=(const JsClient&) = delete;
  ~JsClient() {
    if (js_ != nullptr) jsCtx_Destroy(js_);
    if (conn_ != nullptr) {
      natsConnection_Close(conn_);
      natsConnection_Destroy(conn_);
    }
  }
  [[nodiscard]] bool ok() const { return ok_; }
  natsConnection* conn() { return conn_; }
  jsCtx* js() { return js_; }

  // The stream's stored message count, or -1 when it cannot be read.
  std::int64_t stored(const std::string& stream) {
    jsStreamInfo* si = nullptr;
    if (js_GetStreamInfo(&si, js_, stream.c_str(), nullptr, nullptr) != NATS_OK) return -1;
    const auto n = static_cast<std::int64_t>(si->State.Msgs);
    jsStreamInfo_Destroy(si);
    return n;
  }
  // Ringcast-Seq of every stored message, in stream order.
  std::vector<std::uint64_t> stored_seqs(const std::string& stream) {
    std::vector<std::uint64_t> out;
    const std::int64_t n = stored(stream);
    for (std::int64_t i = 1; i <= n; ++i) {
      natsMsg* m = nullptr;
      if (js_GetMsg(&m, js_, stream.c_str(), static_cast<std::uint64_t>(i), nullptr, nullptr) != NATS_OK) break;
      const char* v = nullptr;
      if (natsMsgHeader_Get(m, "Ringcast-Seq", &v) == NATS_OK) out.push_back(std::strtoull(v, nullptr, 10));
      natsMsg_Destroy(m);
    }
    return out;
  }

 private:
  natsConnection* conn_ = nullptr;
  jsCtx* js_ = nullptr;
  bool ok_ = false;
};

class JetStreamPublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = NatsServer::start({.jetstream_dir = store_.path()});
    ASSERT_TRUE(server_);
    client_ = std::make_unique<JsClient>(server_->url());
    ASSERT_TRUE(client_->ok());
  }
  LogFn log() {
    return [this](LogLevel, std::string_view line) {
      std::lock_guard lock(mu_);
      lines_ += std::string(line) + "\n";
    };
  }
  std::string lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  static JetStreamConfig config(std::string stream) {
    JetStreamConfig c;
    c.stream = std::move(stream);
    c.ack_timeout = 1000ms;
    return c;
  }
  // Waits until every publish has an outcome (invariant 1).
  static bool settled(const JetStreamPublisher& p) {
    return eventually(
        [&] {
          NatsStats s;
          p.stats(s);
          return s.js_pending == 0;
        },
        60s);
  }

  TempDir store_;
  std::unique_ptr<NatsServer> server_;
  std::unique_ptr<JsClient> client_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string lines_;
};

TEST_F(JetStreamPublisherTest, CreatesTheStreamWithTheLimitFlagsAndUpdatesThem) {
  JetStreamConfig c = config("TICKS");
  c.max_age = 3600s;
  c.max_bytes = 1 << 20;
  c.duplicate_window = 30s;
  {
    auto p = JetStreamPublisher::create(client_->conn(), c, {"ticks"}, log());
    ASSERT_TRUE(p) << p.error();
  }
  jsStreamInfo* si = nullptr;
  ASSERT_EQ(js_GetStreamInfo(&si, client_->js(), "TICKS", nullptr, nullptr), NATS_OK);
  EXPECT_EQ(si->Config->MaxAge, std::chrono::nanoseconds(3600s).count());
  EXPECT_EQ(si->Config->MaxBytes, 1 << 20);
  EXPECT_EQ(si->Config->Duplicates, std::chrono::nanoseconds(30s).count());
  EXPECT_EQ(si->Config->Storage, js_FileStorage);
  EXPECT_EQ(si->Config->Replicas, 1);
  ASSERT_EQ(si->Config->SubjectsLen, 1);
  EXPECT_STREQ(si->Config->Subjects[0], "ticks");
  jsStreamInfo_Destroy(si);

  // A second relay with another ring and other limits: the stream keeps the
  // first subject, gains the second, and takes the new limits.
  c.max_bytes = 2 << 20;
  {
    auto p = JetStreamPublisher::create(client_->conn(), c, {"md.>"}, log());
    ASSERT_TRUE(p) << p.error();
  }
  ASSERT_EQ(js_GetStreamInfo(&si, client_->js(), "TICKS", nullptr, nullptr), NATS_OK);
  EXPECT_EQ(si->Config->MaxBytes, 2 << 20);
  ASSERT_EQ(si->Config->SubjectsLen, 2);
  std::set<std::string> subjects{si->Config->Subjects[0], si->Config->Subjects[1]};
  EXPECT_EQ(subjects, (std::set<std::string>{"ticks", "md.>"}));
  jsStreamInfo_Destroy(si);
  EXPECT_NE(lines().find("JetStream stream 'TICKS' updated"), std::string::npos) << lines();
}

TEST_F(JetStreamPublisherTest, DerivesStreamSubjectsFromTheRoutes) {
  auto s = JetStreamPublisher::route_subjects({{"/a", "ticks", false}, {"/b", "md.", true}, {"/c", "ticks", false}});
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(*s, (std::vector<std::string>{"ticks", "md.>"}));
  auto bad = JetStreamPublisher::route_subjects({{"/b", "md", true}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("--stream-subjects"), std::string::npos) << bad.error();
}

TEST_F(JetStreamPublisherTest, RefusesABadStreamNameAndSaysWhenJetStreamIsOff) {
  EXPECT_FALSE(JetStreamPublisher::create(client_->conn(), config("a.b"), {"x"}, log()));
  auto plain = NatsServer::start();  // no -js
  ASSERT_TRUE(plain);
  JsClient c(plain->url());
  ASSERT_TRUE(c.ok());
  JetStreamConfig cfg = config("TICKS");
  auto p = JetStreamPublisher::create(c.conn(), cfg, {"x"}, log());
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().find("TICKS"), std::string::npos) << p.error();
}

TEST_F(JetStreamPublisherTest, EveryMessageIsAckedOnceAndARepublishIsADuplicate) {
  auto p = JetStreamPublisher::create(client_->conn(), config("ACKED"), {"acked"}, log());
  ASSERT_TRUE(p) << p.error();
  const std::uint64_t n = testing::scaled(20'000, 2'000);
  for (std::uint64_t i = 0; i < n; ++i) ASSERT_TRUE((*p)->publish("acked", "payload", "hostA:/r:1:2", i, stop_));
  ASSERT_TRUE(settled(**p));
  NatsStats s;
  (*p)->stats(s);
  EXPECT_TRUE(s.jetstream);
  EXPECT_EQ(s.js_published, n);
  EXPECT_EQ(s.js_acked, n);
  EXPECT_EQ(s.js_duplicates, 0u);
  EXPECT_EQ(s.js_failed, 0u);
  EXPECT_EQ(client_->stored("ACKED"), static_cast<std::int64_t>(n));

  // The same source and sequences again (a relay restarted with --from
  // oldest): acked as duplicates, stored once.
  for (std::uint64_t i = 0; i < 100; ++i) ASSERT_TRUE((*p)->publish("acked", "payload", "hostA:/r:1:2", i, stop_));
  ASSERT_TRUE(settled(**p));
  (*p)->stats(s);
  EXPECT_EQ(s.js_acked, n + 100);
  EXPECT_EQ(s.js_duplicates, 100u);
  EXPECT_EQ(client_->stored("ACKED"), static_cast<std::int64_t>(n));
  const auto seqs = client_->stored_seqs("ACKED");
  ASSERT_EQ(seqs.size(), n);
  for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(seqs[i], i);
}

TEST_F(JetStreamPublisherTest, ServerKilledAndRestartedLosesNoMessage) {
  auto p = JetStreamPublisher::create(client_->conn(), config("RESTART"), {"restart"}, log());
  ASSERT_TRUE(p) << p.error();
  const std::uint16_t port = server_->port();
  const std::uint64_t n = testing::scaled(20'000, 4'000);
  std::thread publisher([&] {
    for (std::uint64_t i = 0; i < n; ++i) {
      if (!(*p)->publish("restart", "payload", "hostA:/r:1:2", i, stop_)) return;
    }
  });
  // Kill the server (SIGKILL, store on disk) while messages are in flight.
  ASSERT_TRUE(eventually([&] {
    NatsStats s;
    (*p)->stats(s);
    return s.js_acked >= n / 4;
  }));
  server_->kill();
  server_ = NatsServer::start({.port = port, .jetstream_dir = store_.path()});
  ASSERT_TRUE(server_);
  publisher.join();
  ASSERT_TRUE(settled(**p)) << lines();
  NatsStats s;
  (*p)->stats(s);
  EXPECT_EQ(s.js_published, n);
  EXPECT_EQ(s.js_failed, 0u) << lines();
  EXPECT_EQ(s.js_acked, n);
  // Every sequence is stored at least once; copies beyond the first are ones
  // whose ack was lost with the server after it stored them (the duplicate
  // window is rebuilt from the store on restart, so normally none).
  const auto seqs = client_->stored_seqs("RESTART");
  std::set<std::uint64_t> unique(seqs.begin(), seqs.end());
  EXPECT_EQ(unique.size(), n);
  EXPECT_EQ(*unique.rbegin(), n - 1);
  std::cout << "stored " << seqs.size() << " copies of " << n << " messages; " << s.js_retried << " retries, "
            << s.js_duplicates << " acked as duplicates\n";
}

std::uint64_t seq_of(natsMsg* m) {
  const char* v = nullptr;
  if (natsMsgHeader_Get(m, "Ringcast-Seq", &v) != NATS_OK) return UINT64_MAX;
  return std::strtoull(v, nullptr, 10);
}

// The durable consumer: an ingress that stops after taking part of the
// stream (what it did not finish stays unacked), then a second run on the
// same durable gets everything from its ack floor on, in order.
TEST_F(JetStreamPublisherTest, DurableIngressResumesAfterItsLastAckedMessageInOrder) {
  auto p = JetStreamPublisher::create(client_->conn(), config("DURABLE"), {"durable"}, log());
  ASSERT_TRUE(p) << p.error();
  const std::uint64_t n = 5000;
  for (std::uint64_t i = 0; i < n; ++i) ASSERT_TRUE((*p)->publish("durable", "x", "hostA:/r@1.2", i, stop_));
  ASSERT_TRUE(settled(**p));

  JetStreamConfig c = config("DURABLE");
  c.fetch_batch = 100;
  std::vector<std::uint64_t> got;
  std::mutex got_mu;
  std::atomic<bool> refuse{false};
  const auto handler = [&](natsMsg* m) {
    // relaxed: a test switch, read on the fetch thread.
    if (refuse.load(std::memory_order_relaxed)) return false;
    std::lock_guard lock(got_mu);
    got.push_back(seq_of(m));
    if (got.size() == 1234) refuse.store(true, std::memory_order_relaxed);
    return true;
  };
  const auto count = [&] {
    std::lock_guard lock(got_mu);
    return got.size();
  };
  {
    auto in = JetStreamIngress::start(client_->conn(), c, "durable", "host-b", handler, log());
    ASSERT_TRUE(in) << in.error();
    EXPECT_EQ((*in)->stats().resumed_at, 1u);
    ASSERT_TRUE(eventually([&] { return refuse.load(std::memory_order_relaxed); }));
    // The ack of the batch holding message 1234 covers 1..1234 only.
    ASSERT_TRUE(eventually([&] {
      jsConsumerInfo* ci = nullptr;
      if (js_GetConsumerInfo(&ci, client_->js(), "DURABLE", "host-b", nullptr, nullptr) != NATS_OK) return false;
      const bool acked = ci->AckFloor.Stream == 1234;
      jsConsumerInfo_Destroy(ci);
      return acked;
    }));
  }
  ASSERT_EQ(count(), 1234u);
  refuse.store(false, std::memory_order_relaxed);
  auto in = JetStreamIngress::start(client_->conn(), c, "durable", "host-b", handler, log());
  ASSERT_TRUE(in) << in.error();
  EXPECT_EQ((*in)->stats().resumed_at, 1235u);
  ASSERT_TRUE(eventually([&] { return count() >= n; }, 60s));
  (*in)->stop();
  std::lock_guard lock(got_mu);
  ASSERT_EQ(got.size(), n);  // nothing twice: 1234 was acked before the stop
  for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], i);
}

// Issue 16's heap corruption: libnats 3.4.1's fetch wrote past its message
// array when messages of an earlier pull request were still queued as the
// next fetch began (docs/scale-out.md, "Ingress side"); the ingress now makes
// its own pull requests. Here they keep expiring (100 ms) while the ingress
// idles between bursts and while a slow target holds it mid-batch (a batch of
// 3): every message still arrives once, in order, and is acked.
TEST_F(JetStreamPublisherTest, SlowTargetGetsEveryMessageOnceInOrderAcrossExpiringPullRequests) {
  auto p = JetStreamPublisher::create(client_->conn(), config("SLOW"), {"slow"}, log());
  ASSERT_TRUE(p) << p.error();
  JetStreamConfig c = config("SLOW");
  c.fetch_batch = 3;
  c.pull_wait = 100ms;
  std::vector<std::uint64_t> got;
  std::mutex got_mu;
  const auto handler = [&](natsMsg* m) {
    std::size_t n = 0;
    {
      std::lock_guard lock(got_mu);
      got.push_back(seq_of(m));
      n = got.size();
    }
    // A slow target: held longer than a pull request lives, mid-batch.
    if (n == 2 || n == 50 || n == 51 || n == 200) std::this_thread::sleep_for(250ms);
    return true;
  };
  const auto count = [&] {
    std::lock_guard lock(got_mu);
    return got.size();
  };
  auto in = JetStreamIngress::start(client_->conn(), c, "slow", "host-b-slow", handler, log());
  ASSERT_TRUE(in) << in.error();
  const std::uint64_t bursts = 4, per_burst = 100;
  for (std::uint64_t b = 0; b < bursts; ++b) {
    for (std::uint64_t i = 0; i < per_burst; ++i) {
      ASSERT_TRUE((*p)->publish("slow", "x", "hostA:/r@1.2", b * per_burst + i, stop_));
    }
    ASSERT_TRUE(eventually([&] { return count() >= (b + 1) * per_burst; }, 60s)) << count() << "\n" << lines();
  }
  ASSERT_TRUE(eventually([&] {
    jsConsumerInfo* ci = nullptr;
    if (js_GetConsumerInfo(&ci, client_->js(), "SLOW", "host-b-slow", nullptr, nullptr) != NATS_OK) return false;
    const bool acked = ci->AckFloor.Stream == bursts * per_burst;
    jsConsumerInfo_Destroy(ci);
    return acked;
  }));
  const JetStreamIngressStats st = (*in)->stats();
  (*in)->stop();
  EXPECT_EQ(st.fetched, bursts * per_burst);
  EXPECT_EQ(st.redeliveries, 0u);
  EXPECT_EQ(st.fetch_errors, 0u) << lines();
  EXPECT_GT(st.acks, 0u);
  std::lock_guard lock(got_mu);
  ASSERT_EQ(got.size(), bursts * per_burst);
  for (std::uint64_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], i);
}

// The broker's NATS ingress with JetStream (ringcast-broker --nats-in
// --jetstream, and the relay's --nats-in-broker): what the stream stored while
// the ingress was not running reaches the broker's subscribers when it starts,
// in order; a restarted ingress resumes after what the last one acked, so a
// clean stop and start repeats nothing.
TEST_F(JetStreamPublisherTest, BrokerIngressDeliversWhatWasStoredWhileItWasDownAndResumesAfterItsAcks) {
  auto p = JetStreamPublisher::create(client_->conn(), config("BRK"), {"md.eu"}, log());
  ASSERT_TRUE(p) << p.error();
  const auto publish = [&](std::uint64_t from, std::uint64_t to) {
    for (std::uint64_t i = from; i < to; ++i) {
      ASSERT_TRUE((*p)->publish("md.eu", std::to_string(i), "hostA:/dev/shm/md.ring@1.2", i, stop_));
    }
    ASSERT_TRUE(settled(**p));
  };
  ASSERT_NO_FATAL_FAILURE(publish(0, 100));  // stored before any ingress runs

  auto b = broker::Broker::start(testing::loopback_broker());
  ASSERT_TRUE(b) << b.error().message();
  test::RespClient sub((*b)->port());
  ASSERT_TRUE(sub.subscribe("md.eu"));
  NatsConfig n = testing::nats_sink(server_->url());
  n.jetstream = config("BRK");
  n.jetstream->durable = "broker-b";
  // An explicit durable names one route only.
  auto two = BrokerNatsIngress::start(**b, n, {{"md.eu", ""}, {"md.us", ""}}, {}, log());
  ASSERT_FALSE(two);
  EXPECT_NE(two.error().message().find("--jetstream-durable"), std::string::npos) << two.error().message();

  const auto expect_messages = [&](std::uint64_t from, std::uint64_t to) {
    for (std::uint64_t i = from; i < to; ++i) {
      auto r = sub.next(testing::deadline_in(20s));
      ASSERT_TRUE(r) << "waiting for " << i << "\n" << lines();
      ASSERT_TRUE(r->is_message("md.eu"));
      ASSERT_EQ(r->elems[2].str, std::to_string(i));
    }
  };
  {
    auto in = BrokerNatsIngress::start(**b, n, {{"md.eu", ""}}, {}, log());
    ASSERT_TRUE(in) << in.error().message();
    ASSERT_NO_FATAL_FAILURE(expect_messages(0, 100));
    ASSERT_NO_FATAL_FAILURE(publish(100, 150));  // and live ones
    ASSERT_NO_FATAL_FAILURE(expect_messages(100, 150));
    // Counted once Broker::publish returned, which may be after the
    // subscriber read the message.
    ASSERT_TRUE(eventually([&] { return (*in)->stats().at(0).delivered == 150; }));
    const NatsIngressStats st = (*in)->stats().at(0);
    EXPECT_TRUE(st.jetstream);
    EXPECT_EQ(st.js_durable, "broker-b");
    EXPECT_EQ(st.js_resumed_at, 1u);
    EXPECT_EQ(st.gaps, 0u);
    EXPECT_NE((*in)->info_text().find("nats_in_0_jetstream:durable=broker-b,resumed_at=1,"), std::string::npos)
        << (*in)->info_text();
    // Everything handed to the broker is acked before a clean stop returns.
    (*in)->stop();
  }
  ASSERT_NO_FATAL_FAILURE(publish(150, 250));  // stored while the ingress is down
  auto in = BrokerNatsIngress::start(**b, n, {{"md.eu", ""}}, {}, log());
  ASSERT_TRUE(in) << in.error().message();
  ASSERT_NO_FATAL_FAILURE(expect_messages(150, 250));  // none of 0..149 again
  EXPECT_EQ((*in)->stats().at(0).js_resumed_at, 151u);
  (*in)->stop();
  (*b)->stop();
  (*b)->wait();
}

// A ring relayed with --jetstream: the relay creates the stream and every
// ring message is stored once, in ring order, with its sequence headers.
class RelayJetStreamTest : public testing::RingRelayTest {};

TEST_F(RelayJetStreamTest, EveryRingMessageIsStoredOnceInOrderAndCounted) {
  TempDir store;
  auto server = NatsServer::start({.jetstream_dir = store.path()});
  ASSERT_TRUE(server);
  ASSERT_NO_FATAL_FAILURE(start_relay("js.ring", 1024, "js.ticks", [&](RelayConfig& c) {
    c.nats = testing::nats_sink(server->url());
    JetStreamConfig js;
    js.stream = "RELAYED";
    js.max_age = 3600s;
    c.nats->jetstream = js;
  }));
  const std::uint64_t n = testing::scaled(20'000, 2'000);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::string p = "m" + std::to_string(i);
    ASSERT_EQ(ring_->push_wait(testing::as_bytes(p), {10s, IdleStrategy::kSpinThenYield}), Errc::ok);
  }
  ASSERT_TRUE(eventually([&] { return relay_->nats_stats().js_acked == n; }, 60s)) << log_.all();
  const NatsStats ns = relay_->nats_stats();
  EXPECT_TRUE(ns.jetstream);
  EXPECT_EQ(ns.js_published, n);
  EXPECT_EQ(ns.js_failed + ns.js_pending + ns.js_duplicates, 0u);
  ASSERT_TRUE(eventually([&] { return relay_->ring_stats().at(0).nats_published == n; }));
  EXPECT_EQ(relay_->ring_stats().at(0).nats_failed, 0u);

  JsClient client(server->url());
  ASSERT_TRUE(client.ok());
  const auto seqs = client.stored_seqs("RELAYED");
  ASSERT_EQ(seqs.size(), n);
  for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(seqs[i], i);
  EXPECT_NE(relay_->info_text().find("nats_js_acked:" + std::to_string(n)), std::string::npos);
  EXPECT_NE(relay_->prometheus_text().find("ringcast_relay_jetstream_acked_total " + std::to_string(n)),
            std::string::npos);
  EXPECT_TRUE(log_.contains("JetStream stream 'RELAYED' created")) << log_.all();
}

TEST_F(RelayJetStreamTest, StartFailsWithTheReasonWhenTheServerHasNoJetStream) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  RelayConfig cfg = testing::relay_config({{dir_.file("x.ring"), "x", false}}, log_);
  cfg.nats = testing::nats_sink(server->url());
  JetStreamConfig js;
  js.stream = "NOPE";
  cfg.nats->jetstream = js;
  auto relay = Relay::start(cfg);
  ASSERT_FALSE(relay);
  EXPECT_EQ(relay.error().code, RelayError::Code::kNats);
  EXPECT_NE(relay.error().message().find("NOPE"), std::string::npos) << relay.error().message();
}

// --nats-batch over 1 with --jetstream is refused before anything starts,
// with the reason: one Nats-Msg-Id and one ack per ring message.
TEST_F(RelayJetStreamTest, NatsBatchOverOneIsRefusedWithJetStreamSayingWhy) {
  RelayConfig cfg = testing::relay_config({{dir_.file("x.ring"), "x", false}}, log_);
  cfg.nats = testing::nats_sink("nats://127.0.0.1:1");
  cfg.nats->batch = 16;
  JetStreamConfig js;
  js.stream = "S";
  cfg.nats->jetstream = js;
  auto relay = Relay::start(cfg);
  ASSERT_FALSE(relay);
  EXPECT_EQ(relay.error().code, RelayError::Code::kInvalidConfig);
  EXPECT_NE(relay.error().message().find("own Nats-Msg-Id and ack"), std::string::npos) << relay.error().message();
}

}  // namespace
}  // namespace ringcast::relay
