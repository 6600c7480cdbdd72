// The broker's fan-out path in-process, without sockets: what a publish costs
// per delivery in user space (index lookup, encoding, queue pushes and the
// writer's pop and release), as a run of k messages on one channel against the
// same k messages published one at a time. Google Benchmark; not a test.
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "broker/core/subscription_index.hpp"
#include "broker/queue/connection_queue.hpp"

namespace {

using namespace ringcast::broker;

class NullSubscriber final : public Subscriber {
 public:
  NullSubscriber()
      : Subscriber(WireFormat::kResp2, Deliveries::kPerSubscription, QueueLimits{}, OverflowPolicy::kDisconnect,
                   steady_clock_source()) {}
  ~NullSubscriber() override = default;
  void on_queue_ready() noexcept override {}
};

// N subscribers of "bench"; each iteration publishes k 52-byte messages, then
// every subscriber's writer takes and releases what it was given.
class Fanout {
 public:
  explicit Fanout(std::size_t subscribers) {
    for (std::size_t i = 0; i < subscribers; ++i) {
      subs_.push_back(std::make_unique<NullSubscriber>());
      auto lock = index_.lock_for_update();
      index_.add_channel(*subs_.back(), "bench");
    }
  }
  Fanout(const Fanout&) = delete;
  Fanout& operator=(const Fanout&) = delete;
  ~Fanout() {
    auto lock = index_.lock_for_update();
    for (auto& s : subs_) index_.remove_all(*s);
  }

  void publish(std::span<const Message> msgs, std::span<std::size_t> receivers) {
    index_.publish(msgs, false, receivers);
  }
  void write_all() {
    for (auto& s : subs_) {
      out_.clear();
      const PopResult r = s->queue().pop_batch(SIZE_MAX, 1024, out_);
      (void)s->queue().complete(r.bytes);
    }
  }

 private:
  SubscriptionIndex index_;
  std::vector<std::unique_ptr<NullSubscriber>> subs_;
  std::vector<FrameSpan> out_;
};

// args: subscribers, messages per publish call (1 = one call per message)
void run(benchmark::State& state, bool as_run) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto k = static_cast<std::size_t>(state.range(1));
  Fanout fanout(n);
  const std::string payload(52, 'p');
  const std::vector<Message> msgs(k, Message{"bench", payload});
  std::vector<std::size_t> receivers(k);
  for (auto _ : state) {
    if (as_run) {
      fanout.publish(msgs, receivers);
    } else {
      for (std::size_t i = 0; i < k; ++i) fanout.publish({&msgs[i], 1}, {&receivers[i], 1});
    }
    fanout.write_all();
    benchmark::DoNotOptimize(receivers.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<benchmark::IterationCount>(n * k));  // deliveries
}

void BM_FanoutRun(benchmark::State& state) { run(state, true); }
void BM_FanoutOneByOne(benchmark::State& state) { run(state, false); }

BENCHMARK(BM_FanoutRun)->Args({100, 1})->Args({100, 32})->Args({100, 256})->Args({10, 32});
BENCHMARK(BM_FanoutOneByOne)->Args({100, 32})->Args({100, 256})->Args({10, 32});

}  // namespace

BENCHMARK_MAIN();
