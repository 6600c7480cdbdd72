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
  EXPECT_TRUE(contains(o.out, "producer " + std::to_string(me) + " " + process_name(me) + " alive")) << o.out;
}

TEST_F(RingTopCliTest, JsonReportsLagLivenessRatesAndBlocking) {
  auto o = run({RING_TOP_EXE, "--json", "-d", "0.1", live_.path()});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  auto json = parse_json(o.out);
  ASSERT_TRUE(json) << o.out;
  const nlohmann::json& r = json->at("rings").at(0);
  EXPECT_EQ(r.at("path").get<std::string>(), live_.path());
  EXPECT_TRUE(r.at("named").get<bool>());
  EXPECT_EQ(r.at("state").get<std::string>(), "live");
  EXPECT_DOUBLE_EQ(r.at("capacity").get<double>(), 64);
  EXPECT_DOUBLE_EQ(r.at("producer_seq").get<double>(), 40);
  EXPECT_DOUBLE_EQ(r.at("producer_pid").get<double>(), ::getpid());
  EXPECT_TRUE(r.at("producer_alive").get<bool>());
  EXPECT_DOUBLE_EQ(r.at("push_rate").get<double>(), 0);  // sampled twice: a rate, and nothing was pushed
  EXPECT_DOUBLE_EQ(r.at("active_consumers").get<double>(), 3);
  EXPECT_DOUBLE_EQ(r.at("dead_consumers").get<double>(), 1);
  EXPECT_DOUBLE_EQ(r.at("behind_consumers").get<double>(), 1);
  EXPECT_DOUBLE_EQ(r.at("max_lag").get<double>(), 40);
  EXPECT_DOUBLE_EQ(r.at("fill").get<double>(), 0.625);
  EXPECT_FALSE(r.at("blocked").get<bool>());
  EXPECT_FALSE(r.at("drained").get<bool>());
  const nlohmann::json& cs = r.at("consumers");
  ASSERT_EQ(cs.size(), 3U);
  EXPECT_EQ(cs.at(0).at("process").get<std::string>(), "slow-reader");
  EXPECT_DOUBLE_EQ(cs.at(0).at("pid").get<double>(), live_.slow.pid());
  EXPECT_TRUE(cs.at(0).at("alive").get<bool>());
  EXPECT_TRUE(cs.at(0).at("behind").get<bool>());
  EXPECT_DOUBLE_EQ(cs.at(0).at("lag").get<double>(), 40);
  EXPECT_DOUBLE_EQ(cs.at(0).at("recv_rate").get<double>(), 0);
  EXPECT_EQ(cs.at(1).at("process").get<std::string>(), "fast-reader");
  EXPECT_DOUBLE_EQ(cs.at(1).at("lag").get<double>(), 0);
  EXPECT_FALSE(cs.at(1).at("behind").get<bool>());
  EXPECT_FALSE(cs.at(2).at("alive").get<bool>());
  EXPECT_EQ(cs.at(2).at("process").get<std::string>(), "");
  EXPECT_DOUBLE_EQ(cs.at(2).at("pid").get<double>(), live_.dead_pid);
  EXPECT_DOUBLE_EQ(cs.at(2).at("lag").get<double>(), 16);

  // Fill the ring: the slow consumer is now capacity behind.
  ASSERT_NO_FATAL_FAILURE(live_.push(LiveRing::kCapacity - LiveRing::kSlowLag));
  const std::byte one[1] = {};
  ASSERT_EQ(live_.ring->try_push(one), Errc::full);
  o = run({RING_TOP_EXE, "--json", "-d", "0", live_.path()});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  json = parse_json(o.out);
  ASSERT_TRUE(json) << o.out;
  const nlohmann::json& full = json->at("rings").at(0);
  EXPECT_TRUE(full.at("blocked").get<bool>());
  EXPECT_DOUBLE_EQ(full.at("fill").get<double>(), 1);
  EXPECT_DOUBLE_EQ(full.at("consumers").at(0).at("lag").get<double>(), 64);
  EXPECT_TRUE(full.at("push_rate").is_null());  // -d 0: one sample, no rate
}

// ringcast info --json renders the ring with ring-top's renderer: the same
// object as ring-top --json -d 0 (one sample, no rates), and no interval.
TEST_F(RingTopCliTest, RingcastInfoJsonIsRingTopsObjectForTheRing) {
  const auto top = run({RING_TOP_EXE, "--json", "-d", "0", live_.path()});
  const auto info = run({RINGCAST_EXE, "info", live_.path(), "--json"});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  ASSERT_EQ(info.exit_code, 0) << info.err;
  auto from_top = parse_json(top.out);
  auto from_info = parse_json(info.out);
  ASSERT_TRUE(from_top) << top.out;
  ASSERT_TRUE(from_info) << info.out;
  EXPECT_TRUE(from_info->at("interval_s").is_null()) << info.out;
  // Equal but for what the clock moves between the two runs.
  for (nlohmann::json* j : {&*from_top, &*from_info}) {
    j->erase("interval_s");
    for (nlohmann::json& c : j->at("rings").at(0).at("consumers")) c.erase("since_advance_s");
  }
  EXPECT_EQ(*from_info, *from_top) << info.out << top.out;
}

TEST_F(RingTopCliTest, JsonWithIterationsPrintsOneObjectPerRefresh) {
  const auto o = run({RING_TOP_EXE, "--json", "-n", "3", "-d", "0.05", live_.path()});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto lines = split_lines(o.out);
  ASSERT_EQ(lines.size(), 3U) << o.out;
  for (const std::string& l : lines) {
    const auto json = parse_json(l);
    ASSERT_TRUE(json) << l;
    EXPECT_FALSE(json->at("rings").at(0).at("push_rate").is_null());
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
  EXPECT_EQ(json->at("watched").at(0).get<std::string>(), live_.dir.path());
  ASSERT_EQ(json->at("rings").size(), 1U) << o.out;
  EXPECT_EQ(json->at("rings").at(0).at("path").get<std::string>(), live_.path());
  EXPECT_FALSE(json->at("rings").at(0).at("named").get<bool>());
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
  EXPECT_EQ(json->at("watched").at(0).get<std::string>(), "/dev/shm");
}

}  // namespace
}  // namespace ringcast::top
