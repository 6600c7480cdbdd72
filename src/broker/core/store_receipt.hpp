// A QoS 1 message the cluster is storing while its publisher goes on
// (BrokerCore::publish with a receipt, ClusterLink::store_async): the
// publisher holds it, the link completes it, once, from its own thread, and
// the completion wakes the publisher's connection, which then answers
// (ws_session.hpp, invariant 9).
//
// Thread safety: complete() once, from any thread; state() and offset() from
// the publisher's thread. offset_ is written before state_'s release store
// and read after an acquire load that saw kStored, so the publisher reads
// the offset the link wrote.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "broker/core/remote_wake.hpp"

namespace ringcast::broker {

class StoreReceipt {
 public:
  enum class State : std::uint8_t { kPending, kStored, kFailed };

  explicit StoreReceipt(std::shared_ptr<RemoteWake> wake) noexcept : wake_(std::move(wake)) {}

  void complete(bool stored, std::uint64_t offset) noexcept {
    offset_ = offset;
    state_.store(stored ? State::kStored : State::kFailed, std::memory_order_release);
    wake_->wake();
  }
  [[nodiscard]] State state() const noexcept { return state_.load(std::memory_order_acquire); }
  // REQUIRES: state() returned kStored.
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }

 private:
  std::atomic<State> state_{State::kPending};
  std::uint64_t offset_ = 0;
  const std::shared_ptr<RemoteWake> wake_;
};

}  // namespace ringcast::broker
