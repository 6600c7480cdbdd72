// MutexDequeRing: the baseline the issue and the seed compare against.
// std::mutex + std::deque of fixed 52-byte messages + per-consumer cursors +
// a base sequence, guarded by three mutexes in the protocol shape the seed
// describes (Mutex<VecDeque> + Mutex<Vec<cursor>> + Mutex<base_seq>), with the
// same capacity and back-pressure as BroadcastRing: try_push returns full when
// the slowest active consumer is `capacity` behind.
//
// In one process only (std::mutex); it lives in bench/ and nowhere else.
//
// Written to be as fast as that shape allows, so that the comparison is fair:
//  * each mutex and the data it guards sit on their own cache lines;
//  * the lock order is fixed (cursors, base, queue) and no section calls out;
//  * a consumer reads its own cursor without a lock (it is the only writer),
//    and copies a drained batch out under the lock but calls its callback
//    after unlocking, so the producer is never held up by a slow callback;
//  * messages are fixed-size values in the deque (no per-message allocation
//    beyond std::deque's own block recycling).
// kLazyTrim = false is the seed's shape: every push takes the cursors lock to
// find the slowest consumer and trims the deque (three lock cycles per push).
// kLazyTrim = true is the optimisation a careful engineer adds next (the same
// one BroadcastRing makes with its cached minimum): the cursors lock is taken
// only when the deque holds `capacity` messages.
//
// Thread safety: one producing thread; each consumer id used by one thread at
// a time; observers from any thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <span>

#include "ringcast/broadcast_ring.hpp"

namespace ringcast::bench {

template <bool kLazyTrim>
class MutexDequeRing {
 public:
  explicit MutexDequeRing(std::uint64_t capacity) : capacity_(capacity) {}
  MutexDequeRing(const MutexDequeRing&) = delete;
  MutexDequeRing& operator=(const MutexDequeRing&) = delete;

  // Starts at the current producer position (no history), like BroadcastRing.
  std::optional<ConsumerId> register_consumer() {
    std::scoped_lock lock(cursors_mu_, base_mu_, queue_mu_);
    for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
      if (!active_[id]) {
        active_[id] = true;
        cursors_[id] = base_ + queue_.size();
        return id;
      }
    }
    return std::nullopt;
  }

  void unregister_consumer(ConsumerId id) {
    std::lock_guard lock(cursors_mu_);
    active_[id] = false;
  }

  [[nodiscard]] Errc try_push(std::span<const std::byte> payload) {
    if (payload.size() > kMaxPayload) return Errc::payload_too_large;
    if constexpr (kLazyTrim) {
      {
        std::scoped_lock lock(base_mu_, queue_mu_);
        if (queue_.size() < capacity_) {
          append(payload);
          return Errc::ok;
        }
      }
      return push_after_trim(payload);
    } else {
      return push_after_trim(payload);
    }
  }

  BatchResult try_push_batch(std::span<const std::span<const std::byte>> payloads) {
    std::size_t n = 0;
    for (const auto& p : payloads) {
      if (const Errc e = try_push(p); e != Errc::ok) return {n, e};
      ++n;
    }
    return {n, Errc::ok};
  }

  RecvResult try_recv(ConsumerId id, std::span<std::byte, kMaxPayload> out) {
    if (id >= kMaxConsumers || !active_[id]) return {Errc::invalid_consumer};
    const std::uint64_t cursor = cursors_[id];  // only this consumer writes it
    std::uint32_t length = 0;
    {
      std::scoped_lock lock(base_mu_, queue_mu_);
      const std::uint64_t index = cursor - base_;
      if (index >= queue_.size()) return {Errc::empty};
      const Entry& e = queue_[index];
      length = e.length;
      std::memcpy(out.data(), e.bytes, kMaxPayload);
    }
    std::lock_guard lock(cursors_mu_);
    cursors_[id] = cursor + 1;
    return {Errc::ok, length};
  }

  // Receives up to `max` messages with one lock section per 64 and one cursor
  // update per call; on_message runs outside the locks.
  template <class OnMessage>
  BatchResult drain(ConsumerId id, OnMessage&& on_message, std::size_t max) {
    if (id >= kMaxConsumers || !active_[id]) return {0, Errc::invalid_consumer};
    const std::uint64_t start = cursors_[id];
    std::uint64_t cursor = start;
    std::array<Entry, kChunk> local;
    while (cursor - start < max) {
      std::size_t n = 0;
      {
        std::scoped_lock lock(base_mu_, queue_mu_);
        const std::uint64_t index = cursor - base_;
        const std::size_t available = queue_.size() > index ? queue_.size() - index : 0;
        n = std::min({available, kChunk, static_cast<std::size_t>(max - (cursor - start))});
        std::copy_n(queue_.begin() + static_cast<std::ptrdiff_t>(index), n, local.begin());
      }
      for (std::size_t i = 0; i < n; ++i) {
        on_message(std::span<const std::byte>(local[i].bytes, local[i].length));
      }
      cursor += n;
      if (n < kChunk) break;
    }
    if (cursor == start) return {0, Errc::empty};
    std::lock_guard lock(cursors_mu_);
    cursors_[id] = cursor;
    return {static_cast<std::size_t>(cursor - start), Errc::ok};
  }

  [[nodiscard]] std::uint64_t lag(ConsumerId id) const {
    if (id >= kMaxConsumers) return 0;
    std::uint64_t published = 0;
    {
      std::scoped_lock lock(base_mu_, queue_mu_);
      published = base_ + queue_.size();
    }
    std::lock_guard lock(cursors_mu_);
    return active_[id] ? published - cursors_[id] : 0;
  }

  [[nodiscard]] bool is_fully_drained() const {
    std::uint64_t published = 0;
    {
      std::scoped_lock lock(base_mu_, queue_mu_);
      published = base_ + queue_.size();
    }
    std::lock_guard lock(cursors_mu_);
    for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
      if (active_[id] && cursors_[id] < published) return false;
    }
    return true;
  }

 private:
  struct Entry {
    std::uint32_t length;
    std::byte bytes[kMaxPayload];
  };
  static_assert(sizeof(Entry) == 56);
  static constexpr std::size_t kChunk = 64;

  void append(std::span<const std::byte> payload) {
    Entry& e = queue_.emplace_back();
    e.length = static_cast<std::uint32_t>(payload.size());
    if (!payload.empty()) std::memcpy(e.bytes, payload.data(), payload.size());
  }

  // The seed's push: find the slowest consumer, trim what everyone has read,
  // refuse when the slowest is `capacity` behind, append.
  Errc push_after_trim(std::span<const std::byte> payload) {
    std::uint64_t min = std::numeric_limits<std::uint64_t>::max();
    {
      std::lock_guard lock(cursors_mu_);
      for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
        if (active_[id]) min = std::min(min, cursors_[id]);
      }
    }
    std::scoped_lock lock(base_mu_, queue_mu_);
    const std::uint64_t published = base_ + queue_.size();
    if (min > published) min = published;  // no active consumer
    // A consumer registered after the scan starts at `published` >= min: safe.
    while (base_ < min) {
      queue_.pop_front();
      ++base_;
    }
    if (published - min >= capacity_) return Errc::full;
    append(payload);
    return Errc::ok;
  }

  const std::uint64_t capacity_;
  alignas(kCacheLine) mutable std::mutex cursors_mu_;
  std::array<std::uint64_t, kMaxConsumers> cursors_{};
  std::array<bool, kMaxConsumers> active_{};
  alignas(kCacheLine) mutable std::mutex base_mu_;
  std::uint64_t base_ = 0;
  alignas(kCacheLine) mutable std::mutex queue_mu_;
  std::deque<Entry> queue_;
};

}  // namespace ringcast::bench
