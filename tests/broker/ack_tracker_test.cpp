// AckTracker (src/broker/guarantees/ack_tracker.hpp): QoS 1 for one
// subscriber, driven by a manual clock and a real connection queue, with the
// JSON codec's frames (what a WebSocket subscriber receives).
#include "broker/guarantees/ack_tracker.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "broker/queue/connection_queue.hpp"
#include "broker/ws/json_delivery.hpp"
#include "test_support.hpp"

namespace ringcast::broker {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::ManualClock;

QueueLimits big_limits() { return QueueLimits{1u << 20, 0, std::chrono::seconds(60)}; }

AckSettings settings(std::size_t window = 100, std::uint32_t retries = 2) {
  AckSettings s;
  s.max_in_flight = window;
  s.ack_timeout = 1s;
  s.max_retries = retries;
  s.max_waiting_bytes = 1u << 20;
  s.policy = OverflowPolicy::kDropNewest;
  return s;
}

// A QoS 1 run of `n` messages on `channel` with ids first, first + 1, ...
FrameRef qos1_run(std::string_view channel, std::uint64_t first, std::size_t n) {
  std::vector<std::string> payloads;
  for (std::size_t i = 0; i < n; ++i) payloads.push_back("m" + std::to_string(first + i));
  std::vector<Message> msgs;
  for (const std::string& p : payloads) msgs.push_back(Message{channel, p, 1});
  DeliveryRun run{DeliveryKind::kMessage, {}, msgs, first, 0, 1};
  return wire_codec(WireFormat::kJson).encode(run);
}

// Everything queued, as JSON objects (the WebSocket header stripped).
std::vector<json> drain(ConnectionQueue& q) {
  std::vector<json> out;
  std::vector<FrameSpan> spans;
  const PopResult r = q.pop_batch(1u << 30, 1u << 20, spans);
  for (const FrameSpan& s : spans) {
    for (std::uint32_t i = s.first; i < s.first + s.count; ++i) {
      const std::string_view f = s.block->frame(i);
      const auto len7 = static_cast<unsigned char>(f[1]) & 0x7F;
      const std::size_t header = len7 < 126 ? 2 : len7 == 126 ? 4 : 10;
      out.push_back(json::parse(f.substr(header)));
    }
  }
  q.release(r.bytes);
  return out;
}

std::vector<std::uint64_t> ids_of(const std::vector<json>& frames) {
  std::vector<std::uint64_t> out;
  for (const json& j : frames) out.push_back(j.value("message_id", std::uint64_t{0}));
  return out;
}

struct Fixture {
  ManualClock clock;
  ConnectionQueue queue{big_limits(), OverflowPolicy::kDropNewest, clock};
  AckTracker tracker;
  explicit Fixture(AckSettings s = settings()) : tracker(s, clock, WireFormat::kJson, ws::json_redelivery) {
    queue.set_format(WireFormat::kJson);
  }
  AckResult ack(std::optional<std::string_view> channel, std::uint64_t id) {
    bool wake = false;
    return tracker.ack(channel, id, queue, wake);
  }
};

TEST(AckTrackerTest, DeliversTheRunAndHoldsEachMessageUntilItsAck) {
  Fixture f;
  EXPECT_TRUE(f.tracker.offer("t", 1, qos1_run("t", 1, 3), f.queue));
  const auto sent = drain(f.queue);
  ASSERT_EQ(ids_of(sent), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(sent[0]["qos"], 1);
  EXPECT_FALSE(sent[0].contains("dup"));
  EXPECT_EQ(f.tracker.stats().in_flight, 3u);
  EXPECT_EQ(f.ack("t", 2), AckResult::kAcked);
  EXPECT_EQ(f.tracker.stats().in_flight, 2u);
  EXPECT_EQ(f.ack("t", 2), AckResult::kUnknown) << "an ack clears its entry once";
}

TEST(AckTrackerTest, ResendsOnlyTheUnackedMessagesMarkedDupAfterTheTimeout) {
  Fixture f;
  (void)f.tracker.offer("t", 1, qos1_run("t", 1, 3), f.queue);
  (void)drain(f.queue);
  EXPECT_EQ(f.ack("t", 1), AckResult::kAcked);
  f.clock.advance(999ms);
  EXPECT_FALSE(f.tracker.on_timer(f.queue));
  EXPECT_TRUE(drain(f.queue).empty()) << "nothing is due before the timeout";
  f.clock.advance(1ms);
  (void)f.tracker.on_timer(f.queue);
  const auto resent = drain(f.queue);
  ASSERT_EQ(ids_of(resent), (std::vector<std::uint64_t>{2, 3}));
  for (const json& j : resent) {
    EXPECT_EQ(j["dup"], true);
    EXPECT_EQ(j["payload"], "m" + std::to_string(j["message_id"].get<int>()));
  }
  EXPECT_EQ(f.tracker.stats().redelivered, 2u);
}

TEST(AckTrackerTest, ExpiresAfterMaxRetriesWithALossNotice) {
  Fixture f(settings(100, /*retries=*/2));
  (void)f.tracker.offer("t", 7, qos1_run("t", 7, 1), f.queue);
  (void)drain(f.queue);
  for (int i = 0; i < 2; ++i) {
    f.clock.advance(1s);
    (void)f.tracker.on_timer(f.queue);
    const auto resent = drain(f.queue);
    ASSERT_EQ(ids_of(resent), (std::vector<std::uint64_t>{7})) << "retry " << i;
  }
  f.clock.advance(1s);
  (void)f.tracker.on_timer(f.queue);
  const auto notice = drain(f.queue);
  ASSERT_EQ(notice.size(), 1u);
  EXPECT_EQ(notice[0]["topic"], std::string(kLossChannel));
  EXPECT_EQ(notice[0]["payload"], "expired topic=t message_id=7 sends=3 total=1");
  EXPECT_EQ(f.tracker.stats().expired, 1u);
  EXPECT_EQ(f.tracker.stats().in_flight, 0u);
  EXPECT_EQ(f.tracker.next_deadline(), std::nullopt);
  EXPECT_EQ(f.ack("t", 7), AckResult::kUnknown);
}

TEST(AckTrackerTest, AckOfAnUnknownIdChangesNothing) {
  Fixture f;
  (void)f.tracker.offer("t", 1, qos1_run("t", 1, 1), f.queue);
  EXPECT_EQ(f.ack("t", 99), AckResult::kUnknown);
  EXPECT_EQ(f.ack("other", 1), AckResult::kUnknown);
  EXPECT_EQ(f.ack(std::nullopt, 99), AckResult::kUnknown);
  EXPECT_EQ(f.tracker.stats().in_flight, 1u);
}

TEST(AckTrackerTest, AckWithoutTopicNeedsAnUnambiguousId) {
  Fixture f;
  (void)f.tracker.offer("a", 1, qos1_run("a", 1, 2), f.queue);
  (void)f.tracker.offer("b", 1, qos1_run("b", 1, 1), f.queue);
  EXPECT_EQ(f.ack(std::nullopt, 1), AckResult::kAmbiguous);
  EXPECT_EQ(f.ack(std::nullopt, 2), AckResult::kAcked);
  EXPECT_EQ(f.ack("b", 1), AckResult::kAcked);
  EXPECT_EQ(f.ack(std::nullopt, 1), AckResult::kAcked) << "only a's id 1 is left";
}

// Invariant 6: before its first delivery a tracker has no table, and answers
// as an empty one does.
TEST(AckTrackerTest, IdleTrackerAnswersAsAnEmptyOne) {
  Fixture f;
  EXPECT_EQ(f.ack("t", 1), AckResult::kUnknown);
  EXPECT_EQ(f.ack(std::nullopt, 1), AckResult::kUnknown);
  bool wake = true;
  EXPECT_EQ(f.tracker.ack_shown(
                std::nullopt, [](std::string_view) { return true; }, f.queue, wake),
            AckResult::kUnknown);
  EXPECT_FALSE(wake);
  EXPECT_EQ(f.tracker.ack_shown(
                "t", [](std::string_view) { return true; }, f.queue, wake),
            AckResult::kUnknown);
  f.clock.advance(10s);
  EXPECT_FALSE(f.tracker.on_timer(f.queue));
  EXPECT_FALSE(f.tracker.redeliver_all(f.queue, [](std::string_view) { return true; }));
  EXPECT_EQ(f.tracker.next_deadline(), std::nullopt);
  EXPECT_EQ(f.tracker.resume_floor("t"), 0u);
  EXPECT_EQ(f.tracker.last_offered("t"), 0u);
  const AckStats s = f.tracker.stats();
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.waiting, 0u);
  EXPECT_EQ(s.delivered, 0u);
  EXPECT_EQ(s.acked, 0u);
  EXPECT_TRUE(drain(f.queue).empty());
}

// The first offer makes the table; from then on the tracker works as one that
// had it from the start: window, redelivery, ack, resume floor.
TEST(AckTrackerTest, FirstTrackedDeliveryAfterIdleCallsWorksAsBefore) {
  Fixture f(settings(/*window=*/2));
  EXPECT_EQ(f.ack(std::nullopt, 1), AckResult::kUnknown);
  EXPECT_FALSE(f.tracker.on_timer(f.queue));
  EXPECT_TRUE(f.tracker.offer("t", 1, qos1_run("t", 1, 3), f.queue));
  ASSERT_EQ(ids_of(drain(f.queue)), (std::vector<std::uint64_t>{1, 2})) << "3 waits for room in the window";
  EXPECT_EQ(f.tracker.stats().in_flight, 2u);
  EXPECT_EQ(f.tracker.stats().waiting, 1u);
  EXPECT_EQ(f.tracker.last_offered("t"), 3u);
  ASSERT_TRUE(f.tracker.next_deadline().has_value());
  f.clock.advance(1s);
  (void)f.tracker.on_timer(f.queue);
  const auto resent = drain(f.queue);
  ASSERT_EQ(ids_of(resent), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(resent[0]["dup"], true);
  EXPECT_EQ(f.ack("t", 1), AckResult::kAcked);
  EXPECT_EQ(ids_of(drain(f.queue)), (std::vector<std::uint64_t>{3}));
  EXPECT_EQ(f.tracker.resume_floor("t"), 1u);
  EXPECT_EQ(f.ack(std::nullopt, 2), AckResult::kAcked);
  EXPECT_EQ(f.ack("t", 3), AckResult::kAcked);
  EXPECT_EQ(f.tracker.resume_floor("t"), 3u);
  EXPECT_EQ(f.tracker.stats().acked, 3u);
  EXPECT_EQ(f.tracker.stats().in_flight, 0u);
}

TEST(AckTrackerTest, AckShownSettlesTheDeliverySentLongestAgoWhoseFrameMatches) {
  Fixture f;
  (void)f.tracker.offer("a", 1, qos1_run("a", 1, 3), f.queue);
  (void)f.tracker.offer("b", 1, qos1_run("b", 1, 1), f.queue);
  (void)drain(f.queue);
  bool wake = false;
  // "m2" is a's id 2 only; "m1" is a's 1 and b's 1 (a's was sent first).
  auto shows = [](std::string_view payload) {
    return [payload](std::string_view frame) {
      return frame.find("\"payload\":\"" + std::string(payload) + "\"") != std::string_view::npos;
    };
  };
  EXPECT_EQ(f.tracker.ack_shown("b", shows("m2"), f.queue, wake), AckResult::kUnknown) << "only b is looked at";
  EXPECT_EQ(f.tracker.ack_shown(std::nullopt, shows("m2"), f.queue, wake), AckResult::kAcked);
  EXPECT_EQ(f.ack("a", 2), AckResult::kUnknown) << "a's 2 was the one settled";
  EXPECT_EQ(f.tracker.ack_shown(std::nullopt, shows("m1"), f.queue, wake), AckResult::kAcked);
  EXPECT_EQ(f.ack("b", 1), AckResult::kAcked) << "a's 1, sent first, was the one settled";
  EXPECT_EQ(f.tracker.ack_shown("nowhere", shows("m3"), f.queue, wake), AckResult::kUnknown);
  EXPECT_EQ(f.tracker.ack_shown("a", shows("m3"), f.queue, wake), AckResult::kAcked);
  EXPECT_EQ(f.tracker.stats().in_flight, 0u);
  EXPECT_EQ(f.tracker.stats().acked, 4u);
}

TEST(AckTrackerTest, WindowHoldsLaterDeliveriesInOrderUntilAcksMakeRoom) {
  Fixture f(settings(/*window=*/2));
  (void)f.tracker.offer("t", 1, qos1_run("t", 1, 3), f.queue);  // split by the window
  (void)f.tracker.offer("t", 4, qos1_run("t", 4, 1), f.queue);
  EXPECT_EQ(ids_of(drain(f.queue)), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(f.tracker.stats().waiting, 2u);
  EXPECT_EQ(f.ack("t", 3), AckResult::kUnknown) << "a waiting message was never sent";
  EXPECT_EQ(f.ack("t", 2), AckResult::kAcked);
  EXPECT_EQ(ids_of(drain(f.queue)), (std::vector<std::uint64_t>{3}));
  EXPECT_EQ(f.ack("t", 1), AckResult::kAcked);
  EXPECT_EQ(ids_of(drain(f.queue)), (std::vector<std::uint64_t>{4}));
  EXPECT_EQ(f.tracker.stats().waiting, 0u);
  EXPECT_EQ(f.tracker.stats().in_flight, 2u);
}

TEST(AckTrackerTest, ExpiryMakesRoomForWaitingDeliveries) {
  Fixture f(settings(/*window=*/1, /*retries=*/0));
  (void)f.tracker.offer("t", 1, qos1_run("t", 1, 2), f.queue);
  EXPECT_EQ(ids_of(drain(f.queue)), (std::vector<std::uint64_t>{1}));
  f.clock.advance(1s);
  (void)f.tracker.on_timer(f.queue);
  const auto out = drain(f.queue);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["topic"], std::string(kLossChannel));
  EXPECT_EQ(out[1]["message_id"], 2);
}

TEST(AckTrackerTest, WaitingPastItsBoundFollowsThePolicyAndReportsTheLoss) {
  AckSettings s = settings(/*window=*/1);
  s.max_waiting_bytes = 1;  // nothing fits
  Fixture f(s);
  (void)f.tracker.offer("t", 1, qos1_run("t", 1, 2), f.queue);
  const auto out = drain(f.queue);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["message_id"], 1);
  EXPECT_EQ(out[1]["topic"], std::string(kLossChannel));
  EXPECT_EQ(out[1]["payload"], "window-dropped topic=t message_id=2 total=1");
  EXPECT_EQ(f.tracker.stats().dropped, 1u);
}

TEST(AckTrackerTest, DisconnectPolicyClosesTheQueueWhenWaitingOverflows) {
  AckSettings s = settings(/*window=*/1);
  s.max_waiting_bytes = 1;
  s.policy = OverflowPolicy::kDisconnect;
  Fixture f(s);
  EXPECT_TRUE(f.tracker.offer("t", 1, qos1_run("t", 1, 2), f.queue));
  EXPECT_TRUE(f.queue.closed());
}

TEST(AckTrackerTest, SameIdOnTwoChannelsAreTwoDeliveries) {
  Fixture f;
  (void)f.tracker.offer("a", 5, qos1_run("a", 5, 1), f.queue);
  (void)f.tracker.offer("b", 5, qos1_run("b", 5, 1), f.queue);
  EXPECT_EQ(drain(f.queue).size(), 2u);
  EXPECT_EQ(f.ack("a", 5), AckResult::kAcked);
  f.clock.advance(1s);
  (void)f.tracker.on_timer(f.queue);
  const auto resent = drain(f.queue);
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0]["topic"], "b");
  EXPECT_EQ(resent[0]["dup"], true);
  EXPECT_EQ(f.ack("b", 5), AckResult::kAcked);
}

TEST(AckTrackerTest, ManyAckedDeliveriesLeaveNoDeadlineBehind) {
  Fixture f(settings(/*window=*/10));
  for (std::uint64_t id = 1; id <= 10'000; ++id) {
    (void)f.tracker.offer("t", id, qos1_run("t", id, 1), f.queue);
    ASSERT_EQ(f.ack("t", id), AckResult::kAcked);
  }
  (void)drain(f.queue);
  f.clock.advance(1s);
  EXPECT_FALSE(f.tracker.on_timer(f.queue)) << "no redelivery for acked messages";
  EXPECT_EQ(f.tracker.next_deadline(), std::nullopt);
  EXPECT_EQ(f.tracker.stats().acked, 10'000u);
}

TEST(AckTrackerTest, ResumeFloorIsTheHighestIdBelowEveryUnsettledOne) {
  Fixture f(settings(/*window=*/2));
  EXPECT_EQ(f.tracker.resume_floor("t"), 0u);
  (void)f.tracker.offer("t", 5, qos1_run("t", 5, 3), f.queue);  // 5, 6 in flight; 7 waiting
  EXPECT_EQ(f.tracker.resume_floor("t"), 4u);
  EXPECT_EQ(f.tracker.last_offered("t"), 7u);
  EXPECT_EQ(f.ack("t", 6), AckResult::kAcked);  // 7 enters the window
  EXPECT_EQ(f.tracker.resume_floor("t"), 4u) << "5 is still unacked";
  EXPECT_EQ(f.ack("t", 5), AckResult::kAcked);
  EXPECT_EQ(f.tracker.resume_floor("t"), 6u);
  EXPECT_EQ(f.ack("t", 7), AckResult::kAcked);
  EXPECT_EQ(f.tracker.resume_floor("t"), 7u);
  EXPECT_EQ(f.tracker.resume_floor("other"), 0u);
}

// A durable session taken over by a connection that may not read one of its
// channels (docs/security.md): that channel's deliveries are withheld, not
// sent, acked or expired, until the connection's own subscription brings an
// offer on it.
TEST(AckTrackerTest, TakeOverWithholdsTheChannelsTheNewConnectionMayNotRead) {
  Fixture f(settings(/*window=*/100, /*retries=*/1));
  (void)f.tracker.offer("pub", 1, qos1_run("pub", 1, 1), f.queue);
  (void)f.tracker.offer("secret", 9, qos1_run("secret", 9, 1), f.queue);
  (void)drain(f.queue);
  (void)f.tracker.redeliver_all(f.queue, [](std::string_view ch) { return ch != "secret"; });
  const auto out = drain(f.queue);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["topic"], "pub");
  EXPECT_EQ(f.ack("secret", 9), AckResult::kUnknown);
  EXPECT_EQ(f.ack(std::nullopt, 9), AckResult::kUnknown);
  for (int i = 0; i < 5; ++i) {  // well past 1 + max_retries sends
    f.clock.advance(1s);
    (void)f.tracker.on_timer(f.queue);
  }
  for (const json& j : drain(f.queue)) EXPECT_NE(j.dump().find("pub"), std::string::npos) << j.dump();
  EXPECT_EQ(f.tracker.stats().expired, 1u) << "only pub's delivery expired";
  EXPECT_EQ(f.tracker.stats().in_flight, 1u);
  // The connection subscribed to it after all (a new grant): an offer ends
  // the withholding, and the old delivery goes out at its next deadline.
  (void)f.tracker.offer("secret", 10, qos1_run("secret", 10, 1), f.queue);
  EXPECT_EQ(ids_of(drain(f.queue)), (std::vector<std::uint64_t>{10}));
  f.clock.advance(1s);
  (void)f.tracker.on_timer(f.queue);
  const auto resent = drain(f.queue);
  ASSERT_FALSE(resent.empty());
  EXPECT_EQ(resent[0]["message_id"], 9);
  EXPECT_EQ(resent[0]["dup"], true);
  EXPECT_EQ(f.ack("secret", 9), AckResult::kAcked);
}

TEST(AckTrackerTest, RedeliverAllResendsEveryInFlightDeliveryInOrder) {
  Fixture f;
  (void)f.tracker.offer("a", 1, qos1_run("a", 1, 2), f.queue);
  (void)f.tracker.offer("b", 9, qos1_run("b", 9, 1), f.queue);
  (void)drain(f.queue);
  EXPECT_EQ(f.ack("a", 1), AckResult::kAcked);
  (void)f.tracker.redeliver_all(f.queue, [](std::string_view) { return true; });
  const auto out = drain(f.queue);
  ASSERT_EQ(ids_of(out), (std::vector<std::uint64_t>{2, 9}));
  EXPECT_EQ(out[0]["dup"], true);
  f.clock.advance(999ms);
  (void)f.tracker.on_timer(f.queue);
  EXPECT_TRUE(drain(f.queue).empty()) << "fresh deadlines from the takeover";
}

TEST(AckTrackerTest, RedeliveryFrameIsTheOriginalWithDup) {
  const FrameRef run = qos1_run("t", 3, 1);
  const FrameRef dup = ws::json_redelivery(run->frame(0));
  const std::string_view f = dup->frame(0);
  const json j = json::parse(f.substr(2));
  EXPECT_EQ(j["message_id"], 3);
  EXPECT_EQ(j["qos"], 1);
  EXPECT_EQ(j["dup"], true);
  EXPECT_EQ(j["payload"], "m3");
}

}  // namespace
}  // namespace ringcast::broker
