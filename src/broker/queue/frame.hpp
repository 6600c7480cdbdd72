// Shared, immutable, reference-counted blocks of wire frames.
//
// A block holds one or more complete wire frames back to back, with the end
// offset of each. A publish of k consecutive messages on one channel (a "run")
// encodes them into one block per wire format and matching pattern; every
// queue that delivers the run holds one reference to the block and a frame range
// of it (FrameSpan), never a copy of the bytes. Replies and loss notices are
// one-frame blocks.
//
// Thread safety:
//  * A block is written only by the thread that created it, before its first
//    FrameRef copy is handed to another thread; afterwards its bytes are immutable
//    and may be read from any thread.
//  * FrameRef copies and destructions may race freely on the same block; the
//    reference count is atomic.
//
// Invariants:
//  1. refs_ counts live FrameRef objects pointing at the block; the block is freed
//     by the FrameRef whose decrement takes it from 1 to 0.
//  2. count_ >= 1; ends()[i] is the end offset of frame i, strictly increasing,
//     and ends()[count_ - 1] == size_. None of them changes after creation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

namespace ringcast::broker {

class FrameRef;

class FrameBlock {
 public:
  FrameBlock(const FrameBlock&) = delete;
  FrameBlock& operator=(const FrameBlock&) = delete;

  // All frames, back to back.
  [[nodiscard]] const char* data() const noexcept { return reinterpret_cast<const char*>(ends() + count_); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::string_view view() const noexcept { return {data(), size_}; }
  [[nodiscard]] std::uint32_t count() const noexcept { return count_; }
  // Byte offsets of frame i: [begin(i), end(i)).
  [[nodiscard]] std::size_t begin(std::uint32_t i) const noexcept { return i == 0 ? 0 : ends()[i - 1]; }
  [[nodiscard]] std::size_t end(std::uint32_t i) const noexcept { return ends()[i]; }
  [[nodiscard]] std::string_view frame(std::uint32_t i) const noexcept {
    return {data() + begin(i), end(i) - begin(i)};
  }
  // Message frames may be dropped by an overflow policy; replies and loss notices
  // may not (dropping a SUBSCRIBE confirmation would desynchronise the client).
  [[nodiscard]] bool droppable() const noexcept { return droppable_; }

 private:
  friend class FrameRef;
  FrameBlock(std::uint32_t count, std::size_t size, bool droppable) noexcept
      : count_(count), size_(static_cast<std::uint32_t>(size)), droppable_(droppable) {}
  [[nodiscard]] const std::uint32_t* ends() const noexcept { return reinterpret_cast<const std::uint32_t*>(this + 1); }

  std::atomic<std::uint32_t> refs_{1};
  std::uint32_t count_;
  std::uint32_t size_;
  bool droppable_;
};

// Owning handle to a FrameBlock; copy = share, move = transfer. 8 bytes.
class FrameRef {
 public:
  FrameRef() noexcept = default;
  // One frame of `size` bytes, uninitialised; fill mutable_data() before sharing
  // it. REQUIRES: size < 4 GiB.
  static FrameRef allocate(std::size_t size, bool droppable);
  // A one-frame block holding a copy of `bytes`.
  static FrameRef copy_of(std::string_view bytes, bool droppable);
  // `sizes.size()` frames (>= 1) of the given sizes, uninitialised, back to back.
  static FrameRef allocate_frames(std::span<const std::uint32_t> sizes, bool droppable);

  FrameRef(const FrameRef& o) noexcept : b_(o.b_) {
    // relaxed: taking another reference needs no ordering; the block's bytes were
    // published to this thread by whatever handed us `o` (a mutex or a post).
    if (b_ != nullptr) b_->refs_.fetch_add(1, std::memory_order_relaxed);
  }
  FrameRef(FrameRef&& o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
  FrameRef& operator=(FrameRef o) noexcept {
    std::swap(b_, o.b_);
    return *this;
  }
  ~FrameRef() { reset(); }

  void reset() noexcept;
  [[nodiscard]] explicit operator bool() const noexcept { return b_ != nullptr; }
  [[nodiscard]] const FrameBlock* get() const noexcept { return b_; }
  [[nodiscard]] const FrameBlock* operator->() const noexcept { return b_; }
  // Only while the block is still private to its creator.
  [[nodiscard]] char* mutable_data() noexcept { return const_cast<char*>(b_->data()); }
  [[nodiscard]] std::uint32_t use_count() const noexcept {
    return b_ == nullptr ? 0 : b_->refs_.load(std::memory_order_relaxed);
  }

 private:
  explicit FrameRef(FrameBlock* b) noexcept : b_(b) {}
  FrameBlock* b_ = nullptr;
};

// Frames [first, first + count) of one block: contiguous bytes, one iovec.
struct FrameSpan {
  FrameRef block;
  std::uint32_t first = 0;
  std::uint32_t count = 0;

  [[nodiscard]] const char* data() const noexcept { return block->data() + block->begin(first); }
  [[nodiscard]] std::size_t size() const noexcept { return block->end(first + count - 1) - block->begin(first); }
  [[nodiscard]] std::string_view view() const noexcept { return {data(), size()}; }
};

// A block of its own holding a copy of `span`'s frames (their sizes and
// droppability): for whoever keeps part of a shared block (a queue that lost
// some of its frames, a QoS 1 window that admits a prefix, a refused run's
// accepted prefix) without encoding anything again. REQUIRES: span.count >= 1.
[[nodiscard]] FrameRef copy_frames(const FrameSpan& span);

}  // namespace ringcast::broker
