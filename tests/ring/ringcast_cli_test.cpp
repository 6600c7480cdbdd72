// The ringcast command-line tool, driven as a user would drive it.
#include <fcntl.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "child_process.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "test_support.hpp"

namespace ringcast {
namespace {

const std::string kCli = RINGCAST_CLI;

class RingcastCliTest : public ::testing::Test {
 protected:
  test::TempDir dir_;
  std::string path_ = dir_.path() + "/cli.ring";

  test::CommandResult cli(const std::string& args) { return test::run_command(kCli + " " + args + " 2>&1"); }
  std::size_t active() {
    auto ring = BroadcastRing::open(path_, {.read_only = true});
    return ring ? ring->active_consumer_count() : 0;
  }
};

TEST_F(RingcastCliTest, EverySubcommandHasHelp) {
  for (const char* sub : {"", "create", "pub", "sub", "info", "reap", "rm"}) {
    const auto r = cli(std::string(sub) + " --help");
    EXPECT_EQ(r.status, 0) << sub;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << sub;
  }
}

TEST_F(RingcastCliTest, UsageErrorsExitWithStatusTwoAndTheReason) {
  for (const char* args : {"", "frob", "create", "create x.ring --capacity abc", "sub --no-such-flag x.ring"}) {
    const auto r = cli(args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_FALSE(r.out.empty()) << args;
  }
}

TEST_F(RingcastCliTest, PubAndSubDeliverLinesAndOverlongLineIsNamedNotFatal) {
  ASSERT_EQ(cli("create " + path_ + " --capacity 16").status, 0);
  test::ChildProcess sub = test::ChildProcess::spawn({kCli, "sub", path_, "--count", "3"});
  ASSERT_TRUE(test::eventually([&] { return active() == 1; }));
  const std::string longline(60, 'x');
  const auto pub =
      test::run_command("printf 'hello\\nworld\\n" + longline + "\\nlast\\n' | " + kCli + " pub " + path_ + " 2>&1");
  EXPECT_EQ(pub.status, 1);
  EXPECT_NE(pub.out.find("line 3: 60 bytes"), std::string::npos) << pub.out;
  EXPECT_NE(pub.out.find("published 3 message(s)"), std::string::npos) << pub.out;
  EXPECT_EQ(test::exit_code(sub.wait_exit(test::deadline_in(std::chrono::seconds(20)))), 0);
  EXPECT_EQ(sub.stdout_text(), "hello\nworld\nlast\n");
  EXPECT_EQ(active(), 0U);
}

TEST_F(RingcastCliTest, SubFromOldestPrintsTheMessagesStillInTheRingThenLiveOnes) {
  ASSERT_EQ(cli("create " + path_ + " --capacity 4").status, 0);
  // Nobody holds the ring, so six messages leave the last four in it.
  ASSERT_EQ(test::run_command("printf 'm0\\nm1\\nm2\\nm3\\nm4\\nm5\\n' | " + kCli + " pub " + path_).status, 0);
  test::ChildProcess sub =
      test::ChildProcess::spawn({kCli, "sub", path_, "--from", "oldest", "--count", "5"}, {.err = test::Stream::kPipe});
  ASSERT_TRUE(test::eventually([&] { return active() == 1; }));
  ASSERT_EQ(test::run_command("printf 'live\\n' | " + kCli + " pub " + path_).status, 0);
  EXPECT_EQ(test::exit_code(sub.wait_exit(test::deadline_in(std::chrono::seconds(20)))), 0);
  EXPECT_EQ(sub.stdout_text(), "m2\nm3\nm4\nm5\nlive\n");
  EXPECT_NE(sub.stderr_text().find("from message 2"), std::string::npos) << sub.stderr_text();
}

TEST_F(RingcastCliTest, SubFromRejectsAnUnknownStartAndDocumentsIt) {
  ASSERT_EQ(cli("create " + path_ + " --capacity 4").status, 0);
  const auto bad = cli("sub " + path_ + " --from middle");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.out.find("--from"), std::string::npos) << bad.out;
  const auto help = cli("sub --help");
  EXPECT_NE(help.out.find("oldest"), std::string::npos) << help.out;
}

TEST_F(RingcastCliTest, SubUnregistersOnSigterm) {
  ASSERT_EQ(cli("create " + path_ + " -c 8").status, 0);
  test::ChildProcess sub = test::ChildProcess::spawn({kCli, "sub", path_});
  ASSERT_TRUE(test::eventually([&] { return active() == 1; }));
  EXPECT_EQ(test::exit_code(sub.stop(SIGTERM)), 0);
  EXPECT_EQ(active(), 0U);
}

TEST_F(RingcastCliTest, InfoExplainsStateAfterEverythingIsKilledAndReapFreesDeadEntries) {
  ASSERT_EQ(cli("create " + path_ + " -c 8").status, 0);
  test::ChildProcess sub1 = test::ChildProcess::spawn({kCli, "sub", path_});
  test::ChildProcess sub2 = test::ChildProcess::spawn({kCli, "sub", path_});
  ASSERT_TRUE(test::eventually([&] { return active() == 2; }));
  // A producer that holds the role and is killed while waiting for input on a FIFO.
  const std::string fifo = dir_.path() + "/stdin";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  test::ChildProcess pub =
      test::ChildProcess::spawn({"/bin/sh", "-c", "exec " + kCli + " pub " + path_ + " < " + fifo});
  // A plain O_WRONLY open would block until pub opens its stdin, forever if it
  // never starts; non-blocking, it fails with ENXIO until then, so poll it.
  int writer = -1;
  ASSERT_TRUE(test::eventually([&] { return (writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK)) >= 0; }));
  ASSERT_TRUE(test::eventually([&] {
    auto ring = BroadcastRing::open(path_, {.read_only = true});
    return ring && ring->status().producer_alive;
  }));
  sub1.stop(SIGKILL);
  sub2.stop(SIGKILL);
  pub.stop(SIGKILL);
  ::close(writer);

  const auto json = cli("info " + path_ + " --json");
  ASSERT_EQ(json.status, 0) << json.out;
  const auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["capacity"], 8);
  EXPECT_FALSE(doc["producer_alive"].get<bool>());
  ASSERT_EQ(doc["consumers"].size(), 2U);
  for (const auto& c : doc["consumers"]) EXPECT_FALSE(c["owner_alive"].get<bool>());

  const auto text = cli("info " + path_);
  EXPECT_NE(text.out.find("DEAD"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("ringcast reap"), std::string::npos) << text.out;

  const auto reaped = cli("reap " + path_);
  EXPECT_EQ(reaped.status, 0);
  EXPECT_NE(reaped.out.find("reaped 2"), std::string::npos) << reaped.out;
  EXPECT_EQ(active(), 0U);
  // A new producer takes over the ring.
  EXPECT_EQ(test::run_command("echo again | " + kCli + " pub " + path_).status, 0);
}

TEST_F(RingcastCliTest, RmRemovesRingsAndRefusesOtherFiles) {
  ASSERT_EQ(cli("create " + path_ + " -c 8").status, 0);
  const auto exists = cli("create " + path_ + " -c 8");
  EXPECT_NE(exists.status, 0);
  EXPECT_NE(exists.out.find("already_exists"), std::string::npos);
  EXPECT_EQ(cli("rm " + path_).status, 0);
  EXPECT_NE(cli("info " + path_).status, 0);
  const std::string other = dir_.path() + "/notes.txt";
  test::write_file(other, std::string(4096, 'n'));
  const auto refused = cli("rm " + other);
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.out.find("not a ringcast ring"), std::string::npos) << refused.out;
  EXPECT_EQ(test::read_file(other).size(), 4096U);
}

TEST_F(RingcastCliTest, BadArgumentsFailWithAMessage) {
  EXPECT_NE(cli("create " + path_ + " -c 1").status, 0);
  const auto mode = cli("create " + path_ + " -c 8 --mode 9z");
  EXPECT_NE(mode.status, 0);
  EXPECT_NE(mode.out.find("octal"), std::string::npos);
  EXPECT_NE(cli("frobnicate").status, 0);
}

}  // namespace
}  // namespace ringcast
