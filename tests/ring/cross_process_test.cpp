// Producer and consumers in separate processes (fork+exec of ring_test_helper),
// including the crash cases: a consumer killed with SIGKILL, a producer killed
// in the middle of writing a slot.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "message_pattern.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "test_support.hpp"

namespace ringcast {
namespace {

using namespace std::chrono_literals;
using test::ChildProcess;
using test::exit_code;

const std::string kHelper = RING_TEST_HELPER;

ChildProcess helper(const std::string& mode, const std::string& path, std::uint64_t arg = 0, std::uint64_t arg2 = 0) {
  return ChildProcess::spawn({kHelper, mode, path, std::to_string(arg), std::to_string(arg2)});
}

// The exit code of a helper that exits by itself (128 + signal if killed), or
// -1 if it still runs after three minutes.
int exit_code_of(ChildProcess& c) { return exit_code(c.wait_exit(test::deadline_in(180s))); }

class CrossProcessTest : public ::testing::Test {
 protected:
  test::TempDir dir_;
  std::string path_ = dir_.path() + "/ring";
};

TEST_F(CrossProcessTest, ThreeConsumerProcessesReceiveAMillionMessagesInOrder) {
  constexpr std::uint64_t kCount = 1'000'000;
  auto ring = BroadcastRing::create(path_, 4096, {.claim_producer = false});
  ASSERT_TRUE(ring) << ring.error().message();
  std::vector<ChildProcess> consumers;
  for (int i = 0; i < 3; ++i) {
    consumers.push_back(helper("consume", path_, kCount));
    ASSERT_EQ(consumers.back().read_line(), "ready");
  }
  EXPECT_EQ(ring->active_consumer_count(), 3U);
  ChildProcess producer = helper("produce", path_, kCount);
  EXPECT_EQ(exit_code_of(producer), 0);
  for (auto& c : consumers) EXPECT_EQ(exit_code_of(c), 0);
  EXPECT_EQ(ring->producer_position(), kCount);
  EXPECT_EQ(ring->active_consumer_count(), 0U);
}

TEST_F(CrossProcessTest, KilledConsumerIsReapedAndOthersLoseNothing) {
  constexpr std::uint64_t kCount = 20'000;
  auto ring = BroadcastRing::create(path_, 64, {.reap_on_full = true});
  ASSERT_TRUE(ring);
  ChildProcess stuck = helper("hold", path_);
  ASSERT_EQ(stuck.read_line(), "ready");
  ChildProcess reader = helper("consume", path_, kCount);
  ASSERT_EQ(reader.read_line(), "ready");
  alignas(8) test::Buffer msg{};
  std::uint64_t seq = 0;
  // The stuck consumer never reads: the ring fills.
  for (; seq < 64; ++seq) {
    test::make_message(seq, msg);
    ASSERT_EQ(ring->push_wait(msg, {30s, IdleStrategy::kSpinThenYield}), Errc::ok);
  }
  test::make_message(seq, msg);
  EXPECT_EQ(ring->try_push(msg), Errc::full);
  EXPECT_EQ(exit_code(stuck.stop(SIGKILL)), 128 + SIGKILL);
  // reap_on_full frees the dead entry; the producer runs on.
  for (; seq < kCount; ++seq) {
    test::make_message(seq, msg);
    ASSERT_EQ(ring->push_wait(msg, {30s, IdleStrategy::kSpinThenYield}), Errc::ok) << seq;
  }
  EXPECT_EQ(exit_code_of(reader), 0);
  EXPECT_EQ(ring->active_consumer_count(), 0U);
}

// reap_on_full's rate limit, on an injected clock: a full ring makes the
// producer try a reaping pass at most once per kReapOnFullIntervalNs, so a
// consumer that dies just after a pass stays until the interval is over.
std::atomic<std::int64_t> fake_now_ns{0};
std::int64_t fake_clock() noexcept { return fake_now_ns.load(std::memory_order_relaxed); }

TEST_F(CrossProcessTest, ReapOnFullTriesAtMostOncePerInterval) {
  fake_now_ns.store(1'000'000'000, std::memory_order_relaxed);
  auto ring = BroadcastRing::create(path_, 8, {.reap_on_full = true, .reap_clock = fake_clock});
  ASSERT_TRUE(ring);
  ChildProcess stuck = helper("hold", path_);
  ASSERT_EQ(stuck.read_line(), "ready");
  for (int m = 0; m < 8; ++m) ASSERT_EQ(ring->try_push(test::as_bytes("m")), Errc::ok);
  // Full: a pass runs now and finds the owner alive.
  EXPECT_EQ(ring->try_push(test::as_bytes("m")), Errc::full);
  EXPECT_EQ(exit_code(stuck.stop(SIGKILL)), 128 + SIGKILL);
  // Its owner is dead, but the interval has not passed on the producer's clock:
  // no second pass, however often the producer retries.
  for (int retry = 0; retry < 3; ++retry) EXPECT_EQ(ring->try_push(test::as_bytes("m")), Errc::full);
  fake_now_ns.fetch_add(kReapOnFullIntervalNs - 1, std::memory_order_relaxed);
  EXPECT_EQ(ring->try_push(test::as_bytes("m")), Errc::full);
  EXPECT_EQ(ring->active_consumer_count(), 1U);
  // One more nanosecond: the next full push reaps the dead entry and goes through.
  fake_now_ns.fetch_add(1, std::memory_order_relaxed);
  EXPECT_EQ(ring->try_push(test::as_bytes("m")), Errc::ok);
  EXPECT_EQ(ring->active_consumer_count(), 0U);
}

TEST_F(CrossProcessTest, ReapFreesOnlyDeadOwners) {
  auto ring = BroadcastRing::create(path_, 8);
  ASSERT_TRUE(ring);
  ChildProcess alive = helper("hold", path_);
  ASSERT_EQ(alive.read_line(), "ready");
  ChildProcess dead = helper("hold", path_);
  ASSERT_EQ(dead.read_line(), "ready");
  dead.stop(SIGKILL);
  EXPECT_EQ(ring->active_consumer_count(), 2U);
  const RingStatus before = ring->status();
  int alive_count = 0;
  for (const auto& c : before.consumers) alive_count += c.active && c.owner_alive ? 1 : 0;
  EXPECT_EQ(alive_count, 1);
  auto reaped = ring->reap_dead_consumers();
  ASSERT_TRUE(reaped);
  EXPECT_EQ(*reaped, 1U);
  EXPECT_EQ(ring->active_consumer_count(), 1U);
  EXPECT_EQ(*ring->reap_dead_consumers(), 0U);
}

TEST_F(CrossProcessTest, ProducerTakeoverAfterDeathMidWriteLosesAndRepeatsNothing) {
  auto ring = BroadcastRing::create(path_, 8, {.claim_producer = false});
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  ChildProcess dying = helper("die-mid-write", path_);
  ASSERT_EQ(dying.read_line(), "ready");
  EXPECT_EQ(exit_code_of(dying), 128 + SIGKILL);

  alignas(8) test::Buffer buf{};
  RecvResult r = ring->try_recv(*id, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(test::check_message(std::span<const std::byte>(buf.data(), r.length)), 0U);
  // The next slot is half-written and its producer is gone: a distinct error,
  // not a hang and not the torn bytes.
  EXPECT_TRUE(ring->status().half_written_slot);
  EXPECT_FALSE(ring->status().producer_alive);
  EXPECT_EQ(ring->try_recv(*id, buf).status, Errc::producer_dead);

  auto successor = BroadcastRing::open(path_);
  ASSERT_TRUE(successor);
  ASSERT_TRUE(successor->claim_producer());
  EXPECT_FALSE(ring->status().half_written_slot);
  EXPECT_EQ(ring->try_recv(*id, buf).status, Errc::empty);
  for (std::uint64_t seq = 1; seq <= 20; ++seq) {
    test::make_message(seq, buf);
    ASSERT_EQ(successor->try_push(buf), Errc::ok);
    r = ring->try_recv(*id, buf);
    ASSERT_EQ(r.status, Errc::ok);
    EXPECT_EQ(test::check_message(std::span<const std::byte>(buf.data(), r.length)), seq);
  }
}

// A producer killed inside try_push_batch: messages 1 and 2 are committed in
// their slots but producer_seq still says 1, and the consumer reads them anyway
// (it goes by slot versions). The successor must resume after message 2 (the
// forward scan by slot version in claim_producer), repairing slot 3: resuming
// at producer_seq would overwrite messages already delivered and leave the
// consumer facing a half-written slot.
TEST_F(CrossProcessTest, ProducerTakeoverAfterDeathMidBatchResumesAfterItsCommittedSlots) {
  auto ring = BroadcastRing::create(path_, 8, {.claim_producer = false});
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  ChildProcess dying = helper("die-mid-batch", path_);
  ASSERT_EQ(dying.read_line(), "ready");
  EXPECT_EQ(exit_code_of(dying), 128 + SIGKILL);
  EXPECT_EQ(ring->producer_position(), 1U);

  alignas(8) test::Buffer buf{};
  for (std::uint64_t seq = 0; seq <= 2; ++seq) {
    const RecvResult r = ring->try_recv(*id, buf);
    ASSERT_EQ(r.status, Errc::ok) << seq;
    EXPECT_EQ(test::check_message(std::span<const std::byte>(buf.data(), r.length)), seq);
  }
  EXPECT_EQ(ring->try_recv(*id, buf).status, Errc::producer_dead);

  auto successor = BroadcastRing::open(path_);
  ASSERT_TRUE(successor);
  ASSERT_TRUE(successor->claim_producer());
  EXPECT_EQ(successor->producer_position(), 3U);
  EXPECT_EQ(ring->try_recv(*id, buf).status, Errc::empty);
  for (std::uint64_t seq = 3; seq < 20; ++seq) {
    test::make_message(seq, buf);
    ASSERT_EQ(successor->try_push(buf), Errc::ok);
    const RecvResult r = ring->try_recv(*id, buf);
    ASSERT_EQ(r.status, Errc::ok) << seq;
    EXPECT_EQ(test::check_message(std::span<const std::byte>(buf.data(), r.length)), seq);
  }
}

TEST_F(CrossProcessTest, LossyReadersInOtherProcessesNeverSeeTornPayloads) {
  auto ring = BroadcastRing::create(path_, 2, {.lossy = true});
  ASSERT_TRUE(ring);
  std::vector<ChildProcess> readers;
  for (int i = 0; i < 2; ++i) {
    readers.push_back(helper("consume-lossy", path_, 60));
    ASSERT_EQ(readers.back().read_line(), "ready");
  }
  alignas(8) test::Buffer msg{};
  const auto until = std::chrono::steady_clock::now() + 2s;
  for (std::uint64_t seq = 0; seq < 20'000'000 && std::chrono::steady_clock::now() < until; ++seq) {
    test::make_message(seq, msg);
    ASSERT_EQ(ring->try_push(msg), Errc::ok);
  }
  ring->release_producer();  // readers stop once the producer is gone and they are drained
  for (auto& r : readers) EXPECT_EQ(exit_code_of(r), 0);
}

// --- records: messages of random sizes spanning slots -------------------------

TEST_F(CrossProcessTest, SizedMessagesReachConsumerProcessesWholeAndInOrder) {
  constexpr std::uint64_t kCount = 20'000;
  auto ring = BroadcastRing::create(path_, 4096, {.claim_producer = false, .max_message = 4096});
  ASSERT_TRUE(ring) << ring.error().message();
  std::vector<ChildProcess> consumers;
  for (int i = 0; i < 2; ++i) {
    consumers.push_back(helper("consume-sized", path_, kCount - 1));
    ASSERT_EQ(consumers.back().read_line(), "ready");
  }
  ChildProcess producer = helper("produce-sized", path_, kCount, 0);
  EXPECT_EQ(exit_code_of(producer), 0);
  for (auto& c : consumers) {
    EXPECT_EQ(c.read_line(), "jumps 0");
    EXPECT_EQ(exit_code_of(c), 0);
  }
  EXPECT_EQ(ring->status().messages, kCount);
}

// A producer killed while it writes a record through a claim: the record's
// header was never committed, so no reader sees any of it, not even as a
// half-written slot, and a successor reuses the room.
TEST_F(CrossProcessTest, ProducerKilledMidClaimDeliversNoPartOfItAndTheSuccessorReusesTheRoom) {
  auto ring = BroadcastRing::create(path_, 256, {.claim_producer = false});
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  ChildProcess dying = helper("die-mid-claim", path_);
  ASSERT_EQ(dying.read_line(), "ready");
  EXPECT_EQ(exit_code_of(dying), 128 + SIGKILL);

  std::vector<std::byte> buf(ring->max_message());
  RecvResult r = ring->try_recv(*id, buf);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(test::check_sized_message(std::span<const std::byte>(buf.data(), r.length), ring->max_message()), 0U);
  EXPECT_EQ(ring->try_recv(*id, buf).status, Errc::empty);
  EXPECT_FALSE(ring->status().half_written_slot);
  // Past the padding the claim wrote before its record, if it needed one.
  const std::uint64_t head = ring->position(*id);

  auto successor = BroadcastRing::open(path_);
  ASSERT_TRUE(successor);
  ASSERT_TRUE(successor->claim_producer());
  EXPECT_EQ(successor->producer_position(), head);
  for (std::uint64_t seq = 1; seq <= 200; ++seq) {
    const std::span<std::byte> msg(buf.data(), test::sized_length(seq, ring->max_message()));
    test::make_sized_message(seq, msg);
    ASSERT_EQ(successor->try_push(msg), Errc::ok) << seq;
    const MessageView v = ring->try_view(*id);
    ASSERT_EQ(v.status, Errc::ok) << seq;
    EXPECT_EQ(test::check_sized_message(v.data, ring->max_message()), seq);
    ASSERT_EQ(ring->release_view(*id), Errc::ok);
  }
}

// kill -9 of a producer streaming 64 KiB-sized records, wherever it happens to
// be (most of its time goes to copying payloads): a consumer process reads
// every message whole and in order, then the successor's, with one forward
// jump where the dead producer's stream ends.
TEST_F(CrossProcessTest, ProducerKilledWhileStreamingRecordsIsTakenOverWithoutTornOrRepeatedMessages) {
  constexpr std::uint64_t kSuccessorFirst = 1'000'000'000;
  constexpr std::uint64_t kSuccessorCount = 1000;
  auto ring = BroadcastRing::create(path_, 4096, {.claim_producer = false});
  ASSERT_TRUE(ring);
  ASSERT_EQ(ring->max_message(), kDefaultMaxMessage);
  ChildProcess consumer = helper("consume-sized", path_, kSuccessorFirst + kSuccessorCount - 1);
  ASSERT_EQ(consumer.read_line(), "ready");
  ChildProcess first = helper("produce-sized", path_, kSuccessorFirst, 0);
  ASSERT_EQ(first.read_line(), "ready");
  ASSERT_TRUE(test::eventually([&] { return ring->status().messages >= 2000; }));
  ASSERT_EQ(exit_code(first.stop(SIGKILL)), 128 + SIGKILL);
  ChildProcess successor = helper("produce-sized", path_, kSuccessorCount, kSuccessorFirst);
  EXPECT_EQ(exit_code_of(successor), 0);
  EXPECT_EQ(consumer.read_line(), "jumps 1");
  EXPECT_EQ(exit_code_of(consumer), 0);
}

TEST_F(CrossProcessTest, LossyReadersInOtherProcessesNeverSeeTornRecords) {
  constexpr std::uint64_t kCapacity = 64;
  auto ring = BroadcastRing::create(path_, kCapacity, {.lossy = true});
  ASSERT_TRUE(ring);
  std::vector<ChildProcess> readers;
  for (int i = 0; i < 2; ++i) {
    readers.push_back(helper("consume-sized-lossy", path_, 60));
    ASSERT_EQ(readers.back().read_line(), "ready");
  }
  std::vector<std::byte> msg(ring->max_message());
  const auto until = std::chrono::steady_clock::now() + 2s;
  for (std::uint64_t seq = 0; seq < 20'000'000 && std::chrono::steady_clock::now() < until; ++seq) {
    const std::span<std::byte> payload(msg.data(), test::sized_length(seq, ring->max_message()));
    test::make_sized_message(seq, payload);
    ASSERT_EQ(ring->try_push(payload), Errc::ok);
  }
  ring->release_producer();  // readers stop once the producer is gone and they are drained
  for (auto& r : readers) EXPECT_EQ(exit_code_of(r), 0);
}

}  // namespace
}  // namespace ringcast
