// ringcast_bench_micro: Google Benchmark suite for the ring (issue 3).
//
// Single-thread micro-benchmarks mirror the seed's (push with capacity 16,
// drain then push; recv with capacity 64 in steady state; lag;
// is_fully_drained with 1 and 16 consumers), each for BroadcastRing and for
// the Mutex+deque baseline (bench/ring/mutex_deque_ring.hpp). Multi-threaded
// benchmarks run one producer and 1..3 consumer threads in one process and
// report messages/s and the share of pushes that found the ring full. The
// layout variants (bench/ring/layout_variants.hpp) measure the consumer-table
// decision of issue 2.
//
// Names: <Benchmark>/<impl>[/args]. Benchmarks are measurements, not tests:
// the only failure is a message that does not verify (SkipWithError).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "layout_variants.hpp"
#include "mutex_deque_ring.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "workload.hpp"

namespace ringcast::bench {
namespace {

[[noreturn]] void die(const char* what, const Error& e) {
  std::fprintf(stderr, "%s: %s\n", what, e.message().c_str());
  std::exit(2);
}

// --- the structures under test, behind one small adapter each -------------

struct Ringcast {
  using Ring = BroadcastRing;
  static std::unique_ptr<Ring> make(std::uint64_t capacity) {
    auto r = BroadcastRing::create_anonymous(capacity);
    if (!r) die("create_anonymous", r.error());
    return std::make_unique<Ring>(std::move(*r));
  }
  // The handle a consumer thread uses: the producer's own (one handle shared
  // by all threads of the process).
  static Ring& consumer_handle(Ring& shared, std::unique_ptr<Ring>&, int) { return shared; }
};

// BroadcastRing on a /dev/shm file, each consumer thread on a handle of its
// own (as separate processes would be). Differs from Ringcast only in which
// handle object each thread touches.
struct RingcastOwnHandles {
  using Ring = BroadcastRing;
  static std::string path() { return "/dev/shm/ringcast-bench-micro-" + std::to_string(::getpid()); }
  static std::unique_ptr<Ring> make(std::uint64_t capacity) {
    CreateOptions o;
    o.replace = true;
    auto r = BroadcastRing::create(path(), capacity, o);
    if (!r) die("create", r.error());
    return std::make_unique<Ring>(std::move(*r));
  }
  static Ring& consumer_handle(Ring&, std::unique_ptr<Ring>& own, int) { return *own; }
};

template <bool kLazyTrim>
struct Baseline {
  using Ring = MutexDequeRing<kLazyTrim>;
  static std::unique_ptr<Ring> make(std::uint64_t capacity) { return std::make_unique<Ring>(capacity); }
  static Ring& consumer_handle(Ring& shared, std::unique_ptr<Ring>&, int) { return shared; }
};

template <bool kPadded, bool kCachedMin>
struct Variant {
  using Ring = LayoutVariantRing<kPadded, kCachedMin>;
  static std::unique_ptr<Ring> make(std::uint64_t capacity) { return std::make_unique<Ring>(capacity); }
  static Ring& consumer_handle(Ring& shared, std::unique_ptr<Ring>&, int) { return shared; }
};

template <class Ring>
ConsumerId register_one(Ring& ring) {
  auto id = ring.register_consumer();
  if (!id) {
    std::fprintf(stderr, "register_consumer failed\n");
    std::exit(2);
  }
  return *id;
}

constexpr auto kIgnore = [](std::span<const std::byte> m) noexcept { benchmark::DoNotOptimize(m.data()); };

// --- single-thread micro-benchmarks (the seed's shapes) -------------------

// Push, capacity 16, one consumer: push until full, then the consumer drains
// everything (one batch call) and the push is retried. The drain is part of
// the measured loop, amortised over 16 pushes, as in the seed.
template <class Impl>
void Push(benchmark::State& state) {
  auto ring = Impl::make(16);
  const ConsumerId c = register_one(*ring);
  Message m;
  fill_message(m, 1, 2);
  for (auto _ : state) {
    if (ring->try_push(m.span()) != Errc::ok) [[unlikely]] {
      (void)ring->drain(c, kIgnore, 16);
      if (ring->try_push(m.span()) != Errc::ok) state.SkipWithError("push after drain failed");
    }
  }
  state.SetItemsProcessed(state.iterations());
}

// Push, capacity 16, no consumer registered: the push alone (the room check
// still runs; nothing is ever full).
template <class Impl>
void PushNoConsumer(benchmark::State& state) {
  auto ring = Impl::make(16);
  Message m;
  fill_message(m, 1, 2);
  for (auto _ : state) {
    if (ring->try_push(m.span()) != Errc::ok) [[unlikely]]
      state.SkipWithError("push failed");
  }
  state.SetItemsProcessed(state.iterations());
}

// Recv, capacity 64, steady state: receive one message; when the consumer
// finds the ring empty the producer refills it with one 64-message batch.
// The refill is part of the measured loop, amortised over 64 receives.
template <class Impl>
void Recv(benchmark::State& state) {
  auto ring = Impl::make(64);
  const ConsumerId c = register_one(*ring);
  Message m;
  fill_message(m, 1, 2);
  std::array<std::span<const std::byte>, 64> batch;
  batch.fill(m.span());
  alignas(8) std::array<std::byte, kMaxPayload> out{};
  if (ring->try_push_batch(batch).count != 64) state.SkipWithError("prefill failed");
  for (auto _ : state) {
    RecvResult r = ring->try_recv(c, out);
    if (r.status != Errc::ok) [[unlikely]] {
      if (ring->try_push_batch(batch).count != 64) state.SkipWithError("refill failed");
      r = ring->try_recv(c, out);
    }
    benchmark::DoNotOptimize(r);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}

// Lag of one consumer 32 messages behind in a 64-slot ring.
template <class Impl>
void Lag(benchmark::State& state) {
  auto ring = Impl::make(64);
  const ConsumerId c = register_one(*ring);
  Message m;
  fill_message(m, 1, 2);
  for (int i = 0; i < 32; ++i) (void)ring->try_push(m.span());
  for (auto _ : state) benchmark::DoNotOptimize(ring->lag(c));
  if (ring->lag(c) != 32) state.SkipWithError("lag != 32");
}

// is_fully_drained with range(0) consumers registered, all caught up (the
// answer is true, so every entry is inspected).
template <class Impl>
void IsFullyDrained(benchmark::State& state) {
  auto ring = Impl::make(64);
  Message m;
  fill_message(m, 1, 2);
  std::vector<ConsumerId> ids;
  for (std::int64_t i = 0; i < state.range(0); ++i) ids.push_back(register_one(*ring));
  (void)ring->try_push(m.span());
  for (const ConsumerId id : ids) (void)ring->drain(id, kIgnore, 1);
  for (auto _ : state) benchmark::DoNotOptimize(ring->is_fully_drained());
  if (!ring->is_fully_drained()) state.SkipWithError("not drained");
}

// --- one producer, 1..3 consumer threads -----------------------------------

constexpr std::uint64_t kThreadMessages = std::uint64_t{1} << 18;
constexpr std::uint64_t kThreadCapacity = 1024;
constexpr std::size_t kPushBatch = 32;
constexpr std::size_t kDrainMax = 256;

// range(0): consumer threads; range(1): 0 = single-message API (try_push /
// try_recv), 1 = batch API (try_push_batch of 32 / drain of up to 256).
// Each iteration moves kThreadMessages messages from the producer (the
// benchmark thread) to every consumer, which verifies each one; the time is
// from release of the consumers to the last consumer's last message.
// Counters: msgs_per_s (messages published per second; each is delivered to
// every consumer), full_share (single: share of messages whose first
// try_push found the ring full; batch: share of try_push_batch calls that
// stopped on full), bad (messages that failed verification, must be 0).
template <class Impl>
void Threads(benchmark::State& state) {
  const int consumers = static_cast<int>(state.range(0));
  const bool batch_api = state.range(1) != 0;
  const Idle idle = default_idle(static_cast<unsigned>(consumers) + 1);
  double seconds = 0;
  std::uint64_t messages = 0, push_calls = 0, full_hits = 0;
  std::atomic<std::uint64_t> bad{0};

  for (auto _ : state) {
    auto ring = Impl::make(kThreadCapacity);
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < consumers; ++t) {
      threads.emplace_back([&, t] {
        std::unique_ptr<typename Impl::Ring> own;
        if constexpr (std::is_same_v<Impl, RingcastOwnHandles>) {
          auto r = BroadcastRing::open(RingcastOwnHandles::path());
          if (!r) die("open", r.error());
          own = std::make_unique<BroadcastRing>(std::move(*r));
        }
        auto& handle = Impl::consumer_handle(*ring, own, t);
        const ConsumerId id = register_one(handle);
        ready.fetch_add(1, std::memory_order_release);
        // Yield, not spin: under SCHED_FIFO (bench.sh --realtime) a spinning
        // waiter would keep the producer thread off the CPU forever.
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        Backoff backoff(idle);
        std::uint64_t expected = 0, errors = 0;
        alignas(8) std::array<std::byte, kMaxPayload> out{};
        while (expected < kThreadMessages) {
          if (batch_api) {
            const BatchResult r = handle.drain(
                id,
                [&](std::span<const std::byte> msg) noexcept {
                  errors += verify_message(msg, expected) ? 0U : 1U;
                  ++expected;
                },
                kDrainMax);
            if (r.count == 0) backoff.pause();
            else backoff.reset();
          } else {
            const RecvResult r = handle.try_recv(id, out);
            if (r.status == Errc::ok) {
              errors += verify_message(std::span<const std::byte>(out.data(), r.length), expected) ? 0U : 1U;
              ++expected;
              backoff.reset();
            } else {
              backoff.pause();
            }
          }
        }
        bad.fetch_add(errors, std::memory_order_relaxed);
      });
    }
    while (ready.load(std::memory_order_acquire) < consumers) std::this_thread::yield();
    if constexpr (std::is_same_v<Impl, RingcastOwnHandles>) {
      ::unlink(RingcastOwnHandles::path().c_str());  // every consumer has opened it
    }

    Backoff backoff(idle);
    const std::uint64_t t0 = monotonic_ns();
    go.store(true, std::memory_order_release);
    if (batch_api) {
      std::array<Message, kPushBatch> msgs;
      std::array<std::span<const std::byte>, kPushBatch> spans;
      for (std::size_t i = 0; i < kPushBatch; ++i) spans[i] = msgs[i].span();
      for (std::uint64_t seq = 0; seq < kThreadMessages;) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kPushBatch, kThreadMessages - seq));
        for (std::size_t i = 0; i < n; ++i) fill_message(msgs[i], seq + i, 0);
        std::size_t done = 0;
        while (done < n) {
          const BatchResult r = ring->try_push_batch(std::span(spans).subspan(done, n - done));
          ++push_calls;
          done += r.count;
          if (r.status == Errc::full) {
            ++full_hits;
            backoff.pause();
          }
        }
        seq += n;
      }
    } else {
      Message m;
      for (std::uint64_t seq = 0; seq < kThreadMessages; ++seq) {
        fill_message(m, seq, 0);
        ++push_calls;
        if (ring->try_push(m.span()) == Errc::ok) continue;
        ++full_hits;
        do backoff.pause();
        while (ring->try_push(m.span()) != Errc::ok);
      }
    }
    for (auto& t : threads) t.join();
    const std::uint64_t t1 = monotonic_ns();
    const double s = static_cast<double>(t1 - t0) * 1e-9;
    state.SetIterationTime(s);
    seconds += s;
    messages += kThreadMessages;
  }
  state.counters["msgs_per_s"] = static_cast<double>(messages) / seconds;
  state.counters["full_share"] = push_calls ? static_cast<double>(full_hits) / static_cast<double>(push_calls) : 0;
  state.counters["bad"] = static_cast<double>(bad.load());
  state.counters["idle_yield"] = idle == Idle::kYield ? 1 : 0;
  if (bad.load() != 0) state.SkipWithError("a message failed verification");
}

// --- registration ----------------------------------------------------------

using BaselineSeed = Baseline<false>;
using BaselineLazy = Baseline<true>;
using PaddedCached = Variant<true, true>;  // issue 2 layout
using PackedScan = Variant<false, false>;  // the seed's layout and protocol
using PackedCached = Variant<false, true>;
using PaddedScan = Variant<true, false>;

template <class Impl>
void register_single_thread(const std::string& impl) {
  benchmark::RegisterBenchmark(("Push/" + impl).c_str(), Push<Impl>);
  benchmark::RegisterBenchmark(("PushNoConsumer/" + impl).c_str(), PushNoConsumer<Impl>);
  benchmark::RegisterBenchmark(("Recv/" + impl).c_str(), Recv<Impl>);
  benchmark::RegisterBenchmark(("Lag/" + impl).c_str(), Lag<Impl>);
  benchmark::RegisterBenchmark(("IsFullyDrained/" + impl).c_str(), IsFullyDrained<Impl>)->Arg(1)->Arg(16);
}

template <class Impl>
void register_threads(const std::string& impl, bool both_apis) {
  auto* b = benchmark::RegisterBenchmark(("Threads/" + impl).c_str(), Threads<Impl>);
  b->ArgNames({"consumers", "batch"})->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(8);
  for (int api = 0; api <= (both_apis ? 1 : 0); ++api) {
    for (int c = 1; c <= 3; ++c) b->Args({c, api});
  }
}

void register_all() {
  register_single_thread<Ringcast>("ringcast");
  register_single_thread<BaselineSeed>("baseline");
  register_single_thread<BaselineLazy>("baseline_lazy");
  // Layout variants: push (the room check) and is_fully_drained (the scan).
  benchmark::RegisterBenchmark("Push/layout_padded_cached", Push<PaddedCached>);
  benchmark::RegisterBenchmark("Push/layout_packed_scan", Push<PackedScan>);
  benchmark::RegisterBenchmark("Push/layout_packed_cached", Push<PackedCached>);
  benchmark::RegisterBenchmark("Push/layout_padded_scan", Push<PaddedScan>);
  benchmark::RegisterBenchmark("IsFullyDrained/layout_padded_cached", IsFullyDrained<PaddedCached>)->Arg(1)->Arg(16);
  benchmark::RegisterBenchmark("IsFullyDrained/layout_packed_scan", IsFullyDrained<PackedScan>)->Arg(1)->Arg(16);

  register_threads<Ringcast>("ringcast", true);
  register_threads<RingcastOwnHandles>("ringcast_own_handles", true);
  register_threads<BaselineSeed>("baseline", true);
  register_threads<BaselineLazy>("baseline_lazy", true);
  register_threads<PaddedCached>("layout_padded_cached", false);
  register_threads<PackedScan>("layout_packed_scan", false);
  register_threads<PackedCached>("layout_packed_cached", false);
  register_threads<PaddedScan>("layout_padded_scan", false);
}

}  // namespace
}  // namespace ringcast::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ringcast::bench::register_all();
  benchmark::AddCustomContext("ringcast.threads_messages_per_iteration",
                              std::to_string(ringcast::bench::kThreadMessages));
  benchmark::AddCustomContext("ringcast.threads_capacity", std::to_string(ringcast::bench::kThreadCapacity));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
