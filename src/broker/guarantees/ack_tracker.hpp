// QoS 1 for one subscriber (docs/guarantees.md, "QoS 1"): the table of its
// deliveries that await its `ack`, the redelivery timer, and the in-flight
// window. PopSub's pending table, but per subscriber: one subscriber's ack
// clears only its own entry, and a redelivery goes to it alone.
//
// A delivery is keyed by (channel, message id): ids are per channel
// (subscription_index.hpp, invariant 4), so a subscriber of several channels
// may hold the same id twice.
//
// Timer: every delivery waits the same ack_timeout, and the clock only moves
// forward, so deadlines are created in order. The deadline list is therefore a
// FIFO whose front is the earliest deadline (a timer wheel with one slot):
// push and pop are O(1), and a timer pass looks only at the deadlines that are
// due, never at the whole table. An acked delivery leaves a stale deadline
// behind (matched by slot generation, skipped when popped); stale deadlines are
// compacted away once they outnumber the live ones, so the list stays within
// twice the window plus a constant.
//
// Thread safety:
//  * offer() is called by publishers (any thread) while they hold the index
//    lock shared and the channel's id stripe lock; every other member by the
//    subscriber's owning thread (its session), except stats(), any thread.
//  * Every member takes mu_, held for O(frames moved) and never across a system
//    call. Lock order: index -> id stripe -> this tracker -> the subscriber's
//    queue. Trackers of different subscribers share nothing.
// Invariants (under mu_):
//  1. Each in-flight delivery has one live slot, one index_ entry and exactly
//     one deadline in deadlines_ with the slot's generation; in_flight() <=
//     max_in_flight.
//  2. waiting_ is non-empty only while the window is full: a delivery is queued
//     to the connection only after every delivery offered before it (per
//     channel, in id order).
//  3. A delivery leaves the table only by its ack, by expiry (sent
//     1 + max_retries times; counted in expired and reported by a loss notice)
//     or by reset(); a waiting delivery leaves waiting_ only into the window or
//     by the overflow policy (counted in dropped and reported by a loss
//     notice). Nothing vanishes silently. Loss notices are owed to the queue
//     (ConnectionQueue::note_qos1_loss), which coalesces a run of them.
//  4. Pushes keep the queue's order: the tracker pushes only under mu_.
//  5. Withheld channels (a durable session taken over by a connection that may
//     not read them, docs/security.md): their deliveries are never pushed to
//     the queue, acked or expired; their deadlines only come round again.
//     A channel stops being withheld at the next take-over that may read it,
//     or at its next offer (only the connection's own subscriptions, each
//     allowed when it was made, bring offers).
//  6. table_ is null until the first offer(): a tracker that has tracked no
//     delivery holds no heap memory and is itself small (its counters are in
//     the table; sizeof 120 with libstdc++), since PopSub's subscriptions are
//     QoS 1 and every idle PopSub connection has a tracker. While it is null
//     every member answers as for an empty table; once made, it lives as long
//     as the tracker.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "broker/queue/frame.hpp"
#include "broker/queue/wire_format.hpp"
#include "broker/util/clock.hpp"
#include "ringcast/broker/config.hpp"

namespace ringcast::broker {

class ConnectionQueue;
class Qos1Stats;

struct AckSettings {
  std::size_t max_in_flight = 1000;                                // JetStream's max_ack_pending
  std::chrono::nanoseconds ack_timeout = std::chrono::seconds(5);  // AckWait
  std::uint32_t max_retries = 5;                                   // redeliveries; MaxDeliver - 1
  // Waiting deliveries (past the window) are held up to this many frame bytes;
  // past it, `policy` decides (docs/guarantees.md, "In-flight window").
  std::size_t max_waiting_bytes = 32u << 20;
  OverflowPolicy policy = OverflowPolicy::kDisconnect;
};

struct AckStats {
  std::uint64_t in_flight = 0;
  std::uint64_t waiting = 0;
  std::uint64_t delivered = 0;    // first sends
  std::uint64_t redelivered = 0;  // sends marked dup
  std::uint64_t acked = 0;
  std::uint64_t expired = 0;  // sent 1 + max_retries times, never acked
  std::uint64_t dropped = 0;  // waiting deliveries lost to the overflow policy
};

enum class AckResult : std::uint8_t {
  kAcked,
  kUnknown,    // no delivery with that id awaits an ack (never sent, acked, expired)
  kAmbiguous,  // no channel given, and several channels have that id in flight
};

class AckTracker {
 public:
  // Makes a redelivery frame (the same message, marked dup) from one of the
  // frames this tracker was offered: the transport's codec (ws::json_redelivery).
  using Redeliver = FrameRef (*)(std::string_view frame);

  // `clock` must outlive the tracker. `format` encodes its loss notices.
  // `registry` (may be null; must outlive the tracker) sums its counters into
  // the broker's INFO and /metrics (qos1_stats.hpp).
  AckTracker(AckSettings settings, const Clock& clock, WireFormat format, Redeliver redeliver,
             Qos1Stats* registry = nullptr);
  // Folds its counters into the registry's totals. REQUIRES: no publisher can
  // reach the tracker any more (its subscriber left the index).
  ~AckTracker();
  AckTracker(const AckTracker&) = delete;
  AckTracker& operator=(const AckTracker&) = delete;

  // The format its frames are in (a durable session keeps its tracker across
  // connections, which must speak that format).
  [[nodiscard]] WireFormat format() const noexcept { return format_; }

  // Publisher: `block` holds frame i = message first_id + i of `channel`. The
  // frames that fit the window are pushed to `queue` (the whole block, or a copy
  // of its leading frames) and await an ack; the rest wait (invariant 2).
  // Returns true if the caller must wake the queue's writer. Allocates only for
  // the tracker's first offer (its table: invariant 6), for a channel seen for
  // the first time, for waiting deliveries and for a block that is split;
  // deliveries recycle their table nodes.
  [[nodiscard]] bool offer(std::string_view channel, std::uint64_t first_id, const FrameRef& block,
                           ConnectionQueue& queue) noexcept;

  // Owner: the subscriber acked `id` on `channel` (or, without a channel, the
  // only in-flight delivery with that id; withheld channels are not looked
  // at: invariant 5). Frees its slot and moves waiting deliveries into the
  // window; `wake` says whether the writer must be woken.
  AckResult ack(std::optional<std::string_view> channel, std::uint64_t id, ConnectionQueue& queue, bool& wake);
  // Owner: the same for the in-flight delivery of `channel` (any channel when
  // nullopt; withheld ones excepted) whose frame `shows` the id the subscriber
  // echoed, the one sent longest ago if several do: PopSub's acks name a
  // delivery by the id its frame shows, the publisher's own (docs/broker.md).
  // O(in-flight deliveries): a scan in send order, so in-order acks stop early.
  AckResult ack_shown(std::optional<std::string_view> channel, const std::function<bool(std::string_view)>& shows,
                      ConnectionQueue& queue, bool& wake);

  // Owner: redelivers every delivery whose deadline has passed (dup), expires
  // those sent 1 + max_retries times (a loss notice each), and refills the
  // window. Returns true if the writer must be woken.
  [[nodiscard]] bool on_timer(ConnectionQueue& queue);

  // Owner, when a durable session's new connection takes the tracker over
  // (docs/guarantees.md, "Durable subscribers"): sends every in-flight
  // delivery of a channel `may_read` allows again, marked dup, in the order
  // first sent, with fresh deadlines; the other channels are withheld from
  // this connection (invariant 5). Returns true if the writer must be woken.
  [[nodiscard]] bool redeliver_all(ConnectionQueue& queue, const std::function<bool(std::string_view)>& may_read);

  // The highest id of `channel` such that every id up to it offered to this
  // tracker has been acked (or expired, or lost to the waiting list's policy):
  // where a durable session resumes. 0 for a channel never offered. Amortised
  // O(1) per delivery (a per-channel FIFO of offered ids, popped lazily).
  [[nodiscard]] std::uint64_t resume_floor(std::string_view channel);
  // The highest id of `channel` offered to this tracker (0: none).
  [[nodiscard]] std::uint64_t last_offered(std::string_view channel) const;

  // Owner: the next deadline on the tracker's clock; nullopt if none.
  [[nodiscard]] std::optional<std::chrono::nanoseconds> next_deadline() const;

  [[nodiscard]] AckStats stats() const;

 private:
  struct Key {
    std::uint32_t channel;
    std::uint64_t id;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept {
      return std::hash<std::uint64_t>{}(k.id * 0x9E3779B97F4A7C15ull ^ k.channel);
    }
  };
  struct Slot {
    Key key{};
    FrameRef block;           // holds the frame for redelivery
    std::uint32_t frame = 0;  // its index in block
    std::uint32_t sends = 0;
    std::uint32_t generation = 0;
    bool live = false;
  };
  struct Deadline {
    std::chrono::nanoseconds due;
    std::uint32_t slot;
    std::uint32_t generation;
  };
  struct Waiting {
    Key key;
    FrameRef block;
    std::uint32_t frame;
  };
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };

  // Per channel: its name, the highest id offered, and the ids offered in
  // order and not yet known to be settled (resume_floor pops the settled).
  struct ChannelState {
    std::uint64_t last_offered = 0;
    std::deque<std::uint64_t> offered;
    bool withheld = false;  // invariant 5
  };
  using Index = std::pmr::unordered_map<Key, std::uint32_t, KeyHash>;
  // The deliveries, the channels they came on and their counts: allocated by
  // the first offer() (invariant 6).
  struct Table {
    explicit Table(std::size_t max_in_flight);
    std::vector<std::string> channel_names;
    std::vector<ChannelState> channel_state;
    std::unordered_map<std::string, std::uint32_t, NameHash, std::equal_to<>> channel_ids;
    std::vector<Slot> slots;
    std::vector<std::uint32_t> free_slots;
    // Nodes come from a pool that keeps them: a steady stream of deliveries
    // and acks reuses the same few hundred nodes instead of calling malloc.
    std::pmr::unsynchronized_pool_resource pool;
    Index index{&pool};
    std::deque<Deadline> deadlines;
    std::size_t stale_deadlines = 0;
    std::deque<Waiting> waiting;
    Index waiting_keys{&pool};  // key -> count
    std::size_t waiting_bytes = 0;
    AckStats stats;  // in_flight and waiting unused: stats() counts them
  };

  std::uint32_t intern_locked(std::string_view channel);
  // Takes a slot for `key` and its deadline (invariant 1); `sent`: the caller
  // pushes it now (else it is withheld: invariant 5).
  void admit_locked(Key key, const FrameRef& block, std::uint32_t frame, std::chrono::nanoseconds now, bool sent);
  void release_slot_locked(std::uint32_t slot) noexcept;
  // Settles the acked delivery `it` and refills the window into `queue`.
  void settle_acked_locked(Index::iterator it, ConnectionQueue& queue, bool& wake);
  // Moves waiting deliveries into the window; true if the writer must be woken.
  bool refill_locked(ConnectionQueue& queue);
  // Holds one delivery past the window, under the overflow policy.
  bool wait_locked(Key key, const FrameRef& block, std::uint32_t frame, ConnectionQueue& queue);
  void unwait_locked(Key key);
  // Pops the settled ids at the front of channel `ch`'s offered FIFO, so it
  // holds only the span from the oldest unsettled id to the newest.
  void settle_front_locked(std::uint32_t ch);
  void compact_deadlines_locked();
  [[nodiscard]] bool pending_locked(Key key) const;

  const AckSettings settings_;
  const Clock& clock_;
  const WireFormat format_;
  const Redeliver redeliver_;
  Qos1Stats* const registry_;

  mutable std::mutex mu_;
  std::unique_ptr<Table> table_;  // null until the first offer (invariant 6)
};

}  // namespace ringcast::broker
