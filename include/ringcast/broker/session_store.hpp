// Where durable QoS 1 sessions keep what outlives a connection (docs/guarantees.md,
// "Durable subscribers"): each session's owner and, per channel, its resume
// floor (it has acked every message up to it). A broker alone keeps them in
// its history store (memory, or LMDB with --data-dir); a cluster node in the
// cluster's store, which every node reads (ClusterLink::open_sessions;
// docs/cluster.md, "Durable sessions"), so a session resumes on any node.
//
// Lost or late writes cost duplicates, never loss: a floor only ever names
// messages the client acked, so a floor lower than the last one only makes
// the session resume earlier.
//
// Thread safety: every method may be called from any thread, concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringcast::broker {

class SessionStore {
 public:
  virtual ~SessionStore() = default;

  // Called at every attach of `client_id` (before the session is used here):
  // returns the identity that owns the session, the one saved, or `owner`
  // when none was (saved now; of two nodes claiming at once, one wins and
  // both return it). nullopt: the store could not be asked (the attach is
  // refused: an owner that cannot be checked is not assumed). May block on a
  // round trip to the cluster; not for a hot path.
  [[nodiscard]] virtual std::optional<std::string> claim(std::string_view client_id, std::string_view owner) = 0;

  // Called once a connection of this node has attached `client_id` (after a
  // claim() that named its identity): records that this node holds it now,
  // and returns the record's revision. In a store shared by nodes the node
  // that held it before hears of it (watch_taken) and lets it go: of two
  // attaches on two nodes, the one recorded later holds the session. 0 where
  // the store is not shared (a broker alone: one node has nobody to tell);
  // nullopt: the store could not be written (the attach is refused, as for
  // claim()). May block on a round trip to the cluster.
  [[nodiscard]] virtual std::optional<std::uint64_t> hold(std::string_view client_id) = 0;
  // `client_id` was recorded as held by another node at `revision`: a holder
  // here whose own hold() returned less has lost the session.
  using TakenFn = std::function<void(std::string_view client_id, std::uint64_t revision)>;
  // Sets (or, with an empty function, clears) what hears of such records:
  // once this returns, the previous function is not running and is not
  // called again. It is called from the store's own thread and must not
  // block or call the store. A store that is not shared never calls it.
  virtual void watch_taken(TakenFn taken) = 0;

  // The floor saved for `client_id` on `channel`; nullopt when none was (a
  // first subscription). In a cluster, as read by the last claim() plus this
  // node's puts since: no round trip.
  [[nodiscard]] virtual std::optional<std::uint64_t> floor(std::string_view client_id,
                                                           std::string_view channel) const = 0;
  // Saves a floor; a lower one than this node saved before is ignored. Does
  // not wait for the write (an error is dropped, or counted by the store).
  virtual void put_floor(std::string_view client_id, std::string_view channel, std::uint64_t floor) noexcept = 0;

  // Writes the session's owner and floors again, so that a store that
  // expires what was not written for a while (a cluster, --session-ttl) keeps
  // it: called for every attached session at least every ttl / 2, and at its
  // detach. Does not wait. A no-op where nothing expires by itself.
  virtual void refresh(std::string_view client_id) noexcept = 0;

  // The client ids whose sessions this store holds and no connection has
  // attached since the start (they start detached: their ttl runs). Empty
  // where the store expires them itself.
  [[nodiscard]] virtual std::vector<std::string> detached_clients() const = 0;
  // The session expired on this node (detached for --session-ttl): drops
  // what this node keeps of it. A store shared by nodes keeps the shared
  // copy (another node may hold the session now) and lets it expire itself.
  virtual void expire(std::string_view client_id) noexcept = 0;
};

}  // namespace ringcast::broker
