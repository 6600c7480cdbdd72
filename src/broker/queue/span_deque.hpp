// The FIFO of FrameSpans behind a connection queue (connection_queue.hpp): a
// circular buffer that grows by doubling and keeps its capacity, so a
// steady-state queue never allocates; plus the positions conflation needs.
//
// Thread safety: none; the owning ConnectionQueue guards it with its mutex.
//
// Invariants:
//  1. The buffer's size is a power of two (or 0) and at least size().
//  2. Span i (0 = front) has the position front_position() + i. A span keeps
//     its position until it is popped, or until erase() or truncate() moves or
//     drops spans at or before it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "broker/queue/frame.hpp"

namespace ringcast::broker {

class SpanDeque {
 public:
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  // REQUIRES: i < size().
  [[nodiscard]] FrameSpan& operator[](std::size_t i) noexcept { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  [[nodiscard]] const FrameSpan& operator[](std::size_t i) const noexcept {
    return buf_[(head_ + i) & (buf_.size() - 1)];
  }
  // Spans ever popped from the front: the position of the front span.
  [[nodiscard]] std::uint64_t front_position() const noexcept { return front_pos_; }
  // push_back() calls, ever.
  [[nodiscard]] std::uint64_t pushed() const noexcept { return pushed_; }

  // Allocates only when full (doubling, from kInitialSpans).
  void push_back(FrameSpan s) {
    if (count_ == buf_.size()) {
      std::vector<FrameSpan> bigger(buf_.empty() ? kInitialSpans : buf_.size() * 2);
      for (std::size_t i = 0; i < count_; ++i) bigger[i] = std::move((*this)[i]);
      buf_.swap(bigger);
      head_ = 0;
    }
    buf_[(head_ + count_) & (buf_.size() - 1)] = std::move(s);
    ++count_;
    ++pushed_;
  }
  // REQUIRES: !empty().
  FrameSpan pop_front() noexcept {
    FrameSpan s = std::move(buf_[head_]);
    head_ = (head_ + 1) & (buf_.size() - 1);
    --count_;
    ++front_pos_;
    return s;
  }
  // Removes span i, shifting the later ones down: O(size() - i), for rare cases.
  void erase(std::size_t i) noexcept {
    for (std::size_t j = i; j + 1 < count_; ++j) (*this)[j] = std::move((*this)[j + 1]);
    (*this)[count_ - 1] = FrameSpan{};
    --count_;
  }
  // Drops (and releases) the spans from n on. REQUIRES: n <= size().
  void truncate(std::size_t n) noexcept {
    for (std::size_t i = n; i < count_; ++i) (*this)[i] = FrameSpan{};
    count_ = n;
  }

 private:
  // Small: the ring keeps its capacity, and every idle connection has queued
  // a reply or two (its handshake's) and holds it; a busy queue doubles to its
  // steady size once.
  static constexpr std::size_t kInitialSpans = 4;
  std::vector<FrameSpan> buf_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  std::uint64_t front_pos_ = 0;
  std::uint64_t pushed_ = 0;
};

}  // namespace ringcast::broker
