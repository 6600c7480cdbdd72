// Deterministic, single-threaded behaviour of BroadcastRing: the seed's test
// list plus the protocol details this implementation adds (version-encoded
// sequences, producer role, lossy mode, reaping, takeover).
#include "ringcast/broadcast_ring.hpp"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "message_pattern.hpp"
#include "raw_slots.hpp"
#include "test_support.hpp"

namespace ringcast {
namespace {

using test::as_bytes;
using test::Buffer;
using test::TempDir;

std::string text(const Buffer& buf, const RecvResult& r) {
  return std::string(reinterpret_cast<const char*>(buf.data()), r.length);
}

class BroadcastRingTest : public ::testing::Test {
 protected:
  TempDir dir_;
  std::string path(const char* name = "ring") const { return dir_.path() + "/" + name; }
};

TEST_F(BroadcastRingTest, InitialStateIsEmptyAndDrained) {
  auto ring = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(ring) << ring.error().message();
  EXPECT_EQ(ring->capacity(), 8U);
  EXPECT_EQ(ring->producer_position(), 0U);
  EXPECT_EQ(ring->active_consumer_count(), 0U);
  EXPECT_TRUE(ring->is_fully_drained());
  EXPECT_TRUE(ring->is_producer());
  EXPECT_FALSE(ring->lossy());
}

TEST_F(BroadcastRingTest, SingleConsumerReceivesWhatWasPushed) {
  auto ring = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(ring);
  auto c = ring->register_consumer();
  ASSERT_TRUE(c);
  Buffer buf{};
  EXPECT_EQ(ring->try_recv(*c, buf).status, Errc::empty);
  ASSERT_EQ(ring->try_push(as_bytes("hello")), Errc::ok);
  EXPECT_EQ(ring->lag(*c), 1U);
  EXPECT_FALSE(ring->is_fully_drained());
  const RecvResult r = ring->try_recv(*c, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(text(buf, r), "hello");
  EXPECT_EQ(ring->lag(*c), 0U);
  EXPECT_TRUE(ring->is_fully_drained());
  EXPECT_EQ(ring->try_recv(*c, buf).status, Errc::empty);
}

TEST_F(BroadcastRingTest, EmptyAndFullLengthPayloadsRoundTrip) {
  auto ring = BroadcastRing::create_anonymous(4);
  ASSERT_TRUE(ring);
  auto c = ring->register_consumer();
  ASSERT_TRUE(c);
  std::array<std::byte, kMaxPayload> full{};
  for (std::size_t i = 0; i < full.size(); ++i) full[i] = static_cast<std::byte>(i + 1);
  ASSERT_EQ(ring->try_push({}), Errc::ok);
  ASSERT_EQ(ring->try_push(full), Errc::ok);
  Buffer buf{};
  RecvResult r = ring->try_recv(*c, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(r.length, 0U);
  r = ring->try_recv(*c, buf);
  ASSERT_EQ(r.status, Errc::ok);
  ASSERT_EQ(r.length, kMaxPayload);
  EXPECT_EQ(std::memcmp(buf.data(), full.data(), kMaxPayload), 0);
}

TEST_F(BroadcastRingTest, ThreeConsumersEachSeeEveryMessage) {
  auto ring = BroadcastRing::create(path(), 16);
  ASSERT_TRUE(ring);
  std::vector<ConsumerId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(*ring->register_consumer());
  for (int m = 0; m < 10; ++m) ASSERT_EQ(ring->try_push(as_bytes(std::to_string(m))), Errc::ok);
  for (ConsumerId id : ids) {
    for (int m = 0; m < 10; ++m) {
      Buffer buf{};
      const RecvResult r = ring->try_recv(id, buf);
      ASSERT_EQ(r.status, Errc::ok);
      EXPECT_EQ(text(buf, r), std::to_string(m));
    }
    Buffer buf{};
    EXPECT_EQ(ring->try_recv(id, buf).status, Errc::empty);
  }
}

TEST_F(BroadcastRingTest, SlowConsumerBlocksProducerAtCapacity) {
  auto ring = BroadcastRing::create(path(), 4);
  ASSERT_TRUE(ring);
  auto fast = ring->register_consumer();
  auto slow = ring->register_consumer();
  Buffer buf{};
  for (int m = 0; m < 4; ++m) {
    ASSERT_EQ(ring->try_push(as_bytes("x")), Errc::ok);
    ASSERT_TRUE(ring->try_recv(*fast, buf));
  }
  EXPECT_EQ(ring->try_push(as_bytes("x")), Errc::full);
  EXPECT_EQ(ring->lag(*slow), 4U);
  EXPECT_EQ(ring->lag(*fast), 0U);
  ASSERT_TRUE(ring->try_recv(*slow, buf));
  EXPECT_EQ(ring->try_push(as_bytes("x")), Errc::ok);
  EXPECT_EQ(ring->try_push(as_bytes("x")), Errc::full);
}

TEST_F(BroadcastRingTest, UnregisterUnblocksProducer) {
  auto ring = BroadcastRing::create(path(), 2);
  ASSERT_TRUE(ring);
  auto slow = ring->register_consumer();
  ASSERT_EQ(ring->try_push(as_bytes("a")), Errc::ok);
  ASSERT_EQ(ring->try_push(as_bytes("b")), Errc::ok);
  ASSERT_EQ(ring->try_push(as_bytes("c")), Errc::full);
  EXPECT_EQ(ring->unregister_consumer(*slow), Errc::ok);
  EXPECT_EQ(ring->try_push(as_bytes("c")), Errc::ok);
  EXPECT_EQ(ring->unregister_consumer(*slow), Errc::invalid_consumer);
}

TEST_F(BroadcastRingTest, LateJoinerStartsAtCurrentPosition) {
  auto ring = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(ring);
  ASSERT_EQ(ring->try_push(as_bytes("old")), Errc::ok);
  ASSERT_EQ(ring->try_push(as_bytes("old")), Errc::ok);
  auto late = ring->register_consumer();
  ASSERT_TRUE(late);
  Buffer buf{};
  EXPECT_EQ(ring->try_recv(*late, buf).status, Errc::empty);
  EXPECT_EQ(ring->lag(*late), 0U);
  ASSERT_EQ(ring->try_push(as_bytes("new")), Errc::ok);
  const RecvResult r = ring->try_recv(*late, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(text(buf, r), "new");
}

TEST_F(BroadcastRingTest, OldestJoinerBeforeTheRingWrapsStartsAtMessageZero) {
  auto ring = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(ring);
  for (std::uint64_t m = 0; m < 5; ++m) ASSERT_EQ(ring->try_push(as_bytes(std::to_string(m))), Errc::ok);
  auto late = ring->register_consumer(StartAt::kOldest);
  ASSERT_TRUE(late);
  EXPECT_EQ(ring->lag(*late), 5U);
  EXPECT_EQ(ring->status().consumers[*late].cursor, 0U);
  Buffer buf{};
  for (std::uint64_t m = 0; m < 5; ++m) {
    const RecvResult r = ring->try_recv(*late, buf);
    ASSERT_EQ(r.status, Errc::ok);
    EXPECT_EQ(text(buf, r), std::to_string(m));
  }
  EXPECT_EQ(ring->try_recv(*late, buf).status, Errc::empty);
}

TEST_F(BroadcastRingTest, OldestJoinerOnAnEmptyRingWaitsForTheFirstMessage) {
  auto ring = BroadcastRing::create(path(), 4);
  ASSERT_TRUE(ring);
  auto late = ring->register_consumer(StartAt::kOldest);
  ASSERT_TRUE(late);
  Buffer buf{};
  EXPECT_EQ(ring->try_recv(*late, buf).status, Errc::empty);
  ASSERT_EQ(ring->try_push(as_bytes("first")), Errc::ok);
  const RecvResult r = ring->try_recv(*late, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(text(buf, r), "first");
}

// Blocking and lossy rings keep the same history: the last `capacity` messages.
class OldestJoinerTest : public BroadcastRingTest, public ::testing::WithParamInterface<bool> {};

TEST_P(OldestJoinerTest, AfterWrappingReceivesTheRetainedMessagesInOrderThenLiveOnes) {
  constexpr std::uint64_t kCapacity = 5;  // not a power of two: the modulo index
  // One slot per message: the history is exactly the last `capacity` messages.
  auto ring = BroadcastRing::create(path(), kCapacity, {.lossy = GetParam(), .max_message = kMaxPayload});
  ASSERT_TRUE(ring);
  for (std::uint64_t m = 0; m < 13; ++m) ASSERT_EQ(ring->try_push(as_bytes(std::to_string(m))), Errc::ok);
  auto late = ring->register_consumer(StartAt::kOldest);
  ASSERT_TRUE(late);
  EXPECT_EQ(ring->status().consumers[*late].cursor, 13 - kCapacity);
  EXPECT_EQ(ring->lag(*late), kCapacity);
  Buffer buf{};
  std::vector<std::string> got;
  for (;;) {
    const RecvResult r = ring->try_recv(*late, buf);
    if (r.status == Errc::empty) break;
    ASSERT_EQ(r.status, Errc::ok);
    got.push_back(text(buf, r));
    if (got.size() == 2) {
      // Live messages follow the history without a gap or a duplicate.
      ASSERT_EQ(ring->try_push(as_bytes("13")), Errc::ok);
      ASSERT_EQ(ring->try_push(as_bytes("14")), Errc::ok);
    }
  }
  EXPECT_EQ(got, (std::vector<std::string>{"8", "9", "10", "11", "12", "13", "14"}));
}

TEST_P(OldestJoinerTest, HistoryOverwrittenBeforeItIsReadIsReportedAsLapped) {
  // No other consumer holds the history, so the producer (whose cached
  // minimum predates the registration) may overwrite it before its next scan.
  constexpr std::uint64_t kCapacity = 4;
  auto ring = BroadcastRing::create(path(), kCapacity, {.lossy = GetParam(), .max_message = kMaxPayload});
  ASSERT_TRUE(ring);
  for (std::uint64_t m = 0; m < 10; ++m) ASSERT_EQ(ring->try_push(as_bytes(std::to_string(m))), Errc::ok);
  auto late = ring->register_consumer(StartAt::kOldest);  // cursor 6
  ASSERT_TRUE(late);
  // The producer last scanned at 8 (blocking) or never (lossy): 10 and 11
  // overwrite 6 and 7; its scan at 12 then sees the new consumer.
  ASSERT_EQ(ring->try_push(as_bytes("10")), Errc::ok);
  ASSERT_EQ(ring->try_push(as_bytes("11")), Errc::ok);
  if (!GetParam()) {
    EXPECT_EQ(ring->try_push(as_bytes("12")), Errc::full);
  }
  Buffer buf{};
  const RecvResult lap = ring->try_recv(*late, buf);
  ASSERT_EQ(lap.status, Errc::lapped);
  // Resumes at the oldest message that the next push cannot overwrite.
  EXPECT_EQ(lap.missed, 3U);
  const RecvResult r = ring->try_recv(*late, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(text(buf, r), "9");
}

INSTANTIATE_TEST_SUITE_P(BlockingAndLossy, OldestJoinerTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? std::string("Lossy") : std::string("Blocking");
                         });

TEST_F(BroadcastRingTest, LagCountsUnreadMessages) {
  auto ring = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(ring);
  auto c = ring->register_consumer();
  for (int m = 0; m < 5; ++m) ASSERT_EQ(ring->try_push(as_bytes("m")), Errc::ok);
  EXPECT_EQ(ring->lag(*c), 5U);
  Buffer buf{};
  ASSERT_TRUE(ring->try_recv(*c, buf));
  ASSERT_TRUE(ring->try_recv(*c, buf));
  EXPECT_EQ(ring->lag(*c), 3U);
  EXPECT_EQ(ring->lag(kMaxConsumers + 3), 0U);
  EXPECT_EQ(ring->lag(15), 0U);  // inactive entry
}

TEST_F(BroadcastRingTest, SeventeenthConsumerGetsNoConsumerSlot) {
  auto ring = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(ring);
  for (std::size_t i = 0; i < kMaxConsumers; ++i) {
    auto c = ring->register_consumer();
    ASSERT_TRUE(c);
    EXPECT_EQ(*c, i);
  }
  auto extra = ring->register_consumer();
  ASSERT_FALSE(extra);
  EXPECT_EQ(extra.error().code, Errc::no_consumer_slot);
  EXPECT_EQ(ring->active_consumer_count(), kMaxConsumers);
  EXPECT_EQ(ring->unregister_consumer(7), Errc::ok);
  auto again = ring->register_consumer();
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, 7U);
}

TEST_F(BroadcastRingTest, SecondHandleSubscribesToFirstHandlesMessages) {
  auto producer = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(producer);
  auto consumer = BroadcastRing::open(path());
  ASSERT_TRUE(consumer) << consumer.error().message();
  EXPECT_FALSE(consumer->is_producer());
  auto c = consumer->register_consumer();
  ASSERT_TRUE(c);
  EXPECT_EQ(producer->active_consumer_count(), 1U);
  ASSERT_EQ(producer->try_push(as_bytes("across")), Errc::ok);
  Buffer buf{};
  const RecvResult r = consumer->try_recv(*c, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(text(buf, r), "across");
  // The id belongs to the handle that registered it.
  EXPECT_EQ(producer->try_recv(*c, buf).status, Errc::invalid_consumer);
}

TEST_F(BroadcastRingTest, WaitForConsumersTimesOutUntilEnoughAreRegisteredWhoGetTheNextPush) {
  auto producer = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(producer);
  EXPECT_EQ(producer->wait_for_consumers(0, std::chrono::nanoseconds(0)), Errc::ok);
  EXPECT_EQ(producer->wait_for_consumers(1, std::chrono::milliseconds(20)), Errc::timed_out);
  auto consumer = BroadcastRing::open(path());
  ASSERT_TRUE(consumer);
  auto c = consumer->register_consumer();
  ASSERT_TRUE(c);
  EXPECT_EQ(producer->wait_for_consumers(1, std::chrono::seconds(30)), Errc::ok);
  EXPECT_EQ(producer->wait_for_consumers(2, std::chrono::milliseconds(1)), Errc::timed_out);
  ASSERT_EQ(producer->try_push(as_bytes("first")), Errc::ok);
  Buffer buf{};
  const RecvResult r = consumer->try_recv(*c, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(text(buf, r), "first");
}

TEST_F(BroadcastRingTest, OversizedPayloadIsRejectedAndNothingIsPublished) {
  auto ring = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(ring);
  std::vector<std::byte> big(ring->max_message() + 1);
  EXPECT_EQ(ring->try_push(big), Errc::payload_too_large);
  EXPECT_FALSE(ring->try_claim(big.size()));
  EXPECT_EQ(ring->try_claim(big.size()).status(), Errc::payload_too_large);
  EXPECT_EQ(ring->producer_position(), 0U);
}

TEST_F(BroadcastRingTest, InvalidConsumerIdsAreRejected) {
  auto ring = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(ring);
  Buffer buf{};
  EXPECT_EQ(ring->try_recv(0, buf).status, Errc::invalid_consumer);
  EXPECT_EQ(ring->try_recv(kMaxConsumers, buf).status, Errc::invalid_consumer);
  EXPECT_EQ(ring->try_recv(0xFFFFFFFFU, buf).status, Errc::invalid_consumer);
  EXPECT_EQ(ring->unregister_consumer(99), Errc::invalid_consumer);
}

TEST_F(BroadcastRingTest, FastConsumerIsNotHeldBackBySlowOne) {
  auto ring = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(ring);
  auto fast = ring->register_consumer();
  auto slow = ring->register_consumer();
  Buffer buf{};
  for (int m = 0; m < 8; ++m) ASSERT_EQ(ring->try_push(as_bytes("m")), Errc::ok);
  for (int m = 0; m < 8; ++m) ASSERT_TRUE(ring->try_recv(*fast, buf));
  EXPECT_EQ(ring->lag(*fast), 0U);
  EXPECT_EQ(ring->lag(*slow), 8U);
  ASSERT_TRUE(ring->try_recv(*slow, buf));
  EXPECT_EQ(ring->lag(*slow), 7U);
}

TEST_F(BroadcastRingTest, ObserverSeesNotReadyUntilCreatorPublishesHeader) {
  // A file of the right size whose magic is still zero is a ring being created.
  const std::string p = path();
  test::write_file(p, std::string(layout::file_size(4), '\0'));
  auto early = BroadcastRing::open(p);
  ASSERT_FALSE(early);
  EXPECT_EQ(early.error().code, Errc::not_ready);
}

TEST_F(BroadcastRingTest, ContentsPersistAcrossReopen) {
  {
    auto ring = BroadcastRing::create(path(), 8);
    ASSERT_TRUE(ring);
    auto keeper = BroadcastRing::open(path());
    ASSERT_TRUE(keeper);
    auto c = keeper->register_consumer();
    ASSERT_TRUE(c);
    ASSERT_EQ(ring->try_push(as_bytes("kept")), Errc::ok);
    ASSERT_EQ(ring->try_push(as_bytes("also")), Errc::ok);
  }
  auto reopened = BroadcastRing::open(path(), {.expected_capacity = 8});
  ASSERT_TRUE(reopened) << reopened.error().message();
  EXPECT_EQ(reopened->producer_position(), 2U);
  // Every handle unregistered its consumers on close.
  EXPECT_EQ(reopened->active_consumer_count(), 0U);
  auto c = reopened->register_consumer();
  ASSERT_TRUE(reopened->claim_producer());
  ASSERT_EQ(reopened->try_push(as_bytes("third")), Errc::ok);
  Buffer buf{};
  const RecvResult r = reopened->try_recv(*c, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(text(buf, r), "third");
}

TEST_F(BroadcastRingTest, ExpectedCapacityMismatchIsLayoutMismatch) {
  ASSERT_TRUE(BroadcastRing::create(path(), 8));
  auto wrong = BroadcastRing::open(path(), {.expected_capacity = 16});
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, Errc::layout_mismatch);
}

TEST_F(BroadcastRingTest, CreateRefusesExistingPathUnlessReplacing) {
  ASSERT_TRUE(BroadcastRing::create(path(), 8));
  auto again = BroadcastRing::create(path(), 8);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, Errc::already_exists);
  auto replaced = BroadcastRing::create(path(), 4, {.replace = true});
  ASSERT_TRUE(replaced) << replaced.error().message();
  EXPECT_EQ(replaced->capacity(), 4U);
}

TEST_F(BroadcastRingTest, CreateUsesMode0600AndIgnoresUmask) {
  ASSERT_TRUE(BroadcastRing::create(path(), 8));
  EXPECT_EQ(test::file_mode(path()), 0600U);
  ASSERT_TRUE(BroadcastRing::create(path("shared"), 8, {.mode = 0660}));
  EXPECT_EQ(test::file_mode(path("shared")), 0660U);
}

TEST_F(BroadcastRingTest, CreateDoesNotFollowSymlinkAtFinalComponent) {
  const std::string target = path("target");
  test::write_file(target, "precious");
  test::make_symlink(target, path("link"));
  auto ring = BroadcastRing::create(path("link"), 8);
  ASSERT_FALSE(ring);
  EXPECT_EQ(ring.error().code, Errc::already_exists);
  // Replacing removes the link itself and never writes through it.
  auto replaced = BroadcastRing::create(path("link"), 8, {.replace = true});
  ASSERT_TRUE(replaced);
  EXPECT_EQ(test::read_file(target), "precious");
}

TEST_F(BroadcastRingTest, NonPowerOfTwoCapacityWrapsCorrectly) {
  auto ring = BroadcastRing::create(path(), 3);
  ASSERT_TRUE(ring);
  auto c = ring->register_consumer();
  Buffer buf{};
  for (int m = 0; m < 20; ++m) {
    ASSERT_EQ(ring->try_push(as_bytes(std::to_string(m))), Errc::ok);
    const RecvResult r = ring->try_recv(*c, buf);
    ASSERT_EQ(r.status, Errc::ok);
    EXPECT_EQ(text(buf, r), std::to_string(m));
  }
}

TEST_F(BroadcastRingTest, CapacityOutOfRangeIsRejected) {
  EXPECT_FALSE(BroadcastRing::create(path("a"), 0));
  EXPECT_FALSE(BroadcastRing::create(path("b"), 1));
  EXPECT_FALSE(BroadcastRing::create(path("c"), kMaxCapacity + 1));
  EXPECT_TRUE(BroadcastRing::create(path("d"), 2));
}

TEST_F(BroadcastRingTest, SecondProducerIsRefused) {
  auto first = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(first);
  auto second = BroadcastRing::open(path());
  ASSERT_TRUE(second);
  auto claim = second->claim_producer();
  ASSERT_FALSE(claim);
  EXPECT_EQ(claim.error().code, Errc::producer_busy);
  EXPECT_EQ(second->try_push(as_bytes("no")), Errc::producer_busy);
  first->release_producer();
  EXPECT_TRUE(second->claim_producer());
  EXPECT_EQ(second->try_push(as_bytes("yes")), Errc::ok);
  EXPECT_EQ(first->try_push(as_bytes("no")), Errc::producer_busy);
}

// Regression: a producer taking over the role started with its cached
// minimum cursor at the current position, so it pushed a whole capacity
// without looking at consumers and lapped a lagging one (found by the soak).
TEST_F(BroadcastRingTest, TakeoverProducerRespectsLaggingConsumerCursor) {
  auto first = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(first);
  auto lagging = first->register_consumer();
  for (int m = 0; m < 20; ++m) {
    ASSERT_EQ(first->try_push(as_bytes("m")), Errc::ok);
    Buffer buf{};
    ASSERT_TRUE(first->try_recv(*lagging, buf));
  }
  for (int m = 0; m < 5; ++m) ASSERT_EQ(first->try_push(as_bytes("m")), Errc::ok);
  first->release_producer();
  auto second = BroadcastRing::open(path());
  ASSERT_TRUE(second->claim_producer());
  for (int m = 0; m < 3; ++m) ASSERT_EQ(second->try_push(as_bytes("m")), Errc::ok);
  EXPECT_EQ(second->try_push(as_bytes("m")), Errc::full);
  EXPECT_EQ(first->lag(*lagging), 8U);
}

TEST_F(BroadcastRingTest, ReadOnlyHandleCannotProduceOrConsume) {
  ASSERT_TRUE(BroadcastRing::create(path(), 8));
  auto observer = BroadcastRing::open(path(), {.read_only = true});
  ASSERT_TRUE(observer);
  EXPECT_EQ(observer->try_push(as_bytes("x")), Errc::not_producer);
  EXPECT_FALSE(observer->register_consumer());
  EXPECT_TRUE(observer->is_fully_drained());
}

// A reader opened with read_only_slots receives as any consumer, cannot
// produce, and a write through its zero-copy view faults in its own process
// (the message stays intact for every other reader).
TEST_F(BroadcastRingTest, AReaderWithReadOnlySlotsReceivesButAWriteThroughItsViewFaultsInItsOwnProcess) {
  auto producer = BroadcastRing::create(path(), 1024);  // records: a large message is viewed in place
  ASSERT_TRUE(producer);
  auto reader = BroadcastRing::open(path(), {.read_only_slots = true});
  ASSERT_TRUE(reader) << reader.error().message();
  EXPECT_EQ(reader->claim_producer().error().code, Errc::not_producer);
  EXPECT_EQ(reader->try_push(as_bytes("x")), Errc::not_producer);
  auto id = reader->register_consumer();
  ASSERT_TRUE(id) << id.error().message();
  auto other = producer->register_consumer();
  ASSERT_TRUE(other);
  const std::string big(3000, 'm');
  ASSERT_EQ(producer->try_push(as_bytes("small")), Errc::ok);
  ASSERT_EQ(producer->try_push(as_bytes(big)), Errc::ok);
  Buffer buf{};
  const RecvResult r = reader->try_recv(*id, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(text(buf, r), "small");
  const MessageView v = reader->try_view(*id);
  ASSERT_EQ(v.status, Errc::ok);
  ASSERT_TRUE(v.in_place) << "the view must point into the ring for the write below to mean anything";
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(v.data.data()), v.data.size()), big);
  // The child exits 0 only if the write went through. How it dies otherwise
  // depends on the build: SIGSEGV, or a sanitizer's report and exit.
  const auto faults = [](int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); };
  EXPECT_EXIT(
      {
        *reinterpret_cast<volatile std::byte*>(const_cast<std::byte*>(v.data.data())) = std::byte{'X'};
        std::_Exit(0);
      },
      faults, "");
  EXPECT_EQ(reader->release_view(*id), Errc::ok);
  EXPECT_EQ(reader->lag(*id), 0U);
  // The other reader's copy of the message is untouched.
  ASSERT_EQ(producer->try_recv(*other, buf).status, Errc::ok);
  std::vector<std::byte> out(4096);
  const RecvResult whole = producer->try_recv(*other, out);
  ASSERT_EQ(whole.status, Errc::ok);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.data()), whole.length), big);
}

// CreateOptions::separate_slots: the header stays in the ring file, the
// slots go to `<path>.slots`, which only the ring file's owner may write.
TEST_F(BroadcastRingTest, SeparateSlotsLiveInASecondFileOnlyTheOwnerMayWrite) {
  auto ring = BroadcastRing::create(path(), 64, {.mode = 0666, .separate_slots = true});
  ASSERT_TRUE(ring) << ring.error().message();
  const std::string slots = path() + ".slots";
  struct stat st {};
  ASSERT_EQ(::stat(path().c_str(), &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(layout::kHeaderBytes));
  EXPECT_EQ(st.st_mode & 07777, 0666U);
  ASSERT_EQ(::stat(slots.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(layout::slots_file_size(64)));
  EXPECT_EQ(st.st_mode & 07777, 0644U);
  auto reader = BroadcastRing::open(path());
  ASSERT_TRUE(reader) << reader.error().message();
  auto id = reader->register_consumer();
  ASSERT_TRUE(id);
  ASSERT_EQ(ring->try_push(as_bytes("split")), Errc::ok);
  Buffer buf{};
  const RecvResult r = reader->try_recv(*id, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(text(buf, r), "split");
  // A second create finds the slots file taken unless it replaces it.
  ASSERT_EQ(::unlink(path().c_str()), 0);
  auto again = BroadcastRing::create(path(), 64, {.separate_slots = true});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, Errc::already_exists);
  EXPECT_NE(::access(path().c_str(), F_OK), 0) << "a failed create leaves no ring file behind";
  EXPECT_TRUE(BroadcastRing::create(path(), 64, {.replace = true, .separate_slots = true}));
  EXPECT_FALSE(BroadcastRing::create_anonymous(64, {.separate_slots = true}));
}

// The deployment docs/design.md describes: the reader may write the ring file
// and only read the slots file. It is another user (nobody) when the test runs
// as root, for whom file modes are not checked; otherwise the slots file loses
// its owner's write bit. It receives every message in order, cannot produce,
// and a write through its zero-copy view faults in its own process.
TEST_F(BroadcastRingTest, AReaderThatMayOnlyReadTheSlotsFileReceivesEveryMessageAndCannotWriteThem) {
  constexpr std::uint64_t kMessages = 2000;
  constexpr std::size_t kMax = 1000;
  const std::string last(kMax, 'm');
  const std::string slots = path() + ".slots";
  const bool root = ::geteuid() == 0;
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);  // the other user must reach the files
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  // Forked before the ring exists: the reader inherits no mapping of it.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exits 0 only if every check passes; otherwise the code names the step.
    ::close(go[1]);
    if (root && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)) std::_Exit(10);
    char byte = 0;
    if (::read(go[0], &byte, 1) != 1) std::_Exit(11);
    // The premise: this process may not write the slots file.
    if (::open(slots.c_str(), O_RDWR) >= 0 || errno != EACCES) std::_Exit(12);
    auto reader = BroadcastRing::open(path());
    if (!reader) std::_Exit(13);
    const auto claimed = reader->claim_producer();
    if (claimed || claimed.error().code != Errc::not_producer) std::_Exit(14);
    auto id = reader->register_consumer(StartAt::kOldest);
    if (!id) std::_Exit(15);
    std::vector<std::byte> buf(kMax);
    for (std::uint64_t seq = 0; seq < kMessages; ++seq) {
      const RecvResult r = reader->recv_wait(*id, buf, std::chrono::seconds(30));
      if (r.status != Errc::ok) std::_Exit(16);
      if (test::check_sized_message({buf.data(), r.length}, kMax) != seq) std::_Exit(17);
    }
    // The last message, a record the producer waits for, is viewed in place.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    MessageView v = reader->try_view(*id);
    while (v.status == Errc::empty && std::chrono::steady_clock::now() < deadline) {
      ::sched_yield();
      v = reader->try_view(*id);
    }
    if (v.status != Errc::ok || !v.in_place) std::_Exit(18);
    const pid_t writer = ::fork();
    if (writer == 0) {
      *reinterpret_cast<volatile std::byte*>(const_cast<std::byte*>(v.data.data())) = std::byte{'X'};
      std::_Exit(0);
    }
    int status = 0;
    if (writer < 0 || ::waitpid(writer, &status, 0) != writer) std::_Exit(19);
    // How the writer dies depends on the build: SIGSEGV, or a sanitizer's report and exit.
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) std::_Exit(20);
    if (std::string(reinterpret_cast<const char*>(v.data.data()), v.data.size()) != last) std::_Exit(21);
    std::_Exit(0);
  }
  ::close(go[0]);
  auto producer = BroadcastRing::create(path(), 256, {.mode = 0666, .max_message = kMax, .separate_slots = true});
  bool pushed = static_cast<bool>(producer);
  EXPECT_TRUE(producer) << producer.error().message();
  if (pushed && !root) pushed = ::chmod(slots.c_str(), 0444) == 0;
  pushed = pushed && ::write(go[1], "g", 1) == 1;
  pushed = pushed && producer->wait_for_consumers(1, std::chrono::seconds(30)) == Errc::ok;
  std::vector<std::byte> msg(kMax);
  for (std::uint64_t seq = 0; pushed && seq < kMessages; ++seq) {
    const std::span<std::byte> m(msg.data(), test::sized_length(seq, kMax));
    test::make_sized_message(seq, m);
    pushed = producer->push_wait(m, std::chrono::seconds(30)) == Errc::ok;
  }
  pushed = pushed && producer->push_wait(as_bytes(last), std::chrono::seconds(30)) == Errc::ok;
  ::close(go[1]);
  EXPECT_TRUE(pushed);
  if (!pushed) ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the reader failed at step " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

// A producer's user may write the slots file, so its handles take the role
// over as on any ring; a handle opened with read_only_slots may not.
TEST_F(BroadcastRingTest, AHandleThatMayWriteTheSlotsFileTakesOverProducing) {
  auto first = BroadcastRing::create(path(), 64, {.separate_slots = true});
  ASSERT_TRUE(first);
  auto consumer = BroadcastRing::open(path(), {.read_only_slots = true});
  ASSERT_TRUE(consumer) << consumer.error().message();
  EXPECT_EQ(consumer->claim_producer().error().code, Errc::not_producer);
  auto id = consumer->register_consumer();
  ASSERT_TRUE(id);
  ASSERT_EQ(first->try_push(as_bytes("one")), Errc::ok);
  first->release_producer();
  auto second = BroadcastRing::open(path());
  ASSERT_TRUE(second);
  ASSERT_TRUE(second->claim_producer());
  ASSERT_EQ(second->try_push(as_bytes("two")), Errc::ok);
  Buffer buf{};
  RecvResult r = consumer->try_recv(*id, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(text(buf, r), "one");
  r = consumer->try_recv(*id, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(text(buf, r), "two");
}

TEST_F(BroadcastRingTest, ARingWhoseSlotsFileIsMissingOrShortIsRefused) {
  ASSERT_TRUE(BroadcastRing::create(path(), 64, {.separate_slots = true}));
  const std::string slots = path() + ".slots";
  ASSERT_EQ(::truncate(slots.c_str(), 64), 0);
  auto opened = BroadcastRing::open(path());
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, Errc::layout_mismatch);
  ASSERT_EQ(::unlink(slots.c_str()), 0);
  opened = BroadcastRing::open(path());
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, Errc::io_error);
  EXPECT_EQ(opened.error().sys_errno, ENOENT);
}

TEST_F(BroadcastRingTest, RemoveDeletesARingAndItsSlotsFileButRefusesOtherFiles) {
  ASSERT_TRUE(BroadcastRing::create(path("split"), 64, {.separate_slots = true}));
  ASSERT_TRUE(BroadcastRing::create(path("whole"), 64));
  test::write_file(path("text"), "not a ring");
  EXPECT_TRUE(BroadcastRing::remove(path("split")));
  EXPECT_TRUE(BroadcastRing::remove(path("whole")));
  EXPECT_FALSE(BroadcastRing::remove(path("text")));
  EXPECT_NE(::access(path("split").c_str(), F_OK), 0);
  EXPECT_NE(::access(path("split.slots").c_str(), F_OK), 0);
  EXPECT_NE(::access(path("whole").c_str(), F_OK), 0);
  EXPECT_EQ(::access(path("text").c_str(), F_OK), 0);
}

TEST_F(BroadcastRingTest, BatchPushStopsAtFullAndPublishesOnce) {
  auto ring = BroadcastRing::create(path(), 4);
  ASSERT_TRUE(ring);
  auto c = ring->register_consumer();
  std::vector<std::string> words = {"a", "b", "c", "d", "e", "f"};
  std::vector<std::span<const std::byte>> spans;
  for (const auto& w : words) spans.push_back(as_bytes(w));
  const BatchResult pushed = ring->try_push_batch(spans);
  EXPECT_EQ(pushed.count, 4U);
  EXPECT_EQ(pushed.status, Errc::full);
  EXPECT_EQ(ring->producer_position(), 4U);
  std::string got;
  const BatchResult drained = ring->drain(
      *c, [&](std::span<const std::byte> p) { got.append(reinterpret_cast<const char*>(p.data()), p.size()); }, 10);
  EXPECT_EQ(drained.count, 4U);
  EXPECT_EQ(got, "abcd");
  EXPECT_EQ(ring->lag(*c), 0U);
}

TEST_F(BroadcastRingTest, DrainHonoursMaxAndReportsEmpty) {
  auto ring = BroadcastRing::create_anonymous(8);
  ASSERT_TRUE(ring);
  auto c = ring->register_consumer();
  int calls = 0;
  auto count = [&](std::span<const std::byte>) { ++calls; };
  EXPECT_EQ(ring->drain(*c, count, 5).status, Errc::empty);
  for (int m = 0; m < 6; ++m) ASSERT_EQ(ring->try_push(as_bytes("m")), Errc::ok);
  EXPECT_EQ(ring->drain(*c, count, 4).count, 4U);
  EXPECT_EQ(ring->drain(*c, count, 4).count, 2U);
  EXPECT_EQ(calls, 6);
}

// The header's promise: if on_message throws, the batch's cursor is not
// published and the next call delivers the same messages again.
TEST_F(BroadcastRingTest, DrainRedeliversTheBatchWhoseCallbackThrew) {
  auto ring = BroadcastRing::create_anonymous(8);
  ASSERT_TRUE(ring);
  auto c = ring->register_consumer();
  for (const char* m : {"a", "b", "c"}) ASSERT_EQ(ring->try_push(as_bytes(m)), Errc::ok);
  int calls = 0;
  auto throw_on_second = [&](std::span<const std::byte>) {
    if (++calls == 2) throw std::runtime_error("callback failed");
  };
  EXPECT_THROW((void)ring->drain(*c, throw_on_second, 8), std::runtime_error);
  EXPECT_EQ(ring->lag(*c), 3U);
  std::string got;
  const BatchResult again = ring->drain(
      *c, [&](std::span<const std::byte> p) { got.append(reinterpret_cast<const char*>(p.data()), p.size()); }, 8);
  EXPECT_EQ(again.count, 3U);
  EXPECT_EQ(got, "abc");
}

// A slot left half-written by a producer that is still alive is `stalled`
// (after the bounded spin), whoever holds the role, and drain leaves the cursor
// where it was; once the producer's lock is gone it is `producer_dead`. No
// thread and no clock: the slot simply never gets committed.
TEST_F(BroadcastRingTest, HalfWrittenSlotIsStalledWhileItsProducerLivesThenProducerDead) {
  auto producer = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(producer);
  auto consumer = BroadcastRing::open(path());
  ASSERT_TRUE(consumer);
  auto id = consumer->register_consumer();
  ASSERT_TRUE(id);
  ASSERT_EQ(producer->try_push(as_bytes("whole")), Errc::ok);
  test::RawSlots raw(path(), 8);
  ASSERT_TRUE(raw.ok());
  raw.begin_write(1);  // the producer "is preempted" between its two version stores

  Buffer buf{};
  const RecvResult first = consumer->try_recv(*id, buf);
  ASSERT_EQ(first.status, Errc::ok);
  EXPECT_EQ(text(buf, first), "whole");
  EXPECT_EQ(consumer->try_recv(*id, buf).status, Errc::stalled);
  int calls = 0;
  const BatchResult drained = consumer->drain(
      *id, [&](std::span<const std::byte>) { ++calls; }, 8);
  EXPECT_EQ(drained.status, Errc::stalled);
  EXPECT_EQ(drained.count, 0U);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(consumer->status().consumers[*id].cursor, 1U);
  // The producing handle itself reads it the same way.
  auto own = producer->register_consumer();
  ASSERT_TRUE(own);
  EXPECT_EQ(producer->try_recv(*own, buf).status, Errc::stalled);
  EXPECT_TRUE(producer->status().half_written_slot);

  producer->release_producer();  // as the kernel does when the producer dies
  EXPECT_EQ(consumer->try_recv(*id, buf).status, Errc::producer_dead);
  EXPECT_EQ(consumer->status().consumers[*id].cursor, 1U);
}

TEST_F(BroadcastRingTest, LossyProducerNeverWaitsAndReaderReportsLap) {
  // One slot per message, so a lap resumes at any slot (a ring of records
  // resumes at a block boundary: RecordTest).
  auto ring = BroadcastRing::create(path(), 4, {.lossy = true, .max_message = kMaxPayload});
  ASSERT_TRUE(ring);
  EXPECT_TRUE(ring->lossy());
  auto c = ring->register_consumer();
  for (int m = 0; m < 10; ++m) ASSERT_EQ(ring->try_push(as_bytes(std::to_string(m))), Errc::ok);
  Buffer buf{};
  const RecvResult lapped = ring->try_recv(*c, buf);
  ASSERT_EQ(lapped.status, Errc::lapped);
  // Messages 0..6 are gone or about to be; it resumes at the oldest safe one.
  EXPECT_EQ(lapped.missed, 7U);
  for (int m = 7; m < 10; ++m) {
    const RecvResult r = ring->try_recv(*c, buf);
    ASSERT_EQ(r.status, Errc::ok);
    EXPECT_EQ(text(buf, r), std::to_string(m));
  }
  EXPECT_EQ(ring->try_recv(*c, buf).status, Errc::empty);
}

TEST_F(BroadcastRingTest, DrainOnLossyRingReportsHowManyALapSkipped) {
  auto ring = BroadcastRing::create(path(), 4, {.lossy = true, .max_message = kMaxPayload});
  ASSERT_TRUE(ring);
  auto c = ring->register_consumer();
  for (int m = 0; m < 10; ++m) ASSERT_EQ(ring->try_push(as_bytes(std::to_string(m))), Errc::ok);
  std::string got;
  auto append = [&](std::span<const std::byte> p) { got.append(reinterpret_cast<const char*>(p.data()), p.size()); };
  const BatchResult lapped = ring->drain(*c, append, 16);
  EXPECT_EQ(lapped.status, Errc::lapped);
  EXPECT_EQ(lapped.count, 0U);
  EXPECT_EQ(lapped.missed, 7U);
  const BatchResult rest = ring->drain(*c, append, 16);
  EXPECT_EQ(rest.count, 3U);
  EXPECT_EQ(got, "789");
}

TEST_F(BroadcastRingTest, LossyModeIsReadFromTheHeaderOnOpen) {
  ASSERT_TRUE(BroadcastRing::create(path(), 4, {.lossy = true, .wakeups = true}));
  auto opened = BroadcastRing::open(path());
  ASSERT_TRUE(opened);
  EXPECT_TRUE(opened->lossy());
  EXPECT_TRUE(opened->wakeups());
}

TEST_F(BroadcastRingTest, StatusReportsProducerAndConsumers) {
  auto ring = BroadcastRing::create(path(), 8);
  ASSERT_TRUE(ring);
  auto other = BroadcastRing::open(path());
  auto c = other->register_consumer();
  ASSERT_EQ(ring->try_push(as_bytes("m")), Errc::ok);
  auto observer = BroadcastRing::open(path(), {.read_only = true});
  const RingStatus s = observer->status();
  EXPECT_EQ(s.capacity, 8U);
  EXPECT_EQ(s.producer_seq, 1U);
  EXPECT_TRUE(s.producer_alive);
  EXPECT_FALSE(s.half_written_slot);
  EXPECT_TRUE(s.consumers[*c].active);
  EXPECT_TRUE(s.consumers[*c].owner_alive);
  EXPECT_EQ(s.consumers[*c].lag, 1U);
  EXPECT_EQ(s.consumers[*c].owner_pid, static_cast<std::uint32_t>(::getpid()));
  other = BroadcastRing::open(path());  // the old handle closes: its consumer is unregistered
  EXPECT_FALSE(observer->status().consumers[*c].active);
}

TEST_F(BroadcastRingTest, SharedMemoryNameLocaleWorksLikeAFile) {
  const std::string name = "/ringcast-test-" + std::to_string(::getpid());
  (void)BroadcastRing::remove_shm(name);
  auto ring = BroadcastRing::create_shm(name, 8);
  ASSERT_TRUE(ring) << ring.error().message();
  auto reader = BroadcastRing::open_shm(name);
  ASSERT_TRUE(reader) << reader.error().message();
  auto c = reader->register_consumer();
  ASSERT_EQ(ring->try_push(as_bytes("shm")), Errc::ok);
  Buffer buf{};
  const RecvResult r = reader->try_recv(*c, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(text(buf, r), "shm");
  auto dup = BroadcastRing::create_shm(name, 8);
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, Errc::already_exists);
  EXPECT_TRUE(BroadcastRing::remove_shm(name));
}

TEST_F(BroadcastRingTest, ErrorMessagesNameTheStepAndTheCause) {
  auto missing = BroadcastRing::open(path("missing"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Errc::io_error);
  EXPECT_EQ(missing.error().sys_errno, ENOENT);
  EXPECT_NE(missing.error().message().find("No such file"), std::string::npos);
  EXPECT_EQ(to_string(Errc::layout_mismatch), "layout_mismatch");
}

}  // namespace
}  // namespace ringcast
