// ring_soak: a long crash soak (not in CI; run with tools/soak.sh).
//
// One producer and three consumer processes on a blocking ring; every so often
// a random one of them is killed with SIGKILL and restarted. A restarted
// consumer starts at "now"; a restarted producer takes the role over, repairs a
// half-written slot and resumes after the last committed message. Every
// consumer checks that every message it receives is whole and exactly the one
// after the previous: across producer takeovers there must be no duplicate and
// no gap. Killed consumers are reaped by the producer (reap_on_full).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "child_process.hpp"
#include "message_pattern.hpp"
#include "ringcast/broadcast_ring.hpp"

namespace {

using namespace ringcast;
using namespace std::chrono_literals;

int producer(const std::string& path, std::uint64_t total) {
  auto ring = BroadcastRing::open(path, {.reap_on_full = true});
  if (!ring) return fmt::print(stderr, "producer: {}\n", ring.error().message()), 2;
  // The previous producer may still be dying: wait for the kernel to drop its lock.
  while (!ring->claim_producer()) std::this_thread::sleep_for(1ms);
  alignas(8) std::array<std::byte, kMaxPayload> msg{};
  for (std::uint64_t seq = ring->producer_position(); seq < total;) {
    test::make_message(seq, msg);
    const Errc e = ring->push_wait(msg, {1s, IdleStrategy::kSpinThenYield});
    if (e == Errc::ok) {
      ++seq;
    } else if (e != Errc::timed_out) {
      return fmt::print(stderr, "producer: {}\n", to_string(e)), 2;
    }
  }
  return 0;
}

int consumer(const std::string& path, std::uint64_t total) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fmt::print(stderr, "consumer: {}\n", ring.error().message()), 2;
  auto id = ring->register_consumer();
  if (!id) return fmt::print(stderr, "consumer: {}\n", id.error().message()), 2;
  std::optional<std::uint64_t> next;
  std::string error;
  for (;;) {
    const BatchResult r = ring->drain(
        *id,
        [&](std::span<const std::byte> p) {
          const auto seq = test::check_message(p);
          if (!seq) {
            error = "torn payload";
          } else if (next && *seq != *next) {
            error = fmt::format("expected {}, got {}", *next, *seq);
          }
          next = seq ? *seq + 1 : next;
        },
        1024);
    if (!error.empty()) return fmt::print(stderr, "consumer {}: {}\n", ::getpid(), error), 1;
    if (r.count > 0) continue;
    if (next && *next >= total) return 0;
    // empty, or stalled / producer_dead while a producer is being replaced.
    if (r.status != Errc::empty && r.status != Errc::stalled && r.status != Errc::producer_dead) {
      return fmt::print(stderr, "consumer: {}\n", to_string(r.status)), 1;
    }
    std::this_thread::yield();
  }
}

// A role process that dies with the orchestrator, however that ends.
pid_t spawn(const std::string& role, const std::string& path, std::uint64_t total) {
  const pid_t pid = test::fork_with_death_signal();
  if (pid == 0) {
    const std::string n = std::to_string(total);
    ::execl("/proc/self/exe", "ring_soak", "--role", role.c_str(), "--ring", path.c_str(), "--messages", n.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

int orchestrate(std::uint64_t total, double kill_every_s, unsigned seed) {
  const std::string path = fmt::format("/dev/shm/ringcast-soak-{}.ring", ::getpid());
  auto ring = BroadcastRing::create(path, 4096, {.replace = true, .claim_producer = false});
  if (!ring) return fmt::print(stderr, "soak: {}\n", ring.error().message()), 2;
  std::mt19937 rng(seed);
  std::exponential_distribution<double> pause(1.0 / kill_every_s);
  std::vector<pid_t> procs = {spawn("producer", path, total)};  // procs[0] is the producer
  for (int i = 0; i < 3; ++i) procs.push_back(spawn("consumer", path, total));
  std::uint64_t producer_kills = 0, consumer_kills = 0;
  int failures = 0;
  const auto start = std::chrono::steady_clock::now();
  auto next_kill = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(pause(rng)));
  auto next_report = start;
  for (;;) {
    // Reap whoever finished or failed.
    bool all_done = true;
    for (std::size_t i = 0; i < procs.size(); ++i) {
      if (procs[i] <= 0) continue;
      int status = 0;
      if (::waitpid(procs[i], &status, WNOHANG) == procs[i]) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
        procs[i] = 0;
      } else {
        all_done = false;
      }
    }
    if (all_done || failures > 0) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_kill && ring->producer_position() < total * 99 / 100) {
      const std::size_t victim = std::uniform_int_distribution<std::size_t>(0, procs.size() - 1)(rng);
      if (procs[victim] > 0) {
        ::kill(procs[victim], SIGKILL);
        ::waitpid(procs[victim], nullptr, 0);
        procs[victim] = spawn(victim == 0 ? "producer" : "consumer", path, total);
        (victim == 0 ? producer_kills : consumer_kills) += 1;
      }
      next_kill = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(pause(rng)));
    }
    if (now >= next_report) {
      const double s = std::chrono::duration<double>(now - start).count();
      fmt::print("{:8.1f}s  produced {:>13}  ({:5.1f}%)  kills: producer {}, consumer {}\n", s,
                 ring->producer_position(),
                 100.0 * static_cast<double>(ring->producer_position()) / static_cast<double>(total), producer_kills,
                 consumer_kills);
      std::fflush(stdout);
      next_report = now + 5s;
    }
    std::this_thread::sleep_for(10ms);
  }
  for (pid_t p : procs) {
    if (p > 0) ::kill(p, SIGKILL), ::waitpid(p, nullptr, 0);
  }
  const RingStatus s = ring->status();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("\nsoak: {} messages in {:.0f} s ({:.1f} M msgs/s), {} producer kills, {} consumer kills, {} failures\n",
             s.producer_seq, seconds, static_cast<double>(s.producer_seq) / seconds / 1e6, producer_kills,
             consumer_kills, failures);
  fmt::print("final state: half-written slot: {}, active consumers: {}\n", s.half_written_slot ? "yes" : "no",
             ring->active_consumer_count());
  ::unlink(path.c_str());
  return failures == 0 && s.producer_seq == total ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ring_soak: crash soak of one producer and three consumer processes"};
  std::string role = "soak", path;
  std::uint64_t total = 1'000'000'000;
  double kill_every = 2.0;
  unsigned seed = 1;
  app.add_option("--messages", total, "Messages to publish")->capture_default_str();
  app.add_option("--kill-every", kill_every, "Mean seconds between kills")->capture_default_str();
  app.add_option("--seed", seed, "Random seed")->capture_default_str();
  app.add_option("--role", role, "Internal")->group("");
  app.add_option("--ring", path, "Internal")->group("");
  CLI11_PARSE(app, argc, argv);
  if (role == "producer") return producer(path, total);
  if (role == "consumer") return consumer(path, total);
  return orchestrate(total, kill_every, seed);
}
