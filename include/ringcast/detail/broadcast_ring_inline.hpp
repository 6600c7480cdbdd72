// BroadcastRing's inline members: the hot path (try_push, try_recv, drain and
// what they inline) and the small accessors. broadcast_ring.hpp includes this
// header at its end; include that one, not this. Memory orders:
// docs/memory-ordering.md, "Slots".
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#if defined(__SANITIZE_THREAD__)
#define RINGCAST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RINGCAST_TSAN 1
#endif
#endif

namespace ringcast {
namespace detail {

// Calls f(0), f(1), ..., f(N-1), fully unrolled: the seven slot words are then
// moved between registers and the slot with no loop and no stack staging.
// Forced inline: in a large caller (a receive loop with everything inlined)
// GCC's budget would otherwise leave this as a call per slot.
template <std::size_t N, class F>
[[gnu::always_inline]] inline void unrolled(F&& f) noexcept {
  [&]<std::size_t... I>(std::index_sequence<I...>) __attribute__((always_inline)) { (f(I), ...); }
  (std::make_index_sequence<N>{});
}
}  // namespace detail

inline void BroadcastRing::report_upstream_loss(std::uint64_t lost) noexcept {
  // relaxed: display-only counters (docs/layout.md); only the producer writes them.
  header_->tail.upstream_lost.fetch_add(lost, std::memory_order_relaxed);
  header_->tail.upstream_gaps.fetch_add(1, std::memory_order_relaxed);
}

inline std::uint64_t BroadcastRing::upstream_lost_seen(ConsumerId id) const noexcept {
  return owns(id) ? local_[id].upstream_lost_seen : 0;
}

inline void BroadcastRing::set_waiter_slice(std::chrono::microseconds slice) noexcept {
  // relaxed: a setting read on each sleep; no other data hangs on it.
  waiter_slice_us_.store(std::max<std::int64_t>(slice.count(), 0), std::memory_order_relaxed);
}

inline std::chrono::microseconds BroadcastRing::waiter_slice() const noexcept {
  // relaxed: as in set_waiter_slice().
  return std::chrono::microseconds(waiter_slice_us_.load(std::memory_order_relaxed));
}

inline std::uint64_t BroadcastRing::late_wakeups() const noexcept {
  // relaxed: a statistic, read by nobody's protocol.
  return late_wakeups_.load(std::memory_order_relaxed);
}

inline std::uint64_t BroadcastRing::position(ConsumerId id) const noexcept {
  // relaxed: only this consumer writes its cursor (invariant 1).
  return consumer(id).cursor.load(std::memory_order_relaxed);
}

inline std::uint64_t BroadcastRing::producer_position() const noexcept {
  // acquire: pairs with the producer's release store in publish().
  return producer().producer_seq.load(std::memory_order_acquire);
}

inline layout::ProducerLine& BroadcastRing::producer() const noexcept { return header_->producer; }

inline layout::ConsumerEntry& BroadcastRing::consumer(ConsumerId id) const noexcept { return header_->consumers[id]; }

inline bool BroadcastRing::owns(ConsumerId id) const noexcept {
  // relaxed: owned_ is this handle's bookkeeping; an id's bit changes only in
  // register/unregister, which the id's single user orders with its own calls.
  return id < kMaxConsumers && ((owned_.load(std::memory_order_relaxed) >> id) & 1U) != 0;
}

inline std::uint64_t BroadcastRing::index(std::uint64_t pos) const noexcept {
  return mask_ != 0 ? (pos & mask_) : (pos % capacity_);
}

inline layout::Slot& BroadcastRing::slot(std::uint64_t pos) const noexcept { return slots_[index(pos)]; }

inline std::byte* BroadcastRing::record_payload(std::uint64_t pos) const noexcept {
  return reinterpret_cast<std::byte*>(&slot(pos)) + kRecordDataOffset;
}

inline bool BroadcastRing::lappable(ConsumerId id, std::uint64_t pos) const noexcept {
  return pos < local_[id].stable_from;
}

inline void BroadcastRing::light_barrier() const noexcept {
  if (light_fence_) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
}

inline void BroadcastRing::write_slot(std::uint64_t pos, std::span<const std::byte> payload) noexcept {
  layout::Slot& s = slot(pos);
  // Assemble the seven words in registers straight from the payload (length in
  // the low half of words[0]); a short payload is first zero-padded to 52 bytes.
  const std::byte* src = payload.data();
  alignas(8) std::byte padded[kMaxPayload];
  if (payload.size() != kMaxPayload) [[unlikely]] {
    std::memset(padded, 0, sizeof padded);
    if (!payload.empty()) std::memcpy(padded, payload.data(), payload.size());
    src = padded;
  }
  std::uint64_t words[7];
  std::uint32_t head = 0;
  std::memcpy(&head, src, 4);
  words[0] = static_cast<std::uint64_t>(payload.size()) | (static_cast<std::uint64_t>(head) << 32);
  detail::unrolled<6>([&](std::size_t i) { std::memcpy(&words[i + 1], src + 4 + 8 * i, 8); });
  // relaxed: only this thread writes versions (invariant 1); ordering comes from the fence.
  s.version.store(2 * pos + 1, std::memory_order_relaxed);
#if RINGCAST_TSAN
  // TSan does not model standalone fences: give each data store release
  // semantics instead, so a reader that acquire-loads any word written here
  // also sees the odd version above.
  detail::unrolled<7>([&](std::size_t i) { s.words[i].store(words[i], std::memory_order_release); });
#else
  // release fence: pairs with the reader's acquire fence in read_slot. A reader
  // whose relaxed word loads see any store below then sees the odd version.
  std::atomic_thread_fence(std::memory_order_release);
  detail::unrolled<7>([&](std::size_t i) { s.words[i].store(words[i], std::memory_order_relaxed); });
#endif
  // release: pairs with the reader's acquire load of the version; a reader that
  // sees the committed version sees every word above.
  s.version.store(2 * pos + 2, std::memory_order_release);
}

inline detail::ReadOutcome BroadcastRing::read_slot(std::uint64_t pos, std::byte* out, std::uint32_t& length,
                                                    std::uint64_t& w0, bool lappable) const noexcept {
  const layout::Slot& s = slot(pos);
  const std::uint64_t want = 2 * pos + 2;
  // acquire: pairs with the release store of the committed version in
  // write_slot (and commit_record).
  const std::uint64_t v1 = s.version.load(std::memory_order_acquire);
  if (v1 != want) {
    if (v1 < want - 1) return ReadOutcome::kNotYet;
    return v1 == want - 1 ? ReadOutcome::kWriting : ReadOutcome::kOverwritten;
  }
  std::uint64_t words[7];
#if RINGCAST_TSAN
  // acquire per word: pairs with the per-word release stores (TSan variant).
  detail::unrolled<7>([&](std::size_t i) { words[i] = s.words[i].load(std::memory_order_acquire); });
#else
  detail::unrolled<7>([&](std::size_t i) { words[i] = s.words[i].load(std::memory_order_relaxed); });
  // acquire fence: pairs with the writer's release fence; if any load above saw
  // a later write, the version load below sees that write's odd version.
  std::atomic_thread_fence(std::memory_order_acquire);
#endif
  // relaxed: ordered after the word loads by the fence (or the acquire loads).
  // (R3 in docs/memory-ordering.md; seqlock_detector_test builds without it.)
  if (s.version.load(std::memory_order_relaxed) != v1) return ReadOutcome::kOverwritten;
  // One branch for the two rare cases. Invariant 9: a later lap's record may
  // have rewritten the words but not yet the version word. relaxed: ordered
  // by the fence above, which pairs with begin_write's release fence.
  if (lappable || (words[0] & kRecordBit) != 0) [[unlikely]] {
    if (lappable && header_->tail.write_intent.load(std::memory_order_relaxed) > pos + capacity_) {
      return ReadOutcome::kOverwritten;
    }
    if ((words[0] & kRecordBit) != 0) {
      w0 = words[0];
      return ReadOutcome::kRecord;
    }
  }
  length = static_cast<std::uint32_t>(words[0]);
  if (length > kMaxPayload) return ReadOutcome::kCorrupt;  // a hostile or damaged file
  // Straight from the words into `out`: no staging copy.
  const auto head = static_cast<std::uint32_t>(words[0] >> 32);
  std::memcpy(out, &head, 4);
  detail::unrolled<6>([&](std::size_t i) { std::memcpy(out + 4 + 8 * i, &words[i + 1], 8); });
  return ReadOutcome::kOk;
}

inline Errc BroadcastRing::check_room(std::uint64_t slots) noexcept {
  if (!is_producer_) [[unlikely]] {
    if (const Errc e = claim_slow(); e != Errc::ok) return e;
  }
  if ((flags_ & kFlagLossy) == 0 && seq_ + slots - cached_min_ > capacity_) [[unlikely]] {
    return full_slow(slots);
  }
  return Errc::ok;
}

inline void BroadcastRing::begin_write(std::uint64_t end) noexcept {
  layout::TailLine& tail = header_->tail;
  if (end > intent_) {
    intent_ = end;
    // relaxed: only the producer writes it (invariant 1); the fence below
    // orders it before every store to the slots it announces.
    tail.write_intent.store(end, std::memory_order_relaxed);
  }
  // release fence: pairs with the acquire fence of a reader validating a
  // record (read_record): a reader that saw any store below or after it in
  // a slot it copied then sees the intent above and discards its copy.
  std::atomic_thread_fence(std::memory_order_release);
  // The head stamp (invariant 9), only within a lap of a record: elsewhere
  // the slot holds a header or is untouched. relaxed load: only producers
  // wrote this slot, the last of them ordered before us by the producer lock.
  if (end >= stamp_below_) return;
  layout::Slot& next = slot(end);
  if (next.version.load(std::memory_order_relaxed) > 2 * end) [[unlikely]] {
    // Payload bytes of an earlier lap (a record's inner slot): make them read
    // as "not yet written" to a reader waiting for `end`. The slot is no
    // consumer's to read: they all passed the record it belonged to
    // (docs/memory-ordering.md, "Records"). relaxed (release under TSan,
    // which does not see the fence above): ordered before the message's
    // commit, a release store.
#if RINGCAST_TSAN
    next.version.store(2 * end, std::memory_order_release);
#else
    next.version.store(2 * end, std::memory_order_relaxed);
#endif
  }
}

inline void BroadcastRing::publish(std::uint64_t next_pos) noexcept {
  layout::ProducerLine& p = producer();
  // relaxed: a display-only total, beside producer_seq on a line only the
  // producer writes (the message count is derived: extra_slots).
  p.payload_bytes.store(payload_bytes_, std::memory_order_relaxed);
  // release: pairs with acquire loads in producer_position/lag/register_consumer.
  p.producer_seq.store(next_pos, std::memory_order_release);
  // Light side of the sleep handshake with wait() (docs/memory-ordering.md,
  // "Sleeping and waking"): the slot stores above are ordered before this
  // load by the barrier pair, so either we see a sleeper's waiting bit or its
  // re-check after the heavy barrier sees the message.
  if (fenced_) [[unlikely]] {
    // seq_cst fence: Dekker with a waiter that saw kSignalFenced and skipped
    // its membarrier.
    std::atomic_thread_fence(std::memory_order_seq_cst);
  } else {
    light_barrier();
  }
  // relaxed: ordered by the barrier pair above.
  const std::uint32_t signal = header_->data_wait.signal.load(std::memory_order_relaxed);
  if ((signal & kSignalWaiting) != 0) [[unlikely]] {
    wake_consumers();
  } else if (fenced_ && ++quiet_publishes_ >= kQuietPublishesBeforeUnfence) [[unlikely]] {
    leave_fenced();
  }
}

inline void BroadcastRing::write_inline(std::span<const std::byte> payload) noexcept {
  // Intent and head stamp only within a lap of a record, padding or claim,
  // where this slot or the next may hold a record's bytes (stamp_below_; 0 on
  // rings without records). Elsewhere the slot's SeqLock is enough.
  if (seq_ + 1 < stamp_below_) [[unlikely]]
    begin_write(seq_ + 1);
  write_slot(seq_, payload);
  ++seq_;
  payload_bytes_ += payload.size();
}

inline Errc BroadcastRing::try_push(std::span<const std::byte> payload) noexcept {
  if (payload.size() > kMaxPayload) [[unlikely]]
    return push_record(payload);
  if (const Errc e = check_room(1); e != Errc::ok) return e;
  write_inline(payload);
  publish(seq_);
  return Errc::ok;
}

inline void BroadcastRing::advance_cursor(ConsumerId id, std::uint64_t next) noexcept {
  // release: pairs with the producer's acquire load of the cursor (full_slow);
  // our slot reads happen-before its overwrite of those slots (invariant 3).
  consumer(id).cursor.store(next, std::memory_order_release);
  // Light side of the handshake with push_wait, as in publish().
  light_barrier();
  // relaxed: ordered by the barrier pair above.
  if ((header_->space_wait.signal.load(std::memory_order_relaxed) & kSignalWaiting) != 0) [[unlikely]] {
    wake_producer();
  }
}

inline RecvResult BroadcastRing::try_recv(ConsumerId id, std::span<std::byte> out) noexcept {
  if (!owns(id)) [[unlikely]]
    return {Errc::invalid_consumer};
  if (out.size() < kMaxPayload) [[unlikely]]
    return recv_short(id, out);
  // relaxed: only this consumer writes its cursor (invariant 1).
  const std::uint64_t pos = consumer(id).cursor.load(std::memory_order_relaxed);
  std::uint32_t length = 0;
  std::uint64_t w0 = 0;
  const ReadOutcome outcome = read_slot(pos, out.data(), length, w0, lappable(id, pos));
  if (outcome != ReadOutcome::kOk) [[unlikely]]
    return recv_other(id, pos, outcome, w0, out);
  advance_cursor(id, pos + 1);
  return {Errc::ok, length};
}

template <class OnMessage>
BatchResult BroadcastRing::drain(ConsumerId id, OnMessage&& on_message,
                                 std::size_t max) noexcept(noexcept(on_message(std::span<const std::byte>{}))) {
  if (!owns(id)) [[unlikely]]
    return {0, Errc::invalid_consumer};
  // relaxed: only this consumer writes its cursor (invariant 1).
  const std::uint64_t start = consumer(id).cursor.load(std::memory_order_relaxed);
  std::uint64_t pos = start;
  std::size_t count = 0;
  std::uint64_t lost = 0;  // loss markers passed, counted when the cursor moves
  alignas(8) std::byte buffer[kMaxPayload];
  while (count < max) {
    std::uint32_t length = 0;
    std::uint64_t w0 = 0;
    ReadOutcome outcome = read_slot(pos, buffer, length, w0, lappable(id, pos));
    if (outcome != ReadOutcome::kOk && outcome != ReadOutcome::kRecord) [[unlikely]] {
      if (pos != start) break;  // the next call classifies what stopped this batch
      // Nothing read yet: let the single-message slow path classify it (it
      // moves the cursor only on a lap). A message it read is delivered like
      // any other below, so a throwing on_message leaves the cursor alone.
      const RecvResult r = recv_slow(id, pos, outcome, buffer);
      if (r.status != Errc::ok) return {0, r.status, r.missed};
      length = r.length;
      w0 = r.missed;
      outcome = w0 != 0 ? ReadOutcome::kRecord : ReadOutcome::kOk;
    }
    if (outcome == ReadOutcome::kRecord) [[unlikely]] {
      RecvResult r{Errc::ok};
      const std::uint64_t passed = drain_record(id, pos, w0, on_message, r, pos == start);
      if (passed == 0) {
        if (pos == start) return {0, r.status, r.missed};
        break;
      }
      if (r.length != 0) ++count;  // drain_record sets length to 1 for a message, 0 for padding
      lost += r.missed;            // and missed to a loss marker's count
      pos += passed;
      continue;
    }
    on_message(std::span<const std::byte>(buffer, length));
    ++count;
    ++pos;
  }
  if (pos != start) {
    local_[id].upstream_lost_seen += lost;
    advance_cursor(id, pos);
  }
  // Only paddings passed: nothing to deliver yet.
  return {count, count == 0 && pos != start ? Errc::empty : Errc::ok};
}

template <class OnMessage>
std::uint64_t BroadcastRing::drain_record(ConsumerId id, std::uint64_t pos, std::uint64_t w0, OnMessage& on_message,
                                          RecvResult& r,
                                          bool first) noexcept(noexcept(on_message(std::span<const std::byte>{}))) {
  const RecordRead rec = read_record(id, pos, w0, local_[id].buffer.get(), buffer_bytes_, true);
  if (rec.outcome != ReadOutcome::kOk) {
    // A batch that has passed messages stops here and leaves the
    // classification to the next call; an empty one classifies it now (a lap
    // moves the cursor, like try_recv's).
    if (first) r = recv_slow(id, pos, rec.outcome, nullptr);
    return 0;
  }
  if (!rec.padding) on_message(rec.data);
  r.length = rec.padding ? 0 : 1;
  r.missed = rec.lost;
  return rec.slots;
}

inline std::uint64_t BroadcastRing::lag(ConsumerId id) const noexcept {
  if (id >= kMaxConsumers) return 0;
  const layout::ConsumerEntry& c = consumer(id);
  // acquire: pairs with the release store of state in register_consumer.
  if (c.state.load(std::memory_order_acquire) != kConsumerActive) return 0;
  // Load the cursor first: producer_seq only grows, so the race between the
  // two loads never understates the lag. A consumer may read slots committed
  // inside a batch before producer_seq is published: clamp at 0.
  // acquire: pairs with advance_cursor's release store.
  const std::uint64_t cursor = c.cursor.load(std::memory_order_acquire);
  const std::uint64_t published = producer_position();
  return published > cursor ? published - cursor : 0;
}

// ProducerClaim's members forward to the ring that made the claim.
inline ProducerClaim& ProducerClaim::operator=(ProducerClaim&& other) noexcept {
  if (this != &other) {
    abort();
    ring_ = std::exchange(other.ring_, nullptr);
    data_ = other.data_;
    length_ = other.length_;
    pos_ = other.pos_;
    status_ = other.status_;
  }
  return *this;
}

inline void ProducerClaim::commit(std::size_t length) noexcept {
  if (ring_ != nullptr) std::exchange(ring_, nullptr)->finish_claim(*this, std::min(length, length_), true);
}

inline void ProducerClaim::abort() noexcept {
  if (ring_ != nullptr) std::exchange(ring_, nullptr)->finish_claim(*this, 0, false);
}

}  // namespace ringcast
