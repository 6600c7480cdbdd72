#include "broker/guarantees/ack_tracker.hpp"

#include <algorithm>

#include "broker/guarantees/qos1_stats.hpp"
#include "broker/queue/connection_queue.hpp"

namespace ringcast::broker {

AckTracker::AckTracker(AckSettings settings, const Clock& clock, WireFormat format, Redeliver redeliver,
                       Qos1Stats* registry)
    : settings_(settings), clock_(clock), format_(format), redeliver_(redeliver), registry_(registry) {
  if (registry_ != nullptr) registry_->add(*this);
}

AckTracker::Table::Table(std::size_t max_in_flight) {
  slots.reserve(std::min<std::size_t>(max_in_flight, 4096));
  index.reserve(std::min<std::size_t>(max_in_flight, 4096));
}

AckTracker::~AckTracker() {
  if (registry_ != nullptr) registry_->remove(*this);
}

std::uint32_t AckTracker::intern_locked(std::string_view channel) {
  Table& t = *table_;
  if (const auto it = t.channel_ids.find(channel); it != t.channel_ids.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(t.channel_names.size());
  t.channel_names.emplace_back(channel);
  t.channel_state.emplace_back();
  t.channel_ids.emplace(std::string(channel), id);
  return id;
}

void AckTracker::admit_locked(Key key, const FrameRef& block, std::uint32_t frame, std::chrono::nanoseconds now,
                              bool sent) {
  Table& t = *table_;
  std::uint32_t s;
  if (!t.free_slots.empty()) {
    s = t.free_slots.back();
    t.free_slots.pop_back();
  } else {
    s = static_cast<std::uint32_t>(t.slots.size());
    t.slots.emplace_back();
  }
  Slot& slot = t.slots[s];
  slot.key = key;
  slot.block = block;
  slot.frame = frame;
  slot.sends = sent ? 1 : 0;
  slot.live = true;
  // A redelivered id that is still in flight (a recovery that overlaps) keeps
  // its first slot: the newer one replaces it in the index.
  if (auto [it, fresh] = t.index.try_emplace(key, s); !fresh) {
    release_slot_locked(it->second);
    it->second = s;
  }
  t.deadlines.push_back({now + settings_.ack_timeout, s, slot.generation});
  if (sent) ++t.stats.delivered;
}

void AckTracker::release_slot_locked(std::uint32_t s) noexcept {
  Table& t = *table_;
  Slot& slot = t.slots[s];
  slot.live = false;
  slot.block.reset();
  ++slot.generation;  // its deadline is stale from now on
  ++t.stale_deadlines;
  t.free_slots.push_back(s);
}

bool AckTracker::offer(std::string_view channel, std::uint64_t first_id, const FrameRef& block,
                       ConnectionQueue& queue) noexcept {
  std::lock_guard lock(mu_);
  if (table_ == nullptr) table_ = std::make_unique<Table>(settings_.max_in_flight);  // invariant 6
  Table& t = *table_;
  const std::uint32_t ch = intern_locked(channel);
  const std::uint32_t n = block->count();
  ChannelState& cs = t.channel_state[ch];
  cs.withheld = false;  // invariant 5: this connection subscribed to it
  for (std::uint32_t i = 0; i < n; ++i) cs.offered.push_back(first_id + i);
  cs.last_offered = std::max(cs.last_offered, first_id + n - 1);
  const std::size_t room = t.waiting.empty() ? settings_.max_in_flight - t.index.size() : 0;  // invariant 2
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
  Table& t = *table_;
  const std::size_t bytes = block->end(frame) - block->begin(frame);
  bool wake = false;
  if (t.waiting_bytes + bytes > settings_.max_waiting_bytes) {
    switch (settings_.policy) {
      case OverflowPolicy::kDisconnect:
        queue.close();
        ++t.stats.dropped;
        return true;  // the writer sees the closed queue and ends the connection
      case OverflowPolicy::kDropOldest:
      case OverflowPolicy::kConflate:
        while (!t.waiting.empty() && t.waiting_bytes + bytes > settings_.max_waiting_bytes) {
          const Waiting& w = t.waiting.front();
          t.waiting_bytes -= w.block->end(w.frame) - w.block->begin(w.frame);
          ++t.stats.dropped;
          wake |= queue.note_qos1_loss(Qos1Loss::kWindowDropped, t.channel_names[w.key.channel], w.key.id,
                                       t.stats.dropped, 0);
          unwait_locked(w.key);
          t.waiting.pop_front();
        }
        break;
      case OverflowPolicy::kDropNewest:
      case OverflowPolicy::kBlock:
        ++t.stats.dropped;
        return queue.note_qos1_loss(Qos1Loss::kWindowDropped, t.channel_names[key.channel], key.id, t.stats.dropped, 0);
    }
  }
  t.waiting.push_back({key, block, frame});
  ++t.waiting_keys[key];
  t.waiting_bytes += bytes;
  return wake;
}

AckResult AckTracker::ack(std::optional<std::string_view> channel, std::uint64_t id, ConnectionQueue& queue,
                          bool& wake) {
  wake = false;
  std::lock_guard lock(mu_);
  if (table_ == nullptr) return AckResult::kUnknown;  // invariant 6
  Table& t = *table_;
  auto it = t.index.end();
  if (channel) {
    const auto ch = t.channel_ids.find(*channel);
    if (ch != t.channel_ids.end() && !t.channel_state[ch->second].withheld) it = t.index.find(Key{ch->second, id});
  } else {
    // One lookup per channel this subscriber has been delivered on.
    for (std::uint32_t c = 0; c < t.channel_names.size(); ++c) {
      if (t.channel_state[c].withheld) continue;  // invariant 5
      const auto found = t.index.find(Key{c, id});
      if (found == t.index.end()) continue;
      if (it != t.index.end()) return AckResult::kAmbiguous;
      it = found;
    }
  }
  if (it == t.index.end()) return AckResult::kUnknown;
  settle_acked_locked(it, queue, wake);
  return AckResult::kAcked;
}

AckResult AckTracker::ack_shown(std::optional<std::string_view> channel,
                                const std::function<bool(std::string_view)>& shows, ConnectionQueue& queue,
                                bool& wake) {
  wake = false;
  std::lock_guard lock(mu_);
  if (table_ == nullptr) return AckResult::kUnknown;  // invariant 6
  Table& t = *table_;
  std::optional<std::uint32_t> only;
  if (channel) {
    const auto ch = t.channel_ids.find(*channel);
    if (ch == t.channel_ids.end()) return AckResult::kUnknown;
    only = ch->second;
  }
  // The live deadlines are the in-flight deliveries in send order (invariant 1).
  for (const Deadline& d : t.deadlines) {
    const Slot& slot = t.slots[d.slot];
    if (!slot.live || slot.generation != d.generation) continue;
    if ((only && slot.key.channel != *only) || t.channel_state[slot.key.channel].withheld) continue;  // invariant 5
    if (!shows(slot.block->frame(slot.frame))) continue;
    settle_acked_locked(t.index.find(slot.key), queue, wake);  // invalidates d: the loop ends
    return AckResult::kAcked;
  }
  return AckResult::kUnknown;
}

void AckTracker::settle_acked_locked(Index::iterator it, ConnectionQueue& queue, bool& wake) {
  Table& t = *table_;
  const std::uint32_t ch = it->first.channel;
  release_slot_locked(it->second);
  t.index.erase(it);
  ++t.stats.acked;
  settle_front_locked(ch);
  compact_deadlines_locked();
  wake = refill_locked(queue);
}

bool AckTracker::refill_locked(ConnectionQueue& queue) {
  Table& t = *table_;
  bool wake = false;
  const std::chrono::nanoseconds now = t.waiting.empty() ? std::chrono::nanoseconds{0} : clock_.now();
  while (!t.waiting.empty() && t.index.size() < settings_.max_in_flight) {
    Waiting& w = t.waiting.front();
    const std::string_view frame = w.block->frame(w.frame);
    t.waiting_bytes -= frame.size();
    const bool send = !t.channel_state[w.key.channel].withheld;  // invariant 5
    admit_locked(w.key, w.block, w.frame, now, send);
    if (send) wake |= queue.push(FrameRef::copy_of(frame, /*droppable=*/true)).wake;
    unwait_locked(w.key);
    t.waiting.pop_front();
  }
  return wake;
}

void AckTracker::unwait_locked(Key key) {
  Table& t = *table_;
  const auto it = t.waiting_keys.find(key);
  if (it != t.waiting_keys.end() && --it->second == 0) t.waiting_keys.erase(it);
}

bool AckTracker::pending_locked(Key key) const {
  const Table& t = *table_;
  return t.index.contains(key) || t.waiting_keys.contains(key);
}

void AckTracker::settle_front_locked(std::uint32_t ch) {
  Table& t = *table_;
  ChannelState& cs = t.channel_state[ch];
  while (!cs.offered.empty() && !pending_locked(Key{ch, cs.offered.front()})) cs.offered.pop_front();
}

std::uint64_t AckTracker::resume_floor(std::string_view channel) {
  std::lock_guard lock(mu_);
  if (table_ == nullptr) return 0;  // invariant 6
  Table& t = *table_;
  const auto it = t.channel_ids.find(channel);
  if (it == t.channel_ids.end()) return 0;
  settle_front_locked(it->second);
  const ChannelState& cs = t.channel_state[it->second];
  return cs.offered.empty() ? cs.last_offered : cs.offered.front() - 1;
}

std::uint64_t AckTracker::last_offered(std::string_view channel) const {
  std::lock_guard lock(mu_);
  if (table_ == nullptr) return 0;  // invariant 6
  const Table& t = *table_;
  const auto it = t.channel_ids.find(channel);
  return it == t.channel_ids.end() ? 0 : t.channel_state[it->second].last_offered;
}

bool AckTracker::redeliver_all(ConnectionQueue& queue, const std::function<bool(std::string_view)>& may_read) {
  std::lock_guard lock(mu_);
  if (table_ == nullptr) return false;  // invariant 6: nothing in flight
  Table& t = *table_;
  for (std::uint32_t c = 0; c < t.channel_names.size(); ++c)
    t.channel_state[c].withheld = !may_read(t.channel_names[c]);
  const std::chrono::nanoseconds now = clock_.now();
  bool wake = false;
  // The live deadlines, in FIFO order, are the in-flight deliveries in the
  // order they were (re)sent; each gets a new deadline at the back.
  const std::size_t n = t.deadlines.size();
  for (std::size_t i = 0; i < n; ++i) {
    const Deadline d = t.deadlines.front();
    t.deadlines.pop_front();
    Slot& slot = t.slots[d.slot];
    if (!slot.live || slot.generation != d.generation) {
      --t.stale_deadlines;
      continue;
    }
    if (!t.channel_state[slot.key.channel].withheld) {  // invariant 5
      ++slot.sends;
      ++t.stats.redelivered;
      wake |= queue.push(redeliver_(slot.block->frame(slot.frame))).wake;
    }
    t.deadlines.push_back({now + settings_.ack_timeout, d.slot, slot.generation});
  }
  return wake;
}

bool AckTracker::on_timer(ConnectionQueue& queue) {
  std::lock_guard lock(mu_);
  if (table_ == nullptr) return false;  // invariant 6: no deadline
  Table& t = *table_;
  const std::chrono::nanoseconds now = clock_.now();
  bool wake = false;
  // Redeliveries get deadlines after `now`, behind every due one: the loop ends.
  while (!t.deadlines.empty() && t.deadlines.front().due <= now) {
    const Deadline d = t.deadlines.front();
    t.deadlines.pop_front();
    Slot& slot = t.slots[d.slot];
    if (!slot.live || slot.generation != d.generation) {
      --t.stale_deadlines;
      continue;
    }
    if (t.channel_state[slot.key.channel].withheld) {  // invariant 5: its deadline only comes round again
      t.deadlines.push_back({now + settings_.ack_timeout, d.slot, slot.generation});
      continue;
    }
    if (slot.sends > settings_.max_retries) {
      ++t.stats.expired;
      const Key key = slot.key;
      const std::uint32_t sends = slot.sends;
      t.index.erase(key);
      release_slot_locked(d.slot);
      --t.stale_deadlines;  // its deadline was just popped, not left behind
      wake |= queue.note_qos1_loss(Qos1Loss::kExpired, t.channel_names[key.channel], key.id, t.stats.expired, sends);
      settle_front_locked(key.channel);
      continue;
    }
    ++slot.sends;
    ++t.stats.redelivered;
    wake |= queue.push(redeliver_(slot.block->frame(slot.frame))).wake;
    t.deadlines.push_back({now + settings_.ack_timeout, d.slot, slot.generation});
  }
  wake |= refill_locked(queue);
  return wake;
}

void AckTracker::compact_deadlines_locked() {
  Table& t = *table_;
  if (t.stale_deadlines < 64 || t.stale_deadlines <= t.deadlines.size() / 2) return;
  std::erase_if(t.deadlines, [&t](const Deadline& d) {
    const Slot& s = t.slots[d.slot];
    return !s.live || s.generation != d.generation;
  });
  t.stale_deadlines = 0;
}

std::optional<std::chrono::nanoseconds> AckTracker::next_deadline() const {
  std::lock_guard lock(mu_);
  if (table_ == nullptr || table_->deadlines.empty()) return std::nullopt;  // invariant 6
  return table_->deadlines.front().due;  // perhaps stale: firing early for it only pops it
}

AckStats AckTracker::stats() const {
  std::lock_guard lock(mu_);
  if (table_ == nullptr) return {};  // invariant 6
  AckStats s = table_->stats;
  s.in_flight = table_->index.size();
  s.waiting = table_->waiting.size();
  return s;
}

}  // namespace ringcast::broker
