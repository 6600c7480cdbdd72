// Byte-bounded outbound queue of one connection, with overflow policies.
//
// Thread safety:
//  * push() may be called from any thread (publishers, the owner's replies).
//  * pop_batch() and release() are called by the connection's writer only (one
//    thread at a time).
//  * Everything else may be called from any thread.
//  All members take the queue's own mutex, held for O(frames moved) and never
//  across a system call. Lock order: the subscription index lock, then this one.
//
// Representation: spans_ (span_deque.hpp) holds FrameSpans, each one reference to a block and a
// range of its frames. A frame pushed right after the previous frame of the same
// block extends the last span instead of taking a new reference, so a run of k
// messages costs one span, one reference and (later) one iovec per subscriber.
//
// Conflation (policy kConflate): from the first overflow until the queue has been
// written out (conflating_), every queued message frame is a span of its own,
// and a new message replaces the queued one with the same key (kind, pattern and
// channel: WireCodec::conflation_key of the queue's format) by turning its span into a tombstone. conflation_index_
// maps each key to the position of its span (SpanDeque positions), so a
// replacement costs one hash lookup, not a scan.
//
// Invariants (under mu_):
//  1. queued_bytes_ is the sum of the sizes of the frames in spans_, and
//     queued_frames_ their number; inflight_bytes_ the bytes popped by the writer
//     and not yet release()d. Every span in spans_ has count >= 1, except
//     tombstones (no block, count 0), which exist only while conflating_, are
//     never the front span, and number dead_.
//  2. A droppable frame is queued only if it leaves queued + inflight within the
//     hard limit (and within the soft limit once that has been exceeded for the
//     soft duration); otherwise the policy decides, and every frame lost is
//     counted in dropped_[reason] and in pending_loss_.
//  3. armed_ is true from the push that returned wake=true until the pop_batch that
//     found the queue empty or the complete() that left it empty: exactly one
//     writer wakeup is outstanding per busy period, however many publishers push
//     meanwhile.
//  4. Once closed_ is set (disconnect policy fired, or close()), nothing is queued
//     again; pushes report kClosed.
//  5. A span references a block whose other frames this queue no longer holds
//     only if it is the front span, split by a pop (the rest was written), or the
//     oldest droppable span, trimmed by drop-oldest; a push that loses some of a
//     block's frames copies the ones it queues (privatize_locked). So the memory
//     a queue keeps alive exceeds the bytes it accounts for by at most two
//     blocks (each bounded by the index's run cap), whatever the policy drops.
//     While conflating_, a queued message frame of a block of several frames is
//     always copied, so survivors of many runs pin no runs.
//  6. While conflating_, every live message span holds one frame, is the newest
//     queued frame of its key, and conflation_index_[key] is its position; every
//     other entry is stale (kNotQueued or below spans_.front_position()). Positions are only
//     renumbered by compaction, which rewrites the entries of the live spans.
//     Entries number at most twice the live spans plus a constant (swept), so
//     a slow reader costs O(channels) however long it is behind.
//  7. Pacing (with a FlowControl): paced_ is set by the droppable push that takes
//     queued + in-flight over flow_->pace_bytes() (then over_since_ is that
//     push's time) and cleared when the bytes fall to flow_->resume_bytes() (a
//     drain, or a push after the policy dropped or conflated) or the queue
//     closes; each change is reported to flow_ once. A paced queue not back at
//     resume_bytes max_stall after over_since_ becomes slow_ (its pressure ends,
//     it is counted in slow_marked) until it drains to resume_bytes(), whether
//     or not it is still over the mark: a conflating or drop-oldest queue whose
//     writer is parked sits between the two for as long as its reader reads
//     nothing.
//     A `block` queue never becomes paced: it refuses publishes instead.
//  8. blocking_ mirrors policy_ == kBlock; it is written under mu_ and read
//     without it by publishers (a CLIENT OVERFLOW racing a publish may see either
//     value).
//  9. QoS 1 losses (note_qos1_loss) are owed in owed_ (loss_ranges.hpp) and
//     queued as notices, one per owed (kind, channel), by note_qos1_loss and
//     pop_batch, each only while queued + inflight stays within half the limit
//     (or into an empty queue): notices never take the queue over its limit,
//     and the losses a subscriber that does not read meanwhile meets
//     coalesce. complete() keeps the writer running while any is owed.
//     owed_ is null while nothing is owed: made by the first loss, freed once
//     its last notice is queued, so a queue that owes nothing (every idle
//     connection) holds no LossRanges and none of the heap its deque takes
//     on construction.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "broker/queue/flow_control.hpp"
#include "broker/queue/frame.hpp"
#include "broker/queue/loss_ranges.hpp"
#include "broker/queue/span_deque.hpp"
#include "broker/queue/wire_format.hpp"
#include "broker/util/clock.hpp"
#include "ringcast/broker/config.hpp"

namespace ringcast::broker {

// The reserved channel on which loss notices arrive (docs/broker.md).
inline constexpr std::string_view kLossChannel = "__ringcast__:loss";

enum class DropReason : std::uint8_t { kHardLimit = 0, kSoftLimit = 1, kDisconnect = 2 };
inline constexpr std::size_t kDropReasonCount = 3;
[[nodiscard]] std::string_view to_string(DropReason r) noexcept;

enum class PushStatus : std::uint8_t {
  kQueued,   // the frame is queued (perhaps after evicting older ones)
  kDropped,  // the frame was refused (drop-newest, or too big for the limit)
  kClosed,   // the queue is closed or the disconnect policy fired: the connection is going away
};

struct [[nodiscard]] PushResult {
  // For a push of several frames: kClosed if the queue is closed, else kDropped if
  // any frame was refused, else kQueued.
  PushStatus status;
  bool wake;  // the caller must wake the writer (invariant 3; also on the push that closes)
};

struct [[nodiscard]] PopResult {
  std::size_t bytes = 0;
  std::size_t frames = 0;
  bool closed = false;  // the writer must close the connection
  bool more = false;    // frames remain queued after this batch
};

struct QueueStats {
  std::size_t queued_bytes = 0;
  std::size_t inflight_bytes = 0;
  std::size_t queued_frames = 0;
  std::array<std::uint64_t, kDropReasonCount> dropped{};
  std::uint64_t notices = 0;    // loss notices queued
  std::uint64_t conflated = 0;  // messages replaced by a newer one of their channel (kConflate)
  OverflowPolicy policy = OverflowPolicy::kDisconnect;
  bool closed = false;
  bool overflowed = false;  // closed by the disconnect policy
};

class ConnectionQueue {
 public:
  // `clock` must outlive the queue; it is read only while over the soft limit or
  // the pace mark. `flow` (may be null: no pacing) must outlive the queue.
  ConnectionQueue(QueueLimits limits, OverflowPolicy policy, const Clock& clock, FlowControl* flow = nullptr);
  ConnectionQueue(const ConnectionQueue&) = delete;
  ConnectionQueue& operator=(const ConnectionQueue&) = delete;

  // Offers every frame of `block`, in order, each exactly as if pushed alone.
  // Droppable frames are subject to the limits and policy; others (replies) are
  // always queued, evicting droppable ones under drop-oldest, and close the queue
  // if they take it over the hard limit, because a client that does not read its
  // replies cannot be helped by dropping messages. One lock for the whole block.
  // If the policy lost some of the block's frames but queued others, the queued
  // ones are copied into a private block (invariant 5). Cost: O(frames) plus
  // O(evicted); allocates only when the ring grows, a loss notice is encoded or
  // a partly queued block is copied.
  PushResult push(const FrameRef& block) noexcept;

  // Writer: moves spans to `out` (appending) while their total stays within
  // `budget` bytes and `max_spans` spans, splitting a span at a frame boundary
  // where the budget ends, and taking at least one frame if any is queued. The
  // bytes become in-flight until release(). Queues a loss notice first if
  // messages were lost and there is room again. A pop that finds nothing disarms
  // the queue (invariant 3).
  PopResult pop_batch(std::size_t budget, std::size_t max_spans, std::vector<FrameSpan>& out) noexcept;
  // Writer: `bytes` of in-flight frames have been written (or abandoned).
  void release(std::size_t bytes) noexcept;
  // Writer: release(bytes), then report whether the writer must run again
  // (frames queued, or a loss notice owed); if not, disarm the queue in the same
  // critical section, so the next push wakes the writer (invariant 3) and the
  // writer needs no extra turn to discover that the queue is empty.
  [[nodiscard]] bool complete(std::size_t bytes) noexcept;

  // Records `lost` messages this connection never got because they were lost
  // before the broker (an ingress saw a gap in its source's sequence, e.g. the
  // NATS ingress): they join the next loss notice, counted in its `upstream=`
  // field too, and the notice is queued now if there is room, so it precedes
  // whatever is pushed next. True if the caller must wake the writer. No-op
  // (false) once closed. Allocates only to encode the notice.
  [[nodiscard]] bool note_upstream_loss(std::uint64_t lost) noexcept;

  // A QoS 1 delivery was lost (LossRanges::add's arguments): it joins the
  // owed notices, queued now or by the writer when there is room (invariant 9).
  // True if the caller must wake the writer. No-op (false) once closed.
  [[nodiscard]] bool note_qos1_loss(Qos1Loss kind, std::string_view channel, std::uint64_t id, std::uint64_t total,
                                    std::uint32_t sends) noexcept;

  // Discards everything queued (counted as kDisconnect drops) and refuses later
  // pushes. Idempotent.
  void close() noexcept;

  void set_policy(OverflowPolicy p) noexcept;
  [[nodiscard]] OverflowPolicy policy() const noexcept;
  // policy() == kBlock, without the lock (invariant 8): one relaxed load, for the
  // publisher's per-delivery check.
  [[nodiscard]] bool blocking() const noexcept { return blocking_.load(std::memory_order_relaxed); }
  // `block` policy: how many leading frames of `block` fit in the room left
  // (the soft limit, or the hard limit when the soft one is 0). 0 once closed.
  [[nodiscard]] std::uint32_t room_frames(const FrameRef& block) const noexcept;
  // Wire format of the connection: how loss notices are encoded and conflation
  // keys found.
  void set_format(WireFormat r) noexcept;
  [[nodiscard]] QueueStats stats() const noexcept;
  [[nodiscard]] bool closed() const noexcept;
  [[nodiscard]] std::size_t total_bytes() const noexcept;

 private:
  // The conflation key of one of our frames, in our format (invariant 6).
  [[nodiscard]] std::string_view key_locked(std::string_view frame) const noexcept {
    return wire_codec(format_).conflation_key(frame);
  }
  [[nodiscard]] bool live_at(std::uint64_t pos) const noexcept {
    return pos != kNotQueued && pos >= spans_.front_position() && pos - spans_.front_position() < spans_.size();
  }
  // Queues frame i of `block`: extends the last span when it ends just before i.
  void append_locked(const FrameRef& block, std::uint32_t i);
  // release()'s body. REQUIRES: mu_ held.
  void release_locked(std::size_t bytes) noexcept;

  // Invariant 5: replaces the spans of `block` among the last `created` spans
  // with a private copy of their frames, unless they hold the whole block.
  void privatize_locked(const FrameRef& block, std::size_t created);
  // Offers frame i of `block` (invariant 2).
  PushResult push_one_locked(const FrameRef& block, std::uint32_t i) noexcept;
  // Applies the policy for a droppable frame that does not fit under `limit`.
  PushResult overflow_locked(const FrameRef& block, std::uint32_t i, std::size_t limit, DropReason reason) noexcept;
  // Evicts the oldest droppable frame; false if there is none.
  bool evict_oldest_locked(DropReason reason) noexcept;
  // Conflation (invariant 6). enter: keeps only the newest queued message per
  // key, splitting spans into one frame each. supersede: tombstones the queued
  // frame with `key`, counting it as conflated. leave: removes the tombstones
  // and forgets the keys.
  void enter_conflation_locked();
  void supersede_locked(std::string_view key) noexcept;
  void leave_conflation_locked() noexcept;
  // Turns live span i (not the front) into a tombstone.
  void bury_locked(std::size_t i) noexcept;
  void pop_dead_front_locked() noexcept;
  // Removes tombstones once they are more than half the ring (always with `force`).
  void compact_locked(bool force) noexcept;
  void index_locked(std::string_view key, std::uint64_t pos);
  void close_locked(bool overflowed) noexcept;
  void maybe_queue_notice_locked() noexcept;
  // Invariant 9: queues owed QoS 1 notices while there is room.
  void queue_owed_notices_locked() noexcept;
  [[nodiscard]] PushResult queued_locked() noexcept;
  // Invariant 6, after a droppable push / after bytes left.
  void pace_after_push_locked() noexcept;
  void pace_after_drain_locked() noexcept;

  const QueueLimits limits_;
  const Clock& clock_;
  FlowControl* const flow_;

  mutable std::mutex mu_;
  SpanDeque spans_;  // tombstones included
  std::size_t queued_frames_ = 0;
  std::size_t queued_bytes_ = 0;
  std::size_t inflight_bytes_ = 0;
  std::chrono::nanoseconds soft_since_{-1};  // < 0: not over the soft limit
  OverflowPolicy policy_;
  WireFormat format_ = WireFormat::kResp2;
  bool armed_ = false;
  bool closed_ = false;
  bool overflowed_ = false;
  bool paced_ = false;  // invariant 7
  bool slow_ = false;   // invariant 7
  std::chrono::nanoseconds over_since_{0};
  std::atomic<bool> blocking_{false};  // invariant 8
  std::uint64_t pending_loss_ = 0;     // lost since the last notice
  std::uint64_t total_loss_ = 0;       // lost over the connection's life
  std::uint64_t notices_ = 0;
  std::array<std::uint64_t, kDropReasonCount> dropped_{};

  struct KeyHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  static constexpr std::uint64_t kNotQueued = UINT64_MAX;
  bool conflating_ = false;
  std::size_t dead_ = 0;  // tombstones in spans_
  std::unordered_map<std::string, std::uint64_t, KeyHash, std::equal_to<>> conflation_index_;
  std::vector<FrameSpan> rebuild_;       // scratch for enter_conflation_locked, keeps its capacity
  std::uint64_t conflated_ = 0;          // over the connection's life
  std::uint64_t pending_conflated_ = 0;  // since the last notice (also counted in pending_loss_)
  std::uint64_t pending_upstream_ = 0;   // since the last notice (also counted in pending_loss_)
  std::unique_ptr<LossRanges> owed_;     // invariant 9; null while nothing is owed
};

// The loss-notice payload: "lost=<n> total=<t> policy=<p>", then
// " conflated=<c>" when c > 0 and " upstream=<u>" when u > 0 (docs/broker.md).
[[nodiscard]] std::string format_loss_notice(std::uint64_t lost, std::uint64_t total, OverflowPolicy policy,
                                             std::uint64_t conflated = 0, std::uint64_t upstream = 0);

}  // namespace ringcast::broker
