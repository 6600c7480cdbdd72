// Durable QoS 1 subscribers (docs/guarantees.md, "Durable subscribers"; MQTT's
// persistent session): a client that subscribes with a `client_id` keeps its
// AckTracker across connections. While it is away its deliveries stay in
// flight (not redelivered: there is nowhere to send them); when a connection
// with the same client id takes the session again, they are all sent again
// (dup), and what the client missed meanwhile is read from the channel's
// history. Where a session resumes on a channel is its tracker's
// resume_floor, saved in the history store (in LMDB with --data-dir) so that
// it survives a restart.
//
// A session no connection holds expires after `ttl` (--session-ttl; MQTT 5's
// session expiry interval): its tracker (and the deliveries in it) and its
// floors in the store are dropped, and the client id starts afresh. After a
// restart, the client ids whose floors the store holds count as detached
// since the start, and expire the same way.
//
// A session belongs to the identity that created it (docs/security.md,
// "Durable sessions and loss notices"): the token's subject, or "default" for
// the password and for a broker without authentication. Another identity
// asking for it is refused and counted; the owner is saved in the store with
// the floors, so the binding survives a restart with --data-dir.
//
// Thread safety: every method may be called from any thread. mu_ guards the
// maps, each session's `attached` and `detached_at`, and the counters.
// It is taken under no other lock and held for O(1), except by the expiry
// thread, which holds it across the O(sessions) scan and the store's erase of
// an expired session's floors (one write transaction each), so that no attach
// can take a session while it is being dropped. A session's tracker is used
// as its owner connection uses any tracker (ack_tracker.hpp).
// Invariants:
//  1. At most one connection holds a session (attached); a second connection
//     asking for it is refused until the first lets go.
//  2. With ttl > 0, a session detached for ttl is dropped (sessions_ or ghosts_,
//     and its floors in the store) within one expiry pass of its deadline; an
//     attached one never is. With ttl == 0 sessions live until the broker stops
//     (bounded by the client ids used: each holds at most its window).
//  3. A client id is in at most one of sessions_ and ghosts_; ghosts_ holds the
//     client ids with floors (or an owner) in the store and no session since
//     the start.
//  4. Only a connection of a session's owner attaches it. A ghost saved
//     without an owner (a directory written before owners were kept) takes
//     the identity of its first attach as owner.
#pragma once

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

class HistoryStore;

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
    // Owner connection only: the last time its floors were saved.
    std::chrono::steady_clock::time_point saved{};
  };

  // `store` (may be null: no history, floors are not kept) must outlive this.
  // `ttl` 0: sessions never expire; otherwise an expiry thread runs until the
  // destructor (invariant 2).
  DurableSessions(HistoryStore* store, std::chrono::milliseconds ttl);
  ~DurableSessions();
  DurableSessions(const DurableSessions&) = delete;
  DurableSessions& operator=(const DurableSessions&) = delete;

  enum class Refusal : std::uint8_t {
    kInUse,     // another connection holds it (invariant 1)
    kNotOwner,  // another identity owns it (invariant 4); counted in counts().refused
  };
  // Takes `client_id`'s session for a connection of identity `owner`,
  // creating it with `make` on first use (and saving its owner in the store,
  // outside mu_: one write transaction).
  tl::expected<std::shared_ptr<Session>, Refusal> attach(std::string_view client_id, std::string_view owner,
                                                         const std::function<std::unique_ptr<AckTracker>()>& make);
  // The connection lets go of `s` (after it left the index); its ttl starts.
  void detach(Session& s);

  // Where `client_id` resumes on `channel` after a restart: its saved floor;
  // nullopt if none was saved (a first subscription) or without a store.
  [[nodiscard]] std::optional<std::uint64_t> saved_floor(std::string_view client_id, std::string_view channel) const;
  // Saves the floor (a store error is dropped: the floor only saves
  // redeliveries, and a stale one means duplicates, never loss).
  void save_floor(std::string_view client_id, std::string_view channel, std::uint64_t floor);

  // For INFO and /metrics: ghosts count as detached.
  [[nodiscard]] SessionCounts counts() const;

 private:
  void expiry_loop();
  // Drops what has been detached for ttl_ (invariant 2) into `dead` (destroyed
  // by the caller outside mu_); returns the next deadline, if any.
  std::optional<std::chrono::steady_clock::time_point> expire_locked(std::chrono::steady_clock::time_point now,
                                                                     std::vector<std::shared_ptr<Session>>& dead);

  HistoryStore* const store_;
  const std::chrono::milliseconds ttl_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Session>> sessions_;
  struct Ghost {
    std::chrono::steady_clock::time_point since;
    std::optional<std::string> owner;  // nullopt: saved without one (invariant 4)
  };
  std::unordered_map<std::string, Ghost> ghosts_;  // by client id
  std::uint64_t expired_ = 0;
  std::uint64_t refused_ = 0;   // attaches refused for kNotOwner
  std::condition_variable cv_;  // wakes the expiry thread: a detach while it waits for none, or stop
  bool idle_ = false;           // the expiry thread waits without a deadline
  bool stopping_ = false;
  std::thread expiry_;  // last: started once everything above is constructed
};

}  // namespace ringcast::broker
