#include "broker/guarantees/durable_sessions.hpp"

#include <vector>

#include "broker/guarantees/history_store.hpp"

namespace ringcast::broker {

DurableSessions::DurableSessions(HistoryStore* store, std::chrono::milliseconds ttl) : store_(store), ttl_(ttl) {
  if (store_ != nullptr) {
    const auto now = std::chrono::steady_clock::now();
    for (std::string& id : store_->session_clients()) {
      std::optional<std::string> owner = store_->session_owner(id);
      ghosts_.emplace(std::move(id), Ghost{now, std::move(owner)});
    }
  }
  if (ttl_.count() > 0) expiry_ = std::thread([this] { expiry_loop(); });
}

DurableSessions::~DurableSessions() {
  if (!expiry_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  expiry_.join();
}

tl::expected<std::shared_ptr<DurableSessions::Session>, DurableSessions::Refusal> DurableSessions::attach(
    std::string_view client_id, std::string_view owner, const std::function<std::unique_ptr<AckTracker>()>& make) {
  std::shared_ptr<Session> s;
  bool save_owner = false;
  {
    std::lock_guard lock(mu_);
    const std::string id(client_id);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      if (const auto g = ghosts_.find(id); g != ghosts_.end()) {
        if (g->second.owner && *g->second.owner != owner) {
          ++refused_;
          return tl::unexpected(Refusal::kNotOwner);
        }
        save_owner = !g->second.owner;  // invariant 4: claimed by its first attach
        ghosts_.erase(g);               // invariant 3: its floors are the new session's
      } else {
        save_owner = true;
      }
      it = sessions_.emplace(id, std::make_shared<Session>(id, std::string(owner), make())).first;
    } else if (it->second->owner != owner) {
      ++refused_;
      return tl::unexpected(Refusal::kNotOwner);
    }
    if (it->second->attached) return tl::unexpected(Refusal::kInUse);
    it->second->attached = true;
    s = it->second;
  }
  // Attached, so not expired meanwhile; before any floor of this connection,
  // so a store that holds floors of the session holds its owner too (a failed
  // write leaves it as a directory written before owners: invariant 4).
  if (save_owner && store_ != nullptr) (void)store_->put_session_owner(client_id, owner);
  return s;
}

void DurableSessions::detach(Session& s) {
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    s.attached = false;
    s.detached_at = std::chrono::steady_clock::now();
    // Every deadline is detached_at + ttl, so a new one is never earlier than
    // those the thread waits for: it needs waking only when it waits for none.
    wake = idle_;
  }
  if (wake) cv_.notify_one();
}

std::optional<std::chrono::steady_clock::time_point> DurableSessions::expire_locked(
    std::chrono::steady_clock::time_point now, std::vector<std::shared_ptr<Session>>& dead) {
  std::optional<std::chrono::steady_clock::time_point> next;
  const auto consider = [&](std::chrono::steady_clock::time_point since, const std::string& id) {
    const auto due = since + ttl_;
    if (due <= now) {
      if (store_ != nullptr) (void)store_->erase_session(id);  // a failure leaves floors: duplicates, never loss
      ++expired_;
      return true;
    }
    if (!next || due < *next) next = due;
    return false;
  };
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (!it->second->attached && consider(it->second->detached_at, it->first)) {
      dead.push_back(std::move(it->second));
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = ghosts_.begin(); it != ghosts_.end();) {
    it = consider(it->second.since, it->first) ? ghosts_.erase(it) : std::next(it);
  }
  return next;
}

void DurableSessions::expiry_loop() {
  std::vector<std::shared_ptr<Session>> dead;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const auto next = expire_locked(std::chrono::steady_clock::now(), dead);
    if (!dead.empty()) {
      lock.unlock();
      dead.clear();  // the trackers go outside mu_ (they fold into the QoS 1 totals)
      lock.lock();
      continue;  // a detach may have come meanwhile
    }
    idle_ = !next;
    if (next) {
      cv_.wait_until(lock, *next, [this] { return stopping_; });
    } else {
      cv_.wait(lock);  // woken by a detach or by stop; spurious wakeups only rescan
    }
    idle_ = false;
  }
}

SessionCounts DurableSessions::counts() const {
  std::lock_guard lock(mu_);
  SessionCounts c;
  for (const auto& [id, s] : sessions_) ++(s->attached ? c.attached : c.detached);
  c.detached += ghosts_.size();
  c.expired = expired_;
  c.refused = refused_;
  return c;
}

// The store keeps floor + 1, so that its 0 ("none kept") differs from a floor
// of 0 (a subscription made before the channel's first message).
std::optional<std::uint64_t> DurableSessions::saved_floor(std::string_view client_id, std::string_view channel) const {
  const std::uint64_t kept = store_ == nullptr ? 0 : store_->resume_floor(client_id, channel);
  if (kept == 0) return std::nullopt;
  return kept - 1;
}

void DurableSessions::save_floor(std::string_view client_id, std::string_view channel, std::uint64_t floor) {
  if (store_ != nullptr) (void)store_->put_resume_floor(client_id, channel, floor + 1);
}

}  // namespace ringcast::broker
