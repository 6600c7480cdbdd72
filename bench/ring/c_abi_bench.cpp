// ringcast_bench_c_abi: the C ABI's per-message cost against the C++ API's,
// 52-byte messages, one thread, the same anonymous ring shape for both
// (docs/benchmarks.md, "C ABI and bindings").
//
//   PushNoConsumer/<api>  try_push alone (1024 slots, nobody to wait for)
//   PushThenRecv/<api>    one try_push then one try_recv of it, per message
//   Batch64/<api>         64 messages pushed by one batch call, then received
//                         by one: cpp = try_push_batch and drain; c_drain =
//                         ringcast_try_push_batch and ringcast_drain (a
//                         callback per message); c_recv_batch = the same with
//                         ringcast_recv_batch (a copy into one buffer)
// api: cpp (BroadcastRing, inlined) or c (ringcast.h, a call per operation).
// Every received message's sequence number is checked; a wrong one fails the
// benchmark (SkipWithError). Run with --benchmark_enable_random_interleaving
// and repetitions: the two APIs then share the host's load.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "ringcast/broadcast_ring.hpp"
#include "ringcast/ringcast.h"
#include "workload.hpp"

namespace ringcast::bench {
namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "%s failed\n", what);
  std::exit(2);
}

constexpr std::size_t kBatch = 64;

// One ring and one consumer behind each API, with the same four operations.
struct Cpp {
  BroadcastRing ring;
  ConsumerId id = 0;
  explicit Cpp(std::uint64_t capacity, bool consumer) : ring(make(capacity)) {
    if (consumer) id = ring.register_consumer().value();
  }
  static BroadcastRing make(std::uint64_t capacity) {
    auto r = BroadcastRing::create_anonymous(capacity, {.max_message = kMaxPayload});
    if (!r) die("create_anonymous");
    return std::move(*r);
  }
  bool push(const Message& m) noexcept { return ring.try_push(m.span()) == Errc::ok; }
  std::uint32_t recv(std::span<std::byte> out) noexcept {
    const RecvResult r = ring.try_recv(id, out);
    return r ? r.length : 0;
  }
  bool push_batch(std::span<const std::byte> bytes) noexcept {
    std::array<std::span<const std::byte>, kBatch> spans;
    for (std::size_t i = 0; i < kBatch; ++i) spans[i] = bytes.subspan(i * kMaxPayload, kMaxPayload);
    return ring.try_push_batch(spans).count == kBatch;
  }
  template <class F>
  std::size_t drain(F&& f) noexcept {
    return ring.drain(id, f, kBatch).count;
  }
};

struct C {
  ringcast_ring* ring = nullptr;
  std::uint32_t id = 0;
  explicit C(std::uint64_t capacity, bool consumer) {
    ringcast_create_options o{};
    o.max_message = kMaxPayload;
    if (ringcast_create_anonymous(capacity, &o, &ring) != RINGCAST_OK) die("ringcast_create_anonymous");
    if (consumer && ringcast_register(ring, RINGCAST_START_LATEST, &id) != RINGCAST_OK) die("ringcast_register");
  }
  C(const C&) = delete;
  C& operator=(const C&) = delete;
  ~C() { ringcast_close(ring); }
  bool push(const Message& m) noexcept { return ringcast_try_push(ring, m.bytes, sizeof m.bytes) == RINGCAST_OK; }
  std::uint32_t recv(std::span<std::byte> out) noexcept {
    const ringcast_recv_result r = ringcast_try_recv(ring, id, out.data(), out.size());
    return r.status == RINGCAST_OK ? r.length : 0;
  }
  bool push_batch(std::span<const std::byte> bytes) noexcept {
    static constexpr auto kLengths = [] {
      std::array<std::uint32_t, kBatch> l{};
      l.fill(kMaxPayload);
      return l;
    }();
    return ringcast_try_push_batch(ring, bytes.data(), kLengths.data(), kBatch).count == kBatch;
  }
};

template <class Api>
void PushNoConsumer(benchmark::State& state) {
  Api api(1024, false);
  Message m;
  fill_message(m, 1, 2);
  for (auto _ : state) {
    if (!api.push(m)) [[unlikely]]
      state.SkipWithError("push failed");
  }
  state.SetItemsProcessed(state.iterations());
}

template <class Api>
void PushThenRecv(benchmark::State& state) {
  Api api(1024, true);
  Message m;
  alignas(8) std::array<std::byte, kMaxPayload> out{};
  std::uint64_t seq = 0;
  for (auto _ : state) {
    fill_message(m, seq, 0);
    if (!api.push(m) || api.recv(out) != kMaxPayload || message_seq(out) != seq) [[unlikely]] {
      state.SkipWithError("a message was lost or wrong");
      break;
    }
    ++seq;
  }
  state.SetItemsProcessed(state.iterations());
}

// Batch64: kBatch messages written back to back, one batch push, one batch
// receive; an iteration is one message (KeepRunningBatch).
struct Checker {
  std::uint64_t next = 0;
  bool ok = true;
  void operator()(std::span<const std::byte> m) noexcept { ok &= message_seq(m) == next++; }
};

template <class Receive>
void Batch(benchmark::State& state, auto& api, Receive&& receive) {
  Message m;
  alignas(8) std::array<std::byte, kBatch * kMaxPayload> bytes{};
  std::uint64_t seq = 0;
  Checker check;
  while (state.KeepRunningBatch(kBatch)) {
    for (std::size_t i = 0; i < kBatch; ++i) {
      fill_message(m, seq++, 0);
      std::memcpy(bytes.data() + i * kMaxPayload, m.bytes, kMaxPayload);
    }
    if (!api.push_batch(bytes)) [[unlikely]]
      state.SkipWithError("push failed");
    if (receive(check) != kBatch || !check.ok) [[unlikely]] {
      state.SkipWithError("a batch was short or wrong");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void Batch64Cpp(benchmark::State& state) {
  Cpp api(1024, true);
  Batch(state, api, [&](Checker& check) { return api.drain(check); });
}

int on_message(void* context, const void* data, std::size_t length) {
  (*static_cast<Checker*>(context))({static_cast<const std::byte*>(data), length});
  return 0;
}

void Batch64CDrain(benchmark::State& state) {
  C api(1024, true);
  Batch(state, api, [&](Checker& check) { return ringcast_drain(api.ring, api.id, on_message, &check, kBatch).count; });
}

void Batch64CRecvBatch(benchmark::State& state) {
  C api(1024, true);
  alignas(8) std::array<std::byte, kBatch * kMaxPayload> buffer{};
  std::array<std::uint32_t, kBatch> lengths{};
  Batch(state, api, [&](Checker& check) {
    const ringcast_batch_result b =
        ringcast_recv_batch(api.ring, api.id, buffer.data(), buffer.size(), lengths.data(), kBatch);
    std::size_t at = 0;
    for (std::size_t i = 0; i < b.count; ++i) {
      check({buffer.data() + at, lengths[i]});
      at += lengths[i];
    }
    return b.count;
  });
}

BENCHMARK(PushNoConsumer<Cpp>)->Name("PushNoConsumer/cpp");
BENCHMARK(PushNoConsumer<C>)->Name("PushNoConsumer/c");
BENCHMARK(PushThenRecv<Cpp>)->Name("PushThenRecv/cpp");
BENCHMARK(PushThenRecv<C>)->Name("PushThenRecv/c");
BENCHMARK(Batch64Cpp)->Name("Batch64/cpp");
BENCHMARK(Batch64CDrain)->Name("Batch64/c_drain");
BENCHMARK(Batch64CRecvBatch)->Name("Batch64/c_recv_batch");

}  // namespace
}  // namespace ringcast::bench

BENCHMARK_MAIN();
