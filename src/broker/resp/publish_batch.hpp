// The PUBLISHes one RESP connection has parsed but not yet executed
// (resp/session.hpp, invariant 3): each channel and payload copied back to
// back into one buffer, with whether the client wants its reply. The session
// executes them together (one index lock, one queue push per subscriber per
// run of one channel) when another command, the end of the input or a cap
// comes.
//
// Bounds: a batch is full once it holds kMaxPublishes entries or kMaxBytes
// bytes, so it never holds more than kMaxBytes plus one entry of at most
// kMaxPayload, and the buffer's capacity (kept for the next batch) stays under
// twice that.
//
// Thread safety: none; the connection's owning thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ringcast/broker/message.hpp"

namespace ringcast::broker {

class PublishBatch {
 public:
  static constexpr std::size_t kMaxPublishes = 1024;
  static constexpr std::size_t kMaxPayload = 64u << 10;  // channel + payload; larger are not batched
  static constexpr std::size_t kMaxBytes = 1u << 20;

  // Whether a PUBLISH of `channel` and `payload` may be batched (larger ones
  // are published from the parser's copy).
  [[nodiscard]] static bool fits(std::string_view channel, std::string_view payload) noexcept {
    return channel.size() + payload.size() <= kMaxPayload;
  }

  // Appends one PUBLISH. REQUIRES: fits(channel, payload). Returns true when
  // the batch is full: the caller executes it before adding more.
  bool add(std::string_view channel, std::string_view payload, bool reply);

  [[nodiscard]] bool empty() const noexcept { return entries_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }
  // Whether the client wants entry i's reply (CLIENT REPLY, session.hpp invariant 5).
  [[nodiscard]] bool reply(std::size_t i) const noexcept { return entries_[i].reply; }
  // Replaces `out` with the batch's messages, which point into the batch: valid
  // until it changes.
  void messages(std::vector<Message>& out) const;

  // Forgets the first `n` entries (executed while the rest wait).
  void drop_front(std::size_t n);
  void clear() noexcept;

 private:
  struct Entry {
    std::uint32_t channel_len;
    std::uint32_t payload_len;
    bool reply;
  };
  std::vector<Entry> entries_;
  std::string bytes_;
};

}  // namespace ringcast::broker
