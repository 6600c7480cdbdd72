// History store appends (src/broker/guarantees/history_store.hpp): 52-byte
// messages on one channel in runs of 1, 64 and 1024, LMDB with --fsync batch
// (a flush every 5 ms from another thread, as the broker's timer will) and off,
// and the memory store. The LMDB directory is on disk under /var/tmp (not
// tmpfs, so that batch's mdb_env_sync really writes). Retention keeps 1 M messages, so a long
// run also pays for pruning. Issue 14's target: batch >= 1 M messages/s.
// BM_BrokerPublish: the same 52-byte messages through Broker::publish (an
// in-process broker, no subscribers, no sockets: the index's ids and runs and
// the history append, as the relay publishes) with no history, history in
// memory, and LMDB --fsync batch with the broker's own 5 ms timer.
// Google Benchmark; not a test.
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "broker/guarantees/history_store.hpp"
#include "ringcast/broker/broker.hpp"

namespace {

using namespace ringcast::broker;

std::vector<RetentionRule> bench_rules() { return {parse_retention("*=1000000").value()}; }

// Appends runs of state.range(0) messages. With `flush_every_5ms`, a second
// thread calls flush() every 5 ms while the appends run, as the broker's timer
// will: the appending thread never waits for the fsync itself.
void run_appends(benchmark::State& state, HistoryStore& store, bool flush_every_5ms) {
  const auto run_len = static_cast<std::size_t>(state.range(0));
  const std::string payload(52, 'm');
  const std::vector<HistoryInput> run(run_len, HistoryInput{payload, 1});
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> flushes{0};
  std::thread flusher;
  if (flush_every_5ms)
    flusher = std::thread([&] {
      // relaxed: a stop flag polled every 5 ms; the join below orders the rest.
      while (!stop.load(std::memory_order_relaxed)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (store.flush()) flushes.fetch_add(1, std::memory_order_relaxed);
      }
    });
  std::uint64_t next = 1;
  for (auto _ : state) {
    if (!store.append("bench", next, run, 1)) state.SkipWithError("append failed");
    next += run_len;
  }
  if (flusher.joinable()) {
    stop.store(true, std::memory_order_relaxed);
    flusher.join();
    state.counters["flushes"] = static_cast<double>(flushes.load(std::memory_order_relaxed));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(run_len));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(run_len * payload.size()));
}

void BM_LmdbAppend(benchmark::State& state) {
  const auto mode = static_cast<FsyncMode>(state.range(1));
  std::string dir = "/var/tmp/ringcast-history-bench-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) throw std::runtime_error("mkdtemp");
  {
    HistoryOptions o;
    o.dir = dir;
    o.fsync = mode;
    o.initial_map_bytes = std::size_t{1} << 30;
    o.rules = bench_rules();
    auto store = open_lmdb_history_store(std::move(o));
    if (!store) {
      state.SkipWithError(store.error().message().c_str());
    } else {
      run_appends(state, **store, mode == FsyncMode::kBatch);
    }
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_LmdbAppend)
    ->ArgNames({"run", "fsync"})
    ->ArgsProduct({{1, 64, 1024}, {static_cast<int>(FsyncMode::kBatch), static_cast<int>(FsyncMode::kOff)}})
    ->UseRealTime();

void BM_MemoryAppend(benchmark::State& state) {
  auto store = make_memory_history_store(bench_rules());
  run_appends(state, *store, false);
}
BENCHMARK(BM_MemoryAppend)->ArgName("run")->Arg(1)->Arg(64)->Arg(1024)->UseRealTime();

// Publishes batches of state.range(1) messages (the relay's batch is 1024)
// through a broker whose history is none (0), memory (1) or LMDB batch (2).
void BM_BrokerPublish(benchmark::State& state) {
  const auto kind = state.range(0);
  const auto batch = static_cast<std::size_t>(state.range(1));
  std::string dir = "/var/tmp/ringcast-history-bench-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) throw std::runtime_error("mkdtemp");
  {
    BrokerConfig cfg;
    cfg.port = 0;
    cfg.io_threads = 1;
    if (kind >= 1) cfg.history = {"*=1000000"};
    if (kind == 2) cfg.data_dir = dir + "/data";
    auto broker = Broker::start(cfg);
    if (!broker) {
      state.SkipWithError(broker.error().message().c_str());
    } else {
      const std::string payload(52, 'm');
      const std::vector<Message> msgs(batch, Message{"bench", payload});
      std::vector<std::size_t> receivers(batch);
      for (auto _ : state) {
        if ((*broker)->publish(msgs, receivers).published != batch) state.SkipWithError("publish failed");
      }
      state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(batch));
    }
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_BrokerPublish)->ArgNames({"history", "batch"})->ArgsProduct({{0, 1, 2}, {64, 1024}})->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
