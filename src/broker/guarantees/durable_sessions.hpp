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
// Thread safety: every method may be called from any thread. mu_ guards the
// maps, each session's `attached` and `detached_at`, and the expiry counter.
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
//     client ids with floors in the store and no session since the start.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "broker/guarantees/ack_tracker.hpp"
#include "broker/guarantees/qos1_stats.hpp"

namespace ringcast::broker {

class HistoryStore;

class DurableSessions {
 public:
  struct Session {
    explicit Session(std::string id, std::unique_ptr<AckTracker> t) : client_id(std::move(id)), tracker(std::move(t)) {}
    const std::string client_id;
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

  // Takes `client_id`'s session for a connection, creating it with `make` on
  // first use; `fresh` says whether it was created now. nullptr if another
  // connection holds it (invariant 1).
  template <class Make>
  std::shared_ptr<Session> attach(std::string_view client_id, Make make, bool& fresh) {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(std::string(client_id));
    fresh = it == sessions_.end();
    if (fresh) {
      ghosts_.erase(std::string(client_id));  // invariant 3: its floors are the new session's
      it = sessions_.emplace(std::string(client_id), std::make_shared<Session>(std::string(client_id), make())).first;
    }
    if (it->second->attached) return nullptr;
    it->second->attached = true;
    return it->second;
  }
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
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> ghosts_;  // client id -> since
  std::uint64_t expired_ = 0;
  std::condition_variable cv_;  // wakes the expiry thread: a detach while it waits for none, or stop
  bool idle_ = false;           // the expiry thread waits without a deadline
  bool stopping_ = false;
  std::thread expiry_;  // last: started once everything above is constructed
};

}  // namespace ringcast::broker
