// The ringcast command-line tool, driven as a user would drive it.
#include <fcntl.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "test_support.hpp"

namespace ringcast {
namespace {

const std::string kCli = RINGCAST_CLI;

// `length` letters that differ from one message to the next (sub prints
// letters as they are).
std::string text_of(std::size_t length, std::size_t seed) {
  std::string s(length, ' ');
  for (std::size_t i = 0; i < length; ++i) s[i] = static_cast<char>('a' + (i * 7 + seed) % 26);
  return s;
}

// `length` bytes running through every value.
std::string bytes_of(std::size_t length, std::size_t seed) {
  std::string s(length, '\0');
  for (std::size_t i = 0; i < length; ++i) s[i] = static_cast<char>((i + seed) % 256);
  return s;
}

// A --binary frame: 4-byte little-endian length, then the bytes.
std::string frame(const std::string& payload) {
  const auto n = static_cast<std::uint32_t>(payload.size());
  std::string s;
  for (int shift = 0; shift < 32; shift += 8) s += static_cast<char>((n >> shift) & 0xFF);
  return s + payload;
}

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
  ASSERT_EQ(cli("create " + path_ + " --capacity 16 --max-message 100").status, 0);
  test::ChildProcess sub = test::ChildProcess::spawn({kCli, "sub", path_, "--count", "3"});
  ASSERT_TRUE(test::eventually([&] { return active() == 1; }));
  const std::string longline(101, 'x');
  const auto pub =
      test::run_command("printf 'hello\\nworld\\n" + longline + "\\nlast\\n' | " + kCli + " pub " + path_ + " 2>&1");
  EXPECT_EQ(pub.status, 1);
  EXPECT_NE(pub.out.find("line 3: 101 bytes, over the ring's max message of 100 bytes"), std::string::npos) << pub.out;
  EXPECT_NE(pub.out.find("published 3 message(s)"), std::string::npos) << pub.out;
  EXPECT_EQ(test::exit_code(sub.wait_exit(test::deadline_in(std::chrono::seconds(20)))), 0);
  EXPECT_EQ(sub.stdout_text(), "hello\nworld\nlast\n");
  EXPECT_EQ(active(), 0U);
}

TEST_F(RingcastCliTest, LinesOfTwoHundredBytesAndSixtyFourKibRoundTripAndALongerOneIsSkipped) {
  // 2050 slots hold a 64 KiB message (a message may take half the ring).
  ASSERT_EQ(cli("create " + path_ + " --capacity 4100").status, 0);
  test::ChildProcess sub = test::ChildProcess::spawn({kCli, "sub", path_, "--count", "3"});
  ASSERT_TRUE(test::eventually([&] { return active() == 1; }));
  const std::string medium = text_of(200, 1);
  const std::string large = text_of(64 * 1024, 2);
  const std::string input = dir_.path() + "/lines.txt";
  // A line one byte over the limit streams past between them, never held whole.
  test::write_file(input, medium + "\n" + text_of(64 * 1024 + 1, 3) + "\n" + large + "\nend");
  const auto pub = cli("pub " + path_ + " < " + input);
  EXPECT_EQ(pub.status, 1);
  EXPECT_NE(pub.out.find("line 2: 65537 bytes, over the ring's max message of 65536 bytes"), std::string::npos)
      << pub.out;
  EXPECT_NE(pub.out.find("published 3 message(s), rejected 1 over-long line(s)"), std::string::npos) << pub.out;
  EXPECT_EQ(test::exit_code(sub.wait_exit(test::deadline_in(std::chrono::seconds(20)))), 0);
  EXPECT_EQ(sub.stdout_text(), medium + "\n" + large + "\nend\n");

  const auto doc = nlohmann::json::parse(cli("info " + path_ + " --json").out)["rings"][0];
  EXPECT_EQ(doc["max_message"], 64 * 1024);
  EXPECT_EQ(doc["messages"], 3);
  EXPECT_EQ(doc["payload_bytes"], 200 + 64 * 1024 + 3);
  const auto text = cli("info " + path_).out;
  EXPECT_NE(text.find("max message 65536 bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("published   3 message(s), 65739 payload bytes"), std::string::npos) << text;
}

TEST_F(RingcastCliTest, BinaryFramesRoundTripFromRingToRingByteForByte) {
  const std::string second = dir_.path() + "/second.ring";
  ASSERT_EQ(cli("create " + path_ + " --capacity 4100").status, 0);
  ASSERT_EQ(cli("create " + second + " --capacity 4100").status, 0);
  // Every byte value, newlines and NULs included, at the sizes that matter.
  std::vector<std::string> messages = {"", std::string("a\nb\0c\\", 6), bytes_of(200, 5), bytes_of(64 * 1024, 6)};
  std::string frames;
  for (const std::string& m : messages) frames += frame(m);
  const std::string input = dir_.path() + "/frames.bin";
  test::write_file(input, frames);

  test::ChildProcess reader =
      test::ChildProcess::spawn({kCli, "sub", second, "--binary", "--count", std::to_string(messages.size())});
  test::ChildProcess bridge = test::ChildProcess::spawn(
      {"/bin/sh", "-c",
       "exec " + kCli + " sub " + path_ + " --binary --count 4 | " + kCli + " pub " + second + " --binary"});
  ASSERT_TRUE(test::eventually([&] {
    auto a = BroadcastRing::open(path_, {.read_only = true});
    auto b = BroadcastRing::open(second, {.read_only = true});
    return a && b && a->active_consumer_count() == 1 && b->active_consumer_count() == 1;
  }));
  const auto pub = cli("pub " + path_ + " --binary < " + input);
  EXPECT_EQ(pub.status, 0) << pub.out;
  EXPECT_NE(pub.out.find("published 4 message(s)"), std::string::npos) << pub.out;
  EXPECT_EQ(test::exit_code(bridge.wait_exit(test::deadline_in(std::chrono::seconds(20)))), 0);
  EXPECT_EQ(test::exit_code(reader.wait_exit(test::deadline_in(std::chrono::seconds(20)))), 0);
  EXPECT_TRUE(reader.stdout_text() == frames) << reader.stdout_text().size() << " bytes, expected " << frames.size();
}

TEST_F(RingcastCliTest, PubBinarySkipsAnOverlongFrameAndStopsAtATruncatedOne) {
  ASSERT_EQ(cli("create " + path_ + " --capacity 64 --max-message 1k").status, 0);
  test::ChildProcess sub = test::ChildProcess::spawn({kCli, "sub", path_, "--count", "2"});
  ASSERT_TRUE(test::eventually([&] { return active() == 1; }));
  const std::string input = dir_.path() + "/frames.bin";
  test::write_file(input, frame("one") + frame(std::string(1025, 'x')) + frame("two") + frame("three").substr(0, 6));
  const auto pub = cli("pub " + path_ + " --binary < " + input);
  EXPECT_EQ(pub.status, 1);
  EXPECT_NE(pub.out.find("message 2: 1025 bytes, over the ring's max message of 1024 bytes"), std::string::npos)
      << pub.out;
  EXPECT_NE(pub.out.find("message 4: the input ends inside its frame (5 of its bytes announced)"), std::string::npos)
      << pub.out;
  EXPECT_NE(pub.out.find("published 2 message(s)"), std::string::npos) << pub.out;
  EXPECT_EQ(test::exit_code(sub.wait_exit(test::deadline_in(std::chrono::seconds(20)))), 0);
  EXPECT_EQ(sub.stdout_text(), "one\ntwo\n");
}

TEST_F(RingcastCliTest, CreateTakesMaxMessageWithUnitsAndRefusesMoreThanTheCapacityAllows) {
  const auto made = cli("create " + path_ + " --capacity 64 --max-message 1k");
  EXPECT_EQ(made.status, 0) << made.out;
  EXPECT_NE(made.out.find("max message 1 KiB"), std::string::npos) << made.out;
  EXPECT_EQ(nlohmann::json::parse(cli("info " + path_ + " --json").out)["rings"][0]["max_message"], 1024);

  const std::string big = dir_.path() + "/big.ring";
  const auto refused = cli("create " + big + " --capacity 64 --max-message 1m");
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.out.find("at most " + std::to_string(layout::max_message_for(64)) + " bytes"), std::string::npos)
      << refused.out;
  EXPECT_FALSE(std::filesystem::exists(big));
  const auto bad = cli("create " + big + " --capacity 64 --max-message lots");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.out.find("--max-message"), std::string::npos) << bad.out;
  // Up to 52 bytes: one slot per message, as rings always were.
  ASSERT_EQ(cli("create " + big + " --capacity 64 --max-message 52").status, 0);
  EXPECT_NE(cli("info " + big).out.find("max message 52 bytes (one slot per message)"), std::string::npos);
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
  EXPECT_NE(sub.stderr_text().find("from position 2"), std::string::npos) << sub.stderr_text();
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
  // ring-top --json's object (docs/ring-top.md, "JSON"), for this ring alone.
  const auto top = nlohmann::json::parse(json.out);
  EXPECT_EQ(top["watched"], nlohmann::json::array({path_}));
  ASSERT_EQ(top["rings"].size(), 1U);
  const auto& doc = top["rings"][0];
  EXPECT_EQ(doc["path"], path_);
  EXPECT_EQ(doc["capacity"], 8);
  EXPECT_FALSE(doc["producer_alive"].get<bool>());
  EXPECT_EQ(doc["dead_consumers"], 2);
  ASSERT_EQ(doc["consumers"].size(), 2U);
  for (const auto& c : doc["consumers"]) EXPECT_FALSE(c["alive"].get<bool>());

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
