#include "broker/core/frame.hpp"

#include <charconv>
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

namespace {

std::size_t digits(std::size_t v) noexcept {
  std::size_t n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

std::size_t bulk_size(std::size_t len) noexcept { return 1 + digits(len) + 2 + len + 2; }

char* put_bulk(char* p, std::string_view s) noexcept {
  *p++ = '$';
  p = std::to_chars(p, p + 20, s.size()).ptr;
  *p++ = '\r';
  *p++ = '\n';
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  p += s.size();
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

// Encodes one push per message of `run`: the fixed head (type byte, array
// header, kind and the optional pattern bulk), then channel and payload bulks.
// The sizes vector is per thread and keeps its capacity: a steady publisher does
// not allocate for it.
FrameRef encode_run(WireFormat resp, std::string_view head, const std::string_view* pattern,
                    std::span<const Message> run) {
  thread_local std::vector<std::uint32_t> sizes;
  sizes.clear();
  const std::size_t fixed = 1 + head.size() + (pattern != nullptr ? bulk_size(pattern->size()) : 0);
  for (const Message& m : run) {
    sizes.push_back(static_cast<std::uint32_t>(fixed + bulk_size(m.channel.size()) + bulk_size(m.payload.size())));
  }
  FrameRef f = FrameRef::allocate_frames(sizes, true);
  char* p = f.mutable_data();
  for (const Message& m : run) {
    *p++ = resp == WireFormat::kResp3 ? '>' : '*';
    std::memcpy(p, head.data(), head.size());
    p += head.size();
    if (pattern != nullptr) p = put_bulk(p, *pattern);
    p = put_bulk(p, m.channel);
    p = put_bulk(p, m.payload);
  }
  return f;
}

}  // namespace

FrameRef encode_messages(WireFormat resp, std::span<const Message> run) {
  return encode_run(resp, "3\r\n$7\r\nmessage\r\n", nullptr, run);
}

FrameRef encode_pmessages(WireFormat resp, std::string_view pattern, std::span<const Message> run) {
  return encode_run(resp, "4\r\n$8\r\npmessage\r\n", &pattern, run);
}

FrameRef encode_smessages(WireFormat resp, std::span<const Message> run) {
  return encode_run(resp, "3\r\n$8\r\nsmessage\r\n", nullptr, run);
}

FrameRef encode_message(WireFormat resp, std::string_view channel, std::string_view payload) {
  const Message m{channel, payload};
  return encode_messages(resp, {&m, 1});
}

}  // namespace ringcast::broker
