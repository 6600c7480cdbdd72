// ring-top's scripted interface (--once, --json, -n, exit status) against a
// live ring whose consumers run in other processes, one of them dead.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "live_ring.hpp"
#include "top/model.hpp"
#include "top_test_support.hpp"

namespace ringcast::top {
namespace {

using test::Json;
using test::LiveRing;
using test::parse_json;
using test::run;
using test::split_lines;

std::string line_with(const std::string& text, const std::string& needle) {
  for (const std::string& l : split_lines(text)) {
    if (l.find(needle) != std::string::npos) return l;
  }
  return {};
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class RingTopCliTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(live_.start()); }
  LiveRing live_;
};

TEST_F(RingTopCliTest, OnceShowsTheSlowConsumerBehindAndTheKilledOneDead) {
  const auto o = run({RING_TOP_EXE, "--once", "-d", "0", live_.path()});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_TRUE(contains(o.out, "3 consumers  1 dead  1 behind")) << o.out;
  const std::string ring_row = line_with(o.out, "ticks");
  EXPECT_TRUE(contains(ring_row, " 64 ")) << ring_row;
  EXPECT_TRUE(contains(ring_row, "3/16")) << ring_row;
  EXPECT_TRUE(contains(ring_row, "pending")) << ring_row;
  const std::string slow = line_with(o.out, "slow-reader");
  EXPECT_TRUE(contains(slow, "BEHIND")) << o.out;
  EXPECT_TRUE(contains(slow, " 40 ")) << slow;
  EXPECT_TRUE(contains(slow, "62.5%")) << slow;
  EXPECT_TRUE(contains(line_with(o.out, "fast-reader"), "alive")) << o.out;
  const std::string dead = line_with(o.out, "DEAD");
  EXPECT_TRUE(contains(dead, std::to_string(live_.dead_pid))) << o.out;
  EXPECT_TRUE(contains(dead, "25.0%")) << dead;
  const auto me = static_cast<std::uint32_t>(::getpid());
  EXPECT_TRUE(contains(o.out, "producer " + std::to_string(me) + " " + process_name(me) + " alive"))
      << o.out;
}

TEST_F(RingTopCliTest, JsonReportsLagLivenessRatesAndBlocking) {
  auto o = run({RING_TOP_EXE, "--json", "-d", "0.1", live_.path()});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  auto json = parse_json(o.out);
  ASSERT_TRUE(json) << o.out;
  const Json& r = (*json)["rings"][0];
  EXPECT_EQ(r["path"].s, live_.path());
  EXPECT_TRUE(r["named"].b);
  EXPECT_EQ(r["state"].s, "live");
  EXPECT_DOUBLE_EQ(r["capacity"].n, 64);
  EXPECT_DOUBLE_EQ(r["producer_seq"].n, 40);
  EXPECT_DOUBLE_EQ(r["producer_pid"].n, ::getpid());
  EXPECT_TRUE(r["producer_alive"].b);
  EXPECT_DOUBLE_EQ(r["push_rate"].n, 0);  // sampled twice: a rate, and nothing was pushed
  EXPECT_DOUBLE_EQ(r["active_consumers"].n, 3);
  EXPECT_DOUBLE_EQ(r["dead_consumers"].n, 1);
  EXPECT_DOUBLE_EQ(r["behind_consumers"].n, 1);
  EXPECT_DOUBLE_EQ(r["max_lag"].n, 40);
  EXPECT_DOUBLE_EQ(r["fill"].n, 0.625);
  EXPECT_FALSE(r["blocked"].b);
  EXPECT_FALSE(r["drained"].b);
  const Json& cs = r["consumers"];
  ASSERT_EQ(cs.a.size(), 3U);
  EXPECT_EQ(cs[0]["process"].s, "slow-reader");
  EXPECT_DOUBLE_EQ(cs[0]["pid"].n, live_.slow.pid());
  EXPECT_TRUE(cs[0]["alive"].b);
  EXPECT_TRUE(cs[0]["behind"].b);
  EXPECT_DOUBLE_EQ(cs[0]["lag"].n, 40);
  EXPECT_DOUBLE_EQ(cs[0]["recv_rate"].n, 0);
  EXPECT_EQ(cs[1]["process"].s, "fast-reader");
  EXPECT_DOUBLE_EQ(cs[1]["lag"].n, 0);
  EXPECT_FALSE(cs[1]["behind"].b);
  EXPECT_FALSE(cs[2]["alive"].b);
  EXPECT_EQ(cs[2]["process"].s, "");
  EXPECT_DOUBLE_EQ(cs[2]["pid"].n, live_.dead_pid);
  EXPECT_DOUBLE_EQ(cs[2]["lag"].n, 16);

  // Fill the ring: the slow consumer is now capacity behind.
  ASSERT_NO_FATAL_FAILURE(live_.push(LiveRing::kCapacity - LiveRing::kSlowLag));
  const std::byte one[1] = {};
  ASSERT_EQ(live_.ring->try_push(one), Errc::full);
  o = run({RING_TOP_EXE, "--json", "-d", "0", live_.path()});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  json = parse_json(o.out);
  ASSERT_TRUE(json) << o.out;
  const Json& full = (*json)["rings"][0];
  EXPECT_TRUE(full["blocked"].b);
  EXPECT_DOUBLE_EQ(full["fill"].n, 1);
  EXPECT_DOUBLE_EQ(full["consumers"][0]["lag"].n, 64);
  EXPECT_TRUE(full["push_rate"].is_null());  // -d 0: one sample, no rate
}

TEST_F(RingTopCliTest, JsonWithIterationsPrintsOneObjectPerRefresh) {
  const auto o = run({RING_TOP_EXE, "--json", "-n", "3", "-d", "0.05", live_.path()});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto lines = split_lines(o.out);
  ASSERT_EQ(lines.size(), 3U) << o.out;
  for (const std::string& l : lines) {
    const auto json = parse_json(l);
    ASSERT_TRUE(json) << l;
    EXPECT_FALSE((*json)["rings"][0]["push_rate"].is_null());
  }
}

TEST_F(RingTopCliTest, WatchingLeavesTheRingUntouched) {
  const std::string before = file_bytes(live_.path());
  EXPECT_EQ(run({RING_TOP_EXE, "--once", "-d", "0.05", live_.path()}).exit_code, 0);
  EXPECT_EQ(run({RING_TOP_EXE, "--json", "-n", "2", "-d", "0.05", live_.dir.path()}).exit_code, 0);
  EXPECT_EQ(file_bytes(live_.path()), before);
  EXPECT_EQ(live_.ring->active_consumer_count(), 3U);
}

TEST_F(RingTopCliTest, DirectoryArgumentFindsRingsAndIgnoresOtherFiles) {
  std::ofstream(live_.dir.file("notes.txt")) << "not a ring\n";
  std::ofstream(live_.dir.file("zeros"), std::ios::binary) << std::string(4096, '\0');
  const auto o = run({RING_TOP_EXE, "--json", "-d", "0", live_.dir.path()});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto json = parse_json(o.out);
  ASSERT_TRUE(json) << o.out;
  EXPECT_EQ((*json)["watched"][0].s, live_.dir.path());
  ASSERT_EQ((*json)["rings"].a.size(), 1U) << o.out;
  EXPECT_EQ((*json)["rings"][0]["path"].s, live_.path());
  EXPECT_FALSE((*json)["rings"][0]["named"].b);
}

TEST_F(RingTopCliTest, WithoutATerminalItPrintsTextEveryRefresh) {
  const auto o = run({RING_TOP_EXE, "-n", "2", "-d", "0", live_.path()});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  std::size_t titles = 0;
  for (const std::string& l : split_lines(o.out)) titles += l.rfind("ring-top  ", 0) == 0 ? 1U : 0U;
  EXPECT_EQ(titles, 2U) << o.out;
}

TEST(RingTopCliErrorsTest, NamedRingThatCannotBeOpenedExitsNonZeroWithTheReason) {
  test::TempDir dir;
  const std::string missing = dir.file("missing");
  auto o = run({RING_TOP_EXE, "--once", "-d", "0", missing});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_TRUE(o.out.empty()) << o.out;
  EXPECT_TRUE(contains(o.err, "ring-top: " + missing + ": No such file or directory")) << o.err;

  std::ofstream(dir.file("notes.txt")) << std::string(2000, 'x');
  o = run({RING_TOP_EXE, "--json", dir.file("notes.txt")});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_TRUE(contains(o.err, "bad magic")) << o.err;

  // Interactive mode checks before it touches the terminal.
  o = run({RING_TOP_EXE, missing});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_TRUE(contains(o.err, missing)) << o.err;
}

TEST(RingTopCliErrorsTest, HelpDescribesTheFlags) {
  const auto o = run({RING_TOP_EXE, "--help"});
  EXPECT_EQ(o.exit_code, 0);
  for (const char* flag : {"--once", "--json", "--no-color", "-d", "-n", "--behind", "PATH|DIR"}) {
    EXPECT_TRUE(contains(o.out, flag)) << flag << "\n" << o.out;
  }
}

TEST(RingTopCliErrorsTest, InvalidFlagsAreRejected) {
  EXPECT_EQ(run({RING_TOP_EXE, "-d", "-1", "--once"}).exit_code, 2);
  EXPECT_EQ(run({RING_TOP_EXE, "--once", "-n", "2"}).exit_code, 2);
  EXPECT_EQ(run({RING_TOP_EXE, "-n", "0", "--json"}).exit_code, 2);
  EXPECT_EQ(run({RING_TOP_EXE, "--no-such-flag"}).exit_code, 2);
}

TEST(RingTopCliErrorsTest, NoArgumentWatchesDevShm) {
  const auto o = run({RING_TOP_EXE, "--json", "-d", "0"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto json = parse_json(o.out);
  ASSERT_TRUE(json) << o.out;
  EXPECT_EQ((*json)["watched"][0].s, "/dev/shm");
}

}  // namespace
}  // namespace ringcast::top
