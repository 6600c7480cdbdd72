// The tools driven wrong on purpose, as a newcomer does in the first hour
// (issue 39): a mistyped flag or command, a value out of range, a file that is
// not a ring, a busy port. Each answer must name what is wrong, the limits and
// the next step, and a usage error exits 2.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "ringcast/layout.hpp"
#include "temp_dir.hpp"

namespace ringcast {
namespace {

using namespace std::chrono_literals;

struct Outcome {
  int exit = -1;  // -1: still running after 20 s (it blocked)
  std::string out;
  std::string err;
};

Outcome run(const char* exe, std::vector<std::string> args) {
  args.insert(args.begin(), exe);
  test::SpawnOptions options;
  options.err = test::Stream::kPipe;
  test::ChildProcess child = test::ChildProcess::spawn(args, options);
  Outcome r;
  r.exit = test::exit_code(child.wait_exit(test::deadline_in(20s)));
  r.out = child.stdout_text();
  r.err = child.stderr_text();
  return r;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// --- wrong flags and commands -------------------------------------------------

TEST(WrongInputTest, WrongFlagIsNamedAloneWithTheNearestSpellingAndTheHelp) {
  // --cnt pushes 3 into PATH and the path out of place: only --cnt is wrong.
  const Outcome r = run(RINGCAST_EXE, {"sub", "--cnt", "3", "/dev/shm/x.ring"});
  EXPECT_EQ(r.exit, 2);
  EXPECT_TRUE(has(r.err, "ringcast sub: unknown flag '--cnt'; did you mean '--count'? (ringcast sub --help")) << r.err;
  EXPECT_FALSE(has(r.err, "/dev/shm/x.ring")) << r.err;
}

TEST(WrongInputTest, UnknownCommandIsNamedWithTheNearestCommandOrTheList) {
  const Outcome typo = run(RINGCAST_EXE, {"sbu", "/dev/shm/x.ring"});
  EXPECT_EQ(typo.exit, 2);
  EXPECT_TRUE(has(typo.err, "ringcast: unknown command 'sbu'; did you mean 'sub'? (ringcast --help")) << typo.err;
  const Outcome far = run(RINGCAST_EXE, {"frobnicate"});
  EXPECT_EQ(far.exit, 2);
  EXPECT_TRUE(has(far.err,
                  "ringcast: unknown command 'frobnicate'; the commands are create, pub, sub, info, reap, "
                  "rm, token."))
      << far.err;
  const Outcome none = run(RINGCAST_EXE, {});
  EXPECT_EQ(none.exit, 2);
  EXPECT_TRUE(has(none.err, "ringcast: no command given; the commands are create,")) << none.err;
}

TEST(WrongInputTest, EveryToolNamesItsWrongFlagAndTheNearestOne) {
  struct Case {
    const char* exe;
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {BROKER_EXE, {"--prot", "6395"}, "ringcast-broker: unknown flag '--prot'; did you mean '--port'?"},
      {RELAY_EXE, {"--rign", "/dev/shm/x.ring=x"}, "ringcast-relay: unknown flag '--rign'; did you mean '--ring'?"},
      {RING_TOP_EXE, {"--jsno"}, "ring-top: unknown flag '--jsno'; did you mean '--json'?"},
      {RINGCAST_EXE,
       {"create", "x.ring", "--capcity=16"},
       "ringcast create: unknown flag '--capcity'; did you mean "
       "'--capacity'?"},
  };
  for (const Case& c : cases) {
    const Outcome r = run(c.exe, c.args);
    EXPECT_EQ(r.exit, 2) << c.exe;
    EXPECT_TRUE(has(r.err, c.expected)) << r.err;
    EXPECT_TRUE(has(r.err, " --help")) << r.err;
  }
}

TEST(WrongInputTest, LongHelpStartsWithUsageAndTheCommonFlagsThenGroups) {
  for (const char* exe : {BROKER_EXE, RELAY_EXE}) {
    const Outcome r = run(exe, {"--help"});
    ASSERT_EQ(r.exit, 0) << exe;
    const auto usage = r.out.find("Usage:");
    const auto common = r.out.find("\nCommon:\n");
    ASSERT_NE(usage, std::string::npos) << r.out;
    ASSERT_NE(common, std::string::npos) << r.out;
    EXPECT_LT(usage, common);
    // The common group comes first: no other group's header before it.
    EXPECT_EQ(r.out.find(":\n  -"), r.out.find(":\n  -", common - 1)) << r.out;
    EXPECT_LT(r.out.find("--config"), r.out.find("--hard-limit")) << exe;
    EXPECT_TRUE(has(r.out, "\nSecurity: passwords, tokens, TLS")) << exe;
    EXPECT_FALSE(has(r.out, "\nOptions:\n")) << exe;  // every flag is in a named group
  }
}

// --- values out of range, files that exist ---------------------------------

TEST(WrongInputTest, CapacityOutOfRangeNamesThePathTheRangeAndTheValue) {
  test::TempDir dir;
  const std::string path = dir.file("small.ring");
  const Outcome r = run(RINGCAST_EXE, {"create", path, "--capacity", "1"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_TRUE(has(r.err, path + ": create: capacity out of range (2..1073741824 slots)")) << r.err;
  EXPECT_TRUE(has(r.err, "(found 1)")) << r.err;
}

TEST(WrongInputTest, ExistingPathNamesForceAsTheNextStep) {
  test::TempDir dir;
  const std::string path = dir.file("twice.ring");
  ASSERT_EQ(run(RINGCAST_EXE, {"create", path, "--capacity", "16"}).exit, 0);
  const Outcome r = run(RINGCAST_EXE, {"create", path, "--capacity", "16"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_TRUE(has(r.err, path + ": create: path exists")) << r.err;
  EXPECT_TRUE(has(r.err, "ringcast create --force")) << r.err;
}

TEST(WrongInputTest, LibraryErrorsOfOpenAndCreateNameThePath) {
  test::TempDir dir;
  const std::string missing = dir.file("missing.ring");
  const auto opened = BroadcastRing::open(missing);
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().path, missing);
  EXPECT_EQ(opened.error().message(), missing + ": open: io_error: No such file or directory");
  const auto created = BroadcastRing::create(dir.file("big.ring"), 64, {.max_message = 1 << 20});
  ASSERT_FALSE(created);
  EXPECT_TRUE(has(created.error().message(), dir.file("big.ring") + ": create: max_message is larger"))
      << created.error().message();
  EXPECT_TRUE(has(created.error().message(), "(1048576 bytes, at most ")) << created.error().message();
}

// --- files that are not rings -------------------------------------------------

TEST(WrongInputTest, InfoAndRmRefuseAFifoAtOnceAndLeaveIt) {
  test::TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const char* command : {"info", "rm"}) {
    const Outcome r = run(RINGCAST_EXE, {command, fifo});
    EXPECT_EQ(r.exit, 1) << command << " blocked or did not fail";  // -1: still blocked in open after 20 s
    EXPECT_TRUE(has(r.err, fifo + ": open: not a ringcast ring (not a regular file")) << r.err;
  }
  struct stat st {};
  EXPECT_EQ(::stat(fifo.c_str(), &st), 0);
}

TEST(WrongInputTest, SubExitsNonZeroAfterAReceiveError) {
  test::TempDir dir;
  const std::string path = dir.file("corrupt.ring");
  {
    auto ring = BroadcastRing::create(path, 16, {.max_message = kMaxPayload});
    ASSERT_TRUE(ring) << ring.error().message();
    ASSERT_EQ(ring->try_push(std::as_bytes(std::span("hello", 5))), Errc::ok);
  }
  // Slot 0 now claims a 1000-byte payload, more than a slot holds: corrupt.
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* base = ::mmap(nullptr, layout::file_size(16), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(base, MAP_FAILED);
  auto* slots = reinterpret_cast<layout::Slot*>(static_cast<std::byte*>(base) + layout::kHeaderBytes);
  slots[0].words[0].store(1000, std::memory_order_relaxed);
  ::munmap(base, layout::file_size(16));

  const Outcome r = run(RINGCAST_EXE, {"sub", path, "--from", "oldest", "--count", "1"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_TRUE(has(r.err, "receive: layout_mismatch")) << r.err;
}

TEST(WrongInputTest, RelayRefusesAFileThatIsNotARingBeforeListening) {
  test::TempDir dir;
  const std::string path = dir.file("notes.txt");
  std::ofstream(path) << "not a ring\n";
  const Outcome r = run(RELAY_EXE, {"--ring", path + "=notes", "--listen", "127.0.0.1:0"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_TRUE(has(r.err, "ringcast-relay: ring: " + path + ": open: not a ringcast ring")) << r.err;
  EXPECT_TRUE(has(r.err, "(a --ring path: create the ring there, or fix the path)")) << r.err;
  EXPECT_FALSE(has(r.out, "listening")) << r.out;
}

// --- busy ports -----------------------------------------------------------------

// A socket listening on 127.0.0.1 at a port the kernel picks; closed on destruction.
class BusyPort {
 public:
  BusyPort() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd_, 1) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
  }
  BusyPort(const BusyPort&) = delete;
  BusyPort& operator=(const BusyPort&) = delete;
  ~BusyPort() { ::close(fd_); }
  [[nodiscard]] int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

TEST(WrongInputTest, RelayWithItsMetricsPortTakenExitsBeforeRegisteringOrListening) {
  test::TempDir dir;
  const std::string path = dir.file("ticks.ring");
  ASSERT_TRUE(BroadcastRing::create(path, 16));
  BusyPort busy;
  ASSERT_NE(busy.port(), 0);
  const std::string metrics = "127.0.0.1:" + std::to_string(busy.port());
  const Outcome r = run(RELAY_EXE, {"--ring", path + "=ticks", "--listen", "127.0.0.1:0", "--metrics", metrics});
  EXPECT_EQ(r.exit, 1);
  EXPECT_TRUE(has(r.err, "(--metrics " + metrics + "; pick another port)")) << r.err;
  EXPECT_FALSE(has(r.err, "registered as consumer")) << r.err;
  EXPECT_FALSE(has(r.out, "listening")) << r.out;
}

TEST(WrongInputTest, RelayWithItsListenPortTakenExitsBeforeRegistering) {
  test::TempDir dir;
  const std::string path = dir.file("ticks.ring");
  ASSERT_TRUE(BroadcastRing::create(path, 16));
  BusyPort busy;
  ASSERT_NE(busy.port(), 0);
  const Outcome r = run(RELAY_EXE, {"--ring", path + "=ticks", "--listen", "127.0.0.1:" + std::to_string(busy.port())});
  EXPECT_EQ(r.exit, 1);
  EXPECT_TRUE(has(r.err, "Address already in use")) << r.err;
  EXPECT_FALSE(has(r.err, "registered as consumer")) << r.err;
}

// --- a producer that left and one that died --------------------------------------

// Pushes one message as the producer of `path` in a child process that then
// ends with _exit: without `release`, its handle's destructor never runs, as
// for a producer killed between two pushes.
void produce_in_child(const std::string& path, bool release) {
  const pid_t pid = test::fork_with_death_signal();
  if (pid == 0) {
    auto ring = BroadcastRing::open(path);
    if (!ring || !ring->claim_producer() || ring->try_push(std::as_bytes(std::span("tick", 4))) != Errc::ok) {
      ::_exit(1);
    }
    if (release) ring->release_producer();
    ::_exit(0);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_EQ(test::exit_code(status), 0);
}

TEST(WrongInputTest, InfoAndRingTopSayLeftForAProducerThatReleasedAndDeadForOneThatDied) {
  test::TempDir dir;
  const std::string path = dir.file("ticks.ring");
  ASSERT_TRUE(BroadcastRing::create(path, 16, {.claim_producer = false}));
  produce_in_child(path, /*release=*/true);
  Outcome info = run(RINGCAST_EXE, {"info", path});
  EXPECT_TRUE(has(info.out, "producer    position 1, left (")) << info.out;
  Outcome top = run(RING_TOP_EXE, {"--once", "-d", "0", path});
  EXPECT_TRUE(has(top.out, "producer left")) << top.out;
  EXPECT_FALSE(has(top.out, "DEAD")) << top.out;

  produce_in_child(path, /*release=*/false);
  info = run(RINGCAST_EXE, {"info", path});
  EXPECT_TRUE(has(info.out, "producer    position 2, dead (pid ")) << info.out;
  top = run(RING_TOP_EXE, {"--once", "-d", "0", path});
  EXPECT_TRUE(has(top.out, " DEAD")) << top.out;
  EXPECT_FALSE(has(top.out, "producer left")) << top.out;
}

TEST(WrongInputTest, PubHeldFullByAConsumerThatDiedNamesReapWhichFreesIt) {
  test::TempDir dir;
  const std::string path = dir.file("held.ring");
  ASSERT_TRUE(BroadcastRing::create(path, 2, {.claim_producer = false, .max_message = kMaxPayload}));
  // A consumer registers in a child that ends without unregistering.
  const pid_t pid = test::fork_with_death_signal();
  if (pid == 0) {
    auto ring = BroadcastRing::open(path);
    ::_exit(ring && ring->register_consumer() ? 0 : 1);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_EQ(test::exit_code(status), 0);
  const std::string lines = dir.file("lines");
  std::ofstream(lines) << "a\nb\nc\n";  // one more than the ring holds

  test::SpawnOptions options;
  options.err = test::Stream::kPipe;
  test::ChildProcess pub = test::ChildProcess::spawn(
      {"/bin/sh", "-c", std::string("exec ") + RINGCAST_EXE + " pub " + path + " < " + lines}, options);
  EXPECT_TRUE(pub.read_stderr_until("free it with: ringcast reap " + path, test::deadline_in(20s)))
      << pub.stderr_text();
  EXPECT_EQ(run(RINGCAST_EXE, {"reap", path}).exit, 0);
  EXPECT_EQ(test::exit_code(pub.wait_exit(test::deadline_in(20s))), 0) << pub.stderr_text();
}

}  // namespace
}  // namespace ringcast
