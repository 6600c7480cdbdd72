#include "broker/connection_queue.hpp"

#include <string>

#include <fmt/format.h>

namespace ringcast::broker {

namespace {

class SteadyClockSource final : public Clock {
 public:
  [[nodiscard]] std::chrono::nanoseconds now() const noexcept override {
    return std::chrono::steady_clock::now().time_since_epoch();
  }
};

}  // namespace

const Clock& steady_clock_source() noexcept {
  static const SteadyClockSource kClock;
  return kClock;
}

std::string_view to_string(DropReason r) noexcept {
  switch (r) {
    case DropReason::kHardLimit:
      return "hard-limit";
    case DropReason::kSoftLimit:
      return "soft-limit";
    case DropReason::kDisconnect:
      return "disconnect";
  }
  return "unknown";
}

std::string format_loss_notice(std::uint64_t lost, std::uint64_t total, OverflowPolicy policy) {
  return fmt::format("lost={} total={} policy={}", lost, total, to_string(policy));
}

ConnectionQueue::ConnectionQueue(QueueLimits limits, OverflowPolicy policy, const Clock& clock)
    : limits_(limits), clock_(clock), policy_(policy) {}

void ConnectionQueue::ring_push(FrameRef f) {
  if (count_ == ring_.size()) {
    std::vector<FrameRef> bigger(ring_.empty() ? 16 : ring_.size() * 2);
    for (std::size_t i = 0; i < count_; ++i) {
      bigger[i] = std::move(ring_[(head_ + i) & (ring_.size() - 1)]);
    }
    ring_.swap(bigger);
    head_ = 0;
  }
  ring_[(head_ + count_) & (ring_.size() - 1)] = std::move(f);
  ++count_;
}

FrameRef ConnectionQueue::ring_pop_front() noexcept {
  FrameRef f = std::move(ring_[head_]);
  head_ = (head_ + 1) & (ring_.size() - 1);
  --count_;
  return f;
}

FrameRef ConnectionQueue::ring_erase(std::size_t i) noexcept {
  // Rare (a reply sits in front of the oldest message): shift the tail down.
  const std::size_t mask = ring_.size() - 1;
  FrameRef f = std::move(ring_[(head_ + i) & mask]);
  for (std::size_t j = i; j + 1 < count_; ++j) {
    ring_[(head_ + j) & mask] = std::move(ring_[(head_ + j + 1) & mask]);
  }
  --count_;
  return f;
}

PushResult ConnectionQueue::queued_locked() noexcept {
  const bool wake = !armed_;
  armed_ = true;
  return {PushStatus::kQueued, wake};
}

bool ConnectionQueue::evict_oldest_locked(DropReason reason) noexcept {
  for (std::size_t i = 0; i < count_; ++i) {
    if (!ring_at(i)->droppable()) continue;
    FrameRef f = i == 0 ? ring_pop_front() : ring_erase(i);
    queued_bytes_ -= f->size();
    ++dropped_[static_cast<std::size_t>(reason)];
    ++pending_loss_;
    ++total_loss_;
    return true;
  }
  return false;
}

void ConnectionQueue::close_locked(bool overflowed) noexcept {
  if (closed_) return;
  closed_ = true;
  overflowed_ = overflowed;
  while (count_ > 0) {
    FrameRef f = ring_pop_front();
    if (f->droppable()) ++dropped_[static_cast<std::size_t>(DropReason::kDisconnect)];
  }
  queued_bytes_ = 0;
}

PushResult ConnectionQueue::overflow_locked(FrameRef frame, std::size_t limit,
                                            DropReason reason) noexcept {
  const std::size_t size = frame->size();
  switch (policy_) {
    case OverflowPolicy::kDropNewest:
      break;
    case OverflowPolicy::kDropOldest:
      while (queued_bytes_ + inflight_bytes_ + size > limit && evict_oldest_locked(reason)) {
      }
      if (queued_bytes_ + inflight_bytes_ + size <= limit) {
        queued_bytes_ += size;
        ring_push(std::move(frame));
        return queued_locked();
      }
      break;  // in-flight bytes and replies alone fill the limit: lose the new one
    case OverflowPolicy::kDisconnect: {
      ++dropped_[static_cast<std::size_t>(DropReason::kDisconnect)];
      close_locked(true);
      // Always wake: the writer may be parked waiting for a socket that will
      // never drain, and only it can close the connection.
      armed_ = true;
      return {PushStatus::kClosed, true};
    }
  }
  ++dropped_[static_cast<std::size_t>(reason)];
  ++pending_loss_;
  ++total_loss_;
  return {PushStatus::kDropped, false};
}

void ConnectionQueue::maybe_queue_notice_locked() noexcept {
  if (pending_loss_ == 0 || closed_) return;
  // "Room again" means under half the limit that caused the loss, so the notice
  // itself cannot be what tips the queue back into overflow.
  const std::size_t limit = limits_.soft_bytes > 0 ? limits_.soft_bytes : limits_.hard_bytes;
  const std::string payload = format_loss_notice(pending_loss_, total_loss_, policy_);
  // Upper bound of the encoded size; exact enough for a watermark.
  const std::size_t size = 64 + kLossChannel.size() + payload.size();
  if (queued_bytes_ + inflight_bytes_ + size > limit / 2) return;
  FrameRef msg = encode_message(resp_, kLossChannel, payload);
  FrameRef notice = FrameRef::copy_of(msg->view(), /*droppable=*/false);
  queued_bytes_ += notice->size();
  ring_push(std::move(notice));
  pending_loss_ = 0;
  ++notices_;
}

PushResult ConnectionQueue::push(FrameRef frame) noexcept {
  std::lock_guard lock(mu_);
  if (closed_) return {PushStatus::kClosed, false};
  const std::size_t size = frame->size();
  if (!frame->droppable()) {
    if (policy_ == OverflowPolicy::kDropOldest) {
      while (queued_bytes_ + inflight_bytes_ + size > limits_.hard_bytes &&
             evict_oldest_locked(DropReason::kHardLimit)) {
      }
    }
    if (queued_bytes_ + inflight_bytes_ + size > limits_.hard_bytes) {
      close_locked(true);
      armed_ = true;
      return {PushStatus::kClosed, true};  // as above: the writer may be parked
    }
    queued_bytes_ += size;
    ring_push(std::move(frame));
    return queued_locked();
  }

  maybe_queue_notice_locked();
  const std::size_t total = queued_bytes_ + inflight_bytes_ + size;
  if (total > limits_.hard_bytes) {
    return overflow_locked(std::move(frame), limits_.hard_bytes, DropReason::kHardLimit);
  }
  if (limits_.soft_bytes > 0 && total > limits_.soft_bytes) {
    // The clock is read only here, while over the soft limit: the common path
    // pays for no time query.
    const std::chrono::nanoseconds now = clock_.now();
    if (soft_since_.count() < 0) {
      soft_since_ = now;
    } else if (now - soft_since_ >= limits_.soft_duration) {
      return overflow_locked(std::move(frame), limits_.soft_bytes, DropReason::kSoftLimit);
    }
  } else {
    soft_since_ = std::chrono::nanoseconds(-1);
  }
  queued_bytes_ += size;
  ring_push(std::move(frame));
  return queued_locked();
}

PopResult ConnectionQueue::pop_batch(std::size_t budget, std::size_t max_frames,
                                     std::vector<FrameRef>& out) noexcept {
  std::lock_guard lock(mu_);
  PopResult r;
  if (closed_) {
    r.closed = true;
    return r;
  }
  maybe_queue_notice_locked();
  while (count_ > 0 && r.frames < max_frames) {
    const std::size_t size = ring_at(0)->size();
    if (r.frames > 0 && r.bytes + size > budget) break;
    out.push_back(ring_pop_front());
    r.bytes += size;
    ++r.frames;
  }
  queued_bytes_ -= r.bytes;
  inflight_bytes_ += r.bytes;
  if (r.frames == 0) armed_ = false;
  r.more = count_ > 0;
  return r;
}

void ConnectionQueue::release(std::size_t bytes) noexcept {
  std::lock_guard lock(mu_);
  inflight_bytes_ -= bytes;
  if (queued_bytes_ + inflight_bytes_ <= limits_.soft_bytes) {
    soft_since_ = std::chrono::nanoseconds(-1);
  }
}

bool ConnectionQueue::complete(std::size_t bytes) noexcept {
  std::lock_guard lock(mu_);
  inflight_bytes_ -= bytes;
  if (queued_bytes_ + inflight_bytes_ <= limits_.soft_bytes) {
    soft_since_ = std::chrono::nanoseconds(-1);
  }
  if (closed_ || count_ > 0 || pending_loss_ > 0) return true;
  armed_ = false;
  return false;
}

void ConnectionQueue::close() noexcept {
  std::lock_guard lock(mu_);
  close_locked(false);
}

void ConnectionQueue::set_policy(OverflowPolicy p) noexcept {
  std::lock_guard lock(mu_);
  policy_ = p;
}

OverflowPolicy ConnectionQueue::policy() const noexcept {
  std::lock_guard lock(mu_);
  return policy_;
}

void ConnectionQueue::set_resp(Resp r) noexcept {
  std::lock_guard lock(mu_);
  resp_ = r;
}

std::size_t ConnectionQueue::total_bytes() const noexcept {
  std::lock_guard lock(mu_);
  return queued_bytes_ + inflight_bytes_;
}

bool ConnectionQueue::closed() const noexcept {
  std::lock_guard lock(mu_);
  return closed_;
}

QueueStats ConnectionQueue::stats() const noexcept {
  std::lock_guard lock(mu_);
  QueueStats s;
  s.queued_bytes = queued_bytes_;
  s.inflight_bytes = inflight_bytes_;
  s.queued_frames = count_;
  s.dropped = dropped_;
  s.notices = notices_;
  s.policy = policy_;
  s.closed = closed_;
  s.overflowed = overflowed_;
  return s;
}

}  // namespace ringcast::broker
