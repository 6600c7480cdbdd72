// Messages read from a file descriptor, for `ringcast pub` (and written back
// out by `ringcast sub --binary`): one message per line, or length-prefixed
// binary frames.
//
// Binary framing (`--binary`; `ringcast pub --help` and `ringcast sub --help`
// say the same): each message is a 4-byte little-endian unsigned length n,
// then n bytes of payload, with nothing between frames and nothing after the
// last. So `ringcast sub --binary | ringcast pub --binary` copies messages
// from ring to ring byte for byte, whatever they hold.
//
// Cost: one read(2) buffer of max_message + 4 bytes (at least 64 KiB),
// allocated once; a message is handed out as a view into it, so the only copy
// between the descriptor and the ring is the push. A line longer than
// max_message is skipped as it streams past (reported with its length), never
// held whole, so no input can make the reader allocate more.
//
// Thread safety: none; one reader per descriptor.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>

namespace ringcast::tools {

inline constexpr std::size_t kFrameHeaderBytes = 4;

// The 4-byte little-endian length that starts a binary frame.
[[nodiscard]] inline std::array<std::byte, kFrameHeaderBytes> frame_header(std::uint32_t length) noexcept {
  return {static_cast<std::byte>(length), static_cast<std::byte>(length >> 8), static_cast<std::byte>(length >> 16),
          static_cast<std::byte>(length >> 24)};
}

class MessageInput {
 public:
  enum class Status : std::uint8_t {
    kMessage,      // data: the next message (valid until the next call)
    kTooLong,      // the next message had `length` bytes, more than max_message: skipped
    kEnd,          // the input ended cleanly
    kTruncated,    // binary: the input ended inside a frame (`length`: the bytes it announced)
    kInterrupted,  // a signal interrupted read(2): check your stop flag, then call again
    kReadError,    // read(2) failed; `sys_errno` says why
  };
  struct Next {
    Status status = Status::kEnd;
    std::span<const std::byte> data;  // kMessage: the message, in the reader's buffer
    std::uint64_t length = 0;         // the message's bytes (kTruncated: what its header announced, or 0)
    int sys_errno = 0;                // kReadError
  };

  MessageInput(int fd, std::size_t max_message, bool binary)
      : fd_(fd),
        max_message_(max_message),
        binary_(binary),
        capacity_(std::max<std::size_t>(max_message + kFrameHeaderBytes, kMinBuffer)),
        buf_(new std::byte[capacity_]) {}

  // The next message, or why there is none. After kTooLong, kInterrupted the
  // input goes on; after kEnd, kTruncated and kReadError it is over.
  Next next() { return binary_ ? next_frame() : next_line(); }

 private:
  static constexpr std::size_t kMinBuffer = 64 * 1024;

  // Reads more into the free end of the buffer, first moving what is left
  // unread to its front when the end is full. nullopt: some bytes arrived.
  std::optional<Next> fill() {
    if (end_ == capacity_ && begin_ > 0) {
      std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    // Never full here: a message and its newline or header fit the buffer,
    // and anything longer was dropped before asking for more.
    assert(end_ < capacity_);
    const ssize_t n = ::read(fd_, buf_.get() + end_, capacity_ - end_);
    if (n > 0) {
      end_ += static_cast<std::size_t>(n);
      return std::nullopt;
    }
    if (n == 0) {
      eof_ = true;
      return std::nullopt;
    }
    if (errno == EINTR) return Next{Status::kInterrupted, {}, 0, 0};
    return Next{Status::kReadError, {}, 0, errno};
  }

  [[nodiscard]] std::size_t buffered() const noexcept { return end_ - begin_; }

  Next next_line() {
    for (;;) {
      const std::size_t from = begin_ + scanned_;
      const auto* nl = static_cast<const std::byte*>(std::memchr(buf_.get() + from, '\n', end_ - from));
      if (nl != nullptr) {
        const auto at = static_cast<std::size_t>(nl - buf_.get());
        const std::span<const std::byte> line(buf_.get() + begin_, at - begin_);
        begin_ = at + 1;
        scanned_ = 0;
        if (skipped_ > 0 || line.size() > max_message_) return too_long(skipped_ + line.size());
        return {Status::kMessage, line, line.size(), 0};
      }
      scanned_ = buffered();
      if (skipped_ > 0 || scanned_ > max_message_) {
        // Over the limit and still no newline: drop what we hold, count it.
        skipped_ += scanned_;
        begin_ = end_ = scanned_ = 0;
      }
      if (eof_) {
        if (skipped_ > 0) return too_long(skipped_);
        if (buffered() == 0) return {Status::kEnd, {}, 0, 0};
        // The last line, without its newline.
        const std::span<const std::byte> line(buf_.get() + begin_, buffered());
        begin_ = end_ = scanned_ = 0;
        return {Status::kMessage, line, line.size(), 0};
      }
      if (auto stop = fill()) return *stop;
    }
  }

  Next too_long(std::uint64_t length) {
    skipped_ = 0;
    return {Status::kTooLong, {}, length, 0};
  }

  Next next_frame() {
    for (;;) {
      if (skip_left_ > 0) {
        // The rest of a frame over the limit, streamed past.
        const std::size_t drop = static_cast<std::size_t>(std::min<std::uint64_t>(skip_left_, buffered()));
        begin_ += drop;
        skip_left_ -= drop;
        if (skip_left_ == 0) return {Status::kTooLong, {}, skip_length_, 0};
      } else if (buffered() >= kFrameHeaderBytes) {
        const std::byte* h = buf_.get() + begin_;
        const std::uint64_t length =
            std::to_integer<std::uint64_t>(h[0]) | (std::to_integer<std::uint64_t>(h[1]) << 8) |
            (std::to_integer<std::uint64_t>(h[2]) << 16) | (std::to_integer<std::uint64_t>(h[3]) << 24);
        if (length > max_message_) {
          begin_ += kFrameHeaderBytes;
          skip_left_ = skip_length_ = length;
          continue;
        }
        if (buffered() >= kFrameHeaderBytes + length) {
          const std::span<const std::byte> payload(h + kFrameHeaderBytes, static_cast<std::size_t>(length));
          begin_ += kFrameHeaderBytes + static_cast<std::size_t>(length);
          return {Status::kMessage, payload, length, 0};
        }
      }
      if (begin_ == end_) begin_ = end_ = 0;
      if (eof_) {
        if (skip_left_ > 0) return {Status::kTruncated, {}, skip_length_, 0};
        if (buffered() == 0) return {Status::kEnd, {}, 0, 0};
        std::uint64_t announced = 0;
        if (buffered() >= kFrameHeaderBytes) {
          for (std::size_t i = 0; i < kFrameHeaderBytes; ++i) {
            announced |= std::to_integer<std::uint64_t>(buf_[begin_ + i]) << (8 * i);
          }
        }
        begin_ = end_ = 0;
        return {Status::kTruncated, {}, announced, 0};
      }
      if (auto stop = fill()) return *stop;
    }
  }

  const int fd_;
  const std::size_t max_message_;
  const bool binary_;
  const std::size_t capacity_;  // max_message + a frame header, at least kMinBuffer
  std::unique_ptr<std::byte[]> buf_;
  std::size_t begin_ = 0;  // unread bytes are [begin_, end_)
  std::size_t end_ = 0;
  std::size_t scanned_ = 0;        // lines: bytes from begin_ known to hold no newline
  std::uint64_t skipped_ = 0;      // lines: bytes of an over-long line dropped so far
  std::uint64_t skip_left_ = 0;    // frames: bytes of an over-long frame still to drop
  std::uint64_t skip_length_ = 0;  // frames: that frame's announced length
  bool eof_ = false;
};

}  // namespace ringcast::tools
