// The snapshot model (src/top/model.hpp) and discovery (src/top/discovery.hpp),
// driven by rings this test creates and pushes to, with an injected clock so
// every rate is exact.
#include "top/model.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "top/discovery.hpp"
#include "top_test_support.hpp"

namespace ringcast::top {
namespace {

using namespace std::chrono_literals;
using test::TempDir;

using Buffer = std::array<std::byte, kMaxPayload>;

void push(BroadcastRing& ring, int n) {
  const std::byte payload[4] = {};
  for (int i = 0; i < n; ++i) ASSERT_EQ(ring.try_push(payload), Errc::ok);
}

void receive(BroadcastRing& ring, ConsumerId id, int n) {
  Buffer buf{};
  for (int i = 0; i < n; ++i) ASSERT_EQ(ring.try_recv(id, buf).status, Errc::ok);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string own_comm() { return process_name(static_cast<std::uint32_t>(::getpid())); }

class MonitorTest : public ::testing::Test {
 protected:
  TempDir dir_;
  TimePoint now_{std::chrono::seconds(1000)};

  std::string path(const char* name = "ticks") const { return dir_.file(name); }

  Monitor monitor(std::vector<std::string> targets, std::chrono::nanoseconds linger = 10s) {
    MonitorOptions options;
    options.targets = std::move(targets);
    options.clock = [this] { return now_; };
    options.gone_linger = linger;
    auto m = Monitor::create(std::move(options));
    EXPECT_TRUE(m) << (m ? "" : m.error().front());
    return std::move(*m);
  }

  static BroadcastRing make_ring(const std::string& path, std::uint64_t capacity, CreateOptions options = {}) {
    auto ring = BroadcastRing::create(path, capacity, options);
    EXPECT_TRUE(ring) << ring.error().message();
    return std::move(*ring);
  }
};

TEST_F(MonitorTest, FirstSampleHasNoRatesAndTheNextHasMessagesPerSecond) {
  BroadcastRing ring = make_ring(path(), 64);
  auto c = ring.register_consumer();
  ASSERT_TRUE(c);
  Monitor m = monitor({path()});

  Snapshot first = m.refresh();
  ASSERT_EQ(first.rings.size(), 1U);
  EXPECT_FALSE(first.rings[0].push_rate.has_value());
  ASSERT_EQ(first.rings[0].consumers.size(), 1U);
  EXPECT_FALSE(first.rings[0].consumers[0].recv_rate.has_value());

  push(ring, 10);
  receive(ring, *c, 4);
  now_ += 2s;
  Snapshot second = m.refresh();
  const RingView& r = second.rings[0];
  ASSERT_TRUE(r.push_rate.has_value());
  EXPECT_DOUBLE_EQ(*r.push_rate, 5.0);
  const ConsumerView& cv = r.consumers[0];
  ASSERT_TRUE(cv.recv_rate.has_value());
  EXPECT_DOUBLE_EQ(*cv.recv_rate, 2.0);
  EXPECT_EQ(cv.cursor, 4U);
  EXPECT_EQ(cv.lag, 6U);
  EXPECT_DOUBLE_EQ(cv.lag_pct, 100.0 * 6 / 64);
}

TEST_F(MonitorTest, RatesCountMessagesAndPayloadBytesNotSlots) {
  // 4100 slots: 64 KiB messages (1025 slots each) fit, several to a lap.
  BroadcastRing ring = make_ring(path(), 4100);
  Monitor m = monitor({path()});
  ASSERT_FALSE(m.refresh().rings.at(0).byte_rate.has_value());

  const std::vector<std::byte> medium(200, std::byte{1});
  const std::vector<std::byte> large(64 * 1024, std::byte{2});
  ASSERT_EQ(ring.try_push(medium), Errc::ok);
  ASSERT_EQ(ring.try_push(large), Errc::ok);
  push(ring, 2);
  now_ += 2s;
  const RingView r = m.refresh().rings.at(0);
  EXPECT_EQ(r.max_message, 64U * 1024);
  EXPECT_EQ(r.messages, 4U);
  EXPECT_EQ(r.payload_bytes, 200U + 64 * 1024 + 8);
  EXPECT_GT(r.producer_seq, r.messages);  // positions count slots
  ASSERT_TRUE(r.push_rate.has_value() && r.byte_rate.has_value());
  EXPECT_DOUBLE_EQ(*r.push_rate, 2.0);
  EXPECT_DOUBLE_EQ(*r.byte_rate, (200.0 + 64 * 1024 + 8) / 2);
}

TEST_F(MonitorTest, LagFillAndBehindFollowTheSlowestConsumer) {
  BroadcastRing ring = make_ring(path(), 64);
  auto fast = ring.register_consumer();
  auto slow = ring.register_consumer();
  ASSERT_TRUE(fast && slow);
  push(ring, 40);
  receive(ring, *fast, 40);
  Monitor m = monitor({path()});
  const RingView r = m.refresh().rings.at(0);
  EXPECT_EQ(r.state, RingPresence::kLive);
  EXPECT_EQ(r.capacity, 64U);
  EXPECT_EQ(r.producer_seq, 40U);
  EXPECT_EQ(r.active_consumers, 2U);
  EXPECT_EQ(r.max_lag, 40U);
  EXPECT_DOUBLE_EQ(r.fill, 40.0 / 64);
  EXPECT_FALSE(r.blocked);
  EXPECT_FALSE(r.drained);
  EXPECT_EQ(r.behind_consumers, 1U);
  ASSERT_EQ(r.consumers.size(), 2U);
  EXPECT_EQ(r.consumers[0].index, *fast);
  EXPECT_FALSE(r.consumers[0].behind);
  EXPECT_EQ(r.consumers[1].index, *slow);
  EXPECT_EQ(r.consumers[1].lag, 40U);
  EXPECT_TRUE(r.consumers[1].behind);  // 62.5% >= the default 50%
}

TEST_F(MonitorTest, BehindThresholdIsConfigurable) {
  BroadcastRing ring = make_ring(path(), 64);
  auto c = ring.register_consumer();
  ASSERT_TRUE(c);
  push(ring, 40);
  MonitorOptions options;
  options.targets = {path()};
  options.behind_pct = 75;
  options.clock = [this] { return now_; };
  auto m = Monitor::create(std::move(options));
  ASSERT_TRUE(m);
  const Snapshot s = m->refresh();
  EXPECT_DOUBLE_EQ(s.behind_pct, 75);
  EXPECT_FALSE(s.rings.at(0).consumers.at(0).behind);
}

TEST_F(MonitorTest, BlockedExactlyWhenTheSlowestConsumerIsCapacityBehind) {
  BroadcastRing ring = make_ring(path(), 8);
  auto c = ring.register_consumer();
  ASSERT_TRUE(c);
  Monitor m = monitor({path()});
  push(ring, 7);
  EXPECT_FALSE(m.refresh().rings.at(0).blocked);
  push(ring, 1);
  const std::byte payload[1] = {};
  ASSERT_EQ(ring.try_push(payload), Errc::full);  // what "blocked" predicts
  const RingView full = m.refresh().rings.at(0);
  EXPECT_TRUE(full.blocked);
  EXPECT_DOUBLE_EQ(full.fill, 1.0);
  receive(ring, *c, 1);
  EXPECT_FALSE(m.refresh().rings.at(0).blocked);
}

TEST_F(MonitorTest, LossyRingIsNeverBlockedAndItsFillIsCapped) {
  CreateOptions lossy;
  lossy.lossy = true;
  BroadcastRing ring = make_ring(path(), 8, lossy);
  auto c = ring.register_consumer();
  ASSERT_TRUE(c);
  push(ring, 20);
  Monitor m = monitor({path()});
  const RingView r = m.refresh().rings.at(0);
  EXPECT_TRUE(r.lossy);
  EXPECT_FALSE(r.blocked);
  EXPECT_EQ(r.max_lag, 20U);
  EXPECT_DOUBLE_EQ(r.fill, 1.0);
  EXPECT_DOUBLE_EQ(r.consumers.at(0).lag_pct, 250.0);
}

TEST_F(MonitorTest, DrainedMatchesIsFullyDrained) {
  BroadcastRing ring = make_ring(path(), 16);
  auto a = ring.register_consumer();
  auto b = ring.register_consumer();
  ASSERT_TRUE(a && b);
  Monitor m = monitor({path()});
  EXPECT_TRUE(m.refresh().rings.at(0).drained);
  push(ring, 3);
  receive(ring, *a, 3);
  EXPECT_FALSE(ring.is_fully_drained());
  EXPECT_FALSE(m.refresh().rings.at(0).drained);
  receive(ring, *b, 3);
  EXPECT_TRUE(ring.is_fully_drained());
  EXPECT_TRUE(m.refresh().rings.at(0).drained);
}

TEST_F(MonitorTest, TimeSinceLastAdvanceCountsFromTheRefreshThatSawItMove) {
  BroadcastRing ring = make_ring(path(), 16);
  auto c = ring.register_consumer();
  ASSERT_TRUE(c);
  Monitor m = monitor({path()});
  ConsumerView v = m.refresh().rings.at(0).consumers.at(0);
  EXPECT_DOUBLE_EQ(v.since_advance_s, 0.0);
  EXPECT_TRUE(v.since_advance_is_lower_bound);

  now_ += 4s;
  v = m.refresh().rings.at(0).consumers.at(0);
  EXPECT_DOUBLE_EQ(v.since_advance_s, 4.0);  // never seen moving: "at least 4 s"
  EXPECT_TRUE(v.since_advance_is_lower_bound);

  push(ring, 2);
  receive(ring, *c, 1);
  now_ += 1s;
  v = m.refresh().rings.at(0).consumers.at(0);
  EXPECT_DOUBLE_EQ(v.since_advance_s, 0.0);
  EXPECT_FALSE(v.since_advance_is_lower_bound);

  now_ += 3s;
  v = m.refresh().rings.at(0).consumers.at(0);
  EXPECT_DOUBLE_EQ(v.since_advance_s, 3.0);
  ASSERT_TRUE(v.recv_rate.has_value());
  EXPECT_DOUBLE_EQ(*v.recv_rate, 0.0);
}

TEST_F(MonitorTest, ProducerAsleepInPushWaitIsReported) {
  CreateOptions wakeups;
  wakeups.wakeups = true;
  BroadcastRing ring = make_ring(path(), 2, wakeups);
  auto c = ring.register_consumer();
  ASSERT_TRUE(c);
  push(ring, 2);
  Monitor m = monitor({path()});
  EXPECT_FALSE(m.refresh().rings.at(0).producer_sleeping);
  // The producing thread waits for room; this thread only watches, then reads.
  Errc pushed = Errc::timed_out;
  std::thread producer([&] {
    const std::byte payload[1] = {};
    pushed = ring.push_wait(payload, {std::chrono::seconds(60), IdleStrategy::kSpinThenBlock});
  });
  const bool seen = test::eventually([&] {
    const RingView r = m.refresh().rings.at(0);
    return r.producer_sleeping && r.blocked && r.wakeups;
  });
  receive(ring, *c, 1);  // makes room: the producer wakes and pushes
  producer.join();
  EXPECT_TRUE(seen);
  EXPECT_EQ(pushed, Errc::ok);
  EXPECT_FALSE(m.refresh().rings.at(0).producer_sleeping);
}

TEST_F(MonitorTest, ReregisteredEntryStartsAFreshHistory) {
  BroadcastRing ring = make_ring(path(), 16);
  auto c = ring.register_consumer();
  ASSERT_TRUE(c);
  Monitor m = monitor({path()});
  (void)m.refresh();
  ASSERT_EQ(ring.unregister_consumer(*c), Errc::ok);
  now_ += 1s;
  EXPECT_TRUE(m.refresh().rings.at(0).consumers.empty());
  auto again = ring.register_consumer();
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *c);
  now_ += 1s;
  const ConsumerView v = m.refresh().rings.at(0).consumers.at(0);
  EXPECT_FALSE(v.recv_rate.has_value());
  EXPECT_TRUE(v.since_advance_is_lower_bound);
}

TEST_F(MonitorTest, ReportsProducerAndOwnerProcesses) {
  BroadcastRing ring = make_ring(path(), 16);
  auto c = ring.register_consumer();
  ASSERT_TRUE(c);
  Monitor m = monitor({path()});
  const RingView r = m.refresh().rings.at(0);
  const auto pid = static_cast<std::uint32_t>(::getpid());
  EXPECT_EQ(r.producer_pid, pid);
  EXPECT_TRUE(r.producer_alive);
  EXPECT_EQ(r.producer_process, own_comm());
  EXPECT_FALSE(own_comm().empty());
  const ConsumerView& cv = r.consumers.at(0);
  EXPECT_EQ(cv.pid, pid);
  EXPECT_TRUE(cv.alive);
  EXPECT_EQ(cv.process, own_comm());
  EXPECT_EQ(r.dead_consumers, 0U);
}

TEST_F(MonitorTest, ConsumerWhoseProcessExitedRegisteredIsDead) {
  BroadcastRing ring = make_ring(path(), 16);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ringcast::test::fork_with_death_signal();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // _exit skips the destructor: the entry stays registered, and the kernel
    // drops the entry's lock as the process's descriptors close.
    auto mine = BroadcastRing::open(path());
    const bool ok = mine && mine->register_consumer().has_value();
    const char byte = ok ? '1' : '0';
    (void)!::write(ready[1], &byte, 1);
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(byte, '1');

  Monitor m = monitor({path()});
  const RingView r = m.refresh().rings.at(0);
  ASSERT_EQ(r.consumers.size(), 1U);
  EXPECT_FALSE(r.consumers[0].alive);
  EXPECT_EQ(r.consumers[0].pid, static_cast<std::uint32_t>(child));
  EXPECT_TRUE(r.consumers[0].process.empty());
  EXPECT_EQ(r.dead_consumers, 1U);
}

TEST_F(MonitorTest, DeadConsumerKeepsTheNameSeenWhileItLived) {
  BroadcastRing ring = make_ring(path(), 16);
  int ready[2];
  int release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  const pid_t child = ringcast::test::fork_with_death_signal();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(release[1]);  // else the read below never sees EOF
    auto mine = BroadcastRing::open(path());
    const bool ok = mine && mine->register_consumer().has_value();
    const char byte = ok ? '1' : '0';
    (void)!::write(ready[1], &byte, 1);
    char go = 0;
    (void)!::read(release[0], &go, 1);  // live until the parent has looked
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(release[0]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, '1');
  Monitor m = monitor({path()});
  ConsumerView v = m.refresh().rings.at(0).consumers.at(0);
  EXPECT_TRUE(v.alive);
  EXPECT_EQ(v.process, own_comm());  // a fork keeps its parent's name
  ::close(release[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(ready[0]);
  v = m.refresh().rings.at(0).consumers.at(0);
  EXPECT_FALSE(v.alive);
  EXPECT_EQ(v.process, own_comm());
}

TEST_F(MonitorTest, WatchingNeverChangesTheRing) {
  BroadcastRing ring = make_ring(path(), 16);
  auto c = ring.register_consumer();
  ASSERT_TRUE(c);
  push(ring, 5);
  receive(ring, *c, 2);
  const std::string before = file_bytes(path());
  {
    Monitor m = monitor({path(), dir_.path()});
    for (int i = 0; i < 3; ++i) {
      (void)m.refresh();
      now_ += 1s;
    }
  }
  EXPECT_EQ(file_bytes(path()), before);
  EXPECT_EQ(ring.active_consumer_count(), 1U);
  // The producer role was not touched either: pushing still works.
  push(ring, 1);
}

TEST_F(MonitorTest, RemovedNamedRingStaysListedAsGone) {
  {
    BroadcastRing ring = make_ring(path(), 16);
    Monitor m = monitor({path()}, 5s);
    EXPECT_EQ(m.refresh().rings.at(0).state, RingPresence::kLive);
    ASSERT_EQ(::unlink(path().c_str()), 0);
    now_ += 1s;
    Snapshot s = m.refresh();
    ASSERT_EQ(s.rings.size(), 1U);
    EXPECT_EQ(s.rings[0].state, RingPresence::kGone);
    EXPECT_EQ(s.rings[0].gone_reason, "removed");
    EXPECT_EQ(s.rings[0].capacity, 16U);
    now_ += 1min;
    s = m.refresh();
    ASSERT_EQ(s.rings.size(), 1U);  // named: listed until something is back at its path
    EXPECT_EQ(s.rings[0].state, RingPresence::kGone);
  }
}

TEST_F(MonitorTest, ReplacedRingIsGoneAndTheNewFileIsWatchedFresh) {
  BroadcastRing first = make_ring(path(), 16);
  Monitor m = monitor({dir_.path()}, 5s);
  const Snapshot before = m.refresh();
  ASSERT_EQ(before.rings.size(), 1U);
  CreateOptions replace;
  replace.replace = true;
  BroadcastRing second = make_ring(path(), 32, replace);
  now_ += 1s;
  Snapshot s = m.refresh();
  ASSERT_EQ(s.rings.size(), 2U);
  EXPECT_EQ(s.rings[0].id, before.rings[0].id);
  EXPECT_EQ(s.rings[0].state, RingPresence::kGone);
  EXPECT_EQ(s.rings[0].gone_reason, "replaced");
  EXPECT_EQ(s.rings[1].state, RingPresence::kLive);
  EXPECT_EQ(s.rings[1].capacity, 32U);
  EXPECT_FALSE(s.rings[1].push_rate.has_value());  // a new ring: no history
  now_ += 5s;
  s = m.refresh();
  ASSERT_EQ(s.rings.size(), 1U);
  EXPECT_EQ(s.rings[0].capacity, 32U);
}

TEST_F(MonitorTest, RingRemovedFromAWatchedDirectoryIsForgottenAfterTheLinger) {
  { BroadcastRing ring = make_ring(path(), 16); }
  Monitor m = monitor({dir_.path()}, 5s);
  ASSERT_EQ(m.refresh().rings.size(), 1U);
  ASSERT_EQ(::unlink(path().c_str()), 0);
  now_ += 1s;
  EXPECT_EQ(m.refresh().rings.at(0).state, RingPresence::kGone);
  now_ += 5s;
  EXPECT_TRUE(m.refresh().rings.empty());
}

TEST_F(MonitorTest, NewRingInAWatchedDirectoryAppears) {
  Monitor m = monitor({dir_.path()});
  Snapshot s = m.refresh();
  EXPECT_TRUE(s.rings.empty());
  ASSERT_EQ(s.watched, std::vector<std::string>{dir_.path()});
  BroadcastRing ring = make_ring(path("late"), 16);
  s = m.refresh();
  ASSERT_EQ(s.rings.size(), 1U);
  EXPECT_EQ(s.rings[0].name, "late");
  EXPECT_FALSE(s.rings[0].named);
}

TEST_F(MonitorTest, TruncatedRingIsGoneWithoutBeingRead) {
  BroadcastRing ring = make_ring(path(), 64);
  Monitor m = monitor({path()});
  ASSERT_EQ(m.refresh().rings.at(0).state, RingPresence::kLive);
  ASSERT_EQ(::truncate(path().c_str(), static_cast<off_t>(layout::kHeaderBytes)), 0);
  const Snapshot s = m.refresh();
  ASSERT_EQ(s.rings.size(), 1U);
  EXPECT_EQ(s.rings[0].state, RingPresence::kGone);
  EXPECT_EQ(s.rings[0].gone_reason, "truncated");
}

// Its ring file is the header alone and its slots file starts with no magic:
// one ring, live, and no "truncated" or second entry for the slots file.
TEST_F(MonitorTest, RingWithSeparateSlotsIsOneLiveRing) {
  BroadcastRing ring = make_ring(path(), 64, {.separate_slots = true});
  push(ring, 3);
  Monitor m = monitor({dir_.path()});
  for (int refresh = 0; refresh < 2; ++refresh) {
    const Snapshot s = m.refresh();
    ASSERT_EQ(s.rings.size(), 1U);
    EXPECT_EQ(s.rings[0].name, "ticks");
    EXPECT_EQ(s.rings[0].state, RingPresence::kLive) << s.rings[0].gone_reason;
    EXPECT_EQ(s.rings[0].messages, 3U);
  }
}

TEST_F(MonitorTest, NamedTargetsThatCannotBeOpenedFailWithTheirReasons) {
  { std::ofstream(path("notes.txt")) << std::string(2000, 'x'); }
  MonitorOptions options;
  options.targets = {path("missing"), path("notes.txt"), dir_.file("no-such-dir/")};
  auto m = Monitor::create(std::move(options));
  ASSERT_FALSE(m);
  ASSERT_EQ(m.error().size(), 3U);
  EXPECT_NE(m.error()[0].find(path("missing")), std::string::npos);
  EXPECT_NE(m.error()[0].find("No such file or directory"), std::string::npos);
  EXPECT_NE(m.error()[1].find("bad magic"), std::string::npos) << m.error()[1];
  EXPECT_NE(m.error()[2].find("no-such-dir"), std::string::npos);
}

TEST_F(MonitorTest, RingNamedTwiceIsListedOnce) {
  BroadcastRing ring = make_ring(path(), 16);
  ASSERT_EQ(::symlink(path().c_str(), dir_.file("alias").c_str()), 0);
  Monitor m = monitor({path(), dir_.path() + "/./ticks", dir_.file("alias"), dir_.path()});
  const Snapshot s = m.refresh();
  ASSERT_EQ(s.rings.size(), 1U);
  EXPECT_TRUE(s.rings[0].named);
}

// --- discovery ---------------------------------------------------------------

class DiscoveryTest : public ::testing::Test {
 protected:
  TempDir dir_;
};

void write_file(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

TEST_F(DiscoveryTest, FindsRingsByMagicAndVersionAndIgnoresEverythingElse) {
  CreateOptions options;
  options.claim_producer = false;
  ASSERT_TRUE(BroadcastRing::create(dir_.file("b-ring"), 8, options));
  ASSERT_TRUE(BroadcastRing::create(dir_.file("a.ring"), 8, options));

  write_file(dir_.file("notes.txt"), "hello, not a ring\n");
  write_file(dir_.file("short"), "RINGCAST");
  write_file(dir_.file("initialising"), std::string(layout::kHeaderBytes, '\0'));  // magic 0
  std::string future(layout::kHeaderBytes, '\0');
  const std::uint64_t magic = kMagic;
  const std::uint32_t version = kLayoutVersion + 1;
  std::memcpy(future.data(), &magic, sizeof magic);
  std::memcpy(future.data() + 8, &version, sizeof version);
  write_file(dir_.file("future-version"), future);
  ASSERT_EQ(::mkfifo(dir_.file("fifo").c_str(), 0600), 0);  // must not hang the scan
  ASSERT_EQ(::symlink(dir_.file("a.ring").c_str(), dir_.file("link").c_str()), 0);
  ASSERT_EQ(::mkdir(dir_.file("sub").c_str(), 0700), 0);
  ASSERT_TRUE(BroadcastRing::create(dir_.file("sub/nested"), 8, options));  // not recursive

  EXPECT_EQ(discover_rings(dir_.path()), (std::vector<std::string>{dir_.file("a.ring"), dir_.file("b-ring")}));
  EXPECT_TRUE(is_ring_file(dir_.file("a.ring")));
  EXPECT_FALSE(is_ring_file(dir_.file("future-version")));
  EXPECT_FALSE(is_ring_file(dir_.file("fifo")));
  EXPECT_FALSE(is_ring_file(dir_.file("link")));
}

TEST_F(DiscoveryTest, MissingDirectoryYieldsNothing) { EXPECT_TRUE(discover_rings(dir_.file("nope")).empty()); }

TEST_F(DiscoveryTest, DirectoryWithATrailingSlashGivesCleanPaths) {
  ASSERT_TRUE(BroadcastRing::create(dir_.file("r"), 8));
  EXPECT_EQ(discover_rings(dir_.path() + "/"), std::vector<std::string>{dir_.file("r")});
}

TEST_F(DiscoveryTest, DefaultTargetIsDevShm) {
  MonitorOptions options;  // no targets: /dev/shm, scanned, never written
  auto m = Monitor::create(std::move(options));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->refresh().watched, std::vector<std::string>{kDefaultRingDir});
}

}  // namespace
}  // namespace ringcast::top
