// The QoS 1 loss notices one connection is owed (docs/guarantees.md, "QoS 1
// loss notices"). Its AckTracker reports each delivery it loses (expired, or
// dropped from its waiting list by the overflow policy) to the connection's
// queue, which keeps them here and queues notices only when it has room
// (connection_queue.hpp, invariant 9). Until then a loss joins the owed
// notice of its kind and channel, so a run of losses becomes one notice that
// names its lowest and highest message id and how many were lost: what is
// owed costs one entry per (kind, channel), however many deliveries are lost,
// and a subscriber cannot be disconnected by notices about its own losses.
//
// Thread safety: none; the queue calls it under its own lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ringcast::broker {

enum class Qos1Loss : std::uint8_t {
  kExpired,        // sent 1 + --max-retries times and never acked
  kWindowDropped,  // waited past the in-flight window and met the overflow policy
};

class LossRanges {
 public:
  // Message `id` of `channel` was lost; `total` is its tracker's count of
  // losses of this kind so far, `sends` how often it was sent (kExpired; 0
  // otherwise). O(1) expected; allocates for a (kind, channel) not owed yet.
  void add(Qos1Loss kind, std::string_view channel, std::uint64_t id, std::uint64_t total, std::uint32_t sends);

  [[nodiscard]] bool empty() const noexcept { return ranges_.empty(); }
  // The oldest owed notice's text (format_qos1_loss_notice). REQUIRES: !empty().
  [[nodiscard]] std::string front() const;
  // Forgets the oldest owed notice (queued). REQUIRES: !empty().
  void pop_front();

 private:
  struct Range {
    Qos1Loss kind;
    std::string channel;
    std::uint64_t first;  // lowest id lost
    std::uint64_t last;   // highest id lost
    std::uint64_t count;  // ids lost in [first, last]
    std::uint64_t total;  // the tracker's count at the latest of them
    std::uint32_t sends;  // the first one's (kExpired)
  };
  struct KeyHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  // kind byte ++ channel: the map's key.
  void make_key(Qos1Loss kind, std::string_view channel);

  std::deque<Range> ranges_;  // in the order their first loss came
  // key -> position of its range, counted from the first range ever owed
  // (popped_ + index in ranges_), so popping the front renumbers nothing.
  std::unordered_map<std::string, std::uint64_t, KeyHash, std::equal_to<>> index_;
  std::uint64_t popped_ = 0;
  std::string key_;  // scratch, keeps its capacity
};

// A notice's text. One lost delivery keeps the form clients already parse:
//   "expired topic=T message_id=N sends=S total=E"
//   "window-dropped topic=T message_id=N total=D"
// A run of n > 1 appends " count=<n> last_message_id=<L>": message_id is then
// the lowest id lost and L the highest; every id between them was lost when
// n = L - N + 1.
[[nodiscard]] std::string format_qos1_loss_notice(Qos1Loss kind, std::string_view channel, std::uint64_t first,
                                                  std::uint64_t last, std::uint64_t count, std::uint64_t total,
                                                  std::uint32_t sends);

}  // namespace ringcast::broker
