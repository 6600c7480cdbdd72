#include "broker/core/client.hpp"

#include <utility>

#include "broker/core/broker_core.hpp"

namespace ringcast::broker {

Client::Client(BrokerCore& core, std::string peer, WireFormat format, Waker& waker, bool authenticated)
    : Subscriber(format, core.config().queue_limits, core.config().overflow_policy, core.clock(), &core.flow()),
      core_(core),
      waker_(waker),
      id_(core.next_client_id()),
      peer_(std::move(peer)),
      authenticated_(authenticated),
      format_mirror_(format) {
  core_.register_client(*this);
}

Client::~Client() { detach(); }

void Client::detach() noexcept {
  if (detached_) return;
  detached_ = true;
  core_.update(*this).unsubscribe_all();
  // After the index lock is released no publisher can reach this client again
  // (index invariant 3); closing the queue frees whatever it still holds.
  queue().close();
  core_.unregister_client(*this);
}

void Client::refresh_mirrors() noexcept {
  // relaxed: display-only mirrors for other threads' CLIENT LIST.
  nsub_.store(static_cast<std::uint32_t>(channels().size()), std::memory_order_relaxed);
  npsub_.store(static_cast<std::uint32_t>(patterns().size()), std::memory_order_relaxed);
  nssub_.store(static_cast<std::uint32_t>(shard_channels().size()), std::memory_order_relaxed);
  format_mirror_.store(format(), std::memory_order_relaxed);
}

std::string Client::name() const {
  std::lock_guard lock(name_mu_);
  return name_;
}

void Client::set_name(std::string name) {
  std::lock_guard lock(name_mu_);
  name_ = std::move(name);
}

bool Client::push_reply(std::string_view bytes) {
  const PushResult r = queue().push(FrameRef::copy_of(bytes, /*droppable=*/false));
  if (r.wake) on_queue_ready();
  return r.status != PushStatus::kClosed;
}

}  // namespace ringcast::broker
