// Brokers joined into a cluster through one nats-server (docs/cluster.md):
// two in-process nodes, each a Broker started with its NatsCluster link, and
// real RESP and WebSocket clients. What a confirmed subscription receives,
// once and in order; what a node without interest takes in; how a frame that
// skips or repeats a number is counted and told; a publish that cannot leave
// its node refused with CLUSTERDOWN; and the executable's --cluster.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nats/nats.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster_frame.hpp"
#include "prometheus_text.hpp"
#include "relay_fixture.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "ringcast/broker/broker.hpp"
#include "ringcast/broker/grant.hpp"
#include "ringcast/broker/metrics.hpp"
#include "ringcast/broker/token.hpp"
#include "ringcast/relay/nats_cluster.hpp"
#include "ringcast/relay/relay.hpp"
#include "ws_client.hpp"

namespace ringcast::relay {
namespace {

using namespace std::chrono_literals;
using broker::ws::test::WsClient;
using testing::deadline_in;
using testing::NatsServer;
using testing::RespClient;

struct Node {
  std::unique_ptr<NatsCluster> link;
  std::unique_ptr<broker::Broker> broker;
  ~Node() {
    if (link) link->stop();
    if (broker) {
      broker->stop();
      broker->wait();
    }
  }
};

ClusterConfig cluster_config(const std::string& url) {
  ClusterConfig c;
  c.nats.url = url;
  c.nats.reconnect_wait = 50ms;
  return c;
}

// Connects `n`'s link, starts its broker (WebSocket on a port of its own)
// and attaches them.
void start_node(Node& n, const ClusterConfig& c, broker::BrokerConfig bc, const LogFn& log) {
  auto link = NatsCluster::connect(c, log);
  ASSERT_TRUE(link) << link.error();
  n.link = std::move(*link);
  bc.ws_port = 0;
  auto b = broker::Broker::start(bc, n.link.get());
  ASSERT_TRUE(b) << b.error().message();
  n.broker = std::move(*b);
  n.link->attach(*n.broker);
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = NatsServer::start();
    ASSERT_TRUE(server_);
    ASSERT_NO_FATAL_FAILURE(start_node(a_, cluster_config(server_->url())));
    ASSERT_NO_FATAL_FAILURE(start_node(b_, cluster_config(server_->url())));
  }
  void start_node(Node& n, const ClusterConfig& c, broker::BrokerConfig bc = testing::loopback_broker()) {
    relay::start_node(n, c, std::move(bc), log_.fn());
  }

  testing::LogSink log_;
  std::unique_ptr<NatsServer> server_;
  Node a_, b_;
};

// The next pub/sub message on `c` as "kind channel payload" (pmessage: "pmessage pattern channel payload").
std::string next_message(RespClient& c) {
  auto r = c.next(deadline_in(10s));
  if (!r) return "<none>";
  std::string s;
  for (std::size_t i = 0; i < r->count && i < r->elems.size(); ++i) {
    if (i > 0) s += ' ';
    s += r->elems[i].str;
  }
  return s;
}

std::string publish(RespClient& c, std::string_view command, std::string_view channel, std::string_view payload) {
  auto r = c.call({command, channel, payload});
  if (!r) return "<none>";
  return r->type == '-' ? std::string(r->str) : std::to_string(r->num);
}

TEST_F(ClusterTest, ConfirmedSubscribersOnTheOtherNodeGetEveryPublishOnceInOrderAndTheOriginNoEcho) {
  RespClient channel(b_.broker->port()), pattern(b_.broker->port()), shard(b_.broker->port());
  ASSERT_TRUE(channel.subscribe("chat"));
  ASSERT_TRUE(pattern.subscribe("ch*", /*pattern=*/true));
  ASSERT_TRUE(shard.send({"SSUBSCRIBE", "chat"}));
  ASSERT_EQ(next_message(shard), "ssubscribe chat 1");
  RespClient here(a_.broker->port());  // a subscriber on the publishing node
  ASSERT_TRUE(here.subscribe("chat"));

  // No wait between the confirmations and the publishes: a confirmation
  // means the interest is in place (ClusterLink::settle).
  RespClient pub(a_.broker->port());
  constexpr int kMessages = 500;
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_EQ(publish(pub, "PUBLISH", "chat", "m" + std::to_string(i)), "1");  // this node's receivers
    if (i % 100 == 0) {
      ASSERT_EQ(publish(pub, "SPUBLISH", "chat", "s" + std::to_string(i)), "0");
    }
  }
  ASSERT_EQ(publish(pub, "PUBLISH", "chat", "end"), "1");
  for (int i = 0; i < kMessages; ++i) {
    const std::string m = "m" + std::to_string(i);
    ASSERT_EQ(next_message(channel), "message chat " + m);
    ASSERT_EQ(next_message(pattern), "pmessage ch* chat " + m);
    ASSERT_EQ(next_message(here), "message chat " + m);
    if (i % 100 == 0) {
      ASSERT_EQ(next_message(shard), "smessage chat s" + std::to_string(i));
    }
  }
  // Nothing twice: the next message after the last is "end" everywhere.
  EXPECT_EQ(next_message(channel), "message chat end");
  EXPECT_EQ(next_message(pattern), "pmessage ch* chat end");
  EXPECT_EQ(next_message(here), "message chat end");
  // Each PUBLISH came twice, through the channel's subscription and the
  // patterns' wildcard; the second copy was dropped. The second copy of "end"
  // may come after its first was delivered: wait for it before counting.
  ASSERT_TRUE(testing::eventually([&] { return b_.link->stats().duplicates >= kMessages + 1; }))
      << b_.link->stats().duplicates << " duplicates dropped";
  const ClusterStats sa = a_.link->stats(), sb = b_.link->stats();
  EXPECT_EQ(sa.sent, kMessages + 1 + kMessages / 100);
  EXPECT_EQ(sa.received, 0u) << "a node never takes its own messages back in";
  EXPECT_EQ(sb.received, sa.sent);
  EXPECT_EQ(sb.duplicates, kMessages + 1);
  EXPECT_EQ(sb.gaps + sb.lost + sb.malformed + sb.refused_here + sb.nats_dropped, 0u);
  EXPECT_EQ(sb.nats_subscriptions, 3u) << "the channel, the shard channel and the patterns' wildcard";
}

TEST_F(ClusterTest, AWebSocketPublishReachesARespSubscriberOnTheOtherNodeAndBack) {
  RespClient sub(b_.broker->port());
  ASSERT_TRUE(sub.subscribe("room"));
  WsClient ws(a_.broker->ws_port());
  ASSERT_TRUE(ws.upgraded());
  ASSERT_TRUE(ws.send_json({{"type", "subscribe"}, {"topic", "room"}}));
  ASSERT_EQ((*ws.read_json())["type"], "subscribed");
  ASSERT_TRUE(ws.send_json({{"type", "publish"}, {"topic", "room"}, {"payload", "from the browser"}}));
  EXPECT_EQ(next_message(sub), "message room from the browser");
  const auto next_ws_message = [&ws]() -> std::string {
    for (;;) {
      auto m = ws.read_json();
      if (!m) return "<none>";
      if ((*m)["type"] == "message") return (*m)["topic"].get<std::string>() + " " + (*m)["payload"].get<std::string>();
    }
  };
  EXPECT_EQ(next_ws_message(), "room from the browser");  // its own node's subscriber: the browser itself

  RespClient pub(b_.broker->port());
  ASSERT_EQ(publish(pub, "PUBLISH", "room", "from redis"), "1");
  EXPECT_EQ(next_ws_message(), "room from redis");
}

TEST_F(ClusterTest, ANodeWithoutSubscribersOfAChannelTakesNoneOfItsMessagesIn) {
  RespClient sub(b_.broker->port());
  ASSERT_TRUE(sub.subscribe("wanted"));
  RespClient pub(a_.broker->port());
  for (int i = 0; i < 50; ++i) ASSERT_EQ(publish(pub, "PUBLISH", "unwanted", "x"), "0");
  ASSERT_EQ(publish(pub, "PUBLISH", "wanted", "marker"), "0");
  // One NATS connection each way keeps the order: "marker" came after the 50.
  ASSERT_EQ(next_message(sub), "message wanted marker");
  EXPECT_EQ(b_.link->stats().received, 1u);
  EXPECT_EQ(a_.link->stats().sent, 51u);
  // Its last subscriber gone, the channel is no longer taken in.
  ASSERT_TRUE(sub.send({"UNSUBSCRIBE", "wanted"}));
  ASSERT_EQ(next_message(sub), "unsubscribe wanted 0");
  RespClient marker(b_.broker->port());
  ASSERT_TRUE(marker.subscribe("marker"));
  ASSERT_EQ(publish(pub, "PUBLISH", "wanted", "y"), "0");
  ASSERT_EQ(publish(pub, "PUBLISH", "marker", "z"), "0");
  ASSERT_EQ(next_message(marker), "message marker z");
  EXPECT_EQ(b_.link->stats().received, 2u);
}

TEST_F(ClusterTest, PatternsComingAndGoingNeitherDuplicateNorLoseAnExactSubscribersMessages) {
  RespClient exact(b_.broker->port()), patterns(b_.broker->port());
  ASSERT_TRUE(exact.subscribe("ticks"));
  RespClient pub(a_.broker->port());
  int next = 0;
  const auto publish_some = [&] {
    for (int i = 0; i < 100; ++i) ASSERT_EQ(publish(pub, "PUBLISH", "ticks", std::to_string(next++)), "0");
  };
  ASSERT_NO_FATAL_FAILURE(publish_some());
  ASSERT_TRUE(patterns.subscribe("t*", /*pattern=*/true));  // every channel comes in through the wildcard too
  ASSERT_NO_FATAL_FAILURE(publish_some());
  ASSERT_TRUE(patterns.send({"PUNSUBSCRIBE", "t*"}));  // and the wildcard goes
  for (std::string m; m.rfind("punsubscribe", 0) != 0;) {
    m = next_message(patterns);
    ASSERT_NE(m, "<none>");
  }
  ASSERT_NO_FATAL_FAILURE(publish_some());
  for (int i = 0; i < next; ++i) ASSERT_EQ(next_message(exact), "message ticks " + std::to_string(i));
  ASSERT_EQ(publish(pub, "PUBLISH", "ticks", "end"), "0");
  EXPECT_EQ(next_message(exact), "message ticks end");
  EXPECT_EQ(b_.link->stats().lost, 0u);
}

// Nodes on two NATS servers joined by a route, as on two hosts: interest
// crosses the route (not waited for by the confirmation: docs/cluster.md), then
// every message arrives in order; when the server a node is on dies, the node
// fails over to the other and the traffic resumes.
TEST(ClusterOverRoutesTest, NodesOnRoutedNatsServersExchangeInOrderAndSurviveTheLossOfAServer) {
  testing::LogSink log;
  auto s1 = NatsServer::start({.cluster = true});
  ASSERT_TRUE(s1);
  auto s2 = NatsServer::start({.cluster = true, .route_to = s1->cluster_port()});
  ASSERT_TRUE(s2);
  // A knows s1 only and learns s2 from it (NATS's server discovery).
  Node a, b;
  for (auto [node, url] : {std::pair{&a, s1->url()}, std::pair{&b, s2->url()}}) {
    auto link = NatsCluster::connect(cluster_config(url), log.fn());
    ASSERT_TRUE(link) << link.error();
    node->link = std::move(*link);
    broker::BrokerConfig bc = testing::loopback_broker();
    auto started = broker::Broker::start(bc, node->link.get());
    ASSERT_TRUE(started) << started.error().message();
    node->broker = std::move(*started);
    node->link->attach(*node->broker);
  }
  RespClient sub(b.broker->port());
  ASSERT_TRUE(sub.subscribe("chat"));
  RespClient pub(a.broker->port());
  // Probes until one crosses: the interest has reached A's server.
  const auto crossed = [&](const std::string& probe) {
    for (int i = 0; i < 200; ++i) {
      if (publish(pub, "PUBLISH", "chat", probe) != "0") return false;
      auto r = sub.next(deadline_in(50ms));
      if (r && r->count == 3 && r->elems[2].str == probe) return true;
    }
    return false;
  };
  ASSERT_TRUE(crossed("probe")) << log.all();
  const auto exchange = [&](int from, int to) {
    for (int i = from; i < to; ++i) ASSERT_EQ(publish(pub, "PUBLISH", "chat", std::to_string(i)), "0");
    for (std::string m = next_message(sub); m != "message chat " + std::to_string(from);) {
      ASSERT_EQ(m, "message chat probe");  // probes still on their way
      m = next_message(sub);
    }
    for (int i = from + 1; i < to; ++i) ASSERT_EQ(next_message(sub), "message chat " + std::to_string(i));
  };
  ASSERT_NO_FATAL_FAILURE(exchange(0, 300));

  // A's server dies; A reconnects to the one it discovered.
  s1->kill();
  ASSERT_TRUE(testing::eventually(
      [&] {
        const ClusterStats st = a.link->stats();
        return st.connected && st.server != s1->url();
      },
      20s))
      << log.all();
  ASSERT_TRUE(crossed("probe")) << log.all();
  ASSERT_NO_FATAL_FAILURE(exchange(300, 600));
}

// The relay's embedded broker as a node: a ring's messages reach a
// subscriber of another node, and that node's publishes reach the relay's.
TEST_F(ClusterTest, TheRelaysEmbeddedBrokerJoinsTheClusterBothWays) {
  testing::TempDir dir;
  const std::string path = dir.file("feed.ring");
  auto ring = BroadcastRing::create(path, 64);
  ASSERT_TRUE(ring) << ring.error().message();
  RelayConfig rc = testing::broker_config({{path, "feed", false}}, log_);
  rc.cluster = cluster_config(server_->url());
  auto relay = Relay::start(rc);
  ASSERT_TRUE(relay) << relay.error().message();
  ASSERT_TRUE(testing::eventually([&] { return ring->active_consumer_count() == 1; }));

  RespClient on_b(b_.broker->port());
  ASSERT_TRUE(on_b.subscribe("feed"));
  for (int i = 0; i < 100; ++i) {
    const std::string m = "r" + std::to_string(i);
    ASSERT_EQ(ring->push_wait(std::as_bytes(std::span(m)), {10s, IdleStrategy::kSpinThenYield}), Errc::ok);
  }
  for (int i = 0; i < 100; ++i) ASSERT_EQ(next_message(on_b), "message feed r" + std::to_string(i));

  RespClient on_relay((*relay)->broker()->port());
  ASSERT_TRUE(on_relay.subscribe("chat"));
  RespClient pub(b_.broker->port());
  ASSERT_EQ(publish(pub, "PUBLISH", "chat", "to the relay's clients"), "0");
  EXPECT_EQ(next_message(on_relay), "message chat to the relay's clients");
  (*relay)->stop();
}

// Frames put on the cluster's subjects by hand, as a node would send them.
class RawNode {
 public:
  explicit RawNode(const std::string& url) { ok_ = natsConnection_ConnectTo(&conn_, url.c_str()) == NATS_OK; }
  RawNode(const RawNode&) = delete;
  RawNode& operator=(const RawNode&) = delete;
  ~RawNode() {
    natsConnection_Close(conn_);
    natsConnection_Destroy(conn_);
  }
  bool send(std::string_view channel, std::uint64_t seq, std::string_view payload, std::uint32_t chunk = 0,
            bool more = false) {
    return queue(channel, seq, payload, chunk, more) && natsConnection_FlushTimeout(conn_, 5000) == NATS_OK;
  }
  // Handed to libnats without a flush: queued ones leave together (a burst).
  bool queue(std::string_view channel, std::uint64_t seq, std::string_view payload, std::uint32_t chunk = 0,
             bool more = false) {
    std::string frame, subject;
    encode_cluster_frame({false, 0, 42, seq, channel, {}, payload, chunk, more}, frame);
    cluster_subject("ringcast", SubjectSpace::kChannel, channel, subject);
    return natsConnection_Publish(conn_, subject.c_str(), frame.data(), static_cast<int>(frame.size())) == NATS_OK;
  }
  bool flush() { return natsConnection_FlushTimeout(conn_, 5000) == NATS_OK; }
  bool send_bytes(const std::string& subject, std::string_view bytes) {
    return natsConnection_Publish(conn_, subject.c_str(), bytes.data(), static_cast<int>(bytes.size())) == NATS_OK &&
           natsConnection_FlushTimeout(conn_, 5000) == NATS_OK;
  }
  [[nodiscard]] bool ok() const { return ok_; }

 private:
  natsConnection* conn_ = nullptr;
  bool ok_ = false;
};

TEST_F(ClusterTest, ASkippedNumberIsCountedAndToldInBandAndARepeatedOneIsDropped) {
  RespClient sub(b_.broker->port());
  ASSERT_TRUE(sub.subscribe("feed"));
  RawNode other(server_->url());
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(other.send("feed", 7, "seven"));
  ASSERT_TRUE(other.send("feed", 8, "eight"));
  ASSERT_TRUE(other.send("feed", 8, "eight again"));
  ASSERT_TRUE(other.send("feed", 11, "eleven"));
  std::string subject;
  cluster_subject("ringcast", SubjectSpace::kChannel, "feed", subject);
  ASSERT_TRUE(other.send_bytes(subject, "not a frame"));
  ASSERT_TRUE(other.send("feed", 12, "twelve"));
  EXPECT_EQ(next_message(sub), "message feed seven");
  EXPECT_EQ(next_message(sub), "message feed eight");
  const std::string notice = next_message(sub);
  EXPECT_NE(notice.find("__ringcast__:loss"), std::string::npos) << notice;
  EXPECT_NE(notice.find("upstream=2"), std::string::npos) << notice;
  EXPECT_EQ(next_message(sub), "message feed eleven");
  EXPECT_EQ(next_message(sub), "message feed twelve");
  const ClusterStats s = b_.link->stats();
  EXPECT_EQ(s.received, 4u);
  EXPECT_EQ(s.duplicates, 1u);
  EXPECT_EQ(s.gaps, 1u);
  EXPECT_EQ(s.lost, 2u);
  EXPECT_EQ(s.malformed, 1u);
  // /metrics (and the live page, which reads it) says the same, with the
  // server and the interest, in well-formed exposition text.
  broker::PrometheusWriter w;
  b_.link->write_metrics(w);
  const std::string text = w.take();
  const test::PrometheusText m = test::parse_prometheus(text);
  ASSERT_TRUE(m.ok()) << m.error << "\n" << text;
  EXPECT_EQ(m.value("ringcast_cluster_connected"), 1);
  EXPECT_EQ(m.value("ringcast_cluster_info", {{"server", s.server}}), 1) << text;
  EXPECT_EQ(m.value("ringcast_cluster_received_total"), 4);
  EXPECT_EQ(m.value("ringcast_cluster_gaps_total"), 1);
  EXPECT_EQ(m.value("ringcast_cluster_lost_total"), 2);
  EXPECT_EQ(m.value("ringcast_cluster_malformed_total"), 1);
  EXPECT_EQ(m.value("ringcast_cluster_interest", {{"space", "channel"}}), 1);
  EXPECT_EQ(m.value("ringcast_cluster_interest", {{"space", "pattern"}}), 0);
  EXPECT_EQ(s.server.rfind("nats://127.0.0.1:", 0), 0u) << s.server;
}

// A bundle: whole frames of one channel back to back, each with its length;
// decoding stops at the first thing that is not a frame, after the frames
// before it.
TEST(ClusterFrameTest, ABundleCarriesWholeFramesInOrderAndStopsAtTheFirstBrokenOne) {
  const std::string big(3000, 'x');
  const ClusterFrame frames[] = {
      {false, 0, 7, 1, "feed", {}, "one"}, {false, 1, 7, 2, "feed", "id-2", ""}, {false, 0, 7, 3, "feed", {}, big}};
  std::string bundle;
  begin_cluster_bundle(bundle);
  for (const ClusterFrame& f : frames) append_to_cluster_bundle(f, bundle);
  std::vector<std::string> seen;
  const auto collect = [&seen](const ClusterFrame& f) {
    seen.push_back(fmt::format("{}/{}/{}/{}/{}", f.seq, f.qos, f.channel, f.message_id, f.payload.size()));
  };
  ASSERT_TRUE(for_each_cluster_frame(bundle, collect));
  EXPECT_EQ(seen, (std::vector<std::string>{"1/0/feed//3", "2/1/feed/id-2/0", "3/0/feed//3000"}));
  seen.clear();
  EXPECT_FALSE(for_each_cluster_frame(std::string_view(bundle).substr(0, bundle.size() - 1), collect));
  EXPECT_EQ(seen.size(), 2u) << "the frames before the broken one";
  seen.clear();
  std::string one;
  encode_cluster_frame(frames[0], one);
  ASSERT_TRUE(for_each_cluster_frame(one, collect)) << "a message of one frame is its frame";
  EXPECT_EQ(seen, std::vector<std::string>{"1/0/feed//3"});
  std::string chunked;
  begin_cluster_bundle(chunked);
  append_to_cluster_bundle({false, 0, 7, 4, "feed", {}, "ab", 0, true}, chunked);
  EXPECT_FALSE(for_each_cluster_frame(chunked, collect)) << "a bundle carries no chunks";
  EXPECT_FALSE(for_each_cluster_frame(bundle + "tail", collect)) << "bytes after the last frame";
}

// A run of one publisher's messages on a channel crosses NATS as bundles,
// fewer NATS messages than messages, and arrives whole and in order; a
// bundle's gap is told in place.
TEST_F(ClusterTest, APipelinedRunCrossesAsBundlesAndArrivesInOrder) {
  RespClient sub(b_.broker->port());
  ASSERT_TRUE(sub.subscribe("feed"));
  natsConnection* watcher = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&watcher, server_->url().c_str()), NATS_OK);
  natsSubscription* raw = nullptr;
  std::string subject;
  cluster_subject("ringcast", SubjectSpace::kChannel, "feed", subject);
  ASSERT_EQ(natsConnection_SubscribeSync(&raw, watcher, subject.c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_Flush(watcher), NATS_OK);
  constexpr std::size_t kRun = 500;
  std::vector<std::string> payloads;
  std::vector<broker::Message> run;
  for (std::size_t i = 0; i < kRun; ++i) payloads.push_back(fmt::format("m{}-{}", i, std::string(52, 'p')));
  for (const std::string& p : payloads) run.push_back({"feed", p});
  std::vector<std::size_t> receivers(kRun);
  ASSERT_EQ(a_.broker->publish(run, receivers).status, broker::PublishStatus::kPublished);
  for (const std::string& p : payloads) ASSERT_EQ(next_message(sub), "message feed " + p);
  int nats_messages = 0;
  std::size_t frames = 0;
  for (natsMsg* m = nullptr; natsSubscription_NextMsg(&m, raw, 200) == NATS_OK; natsMsg_Destroy(m)) {
    ++nats_messages;
    EXPECT_TRUE(
        for_each_cluster_frame(std::string_view(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m))),
                               [&frames](const ClusterFrame&) { ++frames; }));
  }
  EXPECT_EQ(frames, kRun);
  EXPECT_LT(nats_messages, static_cast<int>(kRun) / 10) << "a run leaves as bundles";
  EXPECT_EQ(a_.link->stats().sent, kRun);
  natsSubscription_Destroy(raw);
  natsConnection_Destroy(watcher);

  RawNode other(server_->url());
  ASSERT_TRUE(other.ok());
  std::string bundle;
  begin_cluster_bundle(bundle);
  for (const std::uint64_t seq : {1UL, 2UL, 4UL}) {
    append_to_cluster_bundle({false, 0, 42, seq, "feed", {}, fmt::format("b{}", seq)}, bundle);
  }
  ASSERT_TRUE(other.send_bytes(subject, bundle));
  EXPECT_EQ(next_message(sub), "message feed b1");
  EXPECT_EQ(next_message(sub), "message feed b2");
  EXPECT_NE(next_message(sub).find("upstream=1"), std::string::npos);
  EXPECT_EQ(next_message(sub), "message feed b4");
}

// A burst arrives queued behind its first message and is published as a
// batch: a gap inside it is still told between the messages either side of
// it, on each channel, and a message put together from chunks keeps its place.
TEST_F(ClusterTest, ABurstKeepsEachChannelsOrderWithItsLossNoticeBetweenTheMessagesAroundTheGap) {
  RespClient feed(b_.broker->port());
  ASSERT_TRUE(feed.subscribe("feed"));
  RespClient other_sub(b_.broker->port());
  ASSERT_TRUE(other_sub.subscribe("other"));
  RawNode other(server_->url());
  ASSERT_TRUE(other.ok());
  for (std::uint64_t seq = 1; seq <= 20; ++seq) {
    if (seq == 9) continue;  // lost on feed
    ASSERT_TRUE(other.queue("feed", seq, fmt::format("f{}", seq)));
    if (seq == 12) {  // on other: 1-2 and 4-5 in one frame each, 3 from two chunks
      ASSERT_TRUE(other.queue("other", 1, "o1") && other.queue("other", 2, "o2") &&
                  other.queue("other", 3, "o3-", 0, true) && other.queue("other", 3, "whole", 1, false) &&
                  other.queue("other", 4, "o4") && other.queue("other", 6, "o6"));
    }
  }
  ASSERT_TRUE(other.flush());
  for (int seq = 1; seq <= 20; ++seq) {
    if (seq == 9) continue;
    if (seq == 10) {
      const std::string notice = next_message(feed);
      EXPECT_NE(notice.find("upstream=1"), std::string::npos) << notice;
    }
    EXPECT_EQ(next_message(feed), fmt::format("message feed f{}", seq));
  }
  for (const char* want : {"o1", "o2", "o3-whole", "o4"})
    EXPECT_EQ(next_message(other_sub), fmt::format("message other {}", want));
  const std::string notice = next_message(other_sub);
  EXPECT_NE(notice.find("upstream=1"), std::string::npos) << notice;
  EXPECT_EQ(next_message(other_sub), "message other o6");
  const ClusterStats s = b_.link->stats();
  EXPECT_EQ(s.received, 19u + 5u);
  EXPECT_EQ(s.gaps, 2u);
  EXPECT_EQ(s.lost, 2u);
}

TEST_F(ClusterTest, ChunksArePutTogetherAndAMessageMissingOneIsCountedAndToldNotDelivered) {
  RespClient sub(b_.broker->port());
  ASSERT_TRUE(sub.subscribe("feed"));
  RawNode other(server_->url());
  ASSERT_TRUE(other.ok());
  // 1: whole from three chunks. 2: its middle chunk lost. 3: its first chunk
  // lost (shows as missed when 4 comes). 4: in one frame.
  ASSERT_TRUE(other.send("feed", 1, "ab", 0, true));
  ASSERT_TRUE(other.send("feed", 1, "cd", 1, true));
  ASSERT_TRUE(other.send("feed", 1, "e", 2, false));
  ASSERT_TRUE(other.send("feed", 2, "xx", 0, true));
  ASSERT_TRUE(other.send("feed", 2, "zz", 2, false));
  ASSERT_TRUE(other.send("feed", 3, "yy", 1, false));
  ASSERT_TRUE(other.send("feed", 4, "four"));
  EXPECT_EQ(next_message(sub), "message feed abcde");
  for (int i = 0; i < 2; ++i) {
    const std::string notice = next_message(sub);
    EXPECT_NE(notice.find("__ringcast__:loss"), std::string::npos) << notice;
    EXPECT_NE(notice.find("upstream=1"), std::string::npos) << notice;
  }
  EXPECT_EQ(next_message(sub), "message feed four");
  const ClusterStats s = b_.link->stats();
  EXPECT_EQ(s.received, 2u);
  EXPECT_EQ(s.gaps, 2u);
  EXPECT_EQ(s.lost, 2u);
  EXPECT_EQ(s.duplicates + s.malformed, 0u);
}

// A server whose max_payload is 1 KiB: longer messages leave as chunks and
// arrive whole, each once, through a channel's and a pattern's subscription.
TEST(ClusterChunksTest, MessagesLongerThanTheServersMaxPayloadArriveWholeOnceInOrder) {
  testing::LogSink log;
  testing::TempDir dir;
  const std::string conf = dir.file("nats.conf");
  {
    std::ofstream f(conf);
    f << "max_payload: 1024\n";
  }
  auto server = NatsServer::start({.config_file = conf});
  ASSERT_TRUE(server);
  Node a, b;
  for (Node* node : {&a, &b}) {
    auto link = NatsCluster::connect(cluster_config(server->url()), log.fn());
    ASSERT_TRUE(link) << link.error();
    node->link = std::move(*link);
    auto started = broker::Broker::start(testing::loopback_broker(), node->link.get());
    ASSERT_TRUE(started) << started.error().message();
    node->broker = std::move(*started);
    node->link->attach(*node->broker);
  }
  RespClient channel(b.broker->port()), pattern(b.broker->port());
  ASSERT_TRUE(channel.subscribe("big"));
  ASSERT_TRUE(pattern.subscribe("b*", /*pattern=*/true));
  RespClient pub(a.broker->port());
  std::vector<std::string> sent;
  for (const std::size_t size : {0UL, 1UL, 900UL, 1024UL, 5000UL, 300'000UL}) {
    std::string payload(size, '\0');
    for (std::size_t i = 0; i < size; ++i) payload[i] = static_cast<char>('a' + (i * 7 + size) % 26);
    ASSERT_EQ(publish(pub, "PUBLISH", "big", payload), "0");
    sent.push_back(std::move(payload));
  }
  ASSERT_EQ(publish(pub, "PUBLISH", "big", "end"), "0");
  sent.emplace_back("end");
  for (const std::string& m : sent) {
    ASSERT_EQ(next_message(channel), "message big " + m);
    ASSERT_EQ(next_message(pattern), "pmessage b* big " + m);
  }
  const ClusterStats sa = a.link->stats(), sb = b.link->stats();
  EXPECT_EQ(sa.sent, sent.size());
  EXPECT_EQ(sa.send_failed, 0u);
  EXPECT_EQ(sb.received, sent.size());
  EXPECT_EQ(sb.gaps + sb.lost + sb.malformed + sb.refused_here + sb.nats_dropped, 0u) << log.all();
}

TEST(ClusterUnreachableTest, APublishThatCannotLeaveItsNodeIsRefusedWithClusterDownNotDeliveredHere) {
  // No NATS server behind the URL: libnats buffers while it retries, and
  // once its buffer (this small) refuses a message the node is unreachable.
  const std::uint16_t port = testing::free_port();
  ClusterConfig c = cluster_config("nats://127.0.0.1:" + std::to_string(port));
  c.nats.reconnect_buffer_bytes = 4096;
  c.settle_timeout = 100ms;
  testing::LogSink log;
  auto link = NatsCluster::connect(c, log.fn());
  ASSERT_TRUE(link) << link.error();
  broker::BrokerConfig bc = testing::loopback_broker();
  bc.max_block = 50ms;
  auto b = broker::Broker::start(bc, link->get());
  ASSERT_TRUE(b) << b.error().message();
  (*link)->attach(**b);
  Node node{std::move(*link), std::move(*b)};

  RespClient sub(node.broker->port());
  ASSERT_TRUE(sub.subscribe("chat"));  // confirmed after the settle timeout
  RespClient pub(node.broker->port());
  const std::string payload(1000, 'p');
  std::string reply;
  int accepted = 0;
  for (; accepted < 100; ++accepted) {
    reply = publish(pub, "PUBLISH", "chat", payload);
    if (reply != "1") break;
  }
  EXPECT_LT(accepted, 100);
  EXPECT_EQ(reply.rfind("CLUSTERDOWN ", 0), 0u) << reply;
  EXPECT_NE(reply.find("'chat' was not published"), std::string::npos) << reply;
  for (int i = 0; i < accepted; ++i) ASSERT_EQ(next_message(sub), "message chat " + payload);
  // The refused one reached nobody here either.
  ASSERT_TRUE(sub.send({"PING"}));
  EXPECT_EQ(next_message(sub), "pong ") << "PING's reply comes next, after no other message";
  const ClusterStats s = node.link->stats();
  EXPECT_GE(s.unreachable, 1u);
  // The one libnats could not buffer reached this node's subscriber only;
  // every node that receives a later one counts the gap.
  EXPECT_EQ(s.send_failed, 1u);
  EXPECT_GE(s.settle_timeouts, 1u);
  EXPECT_EQ(node.broker->stats().refused_publishes, 1u);
}

#if defined(BROKER_EXE)
std::string listening_port(testing::ChildProcess& p) {
  if (!p.read_stdout_until("listening on 127.0.0.1:", deadline_in(20s))) return {};
  if (!p.read_stdout_until("\n", deadline_in(5s))) return {};
  const std::string out = p.stdout_text();
  const std::string marker = "listening on 127.0.0.1:";
  return std::to_string(std::strtoul(out.c_str() + out.find(marker) + marker.size(), nullptr, 10));
}

// The executables, as the user tried them: redis-cli on node B hears
// redis-cli's PUBLISH on node A; INFO cluster says what crossed.
TEST(ClusterToolTest, RedisCliPublishOnOneRingcastBrokerReachesRedisCliSubscribedToAnother) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server);
  const auto node = [&] {
    return testing::ChildProcess::spawn({BROKER_EXE, "--port", "0", "--cluster", server->url()},
                                        {.err = ringcast::test::Stream::kPipe});
  };
  testing::ChildProcess a = node(), b = node();
  const std::string pa = listening_port(a), pb = listening_port(b);
  ASSERT_FALSE(pa.empty()) << a.stdout_text();
  ASSERT_FALSE(pb.empty()) << b.stdout_text();
  EXPECT_NE(a.stdout_text().find("joined the cluster through NATS " + server->url()), std::string::npos);
  testing::ChildProcess cli = testing::ChildProcess::spawn({"/usr/bin/redis-cli", "-p", pb, "subscribe", "chat"});
  ASSERT_TRUE(cli.read_stdout_until("subscribe\nchat\n1\n", deadline_in(20s))) << cli.stdout_text();
  testing::ChildProcess publisher =
      testing::ChildProcess::spawn({"/usr/bin/redis-cli", "-p", pa, "publish", "chat", "hello"});
  ASSERT_TRUE(publisher.wait_exit(deadline_in(10s)).has_value());
  EXPECT_EQ(publisher.stdout_text(), "0\n") << "PUBLISH counts this node's receivers, as in Redis Cluster";
  ASSERT_TRUE(cli.read_stdout_until("message\nchat\nhello\n", deadline_in(20s))) << cli.stdout_text();
  testing::ChildProcess info = testing::ChildProcess::spawn({"/usr/bin/redis-cli", "-p", pb, "info", "cluster"});
  ASSERT_TRUE(info.wait_exit(deadline_in(10s)).has_value());
  EXPECT_NE(info.stdout_text().find("cluster_received:1\r\n"), std::string::npos) << info.stdout_text();
  EXPECT_NE(info.stdout_text().find("cluster_interest_channels:1\r\n"), std::string::npos) << info.stdout_text();
  EXPECT_EQ(ringcast::test::exit_code(a.stop(SIGTERM)), 0) << a.stderr_text();
  EXPECT_EQ(ringcast::test::exit_code(b.stop(SIGTERM)), 0) << b.stderr_text();
}
#endif

// --- History across nodes (docs/cluster.md, "History") ---------------------------------------------

// Nodes on one JetStream nats-server, each keeping the history of `room*`.
class ClusterHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = NatsServer::start({.jetstream_dir = store_.path()});
    ASSERT_TRUE(server_);
    ASSERT_NO_FATAL_FAILURE(start(a_));
    ASSERT_NO_FATAL_FAILURE(start(b_));
  }
  void start(Node& n) {
    ClusterConfig c = cluster_config(server_->url());
    c.history_replicas = 1;  // one NATS server
    broker::BrokerConfig bc = testing::loopback_broker();
    bc.history = {"room*=100"};
    configure(bc);
    configure(c);
    start_node(n, c, std::move(bc), log_.fn());
  }
  virtual void configure(broker::BrokerConfig& /*bc*/) {}
  virtual void configure(ClusterConfig& /*c*/) {}

  testing::LogSink log_;
  testing::TempDir store_;
  std::unique_ptr<NatsServer> server_;
  Node a_, b_;
};

nlohmann::json ws_subscribe(WsClient& c, nlohmann::json cmd) {
  cmd["type"] = "subscribe";
  EXPECT_TRUE(c.send_json(cmd));
  return c.read_json().value_or(nlohmann::json{});
}

// Publishes `payload` on `topic` at QoS 1; the answer (puback or error), or
// null if none came.
nlohmann::json publish_qos1(WsClient& c, std::string_view topic, const std::string& payload) {
  EXPECT_TRUE(c.send_json({{"type", "publish"}, {"topic", topic}, {"payload", payload}, {"qos", 1}}));
  return c.read_json().value_or(nlohmann::json{});
}

// The next `n` deliveries on `c` as (offset, payload).
std::vector<std::pair<std::uint64_t, std::string>> ws_messages(WsClient& c, std::size_t n) {
  std::vector<std::pair<std::uint64_t, std::string>> out;
  while (out.size() < n) {
    auto j = c.read_json();
    if (!j || (*j)["type"] != "message") {
      ADD_FAILURE() << "after " << out.size() << " of " << n << " messages: " << (j ? j->dump() : "nothing");
      break;
    }
    out.emplace_back((*j)["message_id"].get<std::uint64_t>(), (*j)["payload"].get<std::string>());
  }
  return out;
}

// A message published on any node reaches every node's subscribers from the
// cluster's history with the same offset everywhere (room1's offsets skip
// room2's: one stream numbers both), so a subscriber that saw some of them on
// one node recovers the rest on another with `since`; and after the node it
// published on is gone, a node that joins later has all of it.
TEST_F(ClusterHistoryTest, EveryNodeDeliversTheSameOffsetsAndASubscriberRecoversOnAnotherNodeAfterItsLoss) {
  WsClient on_a(a_.broker->ws_port()), on_b(b_.broker->ws_port());
  const nlohmann::json ca = ws_subscribe(on_a, {{"topic", "room1"}});
  const nlohmann::json cb = ws_subscribe(on_b, {{"topic", "room1"}});
  ASSERT_EQ(ca["type"], "subscribed") << ca.dump();
  const std::string epoch = ca["epoch"];
  EXPECT_EQ(epoch.size(), 16u);
  EXPECT_EQ(cb["epoch"], epoch) << "one history, one epoch on every node";

  RespClient pub(a_.broker->port());
  constexpr int kMessages = 20;
  for (int i = 1; i <= kMessages; ++i) {
    // 0: a retained channel is delivered from the cluster's history, on every node alike.
    ASSERT_EQ(publish(pub, "PUBLISH", "room1", "m" + std::to_string(i)), "0");
    ASSERT_EQ(publish(pub, "PUBLISH", "room2", "other"), "0");
  }
  const auto seen_a = ws_messages(on_a, kMessages);
  const auto seen_b = ws_messages(on_b, kMessages);
  ASSERT_EQ(seen_a.size(), static_cast<std::size_t>(kMessages));
  EXPECT_EQ(seen_b, seen_a) << "the same messages with the same offsets on both nodes";
  for (std::size_t i = 0; i < seen_a.size(); ++i) {
    EXPECT_EQ(seen_a[i].second, "m" + std::to_string(i + 1));
    if (i > 0) {
      EXPECT_EQ(seen_a[i].first, seen_a[i - 1].first + 2) << "room2's messages are numbered between";
    }
  }

  // Saw the first 10 on A; recovers the rest on B.
  WsClient late(b_.broker->ws_port());
  const nlohmann::json r =
      ws_subscribe(late, {{"topic", "room1"}, {"since", {{"offset", seen_a[9].first}, {"epoch", epoch}}}});
  EXPECT_EQ(r["recovered"], true) << r.dump();
  const auto recovered = ws_messages(late, kMessages - 10);
  EXPECT_EQ(recovered, std::vector(seen_a.begin() + 10, seen_a.end()));

  // A goes; B's publishes go on; a node that starts now copies the whole history.
  a_.link->stop();
  a_.broker->stop();
  a_.broker->wait();
  RespClient pub_b(b_.broker->port());
  for (int i = kMessages + 1; i <= kMessages + 5; ++i) {
    ASSERT_EQ(publish(pub_b, "PUBLISH", "room1", "m" + std::to_string(i)), "0");
  }
  const auto more = ws_messages(on_b, 5);
  ASSERT_EQ(more.size(), 5u);
  Node c;
  ASSERT_NO_FATAL_FAILURE(start(c));
  EXPECT_EQ(c.link->stats().history_loaded, 2u * kMessages + 5) << "node C loaded the cluster's history as it started";
  WsClient plain(c.broker->ws_port());  // history published before C was up is not delivered live
  ASSERT_EQ(ws_subscribe(plain, {{"topic", "room1"}})["type"], "subscribed");
  WsClient on_c(c.broker->ws_port());
  const nlohmann::json rc =
      ws_subscribe(on_c, {{"topic", "room1"}, {"since", {{"offset", seen_a[4].first}, {"epoch", epoch}}}});
  EXPECT_EQ(rc["recovered"], true) << rc.dump();
  auto expected = std::vector(seen_a.begin() + 5, seen_a.end());
  expected.insert(expected.end(), more.begin(), more.end());
  EXPECT_EQ(ws_messages(on_c, expected.size()), expected);
  // Live after the replay, with no gap at the seam.
  ASSERT_EQ(publish(pub_b, "PUBLISH", "room1", "last"), "0");
  const auto last = ws_messages(on_c, 1);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].second, "last");
  EXPECT_GT(last[0].first, more.back().first);
  EXPECT_EQ(ws_messages(plain, 1), last) << "the first message a plain subscriber of C gets";
  EXPECT_EQ(b_.link->stats().history_skipped + c.link->stats().history_skipped, 0u) << "nothing pruned unread";
}

// QoS 1 on a retained channel: the puback comes once JetStream has stored
// the message, and names the offset every node delivers it with.
TEST_F(ClusterHistoryTest, AQos1PublishIsAcknowledgedWithTheOffsetEveryNodeDeliversItWith) {
  WsClient sub(b_.broker->ws_port());
  ASSERT_EQ(ws_subscribe(sub, {{"topic", "room9"}})["type"], "subscribed");
  WsClient publisher(a_.broker->ws_port());
  const nlohmann::json ack = publish_qos1(publisher, "room9", "hello");
  ASSERT_EQ(ack["type"], "puback") << ack.dump();
  const auto got = ws_messages(sub, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], std::make_pair(ack["message_id"].get<std::uint64_t>(), std::string("hello")));
  EXPECT_GE(a_.link->stats().history_stored, 1u);
}

// A QoS 1 publish while the node's NATS connection is down is refused and
// never stored: not handed to libnats' reconnect buffer, which would store it
// once the server is back, after the publisher was told "not stored".
TEST_F(ClusterHistoryTest, AQos1PublishWhileTheNodeIsDisconnectedIsRefusedAndNeverStoredLater) {
  WsClient publisher(a_.broker->ws_port());
  const auto publish = [&publisher](const std::string& payload) { return publish_qos1(publisher, "room7", payload); };
  ASSERT_EQ(publish("before")["type"], "puback");
  const std::uint16_t port = server_->port();
  server_->kill();
  const auto until = [](const auto& cond) {
    for (const auto d = deadline_in(20s); !cond();) {
      if (std::chrono::steady_clock::now() >= d) return false;
      std::this_thread::sleep_for(10ms);
    }
    return true;
  };
  ASSERT_TRUE(until([&] { return !a_.link->stats().connected; }));
  const nlohmann::json refused = publish("refused");
  EXPECT_EQ(refused["type"], "error") << refused.dump();
  EXPECT_NE(refused.value("message", "").find("not stored"), std::string::npos) << refused.dump();
  server_ = NatsServer::start({.port = port, .jetstream_dir = store_.path()});
  ASSERT_TRUE(server_);
  // Once the node is back and JetStream answers, a later publish is stored.
  ASSERT_TRUE(until([&] { return a_.link->stats().connected && publish("after")["type"] == "puback"; }));
  WsClient live(b_.broker->ws_port()), reader(b_.broker->ws_port());
  const nlohmann::json confirmed = ws_subscribe(live, {{"topic", "room7"}});
  ASSERT_EQ(confirmed["type"], "subscribed") << confirmed.dump();
  const nlohmann::json sub =
      ws_subscribe(reader, {{"topic", "room7"}, {"since", {{"offset", 0}, {"epoch", confirmed["epoch"]}}}});
  ASSERT_EQ(sub["type"], "subscribed") << sub.dump();
  std::vector<std::string> payloads;
  for (const auto& [offset, payload] : ws_messages(reader, 2)) payloads.push_back(payload);
  EXPECT_EQ(payloads, (std::vector<std::string>{"before", "after"}));
  EXPECT_GE(a_.link->stats().history_store_failed, 1u);
}

// Nodes with one I/O thread each, whose stores may take long.
class ClusterHistoryOneThreadTest : public ClusterHistoryTest {
 protected:
  void configure(broker::BrokerConfig& bc) override { bc.io_threads = 1; }
  void configure(ClusterConfig& c) override { c.store_timeout = 60s; }
};

// A QoS 1 publish waits for JetStream's ack without holding its I/O thread:
// while the nats-server is stopped (SIGSTOP), so no store completes, another
// client of that thread is answered; once the server runs again, the store
// completes and the publisher gets its puback. (Before, the thread waited in
// the store: the PING would have been answered only after the publisher was
// told "not stored", at --cluster-store-timeout.)
TEST_F(ClusterHistoryOneThreadTest, AQos1PublishWaitingForItsStoreHoldsNoOtherConnectionOfItsThread) {
  WsClient sub(b_.broker->ws_port());
  ASSERT_EQ(ws_subscribe(sub, {{"topic", "room3"}})["type"], "subscribed");
  WsClient publisher(a_.broker->ws_port());
  const nlohmann::json first = publish_qos1(publisher, "room3", "first");
  ASSERT_EQ(first["type"], "puback") << first.dump();
  RespClient other(a_.broker->port());  // on the same (only) I/O thread as the publisher

  const pid_t nats = server_->child().pid();
  ASSERT_EQ(::kill(nats, SIGSTOP), 0);
  ASSERT_TRUE(testing::eventually([&] { return testing::all_threads_stopped(nats); }));
  ASSERT_TRUE(publisher.send_json({{"type", "publish"}, {"topic", "room3"}, {"payload", "held"}, {"qos", 1}}));
  const auto pong = other.call({"PING"}, 20s);
  ::kill(nats, SIGCONT);
  ASSERT_TRUE(pong) << "no PONG while a store was in flight on the thread";
  EXPECT_EQ(pong->str, "PONG");

  const auto ack = publisher.read_json();
  ASSERT_TRUE(ack);
  ASSERT_EQ((*ack)["type"], "puback") << ack->dump();
  EXPECT_GT((*ack)["message_id"].get<std::uint64_t>(), first["message_id"].get<std::uint64_t>());
  const auto got = ws_messages(sub, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], std::make_pair((*ack)["message_id"].get<std::uint64_t>(), std::string("held")));
  EXPECT_EQ(a_.link->stats().history_store_timeouts, 0u);
}

// Nodes on one I/O thread each that may have four stores awaiting
// JetStream's acknowledgement.
class ClusterHistoryBacklogTest : public ClusterHistoryTest {
 protected:
  void configure(broker::BrokerConfig& bc) override { bc.io_threads = 1; }
  void configure(ClusterConfig& c) override {
    c.max_pending_stores = 4;
    c.store_timeout = 60s;
  }
};

// A publisher that finds --cluster-max-pending-stores stores in flight (the
// nats-server stopped, so none is acknowledged) is held, not its I/O thread:
// another client of that thread is answered meanwhile, and a WebSocket QoS 1
// publish, which cannot be held, is refused at once with the limit's name.
// Once the server runs again every held PUBLISH is taken, none refused, and
// a subscriber on the other node gets them all in order. (Before, the thread
// waited in libnats for room: no PONG until --cluster-store-timeout.)
TEST_F(ClusterHistoryBacklogTest, APublisherPastTheStoresInFlightIsHeldAndNotItsThread) {
  WsClient sub(b_.broker->ws_port());
  ASSERT_EQ(ws_subscribe(sub, {{"topic", "room4"}})["type"], "subscribed");
  RespClient publisher(a_.broker->port()), other(a_.broker->port());
  WsClient ws_publisher(a_.broker->ws_port());
  const auto first = publisher.call({"PUBLISH", "room4", "m0"});
  ASSERT_TRUE(first && first->type == ':');
  ASSERT_TRUE(testing::eventually([&] { return a_.link->stats().history_pending == 0; }));

  const pid_t nats = server_->child().pid();
  ASSERT_EQ(::kill(nats, SIGSTOP), 0);
  ASSERT_TRUE(testing::eventually([&] { return testing::all_threads_stopped(nats); }));
  constexpr int kMessages = 10;
  for (int i = 1; i <= kMessages; ++i) ASSERT_TRUE(publisher.send({"PUBLISH", "room4", "m" + std::to_string(i)}));
  for (int i = 1; i <= 4; ++i) {  // taken: a QoS 0 PUBLISH is answered once handed over
    const auto r = publisher.next(deadline_in(20s));
    ASSERT_TRUE(r) << "no reply to PUBLISH " << i;
    ASSERT_EQ(r->type, ':') << r->str;
  }
  ASSERT_TRUE(testing::eventually([&] { return a_.link->stats().history_stalls > 0; }));
  const auto pong = other.call({"PING"}, 20s);
  const nlohmann::json refused = publish_qos1(ws_publisher, "room4", "ws");
  ::kill(nats, SIGCONT);
  ASSERT_TRUE(pong) << "no PONG while a publisher of the thread was held";
  EXPECT_EQ(pong->str, "PONG");
  EXPECT_EQ(refused["type"], "error") << refused.dump();
  EXPECT_NE(refused.value("message", "").find("--cluster-max-pending-stores"), std::string::npos) << refused.dump();

  for (int i = 5; i <= kMessages; ++i) {
    const auto r = publisher.next(deadline_in(30s));
    ASSERT_TRUE(r) << "no reply to PUBLISH " << i;
    EXPECT_EQ(r->type, ':') << "PUBLISH " << i << ": " << r->str;
  }
  std::vector<std::string> payloads;
  for (const auto& [offset, payload] : ws_messages(sub, kMessages + 1)) payloads.push_back(payload);
  std::vector<std::string> expected;
  for (int i = 0; i <= kMessages; ++i) expected.push_back("m" + std::to_string(i));
  EXPECT_EQ(payloads, expected);
  EXPECT_EQ(a_.link->stats().history_store_failed, 0u);
  EXPECT_TRUE(testing::eventually([&] { return a_.link->stats().history_pending == 0; }));
}

// Nodes whose stores give up after a second.
class ClusterHistoryShortStoreTest : public ClusterHistoryTest {
 protected:
  void configure(ClusterConfig& c) override { c.store_timeout = 1s; }
};

// A QoS 1 publish whose store JetStream does not confirm within
// --cluster-store-timeout (the nats-server stopped) is answered "not stored"
// and counted as a timeout; the publisher's next publish, once the server
// runs again, is stored and acknowledged.
TEST_F(ClusterHistoryShortStoreTest, AQos1PublishWhoseStoreIsNotConfirmedInTimeIsAnsweredNotStored) {
  WsClient publisher(a_.broker->ws_port());
  const auto publish = [&publisher](const std::string& payload) { return publish_qos1(publisher, "room5", payload); };
  ASSERT_EQ(publish("before")["type"], "puback");
  const pid_t nats = server_->child().pid();
  ASSERT_EQ(::kill(nats, SIGSTOP), 0);
  // SIGSTOP stops each thread when it next enters the kernel: a store sent
  // before the last one stops can still be confirmed (one CI run under ASan).
  ASSERT_TRUE(testing::eventually([&] { return testing::all_threads_stopped(nats); }));
  const nlohmann::json late = publish("late");
  ::kill(nats, SIGCONT);
  EXPECT_EQ(late["type"], "error") << late.dump();
  EXPECT_NE(late.value("message", "").find("not stored"), std::string::npos) << late.dump();
  EXPECT_EQ(a_.link->stats().history_store_timeouts, 1u);
  EXPECT_EQ(publish("after")["type"], "puback");
}

// Stores whose acks never come (the nats-server stopped) are given up once
// no ack at all has come for two store timeouts: their room is free again
// and they are counted as not confirmed in time, while the server is still
// stopped; once it runs again, stores are acknowledged as before.
TEST_F(ClusterHistoryShortStoreTest, StoresWhoseAcksNeverComeAreGivenUpAndTheirRoomFreed) {
  WsClient on_a(a_.broker->ws_port()), on_b(b_.broker->ws_port());
  ASSERT_EQ(ws_subscribe(on_a, {{"topic", "room6"}})["type"], "subscribed");
  ASSERT_EQ(ws_subscribe(on_b, {{"topic", "room6"}})["type"], "subscribed");
  RespClient publisher(a_.broker->port());
  const auto first = publisher.call({"PUBLISH", "room6", "m0"});
  ASSERT_TRUE(first && first->type == ':');
  ASSERT_TRUE(testing::eventually([&] { return a_.link->stats().history_pending == 0; }));
  const pid_t nats = server_->child().pid();
  ASSERT_EQ(::kill(nats, SIGSTOP), 0);
  ASSERT_TRUE(testing::eventually([&] { return testing::all_threads_stopped(nats); }));
  for (int i = 1; i <= 3; ++i) {  // answered once handed over (QoS 0)
    const auto r = publisher.call({"PUBLISH", "room6", "m" + std::to_string(i)});
    ASSERT_TRUE(r && r->type == ':');
  }
  EXPECT_EQ(a_.link->stats().history_pending, 3u);
  const bool freed = testing::eventually([&] { return a_.link->stats().history_pending == 0; });
  const ClusterStats stopped = a_.link->stats();
  ::kill(nats, SIGCONT);
  EXPECT_TRUE(freed) << "pending " << stopped.history_pending;
  EXPECT_EQ(stopped.history_store_timeouts, 3u);
  EXPECT_EQ(stopped.history_stored, 1u);
  const auto after = publisher.call({"PUBLISH", "room6", "after"});
  ASSERT_TRUE(after && after->type == ':');
  EXPECT_TRUE(testing::eventually([&] { return a_.link->stats().history_stored >= 2; }));
  // Both nodes' copies, whose ordered consumers libnats made anew while the
  // server was stopped, deliver it (m1-m3 were stored too, late: their acks
  // were dropped, not their bytes). Until they do, a stop could meet
  // libnats still remaking them (cluster_history.cpp, unsubscribe_ordered).
  for (WsClient* c : {&on_a, &on_b}) {
    std::vector<std::string> payloads;
    while (payloads.empty() || payloads.back() != "after") {
      const auto got = ws_messages(*c, 1);
      if (got.empty()) break;
      payloads.push_back(got[0].second);
    }
    EXPECT_EQ(payloads.front(), "m0");
    EXPECT_EQ(payloads.back(), "after");
  }
}

// A pipelining publisher's QoS 1 publishes are answered in the order it sent
// them, stored ones (room*) and the others alike, though stores complete on
// another thread; more in flight than a session lets wait (256) pause its
// input rather than lose or reorder anything; every node delivers the stored
// ones in that order with the offsets their pubacks named. (Eight channels,
// each under the history's 100 per channel, so none is pruned before node B
// has read it.)
TEST_F(ClusterHistoryTest, PipelinedQos1PublishesAreAnsweredInTheirOrderAndDeliveredInIt) {
  WsClient sub(b_.broker->ws_port());
  ASSERT_EQ(ws_subscribe(sub, {{"topic", "room4*"}})["type"], "subscribed");
  WsClient publisher(a_.broker->ws_port());
  constexpr int kPublishes = 700;
  std::string burst;
  for (int i = 0; i < kPublishes; ++i) {
    const bool stored = i % 7 != 3;  // every 7th on a channel without history: answered at once
    const nlohmann::json cmd{{"type", "publish"},
                             {"topic", stored ? "room4" + std::to_string(i % 8) : "lobby"},
                             {"payload", "m" + std::to_string(i)},
                             {"qos", 1},
                             {"message_id", "c" + std::to_string(i)}};
    burst += broker::ws::test::client_frame(cmd.dump());
  }
  ASSERT_TRUE(publisher.send_raw(burst));
  std::vector<std::pair<std::uint64_t, std::string>> acked;  // the stored ones' (offset, payload)
  for (int i = 0; i < kPublishes; ++i) {
    const auto a = publisher.read_json();
    ASSERT_TRUE(a) << "answer " << i << " missing";
    ASSERT_EQ((*a)["type"], "puback") << a->dump();
    ASSERT_EQ((*a)["client_message_id"], "c" + std::to_string(i)) << "answers out of order at " << i;
    if ((*a)["topic"] != "lobby") acked.emplace_back((*a)["message_id"].get<std::uint64_t>(), "m" + std::to_string(i));
  }
  for (std::size_t i = 1; i < acked.size(); ++i) ASSERT_GT(acked[i].first, acked[i - 1].first) << i;
  EXPECT_EQ(ws_messages(sub, acked.size()), acked);
}

// --- Durable QoS 1 sessions across nodes (docs/cluster.md, "Durable sessions") ----------------------

constexpr std::string_view kTokenSecret = "cluster-durable-sessions-secret-0123456789";

// History nodes that take tokens signed with kTokenSecret and redeliver
// nothing by themselves (only a session's take-over resends).
// A WebSocket connection to `port` authenticated as `subject`, which may
// subscribe and publish to room*.
std::unique_ptr<WsClient> connect_as(std::uint16_t port, const std::string& subject) {
  broker::Grant g;
  g.subject = subject;
  g.expiry = std::chrono::system_clock::now() + std::chrono::hours(1);
  g.subscribe = {"room*"};
  g.publish = {"room*"};
  const auto tok = broker::mint_token(g, kTokenSecret);
  EXPECT_TRUE(tok.has_value());
  auto c = std::make_unique<WsClient>(port);
  EXPECT_TRUE(c->send_json({{"type", "auth"}, {"token", tok ? *tok : std::string()}}));
  const auto j = c->read_json();
  EXPECT_TRUE(j && (*j)["type"] == "authenticated") << (j ? j->dump() : "no reply");
  return c;
}

// Publishes `payload` on `topic` at QoS 1; true once it is acknowledged (stored).
bool publish_acked(WsClient& c, std::string_view topic, const std::string& payload) {
  return publish_qos1(c, topic, payload)["type"] == "puback";
}

class ClusterSessionTest : public ClusterHistoryTest {
 protected:
  void configure(broker::BrokerConfig& bc) override {
    bc.token_secret = std::string(kTokenSecret);
    bc.ack_timeout = std::chrono::hours(1);
  }

  // Node A goes, while its connections are still open.
  void stop_node_a() {
    a_.link->stop();
    a_.broker->stop();
    a_.broker->wait();
  }

  // While the durable subscriber is away: m<first>..m<last> published on B,
  // each acknowledged, then "attacker" (returned) asks B for `client_id`
  // and is refused, though B has never seen the session.
  std::unique_ptr<WsClient> miss_on_b_then_try_as_another(int first, int last, const std::string& client_id) {
    auto pub = connect_as(b_.broker->ws_port(), "publisher");
    for (int i = first; i <= last; ++i) EXPECT_TRUE(publish_acked(*pub, "room1", "m" + std::to_string(i)));
    auto attacker = connect_as(b_.broker->ws_port(), "attacker");
    const nlohmann::json refused = ws_subscribe(*attacker, {{"topic", "room1"}, {"qos", 1}, {"client_id", client_id}});
    EXPECT_EQ(refused["type"], "error") << refused.dump();
    EXPECT_NE(refused.value("message", "").find("belongs to another identity"), std::string::npos) << refused.dump();
    return attacker;
  }
};

// The promise: a durable subscriber on node A acks some messages, A
// goes, and the subscriber resumes on B with the same client_id and identity:
// it gets every message it had not acked and every one published while it
// was away, then the live ones. B has never seen the session, yet another
// identity asking B for that client_id is refused.
TEST_F(ClusterSessionTest, ADurableSubscriberResumesOnAnotherNodeAfterItsNodeIsGone) {
  constexpr int kBefore = 10, kAcked = 4, kMissed = 5;
  {
    auto owner = connect_as(a_.broker->ws_port(), "owner");
    const nlohmann::json sub = ws_subscribe(*owner, {{"topic", "room1"}, {"qos", 1}, {"client_id", "dur-1"}});
    ASSERT_EQ(sub["type"], "subscribed") << sub.dump();
    auto pub = connect_as(a_.broker->ws_port(), "publisher");
    for (int i = 1; i <= kBefore; ++i) ASSERT_TRUE(publish_acked(*pub, "room1", "m" + std::to_string(i)));
    const auto got = ws_messages(*owner, kBefore);
    ASSERT_EQ(got.size(), static_cast<std::size_t>(kBefore));
    for (std::size_t i = 0; i < std::size_t{kAcked}; ++i) {
      ASSERT_TRUE(owner->send_json({{"type", "ack"}, {"topic", "room1"}, {"message_id", got[i].first}}));
    }
    // The first subscribe's floor and at least the first ack's are written
    // to JetStream (acks 2..4 may fall in the same save interval).
    ASSERT_TRUE(testing::eventually([&] { return a_.link->stats().session_puts >= 2; }))
        << a_.link->stats().session_puts;
    stop_node_a();
  }
  auto attacker = miss_on_b_then_try_as_another(kBefore + 1, kBefore + kMissed, "dur-1");
  ASSERT_FALSE(HasFailure());

  auto owner = connect_as(b_.broker->ws_port(), "owner");
  const nlohmann::json sub = ws_subscribe(*owner, {{"topic", "room1"}, {"qos", 1}, {"client_id", "dur-1"}});
  ASSERT_EQ(sub["type"], "subscribed") << sub.dump();
  // From just after an acked message (m1 at least was acked and saved; a
  // later save may have been skipped: those are resent) to the last missed.
  std::vector<std::string> resumed;
  while (resumed.empty() || resumed.back() != "m" + std::to_string(kBefore + kMissed)) {
    const auto m = ws_messages(*owner, 1);
    ASSERT_EQ(m.size(), 1u) << "after " << ::testing::PrintToString(resumed);
    resumed.push_back(m[0].second);
  }
  ASSERT_GE(resumed.size(), static_cast<std::size_t>(kBefore - kAcked + kMissed));
  ASSERT_LE(resumed.size(), static_cast<std::size_t>(kBefore - 1 + kMissed)) << "m1's ack was saved";
  const int first = kBefore + kMissed - static_cast<int>(resumed.size()) + 1;
  for (std::size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_EQ(resumed[i], "m" + std::to_string(first + static_cast<int>(i))) << ::testing::PrintToString(resumed);
  }
  // Then live, with no gap at the seam.
  auto pub_b = connect_as(b_.broker->ws_port(), "publisher");
  ASSERT_TRUE(publish_acked(*pub_b, "room1", "live"));
  const auto live = ws_messages(*owner, 1);
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].second, "live");

  // Refused on B again, now that B holds the session too.
  const nlohmann::json again = ws_subscribe(*attacker, {{"topic", "room1"}, {"qos", 1}, {"client_id", "dur-1"}});
  EXPECT_NE(again.value("message", "").find("belongs to another identity"), std::string::npos) << again.dump();
}

// One connection holds a durable session across the cluster: the same
// client_id and identity attached on node B takes the session from the
// connection on node A, which is told and closed rather than left receiving
// the session's deliveries beside the new one; only B's connection gets what
// is published next, and attaching on A again takes it back. (On one node a
// second connection is refused instead: WsQos1Test.AClientIdIsHeldByOneConnectionAtATime.)
TEST_F(ClusterSessionTest, ADurableSessionAttachedOnAnotherNodeIsTakenFromTheConnectionThatHeldIt) {
  const nlohmann::json durable = {{"topic", "room1"}, {"qos", 1}, {"client_id", "dur-2"}};
  const auto taken_from = [](WsClient& c) {
    const auto told = c.read_json();
    ASSERT_TRUE(told) << "the connection that held the session was not told";
    EXPECT_EQ((*told)["type"], "error") << told->dump();
    EXPECT_NE(told->value("message", "").find("was taken by a connection on another node"), std::string::npos)
        << told->dump();
    EXPECT_EQ(c.read_close(), std::optional<std::uint16_t>(1008));
  };
  auto on_a = connect_as(a_.broker->ws_port(), "owner");
  ASSERT_EQ(ws_subscribe(*on_a, durable)["type"], "subscribed");
  auto on_b = connect_as(b_.broker->ws_port(), "owner");
  ASSERT_EQ(ws_subscribe(*on_b, durable)["type"], "subscribed");
  taken_from(*on_a);

  auto pub = connect_as(a_.broker->ws_port(), "publisher");
  ASSERT_TRUE(publish_acked(*pub, "room1", "after"));
  const auto got = ws_messages(*on_b, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].second, "after");

  auto back_on_a = connect_as(a_.broker->ws_port(), "owner");
  ASSERT_EQ(ws_subscribe(*back_on_a, durable)["type"], "subscribed");
  taken_from(*on_b);
  ASSERT_TRUE(publish_acked(*pub, "room1", "back"));
  std::vector<std::string> payloads;
  for (const auto& [offset, payload] : ws_messages(*back_on_a, 2)) payloads.push_back(payload);
  // "after" again first, marked dup: B's connection never acked it.
  EXPECT_EQ(payloads, (std::vector<std::string>{"after", "back"}));
}

// --session-ttl 1 s: the bucket keeps a key 1.5 s after its last write.
class ClusterSessionTtlTest : public ClusterSessionTest {
 protected:
  void configure(broker::BrokerConfig& bc) override {
    ClusterSessionTest::configure(bc);
    bc.session_ttl = std::chrono::seconds(1);
  }
};

// JetStream expires a session's keys only once no node holds it: one held
// for twice the bucket's TTL without an ack is still there when its node
// goes (its node wrote it again meanwhile), and resumes on another node;
// once its last connection is gone for longer, the client id is anyone's.
TEST_F(ClusterSessionTtlTest, AHeldSessionOutlivesTheBucketsTtlAndALeftOneExpires) {
  constexpr int kBefore = 3, kMissed = 2;
  {
    auto owner = connect_as(a_.broker->ws_port(), "owner");
    ASSERT_EQ(ws_subscribe(*owner, {{"topic", "room1"}, {"qos", 1}, {"client_id", "dur-2"}})["type"], "subscribed");
    auto pub = connect_as(a_.broker->ws_port(), "publisher");
    for (int i = 1; i <= kBefore; ++i) ASSERT_TRUE(publish_acked(*pub, "room1", "m" + std::to_string(i)));
    const auto got = ws_messages(*owner, kBefore);
    ASSERT_EQ(got.size(), static_cast<std::size_t>(kBefore));
    ASSERT_TRUE(owner->send_json({{"type", "ack"}, {"topic", "room1"}, {"message_id", got[0].first}}));
    ASSERT_TRUE(testing::eventually([&] { return a_.link->stats().session_puts >= 2; }));
    // Held, idle, for twice the bucket's TTL: only A's refreshes keep it.
    std::this_thread::sleep_for(3s);
    stop_node_a();
  }
  auto attacker = miss_on_b_then_try_as_another(kBefore + 1, kBefore + kMissed, "dur-2");
  ASSERT_FALSE(HasFailure());
  {
    auto owner = connect_as(b_.broker->ws_port(), "owner");
    ASSERT_EQ(ws_subscribe(*owner, {{"topic", "room1"}, {"qos", 1}, {"client_id", "dur-2"}})["type"], "subscribed");
    std::vector<std::string> payloads;
    for (const auto& [offset, payload] : ws_messages(*owner, kBefore - 1 + kMissed)) payloads.push_back(payload);
    EXPECT_EQ(payloads, (std::vector<std::string>{"m2", "m3", "m4", "m5"})) << "resumed after m1, the one acked";
  }
  // The owner has gone from B too: after the TTL (and the half) the client id
  // starts afresh, anyone's.
  ASSERT_TRUE(testing::eventually(
      [&] {
        return ws_subscribe(*attacker, {{"topic", "room1"}, {"qos", 1}, {"client_id", "dur-2"}})["type"] ==
               "subscribed";
      },
      20s, 200ms));
}

// --history in a cluster whose NATS has no JetStream cannot keep its promise:
// the node does not start, and says why.
TEST_F(ClusterTest, HistoryWithoutJetStreamStopsTheStartSayingWhy) {
  auto link = NatsCluster::connect(cluster_config(server_->url()), log_.fn());
  ASSERT_TRUE(link) << link.error();
  broker::BrokerConfig bc = testing::loopback_broker();
  bc.history = {"room*=100"};
  auto b = broker::Broker::start(bc, link->get());
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message().find("JetStream"), std::string::npos) << b.error().message();
  (*link)->stop();
}

TEST(ClusterOptionsTest, APrefixThatIsNotANatsSubjectIsRefusedSayingWhy) {
  testing::LogSink log;
  for (const char* prefix : {"", "a.*", "a b", ".a", "a..b", "a>"}) {
    ClusterConfig c = cluster_config("nats://127.0.0.1:1");
    c.subject_prefix = prefix;
    auto link = NatsCluster::connect(c, log.fn());
    ASSERT_FALSE(link) << prefix;
    EXPECT_NE(link.error().find("is not a NATS subject"), std::string::npos) << link.error();
  }
}

}  // namespace
}  // namespace ringcast::relay
