// "Hot paths do not allocate", checked by counting: this executable replaces the
// global operator new and delete, so it is a test binary of its own. Every
// count is taken on the test's only thread around the code under test.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "broker/core/broker_core.hpp"
#include "broker/guarantees/ack_tracker.hpp"
#include "broker/resp/request_parser.hpp"
#include "broker/resp/session.hpp"
#include "broker/ws/frame_decoder.hpp"
#include "broker/ws/json_delivery.hpp"
#include "test_support.hpp"
#include "ws/client_frame.hpp"

namespace {

// relaxed: plain counters, read by the thread that did the allocating.
std::atomic<std::size_t> g_allocations{0};
std::atomic<std::size_t> g_deallocations{0};

}  // namespace

// The other forms (array, nothrow, sized delete) forward to these two. Not
// inlined, so that g++ does not pair a new-expression with free().
[[gnu::noinline]] void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}

[[gnu::noinline]] void operator delete(void* p) noexcept {
  if (p != nullptr) g_deallocations.fetch_add(1, std::memory_order_relaxed);
  std::free(p);
}

void operator delete(void* p, std::size_t) noexcept { ::operator delete(p); }

namespace ringcast::broker {
namespace {

// Allocations and deallocations since construction.
class AllocationCount {
 public:
  [[nodiscard]] std::size_t allocations() const noexcept {
    return g_allocations.load(std::memory_order_relaxed) - allocations_;
  }
  [[nodiscard]] std::size_t deallocations() const noexcept {
    return g_deallocations.load(std::memory_order_relaxed) - deallocations_;
  }

 private:
  std::size_t allocations_ = g_allocations.load(std::memory_order_relaxed);
  std::size_t deallocations_ = g_deallocations.load(std::memory_order_relaxed);
};

std::string publish_command(std::string_view payload) {
  return fmt::format("*3\r\n$7\r\nPUBLISH\r\n$4\r\nnews\r\n${}\r\n{}\r\n", payload.size(), payload);
}

std::string repeat(std::string_view s, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += s;
  return out;
}

// Feeds `input` in pieces of `piece` bytes (SIZE_MAX: whole); returns how many
// commands were PUBLISH news `payload`. Allocates nothing itself.
std::size_t count_publishes(RequestParser& p, std::string_view input, std::size_t piece, std::string_view payload) {
  std::size_t n = 0;
  for (std::size_t off = 0; off < input.size(); off += piece) {
    std::string_view in = input.substr(off, piece);
    while (p.parse(in) == RequestParser::Status::kCommand) {
      const auto& args = p.args();
      if (args.size() == 3 && args[0] == "PUBLISH" && args[1] == "news" && args[2] == payload) ++n;
    }
  }
  return n;
}

constexpr std::size_t kBatch = 64;

// Parameter: payload bytes (52: a typical small message; 4096: far past the
// string's 15-byte small buffer).
class RequestParserAllocationTest : public ::testing::TestWithParam<std::size_t> {};

INSTANTIATE_TEST_SUITE_P(Payloads, RequestParserAllocationTest, ::testing::Values(52, 4096),
                         [](const ::testing::TestParamInfo<std::size_t>& i) {
                           return std::to_string(i.param) + "Bytes";
                         });

TEST_P(RequestParserAllocationTest, SteadyStatePublishesAllocateNothing) {
  const std::string payload(GetParam(), 'p');
  const std::string one = publish_command(payload);
  const std::string batch = repeat(one, kBatch);
  RequestParser p({});
  const AllocationCount warm_up;
  ASSERT_EQ(count_publishes(p, one, SIZE_MAX, payload), 1u);  // gives the slots their capacity
  ASSERT_GT(warm_up.allocations(), 0u) << "the counting operator new is not the one in use";
  for (const std::size_t piece : {SIZE_MAX, std::size_t{1}}) {
    const AllocationCount count;
    const std::size_t parsed = count_publishes(p, batch, piece, payload);
    EXPECT_EQ(count.allocations(), 0u) << "fed in pieces of " << piece;
    EXPECT_EQ(count.deallocations(), 0u) << "fed in pieces of " << piece;
    EXPECT_EQ(parsed, kBatch);
  }
}

// Invariant 1 of request_parser.hpp, between commands.
std::size_t retained_bound() {
  return RequestParser::kMaxRetainedSlots * (sizeof(std::string) + RequestParser::kMaxPrealloc) +
         RequestParser::kMaxPrealloc;
}

TEST(RequestParserRetentionTest, HugeArgumentIsFreedBeforeTheNextCommand) {
  const std::string small(52, 's');
  RequestParser p({});
  ASSERT_EQ(count_publishes(p, publish_command(small), SIZE_MAX, small), 1u);
  const std::size_t steady = p.retained_bytes();

  const std::string huge(1u << 20, 'h');
  const std::string huge_command = publish_command(huge);
  std::string_view in = huge_command;
  ASSERT_EQ(p.parse(in), RequestParser::Status::kCommand);
  EXPECT_GE(p.retained_bytes(), huge.size());
  // Freed by the next call, even with nothing more to parse: an idle client
  // does not pin it.
  ASSERT_EQ(p.parse(in), RequestParser::Status::kNeedMore);
  EXPECT_LE(p.retained_bytes(), retained_bound());

  ASSERT_EQ(count_publishes(p, repeat(publish_command(small), 4), SIZE_MAX, small), 4u);
  EXPECT_EQ(p.retained_bytes(), steady);
}

TEST(RequestParserRetentionTest, MillionArgumentCommandIsFreedBeforeTheNextCommand) {
  constexpr std::size_t kArgs = 1'000'000;
  const std::string command = fmt::format("*{}\r\n{}", kArgs, repeat("$1\r\nx\r\n", kArgs));
  RequestParser p({});
  std::string_view in = command;
  ASSERT_EQ(p.parse(in), RequestParser::Status::kCommand);
  ASSERT_EQ(p.args().size(), kArgs);
  EXPECT_GE(p.retained_bytes(), kArgs * sizeof(std::string));
  ASSERT_EQ(p.parse(in), RequestParser::Status::kNeedMore);
  EXPECT_LE(p.retained_bytes(), retained_bound());

  const std::string small(52, 's');
  ASSERT_EQ(count_publishes(p, repeat(publish_command(small), 4), SIZE_MAX, small), 4u);
  EXPECT_LE(p.retained_bytes(), retained_bound());
}

// A connection pipelining PUBLISHes to a channel nobody subscribes to: the
// session's only allocation per input buffer is the frame carrying its replies
// (session.hpp, invariant 3), however many commands the buffer holds.
TEST(SessionAllocationTest, BatchedPublishesAllocateOnlyTheReplyFrame) {
  BrokerCore core{BrokerConfig{}};
  auto s = std::make_unique<RespSession>(core, "127.0.0.1:1", testing::null_waker());
  const std::string payload(52, 'p');
  const std::string one = publish_command(payload);
  const std::string batch = repeat(one, kBatch);
  ASSERT_EQ(s->on_input(batch), Client::InputResult::kOk);  // warm-up: buffers reach their size
  (void)testing::drain_all(s->queue());
  for (const std::string* input : {&batch, &one}) {
    const AllocationCount count;
    const Client::InputResult r = s->on_input(*input);
    EXPECT_EQ(count.allocations(), 1u) << input->size() / one.size() << " PUBLISHes";
    EXPECT_EQ(count.deallocations(), 0u) << input->size() / one.size() << " PUBLISHes";
    EXPECT_EQ(r, Client::InputResult::kOk);
    EXPECT_EQ(testing::concat(testing::drain_all(s->queue())), repeat(":0\r\n", input->size() / one.size()));
  }
  s->detach();
}

}  // namespace
}  // namespace ringcast::broker

namespace ringcast::broker {
namespace {

// The conflate policy costs nothing until a limit is met: a push that fits takes
// no allocation (the ring has its capacity), nor does the writer's pop.
TEST(ConnectionQueueAllocationTest, ConflatePolicyUnderItsLimitAllocatesNothing) {
  ConnectionQueue q(QueueLimits{1u << 20, 0, std::chrono::seconds(60)}, OverflowPolicy::kConflate,
                    steady_clock_source());
  const FrameRef frame = encode_message(WireFormat::kResp2, "prices", std::string(52, 'p'));
  std::vector<FrameSpan> out;
  out.reserve(64);
  for (int round = 0; round < 2; ++round) {  // round 0 warms the ring up
    const AllocationCount count;
    for (int i = 0; i < 32; ++i) (void)q.push(frame);
    const PopResult r = q.pop_batch(SIZE_MAX, 64, out);
    EXPECT_EQ(r.frames, 32u);
    out.clear();
    q.release(r.bytes);
    if (round == 1) {
      EXPECT_EQ(count.allocations(), 0u);
    }
  }
  EXPECT_EQ(q.stats().conflated, 0u);
}

// Conflating a stuck reader's single-message blocks on known channels replaces
// queued frames in place of allocating: the cost is O(channels), paid once.
TEST(ConnectionQueueAllocationTest, ConflatingKnownChannelsAllocatesNothing) {
  const FrameRef a = encode_message(WireFormat::kResp2, "a", std::string(52, 'p'));
  const FrameRef b = encode_message(WireFormat::kResp2, "b", std::string(52, 'p'));
  ConnectionQueue q(QueueLimits{8 * a->size(), 0, std::chrono::seconds(60)}, OverflowPolicy::kConflate,
                    steady_clock_source());
  for (int i = 0; i < 1000; ++i) (void)q.push(i % 2 == 0 ? a : b);  // warm-up: conflating, keys known
  const AllocationCount count;
  for (int i = 0; i < 100000; ++i) (void)q.push(i % 2 == 0 ? a : b);
  EXPECT_EQ(count.allocations(), 0u);
  EXPECT_EQ(q.stats().queued_frames, 2u);
  EXPECT_EQ(q.stats().conflated, 101000u - 2u);
}

// Almost no queue ever owes a QoS 1 loss notice: until one does, it holds no
// table of owed notices, and once their notices are queued it frees the table
// again (connection_queue.hpp, invariant 9), so every idle connection's queue
// holds only its span ring.
TEST(ConnectionQueueAllocationTest, QueueOwingNoLossNoticeHoldsNoAllocation) {
  const auto make_queue = [] {
    return ConnectionQueue(QueueLimits{1u << 20, 0, std::chrono::seconds(60)}, OverflowPolicy::kDropNewest,
                           steady_clock_source());
  };
  std::vector<FrameSpan> out;
  out.reserve(64);
  const auto drain = [&](ConnectionQueue& from) {
    const PopResult r = from.pop_batch(SIZE_MAX, 64, out);
    out.clear();
    from.release(r.bytes);
    return r.frames;
  };
  const auto owe_two = [](ConnectionQueue& to) {
    (void)to.note_qos1_loss(Qos1Loss::kExpired, "t", 7, 1, 6);
    (void)to.note_qos1_loss(Qos1Loss::kWindowDropped, "u", 8, 1, 0);
  };
  {
    // The notices' encoder keeps thread-local scratch, which stays: warmed on
    // another queue first (a test run alone would count it below otherwise).
    ConnectionQueue other = make_queue();
    owe_two(other);
    EXPECT_EQ(drain(other), 2u);
  }
  const AllocationCount count;
  ConnectionQueue q = make_queue();
  EXPECT_EQ(count.allocations(), 0u);
  (void)q.push(encode_message(WireFormat::kJson, "t", "warm-up"));  // the span ring takes its capacity
  EXPECT_EQ(drain(q), 1u);

  const AllocationCount around;
  owe_two(q);
  EXPECT_EQ(drain(q), 2u) << "two notices";
  EXPECT_GT(around.allocations(), 0u) << "the counting operator new is not the one in use";
  EXPECT_EQ(around.allocations(), around.deallocations()) << "nothing owed, nothing held";
}

// A publish to a channel seen before, with RESP2, RESP3 and WebSocket-JSON
// subscribers (one of the latter also through a pattern) and two in PopSub's
// JSON dialect, allocates one block per format and pattern and nothing else:
// the id lookup, the per-thread scratch of the encoders and the queues are
// warm (subscription_index.hpp, invariant 4).
TEST(SubscriptionIndexAllocationTest, PublishingAllocatesOnlyOneBlockPerFormatAndPattern) {
  SubscriptionIndex index;
  testing::FakeSubscriber r2(WireFormat::kResp2);
  testing::FakeSubscriber r3(WireFormat::kResp3);
  testing::FakeSubscriber j1(WireFormat::kJson);
  testing::FakeSubscriber j2(WireFormat::kJson);
  testing::FakeSubscriber p1(WireFormat::kPopSubJson);
  testing::FakeSubscriber p2(WireFormat::kPopSubJson);
  const std::vector<testing::FakeSubscriber*> all{&r2, &r3, &j1, &j2, &p1, &p2};
  {
    auto lock = index.lock_for_update();
    for (testing::FakeSubscriber* s : all) index.add_channel(*s, "prices");
    index.add_pattern(j2, "pri*");
  }
  const std::string payload(52, 'p');
  const std::string binary("\xff\x00", 2);  // base64 in JSON
  const std::vector<Message> run{{"prices", payload}, {"prices", binary}, {"prices", payload}};
  std::vector<std::size_t> receivers(run.size());
  std::vector<FrameSpan> out;
  out.reserve(64);
  for (int round = 0; round < 2; ++round) {  // round 0 warms everything up
    const AllocationCount count;
    index.publish(run, /*dedupe=*/false, receivers);
    if (round == 1) {
      EXPECT_EQ(count.allocations(), 4u) << "RESP2, RESP3, JSON and PopSub JSON blocks";
    }
    for (testing::FakeSubscriber* s : all) {
      const PopResult r = s->queue().pop_batch(SIZE_MAX, 64, out);
      out.clear();
      s->queue().release(r.bytes);
    }
  }
  EXPECT_EQ(receivers, (std::vector<std::size_t>{6, 6, 6})) << "j2 gets one delivery per message";
  auto lock = index.lock_for_update();
  for (testing::FakeSubscriber* s : all) index.remove_all(*s);
}

// The WebSocket frame decoder reuses its message buffer (frame_decoder.hpp,
// invariant 2): text, binary and fragmented messages of the sizes seen before,
// with pings between, decode without allocating.
TEST(FrameDecoderAllocationTest, SteadyStateFramesAllocateNothing) {
  using ws::test::client_frame;
  using ws::test::ClientFrame;
  std::string in;
  for (std::size_t size : {10u, 125u, 126u, 4000u, 65536u}) {
    in += client_frame(std::string(size, 'a'));
    in += client_frame(std::string(size, 'b'), {.opcode = 0x2});
    in += client_frame(std::string(size / 2, 'c'), {.fin = false});
    in += client_frame("ping", {.opcode = 0x9});
    in += client_frame(std::string(size - size / 2, 'c'), {.opcode = 0x0});
  }
  ws::FrameDecoder d(1u << 20);
  auto run = [&] {
    std::size_t events = 0;
    std::string_view piece = in;
    while (d.decode(piece) != ws::FrameDecoder::Status::kNeedMore) ++events;
    return events;
  };
  ASSERT_EQ(run(), 20u);  // warm-up: the buffer grows to the largest message
  const AllocationCount count;
  for (int i = 0; i < 10; ++i) ASSERT_EQ(run(), 20u);
  EXPECT_EQ(count.allocations(), 0u);
}

// An idle PopSub connection has a tracker (its subscriptions are QoS 1): until
// the first delivery it holds no heap memory (ack_tracker.hpp, invariant 6),
// whatever the owner asks of it.
TEST(AckTrackerAllocationTest, IdleTrackerHoldsNoAllocation) {
  // The tracker itself is one allocation per QoS 1 connection: 128 bytes of
  // malloc (with its header) while it is at most 120.
  EXPECT_LE(sizeof(AckTracker), 120u);
  testing::ManualClock clock;
  ConnectionQueue queue(QueueLimits{1u << 20, 0, std::chrono::seconds(60)}, OverflowPolicy::kDropNewest, clock);
  const std::function<bool(std::string_view)> any = [](std::string_view) { return true; };
  const FrameRef frame = encode_message(WireFormat::kJson, "t", std::string(52, 'p'));
  const AllocationCount count;
  {
    AckTracker tracker(AckSettings{}, clock, WireFormat::kJson, ws::json_redelivery);
    bool wake = false;
    EXPECT_EQ(tracker.ack("t", 1, queue, wake), AckResult::kUnknown);
    EXPECT_EQ(tracker.ack(std::nullopt, 1, queue, wake), AckResult::kUnknown);
    EXPECT_EQ(tracker.ack_shown(std::nullopt, any, queue, wake), AckResult::kUnknown);
    clock.advance(std::chrono::seconds(10));
    EXPECT_FALSE(tracker.on_timer(queue));
    EXPECT_FALSE(tracker.redeliver_all(queue, any));
    EXPECT_EQ(tracker.next_deadline(), std::nullopt);
    EXPECT_EQ(tracker.resume_floor("t"), 0u);
    EXPECT_EQ(tracker.stats().in_flight, 0u);
    EXPECT_EQ(count.allocations(), 0u);

    // The first delivery makes the table: the count sees it.
    (void)tracker.offer("t", 1, frame, queue);
    EXPECT_GT(count.allocations(), 0u) << "the counting operator new is not the one in use";
    EXPECT_EQ(tracker.stats().in_flight, 1u);
  }
}

}  // namespace
}  // namespace ringcast::broker
