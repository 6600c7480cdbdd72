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

#include <cstdint>
#include <span>
#include <string_view>

#include "ringcast/broker/message.hpp"

namespace ringcast::broker {

// Where a subscription lives: PUBLISH's channels, their glob patterns
// (PSUBSCRIBE; interest only, a message is never published to one), and
// SPUBLISH's shard channels, a namespace of their own.
enum class InterestSpace : std::uint8_t { kChannel, kPattern, kShard };

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
};

}  // namespace ringcast::broker
