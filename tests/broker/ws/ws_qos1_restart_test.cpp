// QoS 1 with persistence across a crash (docs/guarantees.md, "Durable
// subscribers"): the ringcast-broker executable with --data-dir and --fsync
// always is killed with SIGKILL in the middle of a stream of QoS 1
// publishes, then started again on the same directory. Every message the
// publisher got a puback for must reach every durable subscriber at least
// once, before the crash or after the restart.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "temp_dir.hpp"
#include "ws_client.hpp"

namespace ringcast::broker::ws {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::WsClient;

// ringcast-broker on port 0 with a WebSocket port 0; both read from its first
// two lines.
struct BrokerChild {
  ringcast::test::ChildProcess child;
  std::uint16_t ws_port = 0;
};

BrokerChild start(const std::string& dir) {
  BrokerChild b;
  b.child = ringcast::test::ChildProcess::spawn({BROKER_EXE, "--port", "0", "--ws-port", "0", "--io-threads", "2",
                                                 "--history", "*=100000", "--data-dir", dir, "--fsync", "always",
                                                 "--ack-timeout", "200ms"});
  for (int line = 0; line < 2; ++line) {
    const auto l = b.child.read_line();
    if (!l) break;
    const auto at = l->find("ws://");
    if (at == std::string::npos) continue;
    const auto colon = l->find(':', at + 5);
    b.ws_port = static_cast<std::uint16_t>(std::stoi(l->substr(colon + 1)));
  }
  EXPECT_NE(b.ws_port, 0) << "no WebSocket port line";
  return b;
}

// Every message id `c` receives until its connection ends or a probe's error
// comes back (with `probe`: everything queued for it by then).
void collect(WsClient& c, std::set<std::uint64_t>& ids, bool probe) {
  if (probe) (void)c.send_json({{"type", "ack"}, {"topic", "probe"}, {"message_id", 424242}});
  for (;;) {
    const auto j = c.read_json();
    if (!j || (*j)["type"] == "error") return;
    if ((*j)["type"] == "message" && (*j)["topic"] == "t") ids.insert((*j)["message_id"].get<std::uint64_t>());
  }
}

json subscribe_durable(WsClient& c, std::string_view client_id) {
  EXPECT_TRUE(c.send_json({{"type", "subscribe"}, {"topic", "t"}, {"qos", 1}, {"client_id", client_id}}));
  const auto j = c.read_json();
  return j ? *j : json();
}

TEST(WsQos1RestartTest, EveryPubackedMessageReachesEveryDurableSubscriberAfterKillNine) {
  ringcast::test::TempDir dir;
  const std::string data = dir.file("data");
  std::set<std::uint64_t> pubacked, got_acker, got_idle, idle_before;
  {
    BrokerChild b = start(data);
    ASSERT_NE(b.ws_port, 0);
    WsClient acker(b.ws_port), idle(b.ws_port), pub(b.ws_port);
    EXPECT_EQ(subscribe_durable(acker, "acker")["type"], "subscribed");
    EXPECT_EQ(subscribe_durable(idle, "idle")["type"], "subscribed");  // never acks
    // In step: publish, puback, the acker reads and acks.
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(pub.send_json({{"type", "publish"}, {"topic", "t"}, {"payload", "m"}, {"qos", 1}}));
      const auto ack = pub.read_json();
      ASSERT_TRUE(ack && (*ack)["type"] == "puback");
      pubacked.insert((*ack)["message_id"].get<std::uint64_t>());
      const auto m = acker.read_json();
      ASSERT_TRUE(m.has_value());
      got_acker.insert((*m)["message_id"].get<std::uint64_t>());
      ASSERT_TRUE(acker.send_json({{"type", "ack"}, {"topic", "t"}, {"message_id", (*m)["message_id"]}}));
    }
    // Then a burst, killed part way: whatever pubacks came before the crash count.
    std::string burst;
    for (int i = 0; i < 500; ++i) {
      burst += test::client_frame(json{{"type", "publish"}, {"topic", "t"}, {"payload", "burst"}, {"qos", 1}}.dump());
    }
    ASSERT_TRUE(pub.send_raw(burst));
    for (int i = 0; i < 50; ++i) {
      const auto ack = pub.read_json();
      ASSERT_TRUE(ack && (*ack)["type"] == "puback");
      pubacked.insert((*ack)["message_id"].get<std::uint64_t>());
    }
    (void)b.child.stop(SIGKILL);
    collect(pub, pubacked, false);  // pubacks already on their way
    pubacked.erase(0);
    collect(acker, got_acker, false);
    collect(idle, idle_before, false);  // it never acks: all of it comes again below
  }
  ASSERT_GE(pubacked.size(), 150u);
  BrokerChild b = start(data);
  ASSERT_NE(b.ws_port, 0);
  WsClient acker(b.ws_port), idle(b.ws_port);
  EXPECT_EQ(subscribe_durable(acker, "acker")["type"], "subscribed");
  EXPECT_EQ(subscribe_durable(idle, "idle")["type"], "subscribed");
  collect(acker, got_acker, true);
  collect(idle, got_idle, true);
  std::printf("puback'ed %zu; the acker got %zu in all, the idle subscriber %zu before the crash and %zu after\n",
              pubacked.size(), got_acker.size(), idle_before.size(), got_idle.size());
  for (const std::uint64_t id : pubacked) {
    EXPECT_TRUE(got_acker.count(id) == 1) << "the acking subscriber never got puback'ed message " << id;
    EXPECT_TRUE(got_idle.count(id) == 1) << "the idle subscriber did not get puback'ed message " << id
                                         << " again after the restart";
  }
  EXPECT_EQ(b.child.stop(SIGTERM), 0);
}

}  // namespace
}  // namespace ringcast::broker::ws
