// Blocking waits: the cost they add to the fast path when nobody sleeps, and
// the wake-up latency from a push to a consumer asleep on the futex returning.
//
//   wakeup_bench                  Google Benchmark: push+recv pairs on plain and
//                                 wakeups rings (no sleeper)
//   wakeup_bench --latency N      N sleep/wake round trips; prints p50/p99/max
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

int wake_latency(int rounds) {
  auto ring = BroadcastRing::create_anonymous(64, {.wakeups = true});
  auto id = *ring->register_consumer();
  std::vector<std::int64_t> latencies;
  latencies.reserve(static_cast<std::size_t>(rounds));
  std::thread consumer([&] {
    std::array<std::byte, kMaxPayload> buf{};
    for (int i = 0; i < rounds; ++i) {
      const RecvResult r = ring->recv_wait(id, buf, 10s, IdleStrategy::spin_then_block);
      const std::int64_t woke = now_ns();
      if (r.status != Errc::ok) return;
      std::int64_t sent = 0;
      std::memcpy(&sent, buf.data(), 8);
      latencies.push_back(woke - sent);
    }
  });
  std::array<std::byte, kMaxPayload> msg{};
  for (int i = 0; i < rounds; ++i) {
    // Push only once the consumer is asleep, so every round measures a wake-up.
    while (ring->status().sleeping_consumers == 0) std::this_thread::sleep_for(20us);
    std::this_thread::sleep_for(50us);  // let it reach futex_wait
    const std::int64_t sent = now_ns();
    std::memcpy(msg.data(), &sent, 8);
    if (ring->try_push(msg) != Errc::ok) return 1;
  }
  consumer.join();
  std::sort(latencies.begin(), latencies.end());
  const auto pct = [&](double p) {
    return latencies[std::min(latencies.size() - 1, static_cast<std::size_t>(p * static_cast<double>(latencies.size())))];
  };
  fmt::print("{{\"wake_latency_ns\": {{\"rounds\": {}, \"p50\": {}, \"p90\": {}, \"p99\": {}, \"max\": {}}}}}\n",
             latencies.size(), pct(0.5), pct(0.9), pct(0.99), latencies.back());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--latency") == 0) return wake_latency(std::atoi(argv[2]));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
