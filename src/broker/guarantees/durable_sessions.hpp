// Durable QoS 1 subscribers (docs/guarantees.md, "Durable subscribers"; MQTT's
// persistent session): a client that subscribes with a `client_id` keeps its
// AckTracker across connections. While it is away its deliveries stay in
// flight (not redelivered: there is nowhere to send them); when a connection
// with the same client id takes the session again, they are all sent again
// (dup), and what the client missed meanwhile is read from the channel's
// history. Where a session resumes on a channel is its tracker's
// resume_floor, saved in the SessionStore (session_store.hpp: the history
// store, in LMDB with --data-dir, so that it survives a restart; in a cluster
// the cluster's, so that it survives the node and resumes on any node).
//
// A session no connection holds expires after `ttl` (--session-ttl; MQTT 5's
// session expiry interval): its tracker (and the deliveries in it) and what
// the store keeps of it are dropped (SessionStore::expire), and the client id
// starts afresh. After a restart, the client ids the store reports detached
// count as detached since the start, and expire the same way. A cluster's
// store expires its shared copy itself; this node refreshes it for its
// attached sessions every ttl / 2 and at each detach.
//
// A session belongs to the identity that created it (docs/security.md,
// "Durable sessions and loss notices"): the token's subject, or "default" for
// the password and for a broker without authentication. Another identity
// asking for it is refused and counted; every attach asks the store
// (SessionStore::claim), so the binding survives a restart with --data-dir
// and holds on every node of a cluster.
//
// Thread safety: every method may be called from any thread. mu_ guards the
// maps, each session's `attached` and `detached_at`, and the counters.
// It is taken under no other lock and held for O(1), except by the expiry
// thread, which holds it across the O(sessions) scan and the store's expire
// of an expired session (one write transaction each), so that no attach
// can take a session while it is being dropped. The store's claim (a round
// trip in a cluster) and refresh run outside mu_. A session's tracker is used
// as its owner connection uses any tracker (ack_tracker.hpp).
// Invariants:
//  1. At most one connection of this node holds a session (attached); a second
//     connection asking for it here is refused until the first lets go. Across
//     the nodes of a cluster the later attach wins (docs/cluster.md): each
//     attach records its hold in the store (SessionStore::hold, outside mu_),
//     and a record by another node with a higher revision than this attach's
//     (on_taken, from the store's thread) marks the session `taken` and wakes
//     its holder, which closes its connection. A record heard before this
//     attach's own revision is known is kept in taken_at and judged once it
//     is (attach), so no order of the two loses it.
//  2. With ttl > 0, a session detached for ttl is dropped (sessions_ or ghosts_,
//     and SessionStore::expire) within one expiry pass of its deadline; an
//     attached one never is. With ttl == 0 sessions live until the broker stops
//     (bounded by the client ids used: each holds at most its window).
//  3. A client id is in at most one of sessions_ and ghosts_; ghosts_ holds the
//     client ids the store reported detached at the start and no session since.
//  4. Only a connection of a session's owner attaches it: the store's claim
//     names the owner (a session saved without one, a directory written
//     before owners were kept, takes the identity of its first attach).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <tl/expected.hpp>

#include "broker/guarantees/ack_tracker.hpp"
#include "broker/guarantees/qos1_stats.hpp"

namespace ringcast::broker {

class SessionStore;

class DurableSessions {
 public:
  struct Session {
    Session(std::string id, std::string who, std::unique_ptr<AckTracker> t)
        : client_id(std::move(id)), owner(std::move(who)), tracker(std::move(t)) {}
    const std::string client_id;
    const std::string owner;  // invariant 4
    const std::unique_ptr<AckTracker> tracker;
    bool attached = false;                              // guarded by DurableSessions::mu_ (invariant 1)
    std::chrono::steady_clock::time_point detached_at;  // guarded by DurableSessions::mu_
    // Invariant 1, guarded by DurableSessions::mu_: this attach's hold
    // revision (nullopt until hold() answered), the highest revision another
    // node recorded since the attach, and the holder's wake-up.
    std::optional<std::uint64_t> hold_revision;
    std::uint64_t taken_at = 0;
    std::function<void()> wake_holder;
    // Set once (release, under mu_) when another node took the session from
    // this attach; the holder reads it (acquire) after its wake-up.
    std::atomic<bool> taken{false};
    // Owner connection only: the last time its floors were saved.
    std::chrono::steady_clock::time_point saved{};
  };

  // `store` (may be null: no history, floors are not kept) must outlive this.
  // `ttl` 0: sessions never expire; otherwise an expiry thread runs until the
  // destructor (invariant 2), refreshing the attached sessions every ttl / 2.
  DurableSessions(SessionStore* store, std::chrono::milliseconds ttl);
  ~DurableSessions();
  DurableSessions(const DurableSessions&) = delete;
  DurableSessions& operator=(const DurableSessions&) = delete;

  enum class Refusal : std::uint8_t {
    kInUse,     // another connection holds it (invariant 1)
    kNotOwner,  // another identity owns it (invariant 4); counted in counts().refused
    kNoStore,   // the store could not tell its owner (a cluster's store unreachable)
  };
  // Takes `client_id`'s session for a connection of identity `owner`,
  // creating it with `make` on first use here. First asks the store who owns
  // it (SessionStore::claim, outside mu_: a round trip in a cluster), then
  // records the hold (SessionStore::hold, another). `wake_holder` is called
  // (from the store's thread, or this one; it must not block) if another
  // node's connection takes the session later (Session::taken).
  tl::expected<std::shared_ptr<Session>, Refusal> attach(std::string_view client_id, std::string_view owner,
                                                         const std::function<std::unique_ptr<AckTracker>()>& make,
                                                         std::function<void()> wake_holder);
  // The connection lets go of `s` (after it left the index and saved its
  // floors); its ttl starts, and the store is refreshed (SessionStore::refresh).
  void detach(Session& s);

  // Where `client_id` resumes on `channel` when its tracker has not been
  // there: its saved floor; nullopt if none was saved (a first subscription)
  // or without a store. No round trip (SessionStore::floor).
  [[nodiscard]] std::optional<std::uint64_t> saved_floor(std::string_view client_id, std::string_view channel) const;
  // Saves the floor without waiting (a store error is dropped: the floor only
  // saves redeliveries, and a stale one means duplicates, never loss).
  void save_floor(std::string_view client_id, std::string_view channel, std::uint64_t floor);

  // For INFO and /metrics: ghosts count as detached.
  [[nodiscard]] SessionCounts counts() const;

 private:
  void expiry_loop();
  // SessionStore::watch_taken's function (invariant 1).
  void on_taken(std::string_view client_id, std::uint64_t revision);
  // REQUIRES: mu_, s attached. Marks it taken if another node's record is
  // later than this attach's; returns the holder's wake-up, to call outside mu_.
  std::function<void()> judge_locked(Session& s);
  // REQUIRES: mu_. Takes the session out of the in-use state or makes it.
  tl::expected<std::shared_ptr<Session>, Refusal> attach_locked(
      const std::string& id, std::string_view owner, const std::function<std::unique_ptr<AckTracker>()>& make);
  // Drops what has been detached for ttl_ (invariant 2) into `dead` (destroyed
  // by the caller outside mu_); returns the next deadline, if any.
  std::optional<std::chrono::steady_clock::time_point> expire_locked(std::chrono::steady_clock::time_point now,
                                                                     std::vector<std::shared_ptr<Session>>& dead);

  SessionStore* const store_;
  const std::chrono::milliseconds ttl_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Session>> sessions_;
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> ghosts_;  // client id -> since
  std::uint64_t expired_ = 0;
  std::uint64_t refused_ = 0;   // attaches refused for kNotOwner
  std::uint64_t taken_ = 0;     // sessions taken by another node (invariant 1)
  std::condition_variable cv_;  // wakes the expiry thread at stop
  bool stopping_ = false;
  std::thread expiry_;  // last: started once everything above is constructed
};

}  // namespace ringcast::broker
