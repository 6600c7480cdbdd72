// ringcast-demo: the whole path on one host, and its accounting.
//
//   demo-producer -> ring (/dev/shm) -> demo-fast (consumer A), demo-slow (consumer B)
//                                    -> relay (this process) -> embedded broker
//                                         -> TCP subscriber (the tests' RESP client)
//                                         (-> redis-cli, the live page: whoever attaches)
//
// Wiring only: child processes and the RESP client are the tests' own
// (tests/common); relay_e2e_test checks this path, the demo shows it. It exits
// non-zero unless every party got every message, in order and intact.
#include <fmt/format.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <exception>
#include <thread>

#include "child_process.hpp"
#include "guarded_main.hpp"
#include "parse_flags.hpp"
#include "resp_client.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "ringcast/relay/relay.hpp"

namespace {

using namespace ringcast;
using namespace std::chrono_literals;
using test::ChildProcess;
using test::deadline_in;

constexpr const char* kChannel = "ticks";

// Message `seq`: printable, so that `redis-cli subscribe` shows it readably.
std::string payload_of(std::uint64_t seq) { return fmt::format("{:016x}-{:016x}", seq, ~seq); }

// One party's messages, counted by one thread; `bad` ones are not the next
// message intact. Relaxed: counters, read for display and after the run.
struct Tally {
  std::atomic<std::uint64_t> received{0};
  std::atomic<std::uint64_t> bad{0};
  void add(std::string_view payload) {
    if (payload != payload_of(count())) bad.fetch_add(1, std::memory_order_relaxed);
    received.fetch_add(1, std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t count() const { return received.load(std::memory_order_relaxed); }
  [[nodiscard]] bool all_intact(std::uint64_t n) const {
    return count() == n && bad.load(std::memory_order_relaxed) == 0;
  }
};

// The child processes: exit status 0 once every message was pushed, or received intact.
int run_child(const std::string& role, const std::string& path, std::uint64_t count, int pause_us) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fmt::print(stderr, "{}: {}\n", role, ring.error().message()), 1;
  for (std::uint64_t seq = 0; role == "producer" && seq < count; ++seq) {
    const std::string p = payload_of(seq);
    const Errc e = ring->push_wait(std::as_bytes(std::span(p)), {60s, IdleStrategy::kSpinThenYield});
    if (e != Errc::ok) return fmt::print(stderr, "{}: {}\n", role, to_string(e)), 1;
  }
  if (role == "producer") return 0;
  auto id = ring->register_consumer();
  if (!id) return fmt::print(stderr, "{}: {}\n", role, id.error().message()), 1;
  Tally tally;
  const auto check = [&](std::span<const std::byte> p) {
    tally.add(std::string_view(reinterpret_cast<const char*>(p.data()), p.size()));
  };
  while (tally.count() < count) {
    // The slow consumer takes small bites and naps between them.
    const BatchResult r = ring->drain(*id, check, pause_us > 0 ? 16 : 4096);
    if (r.count == 0 && r.status != Errc::empty && r.status != Errc::stalled) return 1;
    if (r.count == 0) std::this_thread::yield();
    if (r.count > 0 && pause_us > 0) std::this_thread::sleep_for(1us * pause_us);
  }
  return tally.all_intact(count) ? 0 : 1;
}

int run_demo(std::uint64_t count, std::uint64_t capacity, int slow_pause_us) {
  const std::string path = fmt::format("/dev/shm/ringcast-demo-{}.ring", ::getpid());
  auto ring = BroadcastRing::create(path, capacity, {.claim_producer = false});
  if (!ring) return fmt::print(stderr, "demo: {}\n", ring.error().message()), 1;
  fmt::print("ring {}: capacity {}, {} messages\n", path, capacity, count);
  fmt::print("  producer process -> ring -> consumer A, consumer B (slow), relay -> TCP subscriber\n");

  // The relay, in this process: consumer entry 0, its embedded broker on free
  // ports, with room for the whole run (no drops: the accounting is exact).
  relay::RelayConfig rc;
  rc.rings.push_back({path, kChannel, false});
  rc.broker.emplace();
  rc.broker->port = 0;
  rc.broker->ws_port = 0;
  rc.broker->io_threads = 1;
  rc.broker->queue_limits.hard_bytes = 256u << 20;
  rc.broker->queue_limits.soft_bytes = 0;
  // One fwrite per line (fmt::print): the relay threads' lines do not interleave.
  rc.log = [](relay::LogLevel, std::string_view line) { fmt::print("  [relay] {}\n", line); };
  auto started = relay::Relay::start(rc);
  if (!started) {
    ::unlink(path.c_str());
    return fmt::print(stderr, "demo: relay: {}\n", started.error().message()), 1;
  }
  relay::Relay& relay = **started;
  const std::uint16_t port = relay.broker()->port();
  while (ring->active_consumer_count() < 1) std::this_thread::sleep_for(1ms);
  fmt::print("  relay registered; broker on 127.0.0.1:{} (watch: redis-cli -p {} subscribe {})\n", port, port,
             kChannel);
  fmt::print("  live page: http://127.0.0.1:{}/?channel={} (--count 5000000 leaves time to open it)\n",
             relay.broker()->ws_port(), kChannel);

  // The TCP subscriber, tallied on its own thread until it has every message
  // (or the stream ends, or 10 s pass in silence).
  test::RespClient client(port);
  if (!client.subscribe(kChannel)) {
    ::unlink(path.c_str());
    return fmt::print(stderr, "demo: the TCP subscriber could not subscribe\n"), 1;
  }
  Tally sub;
  std::jthread reader([&] {
    while (sub.count() < count) {
      const auto r = client.next(deadline_in(10s));
      if (!r) return;
      if (r->is_message(kChannel)) sub.add(r->elems[2].str);
    }
  });

  // The children: this executable, named after its role. Consumers register in
  // order (relay = entry 0, consumer A = 1, consumer B = 2), then the producer starts.
  ChildProcess children[3];
  const char* names[3] = {"demo-fast", "demo-slow", "demo-producer"};
  for (std::size_t i = 0; i < 3; ++i) {
    children[i] = ChildProcess::spawn({names[i], "--role", i < 2 ? "consumer" : "producer", "--ring", path, "--count",
                                       std::to_string(count), "--pause-us", std::to_string(i == 1 ? slow_pause_us : 0)},
                                      {.out = test::Stream::kInherit, .exe = "/proc/self/exe"});
    while (i < 2 && ring->active_consumer_count() < i + 2) std::this_thread::sleep_for(1ms);
  }

  // Progress: each party's position / lag ("done" once a consumer is gone).
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const auto row = [](const auto&... cols) { fmt::print("{:>7}  {:>9}  {:>19}  {:>19}  {:>19}  {:>14}\n", cols...); };
  const auto at = [](const ConsumerStatus& c) {
    return c.active ? fmt::format("{} / {}", c.cursor, c.lag) : std::string("done");
  };
  row("time", "produced", "relay (taken / lag)", "consumer A", "consumer B (slow)", "TCP subscriber");
  for (bool done = false; !done && seconds() < 60;) {
    const RingStatus s = ring->status();
    const relay::RingStats rs = relay.ring_stats().at(0);
    row(fmt::format("{:.1f}s", seconds()), s.producer_seq, fmt::format("{} / {}", rs.relayed, rs.lag),
        at(s.consumers[1]), at(s.consumers[2]), sub.count());
    done = rs.relayed == count && !s.consumers[1].active && !s.consumers[2].active && sub.count() == count;
    if (!done) std::this_thread::sleep_for(250ms);
  }
  const double elapsed = seconds();

  // The accounting. A child still running now has failed (its destructor kills it).
  fmt::print("\nsummary ({:.2f} s, {:.2f} M msgs/s end to end)\n", elapsed, static_cast<double>(count) / elapsed / 1e6);
  bool ok = true;
  const auto report = [&ok](std::string_view party, std::string_view what, bool good, std::string_view verdict) {
    ok = ok && good;
    fmt::print("  {:<29}{}  {}\n", party, what, good ? verdict : "FAILED");
  };
  const auto exited_ok = [](ChildProcess& c) { return test::exit_code(c.wait_exit(deadline_in(10s))) == 0; };
  const std::string_view intact = "all, in order, intact";
  report("producer", fmt::format("pushed   {:>9}", ring->producer_position()), exited_ok(children[2]), "ok");
  report("consumer A", fmt::format("received {:>9}", count), exited_ok(children[0]), intact);
  report("consumer B", fmt::format("received {:>9}", count), exited_ok(children[1]), intact);
  const relay::RingStats rs = relay.ring_stats().at(0);
  const broker::BrokerStats bs = relay.broker()->stats();
  const std::uint64_t drops = bs.dropped_hard_limit + bs.dropped_soft_limit + bs.dropped_disconnect;
  // More connections than our subscriber are someone watching (redis-cli, the
  // live page): their deliveries add to the count, and what they miss is theirs.
  const std::uint64_t watchers = bs.total_connections - 1;
  report("relay",
         fmt::format("relayed  {:>9}  broker deliveries {}, drops {}{}", rs.relayed, rs.deliveries, drops,
                     watchers == 0 ? "" : fmt::format(" ({} more watched)", watchers)),
         rs.relayed == count && (watchers == 0 ? rs.deliveries == count && drops == 0 : rs.deliveries >= count), "ok");
  report("TCP subscriber", fmt::format("received {:>9}", sub.count()), sub.all_intact(count), intact);
  relay.stop();  // unregisters its consumer (logged) and ends the subscriber's stream
  reader.join();
  ring = BroadcastRing::open(path, {.read_only = true});  // drops our handle before removing
  ::unlink(path.c_str());
  fmt::print("{}; removed {}\n", ok ? "accounting ok: every party got every message" : "ACCOUNTING FAILED", path);
  return ok ? 0 : 1;
}

// main's body; main turns an exception that escapes it into a message.
int run(int argc, char** argv) {
  CLI::App app{"ringcast-demo: producer process -> ring -> 2 consumer processes + relay -> TCP subscriber"};
  std::string role = "demo";
  std::string path;
  std::uint64_t count = 200'000;
  std::uint64_t capacity = 4096;
  int pause_us = 20;
  app.add_option("--count,-n", count, "Messages to publish")->capture_default_str();
  app.add_option("--capacity", capacity, "Ring capacity in slots")->capture_default_str();
  app.add_option("--pause-us", pause_us, "Slow consumer's nap after each 16 messages, microseconds")
      ->capture_default_str();
  app.add_option("--role", role, "Internal: demo, producer or consumer")->group("");
  app.add_option("--ring", path, "Internal: ring path for child roles")->group("");
  if (const auto exit_status = ringcast::tools::parse_flags(app, argc, argv)) return *exit_status;
  if (role == "demo") return std::signal(SIGPIPE, SIG_IGN), run_demo(count, capacity, pause_us);
  // A child runs this executable through /proc/self/exe, so the kernel names it
  // "exe"; its argv[0] is its role ("demo-producer", "demo-fast", "demo-slow"),
  // which becomes the name ring-top, top and ps -o comm show.
  ::prctl(PR_SET_NAME, argv[0]);
  return run_child(role, path, count, pause_us);
}

}  // namespace

int main(int argc, char** argv) {
  return ringcast::tools::guarded_main("ringcast-demo", [&] { return run(argc, argv); });
}
