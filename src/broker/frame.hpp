// Shared, immutable, reference-counted wire frames.
//
// Thread safety:
//  * A Frame is written only by the thread that created it, before its first
//    FrameRef copy is handed to another thread; afterwards its bytes are immutable
//    and may be read from any thread.
//  * FrameRef copies and destructions may race freely on the same Frame; the
//    reference count is atomic.
//
// Invariants:
//  1. refs_ counts live FrameRef objects pointing at the frame; the frame is freed
//     by the FrameRef whose decrement takes it from 1 to 0.
//  2. size_ never changes after creation.
//
// A publish encodes one `message` frame per RESP version in use and one `pmessage`
// frame per matching pattern; every queue that delivers it holds a FrameRef (one
// pointer, one relaxed increment), never a copy of the bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

namespace ringcast::broker {

class FrameRef;

class Frame {
 public:
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;

  [[nodiscard]] const char* data() const noexcept { return reinterpret_cast<const char*>(this + 1); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::string_view view() const noexcept { return {data(), size_}; }
  // Message frames may be dropped by an overflow policy; replies and loss notices
  // may not (dropping a SUBSCRIBE confirmation would desynchronise the client).
  [[nodiscard]] bool droppable() const noexcept { return droppable_; }

 private:
  friend class FrameRef;
  Frame(std::size_t size, bool droppable) noexcept
      : size_(static_cast<std::uint32_t>(size)), droppable_(droppable) {}
  char* mutable_data() noexcept { return reinterpret_cast<char*>(this + 1); }

  std::atomic<std::uint32_t> refs_{1};
  std::uint32_t size_;
  bool droppable_;
};

// Owning handle to a Frame; copy = share, move = transfer. 8 bytes.
class FrameRef {
 public:
  FrameRef() noexcept = default;
  // Allocates one block holding the header and `size` bytes, uninitialised; fill
  // them through mutable_data() before sharing the frame. REQUIRES: size < 4 GiB.
  static FrameRef allocate(std::size_t size, bool droppable);
  // A frame holding a copy of `bytes`.
  static FrameRef copy_of(std::string_view bytes, bool droppable);

  FrameRef(const FrameRef& o) noexcept : f_(o.f_) {
    // relaxed: taking another reference needs no ordering; the frame's bytes were
    // published to this thread by whatever handed us `o` (a mutex or a post).
    if (f_ != nullptr) f_->refs_.fetch_add(1, std::memory_order_relaxed);
  }
  FrameRef(FrameRef&& o) noexcept : f_(std::exchange(o.f_, nullptr)) {}
  FrameRef& operator=(FrameRef o) noexcept {
    std::swap(f_, o.f_);
    return *this;
  }
  ~FrameRef() { reset(); }

  void reset() noexcept;
  [[nodiscard]] explicit operator bool() const noexcept { return f_ != nullptr; }
  [[nodiscard]] const Frame* get() const noexcept { return f_; }
  [[nodiscard]] const Frame* operator->() const noexcept { return f_; }
  // Only while the frame is still private to its creator.
  [[nodiscard]] char* mutable_data() noexcept { return f_->mutable_data(); }
  [[nodiscard]] std::uint32_t use_count() const noexcept {
    return f_ == nullptr ? 0 : f_->refs_.load(std::memory_order_relaxed);
  }

 private:
  explicit FrameRef(Frame* f) noexcept : f_(f) {}
  Frame* f_ = nullptr;
};

// RESP protocol version of a connection: 2 (arrays) or 3 (pushes).
enum class Resp : std::uint8_t { kResp2 = 2, kResp3 = 3 };

// `message` push: *3 / >3, "message", channel, payload. Droppable.
[[nodiscard]] FrameRef encode_message(Resp resp, std::string_view channel,
                                      std::string_view payload);
// `pmessage` push: *4 / >4, "pmessage", pattern, channel, payload. Droppable.
[[nodiscard]] FrameRef encode_pmessage(Resp resp, std::string_view pattern,
                                       std::string_view channel, std::string_view payload);

}  // namespace ringcast::broker
