// JetStream end to end through ringcast-relay executables (docs/scale-out.md,
// "JetStream"): ring on "host A" -> relay --jetstream -> nats-server -js ->
// relay --nats-in --jetstream (durable) -> ring on "host B" -> a consumer. The
// ingress is killed with SIGKILL mid-stream and restarted: every message
// still reaches host B's consumer at least once; the duplicates are counted
// and stay within what the ingress reports it may redeliver.
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "relay_test_support.hpp"
#include "resp_client.hpp"
#include "ringcast/broadcast_ring.hpp"

namespace ringcast::relay {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::deadline_in;
using testing::eventually;
using testing::NatsServer;
using testing::TempDir;

// 52-byte payload: the sequence number and its complement, then padding.
void encode(std::uint64_t seq, std::byte* out) {
  const std::uint64_t inv = ~seq;
  std::memset(out, '.', kMaxPayload);
  std::memcpy(out, &seq, 8);
  std::memcpy(out + 8, &inv, 8);
}
bool decode(std::span<const std::byte> p, std::uint64_t& seq) {
  if (p.size() != kMaxPayload) return false;
  std::uint64_t inv = 0;
  std::memcpy(&seq, p.data(), 8);
  std::memcpy(&inv, p.data() + 8, 8);
  return inv == ~seq;
}

ChildProcess spawn_relay(const std::vector<std::string>& args) {
  std::vector<std::string> argv{RELAY_EXE};
  argv.insert(argv.end(), args.begin(), args.end());
  return ChildProcess::spawn(argv, {.err = test::Stream::kPipe});
}

// "Host A" of both tests: a nats-server with JetStream, a ring, and the relay
// that publishes the ring on SUBJECT into the stream (start_host_a).
struct HostA {
  TempDir dir;
  TempDir store;
  std::unique_ptr<NatsServer> server;
  std::optional<BroadcastRing> producer;
  ChildProcess relay;
};

void start_host_a(HostA& a, const std::string& subject, const std::vector<std::string>& jetstream_args) {
  a.server = NatsServer::start({.jetstream_dir = a.store.path()});
  ASSERT_TRUE(a.server);
  const std::string ring = a.dir.file("a.ring");
  auto producer = BroadcastRing::create(ring, 1 << 14, {.wakeups = true});
  ASSERT_TRUE(producer) << producer.error().message();
  a.producer.emplace(std::move(*producer));
  std::vector<std::string> args{"--ring", ring + "=" + subject, "--nats", a.server->url()};
  args.insert(args.end(), jetstream_args.begin(), jetstream_args.end());
  a.relay = spawn_relay(args);
  ASSERT_TRUE(eventually([&] { return a.producer->active_consumer_count() == 1; }, 30s)) << a.relay.stderr_text();
}

TEST(RelayJetStreamEndToEndTest, KilledIngressRestartsAndEveryMessageArrivesAtLeastOnce) {
  const std::uint64_t n = testing::scaled(200'000, 20'000);
  HostA host_a;
  ASSERT_NO_FATAL_FAILURE(start_host_a(host_a, "e2e.ticks", {"--jetstream", "E2E", "--stream-max-age", "1h"}));
  TempDir& dir = host_a.dir;
  NatsServer* server = host_a.server.get();
  BroadcastRing* producer = &*host_a.producer;
  ChildProcess& relay_a = host_a.relay;

  // Host B: its ring, with our consumer registered before anything arrives,
  // and the ingress relay, which becomes the ring's producer.
  const std::string ring_b = dir.file("b.ring");
  auto b = BroadcastRing::create(ring_b, 1 << 14, {.wakeups = true, .claim_producer = false});
  ASSERT_TRUE(b) << b.error().message();
  auto id = b->register_consumer();
  ASSERT_TRUE(id);
  const std::vector<std::string> ingress_args{
      "--nats", server->url(),         "--nats-in", "e2e.ticks=" + ring_b,  "--jetstream",
      "E2E",    "--jetstream-durable", "host-b",    "--jetstream-ack-wait", "2s"};
  ChildProcess ingress = spawn_relay(ingress_args);
  ASSERT_TRUE(ingress.read_stderr_line_with("resumes at stream sequence 1", deadline_in(30s))) << ingress.stderr_text();

  // The producer pushes everything; the ring's consumer on host B counts.
  std::thread push([&] {
    alignas(8) std::byte buf[kMaxPayload];
    for (std::uint64_t i = 0; i < n; ++i) {
      encode(i, buf);
      if (producer->push_wait(std::span<const std::byte>(buf, kMaxPayload), {60s, IdleStrategy::kSpinThenBlock}) !=
          Errc::ok) {
        return;
      }
    }
  });
  std::vector<std::uint8_t> seen(n, 0);
  std::uint64_t distinct = 0, duplicates = 0, bad = 0;
  bool killed = false;
  std::string restart_line;
  alignas(8) std::byte buf[kMaxPayload];
  const auto d = deadline_in(240s);
  while (distinct < n && testing::ms_left(d) > 0) {
    const RecvResult r = b->recv_wait(*id, buf, {100ms, IdleStrategy::kSpinThenBlock});
    if (r.status == Errc::ok) {
      std::uint64_t seq = 0;
      if (!decode(std::span<const std::byte>(buf, r.length), seq) || seq >= n) {
        ++bad;
      } else if (seen[seq]++ == 0) {
        ++distinct;
      } else {
        ++duplicates;
      }
    } else {
      ASSERT_TRUE(r.status == Errc::timed_out || r.status == Errc::empty || r.status == Errc::producer_dead ||
                  r.status == Errc::stalled)
          << to_string(r.status);
    }
    if (!killed && distinct >= n / 3) {
      // Mid-stream: the ingress dies without unregistering, acking or closing.
      ASSERT_TRUE(ingress.stop(SIGKILL));
      killed = true;
      ingress = spawn_relay(ingress_args);
      auto line = ingress.read_stderr_line_with("resumes at stream sequence", deadline_in(30s));
      ASSERT_TRUE(line) << ingress.stderr_text();
      restart_line = *line;
    }
  }
  push.join();
  EXPECT_TRUE(killed);
  EXPECT_EQ(bad, 0u);
  ASSERT_EQ(distinct, n) << "missing messages; ingress: " << ingress.stderr_text();
  // Duplicates only from the window the restarted ingress announced.
  const auto at = restart_line.find("up to ");
  const std::uint64_t bound = at == std::string::npos ? 0 : std::strtoull(restart_line.c_str() + at + 6, nullptr, 10);
  EXPECT_LE(duplicates, bound) << restart_line;
  std::cout << fmt::format("{} messages, {} duplicates at host B after the SIGKILL (bound {}): {}\n", n, duplicates,
                           bound, restart_line);
  (void)b->unregister_consumer(*id);
  EXPECT_EQ(ingress.stop(SIGTERM), std::optional<int>(0)) << ingress.stderr_text();
  EXPECT_EQ(relay_a.stop(SIGTERM), std::optional<int>(0)) << relay_a.stderr_text();
  EXPECT_NE(relay_a.stderr_text().find("stopped"), std::string::npos);
}

#if defined(BROKER_EXE)
// The counter `key` of the first nats-in route in the broker's INFO nats-in,
// or -1 when the broker does not answer.
std::int64_t nats_in_counter(std::uint16_t port, std::string_view key) {
  test::RespClient c(port);
  if (!c.ok()) return -1;
  auto r = c.call({"INFO", "nats-in"});
  if (!r) return -1;
  const std::string text(r->str);
  const auto at = text.find(fmt::format("{}=", key));
  return at == std::string::npos ? -1 : std::strtoll(text.c_str() + at + key.size() + 1, nullptr, 10);
}

std::uint16_t listening_port(const ChildProcess& broker) {
  const std::string& out = broker.stdout_text();
  const std::string marker = "listening on 127.0.0.1:";
  const auto at = out.find(marker);
  return at == std::string::npos
             ? 0
             : static_cast<std::uint16_t>(std::strtoul(out.c_str() + at + marker.size(), nullptr, 10));
}

// ringcast-broker --nats-in --jetstream: what the stream stored while the
// broker was down is taken when it starts; a broker killed with SIGKILL
// mid-stream is restarted, resumes after its ack floor and takes everything
// after it, repeating at most what it announces. Across the two runs every
// message reached Broker::publish at least once (INFO nats-in); a subscriber
// gets the live ones in order.
TEST(BrokerJetStreamEndToEndTest, StoredWhileDownArrivesAndAKilledBrokerResumesAfterItsAckFloor) {
  const std::uint64_t n = testing::scaled(30'000, 6'000);
  HostA host_a;
  ASSERT_NO_FATAL_FAILURE(start_host_a(host_a, "e2e.b", {"--jetstream", "E2EB"}));
  NatsServer* server = host_a.server.get();
  BroadcastRing* producer = &*host_a.producer;
  ChildProcess& relay_a = host_a.relay;
  alignas(8) std::byte buf[kMaxPayload];
  const auto push = [&](std::uint64_t from, std::uint64_t to) {
    for (std::uint64_t i = from; i < to; ++i) {
      encode(i, buf);
      ASSERT_EQ(producer->push_wait(std::span<const std::byte>(buf, kMaxPayload), {60s, IdleStrategy::kSpinThenBlock}),
                Errc::ok);
    }
  };
  ASSERT_NO_FATAL_FAILURE(push(0, n / 3));  // the broker is not running yet

  const std::vector<std::string> broker_args{BROKER_EXE,    "--port",
                                             "0",           "--nats",
                                             server->url(), "--nats-in",
                                             "e2e.b=ticks", "--jetstream",
                                             "E2EB",        "--jetstream-durable",
                                             "brk",         "--jetstream-ack-wait",
                                             "2s"};
  ChildProcess broker = ChildProcess::spawn(broker_args, {.err = test::Stream::kPipe});
  ASSERT_TRUE(broker.read_stdout_until("into channel ticks\n", deadline_in(30s))) << broker.stderr_text();
  EXPECT_NE(broker.stdout_text().find("(JetStream stream E2EB)"), std::string::npos) << broker.stdout_text();
  std::uint16_t port = listening_port(broker);
  ASSERT_NE(port, 0) << broker.stdout_text();
  ASSERT_TRUE(eventually([&] { return nats_in_counter(port, "received") >= static_cast<std::int64_t>(n / 3); }, 60s))
      << broker.stderr_text();

  // Live: a subscriber gets the next third in order; the broker is killed
  // while the last third is still being published.
  test::RespClient sub(port);
  ASSERT_TRUE(sub.subscribe("ticks"));
  ASSERT_NO_FATAL_FAILURE(push(n / 3, 2 * n / 3));
  for (std::uint64_t i = n / 3; i < 2 * n / 3; ++i) {
    auto r = sub.next(deadline_in(30s));
    ASSERT_TRUE(r && r->is_message("ticks")) << "waiting for " << i;
    std::uint64_t seq = 0;
    ASSERT_TRUE(decode(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(r->elems[2].str.data()), r->elems[2].str.size()),
        seq));
    ASSERT_EQ(seq, i);
  }
  std::thread rest([&] { push(2 * n / 3, n); });
  ASSERT_TRUE(eventually(
      [&] { return nats_in_counter(port, "received") >= static_cast<std::int64_t>(2 * n / 3 + n / 12); }, 60s));
  ASSERT_TRUE(broker.stop(SIGKILL));
  rest.join();

  broker = ChildProcess::spawn(broker_args, {.err = test::Stream::kPipe});
  auto line = broker.read_stderr_line_with("resumes at stream sequence", deadline_in(30s));
  ASSERT_TRUE(line) << broker.stderr_text();
  ASSERT_TRUE(broker.read_stdout_until("into channel ticks\n", deadline_in(30s))) << broker.stderr_text();
  port = listening_port(broker);
  const auto seq_at = line->find("sequence ");
  const std::uint64_t resumed = std::strtoull(line->c_str() + seq_at + 9, nullptr, 10);
  const auto up_to = line->find("up to ");
  const std::uint64_t bound = up_to == std::string::npos ? 0 : std::strtoull(line->c_str() + up_to + 6, nullptr, 10);
  // Nothing after the first run's acks is skipped (stream sequence k holds
  // ring message k - 1), and the restarted broker takes all of it.
  EXPECT_GE(resumed, 2 * n / 3 + 1) << *line;  // the live third was acked before the kill...
  EXPECT_LE(resumed, n + 1) << *line;
  ASSERT_TRUE(eventually(
      [&] { return nats_in_counter(port, "received") >= static_cast<std::int64_t>(n - (resumed - 1)); }, 60s))
      << broker.stderr_text();
  EXPECT_LE(static_cast<std::uint64_t>(nats_in_counter(port, "received")), n - (resumed - 1)) << "more than the rest";
  EXPECT_EQ(nats_in_counter(port, "gaps"), 0);
  std::cout << fmt::format("{} messages; the restarted broker resumed at stream sequence {} (repeats at most {})\n", n,
                           resumed, bound);
  EXPECT_EQ(broker.stop(SIGTERM), std::optional<int>(0)) << broker.stderr_text();
  EXPECT_EQ(relay_a.stop(SIGTERM), std::optional<int>(0)) << relay_a.stderr_text();
}
#endif

}  // namespace
}  // namespace ringcast::relay
