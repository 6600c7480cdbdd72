// A broker's link to the other nodes of its cluster (docs/cluster.md): what
// the broker tells it (this node's interest, the messages published here)
// and the one thing it waits for (interest reaching the other nodes). The
// broker knows no transport: ringcast-broker's --cluster gives it a NATS link
// (ringcast/relay/nats_cluster.hpp); messages from other nodes come back in
// through Broker::publish_from_cluster.
//
// Thread safety: every call may come from any broker thread, concurrently,
// except that interest_added and interest_removed come one at a time (under
// the broker's subscription index lock, which every publisher also waits
// for: they must not block).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

#include "ringcast/broker/message.hpp"
#include "ringcast/broker/session_store.hpp"

namespace ringcast::broker {

// Where a subscription lives: PUBLISH's channels, their glob patterns
// (PSUBSCRIBE; interest only, a message is never published to one), and
// SPUBLISH's shard channels, a namespace of their own.
enum class InterestSpace : std::uint8_t { kChannel, kPattern, kShard };

// What the cluster's history must keep so that every node's --history rule
// is served: the largest size and the longest TTL of the rules (0: a rule
// without TTL, so none).
struct ClusterHistoryLimits {
  std::uint64_t max_per_channel = 0;
  std::chrono::milliseconds max_age{0};
};

// One message of the cluster's history as load_history hands it over: its
// channel, offset, payload and publish time (ms since the Unix epoch).
using HistoryLoad =
    std::function<void(std::string_view channel, std::uint64_t offset, std::string_view payload, std::int64_t time_ms)>;

// How ClusterLink::store_async reports a store: stored (then `offset` is the
// message's offset in the cluster's history) or not.
using StoreDone = std::function<void(bool stored, std::uint64_t offset)>;

// How ClusterLink::store and store_async ended for a message.
enum class StoreStatus : std::uint8_t {
  kTaken,   // handed over (or, for a store() that waits, stored)
  kBusy,    // not handed over: the link's bound of stores awaiting the cluster's
            // acknowledgement is reached. Nothing was lost or sent; the publisher
            // is held (not its thread) and tries again (PublishOutcome::kBacklogged)
  kFailed,  // could not be handed over (the cluster unreachable, too large), or
            // (waiting) the cluster refused it or did not confirm it in time
};

// How ClusterLink::store ended: msgs [0, taken) were taken; when fewer than
// given, message `taken` was not, for `status` (kBusy or kFailed), and the
// later ones were not tried. kFailed always has taken 0: a run that fails is
// refused whole, though a message handed over before the failure may still
// be stored.
struct StoreOutcome {
  std::size_t taken = 0;
  StoreStatus status = StoreStatus::kTaken;
};

class ClusterLink {
 public:
  virtual ~ClusterLink() = default;

  // This node's first subscription to `name` in `space` was made, or its last
  // one dropped. Under the index lock: must not block or throw.
  virtual void interest_added(InterestSpace space, std::string_view name) noexcept = 0;
  virtual void interest_removed(InterestSpace space, std::string_view name) noexcept = 0;

  // Called on the thread that made a subscription change, after the index
  // lock is released and before the change's confirmations are written to its
  // client. Returns once the interest this node has now (whichever thread
  // added it) reaches it: a message another node publishes from now on will
  // reach this node; or after the link's bound (counted by the link); at
  // once when nothing is pending.
  virtual void settle() noexcept = 0;

  // Whether a message published now can leave this node. Asked before a
  // message is offered to anybody: a false answer refuses it whole
  // (PublishStatus::kRefused, "the cluster is unreachable").
  [[nodiscard]] virtual bool ready() const noexcept = 0;

  // `msgs`, accepted on this node (`shard`: SPUBLISH's space), one
  // publisher's run in its order: hand them to the other nodes. (Two
  // publishers' runs on one channel may be sent in another order than this
  // node offered them: the cluster keeps each publisher's order, as Redis
  // does, not a total order per channel.) A message that fails here, after ready() said yes, is the link's to
  // count; it has reached this node's subscribers already. Never throws.
  virtual void send(bool shard, std::span<const Message> msgs) noexcept = 0;

  // History across nodes (docs/cluster.md, "History"). Called once, by
  // Broker::start with --history, before any publish: opens the cluster's
  // store of retained channels (made if missing, its limits raised to
  // `limits`) and returns its epoch, the same on every node for as long as
  // that store lives; an error (the cluster has no storage) fails the start.
  // From then on a PUBLISH on a retained channel is not offered on its node:
  // it goes to store(), and every node, this one included, takes it back in
  // cluster order through Broker::publish_from_history with the offset the
  // store gave it, so an offset names one message on every node.
  [[nodiscard]] virtual tl::expected<std::string, std::string> open_history(const ClusterHistoryLimits& limits) = 0;
  // Then, still before any publish or subscription: calls `load` for every
  // message the history holds now, in offset order, so that this node's copy
  // starts whole; those are never delivered to anybody live (they were
  // published before this node was up). What comes after them arrives through
  // Broker::publish_from_history once the broker is attached.
  [[nodiscard]] virtual tl::expected<void, std::string> load_history(const HistoryLoad& load) = 0;
  // Hands `msgs` (PUBLISH channels that a --history rule retains) to the
  // cluster's store, in order (StoreOutcome). `wait` (QoS 1): what it took is
  // stored, with each one's offset in offsets[i] (when not empty); a failure,
  // or the link's bound passing, fails the run. Without `wait`: taken once
  // handed over (a later failure is the link's to count). kBusy at once when
  // the link's bound of unacknowledged stores is reached: this call never
  // waits for room. Never throws.
  [[nodiscard]] virtual StoreOutcome store(std::span<const Message> msgs, bool wait,
                                           std::span<std::uint64_t> offsets) noexcept = 0;
  // store() of one QoS 1 message without waiting: the publisher's thread goes
  // on while the cluster stores it (a WebSocket session's QoS 1 publish, whose
  // I/O thread serves other connections meanwhile). kTaken once handed over:
  // `done` is then called exactly once, from any thread (never from inside
  // this call), with true and the message's offset once stored, or false if
  // it failed or the link's bound passed (the same bound store() waits); it
  // must not block. kBusy or kFailed if it was not handed over: `done` is
  // never called. Never throws. In a publisher's run, each message is handed
  // over in the order of the calls, after the run's earlier store() calls.
  [[nodiscard]] virtual StoreStatus store_async(const Message& msg, StoreDone done) noexcept = 0;
  // How long a publisher whose store found the link busy (kBusy) is held,
  // trying again, before it is refused: the link's bound on a store's wait.
  [[nodiscard]] virtual std::chrono::milliseconds busy_hold() const noexcept = 0;

  // Durable QoS 1 sessions across nodes (docs/cluster.md, "Durable
  // sessions"). Called once, by Broker::start after open_history succeeded:
  // opens the cluster's store of sessions' owners and floors (made if
  // missing), which expires what no node has written for longer than
  // `session_ttl` and a half (0: never). Returns it, owned by the link and
  // valid until the link is destroyed; an error fails the start.
  [[nodiscard]] virtual tl::expected<SessionStore*, std::string> open_sessions(
      std::chrono::milliseconds session_ttl) = 0;
};

}  // namespace ringcast::broker
