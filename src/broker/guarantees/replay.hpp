// The history a subscribe sends before live messages (docs/guarantees.md,
// "Recovery"): every message after {offset, epoch} (`since`), or the last N
// (`history`), read in two steps around the subscription so that the seam
// between history and live messages has no gap and no duplicate even while
// publishers run.
//
//  1. Before the subscription, read() reads what history holds now. It may
//     take long (100k messages); publishers run on meanwhile.
//  2. With the index update lock held (SubscriptionUpdate: no publish run is
//     in flight, and every run that took an id is in history;
//     subscription_index.hpp, invariant 5), complete() reads the runs
//     appended since step 1 and fixes the result: the messages up to the
//     channel's top now. The subscription added under the same lock gets every
//     later run live.
// The session may encode() after step 1 (outside the lock: most of the work
// for a long replay) and must encode() after step 2; it queues the reply, then
// frames(), then lets the lock go.
//
// Thread safety: one object per subscribe, used by the subscribing session's
// thread only; the store it reads is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "broker/core/frame.hpp"
#include "broker/core/wire_format.hpp"
#include "broker/guarantees/channel_history.hpp"

namespace ringcast::broker {

class Replay {
 public:
  // Everything after `offset` of epoch `epoch` (since). REQUIRES: h.rule(channel).
  static Replay since(const ChannelHistory& h, std::string channel, std::uint64_t offset, std::string epoch);
  // The last `n` messages (history: N). REQUIRES: h.rule(channel).
  static Replay last(const ChannelHistory& h, std::string channel, std::size_t n);

  // Step 1 (before the lock). Store errors make the replay fail (recovered()
  // false, no messages), never throw.
  void read();
  // Step 2. REQUIRES: the index update lock held; read() called.
  void complete();

  // since: true iff every message after the client's offset is in messages
  // (same epoch, nothing pruned, the offset not ahead). last: always true.
  [[nodiscard]] bool recovered() const noexcept { return recovered_; }
  // The channel's top offset as of complete(): the last message the replay
  // holds, or the one before the first live message.
  [[nodiscard]] std::uint64_t offset() const noexcept { return top_; }
  [[nodiscard]] std::size_t size() const noexcept { return messages_.size(); }
  // Encodes the messages not encoded yet as `message` deliveries in format
  // `f`, blocks of consecutive messages (those of one publish run share its
  // timestamp), in offset order. REQUIRES: the same `f` at every call.
  void encode(WireFormat f);
  // The encoded messages (all of them after complete() and encode()).
  [[nodiscard]] const std::vector<FrameRef>& frames() const noexcept { return frames_; }

 private:
  enum class Mode : std::uint8_t { kSince, kLast };
  Replay(const ChannelHistory& h, Mode mode, std::string channel) : h_(&h), mode_(mode), channel_(std::move(channel)) {}
  // Appends a read's messages; false (and the replay failed) on a hole.
  void take(HistoryRead&& r);
  void fail() noexcept;

  const ChannelHistory* h_;
  Mode mode_;
  std::string channel_;
  std::uint64_t since_ = 0;  // kSince: the client's offset
  std::string epoch_;        // kSince: the client's epoch
  std::size_t n_ = 0;        // kLast
  bool recovered_ = true;
  bool failed_ = false;
  std::uint64_t top_ = 0;
  std::uint64_t read_to_ = 0;  // the offset step 1 read up to
  std::vector<HistoryMessage> messages_;
  std::size_t encoded_ = 0;  // messages_[0, encoded_) are in frames_
  std::vector<FrameRef> frames_;
};

}  // namespace ringcast::broker
