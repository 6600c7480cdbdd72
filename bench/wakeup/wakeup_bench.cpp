// Blocking waits: the cost they add to the fast path when nobody sleeps, and
// the wake-up latency from a push to a consumer asleep on the futex returning.
//
//   wakeup_bench                  Google Benchmark: push+recv pairs on plain and
//                                 wakeups rings (no sleeper)
//   wakeup_bench --latency N      N sleep/wake round trips on a plain ring (the
//                                 waiter's heavy barrier is membarrier(2)) and on a
//                                 wakeups ring (fences); prints p50/p99/max of each
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "ringcast/broadcast_ring.hpp"

namespace {

using namespace ringcast;
using namespace std::chrono_literals;

void push_recv_pair(benchmark::State& state, bool wakeups) {
  auto ring = BroadcastRing::create_anonymous(64, {.wakeups = wakeups});
  auto id = *ring->register_consumer();
  std::array<std::byte, kMaxPayload> msg{}, buf{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(ring->try_push(msg));
    benchmark::DoNotOptimize(ring->try_recv(id, buf));
  }
}
void BM_PushRecvPlain(benchmark::State& state) { push_recv_pair(state, false); }
void BM_PushRecvWakeupsNoSleeper(benchmark::State& state) { push_recv_pair(state, true); }
BENCHMARK(BM_PushRecvPlain);
BENCHMARK(BM_PushRecvWakeupsNoSleeper);

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int wake_latency(int rounds, bool wakeups) {
  auto ring = BroadcastRing::create_anonymous(64, {.wakeups = wakeups});
  auto id = *ring->register_consumer();
  std::vector<std::int64_t> latencies;
  latencies.reserve(static_cast<std::size_t>(rounds));
  std::atomic<bool> consumer_done{false};
  std::thread consumer([&] {
    std::array<std::byte, kMaxPayload> buf{};
    for (int i = 0; i < rounds; ++i) {
      const RecvResult r = ring->recv_wait(id, buf, {60s, IdleStrategy::kSpinThenBlock});
      const std::int64_t woke = now_ns();
      if (r.status != Errc::ok) {
        fmt::print(stderr, "wakeup_bench: round {}: {}\n", i, to_string(r.status));
        break;
      }
      std::int64_t sent = 0;
      std::memcpy(&sent, buf.data(), 8);
      latencies.push_back(woke - sent);
    }
    consumer_done.store(true, std::memory_order_release);
  });
  std::array<std::byte, kMaxPayload> msg{};
  for (int i = 0; i < rounds && !consumer_done.load(std::memory_order_acquire); ++i) {
    // Push only once the consumer has taken the previous message and is asleep
    // again, so every round measures one wake-up.
    while ((ring->lag(id) != 0 || ring->status().sleeping_consumers == 0) &&
           !consumer_done.load(std::memory_order_acquire)) {
      std::this_thread::sleep_for(20us);
    }
    std::this_thread::sleep_for(50us);  // let it reach futex_wait
    const std::int64_t sent = now_ns();
    std::memcpy(msg.data(), &sent, 8);
    if (const Errc e = ring->try_push(msg); e != Errc::ok) {
      fmt::print(stderr, "wakeup_bench: push {}: {}\n", i, to_string(e));
      break;
    }
  }
  consumer.join();
  if (latencies.size() != static_cast<std::size_t>(rounds)) {
    fmt::print(stderr, "wakeup_bench: only {} of {} rounds completed\n", latencies.size(), rounds);
    return 1;
  }
  std::sort(latencies.begin(), latencies.end());
  const auto pct = [&](double p) {
    return latencies[std::min(latencies.size() - 1,
                              static_cast<std::size_t>(p * static_cast<double>(latencies.size())))];
  };
  fmt::print(
      "{{\"ring\": \"{}\", \"wake_latency_ns\": {{\"rounds\": {}, \"p50\": {}, \"p90\": {}, \"p99\": {}, \"max\": "
      "{}}}}}\n",
      wakeups ? "wakeups" : "plain", latencies.size(), pct(0.5), pct(0.9), pct(0.99), latencies.back());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--latency") == 0) {
    const int rounds = std::atoi(argv[2]);
    return wake_latency(rounds, false) | wake_latency(rounds, true);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
