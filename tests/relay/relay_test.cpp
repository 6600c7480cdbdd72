// The relay library in-process: rings -> Relay -> embedded broker -> TCP
// subscribers (a minimal RESP2 client), and the Prometheus endpoint.
#include <array>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "prometheus_text.hpp"
#include "relay_fixture.hpp"
#include "relay_test_support.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "ringcast/relay/metrics_server.hpp"
#include "ringcast/relay/relay.hpp"
#include "ringcast/relay/topic.hpp"

namespace ringcast::relay {
namespace {

using namespace std::chrono_literals;
using testing::as_bytes;
using testing::broker_config;
using testing::deadline_in;
using testing::eventually;
using testing::RespClient;

RingStats stats_of(const Relay& relay, std::size_t i = 0) { return relay.ring_stats().at(i); }

// Pushes with a bounded wait; a relay that keeps up never lets this time out.
void push(BroadcastRing& ring, std::span<const std::byte> payload) {
  ASSERT_EQ(ring.push_wait(payload, {10s, IdleStrategy::kSpinThenYield}), Errc::ok);
}

// A ring in a fresh directory, relayed to an embedded broker on port 0.
class RelayTest : public testing::RingRelayTest {
 protected:
  // RingRelayTest::start_relay with the broker sink, once `configure` has
  // edited the configuration. Call through ASSERT_NO_FATAL_FAILURE.
  void start_relay(std::string_view file, std::uint64_t slots, const std::string& channel,
                   bool topic_in_payload = false, const CreateOptions& options = {},
                   const std::function<void(RelayConfig&)>& configure = {}) {
    const auto add_sinks = [&](RelayConfig& c) {
      c.broker = testing::loopback_broker();
      if (configure) configure(c);
    };
    RingRelayTest::start_relay(file, slots, channel, add_sinks, topic_in_payload, options);
  }
  [[nodiscard]] std::uint16_t port() const { return relay_->broker()->port(); }
};

TEST_F(RelayTest, RelaysEveryRingMessageToTcpSubscriberInOrder) {
  ASSERT_NO_FATAL_FAILURE(start_relay("ticks.ring", 1024, "ticks"));
  RespClient sub(port());
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(sub.subscribe("ticks"));

  constexpr int kMessages = 10'000;
  std::thread producer([&] {
    std::string p;
    for (int i = 0; i < kMessages; ++i) {
      p.assign(1, 'm');
      p += std::to_string(i);
      push(*ring_, as_bytes(p));
    }
  });
  int got = 0;
  while (got < kMessages) {
    auto r = sub.next(deadline_in(20s));
    ASSERT_TRUE(r) << "received " << got;
    ASSERT_TRUE(r->is_message("ticks"));
    ASSERT_EQ(r->elems[2].str, std::string(1, 'm') += std::to_string(got));
    ++got;
  }
  producer.join();
  ASSERT_TRUE(eventually([&] { return stats_of(*relay_).relayed == kMessages; }));
  const RingStats s = stats_of(*relay_);
  EXPECT_EQ(s.state, RingState::kRelaying);
  EXPECT_EQ(s.deliveries, static_cast<std::uint64_t>(kMessages));
  EXPECT_GE(s.batches, 1u);
  EXPECT_LE(s.batches, static_cast<std::uint64_t>(kMessages));
  EXPECT_EQ(s.lapped, 0u);
  EXPECT_EQ(s.malformed, 0u);
  EXPECT_TRUE(s.producer_alive);
}

TEST_F(RelayTest, TopicInPayloadRoutesOneRingToSeveralChannels) {
  ASSERT_NO_FATAL_FAILURE(start_relay("md.ring", 256, "md.", /*topic_in_payload=*/true));
  RespClient sub(port());
  ASSERT_TRUE(sub.subscribe("md.*", true));

  alignas(8) std::byte buf[kMaxPayload];
  const auto frame = [&](std::string_view topic, const std::string& body) {
    const std::size_t n = encode_topic_payload(topic, as_bytes(body), buf);
    EXPECT_GT(n, 0u);
    return std::span<const std::byte>(buf, n);
  };
  push(*ring_, frame("AAPL", "1"));
  push(*ring_, frame("MSFT", "2"));
  push(*ring_, as_bytes(std::string("\x09"
                                    "short")));  // malformed: length beyond the payload
  push(*ring_, frame("AAPL", "3"));

  const std::pair<std::string, std::string> expected[] = {{"md.AAPL", "1"}, {"md.MSFT", "2"}, {"md.AAPL", "3"}};
  for (const auto& [channel, body] : expected) {
    auto r = sub.next(deadline_in(20s));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->type, '*');
    ASSERT_EQ(r->count, 4u);  // pmessage pattern channel payload
    EXPECT_EQ(r->elems[0].str, "pmessage");
    EXPECT_EQ(r->elems[2].str, channel);
    EXPECT_EQ(r->elems[3].str, body);
  }
  ASSERT_TRUE(eventually([&] { return stats_of(*relay_).relayed == 3; }));
  EXPECT_EQ(stats_of(*relay_).malformed, 1u);
}

// The reader publishes each batch it takes from the ring with one broker call;
// it takes batches with drain from blocking and lossy rings alike.
// try_push_batch commits many messages at once, so the reader takes most of
// them in one batch.
class RelayBatchTest : public RelayTest, public ::testing::WithParamInterface<bool> {
 protected:
  [[nodiscard]] static CreateOptions ring_options() { return {.lossy = GetParam()}; }
};

INSTANTIATE_TEST_SUITE_P(BlockingAndLossy, RelayBatchTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Lossy" : "Blocking"; });

TEST_P(RelayBatchTest, TopicInPayloadBatchDeliversEachMessageOnItsOwnChannelInOrder) {
  ASSERT_NO_FATAL_FAILURE(start_relay("md.ring", 256, "md.", /*topic_in_payload=*/true, ring_options()));
  RespClient sub(port());
  ASSERT_TRUE(sub.subscribe("md.*", true));

  // Bodies of different lengths, and two messages that fill a slot exactly (the
  // longest topic a slot holds; the shortest topic with the longest body), so
  // a copy that overran its share of the reader's batch buffer would corrupt a
  // neighbour.
  const std::string long_topic(kMaxPayload - 1, 'T');
  const std::string long_body(kMaxPayload - 2, 'b');
  const std::pair<std::string, std::string> sent[] = {{"AAPL", "1"},    {"MSFT", "22"},  {long_topic, ""},
                                                      {"A", long_body}, {"AAPL", "333"}, {"IBM", "4"}};
  const std::string malformed(
      "\x09"
      "short");  // topic length beyond the payload
  std::vector<std::array<std::byte, kMaxPayload>> storage(std::size(sent));
  std::vector<std::span<const std::byte>> batch;
  for (std::size_t i = 0; i < std::size(sent); ++i) {
    if (i == 2) batch.push_back(as_bytes(malformed));  // mid-batch: skipped, counted
    const std::size_t n = encode_topic_payload(sent[i].first, as_bytes(sent[i].second), storage[i]);
    ASSERT_GT(n, 0u);
    batch.emplace_back(storage[i].data(), n);
  }
  const BatchResult pushed = ring_->try_push_batch(batch);
  ASSERT_EQ(pushed.count, batch.size()) << to_string(pushed.status);

  for (const auto& [topic, body] : sent) {
    auto r = sub.next(deadline_in(20s));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->count, 4u);  // pmessage pattern channel payload
    EXPECT_EQ(r->elems[0].str, "pmessage");
    EXPECT_EQ(r->elems[2].str, "md." + topic);
    EXPECT_EQ(r->elems[3].str, body);
  }
  ASSERT_TRUE(eventually([&] { return stats_of(*relay_).relayed == std::size(sent); }));
  const RingStats s = stats_of(*relay_);
  EXPECT_EQ(s.malformed, 1u);
  EXPECT_EQ(s.deliveries, std::size(sent));
  EXPECT_EQ(s.lapped, 0u);
}

TEST_P(RelayBatchTest, BatchLargerThanOneBrokerCallArrivesInOrder) {
  // --batch far above the reader's pending-buffer bound (1,024 messages): the
  // reader splits the batch into several broker calls, in order.
  constexpr std::size_t kMessages = 3000;
  ASSERT_NO_FATAL_FAILURE(start_relay("big.ring", 4096, "big", /*topic_in_payload=*/false, ring_options(),
                                      [](RelayConfig& c) { c.batch = 100'000; }));
  RespClient sub(port());
  ASSERT_TRUE(sub.subscribe("big"));

  std::vector<std::string> bodies;
  std::vector<std::span<const std::byte>> batch;
  for (std::size_t i = 0; i < kMessages; ++i) {
    bodies.push_back(std::string(1, 'm') += std::to_string(i));
  }
  for (const std::string& b : bodies) batch.push_back(as_bytes(b));
  const BatchResult pushed = ring_->try_push_batch(batch);
  ASSERT_EQ(pushed.count, kMessages) << to_string(pushed.status);

  for (std::size_t i = 0; i < kMessages; ++i) {
    auto r = sub.next(deadline_in(20s));
    ASSERT_TRUE(r) << "received " << i;
    ASSERT_TRUE(r->is_message("big"));
    ASSERT_EQ(r->elems[2].str, bodies[i]);
  }
  ASSERT_TRUE(eventually([&] { return stats_of(*relay_).relayed == kMessages; }));
  const RingStats s = stats_of(*relay_);
  EXPECT_EQ(s.deliveries, kMessages);
  EXPECT_EQ(s.malformed, 0u);
  EXPECT_EQ(s.lapped, 0u);
}

// `length` bytes that differ from one message to the next (every byte value).
std::string sized_body(std::size_t length, std::size_t seed) {
  std::string s(length, '\0');
  for (std::size_t i = 0; i < length; ++i) s[i] = static_cast<char>((i * 31 + seed) % 256);
  return s;
}

// Messages of any size up to the ring's max_message reach subscribers whole:
// short ones one slot each, a 200-byte one over several slots, a 64 KiB one
// larger than the reader's pending buffer (published straight from the ring)
// and a run of 1000-byte ones that fills that buffer several times in one
// drain. 4100 slots hold 64 KiB messages (a message may take half the ring).
TEST_P(RelayBatchTest, MessagesOfAnySizeReachTheSubscriberWholeAndInOrder) {
  ASSERT_NO_FATAL_FAILURE(start_relay("sizes.ring", 4100, "sizes", /*topic_in_payload=*/false, ring_options()));
  RespClient sub(port());
  ASSERT_TRUE(sub.subscribe("sizes"));
  std::vector<std::string> sent = {"short", sized_body(200, 1), sized_body(64 * 1024, 2), ""};
  for (std::size_t i = 0; i < 40; ++i) sent.push_back(sized_body(1000, 10 + i));
  sent.push_back(sized_body(64 * 1024, 3));
  for (std::size_t i = 0; i < 4; ++i) push(*ring_, as_bytes(sent[i]));
  std::vector<std::span<const std::byte>> run;
  for (std::size_t i = 4; i < 44; ++i) run.push_back(as_bytes(sent[i]));
  const BatchResult pushed = ring_->try_push_batch(run);  // one drain takes them all
  ASSERT_EQ(pushed.count, run.size()) << to_string(pushed.status);
  push(*ring_, as_bytes(sent.back()));

  for (std::size_t i = 0; i < sent.size(); ++i) {
    auto r = sub.next(deadline_in(20s));
    ASSERT_TRUE(r && r->is_message("sizes")) << "message " << i;
    ASSERT_EQ(r->elems[2].str.size(), sent[i].size()) << "message " << i;
    ASSERT_TRUE(r->elems[2].str == sent[i]) << "message " << i;
  }
  ASSERT_TRUE(eventually([&] { return stats_of(*relay_).relayed == sent.size(); }));
  const RingStats s = stats_of(*relay_);
  EXPECT_EQ(s.deliveries, sent.size());
  EXPECT_EQ(s.lapped, 0u);
}

TEST_F(RelayTest, TopicInPayloadCarriesLongTopicsAndLongBodies) {
  ASSERT_NO_FATAL_FAILURE(start_relay("md.ring", 4100, "md.", /*topic_in_payload=*/true));
  RespClient sub(port());
  ASSERT_TRUE(sub.subscribe("md.*", true));
  const std::pair<std::string, std::string> sent[] = {
      {std::string(kMaxTopic, 'T'), sized_body(200, 4)}, {"AAPL", sized_body(64 * 1024 - 5, 5)}, {"MSFT", "1"}};
  std::vector<std::byte> framed(ring_->max_message());
  for (const auto& [topic, body] : sent) {
    const std::size_t n = encode_topic_payload(topic, as_bytes(body), framed);
    ASSERT_GT(n, 0u);
    push(*ring_, std::span<const std::byte>(framed.data(), n));
  }
  for (const auto& [topic, body] : sent) {
    auto r = sub.next(deadline_in(20s));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->count, 4u);  // pmessage pattern channel payload
    EXPECT_EQ(r->elems[2].str, "md." + topic);
    EXPECT_EQ(r->elems[3].str.size(), body.size());
    EXPECT_TRUE(r->elems[3].str == body);
  }
  ASSERT_TRUE(eventually([&] { return stats_of(*relay_).relayed == std::size(sent); }));
  EXPECT_EQ(stats_of(*relay_).malformed, 0u);
}

// Holds a relay's reader inside its log call for the line saying it has
// registered, until open(). A gate that goes away opens itself: stopping the
// relay joins the reader. The log function it makes keeps the gate's state,
// so the relay may log after the gate is gone.
class RegistrationGate {
 public:
  RegistrationGate() = default;
  RegistrationGate(const RegistrationGate&) = delete;
  RegistrationGate& operator=(const RegistrationGate&) = delete;
  ~RegistrationGate() { open(); }

  // `log`, with the hold added.
  [[nodiscard]] LogFn wrap(LogFn log) const {
    return [opened = opened_, log = std::move(log)](LogLevel level, std::string_view line) {
      log(level, line);
      if (line.find("registered as consumer") != std::string_view::npos) {
        // acquire: pairs with the release store in open(); what the test did
        // before opening happens before the reader goes on.
        opened->wait(false, std::memory_order_acquire);
      }
    };
  }
  void open() {
    // release: pairs with the acquire wait in wrap().
    opened_->store(true, std::memory_order_release);
    opened_->notify_all();
  }

 private:
  std::shared_ptr<std::atomic<bool>> opened_ = std::make_shared<std::atomic<bool>>(false);
};

// The reader's first look at the ring after registering is a drain (run():
// open_and_register, then relay_until_stopped). Holding it between the two
// while the producer laps it makes that drain, not recv_wait, report the lap,
// whatever the scheduling.
TEST_F(RelayTest, LapReportedByDrainIsCountedAndTheRestRelayedInOrder) {
  constexpr std::uint64_t kSlots = 8;
  constexpr std::uint64_t kCount = 100;
  RegistrationGate gate;
  ASSERT_NO_FATAL_FAILURE(start_relay("lap.ring", kSlots, "lap", /*topic_in_payload=*/false, {.lossy = true},
                                      [&](RelayConfig& c) { c.log = gate.wrap(std::move(c.log)); }));
  RespClient sub(port());
  ASSERT_TRUE(sub.subscribe("lap"));
  // The reader is registered (start_relay waited for it) and held: it starts
  // at 0 and reads nothing until the gate opens.
  for (std::uint64_t seq = 0; seq < kCount; ++seq) {
    ASSERT_EQ(ring_->try_push(as_bytes(std::to_string(seq))), Errc::ok);
  }
  gate.open();

  // It resumes at the oldest message still in the ring and relays the rest in order.
  std::vector<std::uint64_t> got;
  while (got.empty() || got.back() != kCount - 1) {
    auto r = sub.next(deadline_in(20s));
    ASSERT_TRUE(r && r->is_message("lap")) << "after " << got.size() << " messages";
    const std::string_view body = r->elems[2].str;
    std::uint64_t seq = 0;
    ASSERT_EQ(std::from_chars(body.data(), body.data() + body.size(), seq).ec, std::errc{}) << body;
    ASSERT_TRUE(got.empty() || seq == got.back() + 1) << "gap inside the relayed tail at " << seq;
    got.push_back(seq);
  }
  EXPECT_LE(got.size(), kSlots) << "at most a ring's worth survives";
  ASSERT_TRUE(eventually([&] { return stats_of(*relay_).relayed == got.size(); }));
  const RingStats s = stats_of(*relay_);
  EXPECT_EQ(s.lapped, kCount - got.size()) << "every overwritten message is counted";
  EXPECT_EQ(s.lapped, got.front()) << "the first relayed message follows the lost ones";
}

TEST_F(RelayTest, WaitsForTheRingFileAndThenForAProducer) {
  const std::string path = dir_.file("late.ring");
  auto relay = Relay::start(broker_config({{path, "late", false}}, log_));
  ASSERT_TRUE(relay) << relay.error().message();
  ASSERT_TRUE(eventually([&] { return log_.contains("waiting for the ring"); })) << log_.all();
  EXPECT_EQ(stats_of(**relay).state, RingState::kWaitingForRing);

  auto ring = BroadcastRing::create(path, 64, {.claim_producer = false});
  ASSERT_TRUE(ring);
  // The reader sets its state, then logs it: wait for both (the TSan run once
  // saw the state before the line).
  ASSERT_TRUE(eventually([&] {
    return stats_of(**relay).state == RingState::kWaitingForProducer &&
           log_.contains("no live producer; waiting for one");
  })) << log_.all();
  EXPECT_EQ(ring->active_consumer_count(), 1u);

  RespClient sub((*relay)->broker()->port());
  ASSERT_TRUE(sub.subscribe("late"));
  auto producer = BroadcastRing::open(path);
  ASSERT_TRUE(producer);
  push(*producer, as_bytes(std::string("first")));
  auto r = sub.next(deadline_in(20s));
  ASSERT_TRUE(r && r->is_message("late"));
  EXPECT_EQ(r->elems[2].str, "first");
  ASSERT_TRUE(eventually([&] { return stats_of(**relay).state == RingState::kRelaying; }));
}

TEST_F(RelayTest, StopUnregistersItsConsumersAndSaysSo) {
  const std::string a = dir_.file("a.ring");
  const std::string b = dir_.file("b.ring");
  auto ra = BroadcastRing::create(a, 64);
  auto rb = BroadcastRing::create(b, 64);
  ASSERT_TRUE(ra && rb);
  auto relay = Relay::start(broker_config({{a, "a", false}, {b, "b", false}}, log_));
  ASSERT_TRUE(relay);
  ASSERT_TRUE(eventually([&] { return ra->active_consumer_count() == 1 && rb->active_consumer_count() == 1; }));
  (*relay)->stop();
  EXPECT_EQ(ra->active_consumer_count(), 0u);
  EXPECT_EQ(rb->active_consumer_count(), 0u);
  for (const auto& s : (*relay)->ring_stats()) {
    EXPECT_EQ(s.state, RingState::kStopped);
    EXPECT_EQ(s.consumer_id, -1);
  }
  EXPECT_TRUE(log_.contains("unregistered consumer")) << log_.all();
  (*relay)->stop();  // idempotent
}

// A full-size (52-byte) payload carrying `i`.
std::string padded(int i) {
  std::string s = std::to_string(i);
  s.resize(kMaxPayload, '.');
  return s;
}

TEST_F(RelayTest, SlowSubscriberCostsOnlyItsOwnQueue) {
  const auto limits = [](RelayConfig& c) {
    c.broker->overflow_policy = broker::OverflowPolicy::kDropOldest;
    c.broker->queue_limits.hard_bytes = 64 << 10;
    c.broker->queue_limits.soft_bytes = 0;
  };
  ASSERT_NO_FATAL_FAILURE(start_relay("fast.ring", 256, "ticks", /*topic_in_payload=*/false, {}, limits));
  // Subscribes, then never reads. A small receive buffer (set before connect,
  // which also stops autotuning) keeps the kernel from absorbing the stream;
  // the broker's send buffer is at most tcp_wmem's 4 MiB.
  RespClient stuck(port(), 4096);
  ASSERT_TRUE(stuck.subscribe("ticks"));
  RespClient reader(port());
  ASSERT_TRUE(reader.subscribe("ticks"));

  // Far more than the stuck queue and its socket buffers hold (~85-byte
  // frames: > 5 MiB): the ring (256 slots, blocking) would stall the producer
  // if the relay waited for anyone.
  const int messages = static_cast<int>(testing::scaled(100'000, 64'000));
  std::atomic<int> read{0};
  std::atomic<bool> fast_stopped{false};
  std::string fast_error;  // written by `fast` before fast_stopped (release)
  std::thread fast([&] {
    int expected = 0;
    while (expected < messages) {
      auto r = reader.next(deadline_in(30s));
      if (!r) {
        fast_error = "no reply within 30 s after message " + std::to_string(expected);
        break;
      }
      if (!r->is_message("ticks")) continue;
      if (r->elems[2].str != padded(expected)) {
        fast_error = "expected " + padded(expected) + ", got " + std::string(r->elems[2].str);
        break;
      }
      read.store(++expected, std::memory_order_relaxed);
    }
    fast_stopped.store(true, std::memory_order_release);
  });
  std::string payload;
  bool paced = true;
  for (int i = 0; i < messages && paced; ++i) {
    payload = padded(i);
    // Paced by the reading subscriber only (so its own queue stays small).
    paced = eventually(
        [&] { return i - read.load(std::memory_order_relaxed) < 200 || fast_stopped.load(std::memory_order_acquire); },
        30s);
    if (paced && !fast_stopped.load(std::memory_order_acquire)) push(*ring_, as_bytes(payload));
  }
  fast.join();
  EXPECT_TRUE(fast_error.empty()) << fast_error;
  EXPECT_EQ(read.load(std::memory_order_relaxed), messages);
  const broker::BrokerStats st = relay_->broker()->stats();
  EXPECT_GT(st.dropped_hard_limit, 0u) << "the stuck subscriber lost messages to its own limit";
  // Counters are published after each batch's last publish: poll.
  EXPECT_TRUE(eventually([&] { return stats_of(*relay_).relayed == static_cast<std::uint64_t>(messages); }));
}

// A `block` subscriber that stops reading makes the broker refuse the relay's
// publishes; the relay keeps the refused message, takes nothing more from the
// ring (whose producer then waits for room) and retries, so once the subscriber
// reads again both subscribers get every message, in order, none lost.
TEST_F(RelayTest, RefusedMessageWaitsInTheRingUntilTheBlockSubscriberHasRoom) {
  const auto limits = [](RelayConfig& c) {
    // A relay batch (256 messages, ~21 KiB) lands at once: the reading
    // subscriber's queue may pass the pace mark (16 KiB) by that much.
    c.broker->queue_limits.hard_bytes = 64 << 10;
    c.broker->queue_limits.soft_bytes = 0;
    c.broker->pace_bytes = 16 << 10;
    c.broker->max_stall = std::chrono::seconds(30);  // the reader is never to be called slow
  };
  constexpr std::uint64_t kSlots = 256;
  ASSERT_NO_FATAL_FAILURE(start_relay("block.ring", kSlots, "ticks", /*topic_in_payload=*/false, {}, limits));
  RespClient blocker(port(), 4096);  // a small window: the kernel absorbs little
  const auto ok = blocker.call({"CLIENT", "OVERFLOW", "block"});
  ASSERT_TRUE(ok && ok->str == "OK");
  ASSERT_TRUE(blocker.subscribe("ticks"));
  RespClient reader(port());
  ASSERT_TRUE(reader.subscribe("ticks"));
  // More than the blocker's queue and socket buffers hold (~85-byte frames:
  // > 5 MiB), so the relay is refused before the producer is done.
  const int messages = static_cast<int>(testing::scaled(120'000, 80'000));
  auto read_all = [messages](RespClient& c, std::string& error) {
    for (int expected = 0; expected < messages;) {
      auto r = c.next(deadline_in(30s));
      if (!r) {
        error = "no message within 30 s after " + std::to_string(expected);
        return;
      }
      if (!r->is_message("ticks")) continue;
      if (r->elems[2].str != padded(expected)) {
        error = "expected " + padded(expected) + ", got " + std::string(r->elems[2].str);
        return;
      }
      ++expected;
    }
  };
  std::string reader_error;
  std::thread reading([&] { read_all(reader, reader_error); });
  std::thread producer([&] {
    std::string payload;
    for (int i = 0; i < messages; ++i) {
      payload = padded(i);
      push(*ring_, as_bytes(payload));
    }
  });
  // Refused, retrying, and no longer draining: the ring fills up.
  EXPECT_TRUE(eventually([&] { return stats_of(*relay_).refused > 0; }, 30s));
  EXPECT_TRUE(eventually([&] { return stats_of(*relay_).lag == kSlots; }, 30s));
  std::string blocker_error;
  read_all(blocker, blocker_error);
  producer.join();
  reading.join();
  EXPECT_TRUE(blocker_error.empty()) << blocker_error;
  EXPECT_TRUE(reader_error.empty()) << reader_error;
  const broker::BrokerStats st = relay_->broker()->stats();
  EXPECT_EQ(st.dropped_hard_limit + st.dropped_soft_limit + st.dropped_disconnect, 0u);
  EXPECT_GT(st.refused_publishes, 0u);
  EXPECT_TRUE(eventually([&] { return stats_of(*relay_).relayed == static_cast<std::uint64_t>(messages); }));
  EXPECT_EQ(stats_of(*relay_).lapped, 0u);
}

TEST_F(RelayTest, ReplacedRingFileIsReopened) {
  ASSERT_NO_FATAL_FAILURE(start_relay("swap.ring", 64, "swap"));
  BroadcastRing& first = *ring_;
  RespClient sub(port());
  ASSERT_TRUE(sub.subscribe("swap"));
  push(first, as_bytes(std::string("old")));
  auto r = sub.next(deadline_in(20s));
  ASSERT_TRUE(r && r->is_message("swap"));
  EXPECT_EQ(r->elems[2].str, "old");

  auto second = BroadcastRing::create(path_, 64, {.replace = true});
  ASSERT_TRUE(second);
  ASSERT_TRUE(eventually([&] { return second->active_consumer_count() == 1; })) << log_.all();
  EXPECT_EQ(first.active_consumer_count(), 0u);
  push(*second, as_bytes(std::string("new")));
  r = sub.next(deadline_in(20s));
  ASSERT_TRUE(r && r->is_message("swap"));
  EXPECT_EQ(r->elems[2].str, "new");
  EXPECT_EQ(stats_of(*relay_).reopens, 1u);
  EXPECT_TRUE(log_.contains("replaced"));
}

TEST_F(RelayTest, FromOldestRelaysTheHistoryOfEachNewRingFileFirst) {
  ASSERT_NO_FATAL_FAILURE(
      start_relay("late.ring", 64, "late", false, {}, [](RelayConfig& c) { c.rings.at(0).start = StartAt::kOldest; }));
  RespClient sub(port());
  ASSERT_TRUE(sub.subscribe("late"));
  push(*ring_, as_bytes(std::string("first")));
  auto r = sub.next(deadline_in(20s));
  ASSERT_TRUE(r && r->is_message("late"));
  EXPECT_EQ(r->elems[2].str, "first");

  // A replacement file with history nobody read: six messages in four slots
  // leave m2..m5, which the relay sends before the live one. (One slot per
  // message: a ring that may hold longer messages keeps less history than
  // its capacity, docs/memory-ordering.md.)
  const std::string next_path = dir_.file("late.ring.next");
  auto next = BroadcastRing::create(next_path, 4, {.max_message = kMaxPayload});
  ASSERT_TRUE(next);
  for (const char* m : {"m0", "m1", "m2", "m3", "m4", "m5"}) push(*next, as_bytes(std::string(m)));
  ASSERT_EQ(::rename(next_path.c_str(), path_.c_str()), 0);
  ASSERT_TRUE(eventually([&] { return next->active_consumer_count() == 1; })) << log_.all();
  // Pushing only once the history is read keeps this test off invariant 7's
  // window (history nobody held may be overwritten before the next rescan).
  ASSERT_TRUE(eventually([&] { return next->is_fully_drained(); })) << log_.all();
  push(*next, as_bytes(std::string("live")));
  for (const char* want : {"m2", "m3", "m4", "m5", "live"}) {
    r = sub.next(deadline_in(20s));
    ASSERT_TRUE(r && r->is_message("late")) << want;
    EXPECT_EQ(r->elems[2].str, want);
  }
  EXPECT_EQ(stats_of(*relay_).lapped, 0u);
}

TEST_F(RelayTest, InfoTextListsEveryRing) {
  ASSERT_NO_FATAL_FAILURE(start_relay("info.ring", 64, "info"));
  push(*ring_, as_bytes(std::string("x")));
  const std::string info = relay_->info_text();
  EXPECT_NE(info.find("# Relay\r\nrelay_rings:1\r\n"), std::string::npos) << info;
  EXPECT_NE(info.find("ring_0:path=" + path_ + ",channel=info,state="), std::string::npos) << info;
}

TEST_F(RelayTest, BrokerInfoCommandShowsTheRelaySection) {
  ASSERT_NO_FATAL_FAILURE(start_relay("info-cmd.ring", 64, "ic"));
  push(*ring_, as_bytes(std::string("x")));
  ASSERT_TRUE(eventually([&] { return stats_of(*relay_).relayed == 1; }));
  RespClient c(port());
  auto only = c.call({"INFO", "relay"});
  ASSERT_TRUE(only && only->type == '$');
  EXPECT_EQ(only->str.rfind("# Relay\r\n", 0), 0u) << only->str;
  EXPECT_NE(only->str.find(",relayed=1,"), std::string_view::npos) << only->str;
  auto all = c.call({"INFO"});
  ASSERT_TRUE(all && all->type == '$');
  EXPECT_NE(all->str.find("# Stats\r\n"), std::string_view::npos);
  EXPECT_NE(all->str.find("# Relay\r\n"), std::string_view::npos);
  auto stats = c.call({"INFO", "stats"});
  ASSERT_TRUE(stats && stats->type == '$');
  EXPECT_EQ(stats->str.find("# Relay"), std::string_view::npos);
}

TEST_F(RelayTest, RejectsConfigurationsWithoutRingsOrSinks) {
  RelayConfig none;
  auto r = Relay::start(none);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, RelayError::Code::kInvalidConfig);
  RelayConfig no_sink;
  no_sink.rings.push_back({"/dev/shm/x.ring", "x", false});
  EXPECT_FALSE(Relay::start(no_sink));
  RelayConfig dup;
  dup.rings = {{"/dev/shm/x.ring", "x", false}, {"/dev/shm/x.ring", "y", false}};
  dup.broker = broker::BrokerConfig{};
  EXPECT_FALSE(Relay::start(dup));
}

// A minimal HTTP GET; returns the whole response.
std::string http_get(std::uint16_t port, std::string_view target) {
  const int fd = testing::connect_loopback(port);
  if (fd < 0) return {};
  const std::string req = "GET " + std::string(target) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  std::string out;
  if (test::send_all(fd, req)) (void)test::read_to_eof(fd, out, deadline_in(10s));
  ::close(fd);
  return out;
}

TEST_F(RelayTest, MetricsEndpointServesRingBrokerAndConnectionSeries) {
  ASSERT_NO_FATAL_FAILURE(start_relay("metrics.ring", 64, "m"));
  RespClient sub(port());
  ASSERT_TRUE(sub.call({"CLIENT", "SETNAME", "watcher"}));
  ASSERT_TRUE(sub.subscribe("m"));
  for (int i = 0; i < 3; ++i) push(*ring_, as_bytes(std::to_string(i)));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sub.next(deadline_in(20s)));
  ASSERT_TRUE(eventually([&] { return stats_of(*relay_).relayed == 3; }));

  auto server = MetricsServer::start("127.0.0.1", 0, [&] { return relay_->prometheus_text(); });
  ASSERT_TRUE(server) << server.error().message();
  const std::string resp = http_get((*server)->port(), "/metrics");
  EXPECT_EQ(resp.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << resp;
  EXPECT_NE(resp.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(resp.find("ringcast_relay_ring_messages_total{ring=\"" + path_ + "\",channel=\"m\"} 3\n"),
            std::string::npos)
      << resp;
  EXPECT_NE(resp.find("ringcast_relay_ring_state{ring=\"" + path_ + "\",channel=\"m\",state=\"relaying\"} 1\n"),
            std::string::npos);
  EXPECT_NE(resp.find("ringcast_broker_messages_published_total 3\n"), std::string::npos);
  EXPECT_NE(resp.find("ringcast_broker_connection_queued_bytes{id="), std::string::npos);
  EXPECT_NE(resp.find("name=\"watcher\",reason=\"hard_limit\"} 0\n"), std::string::npos) << resp;
  EXPECT_EQ(resp.find("ringcast-relay-admin"), std::string::npos) << "the admin connection hides itself";
  // One exposition, broker series first, then the relay's through the broker's
  // provider hook: Broker::metrics_text() itself carries the relay's series.
  const auto body = resp.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos);
  const auto m = test::parse_prometheus(std::string_view(resp).substr(body + 4));
  ASSERT_TRUE(m.ok()) << m.error;
  EXPECT_EQ(m.value("ringcast_broker_channels"), 1);
  EXPECT_EQ(m.value("ringcast_broker_shard_channels"), 0);
  EXPECT_EQ(m.value("ringcast_broker_conflated_total"), 0);
  EXPECT_LT(resp.find("ringcast_broker_messages_published_total"), resp.find("ringcast_relay_ring_messages_total"));
  EXPECT_EQ(test::parse_prometheus(relay_->broker()->metrics_text())
                .value("ringcast_relay_ring_messages_total", {{"channel", "m"}}),
            3);
  EXPECT_EQ(http_get((*server)->port(), "/other").rfind("HTTP/1.1 404", 0), 0u);
  (*server)->stop();
}

}  // namespace
}  // namespace ringcast::relay
