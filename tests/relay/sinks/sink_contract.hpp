// The behaviour every sink (src/relay/sinks/sink.hpp) shares, as one typed
// suite that each sink's test file instantiates with its peer (as
// tests/broker/history_store_test.cpp runs one suite over both stores):
//
//   struct Peer {
//     // Starts the sink's far side (a broker, a nats-server), listening on
//     // "orders" and on every channel under the topic prefix "t.".
//     void start();                                   // ASSERTs
//     std::unique_ptr<Sink> make(const RingRoute&, const std::atomic<bool>& stop);
//     // The next `n` messages the far side received, in arrival order (fewer
//     // if they do not come within 10 s).
//     std::vector<Received> receive(std::size_t n);
//     // The messages the sink's counters say reached the far side.
//     static std::uint64_t delivered(const SinkCounters& c);
//   };
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "relay/sinks/sink.hpp"

namespace ringcast::relay::testing {

struct Received {
  std::string channel;
  std::string body;
  bool operator==(const Received&) const = default;
};
inline std::ostream& operator<<(std::ostream& os, const Received& r) { return os << r.channel << ": " << r.body; }

// Messages as the reader stages them: the strings the views point to live here.
class Messages {
 public:
  // A message on `channel` at ring position `seq` (one slot: from = seq).
  const Staged& add(std::string channel, std::string body, std::uint64_t seq) {
    // Reserved: the views of earlier messages stay valid.
    if (channels_.empty()) {
      channels_.reserve(kMax);
      bodies_.reserve(kMax);
      staged_.reserve(kMax);
    }
    EXPECT_LT(staged_.size(), kMax);
    channels_.push_back(std::move(channel));
    bodies_.push_back(std::move(body));
    staged_.push_back({channels_.back(), channels_.back().c_str(), bodies_.back(), seq, seq});
    return staged_.back();
  }
  [[nodiscard]] std::vector<Received> expected() const {
    std::vector<Received> out;
    for (std::size_t i = 0; i < staged_.size(); ++i) out.push_back({channels_[i], bodies_[i]});
    return out;
  }

 private:
  static constexpr std::size_t kMax = 4096;
  std::vector<std::string> channels_, bodies_;
  std::vector<Staged> staged_;
};

template <typename Peer>
class SinkContractTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(peer_.start()); }
  std::unique_ptr<Sink> open(const RingRoute& route) {
    auto sink = peer_.make(route, stop_);
    if (sink) sink->open("test/source");
    return sink;
  }
  static RingRoute fixed() { return {"/unused/orders.ring", "orders", false}; }
  static RingRoute topics() { return {"/unused/topics.ring", "t.", true}; }

  Peer peer_;
  std::atomic<bool> stop_{false};
};

TYPED_TEST_SUITE_P(SinkContractTest);

// Contract 2 and 3: what is put reaches the far side, in ring order, by the
// flush after it; counted as delivered, nothing failed.
TYPED_TEST_P(SinkContractTest, EveryMessagePutArrivesInRingOrderByTheNextFlush) {
  auto sink = this->open(this->fixed());
  ASSERT_TRUE(sink);
  Messages m;
  for (std::uint64_t i = 0; i < 300; ++i) sink->put(m.add("orders", "message-" + std::to_string(i), i));
  sink->flush();
  EXPECT_EQ(this->peer_.receive(300), m.expected());
  EXPECT_EQ(TypeParam::delivered(sink->counters()), 300U);
  EXPECT_EQ(sink->counters().nats_failed, 0U);
}

// Topic mode: each message on its own channel, the route's prefix + topic.
TYPED_TEST_P(SinkContractTest, ATopicRouteDeliversEachMessageOnItsOwnChannel) {
  auto sink = this->open(this->topics());
  ASSERT_TRUE(sink);
  Messages m;
  for (std::uint64_t i = 0; i < 20; ++i) sink->put(m.add(i % 2 == 0 ? "t.even" : "t.odd", std::to_string(i), i));
  sink->flush();
  EXPECT_EQ(this->peer_.receive(20), m.expected());
  EXPECT_EQ(TypeParam::delivered(sink->counters()), 20U);
}

// A flush with nothing put sends nothing: the first message the far side
// sees is the one put afterwards.
TYPED_TEST_P(SinkContractTest, AFlushWithNothingPutSendsNothing) {
  auto sink = this->open(this->fixed());
  ASSERT_TRUE(sink);
  sink->flush();
  sink->flush();
  EXPECT_EQ(TypeParam::delivered(sink->counters()), 0U);
  Messages m;
  sink->put(m.add("orders", "first", 0));
  sink->flush();
  EXPECT_EQ(this->peer_.receive(1), m.expected());
  EXPECT_EQ(TypeParam::delivered(sink->counters()), 1U);
}

// A lap sends nothing for what it skipped, and what comes after still arrives.
TYPED_TEST_P(SinkContractTest, AfterALapLaterMessagesStillArrive) {
  auto sink = this->open(this->fixed());
  ASSERT_TRUE(sink);
  Messages m;
  sink->put(m.add("orders", "before", 0));
  sink->lapped(5);
  sink->put(m.add("orders", "after", 6));
  sink->flush();
  EXPECT_EQ(this->peer_.receive(2), m.expected());
  EXPECT_EQ(TypeParam::delivered(sink->counters()), 2U);
}

REGISTER_TYPED_TEST_SUITE_P(SinkContractTest, EveryMessagePutArrivesInRingOrderByTheNextFlush,
                            ATopicRouteDeliversEachMessageOnItsOwnChannel, AFlushWithNothingPutSendsNothing,
                            AfterALapLaterMessagesStillArrive);

}  // namespace ringcast::relay::testing
