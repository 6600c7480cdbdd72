// BrokerSink (src/relay/sinks/broker_sink.hpp) against an in-process broker
// and RESP subscribers: the shared sink suite (sink_contract.hpp), then what
// only the broker sink does: it holds its batch until flush(), and a batch a
// `block` subscriber refuses waits, counting each refusal, until the relay
// stops.
#include "relay/sinks/broker_sink.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "relay_test_support.hpp"
#include "ringcast/broker/broker.hpp"
#include "sink_contract.hpp"

namespace ringcast::relay::testing {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<broker::Broker> start_broker(broker::BrokerConfig config) {
  config.port = 0;
  config.io_threads = 1;
  auto b = broker::Broker::start(config);
  EXPECT_TRUE(b) << b.error().message();
  return b ? std::move(*b) : nullptr;
}

struct BrokerPeer {
  void start() {
    broker_ = start_broker({});
    ASSERT_TRUE(broker_);
    sub_ = std::make_unique<RespClient>(broker_->port());
    ASSERT_TRUE(sub_->ok());
    ASSERT_TRUE(sub_->subscribe("orders"));
    ASSERT_TRUE(sub_->subscribe("t.*", true));
  }
  std::unique_ptr<Sink> make(const RingRoute&, const std::atomic<bool>& stop) {
    return std::make_unique<BrokerSink>(*broker_, stop);
  }
  std::vector<Received> receive(std::size_t n) {
    std::vector<Received> out;
    const Deadline d = deadline_in(10s);
    while (out.size() < n) {
      const auto r = sub_->next(d);
      if (!r) break;
      if (r->is_message()) {
        out.push_back({std::string(r->elems[1].str), std::string(r->elems[2].str)});
      } else if (r->type == '*' && r->count == 4 && r->elems[0].str == "pmessage") {
        out.push_back({std::string(r->elems[2].str), std::string(r->elems[3].str)});
      }
    }
    return out;
  }
  static std::uint64_t delivered(const SinkCounters& c) { return c.deliveries; }  // one subscriber

  std::unique_ptr<broker::Broker> broker_;
  std::unique_ptr<RespClient> sub_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Broker, SinkContractTest, BrokerPeer);

// keeps_views(): the batch reaches the broker at flush(), not at put().
TEST(BrokerSinkTest, PublishesNothingUntilFlush) {
  auto broker = start_broker({});
  ASSERT_TRUE(broker);
  RespClient sub(broker->port());
  ASSERT_TRUE(sub.subscribe("orders"));
  const std::atomic<bool> stop{false};
  BrokerSink sink(*broker, stop);
  EXPECT_TRUE(sink.keeps_views());
  Messages m;
  for (std::uint64_t i = 0; i < 10; ++i) sink.put(m.add("orders", std::to_string(i), i));
  EXPECT_EQ(sink.counters().deliveries, 0U);
  EXPECT_EQ(broker->stats().deliveries, 0U);
  sink.flush();
  EXPECT_EQ(sink.counters().deliveries, 10U);
  EXPECT_EQ(broker->stats().deliveries, 10U);
}

// Invariant 1: a batch a `block` subscriber refuses is held, each refusal
// counted and announced (waiting()), until the relay's stop flag is set;
// nothing is dropped meanwhile.
TEST(BrokerSinkTest, ARefusedBatchWaitsCountingEachRefusalUntilTheRelayStops) {
  broker::BrokerConfig config;
  config.queue_limits.hard_bytes = 16u << 10;
  config.queue_limits.soft_bytes = 0;
  config.max_block = 10ms;
  auto broker = start_broker(config);
  ASSERT_TRUE(broker);
  RespClient blocker(broker->port(), 4096);  // never reads
  ASSERT_TRUE(blocker.ok());
  const auto policy = blocker.call({"CLIENT", "OVERFLOW", "block"});
  ASSERT_TRUE(policy && policy->type == '+');
  ASSERT_TRUE(blocker.subscribe("orders"));

  std::atomic<bool> stop{false};
  BrokerSink sink(*broker, stop);
  std::atomic<std::uint64_t> waits{0};
  sink.on_wait([&] { waits.fetch_add(1); });
  std::atomic<std::uint64_t> flushed{0};
  std::thread reader([&] {
    const std::string body(50, 'x');
    // Batches until one is held; the refused one then waits for stop.
    for (std::uint64_t seq = 0; seq < 1'000'000 && !stop.load();) {
      Messages m;
      for (int i = 0; i < 100; ++i, ++seq) sink.put(m.add("orders", body, seq));
      sink.flush();
      flushed.fetch_add(1);
    }
  });
  EXPECT_TRUE(eventually([&] { return waits.load() >= 3; })) << "held for several max_block periods";
  const std::uint64_t flushed_while_held = flushed.load();
  stop.store(true);
  reader.join();
  EXPECT_EQ(flushed.load(), flushed_while_held + 1) << "the held flush returned only once stopped";
  EXPECT_GE(sink.counters().refused, 3U);
  EXPECT_EQ(sink.counters().refused, waits.load()) << "each refusal is announced";
}

}  // namespace
}  // namespace ringcast::relay::testing
