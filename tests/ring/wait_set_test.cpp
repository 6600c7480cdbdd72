// WaitSet: one sleep over many rings. Membership and its limits, readiness
// (at once, fairly, on a dead producer's half-written slot), a sleeper woken
// by a single push on any of 64 rings (not rescued by a capped sleep), an
// idle wait that does not spin, the eventfd for event loops, and 64 rings fed
// by 64 producer processes into one consumer that receives every message
// once and in order. Bounds are caps that turn a hang into a failure.
#include "ringcast/wait_set.hpp"

#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "message_pattern.hpp"
#include "raw_slots.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "run_queue_delay.hpp"
#include "test_support.hpp"

namespace ringcast {
namespace {

using namespace std::chrono_literals;

struct Member {
  BroadcastRing ring;
  ConsumerId id;
};

std::vector<Member> anonymous_rings(int n, const CreateOptions& options = {}) {
  std::vector<Member> rings;
  for (int i = 0; i < n; ++i) {
    auto ring = BroadcastRing::create_anonymous(64, options);
    EXPECT_TRUE(ring);
    auto id = ring->register_consumer();
    EXPECT_TRUE(id);
    rings.push_back({std::move(*ring), *id});
  }
  return rings;
}

void add_all(WaitSet& ws, std::vector<Member>& rings) {
  for (std::size_t i = 0; i < rings.size(); ++i) {
    auto m = ws.add(rings[i].ring, rings[i].id);
    ASSERT_TRUE(m);
    ASSERT_EQ(*m, i);
  }
}

bool readable(int fd, std::chrono::milliseconds timeout) {
  struct pollfd p {
    fd, POLLIN, 0
  };
  return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1 && (p.revents & POLLIN) != 0;
}

std::chrono::nanoseconds thread_cpu_time() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

TEST(WaitSetTest, AddsConsumersOfItsRingsUpToTheLimit) {
  WaitSet ws;
  auto ring = BroadcastRing::create_anonymous(8);
  ASSERT_TRUE(ring);
  EXPECT_EQ(ws.add(*ring, 0).error().code, Errc::invalid_consumer);  // not registered
  std::vector<BroadcastRing> rings;
  for (std::size_t r = 0; r * kMaxConsumers < WaitSet::kMaxMembers + 1; ++r) {
    rings.push_back(*BroadcastRing::create_anonymous(8));
  }
  std::size_t added = 0;
  for (BroadcastRing& r : rings) {
    for (std::size_t c = 0; c < kMaxConsumers && added < WaitSet::kMaxMembers; ++c, ++added) {
      auto m = ws.add(r, *r.register_consumer());
      ASSERT_TRUE(m);
      EXPECT_EQ(*m, added);
    }
  }
  EXPECT_EQ(ws.size(), WaitSet::kMaxMembers);
  auto extra = rings.back().register_consumer();
  ASSERT_TRUE(extra);
  EXPECT_EQ(ws.add(rings.back(), *extra).error().code, Errc::no_consumer_slot);
  // A removed index is free again, and is the one given next.
  EXPECT_EQ(ws.remove(5), Errc::ok);
  EXPECT_EQ(ws.remove(5), Errc::invalid_consumer);
  EXPECT_EQ(ws.size(), WaitSet::kMaxMembers - 1);
  EXPECT_EQ(ws.add(rings.back(), *extra).value(), 5U);
}

TEST(WaitSetTest, ReportsEveryReadyMemberAtOnceAndTakesTurns) {
  auto rings = anonymous_rings(3);
  WaitSet ws;
  add_all(ws, rings);
  std::array<std::size_t, 3> ready{};
  EXPECT_EQ(ws.wait(ready, 0ns).status, Errc::timed_out);
  ASSERT_EQ(rings[0].ring.try_push(test::as_bytes("a")), Errc::ok);
  ASSERT_EQ(rings[2].ring.try_push(test::as_bytes("c")), Errc::ok);
  EXPECT_TRUE(ws.ready(0));
  EXPECT_FALSE(ws.ready(1));
  const WaitSetResult all = ws.wait(ready, 60s);
  ASSERT_EQ(all.status, Errc::ok);
  ASSERT_EQ(all.count, 2U);
  EXPECT_EQ(ready[0], 0U);
  EXPECT_EQ(ready[1], 2U);
  // Room for one: the scan starts after the member last reported, so both
  // ready members come up in turn.
  std::array<std::size_t, 1> one{};
  ASSERT_EQ(ws.wait(one, 60s).count, 1U);
  EXPECT_EQ(one[0], 0U);
  ASSERT_EQ(ws.wait(one, 60s).count, 1U);
  EXPECT_EQ(one[0], 2U);
  ASSERT_EQ(ws.wait(one, 60s).count, 1U);
  EXPECT_EQ(one[0], 0U);
  // Received: no longer ready.
  alignas(8) test::Buffer buf{};
  ASSERT_EQ(rings[0].ring.try_recv(rings[0].id, buf).status, Errc::ok);
  ASSERT_EQ(rings[2].ring.try_recv(rings[2].id, buf).status, Errc::ok);
  EXPECT_EQ(ws.wait(ready, 1ms).status, Errc::timed_out);
}

// File rings in `dir`, each with one consumer (the producer is the same handle).
std::vector<Member> file_rings(const test::TempDir& dir, int n, const CreateOptions& options = {}) {
  std::vector<Member> rings;
  for (int i = 0; i < n; ++i) {
    auto ring = BroadcastRing::create(dir.file("ring" + std::to_string(i)), 64, options);
    EXPECT_TRUE(ring);
    auto id = ring->register_consumer();
    EXPECT_TRUE(id);
    rings.push_back({std::move(*ring), *id});
  }
  return rings;
}

// The doorbell files in `dir`.
std::vector<std::string> doorbells_in(const test::TempDir& dir) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    if (e.path().filename().string().starts_with(kDoorbellPrefix)) found.push_back(e.path().string());
  }
  return found;
}

struct WakeCase {
  bool wakeups;       // a wakeups ring (fences) or a plain one (membarrier)
  WakePolicy policy;  // the producer wakes every sleeper, or leaves them to the chain
  bool files;         // file rings in one directory (a doorbell), or anonymous ones (none)
};

// A sleeper over 64 rings, and one push on one of them once it sleeps: the
// push must wake it (a producer's ordinary wake on that ring's line, or its
// ring of the WaitSet's doorbell), on plain rings (membarrier) and on
// wakeups rings (fences), with the producer waking every sleeper or leaving
// them to the chain. Two laps over the rings: in the second, every producer
// has confirmed the doorbell, and the sleeper waits on that word alone. A
// round a capped sleep ended counts as lost unless the waiter waited half
// the cap for a CPU.
class WaitSetWakeTest : public ::testing::TestWithParam<WakeCase> {};

TEST_P(WaitSetWakeTest, OnePushOnAnyOf64RingsWakesTheSleeper) {
  constexpr int kRings = 64;
  constexpr int kRounds = 2 * kRings;
  const WakeCase c = GetParam();
  test::TempDir dir;
  auto rings =
      c.files ? file_rings(dir, kRings, {.wakeups = c.wakeups}) : anonymous_rings(kRings, {.wakeups = c.wakeups});
  for (Member& m : rings) m.ring.set_wake_policy(c.policy);
  std::optional<WaitSet> ws(std::in_place);
  add_all(*ws, rings);
  EXPECT_EQ(doorbells_in(dir).size(), c.files ? 1U : 0U);
  std::atomic<int> woke{-1};
  std::atomic<std::int64_t> longest_delay_ns{0};
  std::atomic<int> round_done{-1};
  std::thread waiter([&] {
    std::array<std::size_t, kRings> ready{};
    alignas(8) test::Buffer buf{};
    for (int round = 0; round < kRounds; ++round) {
      const auto delay_before = test::run_queue_delay();
      const WaitSetResult r = ws->wait(ready, 60s);
      longest_delay_ns.store(std::max(longest_delay_ns.load(), (test::run_queue_delay() - delay_before).count()));
      woke.store(r.count == 1 ? static_cast<int>(ready[0]) : -2);
      if (r.count == 1) (void)rings[ready[0]].ring.try_recv(rings[ready[0]].id, buf);
      round_done.store(round);
    }
  });
  for (int round = 0; round < kRounds; ++round) {
    // The ring pushed to differs each round: 0, 37, 10, ... (37 is prime to 64).
    const auto k = static_cast<std::size_t>((round * 37) % kRings);
    ASSERT_TRUE(test::eventually([&] { return rings[k].ring.status().sleeping_consumers == 1; }, 60s, 1ms));
    ASSERT_EQ(rings[k].ring.try_push(test::as_bytes("x")), Errc::ok);
    ASSERT_TRUE(test::eventually([&] { return round_done.load() == round; }, 60s, 1ms));
    ASSERT_EQ(woke.load(), static_cast<int>(k)) << "round " << round;
  }
  waiter.join();
  if (ws->late_wakeups() > 0) {
    EXPECT_GE(std::chrono::nanoseconds(longest_delay_ns.load()), 50ms)
        << ws->late_wakeups() << " rounds ended by a capped sleep, not a wake-up";
  }
  if (c.files) {
    // Every producer rang the doorbell and said so in its consumer's entry.
    for (std::size_t i = 0; i < rings.size(); ++i) {
      test::RawSlots raw(dir.file("ring" + std::to_string(i)), 64);
      ASSERT_TRUE(raw.ok());
      const layout::ConsumerEntry& e = raw.header().consumers[rings[i].id];
      EXPECT_NE(e.doorbell.load(), 0U) << "ring " << i;
      EXPECT_EQ(e.doorbell_rung.load(), e.doorbell.load()) << "ring " << i;
    }
  }
  ws.reset();
  EXPECT_TRUE(doorbells_in(dir).empty());
}

INSTANTIATE_TEST_SUITE_P(
    Rings, WaitSetWakeTest,
    ::testing::Values(WakeCase{false, WakePolicy::kAuto, false}, WakeCase{true, WakePolicy::kAuto, false},
                      WakeCase{false, WakePolicy::kChain, false}, WakeCase{false, WakePolicy::kAuto, true},
                      WakeCase{true, WakePolicy::kAuto, true}, WakeCase{false, WakePolicy::kChain, true}),
    [](const auto& p) {
      return std::string(p.param.files ? "Doorbell" : "") + (p.param.wakeups ? "Wakeups" : "Plain") +
             (p.param.policy == WakePolicy::kChain ? "Chain" : "Auto");
    });

// A WaitSet asleep first on a ring, then six recv_wait threads, and a
// producer that wakes one sleeper per other CPU and leaves the rest to the
// chain: the kernel wakes the first sleeper first, the WaitSet, which must
// pass the wake-up on. A sleeper rescued by its capped sleep instead fails.
TEST(WaitSetTest, PassesTheWakeChainOn) {
  auto rings = anonymous_rings(1);
  BroadcastRing& ring = rings[0].ring;
  ring.set_wake_policy(WakePolicy::kChain);
  constexpr int kOthers = 6;
  std::vector<ConsumerId> ids;
  for (int i = 0; i < kOthers; ++i) ids.push_back(*ring.register_consumer());
  WaitSet ws;
  add_all(ws, rings);
  std::atomic<int> received{0};
  std::atomic<std::int64_t> longest_delay_ns{0};
  const auto note_delay = [&](std::chrono::nanoseconds before) {
    const std::int64_t d = (test::run_queue_delay() - before).count();
    std::int64_t longest = longest_delay_ns.load();
    while (d > longest && !longest_delay_ns.compare_exchange_weak(longest, d)) {
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    const auto before = test::run_queue_delay();
    std::array<std::size_t, 1> ready{};
    if (ws.wait(ready, 60s)) received.fetch_add(1);
    note_delay(before);
  });
  ASSERT_TRUE(test::eventually([&] { return ring.status().sleeping_consumers == 1; }, 60s, 1ms));
  for (const ConsumerId id : ids) {
    threads.emplace_back([&, id] {
      const auto before = test::run_queue_delay();
      alignas(8) test::Buffer buf{};
      if (ring.recv_wait(id, buf, {60s, IdleStrategy::kBlock})) received.fetch_add(1);
      note_delay(before);
    });
  }
  ASSERT_TRUE(test::eventually(
      [&] { return ring.status().sleeping_consumers == static_cast<std::uint32_t>(kOthers + 1); }, 60s, 1ms));
  ASSERT_EQ(ring.try_push(test::as_bytes("x")), Errc::ok);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(received.load(), kOthers + 1);
  if (ring.late_wakeups() + ws.late_wakeups() > 0) {
    EXPECT_GE(std::chrono::nanoseconds(longest_delay_ns.load()), 50ms)
        << ring.late_wakeups() << " recv_wait and " << ws.late_wakeups() << " WaitSet sleepers were rescued";
  }
}

// Sleeps in `ws` on a thread until one push on ring `k` of `rings` (made once
// it sleeps) wakes it; returns the ready member, or -1.
int wait_for_one_push(WaitSet& ws, std::vector<Member>& rings, BroadcastRing& producer, std::size_t k) {
  std::atomic<int> woke{-1};
  std::thread waiter([&] {
    std::array<std::size_t, 1> ready{};
    const WaitSetResult r = ws.wait(ready, 60s);
    woke.store(r.count == 1 ? static_cast<int>(ready[0]) : -1);
  });
  EXPECT_TRUE(test::eventually([&] { return rings[k].ring.status().sleeping_consumers == 1; }, 60s, 1ms));
  EXPECT_EQ(producer.try_push(test::as_bytes("x")), Errc::ok);
  waiter.join();
  alignas(8) test::Buffer buf{};
  if (woke.load() >= 0) {
    EXPECT_EQ(rings[k].ring.try_recv(rings[k].id, buf).status, Errc::ok);
  }
  return woke.load();
}

// A producer that cannot open the doorbell (here: gone before its first
// ring) says so in the entry, and the WaitSet keeps sleeping on that ring's
// line: every push still wakes it, none by a capped sleep.
TEST(WaitSetTest, SleepsOnTheLineOfARingWhoseProducerCannotRingItsDoorbell) {
  test::TempDir dir;
  auto rings = file_rings(dir, 4);
  WaitSet ws;
  add_all(ws, rings);
  const auto bells = doorbells_in(dir);
  ASSERT_EQ(bells.size(), 1U);
  ASSERT_EQ(::unlink(bells[0].c_str()), 0);
  for (std::size_t round = 0; round < 8; ++round) {
    const std::size_t k = round % rings.size();
    EXPECT_EQ(wait_for_one_push(ws, rings, rings[k].ring, k), static_cast<int>(k)) << "round " << round;
    test::RawSlots raw(dir.file("ring" + std::to_string(k)), 64);
    EXPECT_EQ(raw.header().consumers[rings[k].id].doorbell_rung.load(), 0U);
  }
  EXPECT_EQ(ws.late_wakeups(), 0U);
}

// A producer's confirmation of a doorbell is its own: one that takes the
// role over clears it, so the WaitSet sleeps on the line too until the new
// producer rings the doorbell, which it then confirms.
TEST(WaitSetTest, ANewProducerConfirmsTheDoorbellAfresh) {
  test::TempDir dir;
  const std::string path = dir.file("ring0");
  auto created = BroadcastRing::create(path, 64);
  ASSERT_TRUE(created);
  std::optional<BroadcastRing> first(std::move(*created));
  auto reader = BroadcastRing::open(path);
  ASSERT_TRUE(reader);
  const ConsumerId id = *reader->register_consumer();
  std::vector<Member> rings;
  rings.push_back({std::move(*reader), id});
  WaitSet ws;
  add_all(ws, rings);
  test::RawSlots raw(path, 64);
  const layout::ConsumerEntry& e = raw.header().consumers[id];
  EXPECT_EQ(e.doorbell_rung.load(), 0U);
  EXPECT_EQ(wait_for_one_push(ws, rings, *first, 0), 0);
  EXPECT_EQ(e.doorbell_rung.load(), e.doorbell.load());

  first.reset();  // the first producer leaves
  auto second = BroadcastRing::open(path);
  ASSERT_TRUE(second);
  ASSERT_TRUE(second->claim_producer());
  EXPECT_EQ(e.doorbell_rung.load(), 0U);
  for (int round = 0; round < 3; ++round) EXPECT_EQ(wait_for_one_push(ws, rings, *second, 0), 0);
  EXPECT_EQ(e.doorbell_rung.load(), e.doorbell.load());
  EXPECT_EQ(ws.late_wakeups(), 0U);
}

// A member's doorbell leaves its entry with the member, and the file with
// the last member that used it; an entry a WaitSet's process left behind
// (it died) loses its doorbell, and the file, when it is reaped or
// registered again.
TEST(WaitSetTest, AnEntryLosesItsDoorbellWhenItChangesHands) {
  test::TempDir dir;
  auto rings = file_rings(dir, 2);
  test::RawSlots raw0(dir.file("ring0"), 64);
  const layout::ConsumerEntry& e0 = raw0.header().consumers[rings[0].id];
  {
    WaitSet ws;
    add_all(ws, rings);
    EXPECT_NE(e0.doorbell.load(), 0U);
    EXPECT_EQ(raw0.header().data_wait.doorbells.load(), 1U << rings[0].id);
    ASSERT_EQ(ws.remove(0), Errc::ok);
    EXPECT_EQ(e0.doorbell.load(), 0U);
    EXPECT_EQ(raw0.header().data_wait.doorbells.load(), 0U);
    EXPECT_EQ(doorbells_in(dir).size(), 1U) << "ring1's member still uses it";
  }
  EXPECT_TRUE(doorbells_in(dir).empty());

  // What a WaitSet's process that died leaves in a free entry and in a live
  // one: a token, its bit and the doorbell file.
  BroadcastRing& ring = rings[0].ring;
  ASSERT_EQ(ring.unregister_consumer(rings[0].id), Errc::ok);
  const auto leave_a_doorbell = [&](ConsumerId id) {
    raw0.header().consumers[id].doorbell.store(0x1234);
    raw0.header().data_wait.doorbells.fetch_or(1U << id);
    test::write_file(dir.file(std::string(kDoorbellPrefix) + "0000000000001234"), std::string(64, '\0'));
  };
  leave_a_doorbell(rings[0].id);
  const ConsumerId again = *ring.register_consumer();
  EXPECT_EQ(raw0.header().consumers[again].doorbell.load(), 0U);
  EXPECT_EQ(raw0.header().data_wait.doorbells.load(), 0U);
  EXPECT_TRUE(doorbells_in(dir).empty()) << "the dead WaitSet's doorbell file is removed";

  // A consumer of another process that died: its entry is active, its lock
  // gone; reaping frees it and its doorbell.
  const ConsumerId dead = again == 0 ? 1 : 0;
  raw0.header().consumers[dead].state.store(kConsumerActive);
  leave_a_doorbell(dead);
  auto reaped = ring.reap_dead_consumers();
  ASSERT_TRUE(reaped);
  EXPECT_EQ(*reaped, 1U);
  EXPECT_EQ(raw0.header().consumers[dead].doorbell.load(), 0U);
  EXPECT_EQ(raw0.header().data_wait.doorbells.load(), 0U);
  EXPECT_TRUE(doorbells_in(dir).empty()) << "the dead WaitSet's doorbell file is removed";
}

TEST(WaitSetTest, IdleWaitUsesAlmostNoCpu) {
  auto rings = anonymous_rings(16);
  WaitSet ws;
  add_all(ws, rings);
  std::array<std::size_t, 16> ready{};
  const auto before = thread_cpu_time();
  EXPECT_EQ(ws.wait(ready, 1s).status, Errc::timed_out);
  const auto used = thread_cpu_time() - before;
  EXPECT_LT(used, 50ms) << "an idle WaitSet used " << used.count() << " ns of CPU in one second";
}

// A wait() sleeps on no word of its own unless the set is empty: then it must
// still sleep until its timeout (futex_waitv takes no empty list).
TEST(WaitSetTest, IdleWaitWithoutMembersUsesAlmostNoCpu) {
  WaitSet ws;
  std::array<std::size_t, 1> ready{};
  const auto before = thread_cpu_time();
  EXPECT_EQ(ws.wait(ready, 1s).status, Errc::timed_out);
  const auto used = thread_cpu_time() - before;
  EXPECT_LT(used, 50ms) << "an empty WaitSet used " << used.count() << " ns of CPU in one second";
}

// Makes futex_waitv fail with ENOSYS in this process, as on kernels before
// 5.16 (a seccomp filter; the process may not gain privileges after it).
bool refuse_futex_waitv() {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_futex_waitv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program {
    static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter
  };
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) == 0;
}

// Without futex_waitv (ENOSYS), a WaitSet sleeps on one member's word at a
// time for at most 1 ms: an idle wait still sleeps (a loop that retried
// futex_waitv at once would spin for the whole second), and a push on any
// member is seen. In a child process, which the seccomp filter stays with.
TEST(WaitSetTest, WithoutFutexWaitvItSleepsInTurnsAndStillSeesEveryMember) {
  const pid_t pid = test::fork_with_death_signal();
  if (pid == 0) {
    if (!refuse_futex_waitv()) _exit(77);
    auto rings = anonymous_rings(4);
    WaitSet ws;
    for (Member& m : rings) (void)ws.add(m.ring, m.id);
    std::array<std::size_t, 4> ready{};
    const auto before = thread_cpu_time();
    if (ws.wait(ready, 1s).status != Errc::timed_out) _exit(10);
    if (thread_cpu_time() - before >= 200ms) _exit(11);  // spun
    std::thread pusher([&] {
      while (rings[3].ring.status().sleeping_consumers == 0) std::this_thread::sleep_for(1ms);
      (void)rings[3].ring.try_push(test::as_bytes("x"));
    });
    const WaitSetResult r = ws.wait(ready, 60s);
    pusher.join();
    _exit(r.count == 1 && ready[0] == 3 ? 0 : 12);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot install a seccomp filter";
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0) << "10: no timeout, 11: spun, 12: missed the push";
}

// A producer that died mid-write leaves its consumer's next slot odd; the
// member is ready so that try_recv can say producer_dead, as recv_wait would.
TEST(WaitSetTest, ReportsAProducerThatDiedMidWrite) {
  test::TempDir dir;
  const std::string path = dir.path() + "/ring";
  auto ring = BroadcastRing::create(path, 64, {.claim_producer = false});
  ASSERT_TRUE(ring);
  const ConsumerId id = *ring->register_consumer();
  WaitSet ws;
  ASSERT_TRUE(ws.add(*ring, id));
  alignas(8) test::Buffer buf{};
  test::ChildProcess child = test::ChildProcess::spawn({RING_TEST_HELPER, "die-mid-write", path});
  ASSERT_EQ(test::exit_code(child.wait_exit(test::deadline_in(60s))), 128 + SIGKILL);
  std::array<std::size_t, 1> ready{};
  ASSERT_EQ(ws.wait(ready, 60s).count, 1U);
  ASSERT_EQ(ring->try_recv(id, buf).status, Errc::ok);  // message 0, committed before it died
  ASSERT_EQ(ws.wait(ready, 60s).count, 1U);
  EXPECT_EQ(ring->try_recv(id, buf).status, Errc::producer_dead);
}

TEST(WaitSetTest, NotifyFdTurnsReadableForAMessageAndAfterArmWhileOneIsLeft) {
  auto rings = anonymous_rings(4);
  WaitSet ws;
  add_all(ws, rings);
  const auto fd = ws.notify_fd();
  ASSERT_TRUE(fd);
  EXPECT_EQ(ws.notify_fd().value(), *fd);
  EXPECT_FALSE(readable(*fd, 20ms));
  ASSERT_EQ(rings[3].ring.try_push(test::as_bytes("a")), Errc::ok);
  ASSERT_EQ(rings[1].ring.try_push(test::as_bytes("b")), Errc::ok);
  ASSERT_TRUE(readable(*fd, 60'000ms));
  // Arm with messages left: readable again at once.
  ws.arm();
  ASSERT_TRUE(readable(*fd, 60'000ms));
  alignas(8) test::Buffer buf{};
  ASSERT_EQ(rings[3].ring.try_recv(rings[3].id, buf).status, Errc::ok);
  ASSERT_EQ(rings[1].ring.try_recv(rings[1].id, buf).status, Errc::ok);
  // Nothing left: arming clears the fd, and it stays clear...
  ws.arm();
  EXPECT_FALSE(readable(*fd, 20ms));
  // ...until a push from another thread.
  std::thread pusher([&] { ASSERT_EQ(rings[2].ring.try_push(test::as_bytes("c")), Errc::ok); });
  EXPECT_TRUE(readable(*fd, 60'000ms));
  pusher.join();
}

// 64 rings, each fed by its own producer process (push_wait on a ring of 64
// slots: the producers also sleep, woken by this consumer's receives), one
// WaitSet in this process: every message of every ring once, in order.
TEST(WaitSetCrossProcessTest, OneConsumerReceivesEveryMessageOf64ProducerProcessesInOrder) {
  constexpr int kRings = 64;
  constexpr std::uint64_t kMessages = 2000;
  test::TempDir dir;
  std::vector<Member> rings;
  for (int i = 0; i < kRings; ++i) {
    auto ring = BroadcastRing::create(dir.path() + "/ring" + std::to_string(i), 64, {.claim_producer = false});
    ASSERT_TRUE(ring);
    const ConsumerId id = *ring->register_consumer();
    rings.push_back({std::move(*ring), id});
  }
  WaitSet ws;
  add_all(ws, rings);
  std::vector<test::ChildProcess> producers;
  for (int i = 0; i < kRings; ++i) {
    producers.push_back(test::ChildProcess::spawn(
        {RING_TEST_HELPER, "produce", dir.path() + "/ring" + std::to_string(i), std::to_string(kMessages)}));
  }
  std::vector<std::uint64_t> next(kRings, 0);
  std::uint64_t total = 0;
  std::array<std::size_t, kRings> ready{};
  alignas(8) test::Buffer buf{};
  while (total < kRings * kMessages) {
    const WaitSetResult w = ws.wait(ready, 120s);
    ASSERT_EQ(w.status, Errc::ok) << total << " messages received";
    for (std::size_t k = 0; k < w.count; ++k) {
      Member& m = rings[ready[k]];
      // Until empty, or stalled: a producer preempted mid-write wakes us when it commits.
      for (RecvResult r = m.ring.try_recv(m.id, buf); r.status != Errc::empty && r.status != Errc::stalled;
           r = m.ring.try_recv(m.id, buf)) {
        ASSERT_EQ(r.status, Errc::ok) << "ring " << ready[k];
        const auto seq = test::check_message(std::span<const std::byte>(buf.data(), r.length));
        ASSERT_EQ(seq, std::optional<std::uint64_t>(next[ready[k]])) << "ring " << ready[k];
        ++next[ready[k]];
        ++total;
      }
    }
  }
  for (test::ChildProcess& p : producers) EXPECT_EQ(test::exit_code(p.wait_exit(test::deadline_in(60s))), 0);
  for (Member& m : rings) EXPECT_EQ(m.ring.try_recv(m.id, buf).status, Errc::empty);
}

}  // namespace
}  // namespace ringcast
