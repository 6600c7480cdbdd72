#include "broker/guarantees/durable_sessions.hpp"

#include <algorithm>
#include <vector>

#include "ringcast/broker/session_store.hpp"

namespace ringcast::broker {

DurableSessions::DurableSessions(SessionStore* store, std::chrono::milliseconds ttl) : store_(store), ttl_(ttl) {
  if (store_ != nullptr) {
    const auto now = std::chrono::steady_clock::now();
    for (std::string& id : store_->detached_clients()) ghosts_.emplace(std::move(id), now);
    store_->watch_taken([this](std::string_view client_id, std::uint64_t revision) { on_taken(client_id, revision); });
  }
  if (ttl_.count() > 0) expiry_ = std::thread([this] { expiry_loop(); });
}

DurableSessions::~DurableSessions() {
  if (store_ != nullptr) store_->watch_taken({});  // no on_taken() after this
  if (!expiry_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  expiry_.join();
}

tl::expected<std::shared_ptr<DurableSessions::Session>, DurableSessions::Refusal> DurableSessions::attach(
    std::string_view client_id, std::string_view owner, const std::function<std::unique_ptr<AckTracker>()>& make,
    std::function<void()> wake_holder) {
  // Invariant 4: the store names the owner, on every attach: in a cluster the
  // session may have been made, or taken, on another node since this one
  // last saw it. Outside mu_ (a round trip).
  std::optional<std::string> claimed = std::string(owner);
  if (store_ != nullptr) claimed = store_->claim(client_id, owner);
  std::shared_ptr<Session> s;
  {
    std::lock_guard lock(mu_);
    if (!claimed) return tl::unexpected(Refusal::kNoStore);
    if (*claimed != owner) {
      ++refused_;
      return tl::unexpected(Refusal::kNotOwner);
    }
    auto attached = attach_locked(std::string(client_id), owner, make);
    if (!attached) return attached;
    s = std::move(*attached);
    s->hold_revision.reset();
    s->taken_at = 0;
    s->wake_holder = std::move(wake_holder);
    s->taken.store(false, std::memory_order_relaxed);  // relaxed: its holder reads it on its own thread, later
  }
  // Invariant 1: the hold is recorded outside mu_ (a round trip).
  const std::optional<std::uint64_t> revision = store_ != nullptr ? store_->hold(client_id) : 0;
  std::function<void()> wake;
  {
    std::lock_guard lock(mu_);
    if (!revision) {
      s->attached = false;
      s->detached_at = std::chrono::steady_clock::now();
      s->wake_holder = nullptr;
      return tl::unexpected(Refusal::kNoStore);
    }
    s->hold_revision = *revision;
    wake = judge_locked(*s);
  }
  if (wake) wake();
  return s;
}

void DurableSessions::on_taken(std::string_view client_id, std::uint64_t revision) {
  std::function<void()> wake;
  {
    std::lock_guard lock(mu_);
    const auto it = sessions_.find(std::string(client_id));
    if (it == sessions_.end() || !it->second->attached) return;  // not held here: nothing to let go
    Session& s = *it->second;
    s.taken_at = std::max(s.taken_at, revision);
    wake = judge_locked(s);
  }
  if (wake) wake();  // outside mu_: the holder's wake-up takes its own lock
}

std::function<void()> DurableSessions::judge_locked(Session& s) {
  if (!s.hold_revision || s.taken_at <= *s.hold_revision)
    return nullptr;  // its record is the later one (or unknown yet)
  // release: pairs with the holder's acquire load after its wake-up.
  if (s.taken.exchange(true, std::memory_order_release)) return nullptr;
  ++taken_;
  return s.wake_holder;
}

tl::expected<std::shared_ptr<DurableSessions::Session>, DurableSessions::Refusal> DurableSessions::attach_locked(
    const std::string& id, std::string_view owner, const std::function<std::unique_ptr<AckTracker>()>& make) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    ghosts_.erase(id);  // invariant 3: its floors are the new session's
    it = sessions_.emplace(id, std::make_shared<Session>(id, std::string(owner), make())).first;
  } else if (it->second->owner != owner) {
    // Made here by another identity that the store has not heard of (a write
    // of its owner failed): this node's binding stands.
    ++refused_;
    return tl::unexpected(Refusal::kNotOwner);
  }
  if (it->second->attached) return tl::unexpected(Refusal::kInUse);
  it->second->attached = true;
  return it->second;
}

void DurableSessions::detach(Session& s) {
  {
    std::lock_guard lock(mu_);
    s.attached = false;
    s.detached_at = std::chrono::steady_clock::now();
    s.wake_holder = nullptr;
    // The expiry thread wakes at least every ttl / 2 (its refresh), sooner
    // than this deadline: it needs no waking.
  }
  // Its ttl counts from now in a store that expires by itself too.
  if (store_ != nullptr) store_->refresh(s.client_id);
}

std::optional<std::chrono::steady_clock::time_point> DurableSessions::expire_locked(
    std::chrono::steady_clock::time_point now, std::vector<std::shared_ptr<Session>>& dead) {
  std::optional<std::chrono::steady_clock::time_point> next;
  const auto consider = [&](std::chrono::steady_clock::time_point since, const std::string& id) {
    const auto due = since + ttl_;
    if (due <= now) {
      if (store_ != nullptr) store_->expire(id);
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
    it = consider(it->second, it->first) ? ghosts_.erase(it) : std::next(it);
  }
  return next;
}

void DurableSessions::expiry_loop() {
  std::vector<std::shared_ptr<Session>> dead;
  std::vector<std::string> attached;
  auto next_refresh = std::chrono::steady_clock::now() + ttl_ / 2;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const auto now = std::chrono::steady_clock::now();
    const auto next = expire_locked(now, dead);
    if (now >= next_refresh) {
      next_refresh = now + ttl_ / 2;
      for (const auto& [id, s] : sessions_) {
        if (s->attached && store_ != nullptr) attached.push_back(id);
      }
    }
    if (!dead.empty() || !attached.empty()) {
      lock.unlock();
      dead.clear();  // the trackers go outside mu_ (they fold into the QoS 1 totals)
      for (const std::string& id : attached) store_->refresh(id);
      attached.clear();
      lock.lock();
      continue;  // a detach may have come meanwhile
    }
    // Waking for the refresh at least every ttl / 2 also catches every
    // detach made meanwhile: its deadline is ttl away.
    cv_.wait_until(lock, next ? std::min(*next, next_refresh) : next_refresh, [this] { return stopping_; });
  }
}

SessionCounts DurableSessions::counts() const {
  std::lock_guard lock(mu_);
  SessionCounts c;
  for (const auto& [id, s] : sessions_) ++(s->attached ? c.attached : c.detached);
  c.detached += ghosts_.size();
  c.expired = expired_;
  c.refused = refused_;
  c.taken = taken_;
  return c;
}

std::optional<std::uint64_t> DurableSessions::saved_floor(std::string_view client_id, std::string_view channel) const {
  if (store_ == nullptr) return std::nullopt;
  return store_->floor(client_id, channel);
}

void DurableSessions::save_floor(std::string_view client_id, std::string_view channel, std::uint64_t floor) {
  if (store_ != nullptr) store_->put_floor(client_id, channel, floor);
}

}  // namespace ringcast::broker
