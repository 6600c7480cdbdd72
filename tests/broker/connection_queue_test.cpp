#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "broker/core/subscription_index.hpp"
#include "broker/queue/connection_queue.hpp"
#include "broker/queue/flow_control.hpp"
#include "broker/resp/resp_delivery.hpp"
#include "broker/util/clock.hpp"
#include "resp_client.hpp"
#include "test_support.hpp"

namespace ringcast::broker {
namespace {

using namespace std::chrono_literals;
using namespace std::string_view_literals;
using testing::ManualClock;
using testing::numbered_frame;

constexpr std::size_t kHard = static_cast<std::size_t>(DropReason::kHardLimit);
constexpr std::size_t kSoft = static_cast<std::size_t>(DropReason::kSoftLimit);
constexpr std::size_t kCut = static_cast<std::size_t>(DropReason::kDisconnect);

QueueLimits limits(std::size_t hard, std::size_t soft = 0, std::chrono::nanoseconds d = 60s) {
  return QueueLimits{hard, soft, d};
}

std::vector<std::uint64_t> seqs(const std::vector<FrameSpan>& frames) { return testing::seqs_of(frames); }

TEST(ConnectionQueueTest, WakesTheWriterOncePerBusyPeriod) {
  ManualClock clock;
  ConnectionQueue q(limits(1000), OverflowPolicy::kDropNewest, clock);
  EXPECT_TRUE(q.push(numbered_frame(0, 10)).wake);
  EXPECT_FALSE(q.push(numbered_frame(1, 10)).wake);
  EXPECT_FALSE(q.push(numbered_frame(2, 10)).wake);
  std::vector<FrameSpan> out;
  const PopResult r = q.pop_batch(1000, 1000, out);
  EXPECT_EQ(r.frames, 3u);
  EXPECT_FALSE(r.more);
  EXPECT_FALSE(q.push(numbered_frame(3, 10)).wake) << "still armed until a pop finds nothing";
  out.clear();
  EXPECT_EQ(q.pop_batch(1000, 1000, out).frames, 1u);
  EXPECT_EQ(q.pop_batch(1000, 1000, out).frames, 0u);
  EXPECT_TRUE(q.push(numbered_frame(4, 10)).wake);
}

TEST(ConnectionQueueTest, CompletingTheLastBatchDisarmsTheQueue) {
  ManualClock clock;
  ConnectionQueue q(limits(1000), OverflowPolicy::kDropNewest, clock);
  EXPECT_TRUE(q.push(numbered_frame(0, 10)).wake);
  (void)q.push(numbered_frame(1, 10));
  std::vector<FrameSpan> out;
  PopResult r = q.pop_batch(10, 64, out);
  EXPECT_TRUE(q.complete(r.bytes)) << "one frame still queued";
  r = q.pop_batch(10, 64, out);
  EXPECT_FALSE(q.complete(r.bytes)) << "empty: the writer can stop";
  EXPECT_TRUE(q.push(numbered_frame(2, 10)).wake) << "and the next push wakes it";
}

TEST(ConnectionQueueTest, PopBatchRespectsByteBudgetButTakesAtLeastOneFrame) {
  ManualClock clock;
  ConnectionQueue q(limits(10000), OverflowPolicy::kDropNewest, clock);
  (void)q.push(numbered_frame(0, 300));
  (void)q.push(numbered_frame(1, 300));
  (void)q.push(numbered_frame(2, 300));
  std::vector<FrameSpan> out;
  PopResult r = q.pop_batch(100, 64, out);
  EXPECT_EQ(r.frames, 1u) << "a frame larger than the budget still goes out alone";
  r = q.pop_batch(650, 64, out);
  EXPECT_EQ(r.frames, 2u);
  EXPECT_EQ(q.stats().inflight_bytes, 900u);
  q.release(900);
  EXPECT_EQ(q.total_bytes(), 0u);
}

TEST(ConnectionQueueTest, DropNewestRefusesFramesOverTheHardLimit) {
  ManualClock clock;
  ConnectionQueue q(limits(100), OverflowPolicy::kDropNewest, clock);
  for (std::uint64_t i = 0; i < 12; ++i) (void)q.push(numbered_frame(i, 10));
  const QueueStats s = q.stats();
  EXPECT_EQ(s.queued_bytes, 100u);
  EXPECT_EQ(s.dropped[kHard], 2u);
  EXPECT_EQ(seqs(testing::drain_all(q)), (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(ConnectionQueueTest, DropOldestEvictsFromTheFront) {
  ManualClock clock;
  ConnectionQueue q(limits(100), OverflowPolicy::kDropOldest, clock);
  for (std::uint64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(q.push(numbered_frame(i, 10)).status, PushStatus::kQueued);
  }
  EXPECT_EQ(q.stats().dropped[kHard], 2u);
  EXPECT_EQ(seqs(testing::drain_all(q)), (std::vector<std::uint64_t>{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
}

TEST(ConnectionQueueTest, DropOldestNeverEvictsReplies) {
  ManualClock clock;
  ConnectionQueue q(limits(100), OverflowPolicy::kDropOldest, clock);
  (void)q.push(numbered_frame(100, 20, /*droppable=*/false));
  for (std::uint64_t i = 0; i < 10; ++i) (void)q.push(numbered_frame(i, 10));
  EXPECT_EQ(seqs(testing::drain_all(q)), (std::vector<std::uint64_t>{100, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(ConnectionQueueTest, DisconnectsSubscriberOverHardLimit) {
  ManualClock clock;
  ConnectionQueue q(limits(100), OverflowPolicy::kDisconnect, clock);
  for (std::uint64_t i = 0; i < 10; ++i) (void)q.push(numbered_frame(i, 10));
  std::vector<FrameSpan> out;
  ASSERT_EQ(q.pop_batch(30, 64, out).frames, 3u);  // 30 bytes in flight, 70 queued: full
  const PushResult r = q.push(numbered_frame(10, 10));
  EXPECT_EQ(r.status, PushStatus::kClosed);
  const QueueStats s = q.stats();
  EXPECT_TRUE(s.closed);
  EXPECT_TRUE(s.overflowed);
  EXPECT_EQ(s.dropped[kCut], 8u) << "the refused frame plus the 7 still queued";
  EXPECT_EQ(q.push(numbered_frame(14, 10)).status, PushStatus::kClosed);
  EXPECT_TRUE(q.pop_batch(30, 64, out).closed);
}

TEST(ConnectionQueueTest, InFlightBytesCountTowardTheLimit) {
  ManualClock clock;
  ConnectionQueue q(limits(100), OverflowPolicy::kDropNewest, clock);
  for (std::uint64_t i = 0; i < 10; ++i) (void)q.push(numbered_frame(i, 10));
  std::vector<FrameSpan> out;
  (void)q.pop_batch(1000, 1000, out);  // all 100 bytes handed to the "kernel"
  EXPECT_EQ(q.push(numbered_frame(10, 10)).status, PushStatus::kDropped);
  q.release(100);
  EXPECT_EQ(q.push(numbered_frame(11, 10)).status, PushStatus::kQueued);
}

TEST(ConnectionQueueTest, SoftLimitAppliesOnlyAfterBeingExceededForTheDuration) {
  ManualClock clock;
  ConnectionQueue q(limits(1000, 100, 10s), OverflowPolicy::kDisconnect, clock);
  for (std::uint64_t i = 0; i < 15; ++i) {
    ASSERT_EQ(q.push(numbered_frame(i, 10)).status, PushStatus::kQueued);  // 150 > soft, timer starts
  }
  clock.advance(9s);
  EXPECT_EQ(q.push(numbered_frame(15, 10)).status, PushStatus::kQueued);
  clock.advance(1s);
  EXPECT_EQ(q.push(numbered_frame(16, 10)).status, PushStatus::kClosed);
  EXPECT_TRUE(q.stats().overflowed);
}

TEST(ConnectionQueueTest, DippingBelowSoftLimitRestartsTheSoftTimer) {
  ManualClock clock;
  ConnectionQueue q(limits(1000, 100, 10s), OverflowPolicy::kDisconnect, clock);
  for (std::uint64_t i = 0; i < 15; ++i) (void)q.push(numbered_frame(i, 10));
  clock.advance(9s);
  (void)testing::drain_all(q);                                                 // back under the soft limit
  for (std::uint64_t i = 0; i < 15; ++i) (void)q.push(numbered_frame(i, 10));  // timer restarts
  clock.advance(9s);
  EXPECT_EQ(q.push(numbered_frame(99, 10)).status, PushStatus::kQueued);
  clock.advance(1s);
  EXPECT_EQ(q.push(numbered_frame(100, 10)).status, PushStatus::kClosed);
}

TEST(ConnectionQueueTest, SoftLimitUnderDropOldestTrimsBackToTheSoftLimit) {
  ManualClock clock;
  ConnectionQueue q(limits(1000, 100, 5s), OverflowPolicy::kDropOldest, clock);
  for (std::uint64_t i = 0; i < 20; ++i) (void)q.push(numbered_frame(i, 10));
  clock.advance(5s);
  EXPECT_EQ(q.push(numbered_frame(20, 10)).status, PushStatus::kQueued);
  const QueueStats s = q.stats();
  EXPECT_EQ(s.queued_bytes, 100u);
  EXPECT_EQ(s.dropped[kSoft], 11u);
  EXPECT_EQ(s.dropped[kHard], 0u);
}

TEST(ConnectionQueueTest, ReplyOverTheHardLimitClosesEvenUnderDropNewest) {
  // A client that never reads its replies cannot be helped by dropping messages.
  ManualClock clock;
  ConnectionQueue q(limits(100), OverflowPolicy::kDropNewest, clock);
  for (std::uint64_t i = 0; i < 9; ++i) (void)q.push(numbered_frame(i, 10, false));
  EXPECT_EQ(q.push(numbered_frame(9, 20, false)).status, PushStatus::kClosed);
}

TEST(ConnectionQueueTest, TellsTheReaderAboutLossOnceThereIsRoom) {
  ManualClock clock;
  ConnectionQueue q(limits(1000), OverflowPolicy::kDropNewest, clock);
  for (std::uint64_t i = 0; i < 103; ++i) (void)q.push(numbered_frame(i, 10));
  ASSERT_EQ(q.stats().dropped[kHard], 3u);
  // Nothing is said while the queue is still full.
  std::vector<FrameSpan> out;
  PopResult r = q.pop_batch(10, 1, out);
  q.release(r.bytes);
  EXPECT_EQ(q.stats().notices, 0u);
  const std::vector<FrameSpan> rest = testing::drain_all(q);
  ASSERT_EQ(q.stats().notices, 1u);
  ASSERT_FALSE(rest.empty());
  // docs/broker.md "Loss notices", spelled out rather than encoded by the code under test.
  EXPECT_EQ(rest.back().view(),
            "*3\r\n$7\r\nmessage\r\n$17\r\n__ringcast__:loss\r\n$33\r\nlost=3 total=3 policy=drop-newest\r\n");
  EXPECT_FALSE(rest.back().block->droppable());
  // Only once: no further notice without further loss.
  (void)q.push(numbered_frame(500, 10));
  const std::vector<FrameSpan> after = testing::drain_all(q);
  EXPECT_EQ(after.size(), 1u);
  EXPECT_EQ(q.stats().notices, 1u);
}

TEST(ConnectionQueueTest, UpstreamLossIsNoticedAheadOfTheNextMessage) {
  ManualClock clock;
  ConnectionQueue q(limits(1000), OverflowPolicy::kDropNewest, clock);
  (void)q.push(numbered_frame(1, 10));
  EXPECT_FALSE(q.note_upstream_loss(4));  // the writer is already armed by the push
  (void)q.push(numbered_frame(2, 10));
  const std::vector<FrameSpan> frames = testing::drain_all(q);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[1].view(),
            encode_message(WireFormat::kResp2, kLossChannel, "lost=4 total=4 policy=drop-newest upstream=4")->view());
  EXPECT_EQ(q.stats().notices, 1u);
  // On an idle queue the caller is told to wake the writer.
  EXPECT_TRUE(q.note_upstream_loss(1));
  EXPECT_EQ(testing::drain_all(q).back().view(),
            encode_message(WireFormat::kResp2, kLossChannel, "lost=1 total=5 policy=drop-newest upstream=1")->view());
  q.close();
  EXPECT_FALSE(q.note_upstream_loss(1));
}

TEST(ConnectionQueueTest, LossNoticeUsesTheConnectionsProtocol) {
  ManualClock clock;
  ConnectionQueue q(limits(1000), OverflowPolicy::kDropOldest, clock);
  q.set_format(WireFormat::kResp3);
  for (std::uint64_t i = 0; i < 101; ++i) (void)q.push(numbered_frame(i, 10));
  const std::vector<FrameSpan> frames = testing::drain_all(q);
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.back().view(),
            ">3\r\n$7\r\nmessage\r\n$17\r\n__ringcast__:loss\r\n$33\r\nlost=1 total=1 policy=drop-oldest\r\n");
}

TEST(ConnectionQueueTest, LossNoticeReachesAWebSocketConnectionAsAJsonTextFrame) {
  ManualClock clock;
  ConnectionQueue q(limits(1000), OverflowPolicy::kDropOldest, clock);
  q.set_format(WireFormat::kJson);
  for (std::uint64_t i = 0; i < 101; ++i) (void)q.push(numbered_frame(i, 10));
  const std::int64_t before = wall_clock_ms();
  const std::vector<FrameSpan> frames = testing::drain_all(q);
  const std::int64_t after = wall_clock_ms();
  ASSERT_FALSE(frames.empty());
  // docs/broker.md "JSON deliveries": one unmasked text frame (FIN, opcode 1;
  // 141 bytes, so a 16-bit length) holding the notice as a message with id 0.
  // Only the timestamp (wall-clock ms when it was queued, 13 digits) varies.
  const std::string_view f = frames.back().view();
  const std::string_view head =
      "\x81\x7e\x00\x8d"  // a NUL inside: a string_view literal, not strlen
      R"({"type":"message","topic":"__ringcast__:loss","payload":"lost=1 total=1 policy=drop-oldest","timestamp":)"sv;
  const std::string_view tail = R"(,"message_id":0,"qos":0})";
  ASSERT_EQ(f.size(), head.size() + 13 + tail.size()) << f;
  EXPECT_EQ(f.substr(0, head.size()), head);
  EXPECT_EQ(f.substr(f.size() - tail.size()), tail);
  const std::string ts(f.substr(head.size(), 13));
  ASSERT_EQ(ts.find_first_not_of("0123456789"), std::string::npos) << ts;
  EXPECT_GE(std::stoll(ts), before);
  EXPECT_LE(std::stoll(ts), after);
}

// QoS 1 losses (invariant 9): told at once while there is room; owed, and
// coalesced into one notice per kind and channel, while there is none.
TEST(ConnectionQueueTest, QosOneLossesAreToldAtOnceWithRoomAndCoalescedWithout) {
  ManualClock clock;
  ConnectionQueue q(limits(1000), OverflowPolicy::kDropOldest, clock);
  const auto notice = [](std::string_view text) { return encode_message(WireFormat::kResp2, kLossChannel, text); };
  EXPECT_TRUE(q.note_qos1_loss(Qos1Loss::kWindowDropped, "t", 1, 1, 0));
  std::vector<FrameSpan> frames = testing::drain_all(q);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].view(), notice("window-dropped topic=t message_id=1 total=1")->view());
  // Over half the limit: nothing more is queued, however many are lost.
  (void)q.push(numbered_frame(0, 600));
  for (std::uint64_t id = 2; id <= 500; ++id) (void)q.note_qos1_loss(Qos1Loss::kWindowDropped, "t", id, id, 0);
  (void)q.note_qos1_loss(Qos1Loss::kExpired, "t", 7, 1, 3);
  (void)q.note_qos1_loss(Qos1Loss::kWindowDropped, "u", 9, 501, 0);
  EXPECT_EQ(q.stats().queued_frames, 1u);
  EXPECT_TRUE(q.complete(0)) << "the writer keeps running while a notice is owed";
  frames = testing::drain_all(q);
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[1].view(),
            notice("window-dropped topic=t message_id=2 total=500 count=499 last_message_id=500")->view());
  EXPECT_EQ(frames[2].view(), notice("expired topic=t message_id=7 sends=3 total=1")->view());
  EXPECT_EQ(frames[3].view(), notice("window-dropped topic=u message_id=9 total=501")->view());
  EXPECT_FALSE(frames[1].block->droppable());
  EXPECT_EQ(q.stats().notices, 4u);
  EXPECT_FALSE(q.complete(0));
  q.close();
  EXPECT_FALSE(q.note_qos1_loss(Qos1Loss::kExpired, "t", 8, 2, 3));
}

TEST(ConnectionQueueTest, ARunOfOneBlockIsOneSpanAndOneReference) {
  ManualClock clock;
  ConnectionQueue q(limits(1000), OverflowPolicy::kDropNewest, clock);
  const FrameRef run = testing::numbered_run(0, 5, 10);
  EXPECT_TRUE(q.push(run).wake);
  EXPECT_EQ(run.use_count(), 2u) << "the queue holds one reference for all five frames";
  EXPECT_EQ(q.push(testing::numbered_run(5, 2, 10)).status, PushStatus::kQueued);
  const QueueStats s = q.stats();
  EXPECT_EQ(s.queued_frames, 7u);
  EXPECT_EQ(s.queued_bytes, 70u);
  std::vector<FrameSpan> out;
  const PopResult r = q.pop_batch(1000, 1000, out);
  EXPECT_EQ(r.frames, 7u);
  ASSERT_EQ(out.size(), 2u) << "one span per block";
  EXPECT_EQ(out[0].count, 5u);
  EXPECT_EQ(out[0].data(), run->data()) << "the span is the block's bytes, not a copy";
  EXPECT_EQ(out[0].size(), 50u);
  EXPECT_EQ(seqs(out), (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(ConnectionQueueTest, PopSplitsASpanAtTheLastFrameWithinTheBudget) {
  ManualClock clock;
  ConnectionQueue q(limits(1000), OverflowPolicy::kDropNewest, clock);
  (void)q.push(testing::numbered_run(0, 4, 10));
  std::vector<FrameSpan> out;
  PopResult r = q.pop_batch(25, 64, out);
  EXPECT_EQ(r.frames, 2u);
  EXPECT_EQ(r.bytes, 20u);
  EXPECT_TRUE(r.more);
  r = q.pop_batch(5, 64, out);
  EXPECT_EQ(r.frames, 1u) << "at least one frame, even over the budget";
  r = q.pop_batch(1000, 64, out);
  EXPECT_EQ(r.frames, 1u);
  EXPECT_EQ(seqs(out), (std::vector<std::uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(q.stats().inflight_bytes, 40u);
}

TEST(ConnectionQueueTest, PoliciesApplyToEachFrameOfARun) {
  ManualClock clock;
  ConnectionQueue newest(limits(100), OverflowPolicy::kDropNewest, clock);
  EXPECT_EQ(newest.push(testing::numbered_run(0, 12, 10)).status, PushStatus::kDropped);
  EXPECT_EQ(newest.stats().dropped[kHard], 2u);
  EXPECT_EQ(seqs(testing::drain_all(newest)), (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));

  ConnectionQueue oldest(limits(100), OverflowPolicy::kDropOldest, clock);
  EXPECT_EQ(oldest.push(testing::numbered_run(0, 12, 10)).status, PushStatus::kQueued);
  EXPECT_EQ(oldest.stats().dropped[kHard], 2u);
  EXPECT_EQ(seqs(testing::drain_all(oldest)), (std::vector<std::uint64_t>{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));

  ConnectionQueue cut(limits(100), OverflowPolicy::kDisconnect, clock);
  const PushResult r = cut.push(testing::numbered_run(0, 12, 10));
  EXPECT_EQ(r.status, PushStatus::kClosed);
  EXPECT_TRUE(r.wake);
  EXPECT_EQ(cut.stats().dropped[kCut], 11u) << "the frame that overflowed plus the 10 queued";
}

TEST(ConnectionQueueTest, APartlyQueuedBlockIsCopiedSoDroppedFramesAreNotKeptAlive) {
  ManualClock clock;
  ConnectionQueue q(limits(100), OverflowPolicy::kDropNewest, clock);
  (void)q.push(numbered_frame(100, 80));
  const FrameRef run = testing::numbered_run(0, 10, 10);  // 100 bytes; only 2 frames fit
  EXPECT_EQ(q.push(run).status, PushStatus::kDropped);
  EXPECT_EQ(run.use_count(), 1u) << "the queue holds a copy of the 2 frames, not the 100-byte block";
  const auto out = testing::drain_all(q);
  EXPECT_EQ(seqs(out), (std::vector<std::uint64_t>{100, 0, 1}));

  // A block queued whole stays shared, even when older frames were evicted for it.
  ConnectionQueue oldest(limits(100), OverflowPolicy::kDropOldest, clock);
  (void)oldest.push(numbered_frame(100, 80));
  const FrameRef whole = testing::numbered_run(0, 5, 10);
  (void)oldest.push(whole);
  EXPECT_EQ(oldest.stats().dropped[kHard], 1u);
  EXPECT_EQ(whole.use_count(), 2u);
}

TEST(ConnectionQueueTest, DropOldestEvictsFromTheMiddleOfASpanBehindAReply) {
  ManualClock clock;
  ConnectionQueue q(limits(100), OverflowPolicy::kDropOldest, clock);
  (void)q.push(numbered_frame(100, 20, /*droppable=*/false));
  (void)q.push(testing::numbered_run(0, 8, 10));  // 100 bytes: full
  (void)q.push(testing::numbered_run(8, 3, 10));
  EXPECT_EQ(q.stats().dropped[kHard], 3u);
  EXPECT_EQ(seqs(testing::drain_all(q)), (std::vector<std::uint64_t>{100, 3, 4, 5, 6, 7, 8, 9, 10}));
}

// A run pushed as one block must behave exactly as its frames pushed one by one:
// same frames written, same drops per reason, same loss notices, same wakeups,
// whatever the policy, the limits, the frame sizes and the pop budgets.
struct RandomRun {
  std::uint64_t seed;
  OverflowPolicy policy;
  bool soft;
};

class BlockEquivalenceTest : public ::testing::TestWithParam<RandomRun> {};

TEST_P(BlockEquivalenceTest, ARunBehavesAsItsFramesPushedOneByOne) {
  const RandomRun p = GetParam();
  std::mt19937_64 rng(p.seed);
  ManualClock clock;
  const QueueLimits lim = p.soft ? limits(4000, 1500, 5s) : limits(2000);
  ConnectionQueue blocks(lim, p.policy, clock);
  ConnectionQueue frames(lim, p.policy, clock);
  std::vector<FrameSpan> out_blocks;
  std::vector<FrameSpan> out_frames;
  std::uint64_t seq = 0;
  for (int step = 0; step < 3000 && !blocks.closed(); ++step) {
    const auto op = rng() % 10;
    if (op < 5) {  // publish a run of 1-40 frames of 8-200 bytes
      const auto count = static_cast<std::uint32_t>(1 + rng() % 40);
      std::vector<std::uint32_t> sizes;
      for (std::uint32_t i = 0; i < count; ++i) sizes.push_back(static_cast<std::uint32_t>(8 + rng() % 193));
      FrameRef run = FrameRef::allocate_frames(sizes, /*droppable=*/true);
      bool any_wake = false;
      PushStatus last = PushStatus::kQueued;
      for (std::uint32_t i = 0; i < count; ++i) {
        const std::uint64_t n = seq++;
        char* at = run.mutable_data() + run->begin(i);
        std::memset(at, 'x', sizes[i]);
        std::memcpy(at, &n, sizeof n);
        FrameRef one = FrameRef::copy_of(run->frame(i), true);
        const PushResult r = frames.push(one);
        any_wake = any_wake || r.wake;
        if (r.status != PushStatus::kQueued && last != PushStatus::kClosed) last = r.status;
      }
      const PushResult r = blocks.push(run);
      ASSERT_EQ(r.wake, any_wake) << "step " << step;
      ASSERT_EQ(r.status == PushStatus::kClosed, last == PushStatus::kClosed) << "step " << step;
    } else if (op < 6) {  // a reply (never dropped), from a client that reads its replies
      if (frames.total_bytes() + 40 > lim.hard_bytes) continue;
      const std::uint64_t n = 1'000'000 + seq++;
      (void)blocks.push(numbered_frame(n, 40, /*droppable=*/false));
      (void)frames.push(numbered_frame(n, 40, /*droppable=*/false));
    } else if (op < 9) {  // the writer takes a batch and writes it
      const std::size_t budget = 1 + rng() % 3000;
      const PopResult a = blocks.pop_batch(budget, 1024, out_blocks);
      const PopResult b = frames.pop_batch(budget, 1024, out_frames);
      ASSERT_EQ(a.bytes, b.bytes) << "step " << step;
      ASSERT_EQ(a.frames, b.frames) << "step " << step;
      ASSERT_EQ(a.closed, b.closed) << "step " << step;
      ASSERT_EQ(blocks.complete(a.bytes), frames.complete(b.bytes)) << "step " << step;
    } else {
      clock.advance(std::chrono::seconds(rng() % 3));
    }
    const QueueStats a = blocks.stats();
    const QueueStats b = frames.stats();
    ASSERT_EQ(a.queued_bytes, b.queued_bytes) << "step " << step;
    ASSERT_EQ(a.queued_frames, b.queued_frames) << "step " << step;
    ASSERT_EQ(a.dropped, b.dropped) << "step " << step;
    ASSERT_EQ(a.notices, b.notices) << "step " << step;
    ASSERT_EQ(a.closed, b.closed) << "step " << step;
  }
  EXPECT_EQ(testing::concat(out_blocks), testing::concat(out_frames));
  EXPECT_EQ(seqs(out_blocks), seqs(out_frames));
  // The run exercised what it is for: an overflow that closed the queue under
  // disconnect; under the drop policies, many batches written, messages lost
  // and the reader told.
  const QueueStats st = frames.stats();
  if (p.policy == OverflowPolicy::kDisconnect) {
    EXPECT_TRUE(st.overflowed);
  } else {
    EXPECT_GT(out_frames.size(), 50u);
    EXPECT_GT(st.dropped[kHard] + st.dropped[kSoft], 0u);
    EXPECT_GT(st.notices, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Policies, BlockEquivalenceTest,
    ::testing::Values(RandomRun{1, OverflowPolicy::kDropNewest, false}, RandomRun{2, OverflowPolicy::kDropNewest, true},
                      RandomRun{3, OverflowPolicy::kDropOldest, false}, RandomRun{4, OverflowPolicy::kDropOldest, true},
                      RandomRun{5, OverflowPolicy::kDisconnect, false}, RandomRun{6, OverflowPolicy::kDisconnect, true},
                      RandomRun{7, OverflowPolicy::kDropOldest, false},
                      RandomRun{8, OverflowPolicy::kDropNewest, false}),
    [](const ::testing::TestParamInfo<RandomRun>& i) {
      const char* policy = i.param.policy == OverflowPolicy::kDropNewest   ? "DropNewest"
                           : i.param.policy == OverflowPolicy::kDropOldest ? "DropOldest"
                                                                           : "Disconnect";
      return "Seed" + std::to_string(i.param.seed) + policy + (i.param.soft ? "SoftLimit" : "HardLimit");
    });

// Seed 002: publisher 5/tick, reader 1/tick (drained before the tick's publishes),
// a queue of 10 messages, 200 ticks.
struct SeedRun {
  std::vector<std::uint64_t> delivered;
  std::uint64_t dropped = 0;
  std::size_t queued = 0;
  std::vector<std::uint64_t> final_queue;
};

// With `as_runs`, each tick's messages arrive as one block (one push), as a
// publisher's pipelined PUBLISHes do; the arithmetic must not change.
SeedRun run_seed_002(OverflowPolicy policy, std::uint64_t rate = 5, std::size_t capacity = 10, std::uint64_t drain = 1,
                     int ticks = 200, bool as_runs = false) {
  constexpr std::size_t kFrame = 100;
  ManualClock clock;
  ConnectionQueue q(limits(capacity * kFrame), policy, clock);
  SeedRun run;
  std::uint64_t seq = 0;
  for (int tick = 0; tick < ticks; ++tick) {
    std::vector<FrameSpan> out;
    for (std::uint64_t d = 0; d < drain; ++d) {
      const PopResult r = q.pop_batch(kFrame, 1, out);
      q.release(r.bytes);
    }
    for (std::uint64_t n : seqs(out)) run.delivered.push_back(n);
    if (as_runs) {
      (void)q.push(testing::numbered_run(seq, static_cast<std::uint32_t>(rate), kFrame));
      seq += rate;
    } else {
      for (std::uint64_t k = 0; k < rate; ++k) (void)q.push(numbered_frame(seq++, kFrame));
    }
  }
  const QueueStats s = q.stats();
  run.dropped = s.dropped[kHard];
  run.queued = s.queued_frames;
  EXPECT_EQ(s.notices, 0u) << "the queue never had room for a notice";
  for (const FrameSpan& f : testing::drain_all(q)) {
    if (!f.block->droppable()) continue;  // skip the loss notice
    for (std::uint64_t n : seqs({f})) run.final_queue.push_back(n);
  }
  return run;
}

class SeedTest : public ::testing::TestWithParam<bool> {};

TEST_P(SeedTest, BothDropPoliciesLoseExactly791Of1000) {
  const SeedRun oldest = run_seed_002(OverflowPolicy::kDropOldest, 5, 10, 1, 200, GetParam());
  const SeedRun newest = run_seed_002(OverflowPolicy::kDropNewest, 5, 10, 1, 200, GetParam());
  for (const SeedRun* r : {&oldest, &newest}) {
    EXPECT_EQ(r->dropped, 791u);
    EXPECT_EQ(r->delivered.size(), 199u);
    EXPECT_EQ(r->queued, 10u);
    EXPECT_EQ(r->dropped + r->delivered.size() + r->queued, 1000u);
  }
  // Same count, opposite ends of the stream.
  EXPECT_EQ(newest.delivered.back(), 945u);
  EXPECT_EQ(oldest.delivered.back(), 985u);
  EXPECT_EQ(std::vector<std::uint64_t>(newest.delivered.begin(), newest.delivered.begin() + 8),
            (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(std::vector<std::uint64_t>(oldest.delivered.begin(), oldest.delivered.begin() + 4),
            (std::vector<std::uint64_t>{0, 1, 5, 10}));
  EXPECT_EQ(oldest.final_queue.back(), 999u) << "drop-oldest ends holding the newest messages";
  EXPECT_LT(newest.final_queue.back(), 999u);
}

INSTANTIATE_TEST_SUITE_P(FramesAndRuns, SeedTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Runs" : "Frames"; });

// Seed 002 §6.4 through the index: the same publisher (5/tick), a slow subscriber
// (1/tick) and a healthy one (5/tick), both with the block policy and a queue of
// 10 messages, 200 ticks, drained before the tick's publishes. Nothing is
// dropped: 791 publishes are refused for the whole channel, the same 791 the
// drop policies lose, and the healthy subscriber pays: it receives 208, not 995.
TEST(SeedTest, BlockRefuses791Of1000AndTheHealthySubscriberReceives208) {
  const std::string payload(100, 'p');
  const std::size_t frame = encode_message(WireFormat::kResp2, "t", payload)->size();
  const QueueLimits ten_messages = limits(10 * frame);
  SubscriptionIndex index;
  testing::FakeSubscriber slow(WireFormat::kResp2, ten_messages, OverflowPolicy::kBlock);
  testing::FakeSubscriber healthy(WireFormat::kResp2, ten_messages, OverflowPolicy::kBlock);
  {
    auto lock = index.lock_for_update();
    index.add_channel(slow, "t");
    index.add_channel(healthy, "t");
  }
  std::uint64_t refused = 0;
  std::uint64_t published = 0;
  std::size_t slow_received = 0;
  std::size_t healthy_received = 0;
  auto drain = [frame](ConnectionQueue& q, std::size_t n) {
    std::vector<FrameSpan> out;
    const PopResult r = q.pop_batch(n * frame, 1024, out);
    q.release(r.bytes);
    return r.frames;
  };
  for (int tick = 0; tick < 200; ++tick) {
    slow_received += drain(slow.queue(), 1);
    healthy_received += drain(healthy.queue(), 5);
    for (int k = 0; k < 5; ++k) {
      const Message m{"t", payload};
      std::size_t receivers = 0;
      if (index.publish({&m, 1}, false, {&receivers, 1}).status == PublishOutcome::Status::kRefused) {
        ++refused;
      } else {
        EXPECT_EQ(receivers, 2u);
        ++published;
      }
    }
  }
  EXPECT_EQ(refused, 791u);
  EXPECT_EQ(published + refused, 1000u);
  EXPECT_EQ(slow_received, 199u);
  EXPECT_EQ(slow.queue().stats().queued_frames, 10u);
  EXPECT_EQ(healthy_received, 208u);
  EXPECT_EQ(healthy.queue().stats().queued_frames, 1u);
  for (const testing::FakeSubscriber* s : {&slow, &healthy}) {
    const QueueStats st = s->queue().stats();
    EXPECT_EQ(st.dropped[kHard] + st.dropped[kSoft] + st.dropped[kCut], 0u) << "block never drops";
    EXPECT_EQ(st.notices, 0u);
    EXPECT_FALSE(st.closed);
  }
  auto lock = index.lock_for_update();
  index.remove_all(slow);
  index.remove_all(healthy);
}

TEST(ConnectionQueueTest, BlockRefusalIsTopicWideAndLeavesEveryQueueUntouched) {
  const std::string payload(100, 'p');
  const std::size_t frame = encode_message(WireFormat::kResp2, "t", payload)->size();
  SubscriptionIndex index;
  testing::FakeSubscriber blocker(WireFormat::kResp2, limits(2 * frame), OverflowPolicy::kBlock);
  testing::FakeSubscriber dropper(WireFormat::kResp2, limits(100 * frame), OverflowPolicy::kDropNewest);
  testing::FakeSubscriber other_channel(WireFormat::kResp2, limits(100 * frame), OverflowPolicy::kDisconnect);
  {
    auto lock = index.lock_for_update();
    index.add_channel(blocker, "t");
    index.add_channel(dropper, "t");
    index.add_channel(other_channel, "u");
  }
  // A run of five on "t", one on "u", in one call: the blocker has room for two,
  // so messages 0 and 1 reach both subscribers of "t" and 2..4 reach nobody;
  // "u" is not affected.
  const std::vector<Message> msgs{{"t", payload}, {"t", payload}, {"t", payload},
                                  {"t", payload}, {"t", payload}, {"u", payload}};
  EXPECT_EQ(testing::publish_each(index, msgs),
            (std::vector<std::size_t>{2, 2, testing::kRefused, testing::kRefused, testing::kRefused, 1}));
  EXPECT_EQ(blocker.queue().stats().queued_frames, 2u);
  EXPECT_EQ(dropper.queue().stats().queued_frames, 2u) << "never delivered to some and not others";
  EXPECT_EQ(other_channel.queue().stats().queued_frames, 1u);
  // One call stops at the first refused message.
  std::vector<std::size_t> receivers(msgs.size(), 7u);
  const PublishOutcome refused = index.publish(msgs, false, receivers);
  EXPECT_EQ(refused.published, 0u);
  EXPECT_EQ(refused.status, PublishOutcome::Status::kRefused);
  EXPECT_EQ(receivers[1], 7u) << "later slots untouched";
  // Room again: published.
  (void)testing::drain_all(blocker.queue());
  EXPECT_EQ(index.publish(msgs, false, receivers).published, 2u);
  auto lock = index.lock_for_update();
  index.remove_all(blocker);
  index.remove_all(dropper);
  index.remove_all(other_channel);
}

// Records on_room() calls.
class CountingWaiter final : public PaceWaiter {
 public:
  void on_room() noexcept override { ++told; }
  int told = 0;
};

TEST(FlowControlTest, QueueOverThePaceMarkPacesUntilItDrainsToHalf) {
  ManualClock clock;
  FlowControl flow(1000, 100ms);
  ConnectionQueue q(limits(100'000), OverflowPolicy::kDisconnect, clock, &flow);
  CountingWaiter w;
  EXPECT_FALSE(flow.wait_async(w)) << "no pressure: nothing to wait for";
  for (std::uint64_t i = 0; i < 10; ++i) (void)q.push(numbered_frame(i, 100));
  EXPECT_FALSE(flow.pressured()) << "exactly at the mark";
  (void)q.push(numbered_frame(10, 100));
  EXPECT_TRUE(flow.pressured());
  ASSERT_TRUE(flow.wait_async(w));
  std::vector<FrameSpan> out;
  const PopResult r = q.pop_batch(600, 1024, out);  // 6 frames in flight: still 1100 bytes
  EXPECT_TRUE(flow.pressured());
  q.release(r.bytes);  // 500 left: half the mark
  EXPECT_FALSE(flow.pressured());
  EXPECT_EQ(w.told, 1);
  EXPECT_EQ(flow.stats().slow_marked, 0u);
}

TEST(FlowControlTest, QueueOverTheMarkForMaxStallIsCalledSlowAndStopsPacing) {
  ManualClock clock;
  FlowControl flow(1000, 100ms);
  ConnectionQueue q(limits(100'000), OverflowPolicy::kDropNewest, clock, &flow);
  for (std::uint64_t i = 0; i < 11; ++i) (void)q.push(numbered_frame(i, 100));
  EXPECT_TRUE(flow.pressured());
  clock.advance(99ms);
  (void)q.push(numbered_frame(11, 100));
  EXPECT_TRUE(flow.pressured());
  clock.advance(1ms);
  (void)q.push(numbered_frame(12, 100));
  EXPECT_FALSE(flow.pressured()) << "a stuck reader stalls publishers for max_stall at most";
  EXPECT_EQ(flow.stats().slow_marked, 1u);
  for (std::uint64_t i = 13; i < 50; ++i) (void)q.push(numbered_frame(i, 100));
  EXPECT_FALSE(flow.pressured()) << "slow: its own policy and limits apply now";
  (void)testing::drain_all(q);
  (void)q.push(numbered_frame(50, 100));
  for (std::uint64_t i = 51; i < 62; ++i) (void)q.push(numbered_frame(i, 100));
  EXPECT_TRUE(flow.pressured()) << "drained: it paces again";
  q.close();
  EXPECT_FALSE(flow.pressured()) << "a closed queue paces nobody";
}

TEST(FlowControlTest, RepliesDoNotStartPacing) {
  ManualClock clock;
  FlowControl flow(1000, 100ms);
  ConnectionQueue q(limits(100'000), OverflowPolicy::kDisconnect, clock, &flow);
  for (std::uint64_t i = 0; i < 20; ++i) (void)q.push(numbered_frame(i, 100, /*droppable=*/false));
  EXPECT_FALSE(flow.pressured());
}

TEST(ConnectionQueueTest, PoliciesAgreeOnLossCountAcrossConfigurations) {
  for (std::uint64_t rate : {1u, 2u, 3u, 5u, 8u}) {
    for (std::size_t capacity : {1u, 4u, 10u, 50u}) {
      for (std::uint64_t drain : {1u, 2u, 3u}) {
        const SeedRun a = run_seed_002(OverflowPolicy::kDropOldest, rate, capacity, drain, 100);
        const SeedRun b = run_seed_002(OverflowPolicy::kDropNewest, rate, capacity, drain, 100);
        EXPECT_EQ(a.dropped, b.dropped) << rate << " " << capacity << " " << drain;
        if (rate <= drain && capacity >= rate) {
          EXPECT_EQ(a.dropped, 0u) << "nothing is lost when the reader keeps up";
        }
      }
    }
  }
}

}  // namespace
}  // namespace ringcast::broker

namespace ringcast::broker {
namespace {

// Conflation (docs/broker.md, "Overflow"): message frames as the index encodes
// them, so the queue can tell their channels apart.
FrameRef msg(std::string_view channel, std::string_view payload) {
  return encode_message(WireFormat::kResp2, channel, payload);
}

// A RESP2 loss notice as docs/broker.md "Loss notices" spells it (not encoded
// by the code under test).
std::string notice(std::string_view text) {
  return "*3\r\n$7\r\nmessage\r\n$17\r\n__ringcast__:loss\r\n$" + std::to_string(text.size()) + "\r\n" +
         std::string(text) + "\r\n";
}

std::string two_digits(int i) {
  return std::string(1, static_cast<char>('0' + i / 10)) + static_cast<char>('0' + i % 10);
}

TEST(ConflationTest, KeyIsKindPatternAndChannel) {
  EXPECT_EQ(resp::conflation_key(msg("ab", "x")->view()), "*3\r\n$7\r\nmessage\r\n$2\r\nab\r\n");
  const Message m{"ab", "payload"};
  EXPECT_EQ(resp::conflation_key(resp::encode_resp3_run(DeliveryRun{DeliveryKind::kPattern, "a*", {&m, 1}})->view()),
            ">4\r\n$8\r\npmessage\r\n$2\r\na*\r\n$2\r\nab\r\n");
  EXPECT_EQ(resp::conflation_key(resp::encode_resp2_run(DeliveryRun{DeliveryKind::kShard, {}, {&m, 1}})->view()),
            "*3\r\n$8\r\nsmessage\r\n$2\r\nab\r\n");
  EXPECT_EQ(resp::conflation_key("garbage"), "garbage");
  EXPECT_EQ(resp::conflation_key("*3\r\n$7\r\nmessage\r\n$9\r\nab\r\n"), "*3\r\n$7\r\nmessage\r\n$9\r\nab\r\n");
}

TEST(ConflationTest, KeepsTheNewestMessagePerChannelInPublishOrder) {
  ManualClock clock;
  const std::size_t size = msg("a", "00")->size();
  ConnectionQueue q(limits(10 * size), OverflowPolicy::kConflate, clock);
  for (int i = 0; i < 30; ++i) (void)q.push(msg(std::string(1, "abc"[i % 3]), two_digits(i)));
  QueueStats st = q.stats();
  EXPECT_EQ(st.queued_frames, 3u);
  EXPECT_EQ(st.conflated, 27u);
  EXPECT_EQ(st.dropped, (std::array<std::uint64_t, kDropReasonCount>{}));
  EXPECT_EQ(testing::concat(testing::drain_all(q)),
            std::string(msg("a", "27")->view()) + std::string(msg("b", "28")->view()) +
                std::string(msg("c", "29")->view()) + notice("lost=27 total=27 policy=conflate conflated=27"));
  // Written out: the next messages queue as usual until the limit is met again.
  for (int i = 0; i < 10; ++i) (void)q.push(msg("a", two_digits(i)));
  EXPECT_EQ(q.stats().queued_frames, 10u);
  EXPECT_EQ(q.stats().conflated, 27u);
}

// Regression: the writer parked with a batch that left no room for one more
// frame, so every message meanwhile was dropped and none survived; the pop
// after that batch found nothing and disarmed the queue without queuing the
// notice (it ran while still conflating), so a subscriber counting its losses
// waited for it until some later publish.
TEST(ConflationTest, NoticeFollowsABatchInFlightThatLeftNoRoom) {
  ManualClock clock;
  const std::size_t size = msg("a", "00")->size();
  ConnectionQueue q(limits(10 * size), OverflowPolicy::kConflate, clock);
  for (int i = 0; i < 10; ++i) (void)q.push(msg(std::string(1, "ab"[i % 2]), two_digits(i)));
  std::vector<FrameSpan> batch;
  const PopResult b = q.pop_batch(10 * size, 1024, batch);  // the limit in flight: the writer parks
  ASSERT_EQ(b.frames, 10u);
  for (int i = 10; i < 30; ++i) {
    EXPECT_EQ(q.push(msg(std::string(1, "ab"[i % 2]), two_digits(i))).status, PushStatus::kDropped) << i;
  }
  ASSERT_TRUE(q.complete(b.bytes)) << "a notice is owed: the writer runs again";
  std::vector<FrameSpan> out;
  const PopResult r = q.pop_batch(10 * size, 1024, out);
  EXPECT_EQ(r.frames, 1u) << "that turn takes the notice";
  EXPECT_EQ(testing::concat(out), notice("lost=20 total=20 policy=conflate"));
  EXPECT_FALSE(q.complete(r.bytes));
}

// Regression: conflation took a paced queue back under the pace mark (not to
// half of it) while its writer's batch stayed in flight, and the max_stall
// check ran only over the mark: publishers were paced for max_stall after
// every input until the subscriber read (32 stalls, 6.4 s, in an ASan run of
// BrokerIntegrationTest.ConflatingSubscriberEndsOnTheNewestOfEachChannel's
// publishes on one busy CPU).
TEST(FlowControlTest, QueueTheOverflowPolicyTookUnderTheMarkIsCalledSlowAfterMaxStall) {
  ManualClock clock;
  const std::size_t size = msg("a", "00")->size();
  FlowControl flow(10 * size, 100ms);
  ConnectionQueue q(limits(20 * size), OverflowPolicy::kConflate, clock, &flow);
  for (int i = 0; i < 7; ++i) (void)q.push(msg(std::string(1, "ab"[i % 2]), two_digits(i)));
  std::vector<FrameSpan> batch;
  ASSERT_EQ(q.pop_batch(20 * size, 1024, batch).frames, 7u);  // in flight: the writer parks
  for (int i = 7; i < 40; ++i) (void)q.push(msg(std::string(1, "ab"[i % 2]), two_digits(i)));
  EXPECT_TRUE(flow.pressured());
  EXPECT_EQ(q.total_bytes(), 9 * size) << "conflated: under the mark, over half of it";
  clock.advance(100ms);
  (void)q.push(msg("a", "40"));
  EXPECT_FALSE(flow.pressured()) << "a stuck reader stalls publishers for max_stall at most";
  EXPECT_EQ(flow.stats().slow_marked, 1u);
}

TEST(ConflationTest, RepliesStayAndKeepTheirPlace) {
  ManualClock clock;
  const auto p = [](int i) { return two_digits(i) + std::string(62, '.'); };  // room for a notice
  const std::size_t size = msg("a", p(0))->size();
  ConnectionQueue q(limits(6 * size), OverflowPolicy::kConflate, clock);
  const std::string reply(size, '+');
  (void)q.push(msg("a", p(0)));
  (void)q.push(FrameRef::copy_of(reply, /*droppable=*/false));
  (void)q.push(msg("b", p(1)));
  for (int i = 2; i <= 4; ++i) (void)q.push(msg("a", p(i)));
  EXPECT_EQ(q.stats().conflated, 0u) << "6 frames fit";
  (void)q.push(msg("a", p(5)));
  EXPECT_EQ(testing::concat(testing::drain_all(q)), reply + std::string(msg("b", p(1))->view()) +
                                                        std::string(msg("a", p(5))->view()) +
                                                        notice("lost=4 total=4 policy=conflate conflated=4"));
}

TEST(ConflationTest, EvictsTheOldestWhenDistinctChannelsExceedTheLimit) {
  ManualClock clock;
  const std::string payload(64, 'x');  // big enough that half the limit has room for a notice
  const auto channel = [](int i) { return std::string(1, static_cast<char>('0' + i)); };
  const std::size_t size = msg(channel(0), payload)->size();
  ConnectionQueue q(limits(4 * size), OverflowPolicy::kConflate, clock);
  for (int i = 0; i < 8; ++i) (void)q.push(msg(channel(i), payload));
  const QueueStats st = q.stats();
  EXPECT_EQ(st.conflated, 0u);
  EXPECT_EQ(st.dropped[kHard], 4u);
  std::string want;
  for (int i = 4; i < 8; ++i) want += msg(channel(i), payload)->view();
  EXPECT_EQ(testing::concat(testing::drain_all(q)), want + notice("lost=4 total=4 policy=conflate"));
}

TEST(ConflationTest, ARunKeepsOnlyItsLastMessageAsAPrivateCopy) {
  ManualClock clock;
  std::vector<std::string> payloads;
  std::vector<Message> run;
  for (int i = 0; i < 100; ++i) payloads.push_back(two_digits(i));
  for (const std::string& p : payloads) run.push_back(Message{"a", p});
  const FrameRef block = resp::encode_resp2_run(DeliveryRun{DeliveryKind::kMessage, {}, run});
  ConnectionQueue q(limits(10 * msg("a", "00")->size()), OverflowPolicy::kConflate, clock);
  EXPECT_EQ(q.push(block).status, PushStatus::kQueued);
  EXPECT_EQ(q.stats().queued_frames, 1u);
  EXPECT_EQ(q.stats().conflated, 99u);
  EXPECT_EQ(block.use_count(), 1u) << "the queue holds a copy of the survivor, not the 100-message block";
  const auto out = testing::drain_all(q);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.front().view(), msg("a", "99")->view());
}

// A reader taking 2 frames per 7 published: every message is delivered,
// conflated or dropped exactly once, per channel in order, and the loss
// notices add up to the counters.
TEST(ConflationTest, CountsAreExactWithAReaderFallingBehind) {
  ManualClock clock;
  const std::size_t size = msg("a", "0000")->size();
  ConnectionQueue q(limits(10 * size), OverflowPolicy::kConflate, clock);
  constexpr int kCount = 3000;
  std::map<std::string, int> last_seen;
  std::uint64_t delivered = 0;
  std::uint64_t notice_lost = 0;
  std::uint64_t notice_conflated = 0;
  const auto read = [&](std::size_t budget) {
    std::vector<FrameSpan> out;
    const PopResult r = q.pop_batch(budget, 64, out);
    for (const FrameSpan& s : out) {
      for (std::uint32_t i = s.first; i < s.first + s.count; ++i) {
        const std::string f(s.block->frame(i));
        test::RespReply m;
        ASSERT_EQ(test::parse_reply(f.data(), f.size(), m), f.size()) << f;
        const std::string channel(m.elems[1].str);
        const std::string payload(m.elems[2].str);
        if (channel == kLossChannel) {
          unsigned long long lost = 0, total = 0, conflated = 0;
          char policy[32] = {};
          const int n = std::sscanf(payload.c_str(), "lost=%llu total=%llu policy=%31s conflated=%llu", &lost, &total,
                                    policy, &conflated);
          ASSERT_GE(n, 3) << payload;
          notice_lost += lost;
          notice_conflated += conflated;
          continue;
        }
        const int seq = std::stoi(payload);
        auto [it, fresh] = last_seen.try_emplace(channel, seq);
        if (!fresh) {
          EXPECT_GT(seq, it->second) << "per-channel order";
          it->second = seq;
        }
        ++delivered;
      }
    }
    q.release(r.bytes);
  };
  for (int i = 0; i < kCount; ++i) {
    char payload[8];
    std::snprintf(payload, sizeof payload, "%04d", i);
    (void)q.push(msg(std::string(1, "abcde"[i % 5]), payload));
    if (i % 7 == 6) read(2 * size);
  }
  for (int k = 0; k < 100; ++k) read(SIZE_MAX);  // drain, notices included
  const QueueStats st = q.stats();
  EXPECT_GT(st.conflated, 0u);
  EXPECT_EQ(delivered + st.conflated + st.dropped[kHard], static_cast<std::uint64_t>(kCount));
  EXPECT_EQ(notice_lost, st.conflated + st.dropped[kHard]);
  EXPECT_EQ(notice_conflated, st.conflated);
  for (int c = 0; c < 5; ++c) {
    EXPECT_EQ(last_seen[std::string(1, "abcde"[c])], kCount - 5 + c) << "the newest of each channel arrives";
  }
}

// Random pushes (single messages, runs, replies), pops, releases and policy
// switches: whatever the interleaving, each message is delivered, conflated or
// dropped exactly once, per channel in order, replies all arrive in order, and
// the notices add up to the counters.
std::string reply_text(int n) {
  std::string r = std::to_string(n);
  r.insert(r.begin(), '+');
  r += "\r\n";
  return r;
}

TEST(ConflationTest, RandomScheduleAccountsForEveryMessage) {
  ManualClock clock;
  std::mt19937 rng(12345);
  const std::size_t size = msg("a", "000000")->size();
  // Replies are never dropped: a queue whose in-flight bytes and replies fill the
  // limit is closed. The schedule releases often enough that this never happens.
  ConnectionQueue q(limits(48 * size), OverflowPolicy::kConflate, clock);
  std::map<std::string, int> last_seen;
  int next_seq = 0;
  int next_reply = 0;
  int replies_seen = 0;
  std::uint64_t delivered = 0, notice_lost = 0, notice_conflated = 0;
  std::vector<FrameSpan> inflight;
  std::size_t inflight_bytes = 0;
  const auto consume = [&](const std::vector<FrameSpan>& spans) {
    for (const FrameSpan& sp : spans) {
      for (std::uint32_t i = sp.first; i < sp.first + sp.count; ++i) {
        const std::string f(sp.block->frame(i));
        if (f[0] == '+') {
          EXPECT_EQ(f, reply_text(replies_seen)) << "replies in order, none lost";
          ++replies_seen;
          continue;
        }
        test::RespReply m;
        ASSERT_EQ(test::parse_reply(f.data(), f.size(), m), f.size()) << f;
        const std::string channel(m.elems[1].str);
        const std::string payload(m.elems[2].str);
        if (channel == kLossChannel) {
          unsigned long long lost = 0, total = 0, conflated = 0;
          char policy[32] = {};
          ASSERT_GE(std::sscanf(payload.c_str(), "lost=%llu total=%llu policy=%31s conflated=%llu", &lost, &total,
                                policy, &conflated),
                    3);
          notice_lost += lost;
          notice_conflated += conflated;
          continue;
        }
        const int seq = std::stoi(payload);
        auto [it, fresh] = last_seen.try_emplace(channel, seq);
        if (!fresh) {
          EXPECT_GT(seq, it->second) << "per-channel order on " << channel;
          it->second = seq;
        }
        ++delivered;
      }
    }
  };
  std::vector<std::string> payloads;
  std::vector<Message> run;
  for (int step = 0; step < 20000; ++step) {
    const auto op = static_cast<unsigned>(rng() % 100);
    if (op < 55) {
      char p[16];
      std::snprintf(p, sizeof p, "%06d", next_seq++);
      (void)q.push(msg(std::string(1, static_cast<char>('a' + rng() % 6)), p));
    } else if (op < 65) {  // a run of one channel, one block
      const std::string channel(1, static_cast<char>('a' + rng() % 6));
      payloads.clear();
      run.clear();
      const auto n = static_cast<unsigned>(2 + rng() % 12);
      for (unsigned k = 0; k < n; ++k) {
        char p[16];
        std::snprintf(p, sizeof p, "%06d", next_seq++);
        payloads.emplace_back(p);
      }
      for (const std::string& p : payloads) run.push_back(Message{channel, p});
      (void)q.push(resp::encode_resp2_run(DeliveryRun{DeliveryKind::kMessage, {}, run}));
    } else if (op < 70) {
      (void)q.push(FrameRef::copy_of(reply_text(next_reply++), /*droppable=*/false));
    } else if (op < 85) {
      std::vector<FrameSpan> out;
      const PopResult r = q.pop_batch(size * (1 + rng() % 6), 1 + rng() % 8, out);
      inflight_bytes += r.bytes;
      consume(out);
      for (FrameSpan& sp : out) inflight.push_back(std::move(sp));
    } else if (op < 98) {
      q.release(inflight_bytes);
      inflight_bytes = 0;
      inflight.clear();
    } else {
      q.set_policy(q.policy() == OverflowPolicy::kConflate ? OverflowPolicy::kDropOldest : OverflowPolicy::kConflate);
    }
    ASSERT_FALSE(q.closed()) << "replies always fit: messages are evicted for them";
  }
  q.release(inflight_bytes);
  for (int k = 0; k < 100; ++k) {
    std::vector<FrameSpan> out;
    const PopResult r = q.pop_batch(SIZE_MAX, SIZE_MAX, out);
    consume(out);
    q.release(r.bytes);
  }
  const QueueStats st = q.stats();
  EXPECT_EQ(st.queued_frames, 0u);
  EXPECT_EQ(st.queued_bytes + st.inflight_bytes, 0u);
  EXPECT_GT(st.conflated, 0u);
  EXPECT_GT(st.dropped[kHard], 0u);
  EXPECT_EQ(delivered + st.conflated + st.dropped[kHard], static_cast<std::uint64_t>(next_seq));
  EXPECT_EQ(notice_lost, st.conflated + st.dropped[kHard]);
  EXPECT_EQ(notice_conflated, st.conflated);
  EXPECT_EQ(replies_seen, next_reply);
}

// The cold channel's message stays in front, so each replaced hot message
// leaves a tombstone in the middle of the ring: they are compacted away, and
// the positions the key map holds stay right.
TEST(ConflationTest, TombstonesBehindAColdChannelAreCompacted) {
  ManualClock clock;
  const std::size_t size = msg("h", "0000000")->size();
  ConnectionQueue q(limits(16 * size), OverflowPolicy::kConflate, clock);
  (void)q.push(msg("c", "cold..."));
  for (int i = 0; i < 100000; ++i) {
    char p[16];
    std::snprintf(p, sizeof p, "%07d", i);
    (void)q.push(msg(i % 1000 == 999 ? "w" : "h", p));
  }
  const QueueStats st = q.stats();
  EXPECT_EQ(st.queued_frames, 3u);
  EXPECT_EQ(st.conflated, 100000u - 2u);
  EXPECT_EQ(testing::concat(testing::drain_all(q)),
            std::string(msg("c", "cold...")->view()) + std::string(msg("h", "0099998")->view()) +
                std::string(msg("w", "0099999")->view()) +
                notice("lost=99998 total=99998 policy=conflate conflated=99998"));
}

TEST(ConflationTest, AStuckReaderCostsOneMessagePerChannel) {
  ManualClock clock;
  const std::size_t size = msg("a", "0000000")->size();
  ConnectionQueue q(limits(64 * size), OverflowPolicy::kConflate, clock);
  constexpr int kCount = 200000;
  for (int i = 0; i < kCount; ++i) {
    char payload[8];
    std::snprintf(payload, sizeof payload, "%07d", i);
    (void)q.push(msg(std::string(1, "abc"[i % 3]), payload));
  }
  const QueueStats st = q.stats();
  EXPECT_EQ(st.queued_frames, 3u);
  EXPECT_EQ(st.queued_bytes, 3 * size);
  EXPECT_EQ(st.conflated, static_cast<std::uint64_t>(kCount - 3));
  q.set_policy(OverflowPolicy::kDropNewest);  // leaves conflation mid-way
  (void)q.push(msg("d", "0000000"));
  EXPECT_EQ(testing::concat(testing::drain_all(q)),
            std::string(msg("c", "0199997")->view()) + std::string(msg("a", "0199998")->view()) +
                std::string(msg("b", "0199999")->view()) +
                notice("lost=199997 total=199997 policy=drop-newest conflated=199997") +
                std::string(msg("d", "0000000")->view()))
      << "out of conflation, the notice is queued at the next push, as under the drop policies";
}

}  // namespace
}  // namespace ringcast::broker
