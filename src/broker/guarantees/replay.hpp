// The history a subscribe sends before live messages (docs/guarantees.md,
// "Recovery"): every message after {offset, epoch} (`since`), the last N
// (`history`), or what a durable QoS 1 session missed since its floor
// (`resume`), read in two steps around the subscription so that the seam
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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "broker/guarantees/channel_history.hpp"
#include "broker/queue/frame.hpp"
#include "broker/queue/wire_format.hpp"

namespace ringcast::broker {

class Replay {
 public:
  // Everything after `offset` of epoch `epoch` (since). REQUIRES: h.rule(channel).
  static Replay since(const ChannelHistory& h, std::string channel, std::uint64_t offset, std::string epoch);
  // The last `n` messages (history: N). REQUIRES: h.rule(channel).
  static Replay last(const ChannelHistory& h, std::string channel, std::size_t n);
  // A durable session's resume (docs/guarantees.md, "Durable subscribers"):
  // everything after `floor`, encoded at QoS 1. Unlike since(), a pruned range
  // is no failure: the messages still held are replayed and lost() names what
  // is gone. REQUIRES: h.rule(channel).
  static Replay resume(const ChannelHistory& h, std::string channel, std::uint64_t floor);

  // Step 1 (before the lock). Store errors make the replay fail (recovered()
  // false, no messages), never throw.
  void read();
  // Step 2. REQUIRES: the index update lock held; read() called.
  void complete();
  // resume, before complete(): the session's floor is now `floor` (a pattern
  // subscription of its connection delivered on the channel meanwhile): what
  // step 1 read up to it is dropped (re-encoded if it was encoded; rare). A
  // floor below the one given to resume() drops everything, and complete()
  // reads it all.
  void advance(std::uint64_t floor);

  // since: true iff every message after the client's offset is in messages
  // (same epoch, nothing pruned, the offset not ahead). last: always true.
  [[nodiscard]] bool recovered() const noexcept { return recovered_; }
  // A store read failed (its message in error()); nothing is replayed.
  [[nodiscard]] bool failed() const noexcept { return failed_; }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  // resume: the ranges [first, last] pruned before they could be read, in order.
  [[nodiscard]] const std::vector<std::pair<std::uint64_t, std::uint64_t>>& lost() const noexcept { return lost_; }
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
  // The offset of each block's first message (frames()[i] holds consecutive
  // offsets from frame_offsets()[i]).
  [[nodiscard]] const std::vector<std::uint64_t>& frame_offsets() const noexcept { return frame_offsets_; }

 private:
  enum class Mode : std::uint8_t { kSince, kLast, kResume };
  Replay(const ChannelHistory& h, Mode mode, std::string channel) : h_(&h), mode_(mode), channel_(std::move(channel)) {}
  // Appends a read's messages; false (and the replay failed) on a hole.
  void take(HistoryRead&& r);
  void fail(std::string error = {}) noexcept;
  // resume: records what a read of everything after `since` found pruned.
  void note_lost(std::uint64_t since, const HistoryRead& r);
  void clear_encoding() noexcept;

  const ChannelHistory* h_;
  Mode mode_;
  std::string channel_;
  std::uint64_t since_ = 0;  // kSince: the client's offset; kResume: the session's floor
  std::string epoch_;        // kSince: the client's epoch
  std::size_t n_ = 0;        // kLast
  bool recovered_ = true;
  bool failed_ = false;
  std::string error_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> lost_;
  std::uint64_t top_ = 0;
  std::uint64_t read_to_ = 0;  // the offset step 1 read up to
  std::vector<HistoryMessage> messages_;
  std::size_t encoded_ = 0;  // messages_[0, encoded_) are in frames_
  std::vector<FrameRef> frames_;
  std::vector<std::uint64_t> frame_offsets_;
};

}  // namespace ringcast::broker
