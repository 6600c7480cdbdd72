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
// Thread safety: every method may be called from any thread; mu_ guards the
// map and each session's `attached` flag (a leaf lock, taken under no other
// and held for O(1)). A session's tracker is used as its owner connection
// uses any tracker (ack_tracker.hpp).
// Invariants:
//  1. At most one connection holds a session (attached); a second connection
//     asking for it is refused until the first lets go.
//  2. A session lives until the broker stops (bounded by the number of
//     client ids used: each holds at most its window of deliveries).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
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
    bool attached = false;  // guarded by DurableSessions::mu_ (invariant 1)
    // Owner connection only: the last time its floors were saved.
    std::chrono::steady_clock::time_point saved{};
  };

  // `store` (may be null: no history, floors are not kept) must outlive this.
  explicit DurableSessions(HistoryStore* store) : store_(store) {}

  // Takes `client_id`'s session for a connection, creating it with `make` on
  // first use; `fresh` says whether it was created now. nullptr if another
  // connection holds it (invariant 1).
  template <class Make>
  std::shared_ptr<Session> attach(std::string_view client_id, Make make, bool& fresh) {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(std::string(client_id));
    fresh = it == sessions_.end();
    if (fresh)
      it = sessions_.emplace(std::string(client_id), std::make_shared<Session>(std::string(client_id), make())).first;
    if (it->second->attached) return nullptr;
    it->second->attached = true;
    return it->second;
  }
  // The connection lets go of `s` (after it left the index).
  void detach(Session& s) {
    std::lock_guard lock(mu_);
    s.attached = false;
  }

  // For INFO and /metrics.
  [[nodiscard]] SessionCounts counts() const {
    std::lock_guard lock(mu_);
    SessionCounts c;
    for (const auto& [id, s] : sessions_) ++(s->attached ? c.attached : c.detached);
    return c;
  }

  // Where `client_id` resumes on `channel` after a restart: its saved floor;
  // nullopt if none was saved (a first subscription) or without a store.
  [[nodiscard]] std::optional<std::uint64_t> saved_floor(std::string_view client_id, std::string_view channel) const;
  // Saves the floor (a store error is dropped: the floor only saves
  // redeliveries, and a stale one means duplicates, never loss).
  void save_floor(std::string_view client_id, std::string_view channel, std::uint64_t floor);

 private:
  HistoryStore* const store_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Session>> sessions_;
};

}  // namespace ringcast::broker
