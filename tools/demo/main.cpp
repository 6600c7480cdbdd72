// ringcast-demo: one producer process and three consumer processes (one of
// them deliberately slow) on a ring under /dev/shm. The parent prints each
// consumer's progress and lag as it goes, then checks that every consumer got
// every message, in order and intact, and removes the ring.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "ringcast/broadcast_ring.hpp"

namespace {

using namespace ringcast;
using namespace std::chrono_literals;

// Payload: the sequence number, then its bitwise complement, so a consumer can
// verify order and integrity of every message.
void encode(std::uint64_t seq, std::span<std::byte, kMaxPayload> out) {
  const std::uint64_t inverse = ~seq;
  std::memcpy(out.data(), &seq, 8);
  std::memcpy(out.data() + 8, &inverse, 8);
}

int run_producer(const std::string& path, std::uint64_t count) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fmt::print(stderr, "producer: {}\n", ring.error().message()), 1;
  alignas(8) std::array<std::byte, kMaxPayload> msg{};
  for (std::uint64_t seq = 0; seq < count; ++seq) {
    encode(seq, msg);
    if (const Errc e = ring->push_wait(msg, 60s, IdleStrategy::spin_then_yield); e != Errc::ok) {
      return fmt::print(stderr, "producer: push {}: {}\n", seq, to_string(e)), 1;
    }
  }
  return 0;
}

int run_consumer(const std::string& path, std::uint64_t count, int pause_us) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fmt::print(stderr, "consumer: {}\n", ring.error().message()), 1;
  auto id = ring->register_consumer();
  if (!id) return fmt::print(stderr, "consumer: {}\n", id.error().message()), 1;
  std::uint64_t expected = 0;
  std::uint64_t bad = 0;
  const auto check = [&](std::span<const std::byte> p) {
    std::uint64_t seq = 0, inverse = 0;
    std::memcpy(&seq, p.data(), 8);
    std::memcpy(&inverse, p.data() + 8, 8);
    if (seq != expected || inverse != ~expected) ++bad;
    ++expected;
  };
  while (expected < count) {
    // The slow consumer takes small bites and naps between them.
    const BatchResult r = ring->drain(*id, check, pause_us > 0 ? 16 : 4096);
    if (r.count == 0) {
      if (r.status != Errc::empty && r.status != Errc::stalled) return 1;
      std::this_thread::yield();
    } else if (pause_us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
    }
  }
  return bad == 0 ? 0 : 1;
}

pid_t spawn(const std::vector<std::string>& args) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  return pid;
}

int run_demo(std::uint64_t count, std::uint64_t capacity, int slow_pause_us) {
  const std::string path = fmt::format("/dev/shm/ringcast-demo-{}.ring", ::getpid());
  auto ring = BroadcastRing::create(path, capacity, {.claim_producer = false});
  if (!ring) return fmt::print(stderr, "demo: {}\n", ring.error().message()), 1;
  fmt::print("ring {}: capacity {}, {} messages, 1 producer -> 3 consumers (consumer 2 is slow)\n", path, capacity,
             count);

  std::vector<pid_t> consumers;
  const std::string n = std::to_string(count);
  for (int i = 0; i < 3; ++i) {
    const int pause = i == 2 ? slow_pause_us : 0;
    consumers.push_back(spawn({"ringcast-demo", "--role", "consumer", "--ring", path, "--count", n, "--pause-us",
                               std::to_string(pause)}));
    // Register in order so consumer i is entry i.
    while (ring->active_consumer_count() < static_cast<std::size_t>(i + 1)) std::this_thread::sleep_for(1ms);
  }
  const auto start = std::chrono::steady_clock::now();
  const pid_t producer = spawn({"ringcast-demo", "--role", "producer", "--ring", path, "--count", n});

  fmt::print("{:>8}  {:>12}  {:>28}  {:>28}  {:>28}\n", "time", "produced", "consumer 0 (received / lag)",
             "consumer 1", "consumer 2 (slow)");
  for (;;) {
    const RingStatus s = ring->status();
    std::string row = fmt::format("{:>7.1f}s  {:>12}", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                                  s.producer_seq);
    bool all_done = s.producer_seq == count;
    for (std::uint32_t i = 0; i < 3; ++i) {
      const ConsumerStatus& c = s.consumers[i];
      row += c.active ? fmt::format("  {:>16} / {:>9}", c.cursor, c.lag) : fmt::format("  {:>28}", "done");
      all_done = all_done && !c.active;
    }
    fmt::print("{}\n", row);
    if (all_done) break;
    std::this_thread::sleep_for(250ms);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  int status = 0;
  ::waitpid(producer, &status, 0);
  bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  fmt::print("\nsummary ({:.2f} s, {:.1f} M msgs/s produced)\n", seconds, static_cast<double>(count) / seconds / 1e6);
  fmt::print("  producer    pushed {:>10}  {}\n", ring->producer_position(), ok ? "ok" : "FAILED");
  for (std::size_t i = 0; i < consumers.size(); ++i) {
    ::waitpid(consumers[i], &status, 0);
    const bool got_all = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    ok = ok && got_all;
    fmt::print("  consumer {}  {}\n", i, got_all ? fmt::format("received all {} in order, intact", count)
                                                 : std::string("MISSING OR DAMAGED MESSAGES"));
  }
  ring = BroadcastRing::open(path, {.read_only = true});  // drop our handle before removing
  ::unlink(path.c_str());
  fmt::print("{}; removed {}\n", ok ? "every consumer got every message" : "FAILED", path);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringcast-demo: 1 producer process -> ring -> 3 consumer processes (one slow)"};
  std::string role = "demo";
  std::string path;
  std::uint64_t count = 500'000;
  std::uint64_t capacity = 4096;
  int pause_us = 20;
  app.add_option("--count,-n", count, "Messages to publish")->capture_default_str();
  app.add_option("--capacity", capacity, "Ring capacity in slots")->capture_default_str();
  app.add_option("--pause-us", pause_us, "Slow consumer's nap after each 16 messages, microseconds")
      ->capture_default_str();
  app.add_option("--role", role, "Internal: demo, producer or consumer")->group("");
  app.add_option("--ring", path, "Internal: ring path for child roles")->group("");
  CLI11_PARSE(app, argc, argv);
  if (role == "producer") return run_producer(path, count);
  if (role == "consumer") return run_consumer(path, count, pause_us);
  return run_demo(count, capacity, pause_us);
}
