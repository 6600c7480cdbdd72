// LayoutVariantRing: a comparison structure for the consumer-table layout
// decision of issue 2 (docs/benchmarks.md, "Consumer-table layout").
//
// It is BroadcastRing's slot protocol (the same SeqLock cells, version
// 2*seq+1 while written and 2*seq+2 once committed, the same memory orders,
// consumers detecting a committed slot from its version) on the heap of one
// process, with the consumer table and the producer's room check chosen by
// two template parameters:
//  * kPadded: each consumer's cursor and state on a cache line of its own (the
//    issue 2 layout), or the seed's packed table, cursors[16] on two lines and
//    active[16] on a third, so consumers' cursor stores and the producer's
//    scan fight over shared lines;
//  * kCachedMin: the producer keeps a lower bound on every cursor and scans
//    the table only when that bound says the ring is full (issue 2), or it
//    scans all 16 entries on every push (the seed's protocol step 1).
// LayoutVariantRing<true, true> should measure the same as BroadcastRing; the
// benchmark runs both so the comparison structure is checked against the real
// thing.
//
// Thread safety: as BroadcastRing (one producing thread, a consumer id used by
// one thread at a time). Registration is not synchronised with a running
// producer (the benchmark registers before producing); everything else is.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <span>

#include "ringcast/broadcast_ring.hpp"

namespace ringcast::bench {

template <bool kPadded, bool kCachedMin>
class LayoutVariantRing {
 public:
  explicit LayoutVariantRing(std::uint64_t capacity)
      : capacity_(capacity),
        mask_(capacity - 1),
        slots_(static_cast<layout::Slot*>(
            ::operator new[](capacity * sizeof(layout::Slot), std::align_val_t{kCacheLine}))),
        table_(new Table{}) {
    // Power-of-two capacities only: the benchmarks use nothing else.
    for (std::uint64_t i = 0; i < capacity; ++i) {
      new (&slots_[i]) layout::Slot{};
      slots_[i].version.store(0, std::memory_order_relaxed);
    }
  }
  ~LayoutVariantRing() { ::operator delete[](slots_, std::align_val_t{kCacheLine}); }
  LayoutVariantRing(const LayoutVariantRing&) = delete;
  LayoutVariantRing& operator=(const LayoutVariantRing&) = delete;

  std::optional<ConsumerId> register_consumer() {
    for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
      if (table_->state(id).load(std::memory_order_relaxed) == 0) {
        table_->cursor(id).store(seq_, std::memory_order_relaxed);
        // release: a producer that acquire-loads state=1 sees the cursor.
        table_->state(id).store(1, std::memory_order_release);
        return id;
      }
    }
    return std::nullopt;
  }

  [[nodiscard]] Errc try_push(std::span<const std::byte> payload) noexcept {
    if (payload.size() > kMaxPayload) [[unlikely]]
      return Errc::payload_too_large;
    if (!has_room()) return Errc::full;
    write_slot(seq_, payload);
    ++seq_;
    // release: pairs with acquire loads in lag/is_fully_drained.
    producer_seq_.store(seq_, std::memory_order_release);
    return Errc::ok;
  }

  BatchResult try_push_batch(std::span<const std::span<const std::byte>> payloads) noexcept {
    const std::uint64_t start = seq_;
    Errc status = Errc::ok;
    for (const auto& p : payloads) {
      if (p.size() > kMaxPayload) {
        status = Errc::payload_too_large;
        break;
      }
      if (!has_room()) {
        status = Errc::full;
        break;
      }
      write_slot(seq_, p);
      ++seq_;
    }
    // release: as in try_push, once per batch.
    if (seq_ != start) producer_seq_.store(seq_, std::memory_order_release);
    return {static_cast<std::size_t>(seq_ - start), status};
  }

  RecvResult try_recv(ConsumerId id, std::span<std::byte, kMaxPayload> out) noexcept {
    // relaxed: only this consumer writes its cursor.
    const std::uint64_t seq = table_->cursor(id).load(std::memory_order_relaxed);
    std::uint32_t length = 0;
    if (!read_slot(seq, out.data(), length)) return {Errc::empty};
    // release: pairs with the producer's acquire load in has_room.
    table_->cursor(id).store(seq + 1, std::memory_order_release);
    return {Errc::ok, length};
  }

  template <class OnMessage>
  BatchResult drain(ConsumerId id, OnMessage&& on_message, std::size_t max) {
    const std::uint64_t start = table_->cursor(id).load(std::memory_order_relaxed);
    std::uint64_t seq = start;
    alignas(8) std::byte buffer[kMaxPayload];
    while (seq - start < max) {
      std::uint32_t length = 0;
      if (!read_slot(seq, buffer, length)) break;
      on_message(std::span<const std::byte>(buffer, length));
      ++seq;
    }
    if (seq == start) return {0, Errc::empty};
    table_->cursor(id).store(seq, std::memory_order_release);
    return {static_cast<std::size_t>(seq - start), Errc::ok};
  }

  [[nodiscard]] std::uint64_t lag(ConsumerId id) const noexcept {
    if (table_->state(id).load(std::memory_order_acquire) == 0) return 0;
    const std::uint64_t cursor = table_->cursor(id).load(std::memory_order_acquire);
    const std::uint64_t published = producer_seq_.load(std::memory_order_acquire);
    return published > cursor ? published - cursor : 0;
  }

  [[nodiscard]] bool is_fully_drained() const noexcept {
    const std::uint64_t published = producer_seq_.load(std::memory_order_acquire);
    for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
      if (table_->state(id).load(std::memory_order_acquire) != 0 &&
          table_->cursor(id).load(std::memory_order_acquire) < published) {
        return false;
      }
    }
    return true;
  }

 private:
  struct alignas(kCacheLine) PaddedEntry {
    std::atomic<std::uint64_t> cursor{0};
    std::atomic<std::uint32_t> state{0};
  };
  struct PaddedTable {
    PaddedEntry entries[kMaxConsumers];
    std::atomic<std::uint64_t>& cursor(ConsumerId id) noexcept { return entries[id].cursor; }
    std::atomic<std::uint32_t>& state(ConsumerId id) noexcept { return entries[id].state; }
  };
  // The seed's header line 2 (and 3): consumer_seqs x16, consumer_active x16.
  struct alignas(kCacheLine) PackedTable {
    std::atomic<std::uint64_t> cursors[kMaxConsumers]{};
    std::atomic<std::uint32_t> active[kMaxConsumers]{};
    std::atomic<std::uint64_t>& cursor(ConsumerId id) noexcept { return cursors[id]; }
    std::atomic<std::uint32_t>& state(ConsumerId id) noexcept { return active[id]; }
  };
  using Table = std::conditional_t<kPadded, PaddedTable, PackedTable>;
  static_assert(sizeof(PaddedTable) == kMaxConsumers * kCacheLine);
  static_assert(sizeof(PackedTable) == 3 * kCacheLine);

  bool has_room() noexcept {
    if constexpr (kCachedMin) {
      if (seq_ - cached_min_ < capacity_) [[likely]]
        return true;
    }
    std::uint64_t min = seq_;
    for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
      // acquire: pairs with register_consumer's release store of the state.
      if (table_->state(id).load(std::memory_order_acquire) == 0) continue;
      // acquire: pairs with the consumer's release store of its cursor; its
      // slot reads happen-before our overwrite.
      min = std::min(min, table_->cursor(id).load(std::memory_order_acquire));
    }
    cached_min_ = min;
    return seq_ - min < capacity_;
  }

  // BroadcastRing::write_slot, verbatim in substance.
  void write_slot(std::uint64_t seq, std::span<const std::byte> payload) noexcept {
    layout::Slot& s = slots_[seq & mask_];
    std::uint64_t words[7] = {};
    const auto length = static_cast<std::uint32_t>(payload.size());
    std::memcpy(words, &length, sizeof length);
    if (!payload.empty()) std::memcpy(reinterpret_cast<std::byte*>(words) + 4, payload.data(), payload.size());
    // relaxed: ordering comes from the fence below.
    s.version.store(2 * seq + 1, std::memory_order_relaxed);
    // release fence: pairs with the reader's acquire fence in read_slot.
    std::atomic_thread_fence(std::memory_order_release);
    for (std::size_t i = 0; i < 7; ++i) s.words[i].store(words[i], std::memory_order_relaxed);
    // release: pairs with the reader's acquire load of the version.
    s.version.store(2 * seq + 2, std::memory_order_release);
  }

  // BroadcastRing::read_slot; false for anything but a clean committed read
  // (the benchmarks never lap or stall).
  bool read_slot(std::uint64_t seq, std::byte* out, std::uint32_t& length) const noexcept {
    const layout::Slot& s = slots_[seq & mask_];
    // acquire: pairs with the release store of the committed version.
    const std::uint64_t v1 = s.version.load(std::memory_order_acquire);
    if (v1 != 2 * seq + 2) return false;
    std::uint64_t words[7];
    for (std::size_t i = 0; i < 7; ++i) words[i] = s.words[i].load(std::memory_order_relaxed);
    // acquire fence: pairs with the writer's release fence.
    std::atomic_thread_fence(std::memory_order_acquire);
    // relaxed: ordered after the word loads by the fence.
    if (s.version.load(std::memory_order_relaxed) != v1) return false;
    std::memcpy(&length, words, sizeof length);
    std::memcpy(out, reinterpret_cast<const std::byte*>(words) + 4, kMaxPayload);
    return length <= kMaxPayload;
  }

  const std::uint64_t capacity_;
  const std::uint64_t mask_;
  layout::Slot* slots_;
  std::unique_ptr<Table> table_;
  // Producer-local, on a line of its own: consumers read the fields above on
  // every receive and must not share a line with what the producer writes.
  alignas(kCacheLine) std::uint64_t seq_ = 0;
  std::uint64_t cached_min_ = 0;
  alignas(kCacheLine) std::atomic<std::uint64_t> producer_seq_{0};
  char pad_[kCacheLine - sizeof(std::atomic<std::uint64_t>)]{};
};

}  // namespace ringcast::bench
