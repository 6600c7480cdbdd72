// NatsSink (src/relay/sinks/nats_sink.hpp) against a real nats-server: the
// shared sink suite (sink_contract.hpp), then what only core NATS does:
// message numbers (a new run per open, a lap a gap), batches, a topic that is
// not a subject, and the credit window it owns.
#include "relay/sinks/nats_sink.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "nats_listener.hpp"
#include "relay/sinks/credit_window.hpp"
#include "ringcast/relay/continuity.hpp"

namespace ringcast::relay::testing {
namespace {

using namespace std::chrono_literals;

struct NatsPeer {
  void start() { ASSERT_NO_FATAL_FAILURE(nats_.start()); }
  std::unique_ptr<Sink> make(const RingRoute& route, const std::atomic<bool>& stop) {
    return std::make_unique<NatsSink>(route, *nats_.nats_, stop, 1, nullptr);
  }
  std::vector<Received> receive(std::size_t n) { return nats_.receive(n); }
  static std::uint64_t delivered(const SinkCounters& c) { return c.nats_published; }

  NatsListener nats_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Nats, SinkContractTest, NatsPeer);

class NatsSinkTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(nats_.start()); }
  std::unique_ptr<NatsSink> make(bool topics, std::size_t batch = 1, std::unique_ptr<CreditWindow> window = nullptr) {
    const RingRoute route{"/unused/orders.ring", topics ? "t." : "orders", topics};
    return std::make_unique<NatsSink>(route, *nats_.nats_, stop_, batch, std::move(window));
  }
  // "<run hex>.<msg>" of Ringcast-Msg, split.
  static std::pair<std::string, std::string> msg_number(const NatsReceived& r) {
    const std::string m = r.header(kMsgHeader);
    const auto dot = m.find('.');
    if (dot == std::string::npos) return {};
    return {m.substr(0, dot), m.substr(dot + 1)};
  }

  NatsListener nats_;
  std::atomic<bool> stop_{false};
};

// Invariant 2: a fixed subject's messages are numbered from 0 in a run; a
// new open() starts a new run from 0 (and names the new source).
TEST_F(NatsSinkTest, NumbersMessagesFromZeroInANewRunAtEveryOpen) {
  auto sink = make(false);
  Messages m;
  sink->open("first");
  for (std::uint64_t i = 0; i < 3; ++i) sink->put(m.add("orders", "a", i));
  sink->open("second");
  for (std::uint64_t i = 0; i < 2; ++i) sink->put(m.add("orders", "b", i));
  const auto got = nats_.next(5);
  ASSERT_EQ(got.size(), 5U);
  const std::string run = msg_number(got[0]).first;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].header(kSourceHeader), "first");
    EXPECT_EQ(got[i].header(kSeqHeader), std::to_string(i));
    EXPECT_EQ(msg_number(got[i]), std::make_pair(run, std::to_string(i)));
  }
  for (std::size_t i = 3; i < 5; ++i) {
    EXPECT_EQ(got[i].header(kSourceHeader), "second");
    EXPECT_NE(msg_number(got[i]).first, run) << "a new run";
    EXPECT_EQ(msg_number(got[i]).second, std::to_string(i - 3));
  }
  EXPECT_EQ(sink->counters().nats_published, 5U);
}

// Invariant 2: the positions a lap skipped are message numbers never sent,
// so an ingress counts them as a gap.
TEST_F(NatsSinkTest, ALapShowsAsAGapInTheMessageNumbers) {
  auto sink = make(false);
  Messages m;
  sink->open("source");
  sink->put(m.add("orders", "before", 0));
  sink->lapped(5);
  sink->put(m.add("orders", "after", 6));
  const auto got = nats_.next(2);
  ASSERT_EQ(got.size(), 2U);
  EXPECT_EQ(msg_number(got[0]).second, "0");
  EXPECT_EQ(msg_number(got[1]).second, "6");
}

// Invariant 1: consecutive one-slot messages travel in batches of `batch`
// (Ringcast-Count, Ringcast-Seq the first position, records of [length][body]);
// a message that is not the next position closes the batch, and flush()
// sends what is left.
TEST_F(NatsSinkTest, BatchesConsecutiveOneSlotMessagesAndFlushSendsTheRest) {
  auto sink = make(false, 4);
  Messages m;
  sink->open("source");
  for (std::uint64_t i = 0; i < 6; ++i) sink->put(m.add("orders", std::string(1, static_cast<char>('a' + i)), i));
  sink->put(m.add("orders", "g", 10));  // not the next position
  sink->flush();
  const auto got = nats_.next(3);
  ASSERT_EQ(got.size(), 3U);
  EXPECT_EQ(got[0].header(kSeqHeader), "0");
  EXPECT_EQ(got[0].header(kCountHeader), "4");
  EXPECT_EQ(got[0].body, std::string("\1a\1b\1c\1d"));
  EXPECT_EQ(got[1].header(kSeqHeader), "4");
  EXPECT_EQ(got[1].header(kCountHeader), "2");
  EXPECT_EQ(got[1].body, std::string("\1e\1f"));
  EXPECT_EQ(got[2].header(kSeqHeader), "10");
  EXPECT_EQ(got[2].header(kCountHeader), "1");
  EXPECT_EQ(sink->counters().nats_published, 7U);
}

// A topic that is not a valid subject is counted failed and never sent (the
// server would close the connection); the next message goes on.
TEST_F(NatsSinkTest, ATopicThatIsNotASubjectIsCountedFailedAndNotSent) {
  auto sink = make(true);
  Messages m;
  sink->open("source");
  sink->put(m.add("t.bad topic", "x", 0));
  sink->put(m.add("t.good", "y", 1));
  const auto got = nats_.next(1);
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].subject, "t.good");
  EXPECT_EQ(sink->counters().nats_failed, 1U);
  EXPECT_EQ(sink->counters().nats_published, 1U);
  EXPECT_EQ(got[0].header(kMsgHeader), "") << "topic routes are not numbered";
}

// Invariant 3: with its credit window full the sink waits (announcing it),
// and a relay that stops meanwhile counts the message failed, unsent; the
// window's statistics are the sink's.
TEST_F(NatsSinkTest, AFullCreditWindowHoldsThePublishUntilTheRelayStops) {
  auto window = CreditWindow::start(nats_.nats_->connection(), {.window = 1}, [](LogLevel, std::string_view) {});
  ASSERT_TRUE(window) << window.error();
  auto sink = make(false, 1, std::move(*window));
  int waits = 0;
  sink->on_wait([&] { ++waits; });
  Messages m;
  sink->open("source");
  sink->put(m.add("orders", "0", 0));
  const auto first = nats_.next(1);
  ASSERT_EQ(first.size(), 1U);
  ASSERT_FALSE(first[0].reply.empty()) << "the window's inbox";
  // An ingress acknowledges position 0: the window is then 0 + 1.
  ASSERT_NO_FATAL_FAILURE(nats_.publish(first[0].reply, fmt::format("1 {} 0", msg_number(first[0]).first)));
  ASSERT_TRUE(eventually([&] {
    RingStats s;
    sink->add_stats(s);
    return s.window_acks == 1;
  }));
  sink->put(m.add("orders", "1", 1));  // within the window
  EXPECT_EQ(waits, 0);
  stop_.store(true);
  sink->put(m.add("orders", "2", 2));  // past it: waits, and stops at once
  EXPECT_EQ(waits, 1);
  EXPECT_EQ(sink->counters().nats_published, 2U);
  EXPECT_EQ(sink->counters().nats_failed, 1U);
  RingStats s;
  sink->add_stats(s);
  EXPECT_TRUE(s.window);
  EXPECT_EQ(s.window_size, 1U);
  EXPECT_EQ(s.window_waits, 1U);
  const auto rest = nats_.next(1);
  ASSERT_EQ(rest.size(), 1U);
  EXPECT_EQ(rest[0].body, "1") << "position 2 was never sent";
}

}  // namespace
}  // namespace ringcast::relay::testing
