// A ring with consumers in other processes, as an operator would see it:
//
//   <tempdir>/ticks, capacity 64, produced by the test process
//     consumer 0  slow-reader  registered, never reads         lag 40 (62.5%: BEHIND)
//     consumer 1  fast-reader  follows                         lag 0
//     consumer 2  doomed       registered, never read, SIGKILL lag 16 (DEAD)
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "ringcast/broadcast_ring.hpp"
#include "top_test_support.hpp"

namespace ringcast::top::test {

class LiveRing {
 public:
  static constexpr std::uint64_t kCapacity = 64;
  static constexpr std::uint64_t kSlowLag = 40;
  static constexpr std::uint64_t kDeadLag = 16;

  // Call through ASSERT_NO_FATAL_FAILURE.
  void start() {
    auto created = BroadcastRing::create(path(), kCapacity);
    ASSERT_TRUE(created) << created.error().message();
    ring.emplace(std::move(*created));
    ASSERT_NO_FATAL_FAILURE(spawn(slow, "slow-reader", "stall", "ready 0"));
    push(kSlowLag - kDeadLag);
    ASSERT_NO_FATAL_FAILURE(spawn(fast, "fast-reader", "follow", "ready 1"));
    ASSERT_NO_FATAL_FAILURE(spawn(dead, "doomed", "stall", "ready 2"));
    push(kDeadLag);
    dead_pid = dead.pid();
    dead.stop(SIGKILL);
    ASSERT_TRUE(eventually([&] { return ring->lag(1) == 0; })) << "fast-reader did not catch up";
    const RingStatus st = ring->status();
    ASSERT_FALSE(st.consumers[2].owner_alive);
    ASSERT_TRUE(st.consumers[0].owner_alive);
  }

  void push(std::uint64_t n) {
    const std::byte payload[8] = {};
    for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(ring->try_push(payload), Errc::ok);
  }

  [[nodiscard]] std::string path() const { return dir.file("ticks"); }

  TempDir dir;
  std::optional<BroadcastRing> ring;
  ChildProcess slow;
  ChildProcess fast;
  ChildProcess dead;
  pid_t dead_pid = 0;

 private:
  void spawn(ChildProcess& child, const char* name, const char* role, const char* expect) {
    child = ChildProcess::spawn({RING_TOP_HELPER_EXE, "--name", name, role, path()},
                                {.err = ringcast::test::Stream::kPipe});
    const auto line = child.read_line();
    ASSERT_TRUE(line.has_value()) << name << " did not start";
    ASSERT_EQ(*line, expect);
  }
};

}  // namespace ringcast::top::test
