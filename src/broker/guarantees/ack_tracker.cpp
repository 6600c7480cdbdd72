#include "broker/guarantees/ack_tracker.hpp"

#include <algorithm>

#include "broker/guarantees/qos1_stats.hpp"
#include "broker/queue/connection_queue.hpp"

namespace ringcast::broker {

AckTracker::AckTracker(AckSettings settings, const Clock& clock, WireFormat format, Redeliver redeliver,
                       Qos1Stats* registry)
    : settings_(settings), clock_(clock), format_(format), redeliver_(redeliver), registry_(registry) {
  slots_.reserve(std::min<std::size_t>(settings_.max_in_flight, 4096));
  index_.reserve(std::min<std::size_t>(settings_.max_in_flight, 4096));
  if (registry_ != nullptr) registry_->add(*this);
}

AckTracker::~AckTracker() {
  if (registry_ != nullptr) registry_->remove(*this);
}

std::uint32_t AckTracker::intern_locked(std::string_view channel) {
  if (const auto it = channel_ids_.find(channel); it != channel_ids_.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(channel_names_.size());
  channel_names_.emplace_back(channel);
  channel_state_.emplace_back();
  channel_ids_.emplace(std::string(channel), id);
  return id;
}

void AckTracker::admit_locked(Key key, const FrameRef& block, std::uint32_t frame, std::chrono::nanoseconds now,
                              bool sent) {
  std::uint32_t s;
  if (!free_slots_.empty()) {
    s = free_slots_.back();
    free_slots_.pop_back();
  } else {
    s = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& slot = slots_[s];
  slot.key = key;
  slot.block = block;
  slot.frame = frame;
  slot.sends = sent ? 1 : 0;
  slot.live = true;
  // A redelivered id that is still in flight (a recovery that overlaps) keeps
  // its first slot: the newer one replaces it in the index.
  if (auto [it, fresh] = index_.try_emplace(key, s); !fresh) {
    release_slot_locked(it->second);
    it->second = s;
  }
  deadlines_.push_back({now + settings_.ack_timeout, s, slot.generation});
  if (sent) ++stats_.delivered;
}

void AckTracker::release_slot_locked(std::uint32_t s) noexcept {
  Slot& slot = slots_[s];
  slot.live = false;
  slot.block.reset();
  ++slot.generation;  // its deadline is stale from now on
  ++stale_deadlines_;
  free_slots_.push_back(s);
}

bool AckTracker::offer(std::string_view channel, std::uint64_t first_id, const FrameRef& block,
                       ConnectionQueue& queue) noexcept {
  std::lock_guard lock(mu_);
  const std::uint32_t ch = intern_locked(channel);
  const std::uint32_t n = block->count();
  ChannelState& cs = channel_state_[ch];
  cs.withheld = false;  // invariant 5: this connection subscribed to it
  for (std::uint32_t i = 0; i < n; ++i) cs.offered.push_back(first_id + i);
  cs.last_offered = std::max(cs.last_offered, first_id + n - 1);
  const std::size_t room = waiting_.empty() ? settings_.max_in_flight - index_.size() : 0;  // invariant 2
  const auto admit = static_cast<std::uint32_t>(std::min<std::size_t>(n, room));
  const std::chrono::nanoseconds now = admit > 0 ? clock_.now() : std::chrono::nanoseconds{0};
  for (std::uint32_t i = 0; i < admit; ++i) admit_locked({ch, first_id + i}, block, i, now, true);
  bool wake = false;
  if (admit == n) {
    wake = queue.push(block).wake;
  } else if (admit > 0) {
    // Rare: the window splits the run; its admitted prefix gets a block of its own.
    wake = queue.push(copy_frames(FrameSpan{block, 0, admit})).wake;
  }
  for (std::uint32_t i = admit; i < n; ++i) wake |= wait_locked({ch, first_id + i}, block, i, queue);
  return wake;
}

bool AckTracker::wait_locked(Key key, const FrameRef& block, std::uint32_t frame, ConnectionQueue& queue) {
  const std::size_t bytes = block->end(frame) - block->begin(frame);
  bool wake = false;
  if (waiting_bytes_ + bytes > settings_.max_waiting_bytes) {
    switch (settings_.policy) {
      case OverflowPolicy::kDisconnect:
        queue.close();
        ++stats_.dropped;
        return true;  // the writer sees the closed queue and ends the connection
      case OverflowPolicy::kDropOldest:
      case OverflowPolicy::kConflate:
        while (!waiting_.empty() && waiting_bytes_ + bytes > settings_.max_waiting_bytes) {
          const Waiting& w = waiting_.front();
          waiting_bytes_ -= w.block->end(w.frame) - w.block->begin(w.frame);
          ++stats_.dropped;
          wake |= queue.note_qos1_loss(Qos1Loss::kWindowDropped, channel_names_[w.key.channel], w.key.id,
                                       stats_.dropped, 0);
          unwait_locked(w.key);
          waiting_.pop_front();
        }
        break;
      case OverflowPolicy::kDropNewest:
      case OverflowPolicy::kBlock:
        ++stats_.dropped;
        return queue.note_qos1_loss(Qos1Loss::kWindowDropped, channel_names_[key.channel], key.id, stats_.dropped, 0);
    }
  }
  waiting_.push_back({key, block, frame});
  ++waiting_keys_[key];
  waiting_bytes_ += bytes;
  return wake;
}

AckResult AckTracker::ack(std::optional<std::string_view> channel, std::uint64_t id, ConnectionQueue& queue,
                          bool& wake) {
  wake = false;
  std::lock_guard lock(mu_);
  auto it = index_.end();
  if (channel) {
    const auto ch = channel_ids_.find(*channel);
    if (ch != channel_ids_.end() && !channel_state_[ch->second].withheld) it = index_.find(Key{ch->second, id});
  } else {
    // One lookup per channel this subscriber has been delivered on.
    for (std::uint32_t c = 0; c < channel_names_.size(); ++c) {
      if (channel_state_[c].withheld) continue;  // invariant 5
      const auto found = index_.find(Key{c, id});
      if (found == index_.end()) continue;
      if (it != index_.end()) return AckResult::kAmbiguous;
      it = found;
    }
  }
  if (it == index_.end()) return AckResult::kUnknown;
  const std::uint32_t ch = it->first.channel;
  release_slot_locked(it->second);
  index_.erase(it);
  ++stats_.acked;
  settle_front_locked(ch);
  compact_deadlines_locked();
  wake = refill_locked(queue);
  return AckResult::kAcked;
}

bool AckTracker::refill_locked(ConnectionQueue& queue) {
  bool wake = false;
  const std::chrono::nanoseconds now = waiting_.empty() ? std::chrono::nanoseconds{0} : clock_.now();
  while (!waiting_.empty() && index_.size() < settings_.max_in_flight) {
    Waiting& w = waiting_.front();
    const std::string_view frame = w.block->frame(w.frame);
    waiting_bytes_ -= frame.size();
    const bool send = !channel_state_[w.key.channel].withheld;  // invariant 5
    admit_locked(w.key, w.block, w.frame, now, send);
    if (send) wake |= queue.push(FrameRef::copy_of(frame, /*droppable=*/true)).wake;
    unwait_locked(w.key);
    waiting_.pop_front();
  }
  return wake;
}

void AckTracker::unwait_locked(Key key) {
  const auto it = waiting_keys_.find(key);
  if (it != waiting_keys_.end() && --it->second == 0) waiting_keys_.erase(it);
}

bool AckTracker::pending_locked(Key key) const { return index_.contains(key) || waiting_keys_.contains(key); }

void AckTracker::settle_front_locked(std::uint32_t ch) {
  ChannelState& cs = channel_state_[ch];
  while (!cs.offered.empty() && !pending_locked(Key{ch, cs.offered.front()})) cs.offered.pop_front();
}

std::uint64_t AckTracker::resume_floor(std::string_view channel) {
  std::lock_guard lock(mu_);
  const auto it = channel_ids_.find(channel);
  if (it == channel_ids_.end()) return 0;
  settle_front_locked(it->second);
  const ChannelState& cs = channel_state_[it->second];
  return cs.offered.empty() ? cs.last_offered : cs.offered.front() - 1;
}

std::uint64_t AckTracker::last_offered(std::string_view channel) const {
  std::lock_guard lock(mu_);
  const auto it = channel_ids_.find(channel);
  return it == channel_ids_.end() ? 0 : channel_state_[it->second].last_offered;
}

bool AckTracker::redeliver_all(ConnectionQueue& queue, const std::function<bool(std::string_view)>& may_read) {
  std::lock_guard lock(mu_);
  for (std::uint32_t c = 0; c < channel_names_.size(); ++c) channel_state_[c].withheld = !may_read(channel_names_[c]);
  const std::chrono::nanoseconds now = clock_.now();
  bool wake = false;
  // The live deadlines, in FIFO order, are the in-flight deliveries in the
  // order they were (re)sent; each gets a new deadline at the back.
  const std::size_t n = deadlines_.size();
  for (std::size_t i = 0; i < n; ++i) {
    const Deadline d = deadlines_.front();
    deadlines_.pop_front();
    Slot& slot = slots_[d.slot];
    if (!slot.live || slot.generation != d.generation) {
      --stale_deadlines_;
      continue;
    }
    if (!channel_state_[slot.key.channel].withheld) {  // invariant 5
      ++slot.sends;
      ++stats_.redelivered;
      wake |= queue.push(redeliver_(slot.block->frame(slot.frame))).wake;
    }
    deadlines_.push_back({now + settings_.ack_timeout, d.slot, slot.generation});
  }
  return wake;
}

bool AckTracker::on_timer(ConnectionQueue& queue) {
  std::lock_guard lock(mu_);
  const std::chrono::nanoseconds now = clock_.now();
  bool wake = false;
  // Redeliveries get deadlines after `now`, behind every due one: the loop ends.
  while (!deadlines_.empty() && deadlines_.front().due <= now) {
    const Deadline d = deadlines_.front();
    deadlines_.pop_front();
    Slot& slot = slots_[d.slot];
    if (!slot.live || slot.generation != d.generation) {
      --stale_deadlines_;
      continue;
    }
    if (channel_state_[slot.key.channel].withheld) {  // invariant 5: its deadline only comes round again
      deadlines_.push_back({now + settings_.ack_timeout, d.slot, slot.generation});
      continue;
    }
    if (slot.sends > settings_.max_retries) {
      ++stats_.expired;
      const Key key = slot.key;
      const std::uint32_t sends = slot.sends;
      index_.erase(key);
      release_slot_locked(d.slot);
      --stale_deadlines_;  // its deadline was just popped, not left behind
      wake |= queue.note_qos1_loss(Qos1Loss::kExpired, channel_names_[key.channel], key.id, stats_.expired, sends);
      settle_front_locked(key.channel);
      continue;
    }
    ++slot.sends;
    ++stats_.redelivered;
    wake |= queue.push(redeliver_(slot.block->frame(slot.frame))).wake;
    deadlines_.push_back({now + settings_.ack_timeout, d.slot, slot.generation});
  }
  wake |= refill_locked(queue);
  return wake;
}

void AckTracker::compact_deadlines_locked() {
  if (stale_deadlines_ < 64 || stale_deadlines_ <= deadlines_.size() / 2) return;
  std::erase_if(deadlines_, [this](const Deadline& d) {
    const Slot& s = slots_[d.slot];
    return !s.live || s.generation != d.generation;
  });
  stale_deadlines_ = 0;
}

std::optional<std::chrono::nanoseconds> AckTracker::next_deadline() const {
  std::lock_guard lock(mu_);
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.front().due;  // perhaps stale: firing early for it only pops it
}

AckStats AckTracker::stats() const {
  std::lock_guard lock(mu_);
  AckStats s = stats_;
  s.in_flight = index_.size();
  s.waiting = waiting_.size();
  return s;
}

}  // namespace ringcast::broker
