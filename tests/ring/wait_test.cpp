// The blocking waits (recv_wait, push_wait) on every kind of ring: no lost
// wake-up with many sleepers and a producer that pushes exactly one message,
// in one process and across processes, timeouts, an idle consumer that does
// not spin, and a producer that sleeps on a full ring until a consumer makes
// room. Bounds are caps that turn a hang into a failure, never timings.
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <ratio>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "child_process.hpp"
#include "message_pattern.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "run_queue_delay.hpp"
#include "test_support.hpp"

namespace ringcast {
namespace {

using namespace std::chrono_literals;

// WaitOptions takes exactly the durations the std::chrono::nanoseconds timeout
// it replaced took: lossless ones. A floating-point or finer-than-ns duration
// (or a bare number) is still refused at compile time.
template <class T>
constexpr bool kConvertsAsNanoseconds =
    std::is_convertible_v<T, WaitOptions> == std::is_convertible_v<T, std::chrono::nanoseconds>;
static_assert(std::is_convertible_v<std::chrono::nanoseconds, WaitOptions>);
static_assert(std::is_convertible_v<std::chrono::milliseconds, WaitOptions>);
static_assert(std::is_convertible_v<std::chrono::duration<int, std::ratio<3600>>, WaitOptions>);
static_assert(!std::is_convertible_v<std::chrono::duration<double>, WaitOptions>);
static_assert(!std::is_convertible_v<std::chrono::duration<float, std::milli>, WaitOptions>);
static_assert(!std::is_convertible_v<std::chrono::duration<std::int64_t, std::pico>, WaitOptions>);
static_assert(!std::is_convertible_v<std::int64_t, WaitOptions>);
static_assert(kConvertsAsNanoseconds<std::chrono::seconds> && kConvertsAsNanoseconds<std::chrono::microseconds> &&
              kConvertsAsNanoseconds<std::chrono::duration<double>> &&
              kConvertsAsNanoseconds<std::chrono::duration<std::int32_t, std::pico>> &&
              kConvertsAsNanoseconds<std::chrono::duration<long double, std::nano>> && kConvertsAsNanoseconds<int>);
static_assert(WaitOptions(5s).idle == IdleStrategy::kSpinThenBlock && WaitOptions(5s).timeout == 5s);

// Plain rings rely on membarrier(2) (or the capped sleep it falls back to);
// wakeups rings on a fence on every side. Both must never lose a wake-up,
// whether the producer wakes every sleeper or leaves most to the wake chain.
struct WaitCase {
  bool wakeups;
  IdleStrategy idle;
  WakePolicy wake = WakePolicy::kAuto;
};

std::string case_name(const ::testing::TestParamInfo<WaitCase>& info) {
  const WakePolicy w = info.param.wake;
  return std::string(info.param.wakeups ? "Wakeups" : "Plain") +
         (info.param.idle == IdleStrategy::kBlock ? "Block" : "SpinThenBlock") +
         (w == WakePolicy::kChain     ? "Chain"
          : w == WakePolicy::kWakeAll ? "WakeAll"
                                      : "");
}

class WaitTest : public ::testing::TestWithParam<WaitCase> {};

std::chrono::nanoseconds thread_cpu_time() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// 15 consumers asleep, one push: every one of them must get it, woken (by the
// producer or along the wake chain), not rescued by a capped sleep. Rounds
// alternate between pushing once all are asleep and pushing at once, so the
// push also races consumers on their way to sleep.
// A consumer that waits for a CPU for as long as the chain's rescue interval
// (100 ms) before it passes its wake-up on is, to the ring, a stopped
// consumer: the capped sleeps that rescue the rest are right, not a lost
// wake-up. Such a round is told apart by the kernel's own counts: the time
// each consumer spent runnable but not running (run_queue_delay), and the
// time the host took this VM's CPUs (cpu_steal); only rescues in rounds where
// neither reached half the interval fail the test.
TEST_P(WaitTest, EverySleeperWakesForASinglePush) {
  constexpr int kConsumers = static_cast<int>(kMaxConsumers) - 1;
  constexpr std::uint64_t kRounds = 40;
  // Well under the rescue interval: a consumer held off its CPU for less than
  // this cannot have delayed a chain by 100 ms.
  constexpr auto kStarved = 50ms;
  auto ring = BroadcastRing::create_anonymous(64, {.wakeups = GetParam().wakeups});
  ASSERT_TRUE(ring);
  ring->set_wake_policy(GetParam().wake);
  std::vector<ConsumerId> ids;
  for (int i = 0; i < kConsumers; ++i) ids.push_back(*ring->register_consumer());
  std::atomic<int> waiting{0};
  std::atomic<int> failures{0};
  // Per round: the longest run-queue wait of any consumer during its recv_wait.
  std::array<std::atomic<std::int64_t>, kRounds> longest_delay_ns{};
  std::vector<std::thread> threads;
  for (const ConsumerId id : ids) {
    threads.emplace_back([&, id] {
      alignas(8) test::Buffer buf{};
      for (std::uint64_t round = 0; round < kRounds; ++round) {
        const auto delay_before = test::run_queue_delay();
        waiting.fetch_add(1);
        const RecvResult r = ring->recv_wait(id, buf, {60s, GetParam().idle});
        const std::int64_t delay = (test::run_queue_delay() - delay_before).count();
        std::int64_t longest = longest_delay_ns[round].load();
        while (delay > longest && !longest_delay_ns[round].compare_exchange_weak(longest, delay)) {
        }
        const auto seq = r ? test::check_message(std::span<const std::byte>(buf.data(), r.length)) : std::nullopt;
        if (!seq || *seq != round) {
          ADD_FAILURE() << "round " << round << ": " << to_string(r.status);
          failures.fetch_add(1);
          return;
        }
      }
    });
  }
  // Late wake-ups per round: a round's rescues all happen before its last
  // consumer returns, which is before every consumer is waiting again.
  std::array<std::uint64_t, kRounds> late{};
  std::uint64_t late_so_far = 0;
  // And the CPU time the host took from the round's push to its end.
  std::array<std::chrono::nanoseconds, kRounds> stolen{};
  const auto count_late = [&](std::uint64_t round) {
    late[round] = ring->late_wakeups() - late_so_far;
    late_so_far += late[round];
    stolen[round] = test::cpu_steal() - stolen[round];
  };
  alignas(8) test::Buffer msg{};
  for (std::uint64_t round = 0; round < kRounds && failures.load() == 0; ++round) {
    const int expected = kConsumers * static_cast<int>(round + 1);
    ASSERT_TRUE(test::eventually([&] { return waiting.load() == expected; }, 60s, 1ms));
    if (round > 0) count_late(round - 1);
    if (round % 2 == 0) {
      ASSERT_TRUE(test::eventually(
          [&] { return ring->status().sleeping_consumers == static_cast<std::uint32_t>(kConsumers); }, 60s, 1ms));
    }
    test::make_message(round, msg);
    stolen[round] = test::cpu_steal();
    ASSERT_EQ(ring->try_push(msg), Errc::ok);
  }
  for (std::thread& t : threads) t.join();
  count_late(kRounds - 1);
  EXPECT_EQ(failures.load(), 0);
  for (std::uint64_t round = 0; round < kRounds; ++round) {
    if (late[round] == 0) continue;
    const auto delay_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds(longest_delay_ns[round].load()));
    const auto stolen_ms = std::chrono::duration_cast<std::chrono::milliseconds>(stolen[round]);
    const bool starved = delay_ms >= kStarved || stolen_ms >= kStarved;
    EXPECT_TRUE(starved) << "round " << round << ": " << late[round]
                         << " consumers were rescued by a capped sleep; no consumer waited for a CPU longer than "
                         << delay_ms.count() << " ms, and the host took " << stolen_ms.count() << " ms";
    if (starved) {
      std::cout << "round " << round << ": " << late[round] << " rescued after a consumer waited " << delay_ms.count()
                << " ms for a CPU and the host took " << stolen_ms.count() << " ms (not a lost wake-up)\n";
    }
  }
  EXPECT_EQ(ring->status().sleeping_consumers, 0U);
}

TEST_P(WaitTest, RecvWaitReturnsOnTimeout) {
  auto ring = BroadcastRing::create_anonymous(8, {.wakeups = GetParam().wakeups});
  auto id = ring->register_consumer();
  alignas(8) test::Buffer buf{};
  EXPECT_EQ(ring->recv_wait(*id, buf, {20ms, GetParam().idle}).status, Errc::timed_out);
  EXPECT_EQ(ring->recv_wait(*id, buf, {0ms, GetParam().idle}).status, Errc::timed_out);
  // And the next message still arrives afterwards.
  ASSERT_EQ(ring->try_push(test::as_bytes("late")), Errc::ok);
  EXPECT_EQ(ring->recv_wait(*id, buf, {60s, GetParam().idle}).status, Errc::ok);
}

TEST_P(WaitTest, FullRingProducerSleepsUntilAConsumerMakesRoom) {
  auto ring = BroadcastRing::create_anonymous(2, {.wakeups = GetParam().wakeups});
  auto id = ring->register_consumer();
  ASSERT_EQ(ring->try_push(test::as_bytes("a")), Errc::ok);
  ASSERT_EQ(ring->try_push(test::as_bytes("b")), Errc::ok);
  EXPECT_EQ(ring->push_wait(test::as_bytes("c"), {10ms, GetParam().idle}), Errc::timed_out);
  std::atomic<bool> pushed{false};
  std::thread producer([&] { pushed.store(ring->push_wait(test::as_bytes("c"), {60s, GetParam().idle}) == Errc::ok); });
  ASSERT_TRUE(test::eventually([&] { return ring->status().producer_sleeping; }, 60s, 1ms));
  alignas(8) test::Buffer buf{};
  ASSERT_EQ(ring->try_recv(*id, buf).status, Errc::ok);
  producer.join();
  EXPECT_TRUE(pushed.load());
}

TEST_P(WaitTest, UnregisteringTheSlowConsumerWakesTheProducer) {
  auto ring = BroadcastRing::create_anonymous(2, {.wakeups = GetParam().wakeups});
  auto id = ring->register_consumer();
  ASSERT_EQ(ring->try_push(test::as_bytes("a")), Errc::ok);
  ASSERT_EQ(ring->try_push(test::as_bytes("b")), Errc::ok);
  std::atomic<bool> pushed{false};
  std::thread producer([&] { pushed.store(ring->push_wait(test::as_bytes("c"), {60s, GetParam().idle}) == Errc::ok); });
  ASSERT_TRUE(test::eventually([&] { return ring->status().producer_sleeping; }, 60s, 1ms));
  EXPECT_EQ(ring->unregister_consumer(*id), Errc::ok);
  producer.join();
  EXPECT_TRUE(pushed.load());
}

// One sleeper, pushed to once it sleeps; returns whether it got message `seq`.
bool wake_one_sleeper(BroadcastRing& consumer_side, ConsumerId id, BroadcastRing& producer_side, std::uint64_t seq,
                      IdleStrategy idle) {
  std::atomic<bool> ok{false};
  std::thread consumer([&] {
    alignas(8) test::Buffer buf{};
    const RecvResult r = consumer_side.recv_wait(id, buf, {60s, idle});
    const auto got = r ? test::check_message(std::span<const std::byte>(buf.data(), r.length)) : std::nullopt;
    ok.store(got && *got == seq);
  });
  const bool slept = test::eventually([&] { return producer_side.status().sleeping_consumers == 1; }, 60s, 1ms);
  alignas(8) test::Buffer msg{};
  test::make_message(seq, msg);
  const bool pushed = producer_side.try_push(msg) == Errc::ok;
  consumer.join();
  return slept && pushed && ok.load();
}

// After a wake-up the producer fences every publish so that sleepers can skip
// their membarrier; after kQuietPublishesBeforeUnfence publishes without a
// sleeper it stops. A sleeper after that must still be woken.
TEST_P(WaitTest, SleeperIsWokenAfterTheProducerStopsFencing) {
  auto ring = BroadcastRing::create_anonymous(64, {.wakeups = GetParam().wakeups});
  auto id = ring->register_consumer();
  std::uint64_t seq = 0;
  ASSERT_TRUE(wake_one_sleeper(*ring, *id, *ring, seq++, GetParam().idle));
  alignas(8) test::Buffer msg{}, buf{};
  for (std::uint32_t i = 0; i < 2 * kQuietPublishesBeforeUnfence; ++i, ++seq) {
    test::make_message(seq, msg);
    ASSERT_EQ(ring->try_push(msg), Errc::ok);
    ASSERT_EQ(ring->try_recv(*id, buf).status, Errc::ok);
  }
  ASSERT_TRUE(wake_one_sleeper(*ring, *id, *ring, seq++, GetParam().idle));
}

// A producer that took over from one that was fencing keeps fencing (the
// mark is in the file), and its sleepers are woken either way.
TEST_P(WaitTest, SleeperIsWokenByAProducerThatTookOverTheRole) {
  test::TempDir dir;
  const std::string path = dir.path() + "/ring";
  auto first = BroadcastRing::create(path, 64, {.wakeups = GetParam().wakeups});
  ASSERT_TRUE(first);
  auto consumer_side = BroadcastRing::open(path);
  ASSERT_TRUE(consumer_side);
  auto id = consumer_side->register_consumer();
  ASSERT_TRUE(id);
  ASSERT_TRUE(wake_one_sleeper(*consumer_side, *id, *first, 0, GetParam().idle));
  first->release_producer();
  auto second = BroadcastRing::open(path);
  ASSERT_TRUE(second);
  ASSERT_TRUE(second->claim_producer());
  ASSERT_TRUE(wake_one_sleeper(*consumer_side, *id, *second, 1, GetParam().idle));
  alignas(8) test::Buffer msg{}, buf{};
  for (std::uint64_t seq = 2; seq < 2 + 2 * kQuietPublishesBeforeUnfence; ++seq) {
    test::make_message(seq, msg);
    ASSERT_EQ(second->try_push(msg), Errc::ok);
    ASSERT_EQ(consumer_side->try_recv(*id, buf).status, Errc::ok);
  }
  ASSERT_TRUE(wake_one_sleeper(*consumer_side, *id, *second, 2 + 2 * kQuietPublishesBeforeUnfence, GetParam().idle));
}

INSTANTIATE_TEST_SUITE_P(Rings, WaitTest,
                         ::testing::Values(WaitCase{false, IdleStrategy::kSpinThenBlock},
                                           WaitCase{false, IdleStrategy::kBlock},
                                           WaitCase{true, IdleStrategy::kSpinThenBlock},
                                           WaitCase{true, IdleStrategy::kBlock},
                                           WaitCase{false, IdleStrategy::kBlock, WakePolicy::kChain},
                                           WaitCase{true, IdleStrategy::kBlock, WakePolicy::kChain},
                                           WaitCase{false, IdleStrategy::kBlock, WakePolicy::kWakeAll}),
                         case_name);

// The default wait on a ring nobody pushes to: the thread sleeps, it does not
// spin. A spinning wait would use ~1 s of CPU here; the adaptive spin allows
// at most 20 us per wait.
TEST(IdleWaitTest, IdleConsumerUsesAlmostNoCpu) {
  auto ring = BroadcastRing::create_anonymous(8);
  auto id = ring->register_consumer();
  alignas(8) test::Buffer buf{};
  // Teach the adaptive spin that messages come fast, so it starts at its
  // largest budget: the quiet second must then still cost almost nothing.
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(ring->try_push(test::as_bytes("x")), Errc::ok);
    ASSERT_EQ(ring->recv_wait(*id, buf, 60s).status, Errc::ok);
  }
  const auto before = thread_cpu_time();
  EXPECT_EQ(ring->recv_wait(*id, buf, 1s).status, Errc::timed_out);
  const auto used = thread_cpu_time() - before;
  EXPECT_LT(used, 50ms) << "an idle consumer used " << used.count() << " ns of CPU in one second";
}

// Across processes: the producer (this process) and each sleeping consumer
// are different address spaces, so a wake-up depends on the futex being
// shared and on membarrier(2) reaching this process's CPU. With the wake
// chain, the consumers wake each other; a child a capped sleep, not a
// wake-up, gave the message to fails the test, unless some child waited as
// long as the rescue interval's half for a CPU, or the host took that long
// (a starved chain link, as in EverySleeperWakesForASinglePush).
class CrossProcessWaitTest : public ::testing::TestWithParam<WakePolicy> {};

TEST_P(CrossProcessWaitTest, SleepersInOtherProcessesWakeForASinglePush) {
  constexpr int kChildren = 4;
  test::TempDir dir;
  const std::string path = dir.path() + "/ring";
  auto ring = BroadcastRing::create(path, 64);
  ASSERT_TRUE(ring);
  ring->set_wake_policy(GetParam());
  std::vector<test::ChildProcess> children;
  for (int i = 0; i < kChildren; ++i) {
    children.push_back(test::ChildProcess::spawn({RING_TEST_HELPER, "wait-one", path, "120"}));
  }
  for (test::ChildProcess& c : children) ASSERT_TRUE(c.read_stdout_until("ready", test::deadline_in(60s)));
  ASSERT_TRUE(test::eventually(
      [&] { return ring->status().sleeping_consumers == static_cast<std::uint32_t>(kChildren); }, 60s, 1ms));
  alignas(8) test::Buffer msg{};
  test::make_message(0, msg);
  const auto stolen_before = test::cpu_steal();
  ASSERT_EQ(ring->try_push(msg), Errc::ok);
  int rescued = 0;
  long long longest_delay_ms = 0;
  for (test::ChildProcess& c : children) {
    ASSERT_TRUE(c.read_stdout_until("end\n", test::deadline_in(180s))) << c.stdout_text();
    EXPECT_EQ(test::exit_code(c.wait_exit(test::deadline_in(180s))), 0) << c.stdout_text();
    const std::string& out = c.stdout_text();
    rescued += out.find("rescued 1") != std::string::npos ? 1 : 0;
    const std::size_t at = out.find("run-queue-ms ");
    if (at != std::string::npos) longest_delay_ms = std::max(longest_delay_ms, std::stoll(out.substr(at + 13)));
  }
  if (rescued > 0) {
    const auto stolen_ms = std::chrono::duration_cast<std::chrono::milliseconds>(test::cpu_steal() - stolen_before);
    EXPECT_TRUE(longest_delay_ms >= 50 || stolen_ms >= 50ms)
        << rescued << " children were rescued by a capped sleep; no child waited for a CPU longer than "
        << longest_delay_ms << " ms, and the host took " << stolen_ms.count() << " ms";
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, CrossProcessWaitTest, ::testing::Values(WakePolicy::kAuto, WakePolicy::kChain),
                         [](const ::testing::TestParamInfo<WakePolicy>& policy) {
                           return policy.param == WakePolicy::kChain ? "Chain" : "Auto";
                         });

}  // namespace
}  // namespace ringcast
