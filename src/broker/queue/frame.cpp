#include "broker/queue/frame.hpp"

#include <cstring>
#include <new>
#include <vector>

namespace ringcast::broker {

FrameRef FrameRef::allocate_frames(std::span<const std::uint32_t> sizes, bool droppable) {
  std::size_t total = 0;
  for (std::uint32_t s : sizes) total += s;
  void* mem = ::operator new(sizeof(FrameBlock) + sizes.size() * sizeof(std::uint32_t) + total);
  auto* b = new (mem) FrameBlock(static_cast<std::uint32_t>(sizes.size()), total, droppable);
  auto* ends = reinterpret_cast<std::uint32_t*>(b + 1);
  std::uint32_t end = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) ends[i] = end += sizes[i];
  return FrameRef(b);
}

FrameRef FrameRef::allocate(std::size_t size, bool droppable) {
  const auto s = static_cast<std::uint32_t>(size);
  return allocate_frames({&s, 1}, droppable);
}

FrameRef FrameRef::copy_of(std::string_view bytes, bool droppable) {
  FrameRef f = allocate(bytes.size(), droppable);
  if (!bytes.empty()) std::memcpy(f.mutable_data(), bytes.data(), bytes.size());
  return f;
}

FrameRef copy_frames(const FrameSpan& span) {
  std::vector<std::uint32_t> sizes(span.count);
  for (std::uint32_t i = 0; i < span.count; ++i)
    sizes[i] = static_cast<std::uint32_t>(span.block->frame(span.first + i).size());
  FrameRef copy = FrameRef::allocate_frames(sizes, span.block->droppable());
  std::memcpy(copy.mutable_data(), span.data(), span.size());
  return copy;
}

void FrameRef::reset() noexcept {
  if (b_ == nullptr) return;
  // acq_rel: the release half orders this holder's reads of the bytes before the
  // decrement; the acquire half, on the final decrement, orders the free after
  // every other holder's release. Pairs with the decrements of the other holders.
  if (b_->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    b_->~FrameBlock();
    ::operator delete(static_cast<void*>(b_));
  }
  b_ = nullptr;
}

}  // namespace ringcast::broker
