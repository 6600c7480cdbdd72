// The library API a relay uses: start a broker in-process and publish() to its
// network subscribers from a thread the broker does not own.
#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ringcast/broker/broker.hpp"

namespace ringcast::broker {
namespace {

BrokerConfig loopback_config() {
  BrokerConfig cfg;
  cfg.port = 0;
  cfg.io_threads = 2;
  return cfg;
}

TEST(BrokerEmbedTest, PublishFromForeignThreadReachesNetworkSubscriber) {
  auto started = Broker::start(loopback_config());
  ASSERT_TRUE(started.has_value()) << started.error().message();
  Broker& broker = **started;
  ASSERT_GT(broker.port(), 0);

  const timeval tv{5, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", broker.port(), tv);
  ASSERT_TRUE(c != nullptr && c->err == 0);
  redisSetTimeout(c, tv);
  auto* r = static_cast<redisReply*>(redisCommand(c, "SUBSCRIBE relay"));
  ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_ARRAY);
  freeReplyObject(r);

  constexpr int kMessages = 1000;
  std::size_t delivered = 0;
  std::thread relay([&] {
    // Alternate blocks of 100: one publish() each, then one batch publish().
    std::vector<std::string> payloads;
    std::vector<Message> batch;
    std::vector<std::size_t> receivers;
    for (int i = 0; i < kMessages; i += 100) {
      if (i / 100 % 2 == 0) {
        for (int k = i; k < i + 100; ++k) delivered += broker.publish("relay", std::to_string(k)).receivers;
        continue;
      }
      payloads.clear();
      for (int k = i; k < i + 100; ++k) payloads.push_back(std::to_string(k));
      batch.clear();
      for (const std::string& p : payloads) batch.push_back({"relay", p});
      receivers.assign(batch.size(), 0);
      const PublishResult res = broker.publish(batch, receivers);
      EXPECT_EQ(res.status, PublishStatus::kPublished);
      EXPECT_EQ(res.published, batch.size());
      for (std::size_t n : receivers) delivered += n;
    }
  });
  relay.join();
  EXPECT_EQ(delivered, static_cast<std::size_t>(kMessages));
  for (int i = 0; i < kMessages; ++i) {
    void* v = nullptr;
    ASSERT_EQ(redisGetReply(c, &v), REDIS_OK);
    auto* m = static_cast<redisReply*>(v);
    ASSERT_EQ(m->elements, 3u);
    EXPECT_EQ(std::string(m->element[2]->str, m->element[2]->len), std::to_string(i));
    freeReplyObject(m);
  }
  const BrokerStats st = broker.stats();
  EXPECT_EQ(st.messages_published, static_cast<std::uint64_t>(kMessages));
  EXPECT_EQ(st.connected_clients, 1u);
  EXPECT_EQ(st.channels, 1u);
  redisFree(c);
  broker.stop();
  broker.wait();
  const PublishResult late = broker.publish("relay", "late");
  EXPECT_EQ(late.status, PublishStatus::kStopped) << "publish after stop is a no-op";
  EXPECT_EQ(late.published, 0u);
}

// The broker's sockets are close-on-exec: a process that embeds it and starts
// children does not hand them its listener or its clients.
TEST(BrokerEmbedTest, ListenerAndClientSocketsAreCloseOnExec) {
  auto started = Broker::start(loopback_config());
  ASSERT_TRUE(started.has_value()) << started.error().message();
  Broker& broker = **started;
  const timeval tv{5, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", broker.port(), tv);
  ASSERT_TRUE(c != nullptr && c->err == 0);
  redisSetTimeout(c, tv);
  auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));  // accepted by now
  ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);

  // The broker's descriptors are the sockets whose local port is its port.
  int broker_sockets = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    sockaddr_in local{};
    socklen_t len = sizeof local;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 || local.sin_family != AF_INET) continue;
    if (ntohs(local.sin_port) != broker.port()) continue;
    ++broker_sockets;
    EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0) << "fd " << fd;
  }
  EXPECT_EQ(broker_sockets, 2);  // the listener and the accepted client
  redisFree(c);
}

TEST(BrokerEmbedTest, StartReportsBindFailuresWithErrno) {
  auto first = Broker::start(loopback_config());
  ASSERT_TRUE(first.has_value());
  BrokerConfig same = loopback_config();
  same.port = (*first)->port();
  auto second = Broker::start(same);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code, BrokerError::Code::kBind);
  EXPECT_EQ(second.error().sys_errno, EADDRINUSE);
  EXPECT_NE(second.error().message().find("Address already in use"), std::string::npos);

  BrokerConfig bad = loopback_config();
  bad.bind_address = "not-an-address";
  auto third = Broker::start(bad);
  ASSERT_FALSE(third.has_value());
  EXPECT_EQ(third.error().code, BrokerError::Code::kBadAddress);

  BrokerConfig limits = loopback_config();
  limits.queue_limits.soft_bytes = limits.queue_limits.hard_bytes + 1;
  auto fourth = Broker::start(limits);
  ASSERT_FALSE(fourth.has_value());
  EXPECT_EQ(fourth.error().code, BrokerError::Code::kInvalidConfig);

  BrokerConfig huge = loopback_config();
  huge.max_bulk_len = std::size_t{1} << 30;  // frames are sized in 32 bits; Redis caps strings at 512 MiB
  auto fifth = Broker::start(huge);
  ASSERT_FALSE(fifth.has_value());
  EXPECT_EQ(fifth.error().code, BrokerError::Code::kInvalidConfig);
}

TEST(BrokerEmbedTest, InfoProviderSectionsAndConnectionStatsReachTheEmbedder) {
  auto started = Broker::start(loopback_config());
  ASSERT_TRUE(started.has_value());
  Broker& broker = **started;
  std::atomic<int> calls{0};
  broker.set_info_provider([&calls](std::string_view section) -> std::string {
    calls.fetch_add(1, std::memory_order_relaxed);
    if (section.empty() || section == "embedder") return "# Embedder\r\nanswer:42\r\n";
    return {};
  });
  const timeval tv{5, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", broker.port(), tv);
  ASSERT_TRUE(c != nullptr && c->err == 0);
  redisSetTimeout(c, tv);
  auto* r = static_cast<redisReply*>(redisCommand(c, "INFO EMBEDDER"));
  ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(r->str, r->len), "# Embedder\r\nanswer:42\r\n");
  freeReplyObject(r);
  r = static_cast<redisReply*>(redisCommand(c, "INFO"));
  ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_STRING);
  const std::string all(r->str, r->len);
  EXPECT_NE(all.find("# Stats\r\n"), std::string::npos);
  EXPECT_NE(all.find("\r\n# Embedder\r\nanswer:42\r\n"), std::string::npos);
  freeReplyObject(r);
  r = static_cast<redisReply*>(redisCommand(c, "INFO stats"));
  ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(r->str, r->len).find("# Embedder"), std::string::npos);
  freeReplyObject(r);
  EXPECT_EQ(calls.load(std::memory_order_relaxed), 3);

  r = static_cast<redisReply*>(redisCommand(c, "CLIENT SETNAME probe"));
  freeReplyObject(r);
  r = static_cast<redisReply*>(redisCommand(c, "SUBSCRIBE a b"));
  freeReplyObject(r);
  void* v = nullptr;
  ASSERT_EQ(redisGetReply(c, &v), REDIS_OK);  // the second confirmation
  freeReplyObject(v);
  const std::vector<ConnectionStats> conns = broker.connection_stats();
  ASSERT_EQ(conns.size(), 1u);
  EXPECT_EQ(conns[0].name, "probe");
  EXPECT_EQ(conns[0].subscriptions, 2u);
  EXPECT_EQ(conns[0].policy, OverflowPolicy::kDisconnect);
  EXPECT_GE(conns[0].sent_frames, 5u) << "4 INFO/SETNAME replies + the confirmations";
  EXPECT_EQ(conns[0].peer.rfind("127.0.0.1:", 0), 0u);
  broker.set_info_provider({});
  redisFree(c);
}

TEST(BrokerEmbedTest, DestructorStopsWithClientsConnected) {
  auto started = Broker::start(loopback_config());
  ASSERT_TRUE(started.has_value());
  const timeval tv{5, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", (*started)->port(), tv);
  ASSERT_TRUE(c != nullptr && c->err == 0);
  redisSetTimeout(c, tv);
  auto* r = static_cast<redisReply*>(redisCommand(c, "SUBSCRIBE x"));
  ASSERT_TRUE(r != nullptr);
  freeReplyObject(r);
  started->reset();  // joins the I/O threads with a subscriber still connected
  // The destructor closed the connection: the subscriber reads end-of-file
  // (a broker that left it open would make this read time out instead).
  void* reply = nullptr;
  EXPECT_EQ(redisGetReply(c, &reply), REDIS_ERR);
  EXPECT_EQ(c->err, REDIS_ERR_EOF) << c->errstr;
  redisFree(c);
}

}  // namespace
}  // namespace ringcast::broker
