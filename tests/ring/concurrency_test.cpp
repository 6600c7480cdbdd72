// Bounded concurrent stress in one process: fan-out to consumer threads,
// torn-read detection on tiny rings, registration racing a full-speed
// producer. The blocking waits are in wait_test.cpp.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "message_pattern.hpp"
#include "raw_slots.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "test_support.hpp"
#include "torn_read_stress.hpp"

namespace ringcast {
namespace {

using namespace std::chrono_literals;

TEST(ConcurrencyTest, ConcurrentConsumersEachReceiveEveryMessageInOrder) {
  constexpr std::uint64_t kCount = 200'000;
  auto ring = BroadcastRing::create_anonymous(64);
  ASSERT_TRUE(ring);
  std::vector<ConsumerId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(*ring->register_consumer());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (ConsumerId id : ids) {
    threads.emplace_back([&, id] {
      alignas(8) test::Buffer buf{};
      for (std::uint64_t expected = 0; expected < kCount;) {
        const RecvResult r = ring->recv_wait(id, buf, {30s, IdleStrategy::kSpinThenYield});
        if (r.status != Errc::ok) {
          failures.fetch_add(1);
          return;
        }
        if (test::check_message(std::span<const std::byte>(buf.data(), r.length)) != expected) failures.fetch_add(1);
        ++expected;
      }
    });
  }
  alignas(8) test::Buffer msg{};
  for (std::uint64_t seq = 0; seq < kCount; ++seq) {
    test::make_message(seq, msg);
    ASSERT_EQ(ring->push_wait(msg, {30s, IdleStrategy::kSpinThenYield}), Errc::ok);
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(ring->is_fully_drained());
}

class TornReadTest : public ::testing::TestWithParam<std::tuple<std::uint64_t, bool>> {};

TEST_P(TornReadTest, ReadNeverObservesTornWrite) {
  const auto [capacity, lossy] = GetParam();
  const test::StressResult r = test::run_torn_read_stress({.capacity = capacity,
                                                           .lossy = lossy,
                                                           .readers = 2,
                                                           .max_messages = 1'000'000,
                                                           .max_time = std::chrono::milliseconds(1500)});
  EXPECT_GT(r.received, 0U);
  EXPECT_EQ(r.torn, 0U);
  EXPECT_EQ(r.out_of_order, 0U);
  if (!lossy) {
    EXPECT_EQ(r.lapped, 0U);
  }
}

INSTANTIATE_TEST_SUITE_P(TinyRings, TornReadTest, ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<TornReadTest::ParamType>& i) {
                           return "Capacity" + std::to_string(std::get<0>(i.param)) +
                                  (std::get<1>(i.param) ? "Lossy" : "Blocking");
                         });

// Late joiners on the slots being overwritten: readers register at
// StartAt::kOldest over and over while the producer runs at full speed, so the
// first slots they read are the next ones the producer writes. No message may
// be torn or out of sequence; the start lies in [Pb - capacity, Pa - capacity]
// for the positions published just before and after registering.
class OldestJoinerStressTest : public ::testing::TestWithParam<std::tuple<std::uint64_t, bool>> {};

TEST_P(OldestJoinerStressTest, JoinAtOldestNeverReadsATornOrOutOfOrderMessage) {
  const auto [capacity, lossy] = GetParam();
  const test::StressResult r = test::run_oldest_joiner_stress({.capacity = capacity,
                                                               .lossy = lossy,
                                                               .readers = 2,
                                                               .max_messages = 20'000'000,
                                                               .max_time = std::chrono::milliseconds(1000)});
  EXPECT_GT(r.joins, 0U);
  EXPECT_GT(r.received, 0U);
  EXPECT_EQ(r.torn, 0U);
  EXPECT_EQ(r.out_of_order, 0U);
  EXPECT_EQ(r.bad_start, 0U);
}

INSTANTIATE_TEST_SUITE_P(TinyRings, OldestJoinerStressTest,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<OldestJoinerStressTest::ParamType>& i) {
                           return "Capacity" + std::to_string(std::get<0>(i.param)) +
                                  (std::get<1>(i.param) ? "Lossy" : "Blocking");
                         });

// Records: messages of random sizes (8 bytes to the most the ring allows,
// a quarter of them inline) on rings small enough to lap constantly, read by
// try_recv, drain and views in turn. Paddings, block boundaries and the ring's
// end are crossed thousands of times; capacity 37 indexes with a modulo.
class RecordTornReadTest : public ::testing::TestWithParam<std::tuple<std::uint64_t, bool>> {};

TEST_P(RecordTornReadTest, ReadNeverObservesTornOrMisorderedRecord) {
  const auto [capacity, lossy] = GetParam();
  const test::StressResult r = test::run_torn_read_stress({.capacity = capacity,
                                                           .lossy = lossy,
                                                           .readers = 3,
                                                           .max_messages = 1'000'000,
                                                           .max_time = std::chrono::milliseconds(1500),
                                                           .sized = true,
                                                           .max_message = layout::max_message_for(capacity)});
  EXPECT_GT(r.received, 0U);
  EXPECT_EQ(r.torn, 0U);
  EXPECT_EQ(r.out_of_order, 0U);
  if (!lossy) {
    EXPECT_EQ(r.lapped, 0U);
    EXPECT_GT(r.in_place, 0U);  // views of records on a blocking ring read the ring itself
  }
}

TEST_P(RecordTornReadTest, JoinAtOldestNeverReadsATornRecord) {
  const auto [capacity, lossy] = GetParam();
  const test::StressResult r = test::run_oldest_joiner_stress({.capacity = capacity,
                                                               .lossy = lossy,
                                                               .readers = 3,
                                                               .max_messages = 5'000'000,
                                                               .max_time = std::chrono::milliseconds(1000),
                                                               .sized = true,
                                                               .max_message = layout::max_message_for(capacity)});
  EXPECT_GT(r.joins, 0U);
  EXPECT_GT(r.received, 0U);
  EXPECT_EQ(r.torn, 0U);
  EXPECT_EQ(r.out_of_order, 0U) << "last unexpected status: " << to_string(r.unexpected);
  EXPECT_EQ(r.bad_start, 0U);
}

INSTANTIATE_TEST_SUITE_P(SmallRings, RecordTornReadTest,
                         ::testing::Combine(::testing::Values(8, 37), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<RecordTornReadTest::ParamType>& i) {
                           return "Capacity" + std::to_string(std::get<0>(i.param)) +
                                  (std::get<1>(i.param) ? "Lossy" : "Blocking");
                         });

// The same on a ring of records: a consumer joining at the latest position
// while records of random sizes stream by is never lapped and reads each one
// whole, whether it copies, drains or views.
TEST(ConcurrencyTest, ConsumersRegisteringDuringFullSpeedRecordPushSeeContiguousSequences) {
  constexpr std::uint64_t kCapacity = 16;
  const std::size_t max = layout::max_message_for(kCapacity);
  auto ring = BroadcastRing::create_anonymous(kCapacity);
  ASSERT_TRUE(ring);
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    std::vector<std::byte> msg(max);
    for (std::uint64_t seq = 0; !stop.load(std::memory_order_relaxed);) {
      const std::span<std::byte> payload(msg.data(), test::sized_length(seq, max));
      test::make_sized_message(seq, payload);
      if (ring->try_push(payload) == Errc::ok) ++seq;
    }
  });
  test::StressCounters counts;
  const test::StressConfig cfg{.sized = true, .max_message = max};
  std::atomic<bool> unused{false};
  std::vector<std::byte> buf(max);
  for (int round = 0; round < 300; ++round) {
    auto id = ring->register_consumer();
    ASSERT_TRUE(id);
    std::uint64_t next = 0;
    bool exact = false;  // the first message's sequence is not known from the position
    for (int got = 0; got < 20;) {
      const RecvResult r = test::receive_one(*ring, *id, round, buf, counts, [&](std::span<const std::byte> m) {
        counts.check(m, next, exact, cfg, unused);
        ++got;
      });
      if (r.status == Errc::empty || r.status == Errc::stalled || r.status == Errc::ok) continue;
      ADD_FAILURE() << "round " << round << ": " << to_string(r.status);
      break;
    }
    EXPECT_EQ(ring->unregister_consumer(*id), Errc::ok);
  }
  stop.store(true);
  producer.join();
  EXPECT_EQ(counts.torn.load(), 0U);
  EXPECT_EQ(counts.out_of_order.load(), 0U);
}

// Threads sharing one handle register and unregister at once while another
// handle reaps: no id is ever held by two threads, every registration gets
// the id's copy buffer (a drain through it works), and the reaper never frees
// an entry whose owner is alive. The reaper catches an unregister that gives
// the id back to the handle before dropping its lock (another thread of the
// handle takes the lock, which this handle already holds, and then loses it);
// TSan catches a copy buffer handed between threads without synchronisation.
TEST(ConcurrencyTest, ThreadsOfOneHandleRegisterAndUnregisterWhileAnotherHandleReaps) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 400;
  test::TempDir dir;
  const std::string path = dir.path() + "/ring";
  auto ring = BroadcastRing::create(path, 64);
  ASSERT_TRUE(ring);
  auto reaper = BroadcastRing::open(path);
  ASSERT_TRUE(reaper);
  std::array<std::atomic<int>, kMaxConsumers> holders{};
  std::atomic<int> overlaps{0};
  std::atomic<int> failures{0};
  std::atomic<std::size_t> reaped{0};
  std::atomic<bool> stop{false};
  std::thread reaping([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      auto n = reaper->reap_dead_consumers();
      if (!n) failures.fetch_add(1);
      else reaped.fetch_add(*n);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < kRounds; ++round) {
        auto id = ring->register_consumer();
        if (!id) {
          failures.fetch_add(1);
          return;
        }
        if (holders[*id].fetch_add(1) != 0) overlaps.fetch_add(1);
        const BatchResult drained = ring->drain(
            *id, [](std::span<const std::byte>) {}, 8);
        if (drained.status != Errc::empty) failures.fetch_add(1);
        holders[*id].fetch_sub(1);
        if (ring->unregister_consumer(*id) != Errc::ok) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  stop.store(true);
  reaping.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(reaped.load(), 0U);
  const RingStatus status = ring->status();
  for (const ConsumerStatus& c : status.consumers) EXPECT_FALSE(c.active);
}

// drain's first-message slow path: a slot still half-written when drain first
// reads it and committed while drain re-reads it. A writer thread holds each
// slot half-written for a short counted busy loop (no clock) while the
// consumer polls, so many first reads see the odd version and the commit lands
// in drain's bounded re-read spin. The consumer's first attempt at each
// message throws from the callback, and the cursor must not have moved (the
// bug this guards: the slow path advanced the cursor before calling back,
// losing the message). Whichever path a read takes, the assertions are the
// same; with the bug put back, runs on a loaded 2-core machine failed 14 times
// out of 14, within the first ~1700 messages.
TEST(ConcurrencyTest, DrainRedeliversAMessageReadOnItsSlowPathWhenTheCallbackThrows) {
  constexpr std::uint64_t kCount = 2000;
  constexpr std::uint64_t kCapacity = 8;
  test::TempDir dir;
  const std::string path = dir.path() + "/ring";
  auto ring = BroadcastRing::create(path, kCapacity);  // this handle is the live producer
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  test::RawSlots raw(path, kCapacity);
  ASSERT_TRUE(raw.ok());
  std::atomic<std::uint64_t> delivered{0};
  std::thread writer([&] {
    alignas(8) test::Buffer msg{};
    for (std::uint64_t seq = 0; seq < kCount; ++seq) {
      // acquire: pairs with the consumer's release store below.
      while (delivered.load(std::memory_order_acquire) < seq) std::this_thread::yield();
      test::make_message(seq, msg);
      raw.begin_write(seq);
      std::atomic<std::uint32_t> spin{0};
      while (spin.fetch_add(1, std::memory_order_relaxed) < 200) {
      }
      raw.commit(seq, msg);
    }
  });
  // However the loop below ends (a failed ASSERT returns early), release the
  // writer and join it.
  struct Join {
    std::atomic<std::uint64_t>& delivered;
    std::thread& writer;
    ~Join() {
      delivered.store(kCount, std::memory_order_release);
      writer.join();
    }
  } join{delivered, writer};
  std::uint64_t throws = 0;
  for (std::uint64_t seq = 0; seq < kCount; ++seq) {
    bool threw = false;
    while (!threw) {
      try {
        const BatchResult r = ring->drain(
            *id, [](std::span<const std::byte>) { throw std::runtime_error("no"); }, 1);
        ASSERT_EQ(r.count, 0U);
        ASSERT_TRUE(r.status == Errc::empty || r.status == Errc::stalled) << to_string(r.status);
        // Poll hot, without yielding: a yield lets the writer finish its
        // half-written window while this thread is off the CPU, and the slow
        // path is then never taken.
      } catch (const std::runtime_error&) {
        threw = true;
      }
    }
    ++throws;
    ASSERT_EQ(ring->status().consumers[*id].cursor, seq) << "message " << seq << " consumed by a throwing callback";
    std::optional<std::uint64_t> got;
    const BatchResult r = ring->drain(
        *id, [&](std::span<const std::byte> p) { got = test::check_message(p); }, 1);
    ASSERT_EQ(r.count, 1U);
    ASSERT_EQ(got, seq);
    // release: the writer may now reuse the slot of message seq.
    delivered.store(seq + 1, std::memory_order_release);
  }
  EXPECT_EQ(throws, kCount);
}

TEST(ConcurrencyTest, ConsumersRegisteringDuringFullSpeedPushSeeContiguousSequences) {
  // Exercises the register_consumer / full-check Dekker handshake: a consumer
  // that joins mid-stream must never find its first slots overwritten.
  auto ring = BroadcastRing::create_anonymous(4);
  ASSERT_TRUE(ring);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread producer([&] {
    alignas(8) test::Buffer msg{};
    for (std::uint64_t seq = 0; !stop.load(std::memory_order_relaxed);) {
      test::make_message(seq, msg);
      if (ring->try_push(msg) == Errc::ok) ++seq;
    }
  });
  for (int round = 0; round < 300; ++round) {
    auto id = ring->register_consumer();
    ASSERT_TRUE(id);
    alignas(8) test::Buffer buf{};
    std::optional<std::uint64_t> previous;
    for (int got = 0; got < 20;) {
      const RecvResult r = ring->try_recv(*id, buf);
      // stalled: the producer was preempted mid-write; retrying is the contract.
      if (r.status == Errc::empty || r.status == Errc::stalled) continue;
      if (r.status != Errc::ok) {
        ADD_FAILURE() << "round " << round << ": " << to_string(r.status);
        failures.fetch_add(1);
        break;
      }
      const auto seq = test::check_message(std::span<const std::byte>(buf.data(), r.length));
      if (!seq || (previous && *seq != *previous + 1)) {
        ADD_FAILURE() << "round " << round << ": got " << (seq ? std::to_string(*seq) : "torn");
        failures.fetch_add(1);
      }
      previous = seq;
      ++got;
    }
    EXPECT_EQ(ring->unregister_consumer(*id), Errc::ok);
  }
  stop.store(true);
  producer.join();
  EXPECT_EQ(failures.load(), 0);
}

// The blocking waits (recv_wait, push_wait) are tested in wait_test.cpp.

}  // namespace
}  // namespace ringcast
