// BrokerSink: a ring route's output into the embedded broker
// (docs/relay.md). Holds what it is put() as one batch and publishes it with
// one Broker::publish(span) call at flush(), in ring order.
//
// Invariants
//  1. Every message put() reaches the broker in ring order, the batch of one
//     flush() in one Broker::publish call; nothing is dropped: while a `block`
//     subscriber refuses, that call holds until the refused message and the
//     rest are accepted (PublishWait::kUntilAccepted), or the relay or the
//     broker stops. The reader takes nothing from its ring meanwhile, so the
//     ring's producer meets `full` (or, on a lossy ring, laps the relay).
//  2. The pending Messages view what put() was given (keeps_views()); they
//     are published before those views end (sink.hpp, contract 2).
//  3. No allocation after construction: the batch holds kMaxStaged messages.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include "relay/sinks/sink.hpp"
#include "ringcast/broker/broker.hpp"
#include "ringcast/broker/message.hpp"

namespace ringcast::relay {

class BrokerSink final : public Sink {
 public:
  // `broker` and `stop` (the relay's stop flag) must outlive this sink.
  BrokerSink(broker::Broker& broker, const std::atomic<bool>& stop);

  void open(const std::string& source) override { (void)source; }
  void put(const Staged& m) noexcept override;
  // Publishes the batch; no-op when it is empty. While the broker paces
  // publishers, waits up to its max_stall; while a `block` subscriber refuses,
  // waits as invariant 1 says, counting each refusal (refused) and calling
  // waiting().
  void flush() noexcept override;
  [[nodiscard]] bool keeps_views() const noexcept override { return true; }

 private:
  // PublishHold::on_refused, on the reader's thread.
  static void count_refused(void* self) noexcept;

  broker::Broker& broker_;
  const std::atomic<bool>& stop_;
  std::vector<broker::Message> pending_;  // capacity kMaxStaged
  std::vector<std::size_t> receivers_;    // kMaxStaged entries: per-message deliveries
};

}  // namespace ringcast::relay
