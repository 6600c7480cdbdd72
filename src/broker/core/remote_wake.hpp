// A client's wake-up for threads outside the broker (a cluster link's ack
// thread completing a StoreReceipt): callable at any time, even after the
// client has left, unlike Subscriber::on_queue_ready(), which a publisher may
// call only while it reaches the client through the index.
//
// Thread safety: wake() from any thread; cut() by the client's owner.
// Invariant: after cut() returns, no wake() reaches the client again (both
// hold mu_), so Client::detach() cuts it before the connection can die
// (server/connection.hpp, L3: the ready lists hold no entry of it after that).
#pragma once

#include <mutex>

#include "broker/core/subscription_index.hpp"

namespace ringcast::broker {

class RemoteWake {
 public:
  explicit RemoteWake(Subscriber& client) noexcept : client_(&client) {}

  // Makes the client's connection run its writer and its timer
  // (Client::next_timer); nothing once cut.
  void wake() noexcept {
    std::lock_guard lock(mu_);
    if (client_ != nullptr) client_->on_queue_ready();
  }
  void cut() noexcept {
    std::lock_guard lock(mu_);
    client_ = nullptr;
  }

 private:
  std::mutex mu_;
  Subscriber* client_;  // guarded by mu_; null once cut
};

}  // namespace ringcast::broker
