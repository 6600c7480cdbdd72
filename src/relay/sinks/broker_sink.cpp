#include "relay/sinks/broker_sink.hpp"

#include <cassert>
#include <span>

namespace ringcast::relay {

BrokerSink::BrokerSink(broker::Broker& broker, const std::atomic<bool>& stop) : broker_(broker), stop_(stop) {
  // Sized once: put() never allocates (invariant 3).
  pending_.reserve(kMaxStaged);
  receivers_.resize(kMaxStaged);
}

void BrokerSink::put(const Staged& m) noexcept {
  assert(pending_.size() < kMaxStaged);  // the reader flushes first (sink.hpp, contract 3)
  // Within the reserved capacity: no allocation (invariant 3).
  pending_.push_back({m.channel, m.body});
}

void BrokerSink::flush() noexcept {
  if (pending_.empty()) return;
  // A refused message waits until a `block` subscriber has room (or the relay
  // or the broker stops); the reader takes nothing meanwhile, so the views in
  // pending_ stay valid.
  const broker::PublishResult r = broker_.publish(pending_, std::span<std::size_t>(receivers_.data(), pending_.size()),
                                                  broker::PublishWait::kUntilAccepted, {&stop_, count_refused, this});
  counters_.deliveries += r.receivers;
  pending_.clear();
}

void BrokerSink::count_refused(void* self) noexcept {
  auto* sink = static_cast<BrokerSink*>(self);
  ++sink->counters_.refused;
  sink->waiting();  // the ring fills meanwhile: its lag shows it
}

}  // namespace ringcast::relay
