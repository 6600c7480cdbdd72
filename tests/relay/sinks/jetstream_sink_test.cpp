// JetStreamSink (src/relay/sinks/jetstream_sink.hpp) against a nats-server
// with JetStream: the shared sink suite (sink_contract.hpp), then what only
// the JetStream sink does: a position put twice under one source is stored
// once, and a topic that is not a subject is counted failed.
#include "relay/sinks/jetstream_sink.hpp"

#include <nats/nats.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nats_listener.hpp"
#include "relay/jetstream_publisher.hpp"
#include "ringcast/relay/continuity.hpp"

namespace ringcast::relay::testing {
namespace {

using namespace std::chrono_literals;

// A nats-server with JetStream, a stream SINKS on the contract's subjects and
// the publisher every JetStreamSink of the relay shares.
class JetStreamPeer {
 public:
  void start() {
    ASSERT_NO_FATAL_FAILURE(nats_.start(store_.path()));
    JetStreamConfig config;
    config.stream = "SINKS";
    auto p = JetStreamPublisher::create(nats_.nats_->connection(), config, {"orders", "t.>"},
                                        [](LogLevel, std::string_view) {});
    ASSERT_TRUE(p) << p.error();
    publisher_ = std::move(*p);
  }
  std::unique_ptr<Sink> make(const RingRoute& route, const std::atomic<bool>& stop) {
    return std::make_unique<JetStreamSink>(route, *publisher_, stop);
  }
  std::vector<Received> receive(std::size_t n) { return nats_.receive(n); }
  static std::uint64_t delivered(const SinkCounters& c) { return c.nats_published; }

  // Messages the stream holds, once every publish has its ack.
  std::int64_t stored() {
    const bool settled = eventually([&] {
      NatsStats s;
      publisher_->stats(s);
      return s.js_pending == 0;
    });
    EXPECT_TRUE(settled);
    jsCtx* js = nullptr;
    jsStreamInfo* si = nullptr;
    std::int64_t n = -1;
    if (natsConnection_JetStream(&js, nats_.conn_, nullptr) == NATS_OK &&
        js_GetStreamInfo(&si, js, "SINKS", nullptr, nullptr) == NATS_OK) {
      n = static_cast<std::int64_t>(si->State.Msgs);
      jsStreamInfo_Destroy(si);
    }
    jsCtx_Destroy(js);  // null-safe
    return n;
  }

  TempDir store_;
  NatsListener nats_;
  std::unique_ptr<JetStreamPublisher> publisher_;  // after nats_: destroyed before the connection
};

INSTANTIATE_TYPED_TEST_SUITE_P(JetStream, SinkContractTest, JetStreamPeer);

class JetStreamSinkTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(peer_.start()); }
  std::unique_ptr<Sink> make(bool topics) {
    return peer_.make({"/unused/orders.ring", topics ? "t." : "orders", topics}, stop_);
  }

  JetStreamPeer peer_;
  std::atomic<bool> stop_{false};
};

// Nats-Msg-Id is "<source>/<seq>": a relay that puts a position again (a
// restart with --from oldest) has it stored once; another source is another
// message. Positions travel as headers (Ringcast-From when it differs).
TEST_F(JetStreamSinkTest, APositionPutTwiceUnderOneSourceIsStoredOnce) {
  auto sink = make(false);
  Messages m;
  sink->open("host:/a.ring:1:2");
  Staged first = m.add("orders", "x", 7);
  first.from = 5;
  sink->put(first);
  sink->put(m.add("orders", "x again", 7));
  sink->open("host:/b.ring:1:3");
  sink->put(m.add("orders", "y", 7));
  EXPECT_EQ(sink->counters().nats_published, 3U);
  EXPECT_EQ(peer_.stored(), 2);
  const auto got = peer_.nats_.next(1);
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].header("Nats-Msg-Id"), "host:/a.ring:1:2/7");
  EXPECT_EQ(got[0].header(kSeqHeader), "7");
  EXPECT_EQ(got[0].header(kFromHeader), "5");
}

// A topic that is not a valid subject is counted failed and never sent; the
// next message goes on.
TEST_F(JetStreamSinkTest, ATopicThatIsNotASubjectIsCountedFailedAndNotSent) {
  auto sink = make(true);
  Messages m;
  sink->open("source");
  sink->put(m.add("t.bad topic", "x", 0));
  sink->put(m.add("t.good", "y", 1));
  EXPECT_EQ(sink->counters().nats_failed, 1U);
  EXPECT_EQ(sink->counters().nats_published, 1U);
  EXPECT_EQ(peer_.stored(), 1);
}

}  // namespace
}  // namespace ringcast::relay::testing
