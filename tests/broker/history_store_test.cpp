// HistoryStore (src/broker/guarantees/history_store.hpp): the same behaviour
// tests run against the memory store and the LMDB store; then what only one of
// them has (epoch rules, kill -9, refusing foreign/corrupt/newer directories,
// map growth); then the --history and --fsync flag parsers.
#include <lmdb.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "broker/guarantees/history_store.hpp"
#include "child_process.hpp"
#include "temp_dir.hpp"

namespace ringcast::broker {
namespace {

using test::TempDir;

std::vector<RetentionRule> rules(std::initializer_list<std::string_view> specs) {
  std::vector<RetentionRule> out;
  for (auto s : specs) out.push_back(parse_retention(s).value());
  return out;
}

std::string payload_of(std::uint64_t offset) {
  std::string s("message-");
  s.append(std::to_string(offset));
  return s;
}

// A run of n messages for offsets first.., payload_of(offset), time_ms = t.
struct TestRun {
  std::vector<std::string> payloads;
  std::vector<HistoryInput> inputs;
  TestRun(std::uint64_t first, std::size_t n, std::int64_t t) {
    payloads.reserve(n);
    for (std::size_t i = 0; i < n; ++i) payloads.push_back(payload_of(first + i));
    for (const auto& p : payloads) inputs.push_back(HistoryInput{p, t});
  }
};

std::string channel_name(int c) { return std::string(1, static_cast<char>('a' + c)); }

enum class Kind { kMemory, kLmdb };

class HistoryStoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  std::unique_ptr<HistoryStore> open(std::vector<RetentionRule> r) {
    if (GetParam() == Kind::kMemory) return make_memory_history_store(std::move(r));
    HistoryOptions o;
    o.dir = dir_.file("history");
    o.fsync = FsyncMode::kOff;
    o.rules = std::move(r);
    auto s = open_lmdb_history_store(std::move(o));
    EXPECT_TRUE(s) << s.error().message();
    return s ? std::move(*s) : nullptr;
  }

  static void append(HistoryStore& s, std::string_view ch, std::uint64_t first, std::size_t n, std::int64_t t = 1000,
                     std::int64_t now = 1000) {
    TestRun run(first, n, t);
    auto ok = s.append(ch, first, run.inputs, now);
    ASSERT_TRUE(ok) << ok.error().message();
  }

  static void expect_offsets(const HistoryRead& r, std::uint64_t first, std::size_t n) {
    ASSERT_EQ(r.messages.size(), n);
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(r.messages[i].offset, first + i);
      EXPECT_EQ(r.messages[i].payload, payload_of(first + i));
    }
  }

  TempDir dir_;
};

TEST_P(HistoryStoreTest, AppendedRunsReadBackWithTheirOffsetsAndTimes) {
  auto s = open(rules({"chat.*=100"}));
  append(*s, "chat.a", 1, 3, 500);
  append(*s, "chat.a", 4, 2, 600);
  append(*s, "chat.b", 1, 1, 700);
  auto r = s->read_since("chat.a", 0, 100).value();
  EXPECT_EQ(r.status, ReadStatus::kOk);
  EXPECT_EQ(r.top, 5u);
  EXPECT_EQ(r.floor, 0u);
  expect_offsets(r, 1, 5);
  EXPECT_EQ(r.messages[0].time_ms, 500);
  EXPECT_EQ(r.messages[4].time_ms, 600);
  EXPECT_EQ(s->top("chat.a"), 5u);
  EXPECT_EQ(s->top("chat.b"), 1u);
  EXPECT_EQ(s->top("chat.none"), 0u);
}

TEST_P(HistoryStoreTest, RefusesAnOffsetNotAboveTheTop) {
  auto s = open(rules({"*=100"}));
  append(*s, "c", 5, 2);
  TestRun run(6, 1, 0);
  auto e = s->append("c", 6, run.inputs, 0);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, HistoryError::Code::kNotIncreasing);
  EXPECT_NE(e.error().message().find("not above its top 6"), std::string::npos) << e.error().message();
  EXPECT_EQ(s->read_since("c", 0, 10).value().messages.size(), 2u);
}

TEST_P(HistoryStoreTest, RefusesAChannelNoRuleMatches) {
  auto s = open(rules({"chat.*=10"}));
  TestRun run(1, 1, 0);
  auto e = s->append("news", 1, run.inputs, 0);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, HistoryError::Code::kNoRetention);
  EXPECT_EQ(s->usage().messages, 0u);
}

TEST_P(HistoryStoreTest, ReadSinceReturnsLaterMessagesUpToCount) {
  auto s = open(rules({"*=100"}));
  append(*s, "c", 1, 10);
  expect_offsets(s->read_since("c", 4, 3).value(), 5, 3);
  expect_offsets(s->read_since("c", 4, 100).value(), 5, 6);
  auto at_top = s->read_since("c", 10, 100).value();
  EXPECT_EQ(at_top.status, ReadStatus::kOk);
  EXPECT_TRUE(at_top.messages.empty());
}

TEST_P(HistoryStoreTest, ReadLastReturnsTheNewestInOrder) {
  auto s = open(rules({"*=100"}));
  append(*s, "c", 1, 10);
  expect_offsets(s->read_last("c", 3).value(), 8, 3);
  expect_offsets(s->read_last("c", 50).value(), 1, 10);
  EXPECT_TRUE(s->read_last("other", 5).value().messages.empty());
}

TEST_P(HistoryStoreTest, SizeCapKeepsTheNewestAndTruncatesOlderSince) {
  auto s = open(rules({"*=4"}));
  append(*s, "c", 1, 3);
  append(*s, "c", 4, 3);
  auto r = s->read_since("c", 0, 100).value();
  EXPECT_EQ(r.status, ReadStatus::kTruncated);
  EXPECT_EQ(r.floor, 2u);
  expect_offsets(r, 3, 4);
  auto exact = s->read_since("c", 2, 100).value();  // the client saw 2: nothing it needs is gone
  EXPECT_EQ(exact.status, ReadStatus::kOk);
  expect_offsets(exact, 3, 4);
  EXPECT_EQ(s->usage().messages, 4u);
}

TEST_P(HistoryStoreTest, RunLargerThanTheCapKeepsItsTail) {
  auto s = open(rules({"*=4"}));
  append(*s, "c", 1, 2);
  append(*s, "c", 3, 10);
  auto r = s->read_since("c", 0, 100).value();
  EXPECT_EQ(r.floor, 8u);
  EXPECT_EQ(r.top, 12u);
  expect_offsets(r, 9, 4);
  append(*s, "c", 13, 1);
  auto later = s->read_since("c", 8, 100).value();
  EXPECT_EQ(later.status, ReadStatus::kTruncated);
  expect_offsets(later, 10, 4);
}

TEST_P(HistoryStoreTest, SkippedOffsetsCountAsLost) {
  auto s = open(rules({"*=100"}));
  append(*s, "c", 1, 3);
  append(*s, "c", 10, 2);
  auto r = s->read_since("c", 3, 100).value();
  EXPECT_EQ(r.status, ReadStatus::kTruncated);
  EXPECT_EQ(r.floor, 9u);
  expect_offsets(r, 10, 2);
}

TEST_P(HistoryStoreTest, SinceBeyondTheTopIsAhead) {
  auto s = open(rules({"*=100"}));
  append(*s, "c", 1, 3);
  EXPECT_EQ(s->read_since("c", 4, 10).value().status, ReadStatus::kAhead);
  EXPECT_EQ(s->read_since("never", 1, 10).value().status, ReadStatus::kAhead);
  EXPECT_EQ(s->read_since("never", 0, 10).value().status, ReadStatus::kOk);
}

TEST_P(HistoryStoreTest, TtlPrunesByTheInjectedClock) {
  auto s = open(rules({"t.*=100,10s", "keep=100"}));
  append(*s, "t.a", 1, 2, /*t=*/1000, /*now=*/1000);
  append(*s, "t.a", 3, 2, /*t=*/5000, /*now=*/5000);
  append(*s, "keep", 1, 2, 1000, 1000);
  EXPECT_EQ(s->prune(10'999).value(), 0u);
  EXPECT_EQ(s->prune(11'000).value(), 2u);  // t + ttl <= now
  auto r = s->read_since("t.a", 0, 10).value();
  EXPECT_EQ(r.status, ReadStatus::kTruncated);
  expect_offsets(r, 3, 2);
  // An append prunes its own channel by its `now`.
  append(*s, "t.a", 5, 1, /*t=*/15'000, /*now=*/15'000);
  expect_offsets(s->read_since("t.a", 0, 10).value(), 5, 1);
  EXPECT_EQ(s->read_since("keep", 0, 10).value().messages.size(), 2u);
  EXPECT_EQ(s->prune(1'000'000).value(), 1u);
  EXPECT_EQ(s->usage().messages, 2u);
}

TEST_P(HistoryStoreTest, UsageCountsMessagesBytesAndChannels) {
  auto s = open(rules({"*=3"}));
  append(*s, "a", 1, 2);  // "message-1", "message-2": 9 bytes each
  append(*s, "b", 1, 5);  // keeps 3..5
  auto u = s->usage();
  EXPECT_EQ(u.channels, 2u);
  EXPECT_EQ(u.messages, 5u);
  EXPECT_EQ(u.bytes, 5 * (9 + kHistoryOverheadBytes));
}

TEST_P(HistoryStoreTest, ReadersSeeWholeRunsWhileAppendersRun) {
  auto s = open(rules({"*=1000"}));
  constexpr int kChannels = 2;
  constexpr std::uint64_t kRuns = 200, kRunLen = 8;
  std::atomic<bool> done{false};
  std::vector<std::thread> writers;
  for (int c = 0; c < kChannels; ++c)
    writers.emplace_back([&, c] {
      const std::string ch = channel_name(c);
      for (std::uint64_t i = 0; i < kRuns; ++i) append(*s, ch, i * kRunLen + 1, kRunLen);
    });
  std::thread reader([&] {
    while (!done.load(std::memory_order_acquire)) {  // acquire: pairs with the release store below
      for (int c = 0; c < kChannels; ++c) {
        auto r = s->read_since(channel_name(c), 0, 100'000).value();
        ASSERT_EQ(r.top % kRunLen, 0u) << "a reader saw part of a run";
        ASSERT_EQ(r.messages.size(), r.top - r.floor);
        if (!r.messages.empty()) {
          ASSERT_EQ(r.messages.back().offset, r.top);
        }
      }
    }
  });
  for (auto& w : writers) w.join();
  done.store(true, std::memory_order_release);
  reader.join();
  for (int c = 0; c < kChannels; ++c) EXPECT_EQ(s->top(channel_name(c)), kRuns * kRunLen);
}

TEST_P(HistoryStoreTest, ResumeFloorsArePerClientAndChannelAndNeverMoveBack) {
  auto s = open(rules({"*=10"}));
  EXPECT_EQ(s->resume_floor("c1", "t"), 0u);
  ASSERT_TRUE(s->put_resume_floor("c1", "t", 7));
  ASSERT_TRUE(s->put_resume_floor("c1", "u", 3));
  ASSERT_TRUE(s->put_resume_floor("c2", "t", 1));
  ASSERT_TRUE(s->put_resume_floor("c1", "t", 5));  // an older floor: ignored
  EXPECT_EQ(s->resume_floor("c1", "t"), 7u);
  EXPECT_EQ(s->resume_floor("c1", "u"), 3u);
  EXPECT_EQ(s->resume_floor("c2", "t"), 1u);
  EXPECT_EQ(s->resume_floor("c2", "u"), 0u);
  EXPECT_EQ(s->resume_floor(std::string_view("c1\0t", 4), ""), 0u) << "the key is not ambiguous";
  EXPECT_EQ(s->usage().channels, 0u) << "floors are not history";
}

// --session-ttl drops an expired session's floors, and after a restart the
// broker learns from session_clients() which sessions the store holds.
TEST_P(HistoryStoreTest, EraseSessionDropsEveryFloorOfThatClientOnly) {
  auto s = open(rules({"*=10"}));
  EXPECT_TRUE(s->session_clients().empty());
  // Enough channels to fill several LMDB pages: the erase walks past page ends.
  for (int i = 0; i < 600; ++i) ASSERT_TRUE(s->put_resume_floor("a", "channel-" + std::to_string(i), 5));
  ASSERT_TRUE(s->put_resume_floor("ab", "t", 1));
  ASSERT_TRUE(s->put_resume_floor("b", "t", 2));
  EXPECT_EQ(s->session_clients(), (std::vector<std::string>{"a", "ab", "b"}));
  ASSERT_TRUE(s->erase_session("a"));
  EXPECT_EQ(s->session_clients(), (std::vector<std::string>{"ab", "b"}));
  EXPECT_EQ(s->resume_floor("a", "channel-0"), 0u);
  EXPECT_EQ(s->resume_floor("a", "channel-599"), 0u);
  EXPECT_EQ(s->resume_floor("ab", "t"), 1u) << "a client id that extends the erased one is another client";
  EXPECT_EQ(s->resume_floor("b", "t"), 2u);
  ASSERT_TRUE(s->erase_session("nobody"));
  EXPECT_EQ(s->session_clients().size(), 2u);
}

// A session's owner (durable_sessions.hpp, invariant 4) lives beside its
// floors: listed with them, erased with them, never read as a floor.
TEST_P(HistoryStoreTest, SessionOwnerIsKeptListedAndErasedWithTheFloors) {
  auto s = open(rules({"*=10"}));
  EXPECT_EQ(s->session_owner("a"), std::nullopt);
  ASSERT_TRUE(s->put_session_owner("a", "alice"));
  ASSERT_TRUE(s->put_session_owner("b", "bob"));
  ASSERT_TRUE(s->put_resume_floor("a", "t", 4));
  ASSERT_TRUE(s->put_resume_floor("ab", "t", 1));
  EXPECT_EQ(s->session_owner("a"), "alice");
  EXPECT_EQ(s->session_owner("ab"), std::nullopt);
  EXPECT_EQ(s->session_clients(), (std::vector<std::string>{"a", "ab", "b"})) << "an owner alone lists its session";
  EXPECT_EQ(s->resume_floor("a", ""), 0u) << "the owner is not a floor";
  ASSERT_TRUE(s->erase_session("a"));
  EXPECT_EQ(s->session_owner("a"), std::nullopt);
  EXPECT_EQ(s->resume_floor("a", "t"), 0u);
  EXPECT_EQ(s->session_owner("b"), "bob");
  EXPECT_EQ(s->session_clients(), (std::vector<std::string>{"ab", "b"}));
}

INSTANTIATE_TEST_SUITE_P(Stores, HistoryStoreTest, ::testing::Values(Kind::kMemory, Kind::kLmdb),
                         [](const auto& p) { return p.param == Kind::kMemory ? "Memory" : "Lmdb"; });

TEST(MemoryHistoryStoreTest, EachStartHasANewEpoch) {
  auto a = make_memory_history_store(rules({"*=1"}));
  auto b = make_memory_history_store(rules({"*=1"}));
  EXPECT_EQ(a->epoch().size(), 16u);
  EXPECT_NE(a->epoch(), b->epoch());
}

// A cluster node's copy (MemoryHistoryOptions::sparse_offsets): a channel's
// offsets skip the other channels' in the cluster's one sequence. Only the
// first append sets the floor; later ones continue the channel, reads find
// the first offset above `since` whatever the holes, and pruning by size keeps
// the floor at the last offset pruned, so a client whose own last message was
// the last pruned still recovers whole.
TEST(MemoryHistoryStoreTest, SparseOffsetsContinueAChannelAndTruncateOnlyWhatWasPruned) {
  auto s = make_memory_history_store(rules({"*=3"}), {"00000000000000aa", /*sparse_offsets=*/true});
  EXPECT_EQ(s->epoch(), "00000000000000aa");
  for (const std::uint64_t offset : {5u, 9u, 12u}) {
    const std::string payload = payload_of(offset);  // HistoryInput views it
    const HistoryInput in{payload, 1000};
    ASSERT_TRUE(s->append("c", offset, {&in, 1}, 1000));
  }
  const auto offsets = [](const HistoryRead& r) {
    std::vector<std::uint64_t> v;
    for (const HistoryMessage& m : r.messages) v.push_back(m.offset);
    return v;
  };
  auto r = s->read_since("c", 4, 100).value();
  EXPECT_EQ(r.status, ReadStatus::kOk) << "4 is the floor: the copy's first message of c was 5";
  EXPECT_EQ(offsets(r), (std::vector<std::uint64_t>{5, 9, 12}));
  EXPECT_EQ(s->read_since("c", 3, 100).value().status, ReadStatus::kTruncated) << "older than the copy";
  r = s->read_since("c", 6, 100).value();  // an offset between two of c's: another channel's
  EXPECT_EQ(r.status, ReadStatus::kOk);
  EXPECT_EQ(offsets(r), (std::vector<std::uint64_t>{9, 12}));
  const std::string payload = payload_of(20);
  const HistoryInput in{payload, 1000};
  ASSERT_TRUE(s->append("c", 20, {&in, 1}, 1000));  // the size cap prunes 5
  r = s->read_since("c", 5, 100).value();
  EXPECT_EQ(r.status, ReadStatus::kOk) << "5 was the last pruned: 9 came next";
  EXPECT_EQ(offsets(r), (std::vector<std::uint64_t>{9, 12, 20}));
  EXPECT_EQ(s->read_since("c", 4, 100).value().status, ReadStatus::kTruncated) << "5 is gone";
  EXPECT_EQ(s->read_since("c", 21, 100).value().status, ReadStatus::kAhead);
  EXPECT_EQ(s->top("c"), 20u);
}

// --- LMDB only ---------------------------------------------------------------

HistoryOptions lmdb_options(const std::string& dir, FsyncMode fsync = FsyncMode::kAlways) {
  HistoryOptions o;
  o.dir = dir;
  o.fsync = fsync;
  o.rules = rules({"*=1000000"});
  return o;
}

// Writes a raw LMDB environment in dir: key/value pairs into the named db (or
// the main db when db is empty).
void write_raw_lmdb(const std::string& dir, const char* db, std::string_view key, std::string_view value) {
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(env, 4), 0);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0644), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, db, MDB_CREATE, &dbi), 0);
  MDB_val k{key.size(), const_cast<char*>(key.data())}, v{value.size(), const_cast<char*>(value.data())};
  ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

TEST(LmdbHistoryStoreTest, ReopenKeepsOffsetsEpochAndUsage) {
  TempDir dir;
  std::string epoch;
  {
    auto s = open_lmdb_history_store(lmdb_options(dir.path(), FsyncMode::kBatch)).value();
    TestRun run(1, 5, 42);
    ASSERT_TRUE(s->append("c", 1, run.inputs, 42));
    epoch = s->epoch();
  }
  auto s = open_lmdb_history_store(lmdb_options(dir.path())).value();
  EXPECT_EQ(s->epoch(), epoch);
  EXPECT_EQ(s->top("c"), 5u);
  EXPECT_EQ(s->usage().messages, 5u);
  EXPECT_EQ(s->usage().channels, 1u);
  TestRun run(6, 1, 43);
  EXPECT_FALSE(s->append("c", 5, run.inputs, 43));
  ASSERT_TRUE(s->append("c", 6, run.inputs, 43));
  EXPECT_EQ(s->read_since("c", 0, 10).value().messages.size(), 6u);
}

TEST(LmdbHistoryStoreTest, ResumeFloorsAndOwnerSurviveAReopen) {
  TempDir dir;
  {
    auto s = open_lmdb_history_store(lmdb_options(dir.path(), FsyncMode::kAlways)).value();
    ASSERT_TRUE(s->put_session_owner("dash", "ops"));
    ASSERT_TRUE(s->put_resume_floor("dash", "prices", 41));
  }
  auto s = open_lmdb_history_store(lmdb_options(dir.path())).value();
  EXPECT_EQ(s->resume_floor("dash", "prices"), 41u);
  EXPECT_EQ(s->session_owner("dash"), "ops");
}

TEST(LmdbHistoryStoreTest, ReopenWithSmallerRulesPrunesAndRefusesUnmatchedChannels) {
  TempDir dir;
  {
    auto s = open_lmdb_history_store(lmdb_options(dir.path())).value();
    TestRun run(1, 10, 0);
    ASSERT_TRUE(s->append("keep", 1, run.inputs, 0));
    ASSERT_TRUE(s->append("gone", 1, run.inputs, 0));
  }
  HistoryOptions o = lmdb_options(dir.path());
  o.rules = rules({"keep=4"});
  auto s = open_lmdb_history_store(o).value();
  EXPECT_EQ(s->usage().messages, 20u);
  EXPECT_EQ(s->prune(0).value(), 6u);  // the new size applies to what is on disk
  auto r = s->read_since("keep", 0, 100).value();
  EXPECT_EQ(r.status, ReadStatus::kTruncated);
  EXPECT_EQ(r.messages.front().offset, 7u);
  // A channel no rule matches any more keeps what it has, readable, and takes no appends.
  EXPECT_EQ(s->read_last("gone", 100).value().messages.size(), 10u);
  TestRun more(11, 1, 0);
  auto e = s->append("gone", 11, more.inputs, 0);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, HistoryError::Code::kNoRetention);
  EXPECT_EQ(s->usage().messages, 14u);
}

TEST(LmdbHistoryStoreTest, ANewDirectoryGetsANewEpoch) {
  TempDir a, b;
  auto sa = open_lmdb_history_store(lmdb_options(a.file("h"))).value();
  auto sb = open_lmdb_history_store(lmdb_options(b.file("h"))).value();
  EXPECT_NE(sa->epoch(), sb->epoch());
}

// Runs a child that opens dir with `mode` and boot id file `boot`, appends one
// message, reports the epoch and _exit()s without closing: an unclean session.
std::string unclean_session(const std::string& dir, FsyncMode mode, const std::string& boot) {
  int report[2];
  if (::pipe(report) != 0) return {};
  const pid_t pid = test::fork_with_death_signal();
  if (pid == 0) {
    ::close(report[0]);
    HistoryOptions o = lmdb_options(dir, mode);
    o.boot_id_file = boot;
    auto s = open_lmdb_history_store(o);
    if (!s) ::_exit(2);
    const std::uint64_t first = (*s)->top("c") + 1;
    TestRun run(first, 1, 0);
    if (!(*s)->append("c", first, run.inputs, 0)) ::_exit(3);
    const std::string& e = (*s)->epoch();
    if (::write(report[1], e.data(), e.size()) != static_cast<ssize_t>(e.size())) ::_exit(4);
    ::_exit(0);
  }
  ::close(report[1]);
  char buf[64];
  const ssize_t n = pid > 0 ? ::read(report[0], buf, sizeof buf) : -1;
  ::close(report[0]);
  int status = 0;
  if (pid > 0) ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

TEST(LmdbHistoryStoreTest, EpochChangesOnlyWhenAnUnsyncedSessionMeetsAReboot) {
  TempDir dir;
  const std::string boot = dir.file("boot_id"), data = dir.file("h");
  auto set_boot = [&](std::string_view id) { std::ofstream(boot) << id << '\n'; };
  auto reopen = [&](FsyncMode mode) {
    HistoryOptions o = lmdb_options(data, mode);
    o.boot_id_file = boot;
    return open_lmdb_history_store(o).value();
  };
  set_boot("boot-a");
  const std::string e0 = unclean_session(data, FsyncMode::kBatch, boot);
  ASSERT_EQ(e0.size(), 16u);
  EXPECT_EQ(reopen(FsyncMode::kAlways)->epoch(), e0) << "same boot: the page cache kept every commit";
  const std::string e1 = unclean_session(data, FsyncMode::kOff, boot);
  EXPECT_EQ(e1, e0);
  set_boot("boot-b");
  std::string e2;
  {
    auto s = reopen(FsyncMode::kBatch);  // an unclean off session, then a reboot
    e2 = s->epoch();
    EXPECT_NE(e2, e0);
    EXPECT_EQ(s->top("c"), 2u);
  }
  set_boot("boot-c");  // the batch session above closed cleanly: nothing was at risk
  EXPECT_EQ(reopen(FsyncMode::kBatch)->epoch(), e2);
  set_boot("boot-d");
  EXPECT_EQ(unclean_session(data, FsyncMode::kAlways, boot), e2);
  set_boot("boot-e");  // an unclean always session lost nothing it acknowledged
  EXPECT_EQ(reopen(FsyncMode::kAlways)->epoch(), e2);
}

TEST(LmdbHistoryStoreTest, KeepsEveryReturnedRunAfterKillNine) {
  TempDir dir;
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t pid = test::fork_with_death_signal();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(report[0]);
    auto s = open_lmdb_history_store(lmdb_options(dir.path(), FsyncMode::kAlways));
    if (!s) ::_exit(2);
    for (std::uint64_t first = 1;; first += 16) {
      TestRun run(first, 16, 7);
      if (!(*s)->append("c", first, run.inputs, 7)) ::_exit(3);
      const std::uint64_t top = first + 15;
      if (::write(report[1], &top, sizeof top) != sizeof top) ::_exit(4);
    }
  }
  ::close(report[1]);
  std::uint64_t reported = 0, v = 0;
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(::read(report[0], &v, sizeof v), static_cast<ssize_t>(sizeof v));
    reported = v;
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  while (::read(report[0], &v, sizeof v) == static_cast<ssize_t>(sizeof v)) reported = v;
  ::close(report[0]);

  auto s = open_lmdb_history_store(lmdb_options(dir.path())).value();
  const std::uint64_t top = s->top("c");
  EXPECT_GE(top, reported);
  EXPECT_EQ(top % 16, 0u) << "a run was half stored";
  auto r = s->read_since("c", 0, top).value();
  ASSERT_EQ(r.messages.size(), top);
  for (std::uint64_t i = 0; i < top; ++i) ASSERT_EQ(r.messages[i].payload, payload_of(i + 1));
}

TEST(LmdbHistoryStoreTest, RefusesACorruptDirectoryWithoutTouchingIt) {
  TempDir dir;
  { std::ofstream(dir.file("data.mdb"), std::ios::binary) << std::string(8192, 'x'); }
  const auto before = test::file_contents(dir.path());
  auto s = open_lmdb_history_store(lmdb_options(dir.path()));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, HistoryError::Code::kCorrupt) << s.error().message();
  EXPECT_NE(s.error().message().find(dir.path()), std::string::npos);
  EXPECT_EQ(test::file_contents(dir.path()), before);
}

TEST(LmdbHistoryStoreTest, RefusesADirectoryOfOtherFilesWithoutTouchingIt) {
  TempDir dir;
  { std::ofstream(dir.file("notes.txt")) << "mine"; }
  const auto before = test::file_contents(dir.path());
  auto s = open_lmdb_history_store(lmdb_options(dir.path()));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, HistoryError::Code::kForeign) << s.error().message();
  EXPECT_EQ(test::file_contents(dir.path()), before);
}

TEST(LmdbHistoryStoreTest, RefusesAForeignLmdbEnvironmentWithoutTouchingIt) {
  TempDir dir;
  write_raw_lmdb(dir.path(), nullptr, "someone", "else");
  const auto before = test::file_contents(dir.path());
  auto s = open_lmdb_history_store(lmdb_options(dir.path()));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, HistoryError::Code::kForeign) << s.error().message();
  EXPECT_EQ(test::file_contents(dir.path()), before);
}

TEST(LmdbHistoryStoreTest, RefusesANewerFormatWithoutTouchingIt) {
  TempDir dir;
  {
    auto s = open_lmdb_history_store(lmdb_options(dir.path())).value();
    TestRun run(1, 3, 0);
    ASSERT_TRUE(s->append("c", 1, run.inputs, 0));
  }
  write_raw_lmdb(dir.path(), "meta", "format", std::string("\0\0\0\2", 4));
  const auto before = test::file_contents(dir.path());
  auto s = open_lmdb_history_store(lmdb_options(dir.path()));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, HistoryError::Code::kNewerFormat);
  EXPECT_NE(s.error().message().find("format 2, this one reads up to 1"), std::string::npos) << s.error().message();
  EXPECT_EQ(test::file_contents(dir.path()), before);
}

// One broker per directory (dir_lock.hpp): a second open, here in the same
// process, is refused with the holder's pid while the first is open, and
// succeeds once it has closed.
TEST(LmdbHistoryStoreTest, ASecondStoreOnOneDirectoryIsRefusedWhileTheFirstIsOpen) {
  TempDir dir;
  auto first = open_lmdb_history_store(lmdb_options(dir.path())).value();
  auto second = open_lmdb_history_store(lmdb_options(dir.path()));
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, HistoryError::Code::kLocked);
  EXPECT_NE(second.error().message().find(dir.path() + ": in use by another broker (pid " + std::to_string(::getpid())),
            std::string::npos)
      << second.error().message();
  first.reset();
  auto third = open_lmdb_history_store(lmdb_options(dir.path()));
  EXPECT_TRUE(third) << third.error().message();
}

TEST(LmdbHistoryStoreTest, GrowsTheMapThenReportsFullAtTheMaximum) {
  TempDir dir;
  HistoryOptions o = lmdb_options(dir.path(), FsyncMode::kOff);
  o.initial_map_bytes = 256 << 10;
  o.max_map_bytes = 2 << 20;
  auto s = open_lmdb_history_store(o).value();
  const std::string big(1000, 'p');
  std::vector<HistoryInput> run(64, HistoryInput{big, 0});
  std::uint64_t first = 1;
  tl::expected<void, HistoryError> r;
  while ((r = s->append("c", first, run, 0))) first += run.size();
  EXPECT_EQ(r.error().code, HistoryError::Code::kFull) << r.error().message();
  EXPECT_GT(first - 1, (256u << 10) / 1000) << "the map never grew";
  EXPECT_EQ(s->top("c"), first - 1);  // the refused run left nothing behind
  EXPECT_EQ(s->read_since("c", 0, 1'000'000).value().messages.size(), first - 1);
}

// --- flags --------------------------------------------------------------------

TEST(RetentionTest, ParsesSizeAndTtl) {
  auto r = parse_retention("chat.*=1000,10m").value();
  EXPECT_EQ(r.pattern, "chat.*");
  EXPECT_EQ(r.size, 1000u);
  EXPECT_EQ(r.ttl, std::chrono::minutes(10));
  EXPECT_EQ(parse_retention("a=5").value().ttl.count(), 0);
  EXPECT_EQ(parse_retention("a=5,30").value().ttl, std::chrono::seconds(30));
  EXPECT_EQ(parse_retention("a=5,250ms").value().ttl, std::chrono::milliseconds(250));
  EXPECT_EQ(parse_retention("a=5,2d").value().ttl, std::chrono::hours(48));
  EXPECT_EQ(parse_retention("k=v=5").value().pattern, "k=v");  // the last '=' splits
}

TEST(RetentionTest, RejectsMalformedSpecsNamingTheProblem) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"chat", "no '='"},
      {"=5", "empty channel pattern"},
      {"a=", "size '' is not a whole number"},
      {"a=x", "size 'x' is not a whole number"},
      {"a=-1", "size '-1' is not a whole number"},
      {"a=0", "size 0 is outside"},
      {"a=2000000000", "outside 1..1000000000"},
      {"a=5,", "TTL '' is not a number"},
      {"a=5,10y", "TTL '10y' is not a number"},
      {"a=5,0s", "TTL '0s' is outside"},
      {"a=5,99999999999d", "is outside 1ms..100 years"},
  };
  for (auto [spec, why] : cases) {
    auto r = parse_retention(spec);
    ASSERT_FALSE(r) << spec;
    EXPECT_NE(r.error().find(why), std::string::npos) << spec << ": " << r.error();
    EXPECT_NE(r.error().find("GLOB=SIZE[,TTL]"), std::string::npos) << r.error();
  }
}

TEST(RetentionTest, FirstMatchingRuleWins) {
  auto r = rules({"chat.vip=10", "chat.*=5", "*=1"});
  EXPECT_EQ(find_retention(r, "chat.vip")->size, 10u);
  EXPECT_EQ(find_retention(r, "chat.x")->size, 5u);
  EXPECT_EQ(find_retention(r, "news")->size, 1u);
  EXPECT_EQ(find_retention(std::span<const RetentionRule>(r).first(1), "news"), nullptr);
}

TEST(RetentionTest, FsyncModeParsesItsThreeNames) {
  EXPECT_EQ(parse_fsync_mode("always").value(), FsyncMode::kAlways);
  EXPECT_EQ(parse_fsync_mode("batch").value(), FsyncMode::kBatch);
  EXPECT_EQ(parse_fsync_mode("off").value(), FsyncMode::kOff);
  EXPECT_NE(parse_fsync_mode("sometimes").error().find("always, batch or off"), std::string::npos);
}

}  // namespace
}  // namespace ringcast::broker
