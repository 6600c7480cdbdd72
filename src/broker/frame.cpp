#include "broker/frame.hpp"

#include <charconv>
#include <cstring>
#include <new>

namespace ringcast::broker {

FrameRef FrameRef::allocate(std::size_t size, bool droppable) {
  void* mem = ::operator new(sizeof(Frame) + size);
  return FrameRef(new (mem) Frame(size, droppable));
}

FrameRef FrameRef::copy_of(std::string_view bytes, bool droppable) {
  FrameRef f = allocate(bytes.size(), droppable);
  if (!bytes.empty()) std::memcpy(f.mutable_data(), bytes.data(), bytes.size());
  return f;
}

void FrameRef::reset() noexcept {
  if (f_ == nullptr) return;
  // acq_rel: the release half orders this holder's reads of the bytes before the
  // decrement; the acquire half, on the final decrement, orders the free after
  // every other holder's release. Pairs with the decrements of the other holders.
  if (f_->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    f_->~Frame();
    ::operator delete(static_cast<void*>(f_));
  }
  f_ = nullptr;
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

}  // namespace

FrameRef encode_message(Resp resp, std::string_view channel, std::string_view payload) {
  constexpr std::string_view kHead = "3\r\n$7\r\nmessage\r\n";
  const std::size_t size = 1 + kHead.size() + bulk_size(channel.size()) + bulk_size(payload.size());
  FrameRef f = FrameRef::allocate(size, true);
  char* p = f.mutable_data();
  *p++ = resp == Resp::kResp3 ? '>' : '*';
  std::memcpy(p, kHead.data(), kHead.size());
  p = put_bulk(p + kHead.size(), channel);
  put_bulk(p, payload);
  return f;
}

FrameRef encode_pmessage(Resp resp, std::string_view pattern, std::string_view channel,
                         std::string_view payload) {
  constexpr std::string_view kHead = "4\r\n$8\r\npmessage\r\n";
  const std::size_t size = 1 + kHead.size() + bulk_size(pattern.size()) +
                           bulk_size(channel.size()) + bulk_size(payload.size());
  FrameRef f = FrameRef::allocate(size, true);
  char* p = f.mutable_data();
  *p++ = resp == Resp::kResp3 ? '>' : '*';
  std::memcpy(p, kHead.data(), kHead.size());
  p = put_bulk(p + kHead.size(), pattern);
  p = put_bulk(p, channel);
  put_bulk(p, payload);
  return f;
}

}  // namespace ringcast::broker
