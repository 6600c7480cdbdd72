// One consumer process reading many rings (issue 38): a WaitSet against a
// thread per ring, and a single ring's recv_wait as the reference.
//
//   ringcast-waitset-bench [--rings 16] [--rate 10000] [--seconds 5] [--mode all]
//
// Each ring has its own producer process (forked before the consumer starts
// any thread), which pushes its CLOCK_MONOTONIC send time every 1/rate
// seconds (absolute sleeps, timer slack 1 ns). The consumer records, per
// message, receive time minus send time, its own CPU time (user + system,
// all its threads) over the run, its voluntary context switches per message
// received (its sleeps: a futex_waitv that returns at once is not one), and
// its producers' CPU time together. Modes:
// waitset (one thread, one WaitSet over every ring, try_recv until empty),
// threads (one thread per ring, recv_wait with the default strategy), single
// (one ring, one recv_wait thread, at the same rate). One line per mode.
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "child_process.hpp"
#include "histogram.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "ringcast/wait_set.hpp"

namespace {

using namespace ringcast;
using bench::LatencyHistogram;
using namespace std::chrono_literals;

std::int64_t now_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

struct Usage {
  std::int64_t cpu_ns;  // user + system, all threads
  std::int64_t sleeps;  // voluntary context switches: a futex sleep each, here
};

Usage usage() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  const auto us = [](const timeval& t) { return std::int64_t{t.tv_sec} * 1'000'000 + t.tv_usec; };
  return {(us(ru.ru_utime) + us(ru.ru_stime)) * 1000, ru.ru_nvcsw};
}

// The producer process of one ring: `count` messages at `rate` per second,
// starting at `start` (CLOCK_MONOTONIC ns), each carrying its send time.
[[noreturn]] void produce(const std::string& path, std::uint64_t count, int rate, std::int64_t start) {
  ::prctl(PR_SET_TIMERSLACK, 1UL);
  auto ring = BroadcastRing::open(path);
  if (!ring || !ring->claim_producer()) _exit(2);
  const std::int64_t interval = 1'000'000'000 / rate;
  std::array<std::byte, kMaxPayload> msg{};
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::int64_t at = start + static_cast<std::int64_t>(i) * interval;
    struct timespec ts {
      static_cast<time_t>(at / 1'000'000'000), static_cast<long>(at % 1'000'000'000)
    };
    while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
    }
    const std::int64_t sent = now_ns();
    std::memcpy(msg.data(), &sent, 8);
    if (ring->push_wait(msg, 10s) != Errc::ok) _exit(3);
  }
  _exit(0);
}

struct Run {
  LatencyHistogram latency;
  std::int64_t cpu = 0;
  std::int64_t sleeps = 0;
  std::int64_t wall = 0;
  std::uint64_t received = 0;
  std::int64_t producers_cpu = 0;  // all producer processes together
};

void record(LatencyHistogram& h, std::span<const std::byte> buf) {
  std::int64_t sent = 0;
  std::memcpy(&sent, buf.data(), 8);
  h.record(static_cast<std::uint64_t>(std::max<std::int64_t>(now_ns() - sent, 0)));
}

Run run(const std::string& mode, int rings, int rate, int seconds) {
  const std::uint64_t count = static_cast<std::uint64_t>(rate) * static_cast<std::uint64_t>(seconds);
  std::vector<BroadcastRing> ring;
  std::vector<ConsumerId> id;
  std::vector<std::string> path;
  for (int i = 0; i < rings; ++i) {
    path.push_back(fmt::format("/dev/shm/ringcast-waitset-bench-{}-{}", ::getpid(), i));
    auto r = BroadcastRing::create(path.back(), 1024, {.replace = true, .claim_producer = false});
    if (!r) throw std::runtime_error(r.error().message());
    id.push_back(*r->register_consumer());
    ring.push_back(std::move(*r));
  }
  // Producers start together 200 ms from now, each offset by a slice of the
  // interval so that their sends do not coincide.
  const std::int64_t start = now_ns() + 200'000'000;
  std::vector<pid_t> children;
  for (int i = 0; i < rings; ++i) {
    const pid_t pid = test::fork_with_death_signal();
    if (pid == 0) produce(path[static_cast<std::size_t>(i)], count, rate, start + i * (1'000'000'000 / rate) / rings);
    children.push_back(pid);
  }
  Run out;
  const Usage usage0 = usage();
  const std::int64_t wall0 = now_ns();
  const std::uint64_t total = count * static_cast<std::uint64_t>(rings);
  if (mode == "waitset") {
    WaitSet ws;
    for (int i = 0; i < rings; ++i) (void)ws.add(ring[static_cast<std::size_t>(i)], id[static_cast<std::size_t>(i)]);
    std::array<std::size_t, WaitSet::kMaxMembers> ready{};
    std::array<std::byte, kMaxPayload> buf{};
    while (out.received < total) {
      const WaitSetResult w = ws.wait(ready, 10s);
      if (!w) break;
      for (std::size_t k = 0; k < w.count; ++k) {
        for (RecvResult r = ring[ready[k]].try_recv(id[ready[k]], buf); r;
             r = ring[ready[k]].try_recv(id[ready[k]], buf)) {
          record(out.latency, buf);
          ++out.received;
        }
      }
    }
  } else {
    std::vector<LatencyHistogram> per(static_cast<std::size_t>(rings));
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < static_cast<std::size_t>(rings); ++i) {
      threads.emplace_back([&, i] {
        std::array<std::byte, kMaxPayload> buf{};
        for (std::uint64_t n = 0; n < count; ++n) {
          if (!ring[i].recv_wait(id[i], buf, 10s)) return;
          record(per[i], buf);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const LatencyHistogram& h : per) out.latency.merge(h);
    out.received = out.latency.count();
  }
  const Usage usage1 = usage();
  out.cpu = usage1.cpu_ns - usage0.cpu_ns;
  out.sleeps = usage1.sleeps - usage0.sleeps;
  out.wall = now_ns() - wall0;
  for (const pid_t pid : children) {
    struct rusage ru {};
    ::wait4(pid, nullptr, 0, &ru);
    out.producers_cpu += (std::int64_t{ru.ru_utime.tv_sec} + ru.ru_stime.tv_sec) * 1'000'000'000 +
                         (std::int64_t{ru.ru_utime.tv_usec} + ru.ru_stime.tv_usec) * 1000;
  }
  for (const std::string& p : path) ::unlink(p.c_str());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"one consumer reading many rings: WaitSet vs a thread per ring"};
  int rings = 16;
  int rate = 10'000;
  int seconds = 5;
  std::string mode = "all";
  app.add_option("--rings", rings, "rings, one producer process each")->check(CLI::Range(1, 127));
  app.add_option("--rate", rate, "messages per second per ring")->check(CLI::Range(1, 1'000'000));
  app.add_option("--seconds", seconds, "length of each run")->check(CLI::Range(1, 3600));
  app.add_option("--mode", mode, "waitset, threads, single or all")
      ->check(CLI::IsMember({"waitset", "threads", "single", "all"}));
  CLI11_PARSE(app, argc, argv);
  fmt::print("{:<8} {:>5} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>10} {:>12}\n", "mode", "rings", "msgs/s", "p50 us",
             "p99 us", "max us", "received", "CPU %", "sleeps/msg", "producers %");
  for (const std::string m : {"single", "waitset", "threads"}) {
    if (mode != "all" && mode != m) continue;
    const int n = m == "single" ? 1 : rings;
    const Run r = run(m == "single" ? "threads" : m, n, rate, seconds);
    fmt::print("{:<8} {:>5} {:>9} {:>9.1f} {:>9.1f} {:>9.1f} {:>10} {:>9.1f} {:>10.2f} {:>12.1f}\n", m, n, n * rate,
               static_cast<double>(r.latency.percentile(0.5)) / 1e3,
               static_cast<double>(r.latency.percentile(0.99)) / 1e3, static_cast<double>(r.latency.max()) / 1e3,
               r.received, 100.0 * static_cast<double>(r.cpu) / static_cast<double>(r.wall),
               static_cast<double>(r.sleeps) / static_cast<double>(std::max<std::uint64_t>(r.received, 1)),
               100.0 * static_cast<double>(r.producers_cpu) / static_cast<double>(r.wall));
  }
  return 0;
}
