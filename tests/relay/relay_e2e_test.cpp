// End to end through the ringcast-relay executable: a producer, two local ring
// consumers, the relay, and TCP subscribers (two fast, one deliberately slow
// under drop-oldest); kill -9 of the relay mid-stream; clean SIGTERM shutdown.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "relay_test_support.hpp"
#include "ringcast/broadcast_ring.hpp"

namespace ringcast::relay {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::Deadline;
using testing::deadline_in;
using testing::eventually;
using testing::RespClient;
using testing::RespReply;
using testing::TempDir;

using testing::e2e_messages;

// Payload: the sequence number and its complement, padded to a full slot
// (52 bytes; an 87-byte frame on channel "ticks").
constexpr std::size_t kPayload = kMaxPayload;
void encode(std::uint64_t seq, std::byte* out) {
  const std::uint64_t inv = ~seq;
  std::memset(out, '.', kPayload);
  std::memcpy(out, &seq, 8);
  std::memcpy(out + 8, &inv, 8);
}
bool decode(std::string_view p, std::uint64_t& seq) {
  if (p.size() != kPayload) return false;
  std::uint64_t inv = 0;
  std::memcpy(&seq, p.data(), 8);
  std::memcpy(&inv, p.data() + 8, 8);
  return inv == ~seq;
}

// Starts ringcast-relay and returns its broker port (0 on failure).
std::uint16_t start_relay(ChildProcess& relay, const std::vector<std::string>& extra) {
  std::vector<std::string> argv{RELAY_EXE};
  argv.insert(argv.end(), extra.begin(), extra.end());
  relay = ChildProcess::spawn(argv, {.err = test::Stream::kPipe});
  if (!relay.read_stdout_until("\n", deadline_in(20s))) return 0;
  const std::string& out = relay.stdout_text();
  const auto at = out.find("listening on 127.0.0.1:");
  if (at == std::string::npos) return 0;
  return static_cast<std::uint16_t>(std::stoul(out.substr(at + 23)));
}

// A local ring consumer on its own handle: counts messages and checks order.
struct LocalConsumer {
  std::uint64_t received = 0;
  std::uint64_t bad = 0;
  std::optional<BroadcastRing> ring;
  ConsumerId id = 0;

  bool attach(const std::string& path) {
    auto r = BroadcastRing::open(path);
    if (!r) return false;
    ring.emplace(std::move(*r));
    auto i = ring->register_consumer();
    if (!i) return false;
    id = *i;
    return true;
  }
  void run(std::uint64_t count, Deadline deadline) {
    alignas(8) std::byte buf[kMaxPayload];
    const auto check = [&](std::span<const std::byte> p) {
      std::uint64_t seq = 0;
      if (!decode(std::string_view(reinterpret_cast<const char*>(p.data()), p.size()), seq) || seq != received) ++bad;
      ++received;
    };
    while (received < count && testing::ms_left(deadline) > 0) {
      const BatchResult b = ring->drain(id, check, 4096);
      if (b.count > 0) continue;
      const RecvResult r = ring->recv_wait(id, buf, {100ms, IdleStrategy::kSpinThenBlock});
      if (r) check(std::span<const std::byte>(buf, r.length));
    }
    (void)ring->unregister_consumer(id);
  }
};

TEST(RelayEndToEndTest, ProducerLocalConsumersRelayAndTcpSubscribersAccountForEveryMessage) {
  const std::uint64_t count = e2e_messages();
  TempDir dir;
  const std::string path = dir.file("ticks.ring");
  auto ring = BroadcastRing::create(path, 1 << 14, {.wakeups = true, .claim_producer = false});
  ASSERT_TRUE(ring) << ring.error().message();

  ChildProcess relay;
  const std::uint16_t port =
      start_relay(relay, {"--ring", path + "=ticks", "--listen", "127.0.0.1:0", "--overflow-policy", "drop-oldest",
                          "--hard-limit", "1mb", "--soft-limit", "0", "--io-threads", "2"});
  ASSERT_NE(port, 0) << relay.stdout_text() << relay.stderr_text();
  ASSERT_TRUE(eventually([&] { return ring->active_consumer_count() == 1; }));

  LocalConsumer locals[2];
  for (auto& l : locals) ASSERT_TRUE(l.attach(path));

  // Three subscribers, named so CLIENT LIST can tell them apart.
  // The slow one has a small receive window (set before connecting, which
  // also stops autotuning), so the kernel cannot absorb its backlog: at most
  // tcp_wmem's 4 MiB on the relay's side plus a few KiB here.
  RespClient fast1(port), fast2(port), slow(port, 4096), control(port);
  for (auto [c, name] : {std::pair{&fast1, "fast1"}, std::pair{&fast2, "fast2"}, std::pair{&slow, "slow"}}) {
    ASSERT_TRUE(c->ok());
    auto r = c->call({"CLIENT", "SETNAME", name});
    ASSERT_TRUE(r && r->str == "OK");
    ASSERT_TRUE(c->subscribe("ticks"));
  }

  // The producer stays at most kWindow messages ahead of the fast subscribers,
  // so their queues (<= kWindow * 87 bytes = 348 KiB) never reach the 1 MiB
  // hard limit: they must get everything. The slow one does not read at all
  // until three quarters of the stream are out (>= 75,000 * 87 bytes = 6.2 MiB,
  // more than its queue and socket buffers hold, so it must lose messages) and
  // then reads slowly.
  constexpr std::uint64_t kWindow = 4096;
  std::atomic<std::uint64_t> fast_received[2] = {0, 0};
  std::atomic<std::uint64_t> pushed{0};
  std::atomic<bool> producer_failed{false};
  // All relaxed: progress counters and a failure flag; results are read after join().
  const Deadline deadline = deadline_in(240s);

  std::thread producer([&] {
    auto p = BroadcastRing::open(path);
    if (!p) return producer_failed.store(true, std::memory_order_relaxed);
    alignas(8) std::byte msg[kPayload];
    for (std::uint64_t seq = 0; seq < count; ++seq) {
      while (seq - std::min(fast_received[0].load(std::memory_order_relaxed),
                            fast_received[1].load(std::memory_order_relaxed)) >=
             kWindow) {
        if (testing::ms_left(deadline) == 0) return producer_failed.store(true, std::memory_order_relaxed);
        std::this_thread::sleep_for(100us);  // pacing, not synchronisation
      }
      encode(seq, msg);
      if (p->push_wait(std::span<const std::byte>(msg, kPayload), 30s) != Errc::ok)
        return producer_failed.store(true, std::memory_order_relaxed);
      pushed.store(seq + 1, std::memory_order_relaxed);
    }
  });
  std::thread consumers[2];
  for (int i = 0; i < 2; ++i) consumers[i] = std::thread([&, i] { locals[i].run(count, deadline); });

  std::uint64_t fast_bad[2] = {0, 0};
  std::thread fast_threads[2];
  RespClient* fast_clients[2] = {&fast1, &fast2};
  for (int i = 0; i < 2; ++i) {
    fast_threads[i] = std::thread([&, i] {
      std::uint64_t expected = 0;
      while (expected < count) {
        auto r = fast_clients[i]->next(deadline);
        if (!r) return;
        std::uint64_t seq = 0;
        if (!r->is_message("ticks") || !decode(r->elems[2].str, seq) || seq != expected) ++fast_bad[i];
        fast_received[i].store(++expected, std::memory_order_relaxed);
      }
    });
  }

  std::uint64_t slow_received = 0;
  std::uint64_t slow_notice_total = 0;
  std::uint64_t slow_last_seq = 0;
  std::uint64_t slow_out_of_order = 0;
  std::thread slow_thread([&] {
    while (pushed.load(std::memory_order_relaxed) < count / 4 * 3 && testing::ms_left(deadline) > 0 &&
           !producer_failed.load(std::memory_order_relaxed)) {
      std::this_thread::sleep_for(1ms);  // deliberately not reading
    }
    bool first = true;
    while (testing::ms_left(deadline) > 0) {
      if (slow_received + slow_notice_total == count) break;
      if (!slow.read_more(deadline_in(100ms), 4096)) continue;
      slow.for_each_buffered([&](const RespReply& r) {
        if (r.is_message("__ringcast__:loss")) {
          const auto at = r.elems[2].str.find("total=");
          if (at != std::string_view::npos) {
            slow_notice_total = std::strtoull(std::string(r.elems[2].str.substr(at + 6)).c_str(), nullptr, 10);
          }
          return;
        }
        std::uint64_t seq = 0;
        if (!r.is_message("ticks") || !decode(r.elems[2].str, seq) || (!first && seq <= slow_last_seq)) {
          ++slow_out_of_order;
        }
        first = false;
        slow_last_seq = seq;
        ++slow_received;
      });
      std::this_thread::sleep_for(200us);  // a slow reader
    }
  });

  producer.join();
  for (auto& t : consumers) t.join();
  for (auto& t : fast_threads) t.join();
  slow_thread.join();

  ASSERT_FALSE(producer_failed.load(std::memory_order_relaxed));
  EXPECT_EQ(pushed.load(std::memory_order_relaxed), count);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(locals[i].received, count) << "local consumer " << i;
    EXPECT_EQ(locals[i].bad, 0u) << "local consumer " << i;
    EXPECT_EQ(fast_received[i].load(std::memory_order_relaxed), count) << "fast subscriber " << i;
    EXPECT_EQ(fast_bad[i], 0u) << "fast subscriber " << i << " saw a gap, duplicate or damage";
  }

  // The slow subscriber: received + dropped = published, with the drop count
  // as the broker reports it, in-band (loss notice) and in CLIENT LIST.
  auto list = control.call({"CLIENT", "LIST"});
  ASSERT_TRUE(list && list->type == '$');
  const std::string clients(list->str);
  const auto field = [&](const std::string& name, const std::string& key) -> std::uint64_t {
    const auto line_at = clients.find("name=" + name + " ");
    if (line_at == std::string::npos) return UINT64_MAX;
    const auto line_end = clients.find('\n', line_at);
    const std::string line = clients.substr(line_at, line_end - line_at);
    const auto k = line.find(" " + key + "=");
    return k == std::string::npos ? UINT64_MAX : std::stoull(line.substr(k + key.size() + 2));
  };
  const std::uint64_t slow_dropped = field("slow", "dropped-hard") + field("slow", "dropped-soft");
  EXPECT_GT(slow_dropped, 0u) << "the slow subscriber was meant to overflow";
  EXPECT_EQ(slow_received + slow_dropped, count) << clients;
  EXPECT_EQ(slow_notice_total, slow_dropped) << "the last loss notice carries the same total";
  EXPECT_EQ(slow_out_of_order, 0u);
  EXPECT_EQ(slow_last_seq, count - 1) << "drop-oldest keeps the newest";
  EXPECT_EQ(field("fast1", "dropped-hard"), 0u);
  EXPECT_EQ(field("fast2", "dropped-hard"), 0u);

  // Clean stop: exit 0 and the relay's consumer is gone.
  const auto status = relay.stop(SIGTERM);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << relay.stderr_text();
  EXPECT_EQ(ring->active_consumer_count(), 0u);
}

TEST(RelayEndToEndTest, KilledRelayDoesNotBlockTheProducerForever) {
  const std::uint64_t count = testing::scaled(200'000, 50'000);
  TempDir dir;
  const std::string path = dir.file("kill.ring");
  auto ring = BroadcastRing::create(path, 1024, {.wakeups = true, .claim_producer = false});
  ASSERT_TRUE(ring);
  ChildProcess relay;
  const std::uint16_t port =
      start_relay(relay, {"--ring", path + "=k", "--listen", "127.0.0.1:0", "--io-threads", "1"});
  ASSERT_NE(port, 0) << relay.stderr_text();
  ASSERT_TRUE(eventually([&] { return ring->active_consumer_count() == 1; }));
  LocalConsumer local;
  ASSERT_TRUE(local.attach(path));
  RespClient sub(port);
  ASSERT_TRUE(sub.subscribe("k"));

  const Deadline deadline = deadline_in(120s);
  std::atomic<std::uint64_t> pushed{0};
  std::atomic<bool> producer_failed{false};
  std::atomic<bool> relay_killed{false};
  std::thread producer([&] {
    // reap_on_full: when the ring is full the producer frees entries whose
    // owner died (kernel OFD locks), so a killed relay cannot block it.
    auto p = BroadcastRing::open(path, {.reap_on_full = true});
    if (!p) return producer_failed.store(true, std::memory_order_relaxed);
    alignas(8) std::byte msg[kPayload];
    for (std::uint64_t seq = 0; seq < count; ++seq) {
      // Half the stream before the kill and half after, however fast this
      // machine is: without the pause the producer could finish first.
      if (seq == count / 2) {
        while (!relay_killed.load(std::memory_order_acquire) && testing::ms_left(deadline) > 0) {
          std::this_thread::sleep_for(1ms);  // bounded poll of the main thread's flag
        }
      }
      encode(seq, msg);
      Errc e = Errc::full;
      while (e != Errc::ok && testing::ms_left(deadline) > 0) {
        e = p->push_wait(std::span<const std::byte>(msg, kPayload), 1s);
      }
      if (e != Errc::ok) return producer_failed.store(true, std::memory_order_relaxed);
      pushed.store(seq + 1, std::memory_order_relaxed);
    }
  });
  std::thread consumer([&] { local.run(count, deadline); });

  // Mid-stream: once the subscriber has seen some messages, SIGKILL the relay.
  std::uint64_t seen = 0;
  while (seen < 1000) {
    auto r = sub.next(deadline_in(30s));
    ASSERT_TRUE(r) << "relay delivered only " << seen;
    if (r->is_message("k")) ++seen;
  }
  const auto status = relay.stop(SIGKILL);
  const std::uint64_t at_kill = pushed.load(std::memory_order_relaxed);
  relay_killed.store(true, std::memory_order_release);  // pairs with the producer's acquire load
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL);

  producer.join();
  consumer.join();
  ASSERT_FALSE(producer_failed.load(std::memory_order_relaxed))
      << "producer blocked after " << pushed.load(std::memory_order_relaxed);
  EXPECT_LE(at_kill, count / 2) << "the kill happened mid-stream";
  EXPECT_EQ(pushed.load(std::memory_order_relaxed), count);
  EXPECT_EQ(local.received, count);
  EXPECT_EQ(local.bad, 0u);
  EXPECT_EQ(ring->active_consumer_count(), 0u) << "the dead relay's entry was reaped";
}

// A value from the relay's INFO line ("...,relayed=12,lapped=3,..."); -1 if absent.
long long info_field(std::string_view info, std::string_view key) {
  const auto at = info.find(fmt::format(",{}=", key));
  if (at == std::string_view::npos) return -1;
  const std::string_view digits = info.substr(at + key.size() + 2);
  long long v = -1;
  std::from_chars(digits.data(), digits.data() + digits.size(), v);
  return v;
}

TEST(RelayEndToEndTest, LossyRingLapsAreCountedAndTheRestRelayedInOrder) {
  constexpr std::uint64_t kCount = 100;
  TempDir dir;
  const std::string path = dir.file("lossy.ring");
  auto ring = BroadcastRing::create(path, 8, {.lossy = true});  // this handle is the live producer
  ASSERT_TRUE(ring);
  ChildProcess relay;
  const std::uint16_t port = start_relay(relay, {"--ring", path + "=lap", "--listen", "127.0.0.1:0"});
  ASSERT_NE(port, 0) << relay.stderr_text();
  ASSERT_TRUE(eventually([&] { return ring->active_consumer_count() == 1; }));
  RespClient sub(port);
  ASSERT_TRUE(sub.subscribe("lap"));

  // Freeze the relay, let the lossy producer lap it 12 times over, then resume it.
  ASSERT_EQ(::kill(relay.pid(), SIGSTOP), 0);
  ASSERT_TRUE(eventually([&] { return testing::all_threads_stopped(relay.pid()); }));
  alignas(8) std::byte msg[kPayload];
  for (std::uint64_t seq = 0; seq < kCount; ++seq) {
    encode(seq, msg);
    ASSERT_EQ(ring->try_push(std::span<const std::byte>(msg, kPayload)), Errc::ok);
  }
  ASSERT_EQ(::kill(relay.pid(), SIGCONT), 0);

  // It resumes at the oldest message still in the ring and relays the rest in order.
  std::vector<std::uint64_t> got;
  while (got.empty() || got.back() != kCount - 1) {
    auto r = sub.next(deadline_in(20s));
    ASSERT_TRUE(r && r->is_message("lap")) << "after " << got.size() << " messages";
    std::uint64_t seq = 0;
    ASSERT_TRUE(decode(r->elems[2].str, seq));
    ASSERT_TRUE(got.empty() || seq == got.back() + 1) << "gap inside the relayed tail at " << seq;
    got.push_back(seq);
  }
  EXPECT_LE(got.size(), 8u) << "at most a ring's worth survives";

  RespClient admin(port);
  long long relayed = -1;
  long long lapped = -1;
  ASSERT_TRUE(eventually([&] {
    const auto info = admin.call({"INFO", "relay"});
    if (!info || info->type != '$') return false;
    relayed = info_field(info->str, "relayed");
    lapped = info_field(info->str, "lapped");
    return relayed == static_cast<long long>(got.size());
  })) << "relayed "
      << relayed;
  EXPECT_EQ(lapped, static_cast<long long>(kCount - got.size())) << "every overwritten message is counted";
  EXPECT_EQ(lapped, static_cast<long long>(got.front())) << "the first relayed message follows the lost ones";
}

TEST(RelayEndToEndTest, SigtermUnregistersAndExitsZeroSayingWhy) {
  TempDir dir;
  const std::string path = dir.file("idle.ring");
  auto ring = BroadcastRing::create(path, 64, {.claim_producer = false});
  ASSERT_TRUE(ring);
  ChildProcess relay;
  ASSERT_NE(start_relay(relay, {"--ring", path + "=idle", "--listen", "127.0.0.1:0"}), 0u);
  ASSERT_TRUE(relay.read_stderr_until("waiting for one", deadline_in(20s))) << relay.stderr_text();
  EXPECT_EQ(ring->active_consumer_count(), 1u);
  const auto status = relay.stop(SIGTERM);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  EXPECT_NE(relay.stderr_text().find("stopping: received SIGTERM"), std::string::npos) << relay.stderr_text();
  EXPECT_NE(relay.stderr_text().find("unregistered consumer 0"), std::string::npos) << relay.stderr_text();
  EXPECT_EQ(ring->active_consumer_count(), 0u);
}

// docs/relay.md: exit status 3 when a ring fails at run time (a corrupt slot:
// layout_mismatch), after stopping the others. Slot 1 is committed with a
// length no slot can hold before message 0 is pushed, so the relay reads it
// right after message 0: no waiting on a poll interval.
TEST(RelayEndToEndTest, CorruptSlotStopsTheRelayWithStatusThreeNamingTheSlot) {
  TempDir dir;
  const std::string path = dir.file("corrupt.ring");
  // One slot per message: on a ring that may hold longer messages the
  // producer's head stamp would overwrite the forged version below before
  // the relay reads it (docs/memory-ordering.md, "The head stamp").
  auto ring = BroadcastRing::create(path, 8, {.max_message = kMaxPayload});  // this handle is the live producer
  ASSERT_TRUE(ring);
  ChildProcess relay;
  ASSERT_NE(start_relay(relay, {"--ring", path + "=bad", "--listen", "127.0.0.1:0"}), 0u) << relay.stderr_text();
  ASSERT_TRUE(eventually([&] { return ring->active_consumer_count() == 1; }));

  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const off_t slot1 = static_cast<off_t>(layout::kHeaderBytes + kSlotBytes);
  const std::uint64_t length_word = 0xFFFFFFFF;  // length 4 GiB - 1, head bytes 0
  const std::uint64_t committed_version = 2 * 1 + 2;
  ASSERT_EQ(::pwrite(fd, &length_word, 8, slot1 + 8), 8);
  ASSERT_EQ(::pwrite(fd, &committed_version, 8, slot1), 8);
  ::close(fd);
  alignas(8) std::byte msg[kPayload];
  encode(0, msg);
  ASSERT_EQ(ring->try_push(std::span<const std::byte>(msg, kPayload)), Errc::ok);

  const auto status = relay.wait_exit(deadline_in(20s));
  ASSERT_TRUE(status) << "the relay did not stop: " << relay.stderr_text();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 3) << relay.stderr_text();
  const std::string err = relay.stderr_text();
  EXPECT_NE(err.find("slot 1 is corrupt (layout_mismatch)"), std::string::npos) << err;
  EXPECT_NE(err.find("stopping: a ring failed"), std::string::npos) << err;
  EXPECT_NE(err.find("exit status 3"), std::string::npos) << err;
  EXPECT_EQ(ring->active_consumer_count(), 0u) << "the relay unregisters its consumer on the way out";
}

TEST(RelayEndToEndTest, UsageErrorsExitTwo) {
  ChildProcess relay = ChildProcess::spawn({RELAY_EXE, "--ring", "/dev/shm/x.ring"}, {.err = test::Stream::kPipe});
  const auto status = relay.wait_exit(deadline_in(20s));
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << relay.stderr_text();
  EXPECT_NE(relay.stderr_text().find("expected PATH=CHANNEL"), std::string::npos) << relay.stderr_text();
  ChildProcess bad_from =
      ChildProcess::spawn({RELAY_EXE, "--ring", "/dev/shm/x.ring=x", "--from", "middle"}, {.err = test::Stream::kPipe});
  const auto from_status = bad_from.wait_exit(deadline_in(20s));
  ASSERT_TRUE(from_status);
  EXPECT_TRUE(WIFEXITED(*from_status) && WEXITSTATUS(*from_status) == 2) << bad_from.stderr_text();
  EXPECT_NE(bad_from.stderr_text().find("--from"), std::string::npos) << bad_from.stderr_text();
  // Settings checked by relay::validate: refused before anything connects.
  const std::vector<std::vector<std::string>> refused = {
      {"--nats", "nats://127.0.0.1:1", "--jetstream", "md.ticks"},
      {"--nats", "nats://127.0.0.1:1", "--jetstream", "MD", "--jetstream-max-pending", "0"},
      {"--nats-in", "md=/dev/shm/y.ring"},
      // Credit window settings where no window is kept.
      {"--nats", "nats://127.0.0.1:1", "--nats-at-most-once", "--nats-window", "100"},
      {"--nats", "nats://127.0.0.1:1", "--jetstream", "MD", "--nats-ack-timeout", "2s"},
  };
  for (const auto& flags : refused) {
    std::vector<std::string> argv{RELAY_EXE, "--ring", "/dev/shm/x.ring=x"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    ChildProcess c = ChildProcess::spawn(argv, {.err = test::Stream::kPipe});
    const auto st = c.wait_exit(deadline_in(20s));
    ASSERT_TRUE(st);
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 2) << flags.back() << ": " << c.stderr_text();
    EXPECT_NE(c.stderr_text().find("--"), std::string::npos) << "names the setting: " << c.stderr_text();
  }
}

}  // namespace
}  // namespace ringcast::relay
