// Messages of any size: records (invariant 8 of broadcast_ring.hpp), claims
// and views. A message of at most 52 bytes stays one inline slot, written and
// read by the inline hot path in the header; everything here runs only for
// longer messages, claims and views. Byte layout: docs/layout.md, "Records";
// memory orders: docs/memory-ordering.md, "Records".
#include <algorithm>
#include <cstring>

#include "ringcast/broadcast_ring.hpp"

namespace ringcast {
namespace {

// Where a reader may race with the writer (lossy rings, a consumer inside its
// registration window) a record's bytes move through 64-bit atomic words:
// relaxed between the fences of begin_write and read_record, or release and
// acquire per word under TSan, which does not model fences.
#if RINGCAST_TSAN
constexpr std::memory_order kWordStore = std::memory_order_release;
constexpr std::memory_order kWordLoad = std::memory_order_acquire;
constexpr bool kAtomicWrites = true;  // every record write, so TSan sees no plain store racing a validated read
#else
constexpr std::memory_order kWordStore = std::memory_order_relaxed;
constexpr std::memory_order kWordLoad = std::memory_order_relaxed;
constexpr bool kAtomicWrites = false;
#endif

// A record's payload starts at byte 16 of its header slot and runs on through
// the slots after it: a run of the slots' 64-bit atomic words (version and
// words[0..7) of each, layout.hpp), 8-byte aligned.
std::atomic<std::uint64_t>* words_at(std::byte* p) noexcept { return reinterpret_cast<std::atomic<std::uint64_t>*>(p); }

void store_words(std::byte* dst, const std::byte* src, std::size_t n) noexcept {
  std::atomic<std::uint64_t>* w = words_at(dst);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t v = 0;
    std::memcpy(&v, src + i, 8);
    w[i / 8].store(v, kWordStore);
  }
  if (i < n) {
    std::uint64_t v = 0;
    std::memcpy(&v, src + i, n - i);
    w[i / 8].store(v, kWordStore);
  }
}

void load_words(const std::byte* src, std::byte* dst, std::size_t n) noexcept {
  const std::atomic<std::uint64_t>* w = words_at(const_cast<std::byte*>(src));
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t v = w[i / 8].load(kWordLoad);
    std::memcpy(dst + i, &v, 8);
  }
  if (i < n) {
    const std::uint64_t v = w[i / 8].load(kWordLoad);
    std::memcpy(dst + i, &v, n - i);
  }
}

std::uint64_t record_meta(std::uint32_t kind, std::uint64_t slots, std::uint64_t length) noexcept {
  return (kRecordBit | (kind << kRecordKindShift) | static_cast<std::uint32_t>(slots)) | (length << 32);
}

}  // namespace

std::uint64_t BroadcastRing::room_before_boundary(std::uint64_t pos) const noexcept {
  const std::uint64_t idx = index(pos);
  return std::min(capacity_ - idx, block_ - idx % block_);
}

std::uint64_t BroadcastRing::next_boundary(std::uint64_t pos) const noexcept {
  const std::uint64_t idx = index(pos);
  const std::uint64_t into_block = idx % block_;
  if (into_block == 0) return pos;
  return pos + (std::min(idx + (block_ - into_block), capacity_) - idx);
}

// --- writing -------------------------------------------------------------------

Errc BroadcastRing::reserve_record(std::uint64_t slots, std::uint64_t& pos) noexcept {
  // A record never crosses a block boundary or the ring's end: pad to the
  // next boundary until it fits. That takes at most two paddings, the second
  // over the ring's last, shorter segment when the capacity is not a multiple
  // of the block, and never more than capacity - 1 - slots slots in all, as a
  // block is at most half the ring (layout::max_message_for).
  std::uint64_t pad = 0;
  for (std::uint64_t left = room_before_boundary(seq_); slots > left; left = room_before_boundary(seq_ + pad)) {
    pad += left;
  }
  if (const Errc e = check_room(pad + slots); e != Errc::ok) return e;
  // Inner slots from here to the record's end hold payload bytes (or, in a
  // padding, whatever they held): stamps up to a lap past it are checked.
  // Before begin_write, which may stamp inside the room a claim leaves.
  stamp_below_ = std::max(stamp_below_, seq_ + pad + slots + capacity_);
  begin_write(seq_ + pad + slots);
  // A padding's inner slots are not written: readers skip them, and the
  // record after it starts at a boundary, whose slot holds a header in every
  // lap (so no stamp is needed there).
  for (std::uint64_t end = seq_ + pad; seq_ != end;) {
    const std::uint64_t n = room_before_boundary(seq_);
    commit_record(seq_, kRecordPadding, n, 0);
    seq_ += n;
  }
  if (pad != 0) add_extra_slots(pad);
  pos = seq_;
  return Errc::ok;
}

void BroadcastRing::add_extra_slots(std::uint64_t n) noexcept {
  extra_slots_ += n;
  // relaxed: display only (status() derives the message count from it), on a
  // line only the producer writes; published with the next producer_seq.
  producer().extra_slots.store(extra_slots_, std::memory_order_relaxed);
}

void BroadcastRing::commit_record(std::uint64_t pos, std::uint32_t kind, std::uint64_t slots,
                                  std::uint64_t length) noexcept {
  layout::Slot& s = slot(pos);
  // relaxed (release under TSan): published by the version store below.
  s.words[0].store(record_meta(kind, slots, length), kWordStore);
  // release: pairs with the reader's acquire load of the version (read_slot);
  // a reader that sees it sees the meta, every payload byte written before
  // it (in place through a claim, or copied) and the head stamp.
  s.version.store(2 * pos + 2, std::memory_order_release);
}

Errc BroadcastRing::write_record(std::span<const std::byte> payload) noexcept {
  if (payload.size() > max_message_) return Errc::payload_too_large;
  const std::uint64_t slots = layout::record_slots(payload.size());
  std::uint64_t pos = 0;
  if (const Errc e = reserve_record(slots, pos); e != Errc::ok) return e;
  std::byte* dst = record_payload(pos);
  if ((flags_ & kFlagLossy) != 0 || kAtomicWrites) {
    store_words(dst, payload.data(), payload.size());
  } else {
    // A blocking ring: no active consumer reads these slots (invariant 3),
    // and those in their registration window copy with validation.
    std::memcpy(dst, payload.data(), payload.size());
  }
  commit_record(pos, kRecordMessage, slots, payload.size());
  seq_ = pos + slots;
  add_extra_slots(slots - 1);
  payload_bytes_ += payload.size();
  return Errc::ok;
}

Errc BroadcastRing::mark_upstream_loss(std::uint64_t lost) noexcept {
  if (!records_ || lost == 0) return Errc::ok;
  std::uint64_t pos = 0;
  if (const Errc e = reserve_record(1, pos); e != Errc::ok) return e;
  commit_record(pos, kRecordLoss, 1, std::min<std::uint64_t>(lost, 0xFFFF'FFFF));
  seq_ = pos + 1;
  add_extra_slots(1);
  publish(seq_);
  return Errc::ok;
}

Errc BroadcastRing::push_record(std::span<const std::byte> payload) noexcept {
  const Errc e = write_record(payload);
  if (e == Errc::ok) publish(seq_);
  return e;
}

BatchResult BroadcastRing::try_push_batch(std::span<const std::span<const std::byte>> payloads) noexcept {
  const std::uint64_t start = seq_;
  std::size_t count = 0;
  Errc status = Errc::ok;
  for (const auto& payload : payloads) {
    if (payload.size() <= kMaxPayload) {
      if (status = check_room(1); status != Errc::ok) break;
      write_inline(payload);
    } else if (status = write_record(payload); status != Errc::ok) {
      break;
    }
    ++count;
  }
  if (seq_ != start) publish(seq_);
  return {count, status};
}

ProducerClaim BroadcastRing::try_claim(std::size_t length) noexcept {
  ProducerClaim claim;
  if (length > max_message_) {
    claim.status_ = Errc::payload_too_large;
    return claim;
  }
  if (length <= kMaxPayload) {
    // Short enough to be inline: written into a buffer of the handle and
    // committed by write_slot, like try_push (a 52-byte copy costs less than
    // a record's header).
    if (const Errc e = check_room(1); e != Errc::ok) {
      claim.status_ = e;
      return claim;
    }
    claim.data_ = small_claim_;
    claim.pos_ = seq_;
  } else {
    std::uint64_t pos = 0;
    if (const Errc e = reserve_record(layout::record_slots(length), pos); e != Errc::ok) {
      claim.status_ = e;
      return claim;
    }
    claim.data_ = (flags_ & kFlagLossy) != 0 ? staging_.get() : record_payload(pos);
    claim.pos_ = pos;
  }
  claim.ring_ = this;
  claim.length_ = length;
  return claim;
}

void BroadcastRing::finish_claim(ProducerClaim& claim, std::size_t length, bool commit) noexcept {
  if (!commit) {
    // A padding written for a record claim stays: publish it.
    if (seq_ != producer().producer_seq.load(std::memory_order_relaxed)) publish(seq_);
    return;
  }
  const std::uint64_t pos = claim.pos_;
  if (claim.length_ <= kMaxPayload) {
    write_inline(std::span<const std::byte>(small_claim_, length));  // at pos: nothing moved seq_ since
  } else {
    const std::uint64_t slots = layout::record_slots(length);
    // A record committed shorter than it was claimed ends earlier: stamp its
    // new end (the intent already covers it).
    begin_write(pos + slots);
    if ((flags_ & kFlagLossy) != 0) store_words(record_payload(pos), staging_.get(), length);
    commit_record(pos, kRecordMessage, slots, length);
    seq_ = pos + slots;
    add_extra_slots(slots - 1);
    payload_bytes_ += length;
  }
  publish(seq_);
}

// --- reading -------------------------------------------------------------------

BroadcastRing::RecordRead BroadcastRing::read_record(ConsumerId id, std::uint64_t pos, std::uint64_t w0,
                                                     std::byte* copy_to, std::size_t room,
                                                     bool in_place_ok) const noexcept {
  RecordRead rec;
  const auto meta = static_cast<std::uint32_t>(w0);
  const std::uint32_t kind = (meta >> kRecordKindShift) & kRecordKindMask;
  rec.slots = meta & kRecordSlotsMask;
  rec.length = w0 >> 32;
  const bool valid = rec.slots >= 1 && rec.slots <= room_before_boundary(pos) &&
                     (kind == kRecordPadding ? rec.length == 0
                      : kind == kRecordLoss  ? rec.slots == 1
                                             : kind == kRecordMessage && rec.length <= max_message_ &&
                                                  layout::record_slots(rec.length) == rec.slots);
  const layout::TailLine& tail = header_->tail;
  if (!valid) {
    // A header that makes no sense is either one a later lap is rewriting
    // (the version check saw it whole, but not its payload) or a damaged file.
    std::atomic_thread_fence(std::memory_order_acquire);
    // relaxed: ordered by the fence above; see the validation below.
    const bool overwritten = tail.write_intent.load(std::memory_order_relaxed) > pos + capacity_;
    rec.outcome = overwritten ? ReadOutcome::kOverwritten : ReadOutcome::kCorrupt;
    return rec;
  }
  if (kind != kRecordMessage) {
    rec.padding = true;
    if (kind == kRecordLoss) rec.lost = rec.length;
    return rec;
  }
  if (in_place_ok && !lappable(id, pos)) {
    // Invariant 10: the producer waits for this consumer before it rewrites
    // these slots, so they hold still until the cursor passes them.
    rec.in_place = true;
    rec.data = {record_payload(pos), rec.length};
    return rec;
  }
  if (rec.length > room) return rec;  // the caller reports buffer_too_small
  load_words(record_payload(pos), copy_to, rec.length);
#if !RINGCAST_TSAN
  // acquire fence: pairs with the release fence in begin_write. If any load
  // above saw a byte of a later lap, the intent load below sees that lap's
  // intent, which reaches this record's slots.
  std::atomic_thread_fence(std::memory_order_acquire);
#endif
  rec.data = {copy_to, rec.length};
  // relaxed: ordered after the word loads by the fence (or by their acquire
  // loads under TSan). (R4 in docs/memory-ordering.md; seqlock_detector_test
  // builds without it.)
  if (tail.write_intent.load(std::memory_order_relaxed) > pos + capacity_) rec.outcome = ReadOutcome::kOverwritten;
  return rec;
}

RecvResult BroadcastRing::recv_other(ConsumerId id, std::uint64_t pos, ReadOutcome outcome, std::uint64_t w0,
                                     std::span<std::byte> out) noexcept {
  if (outcome != ReadOutcome::kRecord) {
    const RecvResult r = recv_slow(id, pos, outcome, out.data());
    if (r.status != Errc::ok) return r;
    if (r.missed == 0) {  // an inline message, now in `out`
      advance_cursor(id, pos + 1);
      return {Errc::ok, r.length};
    }
    w0 = r.missed;
  }
  return recv_record(id, pos, w0, out);
}

RecvResult BroadcastRing::recv_short(ConsumerId id, std::span<std::byte> out) noexcept {
  // relaxed: only this consumer writes its cursor (invariant 1).
  const std::uint64_t pos = consumer(id).cursor.load(std::memory_order_relaxed);
  alignas(8) std::byte small[kMaxPayload];
  std::uint32_t length = 0;
  std::uint64_t w0 = 0;
  const ReadOutcome outcome = read_slot(pos, small, length, w0, lappable(id, pos));
  if (outcome != ReadOutcome::kOk) {
    if (outcome == ReadOutcome::kRecord) return recv_record(id, pos, w0, out);
    const RecvResult r = recv_slow(id, pos, outcome, small);
    if (r.status != Errc::ok) return r;
    if (r.missed != 0) return recv_record(id, pos, r.missed, out);
    length = r.length;
  }
  if (length > out.size()) return {Errc::buffer_too_small, length};
  if (length != 0) std::memcpy(out.data(), small, length);
  advance_cursor(id, pos + 1);
  return {Errc::ok, length};
}

RecvResult BroadcastRing::recv_record(ConsumerId id, std::uint64_t pos, std::uint64_t w0,
                                      std::span<std::byte> out) noexcept {
  const RecordRead rec = read_record(id, pos, w0, out.data(), out.size(), true);
  if (rec.outcome != ReadOutcome::kOk) {
    return recv_slow(id, pos, rec.outcome, nullptr);
  }
  if (rec.padding) {
    local_[id].upstream_lost_seen += rec.lost;
    advance_cursor(id, pos + rec.slots);
    return try_recv(id, out);  // a padding or marker is followed by a message or by at most two more of them
  }
  if (rec.length > out.size()) return {Errc::buffer_too_small, static_cast<std::uint32_t>(rec.length)};
  if (rec.in_place && rec.length != 0) std::memcpy(out.data(), rec.data.data(), rec.length);
  advance_cursor(id, pos + rec.slots);
  return {Errc::ok, static_cast<std::uint32_t>(rec.length)};
}

MessageView BroadcastRing::try_view(ConsumerId id) noexcept {
  if (!owns(id)) return {Errc::invalid_consumer, {}, false, 0};
  ConsumerLocal& local = local_[id];
  // relaxed: only this consumer writes its cursor (invariant 1).
  const std::uint64_t pos = consumer(id).cursor.load(std::memory_order_relaxed);
  std::byte* buffer = local.buffer.get();
  std::uint32_t length = 0;
  std::uint64_t w0 = 0;
  const ReadOutcome outcome = read_slot(pos, buffer, length, w0, lappable(id, pos));
  if (outcome != ReadOutcome::kOk && outcome != ReadOutcome::kRecord) {
    const RecvResult r = recv_slow(id, pos, outcome, buffer);
    if (r.status != Errc::ok) return {r.status, {}, false, r.missed};
    length = r.length;
    w0 = r.missed;
  }
  if (w0 == 0) {
    local.view_next = pos + 1;
    return {Errc::ok, {buffer, length}, false, 0};
  }
  const RecordRead rec = read_record(id, pos, w0, buffer, buffer_bytes_, true);
  if (rec.outcome != ReadOutcome::kOk) {
    const RecvResult r = recv_slow(id, pos, rec.outcome, nullptr);
    return {r.status, {}, false, r.missed};
  }
  if (rec.padding) {
    local.upstream_lost_seen += rec.lost;
    advance_cursor(id, pos + rec.slots);
    return try_view(id);  // a padding or marker is followed by a message or by at most two more of them
  }
  local.view_next = pos + rec.slots;
  return {Errc::ok, rec.data, rec.in_place, 0};
}

Errc BroadcastRing::release_view(ConsumerId id) noexcept {
  if (!owns(id)) return Errc::invalid_consumer;
  ConsumerLocal& local = local_[id];
  // relaxed: only this consumer writes its cursor (invariant 1).
  if (local.view_next <= consumer(id).cursor.load(std::memory_order_relaxed)) return Errc::invalid_consumer;
  advance_cursor(id, std::exchange(local.view_next, 0));
  return Errc::ok;
}

}  // namespace ringcast
