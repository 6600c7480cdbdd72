#include "broker/queue/flow_control.hpp"

#include <algorithm>

namespace ringcast::broker {

void FlowControl::begin_pressure() noexcept {
  // relaxed: the count is advisory for pressured(); wait_async re-reads it under mu_.
  pressured_.fetch_add(1, std::memory_order_relaxed);
}

void FlowControl::end_pressure() noexcept {
  // acq_rel: the decrement to zero is ordered before taking mu_ below, which
  // pairs with wait_async's read under mu_ (invariant 3).
  if (pressured_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::lock_guard lock(mu_);
  for (PaceWaiter* w : waiters_) w->on_room();
  waiters_.clear();  // keeps its capacity: no allocation on the next pause
  cv_.notify_all();
}

bool FlowControl::wait_async(PaceWaiter& w) {
  std::lock_guard lock(mu_);
  // acquire: pairs with end_pressure's decrement (invariant 3).
  if (pressured_.load(std::memory_order_acquire) <= 0) return false;
  waiters_.push_back(&w);
  return true;
}

void FlowControl::wait_room_async(PaceWaiter& w) {
  std::lock_guard lock(mu_);
  room_waiters_.push_back(&w);
  // relaxed: a hint for writers (has_blocked_waiters); invariant 4.
  blocked_waiters_.fetch_add(1, std::memory_order_relaxed);
}

void FlowControl::cancel(PaceWaiter& w) noexcept {
  std::lock_guard lock(mu_);
  waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), &w), waiters_.end());
  const auto gone = std::remove(room_waiters_.begin(), room_waiters_.end(), &w);
  // relaxed: a hint for writers.
  blocked_waiters_.fetch_sub(static_cast<std::uint32_t>(room_waiters_.end() - gone), std::memory_order_relaxed);
  room_waiters_.erase(gone, room_waiters_.end());
}

bool FlowControl::wait_for(std::chrono::nanoseconds timeout) {
  std::unique_lock lock(mu_);
  // acquire: pairs with end_pressure's decrement.
  return cv_.wait_for(lock, timeout, [this] { return pressured_.load(std::memory_order_acquire) <= 0; });
}

void FlowControl::notify_room() noexcept {
  std::lock_guard lock(mu_);
  ++room_epoch_;
  cv_.notify_all();
  for (PaceWaiter* w : room_waiters_) w->on_room();
  // relaxed: a hint for writers.
  blocked_waiters_.fetch_sub(static_cast<std::uint32_t>(room_waiters_.size()), std::memory_order_relaxed);
  room_waiters_.clear();  // keeps its capacity
}

void FlowControl::wait_room(std::chrono::nanoseconds timeout) {
  // relaxed: a hint for writers (has_blocked_waiters); the wait is bounded anyway.
  blocked_waiters_.fetch_add(1, std::memory_order_relaxed);
  {
    std::unique_lock lock(mu_);
    const std::uint64_t epoch = room_epoch_;
    cv_.wait_for(lock, timeout, [&] { return room_epoch_ != epoch; });
  }
  blocked_waiters_.fetch_sub(1, std::memory_order_relaxed);
}

void FlowControl::record_stall(std::chrono::nanoseconds d) noexcept {
  // relaxed: statistics.
  stalls_.fetch_add(1, std::memory_order_relaxed);
  stall_ns_.fetch_add(static_cast<std::uint64_t>(std::max<std::int64_t>(0, d.count())), std::memory_order_relaxed);
}

FlowStats FlowControl::stats() const noexcept {
  FlowStats s;
  // relaxed: statistics, each meaningful on its own.
  s.stalls = stalls_.load(std::memory_order_relaxed);
  s.stall_ns = stall_ns_.load(std::memory_order_relaxed);
  s.slow_marked = slow_marked_.load(std::memory_order_relaxed);
  s.pressured = static_cast<std::uint64_t>(std::max<std::int64_t>(0, pressured_.load(std::memory_order_relaxed)));
  return s;
}

}  // namespace ringcast::broker
