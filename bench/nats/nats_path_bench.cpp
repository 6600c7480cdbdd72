// ringcast-nats-bench: the cross-host path through core NATS, on loopback.
//
//   this process: producer -> ring A -> ringcast-relay (--ring, --nats node A)
//     -> nats-server A -> route -> nats-server B
//     -> ringcast-relay (--nats-in, --nats node B) -> ring B -> consumer thread (this process)
//
// Two nats-server processes form a cluster (routes on loopback, ports chosen
// by the servers); each "host" has its own ring directory. Every message is
// 52 bytes: the send time (CLOCK_MONOTONIC ns) and a sequence number, then
// filler. The consumer records end-to-end latency per message and counts the
// sequence numbers that never arrived (core NATS is at most once).
//
// Phases, each --repeat times:
//   max:   the producer pushes --messages as fast as ring A takes them (ring A
//          blocks, so the relay paces it); msgs/s = messages received / (last
//          receive - first send), with latency under that load.
//   paced: --paced-rate messages/s for --paced-seconds: latency well below
//          saturation.
// For the max phase it also prints each process's CPU time per million
// messages (/proc/<pid>/stat): on a shared, loaded host the wall-clock rate
// says little, while 1e6 / (CPU-seconds per million) of the busiest process is
// the rate that process could sustain on a core of its own.
// Not a test: nothing here is registered with ctest.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "histogram.hpp"
#include "relay_test_support.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "server_process.hpp"

namespace {

using namespace std::chrono_literals;
using ringcast::BroadcastRing;
using ringcast::Errc;
using ringcast::bench::LatencyHistogram;
using ringcast::relay::testing::ChildProcess;
using ringcast::relay::testing::NatsServer;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kProbe = UINT64_MAX;

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

// The first 16 of the 52 bytes each message carries; the rest is zero filler.
struct Payload {
  std::uint64_t sent_ns;
  std::uint64_t seq;
};
constexpr std::size_t kMessageBytes = 52;

// Reads ring B: latency per message, sequence gaps, probes.
class Consumer {
 public:
  explicit Consumer(BroadcastRing& ring) : ring_(ring) {
    auto id = ring_.register_consumer();
    if (!id) throw std::runtime_error("register on ring B: " + id.error().message());
    id_ = *id;
    thread_ = std::thread([this] { run(); });
  }
  ~Consumer() {
    stop_.store(true, std::memory_order_relaxed);  // relaxed: a flag polled by the loop
    thread_.join();
  }
  // Starts a new phase: counts and histogram from zero; `expected` is the
  // first sequence number of the phase.
  void reset(std::uint64_t expected) {
    std::lock_guard lock(mu_);
    hist_ = LatencyHistogram{};
    received_ = 0;
    lost_ = 0;
    next_ = expected;
    last_ns_ = 0;
  }
  struct Result {
    LatencyHistogram hist;
    std::uint64_t received = 0;
    std::uint64_t lost = 0;
    std::uint64_t last_ns = 0;
  };
  Result take() {
    std::lock_guard lock(mu_);
    return {hist_, received_, lost_, last_ns_};
  }
  [[nodiscard]] bool probe_seen() const { return probes_.load(std::memory_order_acquire) > 0; }

 private:
  void run() {
    alignas(8) std::byte buf[ringcast::kMaxPayload];
    while (!stop_.load(std::memory_order_relaxed)) {
      const auto r = ring_.recv_wait(id_, buf, 50ms);
      if (r.status != Errc::ok) continue;
      const std::uint64_t t = now_ns();
      Payload p;
      std::memcpy(&p, buf, sizeof p);
      if (p.seq == kProbe) {
        probes_.fetch_add(1, std::memory_order_release);  // release: pairs with probe_seen()
        continue;
      }
      std::lock_guard lock(mu_);  // uncontended except at phase boundaries
      hist_.record(t > p.sent_ns ? t - p.sent_ns : 0);
      ++received_;
      if (p.seq > next_) lost_ += p.seq - next_;
      next_ = std::max(next_, p.seq + 1);
      last_ns_ = t;
    }
  }

  BroadcastRing& ring_;
  ringcast::ConsumerId id_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> probes_{0};
  std::mutex mu_;
  LatencyHistogram hist_;
  std::uint64_t received_ = 0, lost_ = 0, next_ = 0, last_ns_ = 0;
};

void push(BroadcastRing& ring, std::uint64_t seq) {
  alignas(8) std::byte message[kMessageBytes] = {};
  const Payload p{now_ns(), seq};
  std::memcpy(message, &p, sizeof p);
  const auto bytes = std::span<const std::byte>(message, kMessageBytes);
  while (ring.push_wait(bytes, {1s, ringcast::IdleStrategy::kSpinThenYield}) != Errc::ok) {
  }
}

std::string us(double ns) { return fmt::format("{:.1f}", ns / 1000.0); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringcast-nats-bench: ring A -> relay -> NATS A -> route -> NATS B -> ingress -> ring B -> consumer"};
  std::uint64_t messages = 2'000'000;
  std::uint64_t capacity = 1 << 16;
  int repeat = 3;
  std::uint64_t paced_rate = 100'000;
  double paced_seconds = 2;
  std::string shm = "/dev/shm";
  app.add_option("--messages", messages, "Messages per max-rate run")->capture_default_str();
  app.add_option("--capacity", capacity, "Slots of ring A and ring B")->capture_default_str();
  app.add_option("--repeat", repeat, "Runs of each phase")->capture_default_str();
  app.add_option("--paced-rate", paced_rate, "Messages/s of the paced phase")->capture_default_str();
  app.add_option("--paced-seconds", paced_seconds, "Length of the paced phase")->capture_default_str();
  std::size_t nats_batch = 1;
  app.add_option("--nats-batch", nats_batch, "The publishing relay's --nats-batch")->capture_default_str();
  app.add_option("--dir", shm, "Where the two hosts' ring directories are made")->capture_default_str();
  bool jetstream = false;
  std::string store = "/tmp";
  app.add_flag("--jetstream", jetstream,
               "JetStream instead of core NATS: both servers run -js (a two-node JetStream cluster), the relay "
               "publishes into the stream BENCH (--jetstream), the ingress reads it through a durable consumer");
  app.add_option("--store", store, "With --jetstream: where the servers' stores are made")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);

  const std::string store_a = fmt::format("{}/ringcast-nats-bench-{}-store-a", store, ::getpid());
  const std::string store_b = fmt::format("{}/ringcast-nats-bench-{}-store-b", store, ::getpid());
  // A JetStream cluster wants routes configured on every server at start:
  // route ports picked here, each server routing to the other.
  const std::uint16_t route_a = jetstream ? ringcast::test::free_port() : 0;
  const std::uint16_t route_b = jetstream ? ringcast::test::free_port() : 0;
  auto a = NatsServer::start({.cluster = true,
                              .route_to = route_b,
                              .jetstream_dir = jetstream ? store_a : std::string(),
                              .server_name = jetstream ? "bench-a" : std::string(),
                              .cluster_port = route_a});
  auto b = a ? NatsServer::start({.cluster = true,
                                  .route_to = a->cluster_port(),
                                  .jetstream_dir = jetstream ? store_b : std::string(),
                                  .server_name = jetstream ? "bench-b" : std::string(),
                                  .cluster_port = route_b})
             : nullptr;
  if (!a || !b) {
    fmt::print(stderr, "could not start the two nats-servers ({})\n", NATS_SERVER_EXE);
    return 1;
  }
  const std::string host_a = fmt::format("{}/ringcast-nats-bench-{}-a", shm, ::getpid());
  const std::string host_b = fmt::format("{}/ringcast-nats-bench-{}-b", shm, ::getpid());
  std::filesystem::create_directories(host_a);
  std::filesystem::create_directories(host_b);
  const std::string ring_a_path = host_a + "/ticks.ring";
  const std::string ring_b_path = host_b + "/ticks.ring";
  auto ring_a = BroadcastRing::create(ring_a_path, capacity);
  if (!ring_a) {
    fmt::print(stderr, "ring A: {}\n", ring_a.error().message());
    return 1;
  }
  namespace rt = ringcast::relay::testing;
  const auto quiet =
      ringcast::test::SpawnOptions{.out = ringcast::test::Stream::kPipe, .err = ringcast::test::Stream::kDiscard};
  // With JetStream the publishing relay creates the stream, so it starts first
  // (the JetStream meta leader may still be in election: it retries).
  std::vector<std::string> relay_args{RELAY_EXE, "--ring", ring_a_path + "=bench.ticks", "--nats", a->url()};
  if (!jetstream) relay_args.insert(relay_args.end(), {"--nats-batch", std::to_string(nats_batch)});
  std::vector<std::string> ingress_args{RELAY_EXE,
                                        "--nats",
                                        b->url(),
                                        "--nats-in",
                                        "bench.ticks=" + ring_b_path,
                                        "--nats-in-capacity",
                                        std::to_string(capacity)};
  ChildProcess relay;
  if (jetstream) {
    relay_args.insert(relay_args.end(), {"--jetstream", "BENCH", "--stream-max-bytes", "2gb"});
    ingress_args.insert(ingress_args.end(), {"--jetstream", "BENCH", "--jetstream-durable", "bench-b"});
    const auto d = rt::deadline_in(60s);
    for (;;) {
      relay = ChildProcess::spawn(relay_args, quiet);
      if (relay.read_stdout_until("publishing to NATS", rt::deadline_in(20s))) break;
      (void)relay.stop(SIGTERM);
      if (rt::ms_left(d) == 0) {
        fmt::print(stderr, "the publishing relay could not create the stream\n");
        return 1;
      }
      std::this_thread::sleep_for(500ms);
    }
  }
  ChildProcess ingress = ChildProcess::spawn(ingress_args, quiet);
  if (!ingress.read_stdout_until("subscribed to NATS", rt::deadline_in(20s))) {
    fmt::print(stderr, "the ingress relay did not start\n");
    return 1;
  }
  auto ring_b = BroadcastRing::open(ring_b_path);
  if (!ring_b) {
    fmt::print(stderr, "ring B: {}\n", ring_b.error().message());
    return 1;
  }
  Consumer consumer(*ring_b);
  if (!jetstream) relay = ChildProcess::spawn(relay_args, quiet);
  if (!jetstream && !relay.read_stdout_until("publishing to NATS", rt::deadline_in(20s))) {
    fmt::print(stderr, "the publishing relay did not start\n");
    return 1;
  }
  // Interest must cross the route before the runs: probe until one arrives.
  const auto probe_deadline = rt::deadline_in(30s);
  while (!consumer.probe_seen()) {
    if (rt::ms_left(probe_deadline) == 0) {
      fmt::print(stderr, "no probe reached ring B\n");
      return 1;
    }
    push(*ring_a, kProbe);
    std::this_thread::sleep_for(20ms);
  }
  std::this_thread::sleep_for(200ms);  // let the probes drain before the first phase

  fmt::print("ring A -> relay -> nats A -> route -> nats B -> ingress -> ring B -> consumer; 52 B; capacity {}; {}\n",
             capacity,
             jetstream ? std::string("JetStream (stream BENCH, file store, R1; durable pull consumer)")
                       : fmt::format("core NATS, --nats-batch {}", nats_batch));
  fmt::print("{:<6} {:>10} {:>12} {:>10} {:>9} {:>9} {:>9} {:>9}\n", "phase", "messages", "msgs/s", "lost", "p50 us",
             "p99 us", "p99.9 us", "max us");
  std::uint64_t seq = 0;
  struct Proc {
    const char* name;
    pid_t pid;
  };
  const std::vector<Proc> procs{{"relay A", relay.pid()},
                                {"nats A", a->child().pid()},
                                {"nats B", b->child().pid()},
                                {"ingress B", ingress.pid()},
                                {"bench (producer+consumer)", ::getpid()}};
  const auto cpu_now = [&] {
    std::vector<double> v;
    for (const Proc& p : procs) v.push_back(ringcast::bench::cpu_seconds(p.pid));
    return v;
  };
  const auto report = [](const char* phase, const Consumer::Result& r, std::uint64_t first_ns, std::uint64_t sent) {
    const double secs = r.last_ns > first_ns ? static_cast<double>(r.last_ns - first_ns) / 1e9 : 0;
    fmt::print("{:<6} {:>10} {:>12.0f} {:>10} {:>9} {:>9} {:>9} {:>9}\n", phase, sent,
               secs > 0 ? static_cast<double>(r.received) / secs : 0.0, r.lost + (sent - r.received - r.lost),
               us(static_cast<double>(r.hist.percentile(0.50))), us(static_cast<double>(r.hist.percentile(0.99))),
               us(static_cast<double>(r.hist.percentile(0.999))), us(static_cast<double>(r.hist.max())));
    std::fflush(stdout);
  };
  const auto settle = [&](std::uint64_t want) {
    // Wait until everything sent has arrived or nothing more comes for 1 s.
    std::uint64_t last = 0;
    auto quiet_since = Clock::now();
    for (;;) {
      const std::uint64_t got = consumer.take().received;
      if (got >= want) return;
      if (got != last) {
        last = got;
        quiet_since = Clock::now();
      } else if (Clock::now() - quiet_since > 1s) {
        return;
      }
      std::this_thread::sleep_for(10ms);
    }
  };
  for (int run = 0; run < repeat; ++run) {
    consumer.reset(seq);
    const std::vector<double> cpu0 = cpu_now();
    const std::uint64_t first = now_ns();
    for (std::uint64_t i = 0; i < messages; ++i) push(*ring_a, seq++);
    settle(messages);
    const Consumer::Result got = consumer.take();
    const std::vector<double> cpu1 = cpu_now();
    report("max", got, first, messages);
    std::string cpu = "       CPU-s per 1M messages:";
    for (std::size_t i = 0; i < procs.size(); ++i) {
      cpu += fmt::format(" {} {:.2f};", procs[i].name,
                         (cpu1[i] - cpu0[i]) * 1e6 / static_cast<double>(std::max<std::uint64_t>(got.received, 1)));
    }
    fmt::print("{}\n", cpu);

    consumer.reset(seq);
    const auto n = static_cast<std::uint64_t>(static_cast<double>(paced_rate) * paced_seconds);
    const auto start = Clock::now();
    const std::uint64_t pfirst = now_ns();
    for (std::uint64_t i = 0; i < n; ++i) {
      const auto due = start + std::chrono::nanoseconds(i * 1'000'000'000ULL / paced_rate);
      while (Clock::now() < due) {
      }
      push(*ring_a, seq++);
    }
    settle(n);
    report("paced", consumer.take(), pfirst, n);
  }
  (void)relay.stop(SIGTERM);
  (void)ingress.stop(SIGTERM);
  std::filesystem::remove_all(host_a);
  std::filesystem::remove_all(host_b);
  if (jetstream) {
    a->kill();
    b->kill();
    std::filesystem::remove_all(store_a);
    std::filesystem::remove_all(store_b);
  }
  return 0;
}
