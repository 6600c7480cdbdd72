#include "broker/queue/connection_queue.hpp"

#include <algorithm>
#include <string>

#include <fmt/format.h>

namespace ringcast::broker {

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

std::string format_loss_notice(std::uint64_t lost, std::uint64_t total, OverflowPolicy policy, std::uint64_t conflated,
                               std::uint64_t upstream) {
  std::string out = fmt::format("lost={} total={} policy={}", lost, total, to_string(policy));
  if (conflated > 0) out += fmt::format(" conflated={}", conflated);
  if (upstream > 0) out += fmt::format(" upstream={}", upstream);
  return out;
}

ConnectionQueue::ConnectionQueue(QueueLimits limits, OverflowPolicy policy, const Clock& clock, FlowControl* flow)
    : limits_(limits), clock_(clock), flow_(flow), policy_(policy), blocking_(policy == OverflowPolicy::kBlock) {}

void ConnectionQueue::append_locked(const FrameRef& block, std::uint32_t i) {
  queued_bytes_ += block->end(i) - block->begin(i);
  ++queued_frames_;
  if (conflating_ && block->droppable()) {  // a span of its own (invariant 6)
    spans_.push_back(FrameSpan{block, i, 1});
    index_locked(key_locked(block->frame(i)), spans_.front_position() + spans_.size() - 1);
    return;
  }
  if (!spans_.empty()) {
    FrameSpan& last = spans_[spans_.size() - 1];
    if (last.block.get() == block.get() && last.first + last.count == i) {
      ++last.count;
      return;
    }
  }
  spans_.push_back(FrameSpan{block, i, 1});
}

void ConnectionQueue::pace_after_push_locked() noexcept {
  // The common path: pacing is off, or an unpaced queue is under the mark.
  // `block` queues refuse instead of pacing: their room is the limit itself.
  if (flow_ == nullptr || flow_->pace_bytes() == 0 || closed_ || slow_ || policy_ == OverflowPolicy::kBlock) return;
  const std::size_t total = queued_bytes_ + inflight_bytes_;
  if (!paced_) {
    if (total <= flow_->pace_bytes()) return;
    paced_ = true;
    over_since_ = clock_.now();
    flow_->begin_pressure();
    return;
  }
  // Paced. The policy may have taken the queue back under the mark (conflation,
  // drop-oldest) while the writer releases nothing: a parked writer's batch
  // stays in flight. So the max_stall bound holds whatever the total is now
  // (invariant 7), and a queue back at resume_bytes stops pressing at once, as
  // a drain would have made it.
  if (total <= flow_->resume_bytes()) {
    paced_ = false;
    flow_->end_pressure();
  } else if (clock_.now() - over_since_ >= flow_->max_stall()) {
    // Publishers were paced for max_stall and this queue did not drain: it is the
    // slow one. Stop pacing for it; its policy and limits take over (invariant 7).
    paced_ = false;
    slow_ = true;
    flow_->count_slow();
    flow_->end_pressure();
  }
}

void ConnectionQueue::pace_after_drain_locked() noexcept {
  if (!paced_ && !slow_) return;
  if (!closed_ && queued_bytes_ + inflight_bytes_ > flow_->resume_bytes()) return;
  slow_ = false;
  if (paced_) {
    paced_ = false;
    flow_->end_pressure();
  }
}

PushResult ConnectionQueue::queued_locked() noexcept {
  const bool wake = !armed_;
  armed_ = true;
  return {PushStatus::kQueued, wake};
}

void ConnectionQueue::index_locked(std::string_view key, std::uint64_t pos) {
  if (auto it = conflation_index_.find(key); it != conflation_index_.end()) {
    it->second = pos;
    return;
  }
  conflation_index_.emplace(std::string(key), pos);
  if (conflation_index_.size() > 2 * (spans_.size() - dead_) + 64) {  // sweep the stale entries
    for (auto it = conflation_index_.begin(); it != conflation_index_.end();) {
      it = live_at(it->second) ? std::next(it) : conflation_index_.erase(it);
    }
  }
}

void ConnectionQueue::pop_dead_front_locked() noexcept {
  while (!spans_.empty() && !spans_[0].block) {
    (void)spans_.pop_front();
    --dead_;
  }
}

void ConnectionQueue::bury_locked(std::size_t i) noexcept {
  FrameSpan& s = spans_[i];
  queued_bytes_ -= s.size();
  queued_frames_ -= s.count;
  s = FrameSpan{};
  ++dead_;
  pop_dead_front_locked();
  compact_locked(false);
}

void ConnectionQueue::compact_locked(bool force) noexcept {
  if (dead_ == 0 || (!force && (dead_ < 32 || 2 * dead_ <= spans_.size()))) return;
  std::size_t w = 0;
  for (std::size_t r = 0; r < spans_.size(); ++r) {
    if (!spans_[r].block) continue;
    if (w != r) spans_[w] = std::move(spans_[r]);
    const FrameSpan& s = spans_[w];
    if (s.block->droppable()) {
      if (auto it = conflation_index_.find(key_locked(s.block->frame(s.first))); it != conflation_index_.end()) {
        it->second = spans_.front_position() + w;
      }
    }
    ++w;
  }
  spans_.truncate(w);
  dead_ = 0;
}

void ConnectionQueue::supersede_locked(std::string_view key) noexcept {
  auto it = conflation_index_.find(key);
  if (it == conflation_index_.end() || !live_at(it->second)) return;
  const auto i = static_cast<std::size_t>(it->second - spans_.front_position());
  it->second = kNotQueued;  // until the newer frame is queued, if it is
  if (i == 0) {
    const FrameSpan s = spans_.pop_front();
    queued_bytes_ -= s.size();
    queued_frames_ -= s.count;
    pop_dead_front_locked();
  } else {
    bury_locked(i);
  }
  ++conflated_;
  ++pending_conflated_;
  ++pending_loss_;
  ++total_loss_;
}

void ConnectionQueue::enter_conflation_locked() {
  conflating_ = true;
  // Newest to oldest: the first frame met of each key survives. Replies stay.
  rebuild_.clear();
  for (std::size_t r = spans_.size(); r-- > 0;) {
    FrameSpan& s = spans_[r];
    if (!s.block->droppable()) {
      rebuild_.push_back(std::move(s));
      continue;
    }
    for (std::uint32_t f = s.first + s.count; f-- > s.first;) {
      const std::string_view frame = s.block->frame(f);
      const std::string_view key = key_locked(frame);
      if (conflation_index_.find(key) != conflation_index_.end()) {
        queued_bytes_ -= frame.size();
        --queued_frames_;
        ++conflated_;
        ++pending_conflated_;
        ++pending_loss_;
        ++total_loss_;
        continue;
      }
      conflation_index_.emplace(std::string(key), kNotQueued);
      rebuild_.push_back(s.block->count() == 1 ? FrameSpan{s.block, f, 1}
                                               : FrameSpan{FrameRef::copy_of(frame, true), 0, 1});
    }
  }
  spans_.truncate(0);
  for (std::size_t k = rebuild_.size(); k-- > 0;) {
    FrameSpan& s = rebuild_[k];
    if (s.block->droppable()) {
      conflation_index_.find(key_locked(s.block->frame(s.first)))->second = spans_.front_position() + spans_.size();
    }
    spans_.push_back(std::move(s));
  }
  rebuild_.clear();
}

void ConnectionQueue::leave_conflation_locked() noexcept {
  compact_locked(true);
  conflation_index_.clear();
  conflating_ = false;
}

bool ConnectionQueue::evict_oldest_locked(DropReason reason) noexcept {
  for (std::size_t i = 0; i < spans_.size(); ++i) {
    FrameSpan& s = spans_[i];
    if (!s.block || !s.block->droppable()) continue;
    if (conflating_) {  // one frame per span; a tombstone unless it is the front
      if (auto it = conflation_index_.find(key_locked(s.block->frame(s.first))); it != conflation_index_.end()) {
        it->second = kNotQueued;
      }
      if (i == 0) {
        queued_bytes_ -= s.size();
        --queued_frames_;
        (void)spans_.pop_front();
        pop_dead_front_locked();
      } else {
        bury_locked(i);
      }
      ++dropped_[static_cast<std::size_t>(reason)];
      ++pending_loss_;
      ++total_loss_;
      return true;
    }
    queued_bytes_ -= s.block->end(s.first) - s.block->begin(s.first);
    --queued_frames_;
    ++s.first;
    if (--s.count == 0) {
      if (i == 0) {
        (void)spans_.pop_front();
      } else {
        spans_.erase(i);
      }
    }
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
  pace_after_drain_locked();  // a closed queue paces nobody
  while (!spans_.empty()) {
    const FrameSpan s = spans_.pop_front();
    if (s.block && s.block->droppable()) dropped_[static_cast<std::size_t>(DropReason::kDisconnect)] += s.count;
  }
  queued_bytes_ = 0;
  queued_frames_ = 0;
  dead_ = 0;
  conflation_index_.clear();
  conflating_ = false;
}

PushResult ConnectionQueue::overflow_locked(const FrameRef& block, std::uint32_t i, std::size_t limit,
                                            DropReason reason) noexcept {
  const std::size_t size = block->end(i) - block->begin(i);
  switch (policy_) {
    case OverflowPolicy::kDropNewest:
      break;
    case OverflowPolicy::kConflate:
      // Keep the newest per key; if the survivors still do not leave room,
      // evict the oldest as drop-oldest does.
      if (!conflating_) {
        enter_conflation_locked();
        supersede_locked(key_locked(block->frame(i)));
      }
      [[fallthrough]];
    case OverflowPolicy::kDropOldest:
      while (queued_bytes_ + inflight_bytes_ + size > limit && evict_oldest_locked(reason)) {
      }
      if (queued_bytes_ + inflight_bytes_ + size <= limit) {
        append_locked(block, i);
        return queued_locked();
      }
      break;                      // in-flight bytes and replies alone fill the limit: lose the new one
    case OverflowPolicy::kBlock:  // room was checked by the publisher; a race overshot the hard limit
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
  // While conflating, losses happen with room to spare: the notice waits until
  // the survivors have been written, so notices cannot pile up behind them.
  if (pending_loss_ == 0 || closed_ || conflating_) return;
  // "Room again" means under half the limit that caused the loss, so the notice
  // itself cannot be what tips the queue back into overflow.
  const std::size_t limit = limits_.soft_bytes > 0 ? limits_.soft_bytes : limits_.hard_bytes;
  const std::string payload =
      format_loss_notice(pending_loss_, total_loss_, policy_, pending_conflated_, pending_upstream_);
  // Upper bound of the encoded size; exact enough for a watermark.
  const std::size_t size = 64 + kLossChannel.size() + payload.size();
  if (queued_bytes_ + inflight_bytes_ + size > limit / 2) return;
  const FrameRef msg = encode_message(format_, kLossChannel, payload);
  append_locked(FrameRef::copy_of(msg->view(), /*droppable=*/false), 0);
  pending_loss_ = 0;
  pending_conflated_ = 0;
  pending_upstream_ = 0;
  ++notices_;
}

bool ConnectionQueue::note_qos1_loss(Qos1Loss kind, std::string_view channel, std::uint64_t id, std::uint64_t total,
                                     std::uint32_t sends) noexcept {
  std::lock_guard lock(mu_);
  if (closed_) return false;
  if (owed_ == nullptr) owed_ = std::make_unique<LossRanges>();
  owed_->add(kind, channel, id, total, sends);
  queue_owed_notices_locked();
  // Queued or owed, the writer must look (complete() keeps it running while
  // a notice is owed).
  return queued_locked().wake;
}

void ConnectionQueue::queue_owed_notices_locked() noexcept {
  const std::size_t limit = limits_.soft_bytes > 0 ? limits_.soft_bytes : limits_.hard_bytes;
  while (owed_ != nullptr) {
    const std::string payload = owed_->front();
    const std::size_t used = queued_bytes_ + inflight_bytes_;
    // Upper bound of the encoded size, as for the queue's own notice.
    if (used > 0 && used + 64 + kLossChannel.size() + payload.size() > limit / 2) return;
    const FrameRef msg = encode_message(format_, kLossChannel, payload);
    append_locked(FrameRef::copy_of(msg->view(), /*droppable=*/false), 0);
    owed_->pop_front();
    if (owed_->empty()) owed_.reset();  // invariant 9
    ++notices_;
  }
}

bool ConnectionQueue::note_upstream_loss(std::uint64_t lost) noexcept {
  std::lock_guard lock(mu_);
  if (closed_ || lost == 0) return false;
  pending_loss_ += lost;
  total_loss_ += lost;
  pending_upstream_ += lost;
  maybe_queue_notice_locked();
  // Queued or owed, the writer must look (complete() keeps it running while
  // a notice is owed).
  return queued_locked().wake;
}

PushResult ConnectionQueue::push_one_locked(const FrameRef& block, std::uint32_t i) noexcept {
  const std::size_t size = block->end(i) - block->begin(i);
  if (!block->droppable()) {
    if (policy_ == OverflowPolicy::kDropOldest || policy_ == OverflowPolicy::kConflate) {
      while (queued_bytes_ + inflight_bytes_ + size > limits_.hard_bytes &&
             evict_oldest_locked(DropReason::kHardLimit)) {
      }
    }
    if (queued_bytes_ + inflight_bytes_ + size > limits_.hard_bytes) {
      close_locked(true);
      armed_ = true;
      return {PushStatus::kClosed, true};  // as above: the writer may be parked
    }
    append_locked(block, i);
    return queued_locked();
  }

  maybe_queue_notice_locked();
  if (conflating_) supersede_locked(key_locked(block->frame(i)));
  const std::size_t total = queued_bytes_ + inflight_bytes_ + size;
  if (total > limits_.hard_bytes) return overflow_locked(block, i, limits_.hard_bytes, DropReason::kHardLimit);
  // `block`: the soft limit is the room the publisher checked (room_frames), not
  // a timed limit.
  if (limits_.soft_bytes > 0 && total > limits_.soft_bytes && policy_ != OverflowPolicy::kBlock) {
    // The clock is read only here, while over the soft limit: the common path
    // pays for no time query.
    const std::chrono::nanoseconds now = clock_.now();
    if (soft_since_.count() < 0) {
      soft_since_ = now;
    } else if (now - soft_since_ >= limits_.soft_duration) {
      return overflow_locked(block, i, limits_.soft_bytes, DropReason::kSoftLimit);
    }
  } else {
    soft_since_ = std::chrono::nanoseconds(-1);
  }
  append_locked(block, i);
  return queued_locked();
}

PushResult ConnectionQueue::push(const FrameRef& block) noexcept {
  std::lock_guard lock(mu_);
  if (closed_) return {PushStatus::kClosed, false};
  // The common case in O(1): the whole block fits under both limits and no loss
  // waits to be reported, so frame by frame no frame would meet the policy (the
  // loop below would queue each one and clear the soft timer).
  if (block->droppable() && pending_loss_ == 0 && !conflating_) {
    const std::size_t total = queued_bytes_ + inflight_bytes_ + block->size();
    if (total <= limits_.hard_bytes && (limits_.soft_bytes == 0 || total <= limits_.soft_bytes)) {
      soft_since_ = std::chrono::nanoseconds(-1);
      queued_bytes_ += block->size();
      queued_frames_ += block->count();
      spans_.push_back(FrameSpan{block, 0, block->count()});  // a block is offered to a queue once
      pace_after_push_locked();
      return queued_locked();
    }
  }
  PushResult result{PushStatus::kQueued, false};
  const std::uint64_t created_before = spans_.pushed();
  const std::uint64_t lost_before = total_loss_;
  for (std::uint32_t i = 0; i < block->count(); ++i) {
    if (closed_) return {PushStatus::kClosed, result.wake};
    const PushResult r = push_one_locked(block, i);
    result.wake = result.wake || r.wake;
    if (r.status != PushStatus::kQueued) result.status = r.status;
  }
  if (closed_) return {PushStatus::kClosed, result.wake};
  if (total_loss_ != lost_before || conflating_) privatize_locked(block, spans_.pushed() - created_before);
  if (block->droppable()) pace_after_push_locked();
  return result;
}

void ConnectionQueue::privatize_locked(const FrameRef& block, std::size_t created) {
  // This push's spans are the last ones created (pushes append; evictions and
  // pops take from the front), and no other push offered this block here.
  const std::size_t n = std::min(created, spans_.size());
  std::uint32_t held = 0;
  for (std::size_t j = spans_.size() - n; j < spans_.size(); ++j) {
    if (spans_[j].block.get() == block.get()) held += spans_[j].count;
  }
  // While conflating, any frame of a block of several is copied (invariant 5).
  if (held == 0 || (held == block->count() && (!conflating_ || held == 1))) return;
  for (std::size_t j = spans_.size() - n; j < spans_.size(); ++j) {
    FrameSpan& s = spans_[j];
    if (s.block.get() == block.get()) s = FrameSpan{copy_frames(s), 0, s.count};
  }
}

PopResult ConnectionQueue::pop_batch(std::size_t budget, std::size_t max_spans, std::vector<FrameSpan>& out) noexcept {
  std::lock_guard lock(mu_);
  PopResult r;
  if (closed_) {
    r.closed = true;
    return r;
  }
  // Conflation ends once nothing it kept is queued (invariant 6). When the
  // bytes in flight alone filled the limit, every message meanwhile was
  // dropped and none survived: leave now, so that the notice for them is
  // queued by this pop instead of waiting for a push that may never come
  // (connection.hpp, invariant W: a notice owed keeps the queue armed).
  if (conflating_ && spans_.empty()) leave_conflation_locked();
  maybe_queue_notice_locked();
  queue_owed_notices_locked();
  for (std::size_t spans = 0; !spans_.empty() && spans < max_spans; ++spans) {
    FrameSpan& s = spans_[0];
    const std::size_t size = s.size();
    if (r.bytes + size <= budget) {
      r.bytes += size;
      r.frames += s.count;
      out.push_back(spans_.pop_front());
      pop_dead_front_locked();
      continue;
    }
    // Split at the last frame boundary within the budget (ends are increasing);
    // at least one frame if nothing was taken yet.
    const FrameBlock& b = *s.block.get();
    const std::size_t limit = b.begin(s.first) + (budget - r.bytes);
    std::uint32_t take = 0;
    while (take < s.count && b.end(s.first + take) <= limit) ++take;
    if (take == 0 && r.frames == 0) take = 1;
    if (take == 0) break;
    r.bytes += b.end(s.first + take - 1) - b.begin(s.first);
    r.frames += take;
    if (take == s.count) {  // a lone frame larger than the budget
      out.push_back(spans_.pop_front());
      pop_dead_front_locked();
    } else {
      out.push_back(FrameSpan{s.block, s.first, take});
      s.first += take;
      s.count -= take;
    }
    break;
  }
  queued_bytes_ -= r.bytes;
  queued_frames_ -= r.frames;
  inflight_bytes_ += r.bytes;
  if (r.frames == 0) armed_ = false;
  if (conflating_ && spans_.size() == 0) leave_conflation_locked();  // written out
  r.more = !spans_.empty();
  return r;
}

void ConnectionQueue::release(std::size_t bytes) noexcept {
  std::lock_guard lock(mu_);
  release_locked(bytes);
}

void ConnectionQueue::release_locked(std::size_t bytes) noexcept {
  inflight_bytes_ -= bytes;
  if (queued_bytes_ + inflight_bytes_ <= limits_.soft_bytes) {
    soft_since_ = std::chrono::nanoseconds(-1);
  }
  pace_after_drain_locked();
  if (policy_ == OverflowPolicy::kBlock && flow_ != nullptr && flow_->has_blocked_waiters()) flow_->notify_room();
}

bool ConnectionQueue::complete(std::size_t bytes) noexcept {
  std::lock_guard lock(mu_);
  release_locked(bytes);
  if (closed_ || !spans_.empty() || pending_loss_ > 0 || owed_ != nullptr) return true;
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
  blocking_.store(p == OverflowPolicy::kBlock, std::memory_order_relaxed);  // relaxed: invariant 8
  if (p != OverflowPolicy::kConflate && conflating_) leave_conflation_locked();
}

std::uint32_t ConnectionQueue::room_frames(const FrameRef& block) const noexcept {
  std::lock_guard lock(mu_);
  if (closed_) return 0;
  const std::size_t limit = limits_.soft_bytes > 0 ? limits_.soft_bytes : limits_.hard_bytes;
  const std::size_t used = queued_bytes_ + inflight_bytes_;
  if (used >= limit) return 0;
  const std::size_t room = limit - used;
  // Frame ends are increasing offsets from the block's first frame.
  std::uint32_t n = 0;
  while (n < block->count() && block->end(n) - block->begin(0) <= room) ++n;
  return n;
}

OverflowPolicy ConnectionQueue::policy() const noexcept {
  std::lock_guard lock(mu_);
  return policy_;
}

void ConnectionQueue::set_format(WireFormat r) noexcept {
  std::lock_guard lock(mu_);
  format_ = r;
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
  s.queued_frames = queued_frames_;
  s.dropped = dropped_;
  s.notices = notices_;
  s.conflated = conflated_;
  s.policy = policy_;
  s.closed = closed_;
  s.overflowed = overflowed_;
  return s;
}

}  // namespace ringcast::broker
