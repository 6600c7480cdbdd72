// The scheduler slice that recv_wait and push_wait give a thread that sleeps
// (set_waiter_slice, docs/reliability.md "Waking on a busy CPU"): shortened
// to the handle's setting, never lengthened, left alone when the setting is
// 0 or the thread is not SCHED_OTHER, nice kept. Each case runs in a fresh
// thread, since a slice belongs to the thread. Skipped on kernels without
// custom slices (before Linux 6.12), where there is nothing to observe.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "ringcast/broadcast_ring.hpp"
#include "sched_slice.hpp"
#include "test_support.hpp"

namespace ringcast {
namespace {

using namespace std::chrono_literals;
using detail::ThreadSchedule;

// Runs `f` on a new thread and returns its schedule afterwards.
std::optional<ThreadSchedule> schedule_after(const std::function<void()>& f) {
  std::optional<ThreadSchedule> after;
  std::thread t([&] {
    f();
    after = detail::thread_schedule();
  });
  t.join();
  return after;
}

// A new thread's schedule, as the kernel reports it before anything changed it.
ThreadSchedule default_schedule() {
  const auto s = schedule_after([] {});
  if (!s) ADD_FAILURE() << "sched_getattr failed";
  return s.value_or(ThreadSchedule{});
}

class WaiterSliceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    initial_ = default_schedule();
    if (initial_.policy != SCHED_OTHER || initial_.slice <= kDefaultWaiterSlice) {
      GTEST_SKIP() << "this kernel reports no custom slice for SCHED_OTHER threads (Linux >= 6.12 does)";
    }
  }
  // One recv_wait that sleeps (kBlock on an empty ring) and times out.
  static void sleep_in_recv_wait(BroadcastRing& ring) {
    auto id = ring.register_consumer();
    ASSERT_TRUE(id);
    alignas(8) std::array<std::byte, kMaxPayload> buf{};
    EXPECT_EQ(ring.recv_wait(*id, buf, {5ms, IdleStrategy::kBlock}).status, Errc::timed_out);
    ASSERT_EQ(ring.unregister_consumer(*id), Errc::ok);
  }
  ThreadSchedule initial_;
};

TEST_F(WaiterSliceTest, ASleepInRecvWaitShortensTheSliceToTheDefault) {
  auto ring = BroadcastRing::create_anonymous(8);
  ASSERT_TRUE(ring);
  const auto after = schedule_after([&] { sleep_in_recv_wait(*ring); });
  ASSERT_TRUE(after);
  EXPECT_EQ(after->slice, kDefaultWaiterSlice);
  EXPECT_EQ(after->policy, SCHED_OTHER);
}

TEST_F(WaiterSliceTest, ASleepInPushWaitShortensTheSliceToTheHandlesSetting) {
  auto ring = BroadcastRing::create_anonymous(2);
  ASSERT_TRUE(ring);
  ring->set_waiter_slice(300us);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  ASSERT_EQ(ring->try_push(test::as_bytes("a")), Errc::ok);
  ASSERT_EQ(ring->try_push(test::as_bytes("b")), Errc::ok);
  const auto after = schedule_after([&] {
    EXPECT_EQ(ring->push_wait(test::as_bytes("c"), {5ms, IdleStrategy::kBlock}), Errc::timed_out);
  });
  ASSERT_TRUE(after);
  EXPECT_EQ(after->slice, 300us);
}

TEST_F(WaiterSliceTest, ZeroLeavesTheThreadsSliceAsItWas) {
  auto ring = BroadcastRing::create_anonymous(8);
  ASSERT_TRUE(ring);
  ring->set_waiter_slice(0us);
  const auto after = schedule_after([&] { sleep_in_recv_wait(*ring); });
  ASSERT_TRUE(after);
  EXPECT_EQ(after->slice, initial_.slice);
}

TEST_F(WaiterSliceTest, AShorterSliceIsNeverLengthened) {
  auto ring = BroadcastRing::create_anonymous(8);
  ASSERT_TRUE(ring);
  const auto after = schedule_after([&] {
    // The thread chose 200 us itself (the ring would give it 100 us otherwise);
    // a handle set to 500 us must keep it at 200 us.
    ring->set_waiter_slice(200us);
    sleep_in_recv_wait(*ring);
    ring->set_waiter_slice(500us);
    sleep_in_recv_wait(*ring);
  });
  ASSERT_TRUE(after);
  EXPECT_EQ(after->slice, 200us);
}

TEST_F(WaiterSliceTest, TheThreadsNiceValueIsKept) {
  auto ring = BroadcastRing::create_anonymous(8);
  ASSERT_TRUE(ring);
  const auto after = schedule_after([&] {
    // Raising one's own nice value needs no privilege; on Linux it is per thread.
    ASSERT_EQ(::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 7), 0);
    sleep_in_recv_wait(*ring);
  });
  ASSERT_TRUE(after);
  EXPECT_EQ(after->nice, 7);
  EXPECT_EQ(after->slice, kDefaultWaiterSlice);
}

TEST_F(WaiterSliceTest, ABatchThreadIsLeftAlone) {
  auto ring = BroadcastRing::create_anonymous(8);
  ASSERT_TRUE(ring);
  const auto after = schedule_after([&] {
    const sched_param param{};
    ASSERT_EQ(::pthread_setschedparam(::pthread_self(), SCHED_BATCH, &param), 0);
    sleep_in_recv_wait(*ring);
  });
  ASSERT_TRUE(after);
  EXPECT_EQ(after->policy, SCHED_BATCH);
  EXPECT_EQ(after->slice, initial_.slice);
}

}  // namespace
}  // namespace ringcast
