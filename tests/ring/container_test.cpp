// The ring where containers put it (issue 38, part 2): producer and consumers
// each in its own PID and mount namespace (unshare --pid --mount --fork
// --mount-proc, as root), sharing one directory that each binds at a path of
// its own, as containers share a volume or /dev/shm. Every message arrives in
// order; a consumer killed with SIGKILL is dead to the other namespaces and
// reaped, a live one in another namespace is not; a producer killed
// mid-write is taken over from another namespace; `ringcast info` from a
// third namespace shows each party; a WaitSet's doorbell is rung from another
// namespace. And a ring that does not fit its filesystem (a 1 MiB tmpfs in
// the test's own mount namespace) is refused at create, never a SIGBUS later.
// Skipped when not root or unshare is refused.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "message_pattern.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "test_support.hpp"

namespace ringcast {
namespace {

using namespace std::chrono_literals;

bool namespaces_available() {
  static const bool ok =
      ::geteuid() == 0 && test::run_command("unshare --pid --mount --fork --mount-proc true 2>/dev/null").status == 0;
  return ok;
}

// A directory shared by every namespace (the volume), and a party in a
// namespace of its own that sees it at its own path (`view`).
class ContainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!namespaces_available()) GTEST_SKIP() << "needs root and unshare --pid --mount";
    ::mkdir(shared_.c_str(), 0700);
    ASSERT_TRUE(BroadcastRing::create(shared_ + "/ring", 1024, {.claim_producer = false}));
  }

  // Runs `argv` (after the view's ring path is substituted for "RING") in new
  // PID and mount namespaces, as a child of the namespace's init (a shell),
  // so that it is not PID 1 and can be killed alone.
  test::ChildProcess in_namespace(const std::string& name, std::vector<std::string> argv) {
    const std::string view = dir_.path() + "/view-" + name;
    ::mkdir(view.c_str(), 0700);
    std::string command = "mount --bind '" + shared_ + "' '" + view + "' &&";
    for (std::string& a : argv) command += " '" + (a == "RING" ? view + "/ring" : a) + "'";
    command += "; exit $?";  // not the shell's last command: it must not exec it as PID 1
    return test::ChildProcess::spawn({"/usr/bin/unshare", "--pid", "--mount", "--fork", "--kill-child", "--mount-proc",
                                      "--", "/bin/sh", "-c", command});
  }

  // The host pid of the process a namespace's shell runs (its only child).
  static pid_t party_pid(const test::ChildProcess& unshare) {
    const auto child_of = [](pid_t pid) -> pid_t {
      std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
      pid_t child = 0;
      return in >> child ? child : 0;
    };
    return child_of(child_of(unshare.pid()));
  }

  nlohmann::json info_from_a_third_namespace() {
    test::ChildProcess info = in_namespace("info", {RINGCAST_CLI, "info", "--json", "RING"});
    EXPECT_EQ(test::exit_code(info.wait_exit(test::deadline_in(60s))), 0);
    // ring-top's object (ringcast info --json): the ring is the one watched.
    const nlohmann::json top = nlohmann::json::parse(info.stdout_text(), nullptr, false);
    return top.is_object() && top.contains("rings") && top["rings"].size() == 1 ? top["rings"][0] : top;
  }

  test::TempDir dir_;
  const std::string shared_ = dir_.path() + "/shared";
};

TEST_F(ContainerTest, EveryMessageArrivesInOrderAcrossPidAndMountNamespaces) {
  constexpr std::uint64_t kCount = 200'000;
  std::vector<test::ChildProcess> consumers;
  for (const char* name : {"consumer-a", "consumer-b"}) {
    consumers.push_back(in_namespace(name, {RING_TEST_HELPER, "consume", "RING", std::to_string(kCount)}));
  }
  for (test::ChildProcess& c : consumers) ASSERT_TRUE(c.read_stdout_until("ready", test::deadline_in(60s)));
  test::ChildProcess producer = in_namespace("producer", {RING_TEST_HELPER, "produce", "RING", std::to_string(kCount)});
  EXPECT_EQ(test::exit_code(producer.wait_exit(test::deadline_in(120s))), 0);
  for (test::ChildProcess& c : consumers) EXPECT_EQ(test::exit_code(c.wait_exit(test::deadline_in(120s))), 0);
}

// A WaitSet in one namespace makes its doorbell beside the ring; the producer
// in another finds it under its own view of the directory and rings it.
TEST_F(ContainerTest, AProducerInAnotherNamespaceRingsAWaitSetsDoorbell) {
  constexpr std::uint64_t kCount = 50'000;
  test::ChildProcess consumer =
      in_namespace("waitset", {RING_TEST_HELPER, "consume-waitset", "RING", std::to_string(kCount)});
  ASSERT_TRUE(consumer.read_stdout_until("ready", test::deadline_in(60s)));
  test::ChildProcess producer = in_namespace("producer", {RING_TEST_HELPER, "produce", "RING", std::to_string(kCount)});
  EXPECT_EQ(test::exit_code(producer.wait_exit(test::deadline_in(120s))), 0);
  EXPECT_EQ(test::exit_code(consumer.wait_exit(test::deadline_in(120s))), 0) << consumer.stderr_text();
}

TEST_F(ContainerTest, AConsumerKilledInItsNamespaceIsDeadAndReapedALiveOneIsNot) {
  test::ChildProcess doomed = in_namespace("doomed", {RING_TEST_HELPER, "hold", "RING"});
  ASSERT_TRUE(doomed.read_stdout_until("ready", test::deadline_in(60s)));  // entry 0
  test::ChildProcess living = in_namespace("living", {RING_TEST_HELPER, "hold", "RING"});
  ASSERT_TRUE(living.read_stdout_until("ready", test::deadline_in(60s)));  // entry 1
  auto ring = BroadcastRing::open(shared_ + "/ring");
  ASSERT_TRUE(ring);
  // Both alive to this namespace, though the pids they registered are their
  // namespaces' (small numbers there, not their pids here), and nothing is
  // reaped.
  const pid_t victim = party_pid(doomed);
  ASSERT_GT(victim, 0);
  RingStatus s = ring->status();
  ASSERT_TRUE(s.consumers[0].active && s.consumers[1].active);
  EXPECT_TRUE(s.consumers[0].owner_alive && s.consumers[1].owner_alive);
  EXPECT_NE(s.consumers[0].owner_pid, static_cast<std::uint32_t>(victim));
  EXPECT_FALSE(s.consumers[0].owner_pid_here);  // so ring-top does not name our process of that pid
  EXPECT_EQ(ring->reap_dead_consumers().value(), 0U);
  const nlohmann::json before = info_from_a_third_namespace();
  ASSERT_EQ(before["consumers"].size(), 2U) << before.dump();
  EXPECT_TRUE(before["consumers"][0]["alive"].get<bool>() && before["consumers"][1]["alive"].get<bool>());

  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  EXPECT_EQ(test::exit_code(doomed.wait_exit(test::deadline_in(60s))), 128 + SIGKILL);
  s = ring->status();
  EXPECT_FALSE(s.consumers[0].owner_alive);
  EXPECT_TRUE(s.consumers[1].owner_alive);
  const nlohmann::json after = info_from_a_third_namespace();
  ASSERT_EQ(after["consumers"].size(), 2U) << after.dump();
  EXPECT_FALSE(after["consumers"][0]["alive"].get<bool>());
  EXPECT_TRUE(after["consumers"][1]["alive"].get<bool>());
  EXPECT_EQ(ring->reap_dead_consumers().value(), 1U);
  s = ring->status();
  EXPECT_FALSE(s.consumers[0].active);
  EXPECT_TRUE(s.consumers[1].active && s.consumers[1].owner_alive);
}

TEST_F(ContainerTest, AProducerKilledMidWriteIsTakenOverFromAnotherNamespace) {
  constexpr std::uint64_t kCount = 20'000;
  auto ring = BroadcastRing::open(shared_ + "/ring");
  ASSERT_TRUE(ring);
  const ConsumerId id = *ring->register_consumer();
  test::ChildProcess dying = in_namespace("dying", {RING_TEST_HELPER, "die-mid-write", "RING"});
  EXPECT_EQ(test::exit_code(dying.wait_exit(test::deadline_in(60s))), 128 + SIGKILL);
  RingStatus s = ring->status();
  EXPECT_FALSE(s.producer_alive);
  EXPECT_TRUE(s.half_written_slot);
  EXPECT_FALSE(s.producer_pid_here);
  EXPECT_TRUE(s.consumers[id].owner_pid_here);  // registered by this process
  const nlohmann::json dead = info_from_a_third_namespace();
  EXPECT_FALSE(dead["producer_alive"].get<bool>()) << dead.dump();

  test::ChildProcess successor =
      in_namespace("successor", {RING_TEST_HELPER, "produce", "RING", std::to_string(kCount)});
  ASSERT_TRUE(successor.read_stdout_until("ready", test::deadline_in(60s)));
  const nlohmann::json live = info_from_a_third_namespace();
  EXPECT_TRUE(live["producer_alive"].get<bool>()) << live.dump();  // it waits for us: 1024 slots
  alignas(8) test::Buffer buf{};
  for (std::uint64_t seq = 0; seq < kCount;) {
    const RecvResult r = ring->recv_wait(id, buf, 60s);
    ASSERT_EQ(r.status, Errc::ok) << "message " << seq;
    ASSERT_EQ(test::check_message(std::span<const std::byte>(buf.data(), r.length)), seq);
    ++seq;
  }
  EXPECT_EQ(test::exit_code(successor.wait_exit(test::deadline_in(60s))), 0);
}

// A child in a mount namespace of its own mounts a 1 MiB tmpfs and creates
// rings there: one of 2 MiB is refused with ENOSPC and leaves no file; one
// that fits is created and filled. Without the allocation at create, the
// large one is created sparse and filling it SIGBUSes the child.
TEST(SmallFilesystemTest, ARingLargerThanItsFilesystemIsRefusedAtCreateNotSigbusLater) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
  test::TempDir dir;
  const pid_t pid = test::fork_with_death_signal();
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", dir.path().c_str(), "tmpfs", 0, "size=1m") != 0) {
      _exit(77);
    }
    const auto fill = [](BroadcastRing& ring) {
      alignas(8) test::Buffer msg{};
      for (std::uint64_t seq = 0; seq < ring.capacity(); ++seq) {
        test::make_message(seq, msg);
        if (ring.try_push(msg) != Errc::ok) return false;
      }
      return true;
    };
    const std::string big = dir.path() + "/big";
    auto refused = BroadcastRing::create(big, std::uint64_t{1} << 15);  // 2 MiB + 1280 bytes
    if (refused) _exit(fill(*refused) ? 10 : 11);                       // SIGBUS before either, unfixed
    if (refused.error().code != Errc::io_error || refused.error().sys_errno != ENOSPC) _exit(12);
    if (::access(big.c_str(), F_OK) == 0) _exit(13);
    auto fits = BroadcastRing::create(dir.path() + "/small", std::uint64_t{1} << 12);  // 257 KiB
    if (!fits || !fill(*fits)) _exit(14);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot mount a tmpfs in a mount namespace";
  EXPECT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0) << "10: created and filled, 11: created, not filled, "
                                                                "12: another error, 13: file left, 14: small ring";
}

}  // namespace
}  // namespace ringcast
