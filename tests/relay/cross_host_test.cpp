// Ring -> NATS -> ring across two routed nats-server nodes, through the
// executables a user runs (issue 29; docs/scale-out.md, "Credit window"):
//  * default flags: every message of `seq 1 N | ringcast pub a.ring` reaches
//    `ringcast sub b.ring`, in order, however slow ring B's reader is;
//  * core NATS chosen explicitly (--nats-at-most-once) with ring B's reader
//    stopped: the ingress loses messages, and ring B's upstream_lost (ringcast
//    info, the ingress's /metrics) counts exactly the messages that never
//    arrived, whatever their size.
// The message count is RINGCAST_RELAY_E2E_MESSAGES, else 1,000,000 (100,000
// under the sanitizers).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

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
using testing::NatsServer;
using testing::TempDir;

using testing::e2e_messages;

ChildProcess spawn(const char* exe, const std::vector<std::string>& args, test::Stream out = test::Stream::kPipe) {
  std::vector<std::string> argv{exe};
  argv.insert(argv.end(), args.begin(), args.end());
  return ChildProcess::spawn(argv, {.out = out, .err = test::Stream::kPipe});
}

// Runs `ringcast ARGS` to its end; its stdout, or nullopt on failure.
std::optional<std::string> cli(const std::vector<std::string>& args) {
  ChildProcess c = spawn(CLI_EXE, args);
  const auto status = c.wait_exit(deadline_in(60s));
  if (test::exit_code(status) != 0) return std::nullopt;
  return c.stdout_text();
}

// The port a relay prints for --metrics 127.0.0.1:0.
std::uint16_t metrics_port(ChildProcess& relay) {
  const std::string marker = "metrics on http://127.0.0.1:";
  if (!relay.read_stdout_until("/metrics", deadline_in(30s))) return 0;
  const std::string& out = relay.stdout_text();
  const auto at = out.find(marker);
  return at == std::string::npos
             ? 0
             : static_cast<std::uint16_t>(std::strtoul(out.c_str() + at + marker.size(), nullptr, 10));
}

// The value of the first sample of `family` at /metrics on `port`; -1 if absent.
double metric(std::uint16_t port, std::string_view family) {
  const int fd = testing::connect_loopback(port);
  if (fd < 0) return -1;
  std::string out;
  if (test::send_all(fd, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")) {
    (void)test::read_to_eof(fd, out, deadline_in(10s));
  }
  ::close(fd);
  for (std::size_t at = out.find(family); at != std::string::npos; at = out.find(family, at + 1)) {
    const std::size_t after = at + family.size();
    if ((at == 0 || out[at - 1] == '\n') && after < out.size() && (out[after] == '{' || out[after] == ' ')) {
      const auto sp = out.find(' ', out[after] == '{' ? out.find('}', after) : after);
      return std::strtod(out.c_str() + sp + 1, nullptr);
    }
  }
  return -1;
}

// Two nats-server nodes routed on loopback; the relay of host A publishes
// ring A to node A, the ingress of host B takes it from node B into ring B.
struct TwoHosts {
  TempDir dir;
  std::unique_ptr<NatsServer> a, b;
  ChildProcess relay_a, relay_b;
  std::uint16_t metrics_a = 0, metrics_b = 0;
  std::string ring_a, ring_b;
};

void start_two_hosts(TwoHosts& h, const std::vector<std::string>& relay_a_args,
                     const std::vector<std::string>& relay_b_args) {
  h.a = NatsServer::start({.cluster = true});
  ASSERT_TRUE(h.a);
  h.b = NatsServer::start({.cluster = true, .route_to = h.a->cluster_port()});
  ASSERT_TRUE(h.b);
  h.ring_a = h.dir.file("a.ring");
  h.ring_b = h.dir.file("b.ring");
  std::vector<std::string> a{"--ring", h.ring_a + "=feed", "--nats", h.a->url(), "--metrics", "127.0.0.1:0"};
  a.insert(a.end(), relay_a_args.begin(), relay_a_args.end());
  h.relay_a = spawn(RELAY_EXE, a);
  std::vector<std::string> b{"--nats-in", "feed=" + h.ring_b, "--nats", h.b->url(), "--metrics", "127.0.0.1:0"};
  b.insert(b.end(), relay_b_args.begin(), relay_b_args.end());
  h.relay_b = spawn(RELAY_EXE, b);
  h.metrics_a = metrics_port(h.relay_a);
  h.metrics_b = metrics_port(h.relay_b);
  ASSERT_NE(h.metrics_a, 0) << h.relay_a.stderr_text();
  ASSERT_NE(h.metrics_b, 0) << h.relay_b.stderr_text();
  ASSERT_TRUE(h.relay_b.read_stdout_until("subscribed to NATS", deadline_in(30s))) << h.relay_b.stderr_text();
}

// Publishes one `probe` line into ring A (`ringcast pub`) until `arrived`:
// the ingress's interest has crossed the route, and the ingress has its
// baseline for ring A's stream.
template <class Arrived>
bool wait_for_interest(const TwoHosts& h, Arrived&& arrived) {
  const auto d = deadline_in(30s);
  while (testing::ms_left(d) > 0) {
    ChildProcess pub =
        ChildProcess::spawn({"/bin/sh", "-c", std::string("echo probe | ") + CLI_EXE + " pub " + h.ring_a},
                            {.out = test::Stream::kDiscard, .err = test::Stream::kPipe});
    if (test::exit_code(pub.wait_exit(deadline_in(30s))) != 0) return false;
    if (eventually([&] { return arrived(); }, 200ms)) return true;
  }
  return false;
}

// The user's commands of issue 29, default flags, N messages: every line
// arrives at ring B's consumer, in order, and nothing is counted lost.
TEST(CrossHostTest, UsersCommandsOnTwoRoutedNodesDeliverEveryMessageInOrder) {
  const std::uint64_t n = e2e_messages();
  TwoHosts h;
  h.ring_a = h.dir.file("a.ring");
  ASSERT_TRUE(cli({"create", h.ring_a, "--capacity", "4096"}));
  ASSERT_NO_FATAL_FAILURE(start_two_hosts(h, {}, {}));
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(h.ring_b); }, 30s));
  ChildProcess sub = spawn(CLI_EXE, {"sub", h.ring_b});
  ASSERT_TRUE(sub.read_stderr_until("subscribed to", deadline_in(30s))) << sub.stderr_text();

  // Lines read so far from `ringcast sub`, past the probes.
  std::uint64_t next = 1, bad = 0, probes = 0;
  std::string first_bad;
  const auto consume = [&](Deadline d) {
    while (auto line = sub.read_line(d)) {
      if (*line == "probe") {
        ++probes;
        continue;
      }
      if (*line != std::to_string(next)) {
        if (bad++ == 0) first_bad = "expected " + std::to_string(next) + ", got " + *line;
      }
      ++next;
      if (next > n) return;
    }
  };
  ASSERT_TRUE(wait_for_interest(h, [&] {
    consume(deadline_in(1ms));
    return probes > 0;
  })) << h.relay_b.stderr_text();

  ChildProcess pub =
      ChildProcess::spawn({"/bin/sh", "-c", "seq 1 " + std::to_string(n) + " | " + CLI_EXE + " pub " + h.ring_a},
                          {.out = test::Stream::kDiscard, .err = test::Stream::kPipe});
  consume(deadline_in(300s));
  EXPECT_EQ(test::exit_code(pub.wait_exit(deadline_in(60s))), 0) << pub.stderr_text();
  EXPECT_EQ(next - 1, n) << "ring B's consumer got " << next - 1 << " of " << n << "; ingress:\n"
                         << h.relay_b.stderr_text();
  EXPECT_EQ(bad, 0u) << first_bad;
  // Nothing lost anywhere, and the window was in use.
  EXPECT_EQ(metric(h.metrics_b, "ringcast_nats_in_lost_total"), 0);
  EXPECT_EQ(metric(h.metrics_b, "ringcast_nats_in_dropped_total"), 0);
  EXPECT_EQ(metric(h.metrics_b, "ringcast_nats_in_upstream_lost"), 0);
  EXPECT_GT(metric(h.metrics_b, "ringcast_nats_in_acks_total"), 0);
  EXPECT_EQ(metric(h.metrics_a, "ringcast_relay_window_ingresses"), 1);
  const auto info = cli({"info", h.ring_b});
  ASSERT_TRUE(info);
  EXPECT_EQ(info->find("upstream"), std::string::npos) << *info;
  std::cout << "window waits at the relay: " << metric(h.metrics_a, "ringcast_relay_window_waits_total")
            << ", probes: " << metric(h.metrics_a, "ringcast_relay_window_probes_total") << "\n";
  EXPECT_EQ(metric(h.metrics_a, "ringcast_relay_window_overflow_total"), 0);
  EXPECT_EQ(sub.stop(SIGTERM), std::optional<int>(0));
  EXPECT_EQ(h.relay_b.stop(SIGTERM), std::optional<int>(0)) << h.relay_b.stderr_text();
  // The stopped ingress said it left: relay A no longer waits for it.
  EXPECT_TRUE(eventually([&] { return metric(h.metrics_a, "ringcast_relay_window_left_total") == 1; }, 30s));
  EXPECT_EQ(metric(h.metrics_a, "ringcast_relay_window_ingresses"), 0);
  EXPECT_EQ(h.relay_a.stop(SIGTERM), std::optional<int>(0)) << h.relay_a.stderr_text();
}

// 100-byte payloads: two ring slots each, so positions and messages differ.
constexpr std::size_t kLongPayload = 100;
void encode(std::uint64_t seq, std::byte* out) {
  std::memset(out, '.', kLongPayload);
  std::memcpy(out, &seq, 8);
}

// Core NATS chosen explicitly, ring B's only reader stopped: the ingress
// blocks on the full ring, libnats drops beyond its pending limit, and every
// lost message is counted exactly, in messages, in ring B's header.
TEST(CrossHostTest, AtMostOnceWithAStoppedIngressCountsEveryLostMessageExactly) {
  const std::uint64_t n = testing::scaled(20'000, 5'000);
  TwoHosts h;
  h.ring_a = h.dir.file("a.ring");
  h.ring_b = h.dir.file("b.ring");
  auto a = BroadcastRing::create(h.ring_a, 4096, {.wakeups = true});
  ASSERT_TRUE(a) << a.error().message();
  // Ring B exists before its ingress: our consumer is registered from the start.
  auto b = BroadcastRing::create(h.ring_b, 1024, {.wakeups = true, .claim_producer = false});
  ASSERT_TRUE(b) << b.error().message();
  auto id = b->register_consumer();
  ASSERT_TRUE(id);
  ASSERT_NO_FATAL_FAILURE(start_two_hosts(h, {"--nats-at-most-once"}, {"--nats-in-pending-msgs", "500"}));
  ASSERT_TRUE(eventually([&] { return a->active_consumer_count() == 1; }, 30s)) << h.relay_a.stderr_text();

  std::vector<std::byte> buf(65536);
  std::uint64_t received = 0, last = 0, disorder = 0;
  // The loss markers the consumer passed up to its last message, and the
  // messages whose gap before them differs from what the markers said.
  std::uint64_t seen_at_last = 0, misattributed = 0;
  bool got_any = false;
  // Reads what ring B has; a probe (a short message) is skipped.
  const auto drain = [&] {
    for (;;) {
      const RecvResult r = b->try_recv(*id, buf);
      if (r.status != Errc::ok) return;
      if (r.length != kLongPayload) continue;
      std::uint64_t seq = 0;
      std::memcpy(&seq, buf.data(), 8);
      if (got_any && seq <= last) ++disorder;
      const std::uint64_t seen = b->upstream_lost_seen(*id);
      if (got_any && seq > last && seen - seen_at_last != seq - last - 1) ++misattributed;
      seen_at_last = seen;
      got_any = true;
      last = seq;
      ++received;
    }
  };
  // Interest across the route: probes (short messages) until one arrives.
  const auto d = deadline_in(30s);
  bool through = false;
  std::uint64_t probes = 0;
  while (!through && testing::ms_left(d) > 0) {
    const std::byte probe[1] = {std::byte{'p'}};
    ASSERT_EQ(a->push_wait(probe, 10s), Errc::ok);
    ++probes;
    through = eventually(
        [&] {
          const RecvResult r = b->try_recv(*id, buf);
          return r.status == Errc::ok;
        },
        200ms);
  }
  ASSERT_TRUE(through) << h.relay_b.stderr_text();
  drain();  // probes still on their way are read and skipped below as well

  // Ring B's reader stops: the ingress fills ring B, then libnats' pending
  // queue (500), then drops.
  std::byte msg[kLongPayload];
  for (std::uint64_t i = 0; i < n; ++i) {
    encode(i, msg);
    ASSERT_EQ(a->push_wait(std::span<const std::byte>(msg, kLongPayload), 30s), Errc::ok);
  }
  // The relay has published every message (the probes and the n), and all of
  // it has reached the ingress: handed over, pending, or dropped. Until both
  // hold more is on its way, and a reader resumed early would meet it at the
  // full pending queue and could see the marker below dropped with it.
  ASSERT_TRUE(eventually(
      [&] {
        const double published = metric(h.metrics_a, "ringcast_relay_ring_nats_published_total");
        const double seen = metric(h.metrics_b, "ringcast_nats_in_received_total") +
                            metric(h.metrics_b, "ringcast_nats_in_pending_messages") +
                            metric(h.metrics_b, "ringcast_nats_in_dropped_total");
        return published >= static_cast<double>(probes + n) && seen >= published;
      },
      60s))
      << "published " << metric(h.metrics_a, "ringcast_relay_ring_nats_published_total") << " of " << probes + n << "\n"
      << h.relay_b.stderr_text();
  EXPECT_GT(metric(h.metrics_b, "ringcast_nats_in_dropped_total"), 0);
  // The reader resumes and takes all the ingress still holds; then one more
  // message (n) shows the drops at the tail as a gap.
  ASSERT_TRUE(eventually(
      [&] {
        drain();
        return b->lag(*id) == 0 && metric(h.metrics_b, "ringcast_nats_in_pending_messages") == 0;
      },
      60s));
  encode(n, msg);
  ASSERT_EQ(a->push_wait(std::span<const std::byte>(msg, kLongPayload), 30s), Errc::ok);
  ASSERT_TRUE(eventually(
      [&] {
        drain();
        return got_any && last == n;
      },
      60s))
      << "last " << last << ", received " << received << "\n"
      << h.relay_a.stderr_text() << h.relay_b.stderr_text();
  ASSERT_EQ(last, n) << "the marker never arrived";
  EXPECT_EQ(disorder, 0u);
  const std::uint64_t lost = n + 1 - received;
  ASSERT_GT(lost, 0u);
  const RingStatus st = b->status();
  EXPECT_EQ(st.upstream_lost, lost) << "received " << received << " of " << n + 1;
  // The consumer's own view: the markers in ring B put each loss just before
  // the message that followed it.
  EXPECT_EQ(b->upstream_lost_seen(*id), lost);
  EXPECT_EQ(misattributed, 0u);
  EXPECT_GE(st.upstream_gaps, 1u);
  EXPECT_EQ(metric(h.metrics_b, "ringcast_nats_in_upstream_lost"), static_cast<double>(lost));
  EXPECT_EQ(metric(h.metrics_b, "ringcast_nats_in_lost_total"), static_cast<double>(lost));
  EXPECT_EQ(metric(h.metrics_b, "ringcast_nats_in_dropped_total"), static_cast<double>(lost));
  const auto info = cli({"info", h.ring_b});
  ASSERT_TRUE(info);
  EXPECT_NE(info->find("upstream    " + std::to_string(lost) + " lost"), std::string::npos) << *info;
  (void)b->unregister_consumer(*id);
  EXPECT_EQ(h.relay_b.stop(SIGTERM), std::optional<int>(0)) << h.relay_b.stderr_text();
  EXPECT_EQ(h.relay_a.stop(SIGTERM), std::optional<int>(0)) << h.relay_a.stderr_text();
}

// Default mode, ring B's only reader stopped: the window fills, the relay
// stops taking from ring A and ring A's producer meets a full ring; when the
// reader resumes every message arrives, in order, none counted lost. Then the
// ingress is killed while the window is full again: the relay stops waiting
// for it after --nats-ack-timeout-ms and ring A's producer goes on.
TEST(CrossHostTest, AStoppedReaderOnRingBHoldsRingAsProducerAndAKilledIngressReleasesIt) {
  const std::uint64_t n = testing::scaled(200'000, 20'000);
  TwoHosts h;
  h.ring_a = h.dir.file("a.ring");
  h.ring_b = h.dir.file("b.ring");
  auto a = BroadcastRing::create(h.ring_a, 1024, {.wakeups = true});
  ASSERT_TRUE(a) << a.error().message();
  auto b = BroadcastRing::create(h.ring_b, 1024, {.wakeups = true, .claim_producer = false});
  ASSERT_TRUE(b) << b.error().message();
  auto id = b->register_consumer();
  ASSERT_TRUE(id);
  // A window smaller than what the rings hold, so that it, not the rings, holds
  // the producer; a short ack timeout for the second half.
  ASSERT_NO_FATAL_FAILURE(start_two_hosts(h, {"--nats-window", "4096", "--nats-ack-timeout-ms", "1000"}, {}));
  ASSERT_TRUE(eventually([&] { return a->active_consumer_count() == 1; }, 30s)) << h.relay_a.stderr_text();

  alignas(8) std::byte buf[kMaxPayload];
  std::uint64_t next = 0, disorder = 0;
  // Reads what ring B has: 8-byte numbered messages; probes (1 byte) skipped.
  const auto drain = [&] {
    for (;;) {
      const RecvResult r = b->try_recv(*id, buf);
      if (r.status != Errc::ok) return;
      if (r.length != 8) continue;
      std::uint64_t seq = 0;
      std::memcpy(&seq, buf, 8);
      if (seq != next) ++disorder;
      next = seq + 1;
    }
  };
  const auto d = deadline_in(30s);
  bool through = false;
  while (!through && testing::ms_left(d) > 0) {
    const std::byte probe[1] = {std::byte{'p'}};
    ASSERT_EQ(a->push_wait(probe, 10s), Errc::ok);
    through = eventually([&] { return b->try_recv(*id, buf).status == Errc::ok; }, 200ms);
  }
  ASSERT_TRUE(through) << h.relay_b.stderr_text();
  // Wait for the ingress's first ack: from then on the relay holds to the window.
  ASSERT_TRUE(eventually([&] { return metric(h.metrics_a, "ringcast_relay_window_ingresses") == 1; }, 30s));

  // The producer pushes with try_push, counting `full` answers.
  std::atomic<std::uint64_t> pushed{0}, fulls{0};
  std::atomic<bool> stop_pushing{false};
  std::thread producer([&] {
    for (std::uint64_t i = 0; i < n && !stop_pushing.load(std::memory_order_acquire); ++i) {
      const std::span<const std::byte> p(reinterpret_cast<const std::byte*>(&i), 8);
      while (a->try_push(p) == Errc::full) {
        fulls.fetch_add(1, std::memory_order_relaxed);
        if (stop_pushing.load(std::memory_order_acquire)) return;
        std::this_thread::sleep_for(100us);
      }
      pushed.fetch_add(1, std::memory_order_release);
    }
  });
  // Ring B's reader is stopped: ring B fills (1024), the window (4096) fills,
  // ring A fills (1024); the producer is held, far from n.
  ASSERT_TRUE(eventually(
      [&] {
        const std::uint64_t before = pushed.load(std::memory_order_acquire);
        std::this_thread::sleep_for(200ms);
        return fulls.load(std::memory_order_relaxed) > 0 && pushed.load(std::memory_order_acquire) == before;
      },
      60s));
  EXPECT_LT(pushed.load(std::memory_order_acquire), n);
  EXPECT_GT(metric(h.metrics_a, "ringcast_relay_window_waits_total"), 0);
  EXPECT_EQ(metric(h.metrics_b, "ringcast_nats_in_dropped_total"), 0);
  // The reader resumes: everything arrives, in order.
  const auto until = deadline_in(120s);
  while (next < n && testing::ms_left(until) > 0) {
    drain();
    std::this_thread::sleep_for(1ms);
  }
  producer.join();
  EXPECT_EQ(next, n);
  EXPECT_EQ(disorder, 0u);
  EXPECT_EQ(b->status().upstream_lost, 0u);
  EXPECT_EQ(metric(h.metrics_b, "ringcast_nats_in_lost_total"), 0);

  // The window full again, then the ingress killed: after the ack timeout
  // the relay goes on without it, and so does ring A's producer.
  pushed.store(0, std::memory_order_release);
  std::thread again([&] {
    for (std::uint64_t i = 0; i < n && !stop_pushing.load(std::memory_order_acquire); ++i) {
      const std::span<const std::byte> p(reinterpret_cast<const std::byte*>(&i), 8);
      while (a->try_push(p) == Errc::full) {
        if (stop_pushing.load(std::memory_order_acquire)) return;
        std::this_thread::sleep_for(100us);
      }
      pushed.fetch_add(1, std::memory_order_release);
    }
  });
  ASSERT_TRUE(eventually(
      [&] {
        const std::uint64_t before = pushed.load(std::memory_order_acquire);
        std::this_thread::sleep_for(200ms);
        return pushed.load(std::memory_order_acquire) == before;
      },
      60s));
  EXPECT_LT(pushed.load(std::memory_order_acquire), n);
  ASSERT_TRUE(h.relay_b.stop(SIGKILL));
  const bool released = eventually([&] { return pushed.load(std::memory_order_acquire) == n; }, 60s);
  stop_pushing.store(true, std::memory_order_release);
  again.join();
  EXPECT_TRUE(released) << "ring A's producer still held after the ingress died; relay A:\n" << h.relay_a.stderr_text();
  EXPECT_EQ(metric(h.metrics_a, "ringcast_relay_window_expired_total"), 1);
  EXPECT_EQ(metric(h.metrics_a, "ringcast_relay_window_ingresses"), 0);
  EXPECT_TRUE(h.relay_a.read_stderr_until("no longer waiting for it", deadline_in(10s))) << h.relay_a.stderr_text();
  (void)b->unregister_consumer(*id);
  EXPECT_EQ(h.relay_a.stop(SIGTERM), std::optional<int>(0)) << h.relay_a.stderr_text();
}

// Default mode, both NATS nodes killed while the relay publishes (killing
// one is no outage: each client fails over to the other node, which it
// learnt from the cluster): no acks come, the window fills and the relay
// probes. When the nodes are back, whatever the outage cost (messages the
// relay's reconnect buffer sent before the ingress had subscribed again) is
// counted exactly, in messages, from the probe or the next message, and
// everything else arrives.
TEST(CrossHostTest, BothNodesRestartedUnderTheWindowLossIsCountedExactly) {
  const std::uint64_t n = testing::scaled(40'000, 10'000);
  TwoHosts h;
  h.ring_a = h.dir.file("a.ring");
  h.ring_b = h.dir.file("b.ring");
  auto a = BroadcastRing::create(h.ring_a, 1024, {.wakeups = true});
  ASSERT_TRUE(a) << a.error().message();
  auto b = BroadcastRing::create(h.ring_b, 65536, {.wakeups = true, .claim_producer = false});
  ASSERT_TRUE(b) << b.error().message();
  auto id = b->register_consumer();
  ASSERT_TRUE(id);
  // A long ack timeout: the relay must wait for this ingress, not forget it.
  ASSERT_NO_FATAL_FAILURE(start_two_hosts(h, {"--nats-window", "1000", "--nats-ack-timeout-ms", "600000"},
                                          {"--nats-reconnect-wait-ms", "100"}));
  ASSERT_TRUE(eventually([&] { return a->active_consumer_count() == 1; }, 30s)) << h.relay_a.stderr_text();
  alignas(8) std::byte buf[kMaxPayload];
  std::uint64_t received = 0, last = 0, disorder = 0;
  bool any = false;
  const auto drain = [&] {
    for (;;) {
      const RecvResult r = b->try_recv(*id, buf);
      if (r.status != Errc::ok) return;
      if (r.length != 8) continue;  // a probe of the test
      std::uint64_t seq = 0;
      std::memcpy(&seq, buf, 8);
      if (any && seq <= last) ++disorder;
      any = true;
      last = seq;
      ++received;
    }
  };
  const auto d = deadline_in(30s);
  bool through = false;
  while (!through && testing::ms_left(d) > 0) {
    const std::byte probe[1] = {std::byte{'p'}};
    ASSERT_EQ(a->push_wait(probe, 10s), Errc::ok);
    through = eventually([&] { return b->try_recv(*id, buf).status == Errc::ok; }, 200ms);
  }
  ASSERT_TRUE(through) << h.relay_b.stderr_text();
  ASSERT_TRUE(eventually([&] { return metric(h.metrics_a, "ringcast_relay_window_ingresses") == 1; }, 30s));
  const auto push = [&](std::uint64_t i) {
    const std::span<const std::byte> p(reinterpret_cast<const std::byte*>(&i), 8);
    return a->push_wait(p, 120s) == Errc::ok;
  };
  // The first half arrives.
  for (std::uint64_t i = 0; i < n / 2; ++i) ASSERT_TRUE(push(i));
  ASSERT_TRUE(eventually(
      [&] {
        drain();
        return received == n / 2;
      },
      60s));
  // Both nodes die; the relay publishes into its reconnect buffer until the
  // window is full, then probes.
  const std::uint16_t port_a = h.a->port(), cluster_a = h.a->cluster_port();
  const std::uint16_t port_b = h.b->port(), cluster_b = h.b->cluster_port();
  h.b->kill();
  h.a->kill();
  std::thread producer([&] {
    for (std::uint64_t i = n / 2; i < n; ++i) {
      if (!push(i)) return;
    }
  });
  const bool probing = eventually([&] { return metric(h.metrics_a, "ringcast_relay_window_probes_total") > 0; }, 60s);
  // The nodes come back on their ports; the clients reconnect.
  h.a = NatsServer::start({.port = port_a, .cluster = true, .cluster_port = cluster_a});
  h.b = NatsServer::start({.port = port_b, .cluster = true, .route_to = cluster_a, .cluster_port = cluster_b});
  const auto until = deadline_in(120s);
  while (!(any && last == n - 1) && testing::ms_left(until) > 0) {
    drain();
    std::this_thread::sleep_for(1ms);
  }
  producer.join();
  ASSERT_TRUE(probing) << "the relay never probed; relay A:\n" << h.relay_a.stderr_text();
  ASSERT_TRUE(h.a && h.b);
  ASSERT_EQ(last, n - 1) << "the last message never arrived; relay A:\n" << h.relay_a.stderr_text();
  EXPECT_EQ(disorder, 0u);
  const std::uint64_t lost = n - received;
  EXPECT_EQ(b->status().upstream_lost, lost) << "received " << received << " of " << n;
  EXPECT_EQ(metric(h.metrics_b, "ringcast_nats_in_lost_total"), static_cast<double>(lost));
  EXPECT_EQ(metric(h.metrics_a, "ringcast_relay_window_expired_total"), 0);
  std::cout << "lost in the outage: " << lost << " of " << n
            << ", probes received by the ingress: " << metric(h.metrics_b, "ringcast_nats_in_probes_total") << "\n";
  (void)b->unregister_consumer(*id);
  EXPECT_EQ(h.relay_b.stop(SIGTERM), std::optional<int>(0)) << h.relay_b.stderr_text();
  EXPECT_EQ(h.relay_a.stop(SIGTERM), std::optional<int>(0)) << h.relay_a.stderr_text();
}

}  // namespace
}  // namespace ringcast::relay
