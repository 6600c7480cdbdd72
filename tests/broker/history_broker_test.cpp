// Per-channel history through a real broker (docs/guarantees.md): in-process
// brokers on loopback port 0 with raw WebSocket and hiredis clients for
// recovery, history: N, HISTORY, pruning, INFO and /metrics; the
// ringcast-broker executable for kill -9 persistence and refused data dirs.
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "deadline.hpp"
#include "ringcast/broker/broker.hpp"
#include "temp_dir.hpp"
#include "ws/ws_client.hpp"

namespace ringcast::broker {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ws::test::WsClient;

std::unique_ptr<Broker> start_broker(std::vector<std::string> history, std::string data_dir = {},
                                     std::chrono::milliseconds prune_interval = 1s) {
  BrokerConfig cfg;
  cfg.port = 0;
  cfg.ws_port = 0;
  cfg.io_threads = 2;
  cfg.history = std::move(history);
  cfg.data_dir = std::move(data_dir);
  cfg.prune_interval = prune_interval;
  auto b = Broker::start(cfg);
  EXPECT_TRUE(b.has_value()) << (b ? "" : b.error().message());
  return b ? std::move(*b) : nullptr;
}

// A hiredis connection, freed at scope end.
struct Redis {
  explicit Redis(int port) {
    const timeval tv{20, 0};
    c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c != nullptr) redisSetTimeout(c, tv);
  }
  ~Redis() {
    if (c != nullptr) redisFree(c);
  }
  Redis(const Redis&) = delete;
  Redis& operator=(const Redis&) = delete;
  // argv-style command (binary safe).
  std::unique_ptr<redisReply, decltype(&freeReplyObject)> cmd(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    return {r, &freeReplyObject};
  }
  redisContext* c = nullptr;
};

// HISTORY's reply, decoded.
struct History {
  std::string epoch;
  std::uint64_t top = 0;
  std::string status;
  std::vector<std::pair<std::uint64_t, std::string>> messages;  // offset, payload
  std::string error;
};

History history(Redis& r, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"HISTORY"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto reply = r.cmd(argv);
  History h;
  if (!reply) {
    h.error = "no reply";
    return h;
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    h.error = std::string(reply->str, reply->len);
    return h;
  }
  EXPECT_EQ(reply->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(reply->elements, 4u);
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 4) return h;
  h.epoch.assign(reply->element[0]->str, reply->element[0]->len);
  h.top = static_cast<std::uint64_t>(reply->element[1]->integer);
  h.status.assign(reply->element[2]->str, reply->element[2]->len);
  for (std::size_t i = 0; i < reply->element[3]->elements; ++i) {
    const redisReply* m = reply->element[3]->element[i];
    h.messages.emplace_back(static_cast<std::uint64_t>(m->element[0]->integer),
                            std::string(m->element[2]->str, m->element[2]->len));
  }
  return h;
}

std::string info(Redis& r, const std::string& section) {
  auto reply = r.cmd({"INFO", section});
  return reply && reply->type == REDIS_REPLY_STRING ? std::string(reply->str, reply->len) : std::string();
}

// The value of `field:` in INFO text.
std::string info_field(const std::string& text, const std::string& field) {
  const auto at = text.find(field + ":");
  if (at == std::string::npos) return {};
  const auto begin = at + field.size() + 1;
  return text.substr(begin, text.find("\r\n", begin) - begin);
}

// "m<i>": the payload of message i (appended, not operator+: GCC 12's
// -Wrestrict misfires on a literal + std::string temporary).
std::string payload_of(std::uint64_t i) {
  std::string s = "m";
  s += std::to_string(i);
  return s;
}

void publish_n(Broker& b, const std::string& channel, std::uint64_t from, std::uint64_t to) {
  for (std::uint64_t i = from; i <= to; ++i) {
    ASSERT_EQ(b.publish(channel, payload_of(i)).status, PublishStatus::kPublished);
  }
}

// Sends a subscribe and returns its confirmation (skipping nothing).
json subscribe(WsClient& c, json cmd) {
  cmd["type"] = "subscribe";
  EXPECT_TRUE(c.send_json(cmd));
  auto j = c.read_json();
  EXPECT_TRUE(j.has_value());
  return j.value_or(json{});
}

// Reads `n` message deliveries; returns their message_ids, checking that each
// payload is "m<id>".
std::vector<std::uint64_t> read_messages(WsClient& c, std::size_t n) {
  std::vector<std::uint64_t> ids;
  while (ids.size() < n) {
    auto j = c.read_json();
    if (!j) {
      ADD_FAILURE() << "connection ended after " << ids.size() << " of " << n << " messages";
      break;
    }
    EXPECT_EQ((*j)["type"], "message") << j->dump();
    const auto id = (*j)["message_id"].get<std::uint64_t>();
    EXPECT_EQ((*j)["payload"], payload_of(id));
    ids.push_back(id);
  }
  return ids;
}

// --- Recovery over WebSocket -----------------------------------------------------------------------

TEST(HistoryBrokerTest, SubscribeConfirmsARetainedChannelsOffsetAndEpochAndDeliveriesCarryTheOffset) {
  auto b = start_broker({"h.*=100"});
  ASSERT_TRUE(b);
  publish_n(*b, "h.a", 1, 3);
  WsClient c(b->ws_port());
  const json r = subscribe(c, {{"topic", "h.a"}});
  EXPECT_EQ(r["offset"], 3);
  EXPECT_EQ(r["epoch"].get<std::string>().size(), 16u);
  EXPECT_FALSE(r.contains("recovered"));
  publish_n(*b, "h.a", 4, 4);
  EXPECT_EQ(read_messages(c, 1), std::vector<std::uint64_t>{4});
  // A channel no rule retains: a plain confirmation.
  const json plain = subscribe(c, {{"topic", "other"}});
  EXPECT_FALSE(plain.contains("offset"));
}

TEST(HistoryBrokerTest, RecoverySendsEveryMissedMessageThenLiveOnesWithoutGapOrDuplicateWhilePublishing) {
  constexpr std::uint64_t kTotal = 12'000;
  auto b = start_broker({"seam=100000"});
  ASSERT_TRUE(b);
  WsClient first(b->ws_port());
  const json r0 = subscribe(first, {{"topic", "seam"}});
  const std::string epoch = r0["epoch"];
  ASSERT_EQ(r0["offset"], 0);

  // Two publishers on the channel (the core numbers their messages); clients
  // recover from several offsets while they run, each from a point the
  // publishers have already passed, and must then see every id after it once.
  std::atomic<std::uint64_t> published{0};
  std::atomic<std::uint64_t> next{1};
  const auto publisher = [&] {
    while (next.fetch_add(1, std::memory_order_relaxed) <= kTotal) {  // relaxed: a ticket counter
      ASSERT_EQ(b->publish("seam", "x").status, PublishStatus::kPublished);
      published.fetch_add(1, std::memory_order_release);  // pairs with the acquire loads below
    }
  };
  std::thread p1(publisher);
  std::thread p2(publisher);
  struct Late {
    std::unique_ptr<WsClient> c;
    std::uint64_t since = 0;
  };
  std::vector<Late> late;
  for (std::uint64_t mark : {300u, 2'000u, 5'000u, 9'000u}) {
    while (published.load(std::memory_order_acquire) < mark) std::this_thread::yield();
    Late l{std::make_unique<WsClient>(b->ws_port()), mark / 2};
    const json r = subscribe(*l.c, {{"topic", "seam"}, {"since", {{"offset", l.since}, {"epoch", epoch}}}});
    EXPECT_EQ(r["recovered"], true) << r.dump();
    EXPECT_EQ(r["epoch"], epoch);
    EXPECT_GE(r["offset"].get<std::uint64_t>(), mark);
    late.push_back(std::move(l));
  }
  p1.join();
  p2.join();
  for (Late& l : late) {
    std::vector<std::uint64_t> ids;
    while (ids.size() < kTotal - l.since) {
      auto j = l.c->read_json();
      ASSERT_TRUE(j.has_value()) << "after " << ids.size();
      ASSERT_EQ((*j)["type"], "message");
      ids.push_back((*j)["message_id"].get<std::uint64_t>());
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
      ASSERT_EQ(ids[i], l.since + 1 + i) << "gap or duplicate at the seam, recovering from " << l.since;
    }
  }
}

TEST(HistoryBrokerTest, RecoveryPastThePrunedPartIsRefusedWithTheCurrentOffsetAndEpoch) {
  auto b = start_broker({"p=5"});
  ASSERT_TRUE(b);
  publish_n(*b, "p", 1, 10);
  WsClient probe(b->ws_port());
  const std::string epoch = subscribe(probe, {{"topic", "p"}})["epoch"];

  WsClient c(b->ws_port());
  const json r = subscribe(c, {{"topic", "p"}, {"since", {{"offset", 2}, {"epoch", epoch}}}});
  EXPECT_EQ(r["recovered"], false);
  EXPECT_EQ(r["offset"], 10);
  EXPECT_EQ(r["epoch"], epoch);
  // Still subscribed: the next message is live, right after the offset given.
  publish_n(*b, "p", 11, 11);
  EXPECT_EQ(read_messages(c, 1), std::vector<std::uint64_t>{11});

  // Offset 5 is the floor: 6..10 are all retained.
  WsClient d(b->ws_port());
  const json ok = subscribe(d, {{"topic", "p"}, {"since", {{"offset", 6}, {"epoch", epoch}}}});
  EXPECT_EQ(ok["recovered"], true);
  EXPECT_EQ(read_messages(d, 5), (std::vector<std::uint64_t>{7, 8, 9, 10, 11}));
}

TEST(HistoryBrokerTest, RecoveryFromAnotherEpochOrAnOffsetAheadIsRefused) {
  auto b = start_broker({"e=100"});
  ASSERT_TRUE(b);
  publish_n(*b, "e", 1, 3);
  WsClient c(b->ws_port());
  const json r = subscribe(c, {{"topic", "e"}, {"since", {{"offset", 1}, {"epoch", "0000000000000000"}}}});
  EXPECT_EQ(r["recovered"], false);
  EXPECT_EQ(r["offset"], 3);
  const std::string epoch = r["epoch"];
  WsClient d(b->ws_port());
  const json ahead = subscribe(d, {{"topic", "e"}, {"since", {{"offset", 9}, {"epoch", epoch}}}});
  EXPECT_EQ(ahead["recovered"], false);
  // Nothing replayed to either: the next frame is the next live message.
  publish_n(*b, "e", 4, 4);
  EXPECT_EQ(read_messages(c, 1), std::vector<std::uint64_t>{4});
  EXPECT_EQ(read_messages(d, 1), std::vector<std::uint64_t>{4});
}

TEST(HistoryBrokerTest, HistoryNSendsTheLastNFirst) {
  auto b = start_broker({"n=100"});
  ASSERT_TRUE(b);
  publish_n(*b, "n", 1, 10);
  WsClient c(b->ws_port());
  const json r = subscribe(c, {{"topic", "n"}, {"history", 3}});
  EXPECT_EQ(r["offset"], 10);
  EXPECT_FALSE(r.contains("recovered"));
  publish_n(*b, "n", 11, 11);
  EXPECT_EQ(read_messages(c, 4), (std::vector<std::uint64_t>{8, 9, 10, 11}));
  WsClient all(b->ws_port());
  (void)subscribe(all, {{"topic", "n"}, {"history", 1000}});
  EXPECT_EQ(read_messages(all, 11).front(), 1u);
}

TEST(HistoryBrokerTest, SinceAndHistoryAreRefusedWhereTheyCannotApply) {
  auto b = start_broker({"r=10"});
  ASSERT_TRUE(b);
  WsClient c(b->ws_port());
  const auto error_of = [&](json cmd) {
    const json r = subscribe(c, std::move(cmd));
    EXPECT_EQ(r["type"], "error") << r.dump();
    return r.value("message", "");
  };
  EXPECT_NE(error_of({{"topic", "none"}, {"history", 1}}).find("keeps no history"), std::string::npos);
  EXPECT_NE(error_of({{"topic", "r*"}, {"history", 1}}).find("not a pattern"), std::string::npos);
  EXPECT_NE(error_of({{"topic", "r"}, {"history", 1}, {"since", {{"offset", 1}, {"epoch", "x"}}}}).find("exclude"),
            std::string::npos);
  EXPECT_NE(error_of({{"topic", "r"}, {"since", {{"offset", -1}, {"epoch", "x"}}}}).find("since"), std::string::npos);
  (void)subscribe(c, {{"topic", "r"}});
  EXPECT_NE(error_of({{"topic", "r"}, {"history", 1}}).find("already subscribed"), std::string::npos);
}

// --- HISTORY, pruning, epochs, INFO and /metrics ------------------------------------------------

TEST(HistoryBrokerTest, HistoryCommandReadsTheLastOrSinceAnOffset) {
  auto b = start_broker({"c.*=4"});
  ASSERT_TRUE(b);
  Redis r(b->port());
  ASSERT_NE(r.c, nullptr);
  for (std::uint64_t i = 1; i <= 6; ++i) ASSERT_TRUE(r.cmd({"PUBLISH", "c.x", payload_of(i)}));
  // The cap pruned 1 and 2 on write.
  const History all = history(r, {"c.x"});
  EXPECT_EQ(all.top, 6u);
  EXPECT_EQ(all.status, "ok");
  ASSERT_EQ(all.messages.size(), 4u);
  EXPECT_EQ(all.messages.front(), std::make_pair(std::uint64_t{3}, std::string("m3")));
  EXPECT_EQ(all.epoch.size(), 16u);
  const History last2 = history(r, {"c.x", "COUNT", "2"});
  ASSERT_EQ(last2.messages.size(), 2u);
  EXPECT_EQ(last2.messages.front().first, 5u);
  const History since = history(r, {"c.x", "since", "4", "count", "1"});
  ASSERT_EQ(since.messages.size(), 1u);
  EXPECT_EQ(since.messages.front(), std::make_pair(std::uint64_t{5}, std::string("m5")));
  EXPECT_EQ(history(r, {"c.x", "SINCE", "1"}).status, "truncated");
  EXPECT_EQ(history(r, {"c.x", "SINCE", "7"}).status, "ahead");
  EXPECT_NE(history(r, {"nope"}).error.find("keeps no history"), std::string::npos);
  EXPECT_NE(history(r, {"c.x", "SINCE"}).error.find("syntax"), std::string::npos);
  EXPECT_NE(history(r, {"c.x", "COUNT", "-1"}).error.find("non-negative"), std::string::npos);
}

TEST(HistoryBrokerTest, TheTimerPrunesMessagesPastTheirTtlWithoutNewPublishes) {
  auto b = start_broker({"t=100,50ms"}, {}, 10ms);
  ASSERT_TRUE(b);
  Redis r(b->port());
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(r.cmd({"PUBLISH", "t", "m"}));
  // Bounded wait for the timer (every 10 ms) to pass the 50 ms TTL.
  const auto d = test::deadline_in(20s);
  while (!history(r, {"t"}).messages.empty() && test::ms_left(d) > 0) std::this_thread::sleep_for(5ms);
  const History h = history(r, {"t"});
  EXPECT_TRUE(h.messages.empty());
  EXPECT_EQ(h.top, 3u) << "pruning never lowers the top";
  EXPECT_EQ(info_field(info(r, "history"), "history_pruned_by_timer"), "3");
  // The ids continue.
  ASSERT_TRUE(r.cmd({"PUBLISH", "t", "m"}));
  EXPECT_EQ(history(r, {"t"}).messages.at(0).first, 4u);
}

TEST(HistoryBrokerTest, WithoutPersistenceARestartHasANewEpochAndOffsetsStartOver) {
  std::string epoch;
  {
    auto b = start_broker({"x=10"});
    ASSERT_TRUE(b);
    Redis r(b->port());
    ASSERT_TRUE(r.cmd({"PUBLISH", "x", "a"}));
    ASSERT_TRUE(r.cmd({"PUBLISH", "x", "b"}));
    epoch = history(r, {"x"}).epoch;
  }
  auto b = start_broker({"x=10"});
  ASSERT_TRUE(b);
  Redis r(b->port());
  const History h = history(r, {"x"});
  EXPECT_NE(h.epoch, epoch);
  EXPECT_EQ(h.top, 0u);
  ASSERT_TRUE(r.cmd({"PUBLISH", "x", "c"}));
  EXPECT_EQ(history(r, {"x"}).messages.at(0).first, 1u);
}

TEST(HistoryBrokerTest, InfoAndMetricsReportWhatHistoryHolds) {
  auto b = start_broker({"i.*=2", "j=5,1h"});
  ASSERT_TRUE(b);
  Redis r(b->port());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(r.cmd({"PUBLISH", "i.a", "12345"}));
  ASSERT_TRUE(r.cmd({"PUBLISH", "j", "1"}));
  const std::string text = info(r, "history");
  EXPECT_EQ(info_field(text, "history_rules"), "i.*=2 j=5,3600000ms");
  EXPECT_EQ(info_field(text, "history_store"), "memory");
  EXPECT_EQ(info_field(text, "history_channels"), "2");
  EXPECT_EQ(info_field(text, "history_messages"), "3");
  EXPECT_EQ(info_field(text, "history_bytes"), std::to_string(2 * (5 + 16) + (1 + 16)));
  EXPECT_EQ(info_field(text, "history_appended"), "4");
  EXPECT_EQ(info_field(text, "history_append_errors"), "0");
  EXPECT_NE(info(r, "").find("# History"), std::string::npos) << "in the default sections";
  const std::string m = b->metrics_text();
  EXPECT_NE(m.find("ringcast_broker_history_messages 3\n"), std::string::npos) << m;
  EXPECT_NE(m.find("ringcast_broker_history_bytes 59\n"), std::string::npos);
  EXPECT_NE(m.find("ringcast_broker_history_channels 2\n"), std::string::npos);
}

TEST(HistoryBrokerTest, NoHistoryRuleMeansNoHistorySection) {
  auto b = start_broker({});
  ASSERT_TRUE(b);
  Redis r(b->port());
  EXPECT_EQ(info(r, "").find("# History"), std::string::npos);
  EXPECT_EQ(b->metrics_text().find("ringcast_broker_history"), std::string::npos);
}

// --- The executable: kill -9 and refused data dirs -------------------------------------------------

// ringcast-broker on port 0 with `args`; its port from the first line (0 if none).
struct BrokerExe {
  explicit BrokerExe(const std::vector<std::string>& args) {
    std::vector<std::string> argv{BROKER_EXE, "--port", "0", "--io-threads", "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    test::SpawnOptions options;
    options.err = test::Stream::kPipe;
    child = test::ChildProcess::spawn(argv, options);
    if (child.read_stdout_until("\n", test::deadline_in(20s))) {
      const std::string& out = child.stdout_text();
      const auto colon = out.rfind(':');
      if (colon != std::string::npos) port = std::stoi(out.substr(colon + 1));
    }
  }
  test::ChildProcess child;
  int port = 0;
};

TEST(HistoryBrokerTest, KillNineKeepsEveryAnsweredPublishAndTheEpochAndOffsetsContinue) {
  for (const char* mode : {"always", "batch"}) {
    SCOPED_TRACE(mode);
    test::TempDir dir;
    const std::vector<std::string> args{"--history", "k.*=1000000", "--data-dir", dir.file("data"), "--fsync", mode};
    std::string epoch;
    std::uint64_t answered = 0;
    {
      BrokerExe b(args);
      ASSERT_NE(b.port, 0) << b.child.stderr_text();
      Redis r(b.port);
      epoch = history(r, {"k.a"}).epoch;
      // A second connection publishes without pause; the first kills the broker
      // mid-stream once a few thousand publishes were answered.
      std::atomic<std::uint64_t> acked{0};
      std::thread publisher([&] {
        Redis p(b.port);
        for (;;) {
          auto reply = p.cmd({"PUBLISH", "k.a", payload_of(acked.load() + 1)});
          if (!reply || reply->type != REDIS_REPLY_INTEGER) return;  // the broker died
          acked.fetch_add(1, std::memory_order_release);
        }
      });
      while (acked.load(std::memory_order_acquire) < 3000) std::this_thread::yield();
      const auto status = b.child.stop(SIGKILL);
      publisher.join();
      ASSERT_TRUE(status && WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL);
      answered = acked.load();
    }
    BrokerExe b(args);
    ASSERT_NE(b.port, 0) << b.child.stderr_text();
    Redis r(b.port);
    const History h = history(r, {"k.a", "COUNT", "1000000"});  // all of it, not the default page
    EXPECT_EQ(h.epoch, epoch) << "kill -9 loses nothing: same epoch";
    EXPECT_GE(h.top, answered) << "every answered PUBLISH was stored";
    ASSERT_EQ(h.messages.size(), h.top);
    for (std::size_t i = 0; i < h.messages.size(); ++i) {
      ASSERT_EQ(h.messages[i].first, i + 1);
      ASSERT_EQ(h.messages[i].second, payload_of(i + 1));
    }
    ASSERT_TRUE(r.cmd({"PUBLISH", "k.a", "next"}));
    EXPECT_EQ(history(r, {"k.a", "SINCE", std::to_string(h.top)}).messages.at(0).first, h.top + 1)
        << "the offsets continue after the restart";
    EXPECT_EQ(test::exit_code(b.child.stop()), 0);
  }
}

TEST(HistoryBrokerTest, TheExecutableRefusesACorruptOrForeignDataDirWithoutTouchingIt) {
  test::TempDir dir;
  const std::string corrupt = dir.file("corrupt");
  const std::string foreign = dir.file("foreign");
  std::filesystem::create_directories(corrupt);
  std::filesystem::create_directories(foreign);
  std::ofstream(corrupt + "/data.mdb") << std::string(8192, 'x');
  std::ofstream(foreign + "/notes.txt") << "mine";
  for (const auto& [path, what] : {std::pair{corrupt, std::string("not a readable LMDB")},
                                   std::pair{foreign, std::string("no ringcast history")}}) {
    const auto before = test::file_contents(path);
    BrokerExe b({"--history", "a=1", "--data-dir", path});
    EXPECT_EQ(b.port, 0);
    const auto status = b.child.wait_exit(test::deadline_in(20s));
    ASSERT_TRUE(status.has_value());
    EXPECT_EQ(test::exit_code(status), 1);
    EXPECT_NE(b.child.stderr_text().find("cannot open history"), std::string::npos) << b.child.stderr_text();
    EXPECT_NE(b.child.stderr_text().find(what), std::string::npos) << b.child.stderr_text();
    EXPECT_EQ(test::file_contents(path), before);
  }
}

}  // namespace
}  // namespace ringcast::broker
